"""Serving model: one model replica under continuous batching with chunked prefill.

A replica is ``chips`` chips in a parallel layout (tp / ep / dp-attention, e.g. ``'tp'`` or
``'dp=8,ep=8'``) times ``pp`` pipeline stages; ``replicas`` of them serve independently (data parallel).

- :class:`StepModel` - the time of one engine step that decodes ``D`` sequences (reading each one's whole
  KV cache and its weights shard once) and prefills ``P`` prompt tokens (Sarathi/vLLM chunked prefill),
  from the same kernels, efficiencies and collectives as :func:`~workbench.projection.model.project`.
- :func:`kv_capacity` - HBM left for the KV cache after weights and activations -> paged blocks -> the most
  sequences of a request mix that can be resident at once.
- :func:`steady_state` - closed form of a saturated replica at concurrency ``B``: each request needs ``I``
  prefill tokens per ``O`` decode steps, so a step carries ``B`` decode tokens and ``B·I/O`` prefill tokens
  at a mean context ``I + O/2``. Exact for a fluid steady state with fixed lengths; the discrete-event
  simulation (:mod:`~workbench.projection.serving_sim`) covers queues, spread lengths and percentiles, and a
  test checks that the two agree on steady states.
- :func:`curve` / :func:`at_interactivity` - tok/s/chip vs tok/s/user, and $/M input, $/M output and $/M
  total tokens at a chosen interactivity; a setting that does not fit has no point and no price.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import lru_cache

from tpu_workbench.bench.catalog import Catalog, load_catalog
from tpu_workbench.bench.cost import usd_per_million_tokens
from tpu_workbench.bench.errors import WorkbenchError
from tpu_workbench.bench.projection.assumptions import Assumptions
from tpu_workbench.bench.projection.memory import sublayer_elements
from tpu_workbench.bench.projection.shape import ServingShape
from tpu_workbench.bench.projection.spec import BYTES, Deployment, Kernels, Setting, Workload, resolve
from tpu_workbench.bench.projection.step import tp_allreduces_per_layer
from tpu_workbench.bench.projection.work import Op, forward_ops, tile_fill
from tpu_workbench.bench.workloads.config import DecoderConfig, get_config

HBM_UTILIZATION = 0.9  # vLLM's default gpu_memory_utilization: the rest is allocator slack and runtime


@dataclass(frozen=True)
class ServingDeployment:
    """Where and how a model is served. ``chips`` per pipeline stage in ``layout``; ``pp`` stages;
    ``replicas`` independent copies. ``chunk_tokens``: the engine's token budget per step (decode tokens
    first, the rest prefill chunks). ``block_tokens``: paged KV block size. ``max_batch``: most running
    sequences per replica (vLLM max_num_seqs)."""

    chip: str
    chips: int = 8
    layout: str = "tp"
    pp: int = 1
    replicas: int = 1
    precision: str = "bf16"
    kv_precision: str | None = None
    max_batch: int = 256
    chunk_tokens: int = 2048
    block_tokens: int = 16
    hbm_utilization: float = HBM_UTILIZATION
    seq_overhead_s: float = 0.0  # engine time per running sequence per step beyond the roofline (fitted)
    # the engine's exposed host time per step, whatever its batch (engine_costs.py: sourced, 0 where overlapped)
    step_overhead_s: float = 0.0
    # > 0: a dense KV cache of this many positions preallocated per slot and attended over whole every decode
    # step with a mask (jetstream-pytorch); 0: paged, a decode reads only its sequence's positions
    dense_cache_tokens: int = 0
    # weight-only quantization (W8A16: jetstream-pytorch --quantize_weights without --quantize_activation):
    # weights stored and read at ``precision``, matmuls on bf16 activations at the bf16 peak
    weight_only: bool = False
    # > 0: vLLM on TPU with attention tensor parallel over this many devices (--tensor-parallel-size; a device is
    # a TensorCore, two per TPU v7 chip): its paged KV cache is tpu-inference's ragged-paged-attention layout,
    # which stores each device's K and V heads padded to the cache dtype's packing (see StepModel.kv_share);
    # 0: not modelled (another engine, data-parallel attention, or unstated)
    tp_devices: int = 0

    @property
    def chips_per_replica(self) -> int:
        return self.chips * self.pp


@dataclass(eq=False)
class StepModel:
    """Engine step times of one replica (seconds). Built once per (model, deployment); :meth:`time` is
    cached on rounded arguments so the discrete-event simulation stays fast."""

    cfg: DecoderConfig
    deployment: ServingDeployment
    setting: Setting = field(repr=False)
    shape: ServingShape = field(repr=False, default=None)

    @classmethod
    def build(
        cls,
        cfg: DecoderConfig | str,
        deployment: ServingDeployment,
        *,
        shape: ServingShape | None = None,
        assumptions: Assumptions | None = None,
        catalog: Catalog | None = None,
    ) -> StepModel:
        """``shape``: caches and states per layer kind (:func:`~workbench.projection.shape.load_hf_config`);
        None = every layer full attention."""
        cfg = get_config(cfg) if isinstance(cfg, str) else cfg
        d = deployment
        if d.pp < 1 or cfg.n_layers % d.pp:
            raise WorkbenchError(f"pp={d.pp} must divide the layer count ({cfg.n_layers}) of {cfg.name}")
        per_stage = cfg.n_layers // d.pp
        # (a stage's share of the dense-MLP layers, proportionally: DeepSeek-V3's first 3 of 61)
        stage = cfg.with_(n_layers=per_stage, dense_layers=cfg.dense_layers * per_stage // cfg.n_layers)
        s = resolve(
            Workload(stage, "decode", batch=1, seq=1),
            Deployment(d.chip, d.chips, d.layout, 1, d.precision, d.kv_precision),
            Kernels(),
            assumptions,
            catalog or load_catalog(),
        )
        if d.weight_only:
            s = replace(s, peak=s.chip.peak("bf16", per="chip"), nb=BYTES["bf16"])
        shape = shape or ServingShape.of(cfg)
        if d.pp > 1:  # a stage holds 1/pp of every kind of layer
            shape = ServingShape(
                shape.full_layers / d.pp,
                shape.kv_values_per_position,
                shape.window_layers / d.pp,
                shape.window,
                shape.linear_layers / d.pp,
                shape.state_values_per_linear_layer,
                shape.extra_params / d.pp,
                shape.notes,
            )
        return cls(cfg, d, s, shape)

    @property
    def chip(self):
        return self.setting.chip

    def time(
        self, decode_seqs: float, decode_context: float, prefill_tokens: float, prefill_context=0.0
    ) -> float:
        """Seconds of one step of the whole replica: ``decode_seqs`` sequences at a mean context
        ``decode_context`` each emit one token, and ``prefill_tokens`` prompt tokens after ``prefill_context``
        cached ones are prefilled. With ``pp`` stages the batch runs as ``pp`` micro-batches, so a token of
        one sequence takes ``pp`` stage steps; the engine's host cost per step (``step_overhead_s``) once."""
        pp = self.deployment.pp
        return self.deployment.step_overhead_s + pp * _stage_time(
            self,
            round(decode_seqs / pp, 3),
            round(decode_context),
            round(prefill_tokens / pp),
            round(prefill_context),
        )

    def weights_bytes_per_chip(self) -> float:
        s = self.setting
        pc, lay = s.pc, s.lay
        dense = pc.total - pc.routed_experts + self.shape.extra_params
        experts = pc.routed_experts / max(lay.ep * lay.tp, lay.fsdp * lay.tp)
        return (dense / (lay.tp * lay.fsdp) + experts) * s.wb

    def kv_share(self) -> float:
        """Bytes one chip of a TP group stores (and reads) per byte of a sequence's KV cache: its KV heads (at
        least one); an MLA latent is not split by heads, so every chip holds all of it. With ``tp_devices``
        (vLLM on TPU, attention tensor parallel over devices) the cache is tpu-inference's RPA layout: each
        device holds ``n_kv / tp_devices`` KV heads (one, replicated, when there are more devices than heads)
        and stores their K and V heads in rows of ``packing`` = 32 / bits of the cache dtype, padded
        (vllm-project/tpu-inference ``kernels/ragged_paged_attention/v3/kernel.py`` ``get_kv_cache_shape``:
        ``align_to(num_kv_heads * 2, kv_packing)``, head_dim aligned to 128; the head_dim-64 kernel packs K and
        V in one 128-lane row, ``align_to(num_kv_heads, kv_packing)``; ``runner/kv_cache.py`` applies it per
        device). One fp8 KV head per device thus takes two heads' bytes."""
        s = self.setting
        cfg = s.cfg
        if self.shape.kv_values_per_position != 2 * cfg.n_kv_heads * cfg.head_dim:
            return 1.0
        dev = self.deployment.tp_devices
        if not dev:
            return 1.0 / min(s.lay.tp, cfg.n_kv_heads)
        if dev % s.lay.tp:
            raise WorkbenchError(f"tp_devices={dev} must be a multiple of the chips' tp={s.lay.tp}")
        heads = cfg.n_kv_heads / dev if dev <= cfg.n_kv_heads else 1.0
        packing = max(round(4 / s.kvb), 1)
        if cfg.head_dim == 64:
            stored = math.ceil(heads / packing) * packing * 128  # K and V share a 128-lane row
        else:
            stored = math.ceil(2 * heads / packing) * packing * math.ceil(cfg.head_dim / 128) * 128
        return dev // s.lay.tp * stored / (2 * cfg.n_kv_heads * cfg.head_dim)

    def seq_bytes_per_chip(self, context: float) -> float:
        """Bytes one sequence at ``context`` keeps on each chip that holds it: KV share + state share."""
        s = self.setting
        return (
            self.shape.kv_bytes(context, s.kvb) * self.kv_share() + self.shape.state_bytes(s.kvb) / s.lay.tp
        )

    def kv_bytes_per_token_per_chip(self) -> float:
        """KV bytes one cached position (all full-attention layers) of one sequence takes on a chip."""
        sh = self.shape
        return sh.kv_values_per_position * sh.full_layers * self.setting.kvb * self.kv_share()


