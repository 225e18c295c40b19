"""Published serving-throughput benchmarks projected with the serving model, from data files in published/:

- ``mlperf_inference.json``: MLPerf Inference v4.1 llama2-70b, offline and server, on NVIDIA GPUs;
- ``jetstream_pytorch.json``: jetstream-pytorch on one TPU v5e-8 host, all prompts sent at once;
- ``tpu_recipes.json``: HELD-OUT rows (added after the model was shaped, nothing fitted on them): vLLM on
  Ironwood from AI-Hypercomputer/tpu-recipes, a closed-loop benchmark_serving run (``scenario: closed_loop``,
  :func:`closed_loop_run`) simulated request by request, drain included.

Each file has ``defaults`` merged under every point. Offline (no latency limit): the saturated replica at the
most sequences it can hold, i.e. the engine's batch from the run's config or the KV capacity, whichever is
smaller. Server: the largest such concurrency whose closed-form TTFT and TPOT stay within MLPerf's limits
(2 s, 200 ms; the closed form gives means where MLPerf bounds the 99th percentile, so this is an upper
bound). KV allocation: ``on demand`` (paged, capacity at the mean resident context I + O/2) or ``fixed``
(a cache of ``cache_tokens`` per slot, as jetstream-pytorch preallocates, and its decode attends over
all of it: a dense einsum over the whole cache with a mask, jetstream_pt/layers.py at the benchmark's date;
``ServingDeployment.dense_cache_tokens``). What a source leaves open is an assumption
named in the row's note; the per-sequence engine overhead is the vendor's, calibrated on InferenceX row 12.
jetstream-pytorch runs JetStream's interleaved orchestrator (``orchestrator: interleaved``, see
:func:`interleaved_state`): batch-1 prefills serialized with the generate steps, one engine per host; runs
dated before JetStream's interleaved mode (2024-05-01) use its threaded orchestrator (:func:`threaded_state`).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from tpu_workbench.bench.projection.requests import Request
from tpu_workbench.bench.projection.serving import (
    HBM_UTILIZATION,
    ServingDeployment,
    SteadyState,
    StepModel,
    kv_capacity,
    steady_state,
)
from tpu_workbench.bench.projection.serving_queue import server_bound
from tpu_workbench.bench.projection.serving_sim import SimResult, simulate
from tpu_workbench.bench.projection.shape import load_hf_config

PUBLISHED = Path(__file__).resolve().parents[1] / "published"
FILES = ("mlperf_inference.json", "jetstream_pytorch.json", "tpu_recipes.json")
SERVER_TTFT_S, SERVER_TPOT_S = 2.0, 0.2
MAX_BATCH_UNSTATED = 4096  # where the config gives no engine batch: the KV capacity decides


@lru_cache(maxsize=1)
def points() -> tuple[dict, ...]:
    out = []
    for name in FILES:
        doc = json.loads((PUBLISHED / name).read_text())
        out += [{**doc.get("defaults", {}), **p, "file": name} for p in doc["points"]]
    return tuple(out)


def output_tokens(p: dict) -> int:
    """Tokens per request: the log's tokens/s over samples/s where the source gives both, else the file's."""
    if "samples_per_s" in p:
        return round(p["tokens_per_s"] / p["samples_per_s"])
    return int(p["output_tokens"])


@dataclass(frozen=True)
class BenchProjection:
    """One published point projected: output tok/s per chip, or why there is none."""

    point: dict
    input_tokens: int
    output_tokens: int
    concurrency: int | None
    state: SteadyState | None
    output_tok_s_per_chip: float | None
    why_none: str | None = None
    # server scenario: serving_queue's p99-TTFT bound under Poisson arrivals, reported beside (not adopted)
    poisson_bound: float | None = None
    # closed_loop scenario: the simulated run
    sim: SimResult | None = None

    @property
    def published_per_chip(self) -> float:
        return self.point["tokens_per_s"] / self.point["chips"]

    def note(self) -> str:
        p = self.point
        batch = (
            f"engine batch {p['engine_batch']} (config)" if p.get("engine_batch") else "engine batch unstated"
        )
        sourced, lengths = (
            ("", f"input {self.input_tokens} / output {self.output_tokens} tokens, ")
            if p.get("lengths_assumed")
            else (
                f"input {self.input_tokens} / output {self.output_tokens} tokens per request "
                f"({p['lengths_source']}); ",
                "",
            )
            if p.get("lengths_source")
            else (
                f"input {self.input_tokens} tokens ({p['input_source']}), output "
                f"{self.output_tokens} tokens/sample (log); ",
                "",
            )
        )
        kv = (
            f"KV {p['kv_precision']} preallocated, {p['cache_tokens']} tokens per slot, all read each decode step "
            "(dense cache with a mask, jetstream-pytorch@781ec9e jetstream_pt/cache_manager.py + layers.py)"
            if p["kv_allocation"] == "fixed"
            else f"KV {p['kv_precision']} allocated on demand (mean resident context)"
        )
        if p.get("tp_devices"):
            kv += (
                f" in tpu-inference's ragged-paged-attention layout over {p['tp_devices']} devices "
                "(each device's K and V heads padded to the cache dtype's packing, StepModel.kv_share)"
            )
        head = (
            f"{p['model'].removesuffix('.json')} {p['precision']} weights"
            + (
                " only (W8A16: bf16 matmuls, weight_only_source in the data file)"
                if p.get("weight_only")
                else ""
            )
            + f", {p['chips']} x {p['chip']} as "
            f"{p['chips'] // p['tp']} x tp={p['tp']}, {batch}; {sourced}ASSUMED: {lengths}{kv}, prefill budget "
            f"{p['chunk_tokens']}, engine overhead from InferenceX row 12"
        )
        head += "".join(f"; {p[k]}" for k in ("setting_note", "unit_note") if p.get(k))
        if self.why_none:
            return f"{self.why_none}; {head}"
        if self.sim is not None:
            r = self.sim
            return (
                f"HELD-OUT (nothing fitted on it); {head}; {p['setting']}; lengths: {p['lengths_source']}; "
                f"simulated {len(r.e2e_s)} requests (serving_sim, mean {r.input_tokens / len(r.e2e_s):.0f} in / "
                f"{r.output_tokens / len(r.e2e_s):.0f} out) at most {self.concurrency} running: makespan "
                f"{r.makespan_s:.1f} s, median TPOT {1e3 * sorted(r.tpot_s)[len(r.tpot_s) // 2]:.1f} ms"
            )
        st = self.state
        lim = "; server limits on closed-form means (MLPerf bounds p99)" if p["scenario"] == "server" else ""
        if self.poisson_bound:
            err = 100 * (self.poisson_bound / self.published_per_chip - 1)
            lim += (
                f"; Poisson-arrival bound (M/M/c slots, p99 TTFT {SERVER_TTFT_S:.0f} s, serving_queue): "
                f"{self.poisson_bound:.0f} tok/s/chip ({err:+.1f} %), reported beside, not adopted "
                "(docs/projection.md)"
            )
        if p.get("orchestrator") in _ORCHESTRATORS:
            return (
                f"{head}; projected at {self.concurrency} slots/replica ({st.concurrency} on the engine), "
                f"{p['orchestrator']} orchestrator ({p['orchestrator_source']}): generate step "
                f"{st.decode_only_step_s * 1e3:.1f} ms, one prompt's prefill {st.ttft_s * 1e3:.1f} ms, "
                f"{st.step_s * 1e3:.1f} ms per {st.concurrency} tokens"
            )
        return (
            f"{head}; projected at {self.concurrency} sequences/replica, TPOT {st.tpot_s * 1e3:.0f} ms, "
            f"TTFT {st.ttft_s:.2f} s{lim}"
        )


def _model(p: dict, overhead_s: float) -> StepModel:
    cfg, shape = load_hf_config(PUBLISHED / "models" / p["model"], name=p["model"].removesuffix(".json"))
    d = ServingDeployment(
        p["chip"],
        p["tp"],
        "tp",
        precision=p["precision"],
        kv_precision=p["kv_precision"],
        max_batch=p.get("engine_batch") or MAX_BATCH_UNSTATED,
        chunk_tokens=p["chunk_tokens"],
        seq_overhead_s=overhead_s,
        dense_cache_tokens=p["cache_tokens"] if p["kv_allocation"] == "fixed" else 0,
        weight_only=bool(p.get("weight_only")),
        block_tokens=p.get("block_tokens", ServingDeployment.block_tokens),
        hbm_utilization=p.get("hbm_utilization", HBM_UTILIZATION),
        tp_devices=p.get("tp_devices", 0),
    )
    return StepModel.build(cfg, d, shape=shape)


def _meets_server_limits(st: SteadyState) -> bool:
    return st.ttft_s <= SERVER_TTFT_S and st.tpot_s <= SERVER_TPOT_S


def interleaved_state(
    m: StepModel, p: dict, i: int, o: int, overhead_s: float, per_replica: int
) -> SteadyState:
    """JetStream's interleaved orchestrator with every prompt queued (``orchestrator: interleaved``): prefill
    and generate share the chips; each prompt is prefilled alone (batch 1) and inserted before the next
    generate step, which runs only with every slot filled while prompts wait. Per request: one prefill p
    plus O generate steps g shared by B slots, so the engine emits B tokens every g + B p / O. One engine
    spans the host's chips (``--shard_on_batch`` shards every tensor on the batch axis), so its host cost
    per step is paid on all B = replicas x ``per_replica`` slots, while each chip steps its own share."""
    b = per_replica * p["chips"] // p["tp"]
    g = m.time(per_replica, p["cache_tokens"], 0) + overhead_s * (b - per_replica)
    prefill = m.time(0, 0, i)  # one prompt, batch 1, on one replica's chips
    step = g + b * prefill / o
    return SteadyState(b, step, g, prefill, b / step / p["chips"], b * i / o / step / p["chips"])


def threaded_state(m: StepModel, p: dict, i: int, o: int, overhead_s: float, per_replica: int) -> SteadyState:
    """JetStream before interleaved mode (``orchestrator: threaded``, runs before 2024-05-01): the prefill thread
    prefills one prompt at a time (batch 1) while the generate thread steps whatever slots are filled, so the
    generate thread's host work (``overhead_s`` per slot, the row-12 fit: ASSUMED to overlap fully) runs while
    the chips execute the queued prefills. Per B output tokens: the generate step on the chips g_dev plus the
    longer of the host work and the B / O prefills, g_dev + max(host, B p / O)."""
    st = interleaved_state(m, p, i, o, overhead_s, per_replica)
    b = st.concurrency
    host = overhead_s * b
    step = st.decode_only_step_s - host + max(host, b * st.ttft_s / o)
    return SteadyState(
        b, step, st.decode_only_step_s, st.ttft_s, b / step / p["chips"], b * i / o / step / p["chips"]
    )


_ORCHESTRATORS = {"interleaved": interleaved_state, "threaded": threaded_state}


def random_requests(p: dict, seed: int = 0) -> list[Request]:
    """benchmark_serving's random dataset: ``num_prompts`` requests, input and output lengths each uniform on
    the integers [floor(r x), x] for x = ``input_tokens`` / ``output_tokens`` and r = ``random_range_ratio``."""
    rng, r = random.Random(seed), p["random_range_ratio"]
    i, o = int(p["input_tokens"]), int(p["output_tokens"])
    return [
        Request(0.0, rng.randint(int(r * i), i), rng.randint(int(r * o), o)) for _ in range(p["num_prompts"])
    ]


#: Simulated runs by (point, overhead): a run is ~1 s of stepping and the table is built by every view of it
#: (the CLI, the notebooks, the tests); the same inputs give the same run (seeded lengths).
_SIMULATED: dict[tuple[str, float], SimResult] = {}


def closed_loop_run(p: dict, overhead_s: float) -> BenchProjection:
    """``scenario: closed_loop``: benchmark_serving with ``max_concurrency`` clients sending ``num_prompts``
    requests (request rate inf, --ignore-eos), simulated step by step on one replica (serving_sim): the
    published figure is total output tokens over the run's duration, so the drain at the end counts."""
    m = _model(p, overhead_s)
    reqs = random_requests(p)
    longest = max(r.input_tokens + r.output_tokens for r in reqs)
    i, o = (round(sum(getattr(r, k) for r in reqs) / len(reqs)) for k in ("input_tokens", "output_tokens"))
    cap = kv_capacity(m, longest)
    if cap.infeasible:
        return BenchProjection(p, i, o, None, None, None, cap.infeasible)
    key = (json.dumps(p, sort_keys=True, default=str), overhead_s)
    run = _SIMULATED.get(key)
    if run is None:
        run = _SIMULATED[key] = simulate(m, reqs, clients=p["max_concurrency"])
    running = min(p["engine_batch"], p["max_concurrency"])
    tput = run.output_tokens / run.makespan_s / p["chips"]
    return BenchProjection(p, i, o, running, None, tput, sim=run)


