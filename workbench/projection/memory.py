"""Does a setting fit in HBM? Per DEVICE: a TPU v7 chip is two TensorCore dies, each with its own half of
the HBM, so a shard must fit in 96 GiB, not in the chip's 192 GiB.

Counted: sharded weights, gradients and optimizer state; saved activations under the remat policy
(offloaded ones live in host memory); one layer's recomputed working set; the FSDP-gathered weights of
two layers (compute + prefetch); the logits of the loss. Approximate: allocator slack and compiler
temporaries are not modelled, so a setting within ~10% of capacity is reported as tight.
"""

from __future__ import annotations

from dataclasses import dataclass

from tpu_workbench.bench.flops import ParamCounts
from tpu_workbench.bench.projection.block import LLAMA, Block
from tpu_workbench.bench.projection.layout import Layout
from tpu_workbench.bench.workloads.config import DecoderConfig

TIGHT = 0.9


@dataclass(frozen=True)
class MemoryFit:
    per_device_gb: float
    capacity_per_device_gb: float
    breakdown_gb: dict

    @property
    def fits(self) -> bool:
        return self.per_device_gb <= self.capacity_per_device_gb

    @property
    def tight(self) -> bool:
        return self.fits and self.per_device_gb > TIGHT * self.capacity_per_device_gb


def sublayer_elements(cfg: DecoderConfig, block: Block = LLAMA) -> dict[str, float]:
    """Elements per token of each sub-layer's output (what saving it costs). A plain MLP has no second
    input matrix (``mlp_wi_1``). MLA: the query and KV latents join the q and k projections' outputs; a
    model with dense first layers counts the wider of its two MLPs."""
    qk, v = cfg.qk_dim, cfg.v_dim
    ffn = cfg.top_k * cfg.moe_ffn_dim + cfg.n_shared_experts * cfg.moe_ffn_dim if cfg.is_moe else cfg.ffn_dim
    if cfg.dense_layers:
        ffn = max(ffn, cfg.ffn_dim)
    return {
        "q_proj": cfg.n_heads * qk + cfg.q_lora_rank,
        "k_proj": cfg.n_kv_heads * qk + (cfg.kv_lora_rank + cfg.qk_rope_head_dim if cfg.is_mla else 0),
        "v_proj": cfg.n_kv_heads * v,
        "attention": cfg.n_heads * v,
        "out_proj": cfg.d_model,
        "mlp_wi_0": ffn,
        "mlp_wi_1": ffn if block.mlp_matrices == 3 else 0,
        "mlp_wo": cfg.d_model,
        "elementwise": 6 * cfg.d_model + ffn,
    }


def training_memory(
    cfg: DecoderConfig,
    pc: ParamCounts,
    lay: Layout,
    *,
    tokens_per_chip: float,
    devices_per_chip: int,
    hbm_gb_per_device: float,
    saved: frozenset[str],
    offloaded: frozenset[str],
    state_bytes_per_param: float,
    act_bytes: float,
    weight_bytes: float,
    block: Block = LLAMA,
    seq: int = 1,
) -> MemoryFit:
    """Training memory per device. ``saved`` sub-layers stay in HBM unless in ``offloaded``; with pipeline
    stages (``lay.pp``), the first stage's in-flight micro-batches (``seq`` turns tokens into sequences)."""
    dense = pc.total - pc.routed_experts
    shard = lay.fsdp * lay.tp * devices_per_chip * lay.pp  # a pipeline stage holds n_layers / pp layers
    expert_shard = max(lay.ep * lay.tp * lay.pp, shard)
    params = dense / shard + pc.routed_experts / expert_shard
    tok = tokens_per_chip / devices_per_chip
    # with a pipeline a chip runs pp x tok tokens through n_layers / pp layers, one micro-batch at a time
    batch = tokens_per_chip / max(seq, 1)
    micro = tok * lay.pp / lay.pipeline_microbatches(batch) if lay.pp > 1 else tok
    el = sublayer_elements(cfg, block)
    kept = [s for s in saved if s not in offloaded]
    per_layer_tok = (cfg.d_model + sum(el[s] for s in kept)) / lay.tp  # + the layer input
    working = sum(el.values()) / lay.tp * micro * act_bytes  # one layer recomputed / live
    gathered = 2 * (dense - pc.embedding - pc.lm_head) / max(cfg.n_layers, 1) * weight_bytes / lay.tp
    parts = {
        "weights_grads_optimizer": params * state_bytes_per_param,
        "saved_activations": per_layer_tok * tok * act_bytes * cfg.n_layers * lay.inflight_activations(batch),
        "layer_working_set": working,
        "gathered_weights_two_layers": gathered if lay.fsdp > 1 else 0.0,
        "logits_fp32": micro * cfg.vocab * 4 / lay.tp,
    }
    gb = {k: v / 1e9 for k, v in parts.items()}
    return MemoryFit(sum(gb.values()), hbm_gb_per_device, gb)


def inference_memory(
    cfg: DecoderConfig,
    pc: ParamCounts,
    lay: Layout,
    *,
    kv_bytes_per_chip: float,
    devices_per_chip: int,
    hbm_gb_per_device: float,
    weight_bytes: float,
    tokens_per_chip: float = 0.0,
    sequences_per_chip: float = 0.0,
    act_bytes: float = 2.0,
) -> MemoryFit:
    """Inference memory per device: sharded weights, the KV cache, and the step's live activations (one
    layer's working set, as in training, plus the fp32 logits of each sequence's last position)."""
    dense = pc.total - pc.routed_experts
    shard = lay.fsdp * lay.tp * devices_per_chip
    params = dense / shard + pc.routed_experts / max(lay.ep * lay.tp * devices_per_chip, shard)
    tok = tokens_per_chip / devices_per_chip
    working = sum(sublayer_elements(cfg).values()) / lay.tp * tok * act_bytes
    gb = {
        "weights": params * weight_bytes / 1e9,
        "kv_cache": kv_bytes_per_chip / devices_per_chip / 1e9,
        "activations": (working + sequences_per_chip / devices_per_chip * cfg.vocab * 4 / lay.tp) / 1e9,
    }
    return MemoryFit(sum(gb.values()), hbm_gb_per_device, gb)
