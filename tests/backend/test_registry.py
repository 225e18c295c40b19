"""One owner per lowering: the registry refuses a silent second registration for an overload."""

from __future__ import annotations

import pytest
import torch

from tpu_workbench.backend import ops
from tpu_workbench.backend.ops import registry
from tpu_workbench.backend.ops.registry import REGISTRY, DuplicateLoweringError, lower

aten = torch.ops.aten


@pytest.fixture
def scratch_op() -> object:
    """An overload with no lowering, removed from the registry again afterwards."""
    op = aten.cosine_embedding_loss.default
    assert op not in REGISTRY
    yield op
    REGISTRY.pop(op, None)
    registry.OVERRIDES.pop(op, None)


def test_a_second_lowering_for_an_overload_is_refused(scratch_op: object) -> None:
    def first(x: object) -> object:
        return x

    def second(x: object) -> object:
        return x

    lower(scratch_op)(first)
    with pytest.raises(DuplicateLoweringError, match=r"test_registry\.py|first"):
        lower(scratch_op)(second)
    assert REGISTRY[scratch_op].fn is first


def test_override_says_why(scratch_op: object) -> None:
    lower(scratch_op)(lambda x: x)

    def better(x: object) -> object:
        return x

    lower(scratch_op, override="the first one ignored NaN")(better)
    assert REGISTRY[scratch_op].fn is better
    assert registry.OVERRIDES[scratch_op] == "the first one ignored NaN"


def test_the_loaded_families_have_one_owner_per_overload() -> None:
    ops.load()
    assert registry.OVERRIDES == {}, registry.OVERRIDES
    assert all(low.owner for low in REGISTRY.values())  # every lowering names where it came from


def test_median_has_one_lowering_with_nan_semantics() -> None:
    x = torch.tensor([3.0, float("nan"), 1.0, 2.0])
    assert REGISTRY[aten.median.default].owner == "tpu_workbench.backend.ops.reduction.median"
    assert torch.isnan(x.to("tpu").median().cpu())
    assert x.median().isnan()