_SCENARIOS = {"closed_loop": closed_loop_run}


def project_point(p: dict, overhead_s: float, input_tokens: int | None = None) -> BenchProjection:
    """The scenario's throughput per chip for one published point (see the module docstring)."""
    if p["scenario"] in _SCENARIOS:
        return _SCENARIOS[p["scenario"]](p, overhead_s)
    i, o = input_tokens or p["input_tokens"], output_tokens(p)
    m = _model(p, overhead_s)
    cap = kv_capacity(m, i + o // 2)  # a dense cache (kv_allocation 'fixed') holds cache_tokens per slot
    if cap.infeasible:
        return BenchProjection(p, i, o, None, None, None, cap.infeasible)
    if p.get("orchestrator") in _ORCHESTRATORS:  # slots: the engine batch or the KV capacity, the smaller
        st = _ORCHESTRATORS[p["orchestrator"]](m, p, i, o, overhead_s, cap.max_seqs)
        return BenchProjection(p, i, o, cap.max_seqs, st, st.output_tok_s_per_chip)
    best = cap.max_seqs
    if p["scenario"] == "server":
        lo, hi = 0, cap.max_seqs  # TPOT and TTFT grow with concurrency
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if _meets_server_limits(steady_state(m, i, o, mid)) else (lo, mid - 1)
        if lo == 0:
            why = "misses the server limits (TTFT 2 s, TPOT 200 ms) even at one sequence"
            return BenchProjection(p, i, o, None, None, None, why)
        best = lo
    st = steady_state(m, i, o, best)
    bound = None
    if p["scenario"] == "server":
        b = server_bound(m, i, o, best, ttft_limit_s=SERVER_TTFT_S)
        bound = b.output_tok_s_per_chip if b else None
    return BenchProjection(p, i, o, best, st, st.output_tok_s_per_chip, poisson_bound=bound)


def projections(overheads: dict[str, float]) -> list[BenchProjection]:
    """Every point, with its vendor's engine overhead (``overheads`` keyed 'tpu' / 'gpu')."""
    return [project_point(p, overheads["tpu" if p["chip"].startswith("TPU") else "gpu"]) for p in points()]
