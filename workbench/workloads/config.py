"""Decoder LM configurations: dense (GQA, SwiGLU, RoPE, RMSNorm) and MoE (top-k, shared experts).

Presets run from ``tiny`` (seconds on a laptop CPU) to Llama-3-70B / Qwen3-235B-A22B class, which are
used for FLOP, memory and projection math even where they cannot run here. Published architecture
hyper-parameters are taken from the models' own config.json files (Hugging Face model cards).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from tpu_workbench.bench.errors import WorkbenchError, unknown


@dataclass(frozen=True)
class DecoderConfig:
    """Shape of a decoder-only transformer. ``n_experts == 0`` means dense FFN."""

    name: str
    vocab: int
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    ffn_dim: int
    head_dim: int = 0
    n_experts: int = 0
    top_k: int = 0
    moe_ffn_dim: int = 0
    n_shared_experts: int = 0
    max_seq: int = 2048
    tie_embeddings: bool = False
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    source: str = ""
    # sliding-window (local) attention: ``window_layers`` of the layers attend to the last ``window`` positions
    # only (gpt-oss, Gemma 3, Mistral); the rest attend to the whole causal prefix
    window: int = 0
    window_layers: int = 0
    # multi-head latent attention (DeepSeek-V2/V3; MaxText attention_type "mla"): queries through a rank
    # ``q_lora_rank`` bottleneck (0: one direct projection), keys and values up-projected per head from one
    # ``kv_lora_rank`` latent, plus a RoPE key of ``qk_rope_head_dim`` shared by the heads; set = MLA
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    # MoE models whose first ``dense_layers`` layers have a dense MLP of ``ffn_dim`` (DeepSeek-V3: 3)
    dense_layers: int = 0

    def __post_init__(self) -> None:
        _check_mla(self)
        if self.dense_layers and not (
            self.is_moe and self.ffn_dim > 0 and 0 < self.dense_layers < self.n_layers
        ):
            raise WorkbenchError(
                f"{self.name}: dense_layers ({self.dense_layers}) needs a MoE model with ffn_dim > 0 and fewer "
                f"dense layers than layers ({self.n_layers})"
            )
        if not 0 <= self.window_layers <= self.n_layers or (self.window_layers > 0) != (self.window > 0):
            raise WorkbenchError(
                f"{self.name}: sliding-window attention needs window > 0 and 0 < window_layers <= n_layers "
                f"(got window {self.window}, window_layers {self.window_layers})"
            )
        if self.head_dim == 0:
            object.__setattr__(self, "head_dim", self.d_model // self.n_heads)
        if self.n_heads % self.n_kv_heads:
            raise WorkbenchError(f"{self.name}: n_heads ({self.n_heads}) must be a multiple of n_kv_heads")
        if self.is_moe and not (0 < self.top_k <= self.n_experts and self.moe_ffn_dim > 0):
            raise WorkbenchError(f"{self.name}: MoE needs 0 < top_k <= n_experts and moe_ffn_dim > 0")

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def qk_dim(self) -> int:
        """Width of a query/key head: what QKᵀ contracts over (MLA: the no-RoPE part plus the RoPE part)."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim if self.is_mla else self.head_dim

    @property
    def v_dim(self) -> int:
        """Width of a value head: what attention·V produces and the output projection reads."""
        return self.v_head_dim if self.is_mla else self.head_dim

    @property
    def moe_layers(self) -> int:
        """Layers whose MLP is the mixture of experts (the rest are dense)."""
        return self.n_layers - self.dense_layers if self.is_moe else 0

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> DecoderConfig:
        return cls(**d)

    def with_(self, **changes) -> DecoderConfig:
        """A copy with some fields changed (e.g. a shorter max_seq)."""
        return replace(self, **changes)


_MLA_FIELDS = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")


def _check_mla(cfg: DecoderConfig) -> None:
    """An MLA config must name all its shapes: a half-given one would be counted as another model. Its
    ``head_dim`` is the query/key head (no-RoPE + RoPE part), set here when left 0."""
    given = [f for f in _MLA_FIELDS if getattr(cfg, f)]
    if not given:
        return
    missing = [f for f in _MLA_FIELDS[1:] if getattr(cfg, f) <= 0]
    if missing:
        raise WorkbenchError(
            f"{cfg.name}: multi-head latent attention needs kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim "
            f"and v_head_dim > 0 (q_lora_rank may be 0); missing: {', '.join(missing)}"
        )
    qk = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim
    if cfg.head_dim == 0:
        object.__setattr__(cfg, "head_dim", qk)
    elif cfg.head_dim != qk:
        raise WorkbenchError(
            f"{cfg.name}: an MLA head_dim must be qk_nope_head_dim + qk_rope_head_dim = {qk} (got {cfg.head_dim})"
        )


_HF = "Hugging Face config.json of "

