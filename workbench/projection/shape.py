"""Model shapes beyond :class:`~workbench.workloads.config.DecoderConfig` that decide serving costs, and
their loader from a transformers ``config.json`` (a local file or a dict; nothing is downloaded).

:class:`ServingShape` says, per layer kind, what a cached position costs and what a sequence carries:

- full attention (GQA/MQA/MHA): 2 x kv_heads x head_dim values per position, every position kept;
- sliding-window (local) layers: the same, but at most ``window`` positions (Gemma 3, gpt-oss, Mistral);
- MLA (DeepSeek-V3): one latent of ``kv_lora_rank + qk_rope_head_dim`` values per position for all heads,
  and low-rank projections (``extra_params`` < 0: fewer than the MHA projections DecoderConfig counts);
- linear attention / Gated DeltaNet (Qwen3-Next, Qwen3.5): no per-position cache but a constant state per
  sequence (heads x key_dim x value_dim) read and written every step, and projections of their own
  (``extra_params``: what they add beyond the GQA projections DecoderConfig counts on every layer);
- attention sinks (gpt-oss): one learned logit per head, no cache or FLOPs worth modelling (noted).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from tpu_workbench.bench.errors import WorkbenchError
from tpu_workbench.bench.workloads.config import DecoderConfig


@dataclass(frozen=True)
class ServingShape:
    """Per-layer cache and state of a model (see the module docstring). ``full_layers + window_layers +
    linear_layers`` = the model's layers."""

    full_layers: int
    kv_values_per_position: float  # per layer: 2·kv_heads·head_dim (GQA) or kv_lora_rank + rope dim (MLA)
    window_layers: int = 0
    window: int = 0
    linear_layers: int = 0
    state_values_per_linear_layer: float = 0.0
    extra_params: float = 0.0  # attention-side weights beyond DecoderConfig's GQA count, read every step
    notes: tuple[str, ...] = field(default=())

    @classmethod
    def of(cls, cfg: DecoderConfig) -> ServingShape:
        """The Llama-style default: every layer full GQA attention."""
        return cls(cfg.n_layers, 2 * cfg.n_kv_heads * cfg.head_dim)

    def cached_positions(self, context: float) -> float:
        """Layer-positions of cache one sequence at ``context`` holds (and a decode step reads)."""
        return self.full_layers * context + self.window_layers * min(context, self.window or context)

    def kv_bytes(self, context: float, bytes_per_value: float) -> float:
        """KV-cache bytes of one sequence at ``context`` (all layers, all KV heads)."""
        return self.cached_positions(context) * self.kv_values_per_position * bytes_per_value

    def state_bytes(self, bytes_per_value: float) -> float:
        """Constant recurrent state of one sequence (linear-attention layers)."""
        return self.linear_layers * self.state_values_per_linear_layer * bytes_per_value


_REQUIRED = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")


