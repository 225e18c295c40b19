"""libcst's scope analysis (ScopeProvider), at a fraction of its cost, with the very same answers.

``MetadataWrapper(m).resolve(ScopeProvider)`` spends most of its time in libcst's traversal, not in the
analysis: ``node.visit(visitor)`` rebuilds every node it passes, even for a read-only visitor, and the
wrapper walks the whole tree twice more (once per provider batch) after each provider's own walk. Here
the same provider classes run their own visitors (libcst's ExpressionContextVisitor and ScopeVisitor, the
same code, hooks and order), but every ``node.visit(visitor)`` of a read-only visitor goes through
:func:`tpu_workbench.migrate._walk.visit`, which calls the same hooks in the same order without rebuilding
anything, and the two empty batch walks are skipped. Transformers and other threads keep libcst's own
traversal. The differential tests (tests/migrate/test_flow_scopes.py) compare every node's scope, every
assignment's references and every qualified name with libcst's own provider.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import libcst as cst
from libcst import CSTVisitor
from libcst.metadata import ExpressionContextProvider, Scope, ScopeProvider

from . import _walk as walk

_libcst_visit = cst.CSTNode.visit
_lock = threading.Lock()
_state = threading.local()
_installed = 0


def _visit(self: cst.CSTNode, visitor: object) -> object:
    """CSTNode.visit: the fast walk for a read-only visitor of a thread inside :func:`fast_visits`."""
    if getattr(_state, "on", False) and isinstance(visitor, CSTVisitor):
        return walk.visit(self, visitor)
    return _libcst_visit(self, visitor)


@contextmanager
def fast_visits() -> Iterator[None]:
    """Within the block, this thread's read-only libcst visits skip libcst's node rebuilding."""
    global _installed
    with _lock:
        if _installed == 0:
            cst.CSTNode.visit = _visit  # type: ignore[method-assign]
        _installed += 1
    was = getattr(_state, "on", False)
    _state.on = True
    try:
        yield
    finally:
        _state.on = was
        with _lock:
            _installed -= 1
            if _installed == 0:
                cst.CSTNode.visit = _libcst_visit  # type: ignore[method-assign]


def scopes(module: cst.Module) -> Mapping[cst.CSTNode, Scope | None]:
    """``MetadataWrapper(module, unsafe_skip_copy=True).resolve(ScopeProvider)``: node -> its scope."""
    contexts = ExpressionContextProvider()
    provider = ScopeProvider()
    provider.metadata = {ExpressionContextProvider: _run(contexts, module, {})}
    return _run(provider, module, provider.metadata)


def _run(provider: object, module: cst.Module, metadata: dict) -> Mapping:
    """One batchable provider over ``module``: its visit_Module does the whole analysis (libcst then walks
    the tree once more for the other batch members' hooks; these providers have none)."""
    provider.metadata = metadata  # type: ignore[attr-defined]
    with fast_visits():
        provider.visit_Module(module)  # type: ignore[attr-defined]
    return provider._computed  # type: ignore[attr-defined]
