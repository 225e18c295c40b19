"""Stage 5: the projected :class:`~workbench.results.Record` of one setting: rates, MFU/MBU and prices
(cost.py) where it runs, a "does not fit" reason and no rate or price where it cannot, and every input with
its unit and source."""

from __future__ import annotations

from tpu_workbench.bench import cost as costmod
from tpu_workbench.bench.projection.assumptions import REASONS, SOURCES
from tpu_workbench.bench.projection.block import block_flops_per_token
from tpu_workbench.bench.projection.fit import Fit
from tpu_workbench.bench.projection.remat import REASON as REMAT_REASON
from tpu_workbench.bench.projection.remat import recomputed
from tpu_workbench.bench.projection.spec import Setting
from tpu_workbench.bench.projection.step import BACKWARD, Step
from tpu_workbench.bench.projection.work import StepWork
from tpu_workbench.bench.provenance import now_utc
from tpu_workbench.bench.results import Record

MODEL_NAME = "workbench-roofline-comm"
MODEL_VERSION = "3.0"


def build_record(s: Setting, work: StepWork, fit: Fit, step: Step, *, require_fit: bool = True) -> Record:
    """The record of one projection; ``require_fit=False`` keeps the rates (never a price) of a setting the
    memory model says does not fit (a published run that ran)."""
    chip, cfg, lay, mem = s.chip, s.cfg, s.lay, fit.memory
    times = step.total(s.a, s.straggler)
    t_step = times["step"]
    f_tok = block_flops_per_token(cfg, s.block, s.phase, s.seq, convention=s.convention)
    t_comm = times["async_comm"] + times["critical_comm"]
    exposed = times["async_exposed"] + times["critical_exposed"]
    bound = "compute" if step.math_bound >= step.memory_bound else "memory"
    if exposed > max(step.math_bound, step.memory_bound):
        bound = "communication"
    comm = {**step.async_comm, **step.critical_comm}
    extra = {
        "layout": lay.label(),
        "bound": bound,
        "t_compute_s": step.math_bound,
        "t_memory_s": step.memory_bound,
        "t_comm_s": t_comm,
        "exposed_comm_s": exposed,
        "comm_breakdown_s": comm,
        "comm_overlap": {
            k: "async (hidden under compute up to overlap x compute)"
            if k in step.async_comm
            else "critical path"
            for k in comm
        },
        "comm_fraction": exposed / t_step,
        "time_breakdown_s": {**step.compute, **times},
        "hbm_bytes_per_step": step.hbm_bytes,
        "straggler_factor": s.straggler,
        "memory_per_device_gb": mem.per_device_gb,
        "memory_capacity_per_device_gb": mem.capacity_per_device_gb,
        "memory_per_chip_gb": mem.per_device_gb * chip.devices_per_chip,
        "memory_breakdown_gb": mem.breakdown_gb,
        "fits_in_hbm": mem.fits,
        "memory_tight": mem.tight,
        "fits_basis": "per device (each device has hbm / devices_per_chip)",
        "infeasible": None if mem.fits else does_not_fit(mem),
        "remat": fit.remat,
        "recomputed": sorted(recomputed(fit.saved)) if s.phase == "train" else [],
        "slices": lay.slices,
        "notes": [n for n in (s.slice_note, *work.notes) if n],
    }
    return Record(
        provenance="projected",
        workload=cfg.name,
        phase=s.phase,
        device=chip.name,
        platform="projection",
        device_name=chip.name,
        chip=chip.name,
        precision=s.precision,
        batch=s.batch,
        seq=s.seq,
        n_chips=s.n_chips,
        n_devices=s.n_chips * chip.devices_per_chip,
        **_rates(s, t_step, f_tok, step.hbm_bytes, runs=mem.fits or not require_fit, priced=mem.fits),
        flop_convention=s.convention,
        peak_tflops=s.peak / 1e12,
        peak_basis=f"catalog {chip.name} {s.precision} dense peak per chip",
        config=cfg.to_dict(),
        source={
            "kind": "projected",
            "model": MODEL_NAME,
            "model_version": MODEL_VERSION,
            "inputs": _inputs(s, fit),
            "assumptions": s.a.to_dict(),
            "reasons": {**REASONS, "remat": REMAT_REASON},
            "sources": SOURCES,
        },
        extra=extra,
        created=now_utc(),
    )


def does_not_fit(mem) -> str:
    """One line: what the setting needs per device, what it has, and where the bytes go."""
    return (
        f"does not fit in HBM: needs {mem.per_device_gb:.1f} GB per device, has "
        f"{mem.capacity_per_device_gb:.1f} GB ("
        + ", ".join(f"{k} {v:.1f}" for k, v in mem.breakdown_gb.items())
        + ")"
    )


