"""Sweeps of :func:`~workbench.projection.model.project`: chip counts (scaling) and decode batch sizes."""

from __future__ import annotations

from tpu_workbench.bench.catalog import Chip
from tpu_workbench.bench.projection.model import project
from tpu_workbench.bench.results import Record
from tpu_workbench.bench.workloads.config import DecoderConfig


def scaling_curve(
    chip: Chip | str,
    config: DecoderConfig | str,
    phase: str = "train",
    layout: str = "fsdp",
    chips: tuple[int, ...] = (1, 8, 64, 256, 1024, 4096, 8192),
    **kwargs,
) -> list[Record]:
    """Projected records from 1 chip to thousands; each record says whether it fits (``extra['fits_in_hbm']``)."""
    return [project(chip, config, phase, n, layout, **kwargs) for n in chips]


def decode_sweep(
    chip: Chip | str,
    config: DecoderConfig | str,
    *,
    n_chips: int = 8,
    layout: str = "tp",
    batches: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256),
    seq: int = 4096,
    **kwargs,
) -> list[Record]:
    """Decode batch sweep: the throughput-per-chip vs tokens/s-per-user trade-off (Pareto front)."""
    return [project(chip, config, "decode", n_chips, layout, batch=b, seq=seq, **kwargs) for b in batches]
