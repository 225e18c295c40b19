"""How a decoder layer is wired, where it differs from what :class:`DecoderConfig` assumes.

``DecoderConfig`` (and :mod:`tpu_workbench.bench.flops`) describe a Llama-style layer: a SwiGLU MLP (gate, up and down
matrices) after attention. Published benchmarks also ran older layouts, e.g. MaxText's default decoder of
2023 (``MaxText/layers/models.py`` before 2024-02): a plain ReLU MLP (up and down matrices only) computed in
parallel with attention from one normed input (PaLM / GPT-J). The projection must time and count the layer
that ran, so a :class:`Block` travels beside the config; the default is the Llama layer.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from tpu_workbench.bench.errors import WorkbenchError, unknown
from tpu_workbench.bench.flops import ParamCounts, flops_per_token, param_counts
from tpu_workbench.bench.workloads.config import DecoderConfig

MLP_KINDS = {"gated": 3, "plain": 2}  # weight matrices of the MLP: gate + up + down, or up + down


@dataclass(frozen=True)
class Block:
    """Wiring of one decoder layer. ``mlp``: 'gated' (SwiGLU/GeGLU: 3 matrices) or 'plain' (ReLU/GELU:
    2 matrices). ``parallel``: attention and MLP read the same normed input and their outputs are summed,
    so a tensor-parallel layer gathers its input and reduces its output once, not twice."""

    mlp: str = "gated"
    parallel: bool = False
    source: str = ""

    def __post_init__(self) -> None:
        if self.mlp not in MLP_KINDS:
            raise WorkbenchError(unknown("MLP kind", self.mlp, MLP_KINDS))

    @property
    def mlp_matrices(self) -> int:
        return MLP_KINDS[self.mlp]

    @property
    def is_default(self) -> bool:
        return self.mlp == "gated" and not self.parallel

    def label(self) -> str:
        return f"{self.mlp} MLP ({self.mlp_matrices} matrices), " + (
            "attention and MLP in parallel" if self.parallel else "attention then MLP"
        )

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict | None) -> Block:
        return cls(**d) if d else cls()


LLAMA = Block(source="DecoderConfig default (Llama-style layer)")


def block_param_counts(cfg: DecoderConfig, block: Block) -> ParamCounts:
    """:func:`tpu_workbench.bench.flops.param_counts` with the dense MLP's matrix count of ``block``."""
    pc = param_counts(cfg)
    if block.mlp_matrices == 3:
        return pc
    if cfg.is_moe:
        raise WorkbenchError(f"{cfg.name}: a {block.mlp} MLP is modelled for dense models only")
    return replace(pc, dense_ffn=cfg.n_layers * block.mlp_matrices * cfg.d_model * cfg.ffn_dim)


def block_flops_per_token(
    cfg: DecoderConfig, block: Block, phase: str, seq: int, *, convention: str = "palm"
) -> float:
    """Model FLOPs per token of ``cfg`` wired as ``block`` (the wiring changes only the matmul weights:
    2 FLOPs per weight forward, x3 in training)."""
    base = flops_per_token(cfg, phase, seq, convention=convention)
    delta = block_param_counts(cfg, block).active_matmul - param_counts(cfg).active_matmul
    return base + (3.0 if phase == "train" else 1.0) * 2.0 * delta
