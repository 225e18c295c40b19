"""Per-architecture corrections where the generic shrinker or input builder is wrong.

Each entry says what differs from the generic rule and why, in the config's own terms. ``config`` holds
dotted-path assignments applied after the generic shrink (``"vision_config.depth": 2``); ``inputs`` holds
input overrides read by ``workbench.validate.inputs`` (sequence length, image size, extra tensors).
Architectures that cannot be built offline from a config at all are listed in ``UNBUILDABLE`` with the
reason, and reported as harness failures, never as passes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Family:
    """Corrections for one model_type."""

    config: dict[str, Any] = field(default_factory=dict)
    init: dict[str, Any] = field(default_factory=dict)
    inputs: dict[str, Any] = field(default_factory=dict)
    why: str = ""


OVERRIDES: dict[str, Family] = {}

UNBUILDABLE: dict[str, str] = {}


def family_for(model_type: str) -> Family:
    return OVERRIDES.get(model_type, Family())