def _rates(s: Setting, t_step: float, f_tok: float, hbm_bytes: float, *, runs: bool, priced: bool) -> dict:
    """Record fields that are rates and prices: none for a setting that cannot run (does not fit), and no
    price for one that does not fit even where its throughput is kept (a published run)."""
    decode = s.phase == "decode"
    if not runs:
        return {"tokens_kind": "output" if decode else "total", "flops_per_token": f_tok}
    chip = s.chip
    per_chip = s.tokens / t_step
    achieved = f_tok * per_chip
    return {
        "tokens_kind": "output" if decode else "total",
        "tokens_per_s": per_chip * s.n_chips,
        "tokens_per_s_per_chip": per_chip,
        "tokens_per_s_per_device": per_chip / chip.devices_per_chip,
        "output_tokens_per_s": per_chip * s.n_chips if decode else 0.0,
        "tokens_per_s_per_user": 1.0 / t_step if decode else None,
        "step_median_s": t_step,
        "flops_per_token": f_tok,
        "achieved_tflops": achieved / 1e12,
        "mfu": achieved / s.peak,
        "mbu": (hbm_bytes / t_step / (chip.hbm_bw_gbps * 1e9)) if decode else None,
        "bandwidth_basis": f"catalog {chip.name} HBM bandwidth" if decode else None,
        "cost": [c.to_dict() for c in costmod.cost_lines(chip.prices, per_chip)] if priced else [],
        "energy": costmod.energy(chip, per_chip),
    }


def _input(value, unit: str, source: str) -> dict:
    return {"value": value, "unit": unit, "source": source}


def _inputs(s: Setting, fit: Fit) -> dict:
    """Every input of one projection with its unit and source."""
    chip, lay, k, a, d = s.chip, s.lay, s.kernels, s.a, s.deployment
    cat = f"catalog {chip.name} ({chip.origin})"
    return {
        "chip": chip.to_dict(),
        "config": s.cfg.to_dict(),
        "phase": s.phase,
        "n_chips": s.n_chips,
        "layout": d.layout,
        "layout_resolved": {"dp": lay.dp, "fsdp": lay.fsdp, "tp": lay.tp, "ep": lay.ep, "slices": lay.slices},
        "batch_per_chip": s.batch,
        "seq": s.seq,
        "precision": s.precision,
        "kv_precision": d.kv_precision or s.precision,
        "convention": s.convention,
        "named": {
            "peak_tflops_per_chip": _input(chip.peak_tflops[s.precision], "TFLOP/s dense", cat),
            "hbm_gbytes_per_s": _input(chip.hbm_bw_gbps, "GB/s per chip", cat),
            "hbm_gbytes_per_device": _input(
                round(chip.hbm_gbytes_per_device, 2),
                "GB per device",
                f"{cat}: hbm / devices_per_chip ({chip.devices_per_chip})",
            ),
            "mxu_tile": _input(
                chip.mxu_tile,
                "elements",
                f"{cat}; {SOURCES['mxu_tile']}"
                if chip.mxu_tile
                else "no tile padding modelled for this chip",
            ),
            **s.fabric.inputs,
            "tokens_per_chip_per_step": _input(s.tokens, "tokens", "batch x seq (decode: batch)"),
            "kv_bytes_per_element": _input(
                s.kvb, "bytes", "setting (kv_precision; default the activations')"
            ),
            "hosts": _input(
                s.hosts, "hosts", f"ceil(n_chips / chips_per_host={chip.chips_per_host}) ({cat})"
            ),
            "remat_policy": _input(fit.remat, "-", "setting" if fit.remat else "n/a (inference)"),
            "remat_saved": _input(sorted(fit.saved), "sub-layers", "remat policy"),
            "remat_offloaded": _input(
                sorted(fit.offloaded), "sub-layers", "setting (host offload, not in HBM)"
            ),
            "moe_capacity_factor": _input(s.capacity_factor, "-", "setting (None = dropless)"),
            "moe_gmm_tile": _input(
                list(k.gmm_tile) if k.gmm_tile else None,
                "elements (m, k, n)",
                "setting (grouped-matmul kernel tiles)" if k.gmm_tile else "not set: MXU tiles only",
            ),
            "attention_block": _input(
                k.attn_block, "tokens", "setting (flash block; causal diagonal blocks run in full)"
            ),
            "flash_backward_factor": _input(
                BACKWARD["attention"], "x forward", SOURCES["flash_backward_factor"]
            ),
            "slices": _input(lay.slices, "slices", s.slice_note or "setting"),
            "async_collectives": _input(
                list(k.async_collectives),
                "-",
                "setting (compiler flags that overlap these "
                "activation collectives with compute); FSDP gathers and DP all-reduces are always async",
            ),
            "tp_gather_bytes": _input(
                k.tp_gather_bytes or s.nb,
                "bytes per element",
                "setting (the framework casts before the TP all-gather)"
                if k.tp_gather_bytes
                else "the activations' width",
            ),
            "grad_reduce_async": _input(
                k.grad_reduce_async,
                "-",
                "setting (False: the flags neither pipeline data-parallel reductions nor offload the FSDP "
                "gradient reduce-scatter, which is then on the critical path)",
            ),
            "mlp_kind": _input(
                s.block.mlp,
                f"{s.block.mlp_matrices} weight matrices",
                s.block.source or "DecoderConfig default",
            ),
            "parallel_block": _input(
                s.block.parallel, "attention and MLP in parallel", s.block.source or "DecoderConfig default"
            ),
            "attention_efficiency": _input(
                s.eff["attention"],
                "fraction of peak",
                "setting (kernel measurement)"
                if s.eff["attention"] != a.gemm_efficiency * a.attention_relative
                else "gemm_efficiency x attention_relative",
            ),
        },
    }
