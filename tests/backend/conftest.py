"""Shared fixtures for the backend tests: the device must be registered (autoload does it)."""

from __future__ import annotations

import pytest
import torch

from tpu_workbench import backend


@pytest.fixture(scope="session", autouse=True)
def _registered() -> None:
    assert backend.register(), "the tpu device must register in the test process"


def to_cpu(x: torch.Tensor) -> torch.Tensor:
    return x.detach().cpu()
