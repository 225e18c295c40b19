"""Expressions shared by the torch_xla families (rank, world size, local rank)."""

from __future__ import annotations

import re

from ._helpers import RANK as _RANK_HELPER
from ._helpers import WORLD_SIZE as _WORLD_HELPER
from ._helpers import all_helpers

XM = "torch_xla.core.xla_model"
XR = "torch_xla.runtime"
#: The global rank and the world size: the process group's once it exists, torchrun's environment before.
RANK = f"{_RANK_HELPER}()"
WORLD = f"{_WORLD_HELPER}()"
LOCAL_RANK = 'int(os.environ.get("LOCAL_RANK", 0))'
DIST_EMITS = (
    "torch.distributed.get_rank",
    "torch.distributed.get_world_size",
    "torch.distributed.is_initialized",
)

_HELPER_NAMES = re.compile(r"\b(" + "|".join(re.escape(h.name) for h in all_helpers()) + r")\b")


def xm(*names: str) -> frozenset[str]:
    return frozenset(f"{XM}.{n}" for n in names)


def needs(ctx, text: str) -> None:
    """Ask for the imports and local helpers a generated snippet uses."""
    if "torch." in text:
        ctx.need_import("torch")
    if "os.environ" in text:
        ctx.need_import("os")
    for name in set(_HELPER_NAMES.findall(text)):
        ctx.need_helper(name)
