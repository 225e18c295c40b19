"""Throughput, MFU and memory-bandwidth utilisation, plus measured host-CPU peaks.

MFU = model FLOPs per token × tokens/s / peak FLOP/s. On an accelerator the peak comes from the
catalog (chip or device, at a stated precision). On a host CPU there is no catalog peak, so we use a
*measured* dense-matmul peak (``measure_cpu_matmul_peak``) and say so in ``peak_basis``.
"""

from __future__ import annotations

import timeit
from dataclasses import asdict, dataclass
from functools import lru_cache

import torch
from torch.utils import benchmark

from tpu_workbench.bench.workloads.steps import dtype_of


@dataclass(frozen=True)
class MeasuredPeak:
    """A measured peak with how it was obtained (so a record can carry it)."""

    value: float
    unit: str
    basis: str
    samples: list[float]

    def to_dict(self) -> dict:
        return asdict(self)


@lru_cache(maxsize=8)
def measure_cpu_matmul_peak(precision: str = "fp32", n: int = 1024, budget_s: float = 1.0) -> MeasuredPeak:
    """Dense n×n matmul FLOP/s on the host CPU with torch's current thread count (best block).

    The best (not median) block is used because a peak is an upper bound; cached per process.
    """
    dtype = dtype_of(precision)
    a = torch.randn(n, n, dtype=dtype)
    b = torch.randn(n, n, dtype=dtype)
    t = benchmark.Timer("a @ b", globals={"a": a, "b": b}, timer=timeit.default_timer)
    m = t.blocked_autorange(min_run_time=budget_s)
    flops = 2.0 * n**3
    samples = [flops / s for s in m.times]
    return MeasuredPeak(
        max(samples),
        "FLOP/s",
        f"measured host-CPU matmul peak: torch {precision} {n}x{n}, "
        f"{torch.get_num_threads()} threads, best of {len(samples)} blocks",
        samples,
    )


@lru_cache(maxsize=2)
def measure_cpu_memory_bandwidth(mbytes: int = 64, budget_s: float = 0.5) -> MeasuredPeak:
    """Host memory bandwidth from a large tensor copy (read + write bytes / time, best block)."""
    src = torch.ones(mbytes * 2**20 // 4, dtype=torch.float32)
    dst = torch.empty_like(src)
    t = benchmark.Timer("dst.copy_(src)", globals={"src": src, "dst": dst}, timer=timeit.default_timer)
    m = t.blocked_autorange(min_run_time=budget_s)
    moved = 2.0 * src.numel() * 4
    samples = [moved / s for s in m.times]
    return MeasuredPeak(
        max(samples),
        "B/s",
        f"measured host copy bandwidth: {mbytes} MiB fp32 copy_, best of {len(samples)} blocks",
        samples,
    )


def mfu(flops_per_token: float, tokens_per_s: float, peak_flops: float) -> float:
    """Model FLOP utilisation as a fraction (0..1 normally; >1 means a wrong peak or FLOP count)."""
    if peak_flops <= 0:
        raise ValueError("peak must be positive")
    return flops_per_token * tokens_per_s / peak_flops


def bandwidth_utilisation(bytes_per_step: float, step_s: float, bandwidth_bps: float) -> float:
    """Decode memory-bandwidth utilisation (MBU): bytes read per step / step time / peak bandwidth."""
    return bytes_per_step / step_s / bandwidth_bps
