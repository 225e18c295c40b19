"""Projected throughput, MFU and cost for catalog chips at any scale: roofline + communication.

Model ``workbench-roofline-comm`` (version in MODEL_VERSION), per chip and per step:

    T_compute = FLOPs / (peak · compute_efficiency)
    T_memory  = bytes moved through HBM / (HBM bandwidth · memory_efficiency)
    T_comm    = Σ collectives: bytes on the link / (link bandwidth · collective_efficiency) + latency
    T_step    = max(T_math, T_comm) + (1 − overlap) · min(T_math, T_comm),  T_math = max(T_compute, T_memory)

Collectives per layout (axes nested tp ⊂ ep/fsdp ⊂ dp; an axis that fits in the scale-up domain uses
scale-up links, otherwise a hierarchical scheme sends 1/g of the data over scale-out links):
DP all-reduce of gradients; FSDP all-gather (fwd, bwd) + reduce-scatter of weights/gradients; TP two
activation all-reduces per layer forward (two more backward); EP two all-to-alls per MoE layer forward
(two more backward). Activation memory is not modelled (remat assumed to make it fit).
Every assumption is a field of :class:`Assumptions` with a default and a reason, and is stored in the
projected record next to every other input.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from workbench import cost as costmod
from workbench.catalog import Catalog, Chip, load_catalog
from workbench.errors import WorkbenchError, unknown
from workbench.flops import flops_per_token, kv_bytes_per_token, param_counts
from workbench.provenance import now_utc
from workbench.results import Record
from workbench.workloads.config import DecoderConfig, get_config

MODEL_NAME = "workbench-roofline-comm"
MODEL_VERSION = "1.0"
LAYOUTS = ("dp", "fsdp", "tp", "fsdp+tp", "ep", "fsdp+ep", "tp+ep")
PHASES = ("train", "prefill", "decode")
BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "fp4": 0.5}
DEFAULT_BATCH = {"train": 4, "prefill": 1, "decode": 16}

REASONS = {
    "compute_efficiency": "fraction of dense peak large transformer matmuls reach in practice; well-tuned "
                          "large-scale runs report roughly 40-60% MFU (PaLM 46%, torchtitan/MaxText configs)",
    "memory_efficiency": "fraction of HBM bandwidth streaming kernels reach (typically 70-90%)",
    "collective_efficiency": "fraction of link bandwidth large collectives reach (bus bandwidth vs line rate)",
    "collective_latency_us": "fixed cost per collective (launch + hop latency); dominates small decode messages",
    "overlap": "share of the shorter of math/communication hidden under the longer (0 = serial, 1 = perfect)",
    "scaleout_gbps_per_chip": "scale-out bandwidth per chip per direction: a 400 Gb/s NIC per accelerator "
                              "(typical H100/B200 clusters); used for TPU multi-slice DCN too, where the "
                              "catalog has no figure",
    "scaleup_domain": "chips reachable over scale-up links; None = the catalog domain (set the slice size "
                      "for TPU multi-slice runs)",
    "max_tp": "largest tensor-parallel degree the named layouts pick (activation all-reduces grow with it)",
    "optimizer_bytes_per_param": "fp32 master weights + Adam m and v (4+4+4 bytes) kept by mixed-precision training",
    "batch": "sequences per chip (global batch = batch x chips): weak scaling keeps tokens per chip fixed",
}


@dataclass(frozen=True)
class Assumptions:
    """Inputs of the model that are not catalog facts. See REASONS for why each default."""

    compute_efficiency: float = 0.5
    memory_efficiency: float = 0.8
    collective_efficiency: float = 0.8
    collective_latency_us: float = 10.0
    overlap: float = 0.5
    scaleout_gbps_per_chip: float = 50.0
    scaleup_domain: int | None = None
    max_tp: int = 8
    optimizer_bytes_per_param: float = 12.0

    def __post_init__(self) -> None:
        for name in ("compute_efficiency", "memory_efficiency", "collective_efficiency"):
            if not 0 < getattr(self, name) <= 1:
                raise WorkbenchError(f"{name} must be in (0, 1], got {getattr(self, name)}")
        if not 0 <= self.overlap <= 1:
            raise WorkbenchError(f"overlap must be in [0, 1], got {self.overlap}")


@dataclass(frozen=True)
class Layout:
    """Parallel degrees; dp·fsdp·tp = chips. ep shards experts inside the dp·fsdp chips."""

    dp: int = 1
    fsdp: int = 1
    tp: int = 1
    ep: int = 1

    @property
    def n_chips(self) -> int:
        return self.dp * self.fsdp * self.tp

    def label(self) -> str:
        return ",".join(f"{k}={v}" for k, v in asdict(self).items() if v > 1) or "single"


def resolve_layout(layout: str, n_chips: int, cfg: DecoderConfig, domain: int, max_tp: int) -> Layout:
    """A named layout (see LAYOUTS) or an explicit 'dp=..,fsdp=..,tp=..,ep=..' for ``n_chips``."""
    if n_chips < 1:
        raise WorkbenchError("n_chips must be >= 1")
    if "=" in layout:
        try:
            parts = dict(p.split("=") for p in layout.replace(" ", "").split(","))
            lay = Layout(**{k: int(v) for k, v in parts.items()})
        except (TypeError, ValueError):
            raise WorkbenchError(f"bad layout {layout!r}; write e.g. 'dp=2,fsdp=64,tp=4,ep=8' "
                                 "(keys dp, fsdp, tp, ep)") from None
        if lay.n_chips != n_chips:
            raise WorkbenchError(f"layout {layout!r} uses dp*fsdp*tp = {lay.n_chips} chips, not {n_chips}")
    else:
        if layout not in LAYOUTS:
            raise WorkbenchError(unknown("layout", layout, LAYOUTS) + " or 'dp=..,fsdp=..,tp=..,ep=..'")
        tp = math.gcd(n_chips, min(domain, max_tp, cfg.n_heads)) if "tp" in layout else 1
        rest = n_chips // tp
        ep = math.gcd(rest, cfg.n_experts) if "ep" in layout and cfg.is_moe else 1
        if "ep" in layout and not cfg.is_moe:
            raise WorkbenchError(f"layout {layout!r} needs a MoE model; {cfg.name} is dense")
        if layout == "dp":
            lay = Layout(dp=n_chips)
        elif layout in ("fsdp", "fsdp+tp", "fsdp+ep"):
            lay = Layout(fsdp=rest, tp=tp, ep=ep)
        else:  # tp, ep, tp+ep: data parallel across the rest
            lay = Layout(dp=rest, tp=tp, ep=ep)
    if (lay.dp * lay.fsdp) % lay.ep:
        raise WorkbenchError(f"ep={lay.ep} must divide dp*fsdp={lay.dp * lay.fsdp}")
    if lay.ep > 1 and (not cfg.is_moe or cfg.n_experts % lay.ep):
        raise WorkbenchError(f"ep={lay.ep} must divide the expert count ({cfg.n_experts}) of a MoE model")
    return lay


class _Links:
    """Time of collectives given the axis placement (innermost axes on scale-up links first)."""

    def __init__(self, chip: Chip, a: Assumptions):
        self.up = chip.scaleup_bw_uni_gbps * 1e9 * a.collective_efficiency
        self.out = a.scaleout_gbps_per_chip * 1e9 * a.collective_efficiency
        self.domain = a.scaleup_domain or chip.scaleup_domain
        self.latency = a.collective_latency_us * 1e-6

    def _split(self, size: int, inner: int) -> tuple[int, int]:
        """(g, k): g members of the axis share a scale-up domain, k groups talk over scale-out."""
        g = max(min(size, self.domain // max(inner, 1)), 1)
        while size % g:
            g -= 1
        return g, size // g

    def ring(self, volume: float, size: int, inner: int, factor: float) -> float:
        """All-gather / reduce-scatter (factor 1) or all-reduce (factor 2) of ``volume`` bytes per chip."""
        if size <= 1:
            return 0.0
        g, k = self._split(size, inner)
        t = factor * volume * (g - 1) / g / self.up
        if k > 1:
            t += factor * (volume / g) * (k - 1) / k / self.out
        return t + self.latency

    def all_to_all(self, volume: float, size: int, inner: int) -> float:
        """``volume`` bytes per chip spread evenly over ``size`` peers."""
        if size <= 1:
            return 0.0
        g, _ = self._split(size, inner)
        return volume * (g - 1) / size / self.up + volume * (size - g) / size / self.out + self.latency


def _experts_touched(cfg: DecoderConfig, tokens: float) -> float:
    """Expected distinct routed experts hit by ``tokens`` tokens choosing top_k of E uniformly."""
    if not cfg.is_moe:
        return 0.0
    return cfg.n_experts * (1 - (1 - cfg.top_k / cfg.n_experts) ** tokens)


def project(chip: Chip | str, config: DecoderConfig | str, phase: str, n_chips: int, layout: str = "fsdp", *,
            batch: int | None = None, seq: int = 4096, precision: str = "bf16",
            assumptions: Assumptions | None = None, convention: str = "causal",
            catalog: Catalog | None = None) -> Record:
    """Projected record for ``config`` doing ``phase`` on ``n_chips`` × ``chip`` with ``layout``.

    ``batch``: sequences per chip (decode: concurrent sequences per chip, at context ``seq``). The
    MFU convention defaults to "causal" (MaxText/Megatron) because published TPU figures use it.
    """
    catalog = catalog or load_catalog()
    chip = catalog.chip(chip) if isinstance(chip, str) else chip
    cfg = get_config(config) if isinstance(config, str) else config
    if phase not in PHASES:
        raise WorkbenchError(unknown("phase", phase, PHASES))
    if precision not in BYTES:
        raise WorkbenchError(unknown("precision", precision, BYTES))
    a = assumptions or Assumptions()
    batch = batch or DEFAULT_BATCH[phase]
    domain = a.scaleup_domain or chip.scaleup_domain
    lay = resolve_layout(layout, n_chips, cfg, domain, a.max_tp)
    links = _Links(chip, a)
    peak = chip.peak(precision, per="chip")
    bw = chip.hbm_bw_gbps * 1e9 * a.memory_efficiency
    wb = BYTES[precision]
    pc = param_counts(cfg)
    expert_params = pc.routed_experts
    dense_params = pc.total - expert_params
    # weights streamed from HBM per pass, once gathered (TP and EP shard them; FSDP gathers them back);
    # the embedding table is only gathered row by row, so it is not streamed
    w_local = (dense_params - pc.embedding + expert_params / lay.ep) * wb / lay.tp
    f_tok = flops_per_token(cfg, phase, seq, convention=convention)
    tokens_chip = batch * (1 if phase == "decode" else seq)
    t_compute = f_tok * tokens_chip / (peak * a.compute_efficiency)
    group_tokens = tokens_chip * lay.tp  # tokens one TP group works on together
    act = group_tokens * cfg.d_model * wb  # one activation tensor of the TP group
    n_moe = cfg.n_layers if cfg.is_moe else 0
    comm: dict[str, float] = {}
    shard = lay.tp * lay.fsdp
    expert_shard = lay.tp * max(lay.ep, lay.fsdp)
    if phase == "train":
        state_local = (dense_params / shard + expert_params / expert_shard) * (2 * wb + a.optimizer_bytes_per_param)
        hbm_bytes = 3 * w_local + 2 * state_local
        grads = (dense_params / shard + expert_params / expert_shard) * wb
        comm["dp_allreduce"] = links.ring(grads, lay.dp, lay.tp * lay.fsdp, 2)
        f_exp = max(lay.fsdp // lay.ep, 1)
        comm["fsdp_gather_scatter"] = 3 * (links.ring(dense_params * wb / lay.tp, lay.fsdp, lay.tp, 1)
                                           + links.ring(expert_params * wb / (lay.tp * lay.ep), f_exp,
                                                        lay.tp * lay.ep, 1))
        comm["tp_allreduce"] = 4 * cfg.n_layers * links.ring(act, lay.tp, 1, 2)
        comm["ep_all_to_all"] = 4 * n_moe * links.all_to_all(tokens_chip * cfg.top_k * cfg.d_model * wb,
                                                             lay.ep, lay.tp)
        capacity = state_local  # activations not modelled
    else:
        kv_tok = kv_bytes_per_token(cfg, wb) / min(lay.tp, cfg.n_kv_heads)
        if phase == "prefill":
            kv = group_tokens * kv_tok
            hbm_bytes = w_local + kv
        else:
            touched = _experts_touched(cfg, group_tokens * lay.ep) / cfg.n_experts if cfg.is_moe else 0
            kv = batch * lay.tp * (seq + 1) * kv_tok
            hbm_bytes = (dense_params - pc.embedding + expert_params / lay.ep * touched) * wb / lay.tp + kv
        comm["fsdp_gather"] = links.ring(dense_params * wb / lay.tp, lay.fsdp, lay.tp, 1) if lay.fsdp > 1 else 0.0
        comm["tp_allreduce"] = 2 * cfg.n_layers * links.ring(act, lay.tp, 1, 2)
        comm["ep_all_to_all"] = 2 * n_moe * links.all_to_all(tokens_chip * cfg.top_k * cfg.d_model * wb,
                                                             lay.ep, lay.tp)
        capacity = (dense_params / shard + expert_params / expert_shard) * wb + kv
    t_memory = hbm_bytes / bw
    t_math = max(t_compute, t_memory)
    t_comm = sum(comm.values())
    t_step = max(t_math, t_comm) + (1 - a.overlap) * min(t_math, t_comm)
    per_chip = tokens_chip / t_step
    achieved = f_tok * per_chip
    bound = "compute" if t_compute >= t_memory else "memory"
    if t_comm > t_math:
        bound = "communication"
    record_cost = [c.to_dict() for c in costmod.cost_lines(chip.prices, per_chip)]
    inputs = {"chip": chip.to_dict(), "config": cfg.to_dict(), "phase": phase, "n_chips": n_chips,
              "layout": layout, "layout_resolved": asdict(lay), "batch_per_chip": batch, "seq": seq,
              "precision": precision, "convention": convention}
    return Record(
        provenance="projected", workload=cfg.name, phase=phase, device=chip.name, platform="projection",
        device_name=chip.name, chip=chip.name, precision=precision, batch=batch, seq=seq,
        n_chips=n_chips, n_devices=n_chips * chip.devices_per_chip,
        tokens_kind="output" if phase == "decode" else "total",
        tokens_per_s=per_chip * n_chips, tokens_per_s_per_chip=per_chip,
        tokens_per_s_per_device=per_chip / chip.devices_per_chip,
        output_tokens_per_s=per_chip * n_chips if phase == "decode" else 0.0,
        tokens_per_s_per_user=1.0 / t_step if phase == "decode" else None,
        step_median_s=t_step, flops_per_token=f_tok, flop_convention=convention,
        achieved_tflops=achieved / 1e12, mfu=achieved / peak, peak_tflops=peak / 1e12,
        peak_basis=f"catalog {chip.name} {precision} dense peak per chip",
        mbu=(hbm_bytes / t_step / (chip.hbm_bw_gbps * 1e9)) if phase == "decode" else None,
        bandwidth_basis=f"catalog {chip.name} HBM bandwidth" if phase == "decode" else None,
        cost=record_cost, energy=costmod.energy(chip, per_chip), config=cfg.to_dict(),
        source={"kind": "projected", "model": MODEL_NAME, "model_version": MODEL_VERSION, "inputs": inputs,
                "assumptions": asdict(a), "reasons": REASONS},
        extra={"layout": lay.label(), "bound": bound, "t_compute_s": t_compute, "t_memory_s": t_memory,
               "t_comm_s": t_comm, "comm_breakdown_s": comm, "comm_fraction": t_comm / (t_math + t_comm),
               "hbm_bytes_per_step": hbm_bytes, "memory_per_chip_gb": capacity / 1e9,
               "fits_in_hbm": capacity <= chip.hbm_gb * 1e9, "activation_memory": "not modelled"},
        created=now_utc())


def scaling_curve(chip: Chip | str, config: DecoderConfig | str, phase: str = "train", layout: str = "fsdp",
                  chips: tuple[int, ...] = (1, 8, 64, 256, 1024, 4096, 8192), **kwargs) -> list[Record]:
    """Projected records from 1 chip to thousands; efficiency = per-chip throughput / 1-chip's."""
    return [project(chip, config, phase, n, layout, **kwargs) for n in chips]