@lru_cache(maxsize=200_000)
def _stage_time(m: StepModel, d_seqs: float, d_ctx: int, p_tok: int, p_ctx: int) -> float:
    s = m.setting
    cfg, lay, chips = s.cfg, s.lay, m.deployment.chips
    rows = d_seqs + p_tok
    if rows <= 0:
        return 0.0
    work = forward_ops(
        cfg,
        tokens=rows / chips,
        seq=max(d_ctx, 1),
        context=0,
        tp=lay.tp,
        ep=lay.ep,
        nb=s.nb,
        tile=s.chip.mxu_tile,
        capacity_factor=None,
        attn_block=512,
        devices_per_chip=s.chip.devices_per_chip,
        block=s.block,
        kv_nb=s.kvb,
    )
    ops = [op for op in work.ops if op.name not in ("attention", "lm_head")]
    ops += _attention_ops(m, d_seqs / chips, d_ctx, p_tok / chips, p_ctx)
    heads = 1 if p_tok == 0 else (d_seqs + 1)  # logits only for sequences that emit a token
    lm = forward_ops(
        cfg.with_(n_layers=0),
        tokens=heads / chips,
        seq=1,
        context=0,
        tp=lay.tp,
        ep=1,
        nb=s.nb,
        tile=s.chip.mxu_tile,
        capacity_factor=None,
        attn_block=512,
    ).ops
    ops += [op for op in lm if op.name == "lm_head"]  # every stage pays it: the last stage bounds the pipe
    t = sum(op.time(s.peak, s.hbm, s.eff) for op in ops)
    act = rows / chips * lay.tp * cfg.d_model * s.nb
    passes = tp_allreduces_per_layer(s.block, recomputed_outputs=False) / 2
    t += passes * cfg.n_layers * s.fabric.ring(act, lay.tp, 1, 2)
    if cfg.is_moe:
        a2a = rows / chips * cfg.top_k * cfg.d_model * s.nb
        t += 2 * cfg.n_layers * s.fabric.all_to_all(a2a, lay.ep, lay.tp)
    return t + m.deployment.seq_overhead_s * (d_seqs + (1 if p_tok else 0))


