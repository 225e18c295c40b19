"""The project's import graph, built from the source with ``ast``: no import circles, and every import inside
a function says why it is lazy.

Rules (docs/architecture.md):
- module-level imports between the project's modules form no cycle;
- an import inside a function carries ``# lazy: <reason>`` with a reason from ``REASONS``: laziness has to be the
  point (keeping JAX out of ``import torch``, an optional dependency …), never hiding a circle;
- with function-level imports added, the only cycles are the ones in ``ALLOWED_LAZY_CYCLES``, each with its reason;
- the packages import each other only along the chain: ``migrate`` nothing of ours, ``backend`` nothing of
  ``migrate``/``workbench``.
"""

from __future__ import annotations

import ast
import json
import re
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# installed package -> repository folder (setup.py's PACKAGE_DIRS)
PACKAGES = {
    "tpu_workbench.migrate": "migrate",
    "tpu_workbench.backend": "backend",
    "tpu_workbench.bench": "workbench",
}
BARE = ("backend", "migrate", "workbench")

REASONS = {
    "startup": "runs inside `import torch` (autoload) or a CLI's start: import only when used",
    "jax": "keeps JAX (and the lowering tables that import it) out of `import torch` / `import backend`",
    "optional": "an optional dependency or subsystem (torch.distributed, transformers, ipywidgets, IPython …)",
    "heavy": "a large import (matplotlib, pandas, torch in a torch-free tool) paid only by the command that needs it",
    "subprocess": "runs in a child process or after a fork/spawn decides what it needs",
    "private": "a private third-party module, imported where it is used",
}

# (importer, imported): why the circle through this lazy edge is intended.
ALLOWED_LAZY_CYCLES: dict[tuple[str, str], str] = {}

_LAZY = re.compile(r"#\s*lazy:\s*(\w+)")


def _module_name(package: str, folder: str, path: Path) -> str:
    parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([package, *parts])


def _modules() -> dict[str, Path]:
    out = {}
    for pkg, folder in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            out[_module_name(pkg, folder, path)] = path
    return out


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The project module an imported dotted name lands in (longest existing prefix)."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        cand = ".".join(parts[:i])
        if cand in MODULES:
            return cand
    return None


