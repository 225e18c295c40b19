"""``project()``: one projected record for a model, phase, chip, chip count and layout.

Per chip and step (model ``workbench-roofline-comm``, version MODEL_VERSION):

    T_ops      = Σ forward kernels (each its own roofline; see work.py)
    training   : T_compute = T_fwd + T_bwd (2 x matmuls, 2.5 x flash attention, 2 x elementwise)
                             + T_recompute (sub-layers the remat policy does not save) + loss + optimizer
    T_async    = FSDP gathers/reduce-scatters + data-parallel gradient reduction (ICI/NVLink and DCN)
                 + die-to-die copies; hidden under compute up to overlap x T_compute
    T_critical = expert all-to-all + tensor-parallel all-reduces, on the critical path
    T_step     = (T_compute + exposed T_async + (1 - critical_overlap) x T_critical)
                 x (1 + straggler_cv x sqrt(2 ln hosts))

The layer's wiring (:class:`~workbench.projection.block.Block`: SwiGLU or plain MLP, attention and MLP in
sequence or in parallel) sets the matmuls, elementwise passes, tensor-parallel collectives and model FLOPs.
Every input is stored in the record with its unit and source (``source['inputs']``).
"""

from __future__ import annotations

import math

from tpu_workbench.bench import cost as costmod
from tpu_workbench.bench.catalog import Catalog, Chip, load_catalog
from tpu_workbench.bench.errors import WorkbenchError, unknown
from tpu_workbench.bench.flops import kv_bytes_per_token
from tpu_workbench.bench.projection.assumptions import REASONS, SOURCES, Assumptions
from tpu_workbench.bench.projection.block import LLAMA, Block, block_flops_per_token, block_param_counts
from tpu_workbench.bench.projection.layout import Layout, resolve_layout
from tpu_workbench.bench.projection.memory import inference_memory, training_memory
from tpu_workbench.bench.projection.remat import POLICIES, recomputed, saved_sublayers
from tpu_workbench.bench.projection.remat import REASON as REMAT_REASON
from tpu_workbench.bench.projection.topology import Fabric
from tpu_workbench.bench.projection.work import StepWork, forward_ops
from tpu_workbench.bench.provenance import now_utc
from tpu_workbench.bench.results import Record
from tpu_workbench.bench.workloads.config import DecoderConfig, get_config

MODEL_NAME = "workbench-roofline-comm"
MODEL_VERSION = "3.0"
PHASES = ("train", "prefill", "decode")
BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "fp4": 0.5}
DEFAULT_BATCH = {"train": 4, "prefill": 1, "decode": 16}
AUTO_REMAT_ORDER = ("none", "minimal_with_context", "minimal", "save_dot_except_mlp", "save_qkv_proj", "full")
BACKWARD = {"gemm": 2.0, "grouped_gemm": 2.0, "attention": 2.5, "elementwise": 2.0}
ASYNC_KINDS = ("all_gather", "reduce_scatter", "all_to_all")


def _input(value, unit: str, source: str) -> dict:
    return {"value": value, "unit": unit, "source": source}


def _slices_for(chip: Chip, n_chips: int, slices: int, domain: int) -> tuple[int, str]:
    """TPU jobs larger than one slice must use several (DCN between them): the fewest that fit."""
    if not chip.scaleup_topology.startswith("torus") or n_chips // slices <= domain:
        return slices, ""
    for s in range(slices, n_chips + 1):
        if n_chips % s == 0 and n_chips // s <= domain:
            return s, (
                f"{n_chips} chips exceed the largest {chip.name} slice ({domain}): split into {s} slices "
                "joined by DCN"
            )
    raise WorkbenchError(f"cannot split {n_chips} chips into slices of at most {domain}")


