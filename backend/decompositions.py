"""PyTorch's own decompositions, as the dispatcher's second choice after a lowering."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from tpu_workbench.backend import _torch_private as private


@functools.cache
def _table() -> dict:
    full, core = private.decomposition_tables()
    table = dict(full)
    table.update(core)
    return table


def decomposition_for(func: Any) -> Callable | None:
    """A PyTorch decomposition for ``func`` (core ATen table first, then the full table)."""
    return _table().get(func)
