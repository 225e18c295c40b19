"""Time one callable: first call (compile) apart, warm-up excluded, device synchronised, robust stats.

Built on ``torch.utils.benchmark.Timer.adaptive_autorange``: it picks a block size so timer overhead is
negligible, then repeats blocks until IQR/median < ``threshold`` or the time budget is spent. Its default
timer calls ``torch.accelerator.synchronize()`` before each clock read, which covers CUDA and the
PrivateUse1 "tpu" device; on cpu we pass the plain clock so a present accelerator is not synced for
nothing. Each sample is the mean time per call within one block (``Measurement.times``).
"""

from __future__ import annotations

import statistics
import time
import timeit
from collections.abc import Callable
from dataclasses import asdict, dataclass

from torch.utils import benchmark

from tpu_workbench.bench.devices import synchronize


@dataclass(frozen=True)
class Timing:
    """Step-time statistics in seconds. ``first_call_s`` includes any compilation;
    ``compile_s`` = first call − median when the step was compiled (else None)."""

    median_s: float
    iqr_s: float
    mean_s: float
    samples_s: list[float]
    number_per_run: int
    first_call_s: float
    compile_s: float | None
    warmup_calls: int
    method: str

    @property
    def relative_iqr(self) -> float:
        return self.iqr_s / self.median_s if self.median_s else float("nan")

    def to_dict(self) -> dict:
        return asdict(self)


def _quantiles(samples: list[float]) -> tuple[float, float]:
    if len(samples) < 2:
        return samples[0], samples[0]
    q = statistics.quantiles(samples, n=4, method="inclusive")
    return q[0], q[2]


def time_callable(
    fn: Callable[[], object],
    *,
    device: str = "cpu",
    budget_s: float = 2.0,
    warmup_calls: int = 1,
    threshold: float = 0.1,
    compiled: bool = False,
) -> Timing:
    """Measure ``fn`` on ``device``.

    The first call is timed on its own (it carries compilation and allocation); ``warmup_calls - 1``
    further untimed calls follow; then ``adaptive_autorange`` runs for at most ``budget_s`` seconds.
    """
    if budget_s <= 0:
        raise ValueError("budget_s must be positive")
    synchronize(device)
    t0 = time.perf_counter()
    fn()
    synchronize(device)
    first = time.perf_counter() - t0
    for _ in range(max(warmup_calls - 1, 0)):
        fn()
    synchronize(device)
    kwargs = {"timer": timeit.default_timer} if device.split(":")[0] == "cpu" else {}
    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn}, **kwargs)
    m = timer.adaptive_autorange(
        threshold=threshold, min_run_time=min(0.1, budget_s / 4), max_run_time=budget_s
    )
    samples = [float(t) for t in m.times]
    q1, q3 = _quantiles(samples)
    median = statistics.median(samples)
    return Timing(
        median_s=median,
        iqr_s=q3 - q1,
        mean_s=statistics.fmean(samples),
        samples_s=samples,
        number_per_run=int(m.number_per_run),
        first_call_s=first,
        compile_s=max(first - median, 0.0) if compiled else None,
        warmup_calls=max(warmup_calls, 1),
        method=f"torch.utils.benchmark.Timer.adaptive_autorange(threshold={threshold}, max_run_time={budget_s})",
    )