class _Step:
    """Times of one step's parts; built by :func:`project`."""

    def __init__(self):
        self.compute: dict[str, float] = {}
        self.async_comm: dict[str, float] = {}
        self.critical_comm: dict[str, float] = {}
        self.math_bound = 0.0
        self.memory_bound = 0.0
        self.hbm_bytes = 0.0

    def add_ops(
        self,
        label: str,
        work: StepWork,
        peak: float,
        hbm: float,
        eff: dict,
        factor=None,
        only: frozenset[str] | None = None,
    ) -> None:
        t = 0.0
        for op in work.ops:
            if only is not None and op.sublayer not in only:
                continue
            mult = factor(op) if factor else 1.0
            op_t = op.time(peak, hbm, eff) * mult
            t += op_t
            self.hbm_bytes += op.bytes * mult
            if op.flops and op.flops / (peak * eff[op.kind] * op.fill) >= op.bytes / hbm:
                self.math_bound += op_t
            else:
                self.memory_bound += op_t
        self.compute[label] = t

    def add_memory(self, label: str, nbytes: float, hbm: float) -> None:
        self.compute[label] = nbytes / hbm
        self.memory_bound += nbytes / hbm
        self.hbm_bytes += nbytes

    def total(self, a: Assumptions, straggler: float) -> dict[str, float]:
        t_compute = sum(self.compute.values())
        t_async = sum(self.async_comm.values())
        hidden = min(t_async, a.overlap * t_compute)
        exposed_async = t_async - hidden
        exposed_crit = (1 - a.critical_overlap) * sum(self.critical_comm.values())
        base = t_compute + exposed_async + exposed_crit
        return {
            "compute": t_compute,
            "async_comm": t_async,
            "async_hidden": hidden,
            "async_exposed": exposed_async,
            "critical_comm": sum(self.critical_comm.values()),
            "critical_exposed": exposed_crit,
            "straggler": base * (straggler - 1),
            "step": base * straggler,
        }


