"""Measure workloads on present devices and turn timings into records with full provenance."""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import torch
from torch.utils.flop_counter import FlopCounterMode
from tqdm.auto import tqdm

from tpu_workbench.bench import cost as costmod
from tpu_workbench.bench import flops as flopsmod
from tpu_workbench.bench.catalog import Catalog, Chip, load_catalog
from tpu_workbench.bench.devices import DeviceInfo, check_device, describe_device
from tpu_workbench.bench.errors import WorkbenchError, unknown
from tpu_workbench.bench.memory import MemoryPeak, peak_memory
from tpu_workbench.bench.metrics import (
    bandwidth_utilisation,
    measure_cpu_matmul_peak,
    measure_cpu_memory_bandwidth,
    mfu,
)
from tpu_workbench.bench.provenance import git_revision, host_info, now_utc, versions
from tpu_workbench.bench.results import Record, append_records
from tpu_workbench.bench.timing import Timing, time_callable
from tpu_workbench.bench.workloads import (
    PHASES,
    PRESETS,
    VISION_PHASES,
    VISION_WORKLOADS,
    Step,
    decoder_step,
    vision_step,
    workload_names,
)
from tpu_workbench.bench.workloads.config import check_context

DEFAULT_BUDGET_S = 2.0


def check_sizes(*, batch: object = 1, seq: object = 1, budget_s: object = 1.0) -> None:
    """Refuse sizes no run can have, before anything is built: a record of batch 0 is never written."""
    for name, value in (("batch", batch), ("seq", seq)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise WorkbenchError(f"{name} must be an integer >= 1, got {value!r}")
    if isinstance(budget_s, bool) or not isinstance(budget_s, int | float) or not budget_s > 0:
        raise WorkbenchError(f"budget_s must be a number > 0, got {budget_s!r}")


def _physical_memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def check_step_memory(workload: str, batch: int, seq: int) -> None:
    """Refuse a step whose logits alone (batch x seq x vocab fp32 floats, a lower bound of what a step holds)
    would not fit in half the host's memory: such a run swaps or is killed rather than measured."""
    cfg = PRESETS.get(workload)
    total = _physical_memory_bytes()
    if cfg is None or total is None:
        return
    need = batch * seq * cfg.vocab * 4
    if need > total // 2:
        raise WorkbenchError(
            f"batch {batch} x seq {seq} of {workload} needs at least {need / 2**30:,.1f} GiB for its logits "
            f"alone; this host has {total / 2**30:,.1f} GiB: use a smaller --batch or --seq"
        )


def _resolve_chip(info: DeviceInfo, chip: str | None, catalog: Catalog) -> Chip | None:
    """Catalog chip for the device: None for a host CPU or an emulated TPU (their peak is measured)."""
    if info.device == "cpu" or info.is_emulated:
        if chip:
            raise WorkbenchError(
                f"device {info.device!r} here is {info.name!r}, not a catalog chip; its MFU is "
                "taken against a measured host-CPU matmul peak, so --chip does not apply"
            )
        return None
    if chip:
        return catalog.chip(chip)
    if info.chip:
        return catalog.chip(info.chip)
    raise WorkbenchError(
        f"device {info.name!r} matches no catalog chip; pass chip=... (one of: "
        f"{', '.join(catalog.names())}) or add it with a catalog file"
    )


def _measured_source(info: DeviceInfo, extra: dict | None = None) -> dict:
    return {
        "kind": "measured",
        "host": host_info(),
        "versions": versions(),
        "git_revision": git_revision(),
        "date": now_utc(),
        "device": info.device,
        "device_name": info.name,
        "platform": info.platform,
        "emulated": info.is_emulated,
        **(extra or {}),
    }


def _count_flops(fn: Callable[[], object]) -> float:
    with FlopCounterMode(display=False) as counter:
        fn()
    return float(counter.get_total_flops())


@dataclass
class _Work:
    step: Step
    flops_per_token: float
    convention: str
    config: dict


def _record(
    work: _Work,
    timing: Timing,
    info: DeviceInfo,
    chip: Chip | None,
    *,
    workload: str,
    phase: str,
    precision: str,
    batch: int | None,
    seq: int | None,
    compiled: bool,
    tokens_kind: str,
    memory: MemoryPeak,
) -> Record:
    step = work.step
    tps = step.tokens / timing.median_s
    devices_per_chip = chip.devices_per_chip if chip else 1
    if chip is None:
        peak = measure_cpu_matmul_peak(precision)
        peak_flops, peak_basis = peak.value, peak.basis
        peak_extra = {"peak_samples_flops": peak.samples}
    else:
        peak_flops = chip.peak(precision, per="device")
        peak_basis = f"catalog {chip.name} {precision} dense peak per device (chip/{devices_per_chip})"
        peak_extra = {}
    achieved = work.flops_per_token * tps
    rec_mbu = bw_basis = None
    extra: dict = {"per_chip_assumes": "all devices of the chip run alike"} if devices_per_chip > 1 else {}
    extra.update(peak_extra)
    extra.update({f"memory_{k}": v for k, v in memory.extra.items()})
    if phase == "decode" and "weight_bytes" in step.info:
        bytes_per_step = step.info["weight_bytes"] + step.info["kv_bytes_per_step"]
        if chip is None:
            bw = measure_cpu_memory_bandwidth()
            bw_value, bw_basis = bw.value, bw.basis
        else:
            bw_value = chip.hbm_bw_gbps * 1e9 / devices_per_chip
            bw_basis = f"catalog {chip.name} HBM bandwidth per device"
        rec_mbu = bandwidth_utilisation(bytes_per_step, timing.median_s, bw_value)
        extra["bytes_per_step"] = bytes_per_step
    per_chip = tps * devices_per_chip
    return Record(
        provenance="measured",
        workload=workload,
        phase=phase,
        device=info.device,
        platform=info.platform,
        device_name=info.name,
        chip=chip.name if chip else None,
        precision=precision,
        batch=batch,
        seq=seq,
        compiled=compiled,
        n_chips=1 / devices_per_chip,
        n_devices=1,
        tokens_kind=tokens_kind,
        unit=step.unit,
        tokens_per_s=tps,
        tokens_per_s_per_device=tps,
        tokens_per_s_per_chip=per_chip if chip else None,
        output_tokens_per_s=step.output_tokens / timing.median_s,
        tokens_per_s_per_user=(1.0 / timing.median_s) if phase == "decode" else None,
        step_median_s=timing.median_s,
        step_iqr_s=timing.iqr_s,
        step_mean_s=timing.mean_s,
        step_samples_s=timing.samples_s,
        number_per_run=timing.number_per_run,
        first_call_s=timing.first_call_s,
        compile_s=timing.compile_s,
        timing_method=timing.method,
        flops_per_token=work.flops_per_token,
        flop_convention=work.convention,
        achieved_tflops=achieved / 1e12,
        mfu=mfu(work.flops_per_token, tps, peak_flops),
        peak_tflops=peak_flops / 1e12,
        peak_basis=peak_basis,
        mbu=rec_mbu,
        bandwidth_basis=bw_basis,
        peak_memory_bytes=memory.bytes,
        peak_memory_basis=memory.basis or None,
        cost=[c.to_dict() for c in costmod.cost_lines(chip.prices, per_chip)] if chip else [],
        energy=costmod.energy(chip, per_chip) if chip else {},
        config=work.config,
        source=_measured_source(info),
        extra=extra,
        created=now_utc(),
    )


def run_benchmark(
    workload: str,
    phase: str,
    device: str,
    *,
    compiled: bool = False,
    batch: int = 4,
    seq: int = 128,
    precision: str = "fp32",
    budget_s: float = DEFAULT_BUDGET_S,
    convention: str = "palm",
    chip: str | None = None,
    compile_backend: str | None = None,
    catalog: Catalog | None = None,
    eager: str | None = None,
) -> Record:
    """Build ``workload`` for ``phase`` on ``device``, time it, and return a measured Record.

    ``eager`` ("strict" or "fused"; uncompiled "tpu" runs only, default strict) is the device's eager mode:
    fused eager records the step's ops and runs them as one cached XLA program.

    MFU is against the catalog peak of the device's chip at ``precision``; on a host CPU, and on a
    "tpu" that JAX runs on the CPU, it is against a measured host-CPU matmul peak (``peak_basis`` says
    which). Decode records also carry memory-bandwidth utilisation (``mbu``).
    """
    if workload not in workload_names():
        raise WorkbenchError(unknown("workload", workload, workload_names()))
    check_sizes(batch=batch, seq=seq, budget_s=budget_s)
    valid_phases = VISION_PHASES if workload in VISION_WORKLOADS else PHASES
    if phase not in valid_phases:
        raise WorkbenchError(unknown(f"phase for {workload}", phase, valid_phases))
    kind = check_device(device)
    eager = _check_eager(eager, device, compiled)
    catalog = catalog or load_catalog()
    info = describe_device(kind, catalog)
    the_chip = _resolve_chip(info, chip, catalog)
    with _eager_mode(eager):
        rec = _measure(
            workload,
            phase,
            device,
            compiled=compiled,
            batch=batch,
            seq=seq,
            precision=precision,
            budget_s=budget_s,
            convention=convention,
            compile_backend=compile_backend,
            info=info,
            the_chip=the_chip,
            fused=eager == "fused",
        )
    rec.eager_mode = eager
    if eager == "fused":
        rec.extra["fused_eager"] = FUSED_NOTE
    return rec


EAGER_MODES = ("strict", "fused")
# fused eager runs a step's graph op by op the first two times it sees it and compiles it the third, so the
# timed calls start after that (otherwise a short budget times compilations)
FUSED_WARMUP_CALLS = 4
FUSED_NOTE = (
    "each step ends at torch.accelerator.synchronize(), its materialisation point (a training script's "
    "loss.item()); without one, consecutive steps fuse into ever new graphs"
)
_EAGER_NAMES = {"strict": "DEFER_NEVER", "fused": "DEFER_AND_FUSE"}


def _check_eager(eager: str | None, device: str, compiled: bool) -> str | None:
    """The eager mode a run records: "strict" unless asked otherwise for uncompiled "tpu" runs, else None."""
    if eager is not None and eager not in EAGER_MODES:
        raise WorkbenchError(unknown("eager mode", eager, EAGER_MODES))
    applies = device.split(":")[0] == "tpu" and not compiled
    if eager is not None and eager != "strict" and not applies:
        raise WorkbenchError(
            f"eager mode {eager!r} applies to uncompiled runs on 'tpu' only "
            f"(this run: device {device!r}, compiled={compiled})"
        )
    return (eager or "strict") if applies else None


def _eager_mode(eager: str | None):
    """A context that runs the block in the device's eager mode (nothing for other devices)."""
    if eager is None:
        return contextlib.nullcontext()
    return torch.tpu.set_eager_mode(_EAGER_NAMES[eager])


def _measure(
    workload: str,
    phase: str,
    device: str,
    *,
    compiled: bool,
    batch: int,
    seq: int,
    precision: str,
    budget_s: float,
    convention: str,
    compile_backend: str | None,
    info: DeviceInfo,
    the_chip: Chip | None,
    fused: bool = False,
) -> Record:
    if workload in VISION_WORKLOADS:
        vcfg = VISION_WORKLOADS[workload]
        step = vision_step(
            vcfg,
            phase,
            device,
            batch=batch,
            precision=precision,
            compiled=compiled,
            compile_backend=compile_backend,
        )
        per_token = _count_flops(vision_step(vcfg, phase, "cpu", batch=batch).fn) / batch
        work = _Work(step, per_token, "flop_counter", vcfg.to_dict())
        seq_out = None
    else:
        cfg = PRESETS[workload]
        step = decoder_step(
            cfg,
            phase,
            device,
            batch=batch,
            seq=seq,
            precision=precision,
            compiled=compiled,
            compile_backend=compile_backend,
        )
        work = _Work(
            step, flopsmod.flops_per_token(cfg, phase, seq, convention=convention), convention, cfg.to_dict()
        )
        seq_out = seq
    with peak_memory(device) as memory:
        fn = step.fn
        if fused:

            def fn() -> None:
                step.fn()
                torch.accelerator.synchronize()

        timing = time_callable(
            fn,
            device=device,
            budget_s=budget_s,
            compiled=compiled,
            warmup_calls=FUSED_WARMUP_CALLS if fused else 1,
        )
    kind_of_tokens = "images" if step.unit == "images" else ("output" if phase == "decode" else "total")
    return _record(
        work,
        timing,
        info,
        the_chip,
        workload=workload,
        phase=phase,
        precision=precision,
        batch=batch,
        seq=seq_out,
        compiled=compiled,
        tokens_kind=kind_of_tokens,
        memory=memory,
    )


def benchmark_callable(
    fn: Callable[[], object],
    *,
    tokens_per_call: int,
    device: str = "cpu",
    name: str = "custom",
    phase: str = "custom",
    flops_per_call: float | None = None,
    output_tokens_per_call: int = 0,
    precision: str = "fp32",
    budget_s: float = DEFAULT_BUDGET_S,
    compiled: bool = False,
    chip: str | None = None,
    unit: str = "tokens",
    config: dict | None = None,
    catalog: Catalog | None = None,
) -> Record:
    """Benchmark the user's own step function (a zero-argument callable doing one step on ``device``).

    FLOPs per call default to ``torch.utils.flop_counter`` over one extra call (convention
    "flop_counter"); pass ``flops_per_call`` to use your own count ("user").
    """
    if not isinstance(tokens_per_call, int) or tokens_per_call < 1:
        raise WorkbenchError(f"tokens_per_call must be an integer >= 1, got {tokens_per_call!r}")
    check_sizes(budget_s=budget_s)
    kind = check_device(device)
    catalog = catalog or load_catalog()
    info = describe_device(kind, catalog)
    the_chip = _resolve_chip(info, chip, catalog)
    if flops_per_call is None:
        flops_per_call, convention = _count_flops(fn), "flop_counter"
    else:
        convention = "user"
    step = Step(fn, tokens=tokens_per_call, output_tokens=output_tokens_per_call, unit=unit)
    work = _Work(step, flops_per_call / tokens_per_call, convention, config or {"name": name})
    with peak_memory(device) as memory:
        timing = time_callable(fn, device=device, budget_s=budget_s, compiled=compiled)
    kind_of_tokens = "images" if unit == "images" else "total"
    return _record(
        work,
        timing,
        info,
        the_chip,
        workload=name,
        phase=phase,
        precision=precision,
        batch=None,
        seq=None,
        compiled=compiled,
        tokens_kind=kind_of_tokens,
        memory=memory,
    )


@dataclass
class MatrixResult:
    """Records measured, combinations that failed at run time, and combinations that do not apply
    (e.g. ``decode`` for the CNN)."""

    records: list[Record]
    failures: list[tuple[dict, str]]
    skipped: list[str] = field(default_factory=list)


def run_matrix(
    workloads: Iterable[str],
    phases: Iterable[str],
    devices: Iterable[str],
    *,
    batches: Iterable[int] = (4,),
    seqs: Iterable[int] = (128,),
    compiled: Iterable[bool] = (False,),
    precision: str = "fp32",
    budget_s: float = DEFAULT_BUDGET_S,
    out: str | None = None,
    progress: bool = True,
    convention: str = "palm",
    eager_modes: Iterable[str] = ("strict",),
    on_combo: Callable[[int, int, str], object] | None = None,
) -> MatrixResult:
    """Every combination of workload × phase × device × batch × seq × compiled (× eager mode for uncompiled
    "tpu" runs), with a tqdm bar.

    Names are validated before anything runs. Each finished record is appended to ``out`` at once
    (crash-safe); a combination that fails at run time is reported in ``failures``, the rest go on.
    ``on_combo(i, n, name)`` hears each combination as it starts (progress lines where no bar is shown).
    """
    workloads, phases, devices = list(workloads), list(phases), list(devices)
    for w in workloads:
        if w not in workload_names():
            raise WorkbenchError(unknown("workload", w, workload_names()))
    all_phases = tuple(dict.fromkeys((*PHASES, *VISION_PHASES)))
    for p in phases:
        if p not in all_phases:
            raise WorkbenchError(unknown("phase", p, all_phases))
    batches, seqs = list(batches), list(seqs)
    for b in batches:
        check_sizes(batch=b)
    for s in seqs:
        check_sizes(seq=s)
    check_sizes(budget_s=budget_s)
    for w, p, s in itertools.product(workloads, phases, seqs):
        if p in PHASES:
            check_context(w, s, p)
    for w, b, s in itertools.product(workloads, batches, seqs):
        check_step_memory(w, b, s)
    for d in devices:
        check_device(d)
    eager_modes = list(eager_modes)
    for e in eager_modes:
        if e not in EAGER_MODES:
            raise WorkbenchError(unknown("eager mode", e, EAGER_MODES))
    catalog = load_catalog()
    combos = [
        (w, p, d, b, s, c, e)
        for w, p, d, b, s, c in itertools.product(workloads, phases, devices, batches, seqs, list(compiled))
        for e in (eager_modes if d.split(":")[0] == "tpu" and not c else [None])
    ]
    result = MatrixResult([], [])
    bar = tqdm(combos, desc="tpu-bench run", unit="run", disable=not progress)
    for i, (w, p, d, b, s, c, e) in enumerate(bar, 1):
        name = f"{w}/{p}/{d}/b{b}/s{s}{'/compiled' if c else ''}{'/fused' if e == 'fused' else ''}"
        bar.set_postfix_str(name)
        if on_combo is not None:
            on_combo(i, len(combos), name)
        valid = VISION_PHASES if w in VISION_WORKLOADS else PHASES
        if p not in valid:
            result.skipped.append(f"{w}/{p}: phase does not apply (valid: {', '.join(valid)})")
            continue
        try:
            rec = run_benchmark(
                w,
                p,
                d,
                compiled=c,
                batch=b,
                seq=s,
                precision=precision,
                budget_s=budget_s,
                convention=convention,
                catalog=catalog,
                eager=e,
            )
        except WorkbenchError:
            raise
        except Exception as exc:  # noqa: BLE001 - one broken combination must not lose the others
            msg = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            # no warning here: the caller reports ``failures`` once (the CLI's FAILED line)
            result.failures.append(
                (
                    {
                        "workload": w,
                        "phase": p,
                        "device": d,
                        "batch": b,
                        "seq": s,
                        "compiled": c,
                        "eager_mode": e,
                    },
                    msg,
                )
            )
            continue
        result.records.append(rec)
        if out:
            append_records(out, [rec])
    torch.set_grad_enabled(True)
    return result
