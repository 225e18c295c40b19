"""Lowerings by family. ``load()`` imports them all (filling ``tpu_workbench.backend.ops.registry.REGISTRY``); it is
not done on package import, so ``from backend.ops.registry import lower`` stays free of JAX."""

from __future__ import annotations

import importlib

FAMILIES = (
    "attention", "backward", "factory", "foreach", "indexing", "linalg", "linalg_decomp", "linalg_solve", "linear", "losses", "misc", "nn",
    "optim", "pointwise", "prims", "random", "reduction", "rnn", "sampling", "shape", "special",
)  # fmt: skip


def load() -> None:
    """Import every lowering family (imports JAX, through jax_module first: it leaves the random streams be)."""
    from tpu_workbench.backend._jax import jax_module  # lazy: jax

    jax_module()
    for name in FAMILIES:
        importlib.import_module(f"tpu_workbench.backend.ops.{name}")
