"""What one projection is asked (three config dataclasses) and the setting resolved from it (stage 1).

- :class:`Workload` - what runs: the model, the phase, sequences per chip, the sequence/context length.
- :class:`Deployment` - where it runs: chip, count, parallel layout, TPU slices, precisions.
- :class:`Kernels` - how the software runs it: remat, attention and grouped-matmul kernels, async collectives.

:func:`resolve` turns them into a :class:`Setting`: the catalog chip, the resolved layout and fabric, the
efficiencies, the bytes per element; every later stage (work, memory, step time, record) reads only it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from tpu_workbench.bench.catalog import Catalog, Chip, load_catalog
from tpu_workbench.bench.errors import WorkbenchError, unknown
from tpu_workbench.bench.flops import ParamCounts
from tpu_workbench.bench.projection.assumptions import Assumptions
from tpu_workbench.bench.projection.block import LLAMA, Block, block_param_counts
from tpu_workbench.bench.projection.layout import Layout, resolve_layout
from tpu_workbench.bench.projection.topology import Fabric
from tpu_workbench.bench.workloads.config import DecoderConfig, get_config

PHASES = ("train", "prefill", "decode")
BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "fp4": 0.5}
DEFAULT_BATCH = {"train": 4, "prefill": 1, "decode": 16}
ASYNC_KINDS = ("all_gather", "reduce_scatter", "all_to_all")


@dataclass(frozen=True)
class Workload:
    """What runs. ``batch``: sequences per chip (decode: concurrent sequences per chip at context ``seq``;
    None = DEFAULT_BATCH). ``block``: the layer's wiring where it is not the Llama layer. ``capacity_factor``:
    MoE token dropping with padded expert capacity (None = dropless)."""

    config: DecoderConfig | str
    phase: str
    batch: float | None = None
    seq: int = 4096
    convention: str = "causal"
    block: Block | None = None
    capacity_factor: float | None = None


@dataclass(frozen=True)
class Deployment:
    """Where it runs. ``precision``: weights and matmuls; ``kv_precision``: the KV cache (None: the
    activations'). ``slices``: TPU slices joined by DCN (FSDP inside a slice, data parallel across)."""

    chip: Chip | str
    n_chips: int
    layout: str = "fsdp"
    slices: int = 1
    precision: str = "bf16"
    kv_precision: str | None = None


# How context parallelism runs attention (docs/projection.md, "Context parallelism"):
#   allgather: K/V all-gathered once per layer, one fused attention kernel per chip (MaxText/XLA)
#   torch    : PyTorch's context_parallel: one SDPA call per ring step, merged in eager fp32 ops
RING_ATTENTION = ("allgather", "torch")


@dataclass(frozen=True)
class Kernels:
    """How the software runs it (see :func:`tpu_workbench.bench.projection.model.project` for each)."""

    remat: str = "auto"
    remat_names: dict[str, str] | None = None
    attn_block: int = 512
    async_collectives: tuple[str, ...] = ()
    attention_efficiency: float | None = None
    gmm_tile: tuple[int, int, int] | None = None
    ring_attention: str = "allgather"  # context parallelism's attention: one of RING_ATTENTION
    attention_backward_relative: float | None = None  # the attention kernel's backward efficiency / forward
    # False: the FSDP gradient reduce-scatter is on the critical path (XLA flags that neither pipeline
    # data-parallel reductions nor offload reduce-scatters to SparseCore; see step._train)
    grad_reduce_async: bool = True
    # bytes per element of the tensor-parallel all-gathers (None: the activations' width); torchao's float8
    # TP casts before gathering (1 byte), see step._train
    tp_gather_bytes: float | None = None


@dataclass
class Setting:
    """Everything the later stages read, resolved once."""

    chip: Chip
    cfg: DecoderConfig
    phase: str
    batch: float
    seq: int
    convention: str
    block: Block
    capacity_factor: float | None
    deployment: Deployment
    kernels: Kernels
    a: Assumptions
    lay: Layout
    fabric: Fabric
    pc: ParamCounts
    peak: float  # FLOP/s per chip at the precision
    hbm: float  # B/s per chip reached (bandwidth x memory efficiency)
    wb: float  # bytes per weight
    nb: float  # bytes per activation
    kvb: float  # bytes per cached key/value element
    eff: dict[str, float]
    tokens: float  # tokens per chip per step
    hosts: int
    straggler: float
    slice_note: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def precision(self) -> str:
        return self.deployment.precision

    @property
    def n_chips(self) -> int:
        return self.deployment.n_chips


def slices_for(chip: Chip, n_chips: int, slices: int, domain: int) -> tuple[int, str]:
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


def _attention_peak_share(chip: Chip, phase: str, precision: str) -> float:
    """Low-precision training (torchtitan Float8 linears, Transformer Engine, MaxText fp8 matmuls) quantizes
    the linears only: flash attention runs in bf16, so against the fp8/fp4 peak it reaches bf16/peak of it.
    Serving on TPU likewise: vLLM TPU's ragged paged attention keeps the query in bf16 beside an fp8 KV cache
    (vllm-project/tpu-inference@b8692ff, ``q_scale`` None until "the VREG spill issue is resolved")."""
    if phase != "train" and chip.vendor != "Google":
        return 1.0
    if BYTES[precision] >= 2 or "bf16" not in chip.peak_tflops:
        return 1.0
    return chip.peak("bf16", per="chip") / chip.peak(precision, per="chip")


def resolve(
    w: Workload, d: Deployment, k: Kernels, a: Assumptions | None = None, catalog: Catalog | None = None
) -> Setting:
    """Stage 1: check the request and resolve chip, layout, fabric, efficiencies and bytes per element."""
    catalog = catalog or load_catalog()
    chip = catalog.chip(d.chip) if isinstance(d.chip, str) else d.chip
    cfg = get_config(w.config) if isinstance(w.config, str) else w.config
    if w.phase not in PHASES:
        raise WorkbenchError(unknown("phase", w.phase, PHASES))
    for p in (d.precision, d.kv_precision or d.precision):
        if p not in BYTES:
            raise WorkbenchError(unknown("precision", p, BYTES))
    rel = k.attention_backward_relative
    if rel is not None and not 0 < rel <= 1:
        raise WorkbenchError(f"attention_backward_relative must be in (0, 1], got {rel}")
    if k.tp_gather_bytes is not None and not k.tp_gather_bytes > 0:
        raise WorkbenchError(f"tp_gather_bytes must be > 0, got {k.tp_gather_bytes}")
    if k.ring_attention not in RING_ATTENTION:
        raise WorkbenchError(unknown("ring attention", k.ring_attention, RING_ATTENTION))
    bad = set(k.async_collectives) - set(ASYNC_KINDS)
    if bad:
        raise WorkbenchError(unknown("async collective", sorted(bad)[0], ASYNC_KINDS))
    a = a or Assumptions()
    block = w.block or LLAMA
    batch = w.batch or DEFAULT_BATCH[w.phase]
    domain = a.scaleup_domain or chip.scaleup_domain
    slices, slice_note = slices_for(chip, d.n_chips, d.slices, domain)
    is_torus = chip.scaleup_topology.startswith("torus")
    slice_chips = min(d.n_chips // slices, domain) if is_torus else None
    lay = resolve_layout(d.layout, d.n_chips, cfg, slice_chips or domain, a.max_tp, slices=slices)
    if w.phase != "train" and (lay.pp > 1 or lay.cp > 1):
        raise WorkbenchError(
            "pipeline (pp) and context (cp) parallelism are modelled for training; for serving stages use "
            "`tpu-bench project --serve` (ServingDeployment.pp)"
        )
    if cfg.is_mla and (w.phase != "train" or lay.cp > 1):
        raise WorkbenchError(
            f"{cfg.name}: multi-head latent attention is modelled for training without context parallelism "
            "(its latent KV cache and absorbed decode are the serving model's: `tpu-bench project --serve`)"
        )
    wb = BYTES[d.precision]
    # fp8/fp4 training quantizes the linears only (torchao Float8Linear in torchtitan, Transformer Engine, MaxText
    # fp8 matmuls): activations, norms, residuals and the activation collectives stay bf16. Serving keeps
    # low-precision activations where the engine runs them (W8A8).
    nb = a.activation_bytes if d.precision in ("bf16", "fp16", "fp32") or w.phase == "train" else wb
    hosts = max(math.ceil(d.n_chips / chip.chips_per_host), 1)
    return Setting(
        chip=chip,
        cfg=cfg,
        phase=w.phase,
        batch=batch,
        seq=w.seq,
        convention=w.convention,
        block=block,
        capacity_factor=w.capacity_factor,
        deployment=d,
        kernels=k,
        a=a,
        lay=lay,
        fabric=Fabric.for_chip(chip, a, slice_chips=slice_chips),
        pc=block_param_counts(cfg, block),
        peak=chip.peak(d.precision, per="chip"),
        hbm=chip.hbm_bw_gbps * 1e9 * a.memory_efficiency,
        wb=wb,
        nb=nb,
        kvb=BYTES[d.kv_precision] if d.kv_precision else nb,
        eff={
            "gemm": a.gemm_efficiency,
            "grouped_gemm": a.gemm_efficiency * a.grouped_gemm_relative,
            "attention": (
                k.attention_efficiency
                or (a.attention_gemm_efficiency or a.gemm_efficiency) * a.attention_relative
            )
            * _attention_peak_share(chip, w.phase, d.precision),
            "elementwise": 1.0,
        },
        tokens=batch * (1 if w.phase == "decode" else w.seq),
        hosts=hosts,
        straggler=1 + a.straggler_cv * math.sqrt(2 * math.log(hosts)) if hosts > 1 else 1.0,
        slice_note=slice_note,
    )