def _attention_ops(m: StepModel, d_seqs: float, d_ctx: int, p_tok: float, p_ctx: int) -> list[Op]:
    """Attention of one chip's share: decode queries read their sequences' whole caches (windowed layers up
    to the window) and states; a prefill chunk attends causally over the cached prefix and itself (FLOPs
    4·H·hd per query-key pair); linear-attention layers run their own projections and state updates."""
    s, shape = m.setting, m.shape
    cfg, lay = s.cfg, s.lay
    heads = cfg.n_heads / lay.tp
    attn_layers = shape.full_layers + shape.window_layers
    q_pos = 2 * heads * cfg.head_dim * s.nb * attn_layers  # query in + output out per token
    fill = tile_fill((cfg.head_dim,), s.chip.mxu_tile)
    group = lay.tp  # a TP group shares its sequences: each chip holds their heads' share
    state_rw = 2 * shape.state_bytes(s.kvb) / lay.tp  # read and write each step
    state_flops = 4 * shape.linear_layers * shape.state_values_per_linear_layer / lay.tp
    ops = []
    if shape.extra_params > 0:  # (MLA's smaller projections are not credited back: conservative)
        rows = (d_seqs + p_tok) * group
        ops.append(
            Op(
                "linear_attention_proj",
                "gemm",
                "attention",
                flops=2 * rows * shape.extra_params / lay.tp,
                bytes=shape.extra_params * s.wb / lay.tp,
            )
        )
    if d_seqs:
        seqs = d_seqs * group
        pos = shape.cached_positions(d_ctx + 1)
        ops.append(
            Op(
                "attention_decode",
                "attention",
                "attention",
                flops=seqs * (4 * heads * cfg.head_dim * pos + state_flops),
                bytes=seqs * (shape.kv_bytes(d_ctx + 1, s.kvb) * m.kv_share() + q_pos + state_rw),
                fill=fill,
            )
        )
    if p_tok:
        toks = p_tok * group
        keys = p_ctx + (toks + 512) / 2  # causal within the chunk, block skipping keeps the diagonal
        ops.append(
            Op(
                "attention_prefill",
                "attention",
                "attention",
                flops=toks * (4 * heads * cfg.head_dim * shape.cached_positions(keys) + state_flops),
                bytes=shape.kv_bytes(p_ctx + toks, s.kvb) * m.kv_share() + toks * q_pos + state_rw,
                fill=fill,
            )
        )
    return ops