def project(
    chip: Chip | str,
    config: DecoderConfig | str,
    phase: str,
    n_chips: int,
    layout: str = "fsdp",
    *,
    batch: int | float | None = None,
    seq: int = 4096,
    precision: str = "bf16",
    assumptions: Assumptions | None = None,
    convention: str = "causal",
    catalog: Catalog | None = None,
    remat: str = "auto",
    remat_names: dict[str, str] | None = None,
    slices: int = 1,
    capacity_factor: float | None = None,
    attn_block: int = 512,
    optimizer_state_bytes_per_param: float | None = None,
    async_collectives: tuple[str, ...] = (),
    attention_efficiency: float | None = None,
    gmm_tile: tuple[int, int, int] | None = None,
    block: Block | None = None,
    kv_precision: str | None = None,
    require_fit: bool = True,
) -> Record:
    """Projected record for ``config`` doing ``phase`` on ``n_chips`` x ``chip`` with ``layout``.

    ``batch``: sequences per chip (decode: concurrent sequences per chip, at context ``seq``).
    ``remat``: a policy of :data:`tpu_workbench.bench.projection.remat.POLICIES`, ``'custom'`` with MaxText-style
    ``remat_names`` ({'query_proj': 'offload', ...}), or ``'auto'`` (the least recompute that fits).
    ``slices``: TPU slices joined by DCN (FSDP inside a slice, data parallel across slices).
    ``capacity_factor``: MoE token dropping with padded expert capacity (None = dropless).
    ``async_collectives``: activation collectives the setting's compiler overlaps with compute
    ('all_gather', 'reduce_scatter', 'all_to_all'; XLA continuation fusion flags): the matching half of the
    tensor-parallel all-reduces (or the all-to-all) moves off the critical path.
    ``attention_efficiency``: absolute fraction of peak of the setting's attention kernel (e.g. 0.35 for
    FlashAttention-2 on H100), replacing gemm_efficiency x attention_relative.
    ``gmm_tile``: (m, k, n) tiles of the setting's MoE grouped-matmul kernel (MaxText's tokamax/megablox
    ``wi_tile_*``/``wo_tile_*``); experts pad K and N to them and end in a partial m-tile. None: MXU tiles.
    ``block``: the layer's wiring where it is not the Llama layer DecoderConfig assumes (a plain 2-matrix
    MLP; attention and MLP in parallel); it changes the matmuls, the elementwise passes, the tensor-parallel
    collectives and the model FLOPs.
    ``kv_precision``: precision of the KV cache (None: the activations').
    ``require_fit``: a setting that does not fit in HBM gets no throughput, MFU or price (``extra['infeasible']``
    says why); False keeps the throughput (never the price) for published settings known to have run, where
    the memory model, not the setting, is wrong.
    The MFU convention defaults to "causal" (MaxText/Megatron) because published TPU figures use it.
    """
    catalog = catalog or load_catalog()
    chip = catalog.chip(chip) if isinstance(chip, str) else chip
    cfg = get_config(config) if isinstance(config, str) else config
    if phase not in PHASES:
        raise WorkbenchError(unknown("phase", phase, PHASES))
    for p in (precision, kv_precision or precision):
        if p not in BYTES:
            raise WorkbenchError(unknown("precision", p, BYTES))
    a = assumptions or Assumptions()
    block = block or LLAMA
    if optimizer_state_bytes_per_param is not None:
        a = a.with_(optimizer_state_bytes_per_param=optimizer_state_bytes_per_param)
    batch = batch or DEFAULT_BATCH[phase]
    domain = a.scaleup_domain or chip.scaleup_domain
    slices, slice_note = _slices_for(chip, n_chips, slices, domain)
    is_torus = chip.scaleup_topology.startswith("torus")
    slice_chips = min(n_chips // slices, domain) if is_torus else None
    lay = resolve_layout(layout, n_chips, cfg, slice_chips or domain, a.max_tp, slices=slices)
    fabric = Fabric.for_chip(chip, a, slice_chips=slice_chips)
    peak = chip.peak(precision, per="chip")
    hbm = chip.hbm_bw_gbps * 1e9 * a.memory_efficiency
    wb = BYTES[precision]
    nb = a.activation_bytes if precision in ("bf16", "fp16", "fp32") else wb
    pc = block_param_counts(cfg, block)
    tile = chip.mxu_tile
    bad = set(async_collectives) - set(ASYNC_KINDS)
    if bad:
        raise WorkbenchError(unknown("async collective", sorted(bad)[0], ASYNC_KINDS))
    eff = {
        "gemm": a.gemm_efficiency,
        "grouped_gemm": a.gemm_efficiency * a.grouped_gemm_relative,
        "attention": attention_efficiency or a.gemm_efficiency * a.attention_relative,
        "elementwise": 1.0,
    }
    kvb = BYTES[kv_precision] if kv_precision else nb
    tokens = batch * (1 if phase == "decode" else seq)
    work = forward_ops(
        cfg,
        tokens=tokens,
        seq=seq,
        context=seq if phase == "decode" else None,
        tp=lay.tp,
        ep=lay.ep,
        nb=nb,
        tile=tile,
        capacity_factor=capacity_factor,
        attn_block=attn_block,
        gmm_tile=tuple(gmm_tile) if gmm_tile else None,
        devices_per_chip=chip.devices_per_chip,
        block=block,
        kv_nb=kvb,
    )
    step = _Step()
    hosts = max(math.ceil(n_chips / chip.chips_per_host), 1)
    straggler = 1 + a.straggler_cv * math.sqrt(2 * math.log(hosts)) if hosts > 1 else 1.0
    dense = pc.total - pc.routed_experts
    dense_gathered = (
        (dense - pc.embedding) * wb / lay.tp
    )  # weights one TP shard gathers (embedding: rows only)
    expert_gathered = pc.routed_experts * wb / (lay.tp * lay.ep)
    f_exp = max(lay.fsdp * lay.dp_in_slice // lay.ep, 1) if lay.ep > 1 else lay.fsdp
    n_moe = cfg.n_layers if cfg.is_moe else 0
    act = tokens * lay.tp * cfg.d_model * nb  # one activation tensor of the TP group
    a2a_volume = tokens * cfg.top_k * (capacity_factor or 1.0) * cfg.d_model * nb if cfg.is_moe else 0.0
    remat_used, saved, offloaded = None, frozenset(), frozenset()
    if phase == "train":
        remat_used, saved, offloaded, mem = _choose_remat(
            remat, remat_names, cfg, pc, lay, tokens, chip, a, wb, nb, block
        )
        again = recomputed(saved)
        step.add_ops("forward", work, peak, hbm, eff)
        step.add_ops("backward", work, peak, hbm, eff, factor=lambda op: BACKWARD[op.kind])
        step.add_ops("recompute", work, peak, hbm, eff, only=again)
        step.add_memory("loss", work.loss_bytes, hbm)
        local_params = dense / (lay.fsdp * lay.tp) + pc.routed_experts / (
            max(lay.ep, 1) * lay.tp * max(f_exp, 1)
        )
        step.add_memory("optimizer", local_params * (2 * a.optimizer_state_bytes_per_param + 2 * wb), hbm)
        fsdp = 2 * fabric.ring(dense_gathered, lay.fsdp, lay.tp) + fabric.ring(
            dense_gathered, lay.fsdp, lay.tp
        )
        fsdp += 3 * fabric.ring(expert_gathered, f_exp, lay.tp * lay.ep) if cfg.is_moe else 0.0
        step.async_comm["fsdp_gather_scatter"] = fsdp
        grads_local = (
            (dense_gathered / lay.fsdp + expert_gathered / f_exp)
            if lay.fsdp > 1
            else (dense_gathered + expert_gathered)
        )
        step.async_comm["dp_allreduce_in_slice"] = fabric.ring(
            grads_local, lay.dp_in_slice, lay.tp * lay.fsdp, 2
        )
        step.async_comm["dp_allreduce_across_slices_dcn"] = fabric.across_slices(
            grads_local, lay.dp_across_slices
        )
        if chip.devices_per_chip > 1:
            step.async_comm["die_to_die"] = fabric.die_to_die(3 * (dense_gathered + expert_gathered))
        passes = _tp_allreduces_per_layer(block, recomputed_outputs=bool(again & {"out_proj", "mlp_wo"}))
        _tp_comm(step, passes * cfg.n_layers * fabric.ring(act, lay.tp, 1, 2), async_collectives)
        a2a_passes = 4 + (2 if again & {"mlp_wi_0", "mlp_wi_1"} else 0)
        a2a = a2a_passes * n_moe * fabric.all_to_all(a2a_volume, lay.ep, lay.tp)
        (step.async_comm if "all_to_all" in async_collectives else step.critical_comm)["ep_all_to_all"] = a2a
    else:
        kv_tok = kv_bytes_per_token(cfg, kvb) / min(lay.tp, cfg.n_kv_heads)
        kv_chip = tokens * lay.tp * kv_tok if phase == "prefill" else batch * lay.tp * (seq + 1) * kv_tok
        mem = inference_memory(
            cfg,
            pc,
            lay,
            kv_bytes_per_chip=kv_chip,
            devices_per_chip=chip.devices_per_chip,
            hbm_gb_per_device=chip.hbm_gbytes_per_device,
            weight_bytes=wb,
        )
        step.add_ops("forward", work, peak, hbm, eff)
        if phase == "prefill":
            step.add_memory("kv_write", kv_chip, hbm)
        # weights are resident; an FSDP layout gathers them every step with nothing to hide behind in decode
        gather = fabric.ring(dense_gathered, lay.fsdp, lay.tp) if lay.fsdp > 1 else 0.0
        (step.async_comm if phase == "prefill" else step.critical_comm)["fsdp_gather"] = gather
        passes = _tp_allreduces_per_layer(block, recomputed_outputs=False) / 2  # forward only
        _tp_comm(step, passes * cfg.n_layers * fabric.ring(act, lay.tp, 1, 2), async_collectives)
        step.critical_comm["ep_all_to_all"] = 2 * n_moe * fabric.all_to_all(a2a_volume, lay.ep, lay.tp)
    times = step.total(a, straggler)
    t_step = times["step"]
    f_tok = block_flops_per_token(cfg, block, phase, seq, convention=convention)
    t_comm = times["async_comm"] + times["critical_comm"]
    exposed = times["async_exposed"] + times["critical_exposed"]
    bound = "compute" if step.math_bound >= step.memory_bound else "memory"
    if exposed > max(step.math_bound, step.memory_bound):
        bound = "communication"
    runs = mem.fits or not require_fit
    inputs = _inputs(
        chip,
        cfg,
        phase,
        n_chips,
        layout,
        lay,
        batch,
        seq,
        precision,
        convention,
        a,
        fabric,
        tokens,
        remat_used,
        saved,
        offloaded,
        capacity_factor,
        attn_block,
        hosts,
        slice_note,
        async_collectives,
        eff,
        gmm_tile,
        block,
    )
    extra = {
        "layout": lay.label(),
        "bound": bound,
        "t_compute_s": step.math_bound,
        "t_memory_s": step.memory_bound,
        "t_comm_s": t_comm,
        "exposed_comm_s": exposed,
        "comm_breakdown_s": {**step.async_comm, **step.critical_comm},
        "comm_overlap": {
            k: (
                "async (hidden under compute up to overlap x compute)"
                if k in step.async_comm
                else "critical path"
            )
            for k in {**step.async_comm, **step.critical_comm}
        },
        "comm_fraction": exposed / t_step,
        "time_breakdown_s": {**step.compute, **times},
        "hbm_bytes_per_step": step.hbm_bytes,
        "straggler_factor": straggler,
        "memory_per_device_gb": mem.per_device_gb,
        "memory_capacity_per_device_gb": mem.capacity_per_device_gb,
        "memory_per_chip_gb": mem.per_device_gb * chip.devices_per_chip,
        "memory_breakdown_gb": mem.breakdown_gb,
        "fits_in_hbm": mem.fits,
        "memory_tight": mem.tight,
        "fits_basis": "per device (each device has hbm / devices_per_chip)",
        "infeasible": None if mem.fits else _does_not_fit(mem),
        "remat": remat_used,
        "recomputed": sorted(recomputed(saved)) if phase == "train" else [],
        "slices": lay.slices,
        "notes": [n for n in (slice_note, *work.notes) if n],
    }
    return Record(
        provenance="projected",
        workload=cfg.name,
        phase=phase,
        device=chip.name,
        platform="projection",
        device_name=chip.name,
        chip=chip.name,
        precision=precision,
        batch=batch,
        seq=seq,
        n_chips=n_chips,
        n_devices=n_chips * chip.devices_per_chip,
        **_rates(
            chip, phase, precision, tokens, t_step, n_chips, f_tok, step.hbm_bytes, runs=runs, priced=mem.fits
        ),
        flop_convention=convention,
        peak_tflops=chip.peak(precision, per="chip") / 1e12,
        peak_basis=f"catalog {chip.name} {precision} dense peak per chip",
        config=cfg.to_dict(),
        source={
            "kind": "projected",
            "model": MODEL_NAME,
            "model_version": MODEL_VERSION,
            "inputs": inputs,
            "assumptions": a.to_dict(),
            "reasons": {**REASONS, "remat": REMAT_REASON},
            "sources": SOURCES,
        },
        extra=extra,
        created=now_utc(),
    )


def _does_not_fit(mem) -> str:
    return (
        f"does not fit in HBM: needs {mem.per_device_gb:.1f} GB per device, has "
        f"{mem.capacity_per_device_gb:.1f} GB ("
        + ", ".join(f"{k} {v:.1f}" for k, v in mem.breakdown_gb.items())
        + ")"
    )


def _rates(chip, phase, precision, tokens, t_step, n_chips, f_tok, hbm_bytes, *, runs, priced) -> dict:
    """Record fields that are rates and prices: none for a setting that cannot run (does not fit), and no
    price for one that does not fit even where its throughput is kept (a published run)."""
    if not runs:
        return {"tokens_kind": "output" if phase == "decode" else "total", "flops_per_token": f_tok}
    per_chip = tokens / t_step
    achieved = f_tok * per_chip
    peak = chip.peak(precision, per="chip")
    decode = phase == "decode"
    return {
        "tokens_kind": "output" if decode else "total",
        "tokens_per_s": per_chip * n_chips,
        "tokens_per_s_per_chip": per_chip,
        "tokens_per_s_per_device": per_chip / chip.devices_per_chip,
        "output_tokens_per_s": per_chip * n_chips if decode else 0.0,
        "tokens_per_s_per_user": 1.0 / t_step if decode else None,
        "step_median_s": t_step,
        "flops_per_token": f_tok,
        "achieved_tflops": achieved / 1e12,
        "mfu": achieved / peak,
        "mbu": (hbm_bytes / t_step / (chip.hbm_bw_gbps * 1e9)) if decode else None,
        "bandwidth_basis": f"catalog {chip.name} HBM bandwidth" if decode else None,
        "cost": [c.to_dict() for c in costmod.cost_lines(chip.prices, per_chip)] if priced else [],
        "energy": costmod.energy(chip, per_chip),
    }


def _tp_allreduces_per_layer(block: Block, *, recomputed_outputs: bool) -> int:
    """Tensor-parallel all-reduces (all-gather + reduce-scatter) of one layer's activations in a training
    step: one per branch output forward and backward, again when the outputs are recomputed. A parallel block
    sums attention and MLP outputs before reducing, so it has one branch output, a sequential layer two (XLA's
    ReduceScatterReassociate / AllReduceReassociate passes turn add(reduce(a), reduce(b)) into reduce(a + b)
    where the framework constrains each branch output separately, as MaxText 2023 did)."""
    outputs = 1 if block.parallel else 2
    return outputs * (3 if recomputed_outputs else 2)


def _tp_comm(step: _Step, t_allreduce: float, async_collectives: tuple[str, ...]) -> None:
    """Tensor-parallel activation collectives: an all-reduce = an all-gather + a reduce-scatter of the same
    volume; the half the setting's compiler makes asynchronous goes with the async collectives."""
    halves = {"all_gather": t_allreduce / 2, "reduce_scatter": t_allreduce / 2}
    for kind, t in halves.items():
        target = step.async_comm if kind in async_collectives else step.critical_comm
        target[f"tp_{kind}"] = t


def _choose_remat(remat, names, cfg, pc, lay, tokens, chip, a, wb, nb, block=LLAMA):
    """(policy, saved, offloaded, memory fit). 'auto' takes the least recompute that fits per device."""
    offloaded = frozenset(
        s
        for n, where in (names or {}).items()
        if where == "offload"
        for s in saved_sublayers("custom", {n: "offload"})
    )
    if remat.endswith(
        "_offloaded"
    ):  # MaxText qkv_proj_offloaded / minimal_offloaded keep them in host memory
        offloaded = offloaded | saved_sublayers(remat)
    candidates = AUTO_REMAT_ORDER if remat == "auto" else (remat,)
    fit = None
    for policy in candidates:
        saved = saved_sublayers(policy, names)
        fit = training_memory(
            cfg,
            pc,
            lay,
            tokens_per_chip=tokens,
            devices_per_chip=chip.devices_per_chip,
            hbm_gb_per_device=chip.hbm_gbytes_per_device,
            saved=saved,
            offloaded=offloaded,
            state_bytes_per_param=a.optimizer_state_bytes_per_param + 2 * wb,
            act_bytes=nb,
            weight_bytes=wb,
            block=block,
        )
        if remat != "auto" or fit.fits:
            return policy, saved, offloaded, fit
    return candidates[-1], saved_sublayers(candidates[-1]), offloaded, fit


def _inputs(
    chip,
    cfg,
    phase,
    n_chips,
    layout,
    lay: Layout,
    batch,
    seq,
    precision,
    convention,
    a,
    fabric,
    tokens,
    remat,
    saved,
    offloaded,
    capacity_factor,
    attn_block,
    hosts,
    slice_note,
    async_collectives,
    eff,
    gmm_tile=None,
    block: Block = LLAMA,
) -> dict:
    """Every input of one projection with its unit and source."""
    cat = f"catalog {chip.name} ({chip.origin})"
    return {
        "chip": chip.to_dict(),
        "config": cfg.to_dict(),
        "phase": phase,
        "n_chips": n_chips,
        "layout": layout,
        "layout_resolved": {"dp": lay.dp, "fsdp": lay.fsdp, "tp": lay.tp, "ep": lay.ep, "slices": lay.slices},
        "batch_per_chip": batch,
        "seq": seq,
        "precision": precision,
        "convention": convention,
        "named": {
            "peak_tflops_per_chip": _input(chip.peak_tflops[precision], "TFLOP/s dense", cat),
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
            **fabric.inputs,
            "tokens_per_chip_per_step": _input(tokens, "tokens", "batch x seq (decode: batch)"),
            "hosts": _input(hosts, "hosts", f"ceil(n_chips / chips_per_host={chip.chips_per_host}) ({cat})"),
            "remat_policy": _input(remat, "-", "setting" if remat else "n/a (inference)"),
            "remat_saved": _input(sorted(saved), "sub-layers", "remat policy"),
            "remat_offloaded": _input(sorted(offloaded), "sub-layers", "setting (host offload, not in HBM)"),
            "moe_capacity_factor": _input(capacity_factor, "-", "setting (None = dropless)"),
            "moe_gmm_tile": _input(
                list(gmm_tile) if gmm_tile else None,
                "elements (m, k, n)",
                "setting (grouped-matmul kernel tiles)" if gmm_tile else "not set: MXU tiles only",
            ),
            "attention_block": _input(
                attn_block, "tokens", "setting (flash block; causal diagonal blocks run in full)"
            ),
            "flash_backward_factor": _input(
                BACKWARD["attention"], "x forward", SOURCES["flash_backward_factor"]
            ),
            "slices": _input(lay.slices, "slices", slice_note or "setting"),
            "async_collectives": _input(
                list(async_collectives),
                "-",
                "setting (compiler flags that overlap these "
                "activation collectives with compute); FSDP/DP collectives are always async",
            ),
            "mlp_kind": _input(
                block.mlp, f"{block.mlp_matrices} weight matrices", block.source or "DecoderConfig default"
            ),
            "parallel_block": _input(
                block.parallel,
                "attention and MLP in parallel",
                block.source or "DecoderConfig default",
            ),
            "attention_efficiency": _input(
                eff["attention"],
                "fraction of peak",
                "setting (kernel measurement)"
                if eff["attention"] != a.gemm_efficiency * a.attention_relative
                else "gemm_efficiency x attention_relative",
            ),
        },
    }


def remat_policies() -> list[str]:
    return [*POLICIES, "custom", "auto"]
