"""Analytic parameter counts and FLOPs per token, with a named attention convention.

Conventions (both count every matmul weight, including the LM head, and exclude the embedding lookup,
which is a gather, not a matmul; MoE counts the router, the shared experts and top_k of the routed ones):

- ``"palm"``: attention scores and values over the full sequence: 4·L·H·hd·T per token forward
  (training ×3 = PaLM's 12·L·H·Q·T). nanoGPT and torchtitan count this way.
- ``"causal"``: the same term halved for causal masking, as MaxText and current Megatron do.

Decode (one new token attending over a context of c cached positions) has no causal saving, so both
conventions give 2·N_active + 4·L·H·hd·c.
"""

from __future__ import annotations

from dataclasses import dataclass

from tpu_workbench.bench.errors import WorkbenchError, unknown
from tpu_workbench.bench.workloads.config import DecoderConfig

CONVENTIONS = ("palm", "causal")
PHASES = ("train", "prefill", "decode")


@dataclass(frozen=True)
class ParamCounts:
    """Parameter counts by role. ``lm_head`` is 0 when tied to the embedding; ``head_matmul`` is the
    LM-head matmul size either way (a tied head still multiplies)."""

    embedding: int
    lm_head: int
    head_matmul: int
    attention: int
    dense_ffn: int
    router: int
    routed_experts: int
    routed_active: int
    shared_experts: int
    norms: int

    @property
    def total(self) -> int:
        return (
            self.embedding
            + self.lm_head
            + self.attention
            + self.dense_ffn
            + self.router
            + self.routed_experts
            + self.shared_experts
            + self.norms
        )

    @property
    def active_matmul(self) -> int:
        """Matmul weights one token multiplies through (the N of 2·N FLOPs per token)."""
        return (
            self.head_matmul
            + self.attention
            + self.dense_ffn
            + self.router
            + self.routed_active
            + self.shared_experts
        )

    @property
    def active(self) -> int:
        """Parameters one token touches (matmul weights + norms), for memory-traffic estimates."""
        return self.active_matmul + self.norms


def param_counts(cfg: DecoderConfig) -> ParamCounts:
    """Count parameters of :class:`tpu_workbench.bench.workloads.decoder.Decoder` for ``cfg`` (exactly; a test
    compares with ``sum(p.numel())``)."""
    d, hd, L = cfg.d_model, cfg.head_dim, cfg.n_layers
    if cfg.is_mla:
        attn = L * mla_attention_params(cfg)
    else:
        attn = L * (d * cfg.n_heads * hd + 2 * d * cfg.n_kv_heads * hd + cfg.n_heads * hd * d)
    swiglu = 3 * d
    if cfg.is_moe:
        Lm = cfg.moe_layers  # DeepSeek-V3: the first dense_layers layers have a dense MLP instead
        dense_ffn = cfg.dense_layers * swiglu * cfg.ffn_dim
        router = Lm * d * cfg.n_experts
        routed = Lm * cfg.n_experts * swiglu * cfg.moe_ffn_dim
        routed_active = Lm * cfg.top_k * swiglu * cfg.moe_ffn_dim
        shared = Lm * swiglu * cfg.moe_ffn_dim * cfg.n_shared_experts
    else:
        dense_ffn, router, routed, routed_active, shared = L * swiglu * cfg.ffn_dim, 0, 0, 0, 0
    latent_norms = L * (cfg.q_lora_rank + cfg.kv_lora_rank)  # MLA's RMSNorms of the query and KV latents
    head = cfg.vocab * d
    return ParamCounts(
        embedding=cfg.vocab * d,
        lm_head=0 if cfg.tie_embeddings else head,
        head_matmul=head,
        attention=attn,
        dense_ffn=dense_ffn,
        router=router,
        routed_experts=routed,
        routed_active=routed_active,
        shared_experts=shared,
        norms=(2 * L + 1) * d + latent_norms,
    )