def decode_sweep(chip: Chip | str, config: DecoderConfig | str, *, n_chips: int = 8, layout: str = "tp",
                 batches: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256), seq: int = 4096,
                 **kwargs) -> list[Record]:
    """Decode batch sweep: the throughput-per-chip vs tokens/s-per-user trade-off (Pareto front)."""
    return [project(chip, config, "decode", n_chips, layout, batch=b, seq=seq, **kwargs) for b in batches]


# Published points the model can be set up for; each states the assumptions the source leaves open.
_ROW4 = {"config": "qwen3-32b", "phase": "prefill", "n_chips": 1, "layout": "fsdp", "batch": 1, "seq": 4096,
         "scaleup_domain": None,
         "assumed": "model unnamed ('a 30B model'): modelled as dense qwen3-32b; bf16; batch 1 x 4096 tokens"}
_TRAIN = {"config": "qwen3-235b-a22b", "phase": "train", "layout": "fsdp+ep", "batch": 4, "seq": 4096,
          "scaleup_domain": 1024,
          "assumed": "bf16; 4 x 4096 tokens per chip; FSDP over all chips with EP inside; slice = 1024 chips "
                     "(8,192 / 8) is the ICI domain, DCN between slices at the default scale-out bandwidth"}
_NOT_MODELLED = {
    9: "model, sequence lengths and serving setting not stated",
    10: "AgentX traces (multi-turn, long context) not modelled",
    11: "Qwen3.5-397B architecture not in the workload presets; serving at an interactivity target needs a "
        "scheduler model",
    12: "as row 11", 13: "as row 11", 14: "as row 11 (end-to-end latency target)",
}