@dataclass(frozen=True)
class Capacity:
    """KV capacity of one replica for a request mix: the most sequences resident at once, or why none."""

    kv_gb_per_chip: float
    blocks_per_chip: int
    max_seqs: int
    weights_gb_per_chip: float
    infeasible: str | None = None


def kv_capacity(m: StepModel, max_len: int) -> Capacity:
    """Paged KV capacity for sequences of up to ``max_len`` positions (each reserves ceil(max_len / block)
    blocks, vLLM without preemption) after the weights and the step's activations, at ``hbm_utilization``
    of HBM. A replica whose weights alone do not fit has capacity 0 and an ``infeasible`` reason."""
    d, s = m.deployment, m.setting
    max_len = d.dense_cache_tokens or max_len  # a dense cache holds its full length per slot
    hbm = s.chip.hbm_gbytes_per_device * s.chip.devices_per_chip * 1e9 * d.hbm_utilization
    weights = m.weights_bytes_per_chip()
    rows = d.chunk_tokens / d.chips
    act = sum(sublayer_elements(s.cfg, s.block).values()) / s.lay.tp * rows * s.nb
    act += d.max_batch / d.chips * s.cfg.vocab * 4 / s.lay.tp
    free = hbm - weights - act
    gb = weights / 1e9
    if free <= 0:
        why = (
            f"does not fit in HBM: weights {gb:.1f} GB + activations {act / 1e9:.1f} GB per chip exceed "
            f"{hbm / 1e9:.1f} GB ({d.hbm_utilization:.0%} of HBM)"
        )
        return Capacity(0.0, 0, 0, gb, why)
    block = d.block_tokens * m.kv_bytes_per_token_per_chip()
    blocks = int(free // block) if block else 0
    per_seq = m.seq_bytes_per_chip(math.ceil(max_len / d.block_tokens) * d.block_tokens)
    seqs_per_chip_share = int(free // per_seq)
    # a TP group holds each sequence on all tp chips (its heads' share); dp-attention chips hold their own
    max_seqs = seqs_per_chip_share * d.chips // s.lay.tp
    why = None
    if max_seqs < 1:
        why = f"does not fit in HBM: not one sequence of {max_len} positions fits beside the weights ({gb:.1f} GB)"
    return Capacity(free / 1e9, blocks, min(max_seqs, d.max_batch), gb, why)


@dataclass(frozen=True)
class SteadyState:
    """A saturated replica at ``concurrency`` running sequences of ``input_tokens`` / ``output_tokens``."""

    concurrency: int
    step_s: float
    decode_only_step_s: float
    ttft_s: float
    output_tok_s_per_chip: float
    input_tok_s_per_chip: float

    @property
    def tok_s_per_user(self) -> float:
        return 1.0 / self.step_s

    @property
    def tpot_s(self) -> float:
        return self.step_s

    @property
    def total_tok_s_per_chip(self) -> float:
        return self.output_tok_s_per_chip + self.input_tok_s_per_chip


def steady_state(m: StepModel, input_tokens: int, output_tokens: int, concurrency: int) -> SteadyState:
    """Closed form of a saturated replica (see the module docstring). A decode step attends over the mean
    resident context I + O/2 (paged), or over the whole preallocated cache with ``dense_cache_tokens``."""
    b, i, o = concurrency, input_tokens, output_tokens
    ctx = m.deployment.dense_cache_tokens or i + o / 2
    prefill = b * i / o
    step = m.time(b, ctx, prefill, i / 2)
    decode_only = m.time(b, ctx, 0)
    per_step_prefill = max(m.deployment.chunk_tokens - b, 1)
    ttft = math.ceil(i / per_step_prefill) * step
    chips = m.deployment.chips_per_replica
    return SteadyState(b, step, decode_only, ttft, b / step / chips, prefill / step / chips)


@dataclass(frozen=True)
class CurvePoint:
    """One point of the throughput-interactivity curve; ``infeasible`` set = no numbers."""

    concurrency: int
    tok_s_per_user: float | None
    output_tok_s_per_chip: float | None
    total_tok_s_per_chip: float | None
    ttft_s: float | None
    infeasible: str | None = None


def curve(m: StepModel, input_tokens: int, output_tokens: int, concurrencies=None) -> list[CurvePoint]:
    """tok/s/chip vs tok/s/user over concurrencies (default powers of two up to the KV capacity); a
    concurrency beyond the capacity is a row that says so, with no numbers."""
    cap = kv_capacity(m, input_tokens + output_tokens)
    if cap.infeasible:
        return [CurvePoint(0, None, None, None, None, cap.infeasible)]
    levels = concurrencies or sorted({*(2**k for k in range(int(math.log2(cap.max_seqs)) + 1)), cap.max_seqs})
    out = []
    for b in levels:
        if b > cap.max_seqs:
            why = f"does not fit in HBM: {b} sequences of {input_tokens + output_tokens} positions exceed the KV capacity ({cap.max_seqs})"
            out.append(CurvePoint(b, None, None, None, None, why))
            continue
        st = steady_state(m, input_tokens, output_tokens, b)
        out.append(
            CurvePoint(b, st.tok_s_per_user, st.output_tok_s_per_chip, st.total_tok_s_per_chip, st.ttft_s)
        )
    return out


@dataclass(frozen=True)
class Priced:
    """Cost at an interactivity target: the largest concurrency whose tok/s/user meets it."""

    target_tok_s_per_user: float
    usd_per_chip_hour: float
    state: SteadyState | None
    usd_per_m_output: float | None
    usd_per_m_input: float | None
    usd_per_m_total: float | None
    infeasible: str | None = None


def at_interactivity(
    m: StepModel,
    input_tokens: int,
    output_tokens: int,
    target_tok_s_per_user: float,
    usd_per_chip_hour: float,
    state=None,
) -> Priced:
    """$/M output, $/M input and $/M total tokens at the largest concurrency meeting ``target``. The chip
    time of a step is split between output and input tokens by the decode-only share of the step time.
    ``state``: the closed form (default :func:`steady_state`; serving_chunked's chunk-exact one for comparison)."""
    steady = state or steady_state
    cap = kv_capacity(m, input_tokens + output_tokens)
    none = dict(state=None, usd_per_m_output=None, usd_per_m_input=None, usd_per_m_total=None)
    if cap.infeasible:
        return Priced(target_tok_s_per_user, usd_per_chip_hour, infeasible=cap.infeasible, **none)
    lo, hi = 0, cap.max_seqs
    while lo < hi:  # tok/s/user falls as concurrency grows
        mid = (lo + hi + 1) // 2
        if steady(m, input_tokens, output_tokens, mid).tok_s_per_user >= target_tok_s_per_user:
            lo = mid
        else:
            hi = mid - 1
    if lo == 0:
        best = steady(m, input_tokens, output_tokens, 1).tok_s_per_user
        why = f"misses the SLO: even one sequence gets {best:.1f} tok/s/user < {target_tok_s_per_user:g}"
        return Priced(target_tok_s_per_user, usd_per_chip_hour, infeasible=why, **none)
    st = steady(m, input_tokens, output_tokens, lo)
    share_out = min(st.decode_only_step_s / st.step_s, 1.0)
    return Priced(
        target_tok_s_per_user,
        usd_per_chip_hour,
        st,
        usd_per_million_tokens(usd_per_chip_hour * share_out, st.output_tok_s_per_chip),
        usd_per_million_tokens(usd_per_chip_hour * (1 - share_out), st.input_tok_s_per_chip)
        if share_out < 1
        else 0.0,
        usd_per_million_tokens(usd_per_chip_hour, st.total_tok_s_per_chip),
    )