def load_hf_config(source: str | Path | dict, name: str | None = None) -> tuple[DecoderConfig, ServingShape]:
    """(DecoderConfig, ServingShape) from a transformers config.json (path or dict). Understands Llama 3.x,
    Qwen2/3 dense and MoE, Qwen3-Next / Qwen3.5 (hybrid linear attention), DeepSeek-V3 (MLA), gpt-oss and
    Mixtral (local experts, sliding window, sinks), Gemma 3 (local/global). Missing fields: one-line error."""
    if isinstance(source, dict):
        raw, label = source, name or source.get("_name_or_path") or "config"
    else:
        try:
            raw = json.loads(Path(source).read_text())
        except (OSError, ValueError) as e:
            raise WorkbenchError(f"cannot read config.json {source}: {e}") from None
        label = name or Path(source).parent.name or "config"
    c = raw.get("text_config") or raw  # multimodal configs keep the decoder under text_config
    missing = [k for k in _REQUIRED if k not in c]
    if "intermediate_size" not in c and "moe_intermediate_size" not in c:
        missing.append("intermediate_size")
    if missing:
        raise WorkbenchError(f"config.json of {label} lacks {', '.join(missing)}")
    d, L, h = int(c["hidden_size"]), int(c["num_hidden_layers"]), int(c["num_attention_heads"])
    kv = int(c.get("num_key_value_heads") or h)
    hd = int(c.get("head_dim") or (c.get("qk_nope_head_dim", 0) + c.get("qk_rope_head_dim", 0)) or d // h)
    experts = int(c.get("num_experts") or c.get("num_local_experts") or c.get("n_routed_experts") or 0)
    top_k = int(
        c.get("num_experts_per_tok") or c.get("experts_per_token") or c.get("num_experts_per_token") or 0
    )
    moe_ffn = int(c.get("moe_intermediate_size") or (c.get("intermediate_size") if experts else 0) or 0)
    shared = 0
    if experts:
        if c.get("n_shared_experts"):
            shared = int(c["n_shared_experts"])
        elif c.get("shared_expert_intermediate_size"):
            shared = max(1, round(int(c["shared_expert_intermediate_size"]) / moe_ffn))
    notes = []
    ffn = int(c.get("intermediate_size") or moe_ffn)
    # DeepSeek-V3's first_k_dense_replace: its first layers have a dense MLP of intermediate_size
    dense = int(c.get("first_k_dense_replace") or 0) if experts and c.get("intermediate_size") else 0
    dense = dense if 0 < dense < L else 0
    if dense:
        notes.append(f"first {dense} layers have a dense MLP ({ffn}), the other {L - dense} experts")
    cfg = DecoderConfig(
        label,
        vocab=int(c["vocab_size"]),
        d_model=d,
        n_layers=L,
        n_heads=h,
        n_kv_heads=kv,
        ffn_dim=ffn,
        head_dim=hd,
        n_experts=experts,
        top_k=top_k if experts else 0,
        moe_ffn_dim=moe_ffn if experts else 0,
        n_shared_experts=shared,
        dense_layers=dense,
        max_seq=int(c.get("max_position_embeddings") or 2048),
        tie_embeddings=bool(c.get("tie_word_embeddings", False)),
        source=f"transformers config.json ({label})",
    )
    return cfg, _shape(c, cfg, notes)


def _layer_kinds(c: dict, L: int) -> list[str]:
    if isinstance(c.get("layer_types"), list) and len(c["layer_types"]) == L:
        return [str(t) for t in c["layer_types"]]
    if c.get("full_attention_interval"):  # Qwen3-Next / Qwen3.5: every n-th layer full, the rest linear
        n = int(c["full_attention_interval"])
        return ["full_attention" if (i + 1) % n == 0 else "linear_attention" for i in range(L)]
    if c.get("sliding_window") and c.get("sliding_window_pattern"):  # Gemma 3: every n-th layer global
        n = int(c["sliding_window_pattern"])
        return ["full_attention" if (i + 1) % n == 0 else "sliding_attention" for i in range(L)]
    if (
        c.get("sliding_window")
        and c.get("use_sliding_window", True)
        and c.get("model_type") in ("mistral", "mixtral")
    ):
        return ["sliding_attention"] * L
    return ["full_attention"] * L


def _shape(c: dict, cfg: DecoderConfig, notes: list[str]) -> ServingShape:
    kinds = _layer_kinds(c, cfg.n_layers)
    unknown = sorted(set(kinds) - {"full_attention", "sliding_attention", "linear_attention"})
    if unknown:
        raise WorkbenchError(f"config.json of {cfg.name}: unknown layer type {unknown[0]!r}")
    d, h, hd = cfg.d_model, cfg.n_heads, cfg.head_dim
    gqa = d * h * hd * 2 + 2 * d * cfg.n_kv_heads * hd  # what DecoderConfig counts per layer
    extra = 0.0
    if c.get("kv_lora_rank"):  # MLA: one compressed latent + the shared RoPE key per position
        r_kv, rope = int(c["kv_lora_rank"]), int(c.get("qk_rope_head_dim", 0))
        r_q, v = int(c.get("q_lora_rank") or 0), int(c.get("v_head_dim") or hd)
        q = d * r_q + r_q * h * hd if r_q else d * h * hd
        mla = q + d * (r_kv + rope) + r_kv * h * (hd - rope + v) + h * v * d
        extra = cfg.n_layers * (mla - gqa)
        per_pos = float(r_kv + rope)
        notes.append("MLA: cache = kv_lora_rank + qk_rope_head_dim values per position (absorbed decode)")
    else:
        per_pos = 2.0 * cfg.n_kv_heads * cfg.head_dim
    if "sinks" in json.dumps(c.get("architectures", "")).lower() or c.get("model_type") == "gpt_oss":
        notes.append("attention sinks: one logit per head, not modelled (negligible)")
    state = 0.0
    n_linear = kinds.count("linear_attention")
    if n_linear:
        need = (
            "linear_num_key_heads",
            "linear_num_value_heads",
            "linear_key_head_dim",
            "linear_value_head_dim",
        )
        missing = [k for k in need if k not in c]
        if missing:
            raise WorkbenchError(
                f"config.json of {cfg.name} has linear-attention layers but lacks {', '.join(missing)}"
            )
        nk, nv = int(c["linear_num_key_heads"]), int(c["linear_num_value_heads"])
        dk, dv = int(c["linear_key_head_dim"]), int(c["linear_value_head_dim"])
        conv = int(c.get("linear_conv_kernel_dim", 4))
        state = nv * dk * dv + (conv - 1) * (2 * nk * dk + nv * dv)  # delta-rule state + conv tail
        gdn = d * (2 * nk * dk + 2 * nv * dv + 2 * nv) + nv * dv * d  # in_proj qkvz + ba, out_proj
        extra += n_linear * (gdn - gqa)  # DecoderConfig already counts GQA projections on every layer
        notes.append(f"{n_linear} Gated-DeltaNet layers: constant state per sequence, no KV cache")
    return ServingShape(
        full_layers=kinds.count("full_attention"),
        kv_values_per_position=per_pos,
        window_layers=kinds.count("sliding_attention"),
        window=int(c.get("sliding_window") or 0),
        linear_layers=n_linear,
        state_values_per_linear_layer=float(state),
        extra_params=float(extra),
        notes=tuple(notes),
    )
