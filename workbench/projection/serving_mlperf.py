"""MLPerf Inference llama2-70b results (published/mlperf_inference.json) projected with the serving model.

Offline (no latency limit): the saturated replica at the most sequences it can hold, i.e. the engine's batch
limit from the submitter's config or the KV capacity, whichever is smaller. Server: the largest such
concurrency whose closed-form TTFT and TPOT stay within MLPerf's limits (2 s, 200 ms; the closed form gives
means where MLPerf bounds the 99th percentile, so this is an upper bound). Output tokens per sample come from
each log (tokens/s over samples/s). What the sources leave open is an assumption named in each row's note:
the mean input length (not stated in the sources at hand), FP8 KV cache, chunked prefill budget, and the
per-sequence engine overhead calibrated on InferenceX row 12 (a different engine, SGLang/vLLM, and model).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from tpu_workbench.bench.projection.serving import (
    ServingDeployment,
    SteadyState,
    StepModel,
    kv_capacity,
    steady_state,
)
from tpu_workbench.bench.projection.shape import load_hf_config

PUBLISHED = Path(__file__).resolve().parents[1] / "published"
DATA = PUBLISHED / "mlperf_inference.json"
MODEL = PUBLISHED / "models" / "llama-2-70b.json"
ASSUMED_INPUT_TOKENS = 512  # half the dataset's 1,024-token input limit; its mean is not in the sources
SERVER_TTFT_S, SERVER_TPOT_S = 2.0, 0.2
CHUNK_TOKENS = 8192  # ASSUMED prefill token budget per step (the submitter's config does not name one)
MAX_BATCH_UNSTATED = 4096  # where the config gives no engine batch: the KV capacity decides


@lru_cache(maxsize=1)
def points() -> tuple[dict, ...]:
    return tuple(json.loads(DATA.read_text())["points"])


@dataclass(frozen=True)
class MLPerfProjection:
    """One result projected: output tok/s per chip, or why there is none."""

    point: dict
    input_tokens: int
    output_tokens: int
    concurrency: int | None
    state: SteadyState | None
    output_tok_s_per_chip: float | None
    why_none: str | None = None

    @property
    def published_per_chip(self) -> float:
        return self.point["tokens_per_s"] / self.point["chips"]

    def note(self) -> str:
        p = self.point
        batch = f"engine batch {p['engine_batch']} (config)" if p["engine_batch"] else "engine batch unstated"
        head = (
            f"Llama-2-70B {p['precision'].upper()} weights, {p['chips']} x {p['chip']} as "
            f"{p['chips'] // p['tp']} x tp={p['tp']}, {batch}; output {self.output_tokens} tokens/sample "
            f"(log); ASSUMED: input {self.input_tokens} tokens (dataset mean not in the sources), FP8 KV "
            f"allocated on demand (mean resident context), prefill budget {CHUNK_TOKENS}, GPU engine "
            "overhead from InferenceX row 12"
        )
        if self.why_none:
            return f"{self.why_none}; {head}"
        st = self.state
        lim = "; server limits on closed-form means (MLPerf bounds p99)" if p["scenario"] == "server" else ""
        return f"{head}; projected at {self.concurrency} sequences/replica, TPOT {st.tpot_s * 1e3:.0f} ms, TTFT {st.ttft_s:.2f} s{lim}"


def _model(p: dict, overhead_s: float) -> StepModel:
    cfg, shape = load_hf_config(MODEL, name="llama-2-70b")
    d = ServingDeployment(
        p["chip"],
        p["tp"],
        "tp",
        precision=p["precision"],
        kv_precision="fp8",
        max_batch=p["engine_batch"] or MAX_BATCH_UNSTATED,
        chunk_tokens=CHUNK_TOKENS,
        seq_overhead_s=overhead_s,
    )
    return StepModel.build(cfg, d, shape=shape)


def _meets_server_limits(st: SteadyState) -> bool:
    return st.ttft_s <= SERVER_TTFT_S and st.tpot_s <= SERVER_TPOT_S


def project_point(p: dict, overhead_s: float, input_tokens: int = ASSUMED_INPUT_TOKENS) -> MLPerfProjection:
    """The scenario's throughput per chip for one published point (see the module docstring)."""
    out = round(p["tokens_per_s"] / p["samples_per_s"])
    m = _model(p, overhead_s)
    cap = kv_capacity(m, input_tokens + out // 2)
    if cap.infeasible:
        return MLPerfProjection(p, input_tokens, out, None, None, None, cap.infeasible)
    best = cap.max_seqs
    if p["scenario"] == "server":
        lo, hi = 0, cap.max_seqs  # TPOT and TTFT grow with concurrency
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (
                (mid, hi) if _meets_server_limits(steady_state(m, input_tokens, out, mid)) else (lo, mid - 1)
            )
        if lo == 0:
            why = "misses the server limits (TTFT 2 s, TPOT 200 ms) even at one sequence"
            return MLPerfProjection(p, input_tokens, out, None, None, None, why)
        best = lo
    st = steady_state(m, input_tokens, out, best)
    return MLPerfProjection(p, input_tokens, out, best, st, st.output_tok_s_per_chip)


def projections(overhead_s: float, input_tokens: int = ASSUMED_INPUT_TOKENS) -> list[MLPerfProjection]:
    return [project_point(p, overhead_s, input_tokens) for p in points()]