def mla_attention_params(cfg: DecoderConfig) -> int:
    """Matmul weights of one MLA layer (MaxText ``calculate_mla_tflops_per_device`` counts the same
    matrices): query down + up (or one direct projection), KV down to the latent and the shared RoPE key,
    KV up to every head's no-RoPE key and value, output projection."""
    d, h, rq, rkv = cfg.d_model, cfg.n_heads, cfg.q_lora_rank, cfg.kv_lora_rank
    qk = cfg.qk_dim
    q = d * rq + rq * h * qk if rq else d * h * qk
    kv = d * (rkv + cfg.qk_rope_head_dim) + rkv * h * (cfg.qk_nope_head_dim + cfg.v_head_dim)
    return q + kv + h * cfg.v_head_dim * d


def _check(phase: str, convention: str) -> None:
    if phase not in PHASES:
        raise WorkbenchError(unknown("phase", phase, PHASES))
    if convention not in CONVENTIONS:
        raise WorkbenchError(unknown("FLOP convention", convention, CONVENTIONS))


def attention_flops_per_token(
    cfg: DecoderConfig, context: int, *, causal_halved: bool, decode: bool = False
) -> float:
    """Forward FLOPs of QKᵀ and AV for one query over ``context`` keys (halved if causal_halved).

    Sliding-window layers: in a sequence of ``context`` tokens the causal band holds T·W - W²/2 pairs
    (MaxText's count for gpt-oss and Gemma), per token (T·W - W²/2)/T keys, doubled where the convention does
    not halve for causality; a decode query attends min(context, W) cached positions. MLA: QKᵀ over the
    query/key head (no-RoPE + RoPE part) and attention·V over the value head, per head (MaxText's count)."""
    per_key = 2.0 * cfg.n_heads * (cfg.qk_dim + cfg.v_dim)
    full_layers = cfg.n_layers - cfg.window_layers
    full = per_key * full_layers * context
    if cfg.window_layers:
        w = min(cfg.window, context)
        band = float(w) if decode else (context * w - 0.5 * w * w) / context * (1.0 if causal_halved else 2.0)
        local = per_key * cfg.window_layers * band
    else:
        local = 0.0
    return (full / 2 if causal_halved else full) + local


def flops_per_token(cfg: DecoderConfig, phase: str, seq: int, *, convention: str = "palm") -> float:
    """Model FLOPs per processed token.

    train: 3 × forward (forward, input-grad, weight-grad), forward over a sequence of ``seq``.
    prefill: forward over ``seq``. decode: one token attending over ``seq`` cached positions (+ itself).
    Rematerialisation is not counted (this is MFU, not HFU).
    """
    _check(phase, convention)
    matmul = 2.0 * param_counts(cfg).active_matmul
    if phase == "decode":
        return matmul + attention_flops_per_token(cfg, seq + 1, causal_halved=False, decode=True)
    fwd = matmul + attention_flops_per_token(cfg, seq, causal_halved=convention == "causal")
    return 3.0 * fwd if phase == "train" else fwd


def flops_per_step(
    cfg: DecoderConfig, phase: str, *, batch: int, seq: int, convention: str = "palm"
) -> float:
    """FLOPs of one step as built by :func:`tpu_workbench.bench.workloads.steps.decoder_step`."""
    tokens = batch if phase == "decode" else batch * seq
    return flops_per_token(cfg, phase, seq, convention=convention) * tokens


def weight_bytes(cfg: DecoderConfig, bytes_per_param: float, *, active_only: bool = False) -> float:
    """Bytes of parameters; ``active_only`` counts only what one token touches (MoE)."""
    pc = param_counts(cfg)
    n = pc.active if active_only else pc.total
    return n * bytes_per_param


def kv_bytes_per_token(cfg: DecoderConfig, bytes_per_value: float) -> float:
    """KV-cache bytes per cached token (all layers, K and V; MLA: its latent and the shared RoPE key)."""
    if cfg.is_mla:
        return cfg.n_layers * (cfg.kv_lora_rank + cfg.qk_rope_head_dim) * bytes_per_value
    return 2.0 * cfg.n_layers * cfg.n_kv_heads * cfg.head_dim * bytes_per_value