def projection_vs_published(*, assumptions: Assumptions | None = None, catalog: Catalog | None = None):
    """DataFrame: each numeric performance/cost point of the published figures beside our projection,
    with the relative error (projected/published - 1) and the assumptions used. Points the model cannot
    be set up for are listed with the reason (never silently dropped)."""
    import pandas as pd

    from workbench.published import published_records

    catalog = catalog or load_catalog()
    a = assumptions or Assumptions()
    rows = []

    def run(spec: dict, n_chips: int) -> Record:
        kw = {k: v for k, v in asdict(a).items()}
        if spec["scaleup_domain"]:
            kw["scaleup_domain"] = spec["scaleup_domain"]
        return project("TPU v7", spec["config"], spec["phase"], n_chips, spec["layout"], batch=spec["batch"],
                       seq=spec["seq"], assumptions=Assumptions(**kw), catalog=catalog)

    def add(pub: Record, metric: str, published: float | str, projected: float | None, note: str,
            low: float | None = None, high: float | None = None) -> None:
        if projected is None:
            err = None
        elif low is not None and high is not None:
            err = 0.0 if low <= projected <= high else (projected / (low if projected < low else high) - 1)
        else:
            err = projected / float(published) - 1
        rows.append({"row": pub.source["row"], "chip": pub.chip, "setting": pub.source["setting"], "metric": metric,
                     "published": published, "projected": projected, "rel_error": err, "assumptions": note})

    for pub in published_records():
        row = pub.source["row"]
        if row == 4:
            rec = run(_ROW4, 1)
            add(pub, "tokens/s per chip", pub.tokens_per_s_per_chip, rec.tokens_per_s_per_chip, _ROW4["assumed"])
            add(pub, "MFU", pub.mfu, rec.mfu, _ROW4["assumed"] + "; causal-halved attention")
        elif row == 5:
            rec = run(_TRAIN, pub.n_chips)
            add(pub, f"tokens/s per TensorCore @ {int(pub.n_chips)} chips", pub.tokens_per_s_per_device,
                rec.tokens_per_s_per_device, _TRAIN["assumed"])
        elif row == 6:
            rec = run(_TRAIN, 1024)
            lo, hi = pub.extra["mfu_min"], pub.extra["mfu_max"]
            add(pub, "MFU @ 1024 chips", f"{lo:.2f}-{hi:.2f}", rec.mfu, _TRAIN["assumed"], lo, hi)
        elif row == 7:
            rec = run({**_TRAIN, "scaleup_domain": None}, 64)
            add(pub, "tokens/s (read as per TensorCore)", pub.extra["tokens_per_s_as_reported"],
                rec.tokens_per_s_per_device,
                "model unstated: assumed the row-5 Qwen3-235B setup at 64 chips; unit read as per TensorCore")
        elif row in _NOT_MODELLED:
            if pub.tokens_per_s_per_chip:
                metric, value = "tokens/s per chip", pub.tokens_per_s_per_chip
            elif pub.cost:
                metric, value = "$ per M tokens", pub.cost[0]["usd_per_mtok"]
            else:
                metric, value = "tokens per $ gain", pub.source["figure"]
            rows.append({"row": row, "chip": pub.chip, "setting": pub.source["setting"], "metric": metric,
                         "published": value, "projected": None, "rel_error": None,
                         "assumptions": "not modelled: " + _NOT_MODELLED[row]})
    return pd.DataFrame(rows)


def format_vs_published(table) -> str:
    """Compact text of :func:`projection_vs_published`: numbers, then each row's setting and assumptions."""
    def num(v):
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "-"
        if isinstance(v, int | float):
            return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"
        return str(v)

    lines = [f"{'row':>3}  {'chip':<7} {'metric':<36} {'published':>12} {'projected':>10} {'rel.err':>8}"]
    for r in table.to_dict("records"):
        err = "-" if r["rel_error"] is None or math.isnan(r["rel_error"]) else f"{100 * r['rel_error']:+.0f}%"
        pub = num(r["published"])
        lines.append(f"{r['row']:>3}  {str(r['chip']):<7} {r['metric']:<36} {pub[:40]:>12} {num(r['projected']):>10} "
                     f"{err:>8}")
    lines.append("")
    seen = set()
    for r in table.to_dict("records"):
        key = (r["row"], r["assumptions"])
        if key not in seen:
            seen.add(key)
            lines.append(f"row {r['row']}: {r['setting']}\n        -> {r['assumptions']}")
    lines.append(f"model {MODEL_NAME} v{MODEL_VERSION}, default Assumptions (not fitted to these points)")
    return "\n".join(lines)
