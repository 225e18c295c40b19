"""Discrete-event step simulation of one replica under continuous batching with chunked prefill (vLLM V1 /
Sarathi scheduling): each engine step first gives every running decode one token, then fills the rest of
the token budget with prompt chunks in arrival order; a request is admitted when its whole KV reservation
(input + output positions, paged) fits and the running set is below ``max_batch``. Step times come from
:class:`~workbench.projection.serving.StepModel`. Events are request arrivals and step ends; time jumps
from one to the next (an idle engine waits for the next arrival).

Replicas are independent: arrivals are dealt round-robin (see :func:`simulate`)."""

from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass, field, replace

from tpu_workbench.bench.projection.requests import Request, RequestMix
from tpu_workbench.bench.projection.serving import StepModel, kv_capacity


@dataclass
class _Live:
    req: Request
    prefilled: int = 0
    emitted: int = 0
    first_token_s: float | None = None
    token_times: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class SimResult:
    """Per-request latencies and throughput of a simulated run (one replica's chips)."""

    ttft_s: list[float]
    tpot_s: list[float]
    e2e_s: list[float]
    makespan_s: float
    output_tokens: int
    input_tokens: int
    chips: int
    steps: int

    def pct(self, name: str, q: float) -> float:
        xs = sorted(getattr(self, name))
        return xs[min(len(xs) - 1, max(0, math.ceil(q / 100 * len(xs)) - 1))]

    @property
    def output_tok_s_per_chip(self) -> float:
        return self.output_tokens / self.makespan_s / self.chips

    @property
    def tok_s_per_user(self) -> float:
        return 1.0 / statistics.median(self.tpot_s)

    def summary(self) -> dict:
        out = {f"{n}_p{q}_s": self.pct(n, q) for n in ("ttft_s", "tpot_s", "e2e_s") for q in (50, 90, 99)}
        out = {k.replace("_s_p", "_p"): v for k, v in out.items()}
        return {
            **out,
            "output_tok_s_per_chip": self.output_tok_s_per_chip,
            "total_tok_s_per_chip": (self.output_tokens + self.input_tokens) / self.makespan_s / self.chips,
            "tok_s_per_user_median": self.tok_s_per_user,
            "steps": self.steps,
        }


def simulate(
    m: StepModel, requests: list[Request], *, max_steps: int = 2_000_000, clients: int | None = None
) -> SimResult:
    """Run ``requests`` (sorted by arrival) through one replica; refuses a mix whose longest request cannot
    be resident (no KV capacity). ``clients``: a closed loop (InferenceX / benchmark-serving concurrency):
    ``clients`` requests start at t = 0 and each completion sends the next request at once; arrival times
    are then ignored."""
    d = m.deployment
    longest = max(r.input_tokens + r.output_tokens for r in requests)
    cap = kv_capacity(m, longest)
    if cap.infeasible:
        raise ValueError(cap.infeasible)
    blocks_total = cap.blocks_per_chip * d.chips // m.setting.lay.tp
    pending = deque(sorted(requests, key=lambda r: r.arrival_s))
    backlog: deque[Request] = deque()
    if clients:
        backlog = deque(replace(r, arrival_s=0.0) for r in requests[clients:])
        pending = deque(replace(r, arrival_s=0.0) for r in requests[:clients])
    waiting: deque[_Live] = deque()
    running: list[_Live] = []
    done: list[_Live] = []
    used_blocks = 0
    now, steps = 0.0, 0
    while (pending or waiting or running) and steps < max_steps:
        while pending and pending[0].arrival_s <= now:
            waiting.append(_Live(pending.popleft()))
        while waiting and len(running) < d.max_batch:
            need = math.ceil((waiting[0].req.input_tokens + waiting[0].req.output_tokens) / d.block_tokens)
            if used_blocks + need > blocks_total:
                break
            used_blocks += need
            running.append(waiting.popleft())
        if not running:
            now = pending[0].arrival_s
            continue
        decoding = [x for x in running if x.prefilled >= x.req.input_tokens]
        budget = max(d.chunk_tokens - len(decoding), 0)
        chunks: list[tuple[_Live, int]] = []
        for x in running:
            if budget <= 0:
                break
            left = x.req.input_tokens - x.prefilled
            if left > 0:
                take = min(left, budget)
                chunks.append((x, take))
                budget -= take
        ctx = sum(x.req.input_tokens + x.emitted for x in decoding) / len(decoding) if decoding else 0.0
        ctx = d.dense_cache_tokens if decoding and d.dense_cache_tokens else ctx
        p_tok = sum(t for _, t in chunks)
        p_ctx = sum(x.prefilled for x, _ in chunks) / len(chunks) if chunks else 0.0
        now += m.time(len(decoding), ctx, p_tok, p_ctx)
        steps += 1
        for x in decoding:
            x.emitted += 1
            x.token_times.append(now)
        for x, take in chunks:
            x.prefilled += take
            if x.prefilled >= x.req.input_tokens:  # the step that ends the prompt emits the first token
                x.emitted = 1
                x.first_token_s = now
                x.token_times.append(now)
        for x in [x for x in running if x.emitted >= x.req.output_tokens]:
            running.remove(x)
            used_blocks -= math.ceil((x.req.input_tokens + x.req.output_tokens) / d.block_tokens)
            done.append(x)
            if backlog:  # closed loop: the client sends its next request now
                pending.append(replace(backlog.popleft(), arrival_s=now))
    start = min(x.req.arrival_s for x in done)
    return SimResult(
        ttft_s=[x.first_token_s - x.req.arrival_s for x in done],
        tpot_s=[
            (x.token_times[-1] - x.first_token_s) / (x.req.output_tokens - 1)
            for x in done
            if x.req.output_tokens > 1
        ],
        e2e_s=[x.token_times[-1] - x.req.arrival_s for x in done],
        makespan_s=now - start,
        output_tokens=sum(x.req.output_tokens for x in done),
        input_tokens=sum(x.req.input_tokens for x in done),
        chips=d.chips_per_replica,
        steps=steps,
    )


def offline_throughput(m: StepModel, mix: RequestMix) -> float:
    """MLPerf Inference offline scenario: every request available at t = 0; output tok/s per chip."""
    return simulate(m, replace(mix, rate_per_s=None).sample(m.cfg.max_seq)).output_tok_s_per_chip


def server_throughput(
    m: StepModel, mix: RequestMix, *, ttft_p99_s: float, tpot_p99_s: float, iterations: int = 12
) -> tuple[float, SimResult | None]:
    """MLPerf Inference server scenario: the highest Poisson arrival rate (requests/s per replica) whose
    p99 TTFT and p99 TPOT stay within the limits, by bisection on the rate (0, None when even a trickle
    misses them). Returns (rate, the run at that rate)."""
    offline = simulate(m, replace(mix, rate_per_s=None).sample(m.cfg.max_seq))
    hi = len(offline.e2e_s) / offline.makespan_s * 1.5  # above the saturated completion rate
    lo, best = 0.0, None
    for _ in range(iterations):
        rate = (lo + hi) / 2
        run = simulate(m, replace(mix, rate_per_s=rate).sample(m.cfg.max_seq))
        if run.pct("ttft_s", 99) <= ttft_p99_s and run.pct("tpot_s", 99) <= tpot_p99_s:
            lo, best = rate, run
        else:
            hi = rate
    return lo, best