class _Imports(ast.NodeVisitor):
    def __init__(self, module: str, path: Path) -> None:
        self.module, self.is_pkg = module, path.name == "__init__.py"
        self.lines = path.read_text().splitlines()
        self.depth = 0
        self.type_checking = 0
        self.edges: list[tuple[str, int, bool, str | None]] = []  # (target, line, lazy, reason)
        self.unannotated: list[int] = []
        self.typing_edges: list[str] = []  # imports under `if TYPE_CHECKING:`

    def _base(self, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        pkg = self.module.split(".") if self.is_pkg else self.module.split(".")[:-1]
        pkg = pkg[: len(pkg) - (node.level - 1)]
        return ".".join([*pkg, node.module] if node.module else pkg)

    def _add(self, names: list[str], node: ast.stmt) -> None:
        if self.type_checking:
            self.typing_edges += [t for n in names if (t := _resolve(n)) is not None and t != self.module]
            return
        text = " ".join(self.lines[node.lineno - 1 : node.end_lineno])
        m = _LAZY.search(text)
        reason = m.group(1) if m else None
        if self.depth and reason is None:
            self.unannotated.append(node.lineno)
        for n in names:
            target = _resolve(n)
            # a submodule importing its own package adds nothing: Python imported the package first anyway
            if target is not None and target != self.module and not self.module.startswith(target + "."):
                self.edges.append((target, node.lineno, bool(self.depth), reason))

    def visit_Import(self, node: ast.Import) -> None:  # noqa: N802 - ast protocol
        self._add([a.name for a in node.names], node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:  # noqa: N802
        base = self._base(node)
        self._add([f"{base}.{a.name}" if base else a.name for a in node.names], node)

    def _scope(self, node: ast.AST) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _scope  # noqa: N815

    def visit_If(self, node: ast.If) -> None:  # noqa: N802
        if "TYPE_CHECKING" in ast.unparse(node.test):
            self.type_checking += 1
            for s in node.body:
                self.visit(s)
            self.type_checking -= 1
            for s in node.orelse:
                self.visit(s)
        else:
            self.generic_visit(node)


def _scan() -> dict[str, _Imports]:
    out = {}
    for mod, path in MODULES.items():
        v = _Imports(mod, path)
        v.visit(ast.parse(path.read_text(), str(path)))
        out[mod] = v
    return out


SCAN = _scan()


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    import sys

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for v in sorted(MODULES):
            if v not in index:
                strong(v)
    finally:
        sys.setrecursionlimit(limit)
    return out


def _graph(include_lazy: bool, skip: set[tuple[str, str]] = frozenset()) -> dict[str, set[str]]:
    g: dict[str, set[str]] = defaultdict(set)
    for mod, v in SCAN.items():
        for target, _, lazy, _ in v.edges:
            if (lazy and not include_lazy) or (mod, target) in skip:
                continue
            g[mod].add(target)
    return g


def test_module_level_imports_form_no_cycle() -> None:
    assert _cycles(_graph(include_lazy=False)) == []


def test_function_level_imports_say_why_they_are_lazy() -> None:
    missing = [f"{MODULES[m].relative_to(ROOT)}:{line}" for m, v in SCAN.items() for line in v.unannotated]
    assert not missing, (
        "imports inside functions need '# lazy: <reason>' (reasons: "
        + ", ".join(REASONS)
        + "); or move them to "
        "the top of the module:\n" + "\n".join(missing)
    )
    bad = [
        f"{MODULES[m].relative_to(ROOT)}:{line} ({reason})"
        for m, v in SCAN.items()
        for _, line, lazy, reason in v.edges
        if lazy and reason is not None and reason not in REASONS
    ]
    assert not bad, "unknown lazy reasons:\n" + "\n".join(bad)


def test_type_checking_imports_hide_no_cycle() -> None:
    """An import kept under ``if TYPE_CHECKING:`` to dodge a circle is still a circle between the modules' ideas
    (it was one between migrate.report and migrate.results): with those edges added there is none."""
    g = _graph(include_lazy=True, skip=set(ALLOWED_LAZY_CYCLES))
    for mod, v in SCAN.items():
        g[mod].update(v.typing_edges)
    assert _cycles(g) == [], "import circles through TYPE_CHECKING imports"


def test_lazy_imports_hide_no_cycle_except_the_allowed_ones() -> None:
    cycles = _cycles(_graph(include_lazy=True, skip=set(ALLOWED_LAZY_CYCLES)))
    assert cycles == [], f"import circles through function-level imports: {cycles}"


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


@pytest.mark.parametrize(
    ("pkg", "forbidden"),
    [
        ("tpu_workbench.migrate", ("tpu_workbench.backend", "tpu_workbench.bench")),
        ("tpu_workbench.backend", ("tpu_workbench.migrate", "tpu_workbench.bench")),
    ],
)
def test_packages_import_along_the_chain(pkg: str, forbidden: tuple[str, ...]) -> None:
    bad = [
        (m, t) for m, v in SCAN.items() if _package(m) == pkg for t, *_ in v.edges if _package(t) in forbidden
    ]
    assert not bad


def _bare_imports(path: Path) -> list[str]:
    """Imports of the repository folders' bare names (``import backend``, ``from workbench.x import y``)."""
    try:
        tree = ast.parse(path.read_text(), str(path))
    except SyntaxError:
        return []
    out = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        out += [f"{path.relative_to(ROOT)}:{node.lineno}: {n}" for n in names if n.split(".")[0] in BARE]
    return out


@pytest.mark.slow  # (quick loop: seconds; runs in the full suite)
def test_nothing_imports_the_bare_folder_names() -> None:
    """Our code, tests, benchmarks and notebooks import ``tpu_workbench.*`` only: a bare ``backend`` would be a
    user's package, or ours imported twice under two names."""
    files = [p for p in ROOT.rglob("*.py") if not {".git", "examples", "fixtures", "golden"} & set(p.parts)]
    bad = [hit for p in files for hit in _bare_imports(p)]
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(nb.read_text())["cells"]
        code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        bad += [
            f"{nb.name}: {line.strip()}"
            for line in code.splitlines()
            if line.strip().startswith(("import ", "from ")) and line.split()[1].split(".")[0] in BARE
        ]
    assert not bad, "\n".join(bad)


def test_the_scanner_sees_a_planted_cycle(tmp_path: Path) -> None:
    """The checks above can fail: a two-module circle is found."""
    edges = {"a": {"b"}, "b": {"a"}}
    global MODULES
    saved = MODULES
    MODULES = {"a": tmp_path / "a.py", "b": tmp_path / "b.py"}
    try:
        assert _cycles(edges) == [["a", "b"]]
    finally:
        MODULES = saved
