"""Phase step functions: what one timed call does for train, prefill and decode.

Each builder returns a ``Step``: a zero-argument callable plus the tokens it processes, so the timing
code never needs to know about phases. Inputs are created once, outside the timed region.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from tpu_workbench.bench.errors import WorkbenchError, unknown
from tpu_workbench.bench.workloads.config import PHASES, VISION_PHASES, DecoderConfig, VisionConfig
from tpu_workbench.bench.workloads.decoder import KVCache, build_model
from tpu_workbench.bench.workloads.vision import build_vision_model

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass
class Step:
    """One benchmarkable call. ``tokens`` is what one call processes (``unit`` says tokens or images);
    ``output_tokens`` is the generated share (decode) so total and output throughput stay apart."""

    fn: Callable[[], object]
    tokens: int
    output_tokens: int
    unit: str = "tokens"
    info: dict = field(default_factory=dict)


def dtype_of(precision: str) -> torch.dtype:
    if precision not in DTYPES:
        raise WorkbenchError(unknown("precision for running", precision, DTYPES))
    return DTYPES[precision]


def _maybe_compile(module: torch.nn.Module, compiled: bool, device: str, backend: str | None):
    if not compiled:
        return module
    backend = backend or ("tpu" if device == "tpu" else "inductor")
    return torch.compile(module, backend=backend)


def decoder_step(
    cfg: DecoderConfig,
    phase: str,
    device: str,
    *,
    batch: int,
    seq: int,
    precision: str = "fp32",
    compiled: bool = False,
    compile_backend: str | None = None,
    seed: int = 0,
) -> Step:
    """Build the model on ``device`` and return the step for ``phase``.

    train: forward + cross-entropy + backward + AdamW (foreach=False, portable) on (batch, seq) tokens.
    prefill: forward over (batch, seq) under no_grad.
    decode: one new token per sequence attending to a KV cache already holding ``seq`` positions;
    every call rewrites the same position, so repeated calls measure the steady cost at context ``seq``.
    """
    if phase not in PHASES:
        raise WorkbenchError(unknown("phase", phase, PHASES))
    need = seq + (1 if phase == "decode" else 0)
    if need > cfg.max_seq:
        cfg = cfg.with_(max_seq=need)
    dtype = dtype_of(precision)
    model = build_model(cfg, seed=seed).to(device=device, dtype=dtype)
    gen = torch.Generator().manual_seed(seed + 1)
    tokens = torch.randint(0, cfg.vocab, (batch, seq + 1), generator=gen).to(device)
    run = _maybe_compile(model, compiled, device, compile_backend)
    if phase == "train":
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
        inputs, targets = tokens[:, :-1], tokens[:, 1:]

        def train_step():
            opt.zero_grad(set_to_none=True)
            logits = run(inputs)
            loss = F.cross_entropy(logits.reshape(-1, cfg.vocab).float(), targets.reshape(-1))
            loss.backward()
            opt.step()
            return loss

        return Step(train_step, tokens=batch * seq, output_tokens=0)
    model.eval()
    if phase == "prefill":
        inputs = tokens[:, :-1]

        def prefill_step():
            with torch.no_grad():
                return run(inputs)

        return Step(prefill_step, tokens=batch * seq, output_tokens=0)
    cache = KVCache(cfg, batch, seq + 1, device=device, dtype=dtype)
    with torch.no_grad():
        model(tokens[:, :seq], cache=cache, start=0)
    nxt = tokens[:, seq : seq + 1]

    def decode_step():
        with torch.no_grad():
            return run(nxt, cache=cache, start=seq)

    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    return Step(
        decode_step,
        tokens=batch,
        output_tokens=batch,
        info={"kv_bytes_per_step": cache.nbytes(seq + 1), "weight_bytes": weight_bytes},
    )


def vision_step(
    cfg: VisionConfig,
    phase: str,
    device: str,
    *,
    batch: int,
    precision: str = "fp32",
    compiled: bool = False,
    compile_backend: str | None = None,
    seed: int = 0,
) -> Step:
    """train: forward + loss + backward + SGD; infer: forward under no_grad. Unit: images."""
    if phase not in VISION_PHASES:
        raise WorkbenchError(unknown("vision phase", phase, VISION_PHASES))
    dtype = dtype_of(precision)
    model = build_vision_model(cfg, seed=seed).to(device=device, dtype=dtype)
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(batch, 3, cfg.image, cfg.image, generator=gen).to(device=device, dtype=dtype)
    y = torch.randint(0, cfg.classes, (batch,), generator=gen).to(device)
    run = _maybe_compile(model, compiled, device, compile_backend)
    if phase == "train":
        opt = torch.optim.SGD(model.parameters(), lr=1e-3, foreach=False)

        def train_step():
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(run(x).float(), y)
            loss.backward()
            opt.step()
            return loss

        return Step(train_step, tokens=batch, output_tokens=0, unit="images")

    def infer_step():
        with torch.no_grad():
            return run(x)

    return Step(infer_step, tokens=batch, output_tokens=0, unit="images")
