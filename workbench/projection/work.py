"""The work of one step on one chip, as timed operations: matmuls, grouped (MoE) matmuls, flash attention,
elementwise passes and the optimizer update.

Each operation's time is its own roofline, max(FLOPs / (efficiency x peak x tile fill), bytes / (HBM
bandwidth x memory efficiency)), and operations run one after another (a kernel does not overlap the
next one's math). Tile fill is the useful fraction of MXU tiles: a dimension of 128 on a 256x256 MXU
fills half of it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from tpu_workbench.bench.projection.block import LLAMA, Block
from tpu_workbench.bench.workloads.config import DecoderConfig


@dataclass
class Op:
    """One kernel of the forward pass (per chip, per step). ``sublayer`` ties it to remat (see remat.py)."""

    name: str
    kind: str  # gemm | grouped_gemm | attention | elementwise
    sublayer: str
    flops: float = 0.0
    bytes: float = 0.0
    fill: float = 1.0

    def time(self, peak: float, hbm: float, eff: dict[str, float]) -> float:
        math_t = self.flops / (peak * eff[self.kind] * self.fill) if self.flops else 0.0
        return max(math_t, self.bytes / hbm if self.bytes else 0.0)


def tile_fill(dims: tuple[float, ...], tile: int | None) -> float:
    """Useful fraction of tile-padded work for the matmul dimensions ``dims`` (None: no tiling modelled)."""
    if not tile:
        return 1.0
    fill = 1.0
    for d in dims:
        if d > 0:
            fill *= d / (math.ceil(d / tile) * tile)
    return fill


def _gemm(
    name: str,
    sublayer: str,
    m: float,
    k: float,
    n: float,
    nb: float,
    tile: int | None,
    *,
    kind: str = "gemm",
    groups: float = 1.0,
    fill: float | None = None,
) -> Op:
    """``groups`` matmuls of (m x k) @ (k x n) with ``nb`` bytes per element."""
    return Op(
        name,
        kind,
        sublayer,
        flops=2 * m * k * n * groups,
        bytes=(m * k + k * n + m * n) * nb * groups,
        fill=tile_fill((k, n), tile) if fill is None else fill,
    )


def grouped_fill(
    rows_per_group: float, k: float, n: float, mxu_tile: int | None, gmm_tile: tuple[int, int, int] | None
) -> float:
    """Useful fraction of a grouped (ragged) matmul's tiles. With the kernel's own (m, k, n) tiles
    (``gmm_tile``: a grouped-matmul kernel pads every expert's K and N to its tile, and each expert's rows
    end in a partly filled m-tile, half full on average when routing is not aligned to tiles). Without
    them, the MXU tile on K and N as for dense matmuls."""
    if not gmm_tile:
        return tile_fill((k, n), mxu_tile)
    tm, tk, tn = gmm_tile
    rows = max(rows_per_group, 1.0)
    return tile_fill((k,), tk) * tile_fill((n,), tn) * rows / (rows + tm / 2) * tile_fill((k, n), mxu_tile)


def _keys_per_query(seq: int, context: int | None, causal: bool, attn_block: int, window: int = 0) -> float:
    """Keys a flash-attention kernel computes per query. Causal block skipping keeps the diagonal blocks; a
    sliding window of W keeps the diagonal block and the ceil(W / block) blocks before it (whole blocks
    computed, the band masked inside them); decode reads min(context, W) cached positions plus itself."""
    if context is not None:
        return min(context, window or context) + 1
    full = (seq + attn_block) / 2 if causal else seq
    if not window:
        return full
    block = max(attn_block, 1)
    return min(full, block * (1 + math.ceil(window / block)))


@dataclass
class StepWork:
    """Forward operations of one step on one chip, plus the per-step extras of training."""

    ops: list[Op] = field(default_factory=list)
    loss_bytes: float = 0.0  # softmax cross-entropy over the vocabulary, forward + backward
    notes: list[str] = field(default_factory=list)


def forward_ops(
    cfg: DecoderConfig,
    *,
    tokens: float,
    seq: int,
    context: int | None,
    tp: int,
    ep: int,
    nb: float,
    tile: int | None,
    capacity_factor: float | None,
    attn_block: int,
    causal: bool = True,
    gmm_tile: tuple[int, int, int] | None = None,
    devices_per_chip: int = 1,
    block: Block = LLAMA,
    kv_nb: float | None = None,
) -> StepWork:
    """Forward work of ``tokens`` tokens on one chip of a tensor-parallel group of ``tp`` (each chip runs
    1/tp of the group's ``tokens * tp`` tokens' matmuls). ``context``: keys each query sees (decode: the
    cache length; training/prefill: None = the sequence, causal). ``ep``: expert-parallel degree.
    ``gmm_tile``: the (m, k, n) tiles of the setting's grouped-matmul kernel (None: MXU tiles only); each of
    the chip's ``devices_per_chip`` devices runs its own kernel on its share of the rows. ``block``: the
    layer's wiring (MLP matrices; attention and MLP in parallel share one norm and one residual add).
    ``kv_nb``: bytes per cached key/value element (None: ``nb``). Decode reads each sequence's whole cache
    (``context`` + 1 positions) every step: that read, not the weights, dominates at long context."""
    d, L = cfg.d_model, cfg.n_layers
    m = tokens * tp  # rows of the TP group's matmuls
    w = StepWork()
    ops = w.ops
    ops += _attention_projections(cfg, m, tp, nb, tile)
    ops.append(
        _attention(
            cfg, m, tp, nb, tile, seq=seq, context=context, causal=causal, attn_block=attn_block, kv_nb=kv_nb
        )
    )
    Lm, Ld = cfg.moe_layers, L - cfg.moe_layers  # MoE and dense-MLP layers (DeepSeek-V3: 58 and 3)
    ffn_elems = route_elems = 0.0  # summed over the layers
    if cfg.is_moe:
        cf = capacity_factor or 1.0
        routed = m * cfg.top_k * cf  # token-expert rows the TP group sends
        # each chip holds E/ep experts; after the all-to-all each local expert has ep * routed / E rows
        rows_per_expert = ep * routed / cfg.n_experts
        groups = Lm * cfg.n_experts / ep
        f_moe = cfg.moe_ffn_dim / tp
        ops.append(
            Op(
                "router",
                "gemm",
                "mlp_wi_0",
                flops=2 * m * d * cfg.n_experts / tp * Lm,
                bytes=(m * d + d * cfg.n_experts) * nb / tp * Lm,
            )
        )
        # experts no token is routed to are not read (decode at small batch): each of the ep group's tokens
        # picks top_k of E experts, so an expert is idle with probability (1 - top_k/E)^tokens
        tokens_in_group = ep * m * cf
        touched = 1.0 - (1.0 - cfg.top_k / cfg.n_experts) ** tokens_in_group
        for name, sub, k_, n_ in (
            ("moe_wi_0", "mlp_wi_0", d, f_moe),
            ("moe_wi_1", "mlp_wi_1", d, f_moe),
            ("moe_wo", "mlp_wo", f_moe, d),
        ):
            fill = grouped_fill(rows_per_expert / devices_per_chip, k_, n_, tile, gmm_tile)
            op = _gemm(
                name, sub, rows_per_expert, k_, n_, nb, tile, kind="grouped_gemm", groups=groups, fill=fill
            )
            op.bytes -= (1.0 - touched) * k_ * n_ * nb * groups
            ops.append(op)
        if cfg.n_shared_experts:
            fs = cfg.moe_ffn_dim * cfg.n_shared_experts / tp
            ops += [
                _gemm("shared_wi", "mlp_wi_0", m, d, 2 * fs, nb, tile, groups=Lm),
                _gemm("shared_wo", "mlp_wo", m, fs, d, nb, tile, groups=Lm),
            ]
        ffn_elems = Lm * (cfg.top_k * cf * cfg.moe_ffn_dim + cfg.n_shared_experts * cfg.moe_ffn_dim)
        route_elems = Lm * ((2 + 2 * cfg.top_k * cf) * d + 4 * cfg.n_experts)  # dispatch/combine, top-k
        if capacity_factor:
            w.notes.append(f"capacity factor {cf:g}: padded expert rows are computed (not model FLOPs)")
    if Ld:
        ops += _dense_mlp(m, d, cfg.ffn_dim / tp, nb, tile, Ld, block)
        ffn_elems += Ld * cfg.ffn_dim
    # elementwise passes that read and write HBM (norms, residual adds, RoPE, MLP activation, routing permutes)
    elems = (
        L * (_norm_residual_elems(d, block) + _attention_elementwise(cfg))
        + block.mlp_matrices * ffn_elems
        + route_elems
    )
    ops.append(Op("elementwise", "elementwise", "elementwise", bytes=tokens * elems * nb))
    ops.append(_gemm("lm_head", "lm_head", m, d, cfg.vocab / tp, nb, tile))
    w.loss_bytes = tokens * cfg.vocab * (2 + 4 + 4 + 2)  # logits read, fp32 softmax write/read, grad write
    return w


def _attention_projections(cfg: DecoderConfig, m: float, tp: int, nb: float, tile: int | None) -> list[Op]:
    """Matmuls into and out of attention. GQA: q, k, v and out (KV heads replicated when tp > n_kv_heads).
    MLA: the query and KV down-projections to their latents (not split by heads: every TP rank computes
    them whole), the up-projections to every head (split over tp), the output projection; KV down + up sit
    under remat's k_proj and v_proj."""
    d, L, h = cfg.d_model, cfg.n_layers, cfg.n_heads
    if not cfg.is_mla:
        hd = cfg.head_dim
        kv_rep = max(tp // cfg.n_kv_heads, 1)
        q_n, kv_n = h * hd / tp, cfg.n_kv_heads * hd * kv_rep / tp
        return [
            _gemm("q_proj", "q_proj", m, d, q_n, nb, tile, groups=L),
            _gemm("k_proj", "k_proj", m, d, kv_n, nb, tile, groups=L),
            _gemm("v_proj", "v_proj", m, d, kv_n, nb, tile, groups=L),
            _gemm("out_proj", "out_proj", m, q_n, d, nb, tile, groups=L),
        ]
    rq, rkv, qk = cfg.q_lora_rank, cfg.kv_lora_rank, cfg.qk_dim
    if rq:
        q = [
            _gemm("q_down", "q_proj", m, d, rq, nb, tile, groups=L),
            _gemm("q_up", "q_proj", m, rq, h * qk / tp, nb, tile, groups=L),
        ]
    else:
        q = [_gemm("q_proj", "q_proj", m, d, h * qk / tp, nb, tile, groups=L)]
    kv_up_n = h * (cfg.qk_nope_head_dim + cfg.v_head_dim) / tp
    return [
        *q,
        _gemm("kv_down", "k_proj", m, d, rkv + cfg.qk_rope_head_dim, nb, tile, groups=L),
        _gemm("kv_up", "v_proj", m, rkv, kv_up_n, nb, tile, groups=L),
        _gemm("out_proj", "out_proj", m, h * cfg.v_head_dim / tp, d, nb, tile, groups=L),
    ]


def _attention(
    cfg: DecoderConfig,
    m: float,
    tp: int,
    nb: float,
    tile: int | None,
    *,
    seq: int,
    context: int | None,
    causal: bool,
    attn_block: int,
    kv_nb: float | None,
) -> Op:
    """The flash-attention kernel of every layer: QKᵀ contracts over the query/key head, PV produces the
    value head (equal under GQA; MLA's 192 and 128), each filling its own share of the MXU tile. MLA in
    training runs as multi-head attention on the up-projected keys and values (one K/V head per head)."""
    qk, v, L = cfg.qk_dim, cfg.v_dim, cfg.n_layers
    heads = cfg.n_heads / tp
    kv_rep = max(tp // cfg.n_kv_heads, 1)
    kv_bytes = m * cfg.n_kv_heads * kv_rep / tp * (qk + v) * (nb if kv_nb is None else kv_nb)
    flops = bytes_ = 0.0
    for layers, k_ in (
        (L - cfg.window_layers, _keys_per_query(seq, context, causal, attn_block)),
        (cfg.window_layers, _keys_per_query(seq, context, causal, attn_block, cfg.window)),
    ):
        # prefill/training: K,V of the sequence re-read once per query block; decode: each sequence's cache
        # of `keys` positions read once per step (m sequences, one query each)
        reads = k_ if context is not None else max(k_ / max(attn_block, 1), 1)
        flops += 2 * m * heads * (qk + v) * k_ * layers
        bytes_ += (m * heads * (qk + v) * nb + kv_bytes * reads) * layers
    # time-weighted fill of the two matmuls (flops in proportion qk : v)
    fill = (qk + v) / (qk / tile_fill((qk,), tile) + v / tile_fill((v,), tile))
    return Op("attention", "attention", "attention", flops=flops, bytes=bytes_, fill=fill)


def _attention_elementwise(cfg: DecoderConfig) -> float:
    """Elements per token and layer of attention's elementwise passes: RoPE (read + write) of the queries
    and keys; MLA also assembles each head's key from its no-RoPE part and the shared RoPE key, counted in
    the same pass over the full query/key heads, and normalises its two latents (read + write)."""
    return 2 * (cfg.n_heads + cfg.n_kv_heads) * cfg.qk_dim + 2 * (cfg.q_lora_rank + cfg.kv_lora_rank)


def _dense_mlp(
    m: float, d: float, f: float, nb: float, tile: int | None, layers: int, block: Block
) -> list[Op]:
    """Matmuls of a dense MLP of width ``f``: gate and up (gated) or up only (plain), then down."""
    up = [("mlp_wi_0", d, f), ("mlp_wi_1", d, f)][: block.mlp_matrices - 1]
    return [_gemm(name, name, m, k, n, nb, tile, groups=layers) for name, k, n in (*up, ("mlp_wo", f, d))]


def _norm_residual_elems(d: float, block: Block) -> float:
    """Elements per token the norms and residual adds read and write. Sequential: two norms (read + write)
    and two residual adds (read 2, write 1) = 10 d. Parallel: one norm and one add of attention output,
    MLP output and residual (read 3, write 1) = 6 d."""
    return 6 * d if block.parallel else 10 * d
