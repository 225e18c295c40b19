"""Projected throughput, MFU and cost for catalog chips at any scale (model ``workbench-roofline-comm``).

Modules, one job each:

- :mod:`~workbench.projection.assumptions` - the inputs that are not catalog facts, with reasons;
  only ``gemm_efficiency`` is fitted (on one named published point).
- :mod:`~workbench.projection.layout` - parallel layouts (dp / fsdp / tp / ep, slices = hybrid sharding).
- :mod:`~workbench.projection.block` - the layer's wiring where it is not the Llama layer (plain 2-matrix
  MLP, attention and MLP in parallel), with its parameter and FLOP counts.
- :mod:`~workbench.projection.work` - the kernels of one step and their rooflines (dense, grouped MoE and
  attention matmuls with MXU tile fill; elementwise passes).
- :mod:`~workbench.projection.remat` - remat policies: what is recomputed.
- :mod:`~workbench.projection.topology` - collectives on switch / full-mesh / torus fabrics and DCN.
- :mod:`~workbench.projection.memory` - HBM fit per device (TPU v7: per TensorCore die).
- :mod:`~workbench.projection.model` - :func:`project`.
- :mod:`~workbench.projection.calibration` - fit on one published point, validate on the others.
"""

from __future__ import annotations

from tpu_workbench.bench.projection.assumptions import CALIBRATED_GEMM_EFFICIENCY, REASONS, Assumptions
from tpu_workbench.bench.projection.calibration import vs_published  # noqa: E402 - after the model it validates
from tpu_workbench.bench.projection.layout import LAYOUTS, Layout, resolve_layout
from tpu_workbench.bench.projection.model import (
    BYTES,
    MODEL_NAME,
    MODEL_VERSION,
    PHASES,
    project,
    remat_policies,
)
from tpu_workbench.bench.projection.report import format_table  # noqa: E402
from tpu_workbench.bench.projection.sweeps import decode_sweep, scaling_curve


def projection_vs_published(*, assumptions: Assumptions | None = None, catalog=None):
    """DataFrame of every published point beside the projection (calibration, validation and unanchored
    rows apart); see :func:`tpu_workbench.bench.projection.calibration.vs_published`."""
    return vs_published(assumptions=assumptions, catalog=catalog)


def format_vs_published(table) -> str:
    """Text of :func:`projection_vs_published` (see :func:`tpu_workbench.bench.projection.report.format_table`)."""
    return format_table(table)


__all__ = [
    "Assumptions",
    "BYTES",
    "CALIBRATED_GEMM_EFFICIENCY",
    "LAYOUTS",
    "Layout",
    "MODEL_NAME",
    "MODEL_VERSION",
    "PHASES",
    "REASONS",
    "decode_sweep",
    "format_vs_published",
    "project",
    "projection_vs_published",
    "remat_policies",
    "resolve_layout",
    "scaling_curve",
]