PRESETS: dict[str, DecoderConfig] = {
    c.name: c
    for c in [
        DecoderConfig(
            "tiny",
            vocab=512,
            d_model=64,
            n_layers=2,
            n_heads=4,
            n_kv_heads=2,
            ffn_dim=192,
            max_seq=512,
            source="workbench test size",
        ),
        DecoderConfig(
            "tiny-moe",
            vocab=512,
            d_model=64,
            n_layers=2,
            n_heads=4,
            n_kv_heads=2,
            ffn_dim=192,
            n_experts=8,
            top_k=2,
            moe_ffn_dim=64,
            n_shared_experts=1,
            max_seq=512,
            source="workbench test size",
        ),
        DecoderConfig(
            "small",
            vocab=8192,
            d_model=256,
            n_layers=4,
            n_heads=8,
            n_kv_heads=4,
            ffn_dim=704,
            max_seq=1024,
            source="workbench benchmark size",
        ),
        DecoderConfig(
            "small-moe",
            vocab=8192,
            d_model=256,
            n_layers=4,
            n_heads=8,
            n_kv_heads=4,
            ffn_dim=704,
            n_experts=16,
            top_k=2,
            moe_ffn_dim=256,
            n_shared_experts=1,
            max_seq=1024,
            source="workbench benchmark size",
        ),
        DecoderConfig(
            "llama3-8b",
            vocab=128256,
            d_model=4096,
            n_layers=32,
            n_heads=32,
            n_kv_heads=8,
            ffn_dim=14336,
            max_seq=8192,
            rope_theta=500000.0,
            source=_HF + "meta-llama/Meta-Llama-3-8B",
        ),
        DecoderConfig(
            "llama3-70b",
            vocab=128256,
            d_model=8192,
            n_layers=80,
            n_heads=64,
            n_kv_heads=8,
            ffn_dim=28672,
            max_seq=8192,
            rope_theta=500000.0,
            source=_HF + "meta-llama/Meta-Llama-3-70B",
        ),
        DecoderConfig(
            "qwen3-32b",
            vocab=151936,
            d_model=5120,
            n_layers=64,
            n_heads=64,
            n_kv_heads=8,
            head_dim=128,
            ffn_dim=25600,
            max_seq=40960,
            rope_theta=1000000.0,
            norm_eps=1e-6,
            source=_HF + "Qwen/Qwen3-32B",
        ),
        DecoderConfig(
            "qwen3-30b-a3b",
            vocab=151936,
            d_model=2048,
            n_layers=48,
            n_heads=32,
            n_kv_heads=4,
            head_dim=128,
            ffn_dim=6144,
            n_experts=128,
            top_k=8,
            moe_ffn_dim=768,
            max_seq=40960,
            rope_theta=1000000.0,
            norm_eps=1e-6,
            source=_HF + "Qwen/Qwen3-30B-A3B",
        ),
        DecoderConfig(
            "qwen3-235b-a22b",
            vocab=151936,
            d_model=4096,
            n_layers=94,
            n_heads=64,
            n_kv_heads=4,
            head_dim=128,
            ffn_dim=12288,
            n_experts=128,
            top_k=8,
            moe_ffn_dim=1536,
            max_seq=40960,
            rope_theta=1000000.0,
            norm_eps=1e-6,
            source=_HF + "Qwen/Qwen3-235B-A22B",
        ),
    ]
}


def preset_names() -> list[str]:
    return list(PRESETS)


def get_config(name: str) -> DecoderConfig:
    """A preset by name; unknown names raise an error listing the presets."""
    try:
        return PRESETS[name]
    except KeyError:
        raise WorkbenchError(unknown("decoder preset", name, PRESETS)) from None


@dataclass(frozen=True)
class VisionConfig:
    """A few conv stages then a linear head; ``image`` is the square input size."""

    name: str = "small-cnn"
    image: int = 32
    channels: tuple[int, ...] = (16, 32, 64)
    classes: int = 10

    def to_dict(self) -> dict:
        return asdict(self)


PHASES = ("train", "prefill", "decode")
VISION_PHASES = ("train", "infer")
VISION_WORKLOADS = {"small-cnn": VisionConfig()}


def check_context(name: str, seq: int, phase: str = "train") -> None:
    """Refuse a sequence beyond a decoder preset's context (its config's ``max_seq``): a record measured at a
    length the model was never built for is not a figure of that model. Vision workloads have no sequence."""
    cfg = PRESETS.get(name)
    if cfg is None:
        return
    need = seq + (1 if phase == "decode" else 0)  # decode writes one position past the context it reads
    if need > cfg.max_seq:
        limit = cfg.max_seq - (1 if phase == "decode" else 0)
        raise WorkbenchError(
            f"seq {seq} is beyond {name}'s context: {phase} allows at most {limit} "
            f"(max_seq {cfg.max_seq} in its config)"
        )


def workload_names() -> list[str]:
    """Every name ``run_benchmark`` accepts: decoder presets plus vision models."""
    return [*preset_names(), *VISION_WORKLOADS]
