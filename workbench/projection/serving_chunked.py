"""Closed form of a saturated replica whose prompts are prefilled in whole chunks, as the engine does it.

vLLM V1 / Sarathi (and :mod:`~workbench.projection.serving_sim`) give every running decode its token each step
and fill the rest of the token budget with prompt chunks, so a prompt of ``I`` tokens lands in ``ceil(I / P)``
steps (``P`` = budget left after the decodes) and most steps decode alone. :func:`~workbench.projection.serving.
steady_state` instead spreads ``B·I/O`` prompt tokens over *every* step (a fluid average). The step time is
concave in its tokens at small batch (weights read once per step, experts touched saturate), so the average of
the real steps is below the step of the average: for an MoE model each fluid step routes its ``B·I/O`` prompt
tokens to the experts and reads most of them, where the engine's decode-only steps read only the experts the
``B`` decode tokens pick. On Qwen3.5-397B (512 experts, top-10), 8k/1k, 8 x TPU v7, the fluid TPOT is 2.5x
the simulated one at B = 4 and 2x at B = 16, and the two meet near B = 256 (tests/workbench/
test_serving_chunked.py checks this form against the simulation within 5 % from B = 4 to 256).

Per ``O`` decode steps a replica at concurrency ``B`` prefills ``B·I`` prompt tokens, i.e. ``k = B·I / P``
steps carry a full chunk; the other ``O - k`` decode alone. When ``k >= O`` every step is full and the budget
binds (``B >= C·O / (I + O)``, ``C`` the budget): a closed loop then keeps only ``D = C·O / (I + O)`` sequences
decoding (each step's ``C - D`` prompt tokens finish ``D / O`` prompts, as many as the decodes finish) and the
other ``B - D`` queue for their prefill, ``(B - D)·O / D`` steps by Little's law: the TTFT under load that a
small budget gives (vLLM-TPU's InferenceX server caps it at 2,048; the fluid form, blind to the budget, puts
``B·I/O`` prompt tokens in every step instead).
"""

from __future__ import annotations

import math

from tpu_workbench.bench.projection.serving import SteadyState, StepModel


def chunked_steady_state(
    m: StepModel, input_tokens: int, output_tokens: int, concurrency: int
) -> SteadyState:
    """Mean step (= TPOT) over the ``k`` chunk-carrying and ``O - k`` decode-only steps of one request's
    lifetime; TTFT = the ``ceil(I / P)`` chunk steps of its own prompt (plus the queue where the budget binds)."""
    b, i, o, d = concurrency, input_tokens, output_tokens, m.deployment
    budget = max(d.chunk_tokens - b, 1)
    k = b * i / budget
    ctx = d.dense_cache_tokens or i + o / 2
    chips = d.chips_per_replica

    def prefix(tokens: float) -> float:
        # each query attends to its own prompt's prefix, i / 2 keys on average over its chunks; the step's
        # attention counts a TP group's share of the chunk as one causal run from the prefix: shift it to that mean
        return (i - tokens / d.pp / d.chips * m.setting.lay.tp) / 2

    if k >= o:  # the budget binds: D decode, the rest wait for the prefill
        dec = d.chunk_tokens * o / (i + o)
        step = m.time(dec, ctx, d.chunk_tokens - dec, prefix(d.chunk_tokens - dec))
        waits = (b - dec) * o / dec + math.ceil(i / (d.chunk_tokens - dec))
        return SteadyState(
            b, step, m.time(dec, ctx, 0), waits * step, dec / step / chips, dec * i / o / step / chips
        )
    decode_only = m.time(b, ctx, 0)
    chunk_step = m.time(b, ctx, budget, prefix(budget))
    step = (k * chunk_step + (o - k) * decode_only) / o
    return SteadyState(
        b,
        step,
        decode_only,
        math.ceil(i / budget) * chunk_step,
        b / step / chips,
        b * i / o / step / chips,
    )
