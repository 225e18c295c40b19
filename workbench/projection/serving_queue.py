"""Closed-form server scenario (MLPerf Inference "server": Poisson arrivals, a p99 bound on TTFT): the
replica's ``c`` batch slots are ``c`` servers of an M/G/c queue whose service time is one request's
residence, S = TTFT + (O - 1) x TPOT at full occupancy (the steady-state closed form). A request that finds
every slot busy waits; Erlang C gives P(wait > t) = C(c, lambda S) exp(-(c/S - lambda) t) for exponential
service, and the heavy-traffic (Kingman) correction scales the decay by 2 / (1 + cv2) for a service time
with squared coefficient of variation cv2. The highest rate whose p99 TTFT (wait + the prefill at full
occupancy) stays within the limit is the server throughput: an engine cannot run at offline saturation
under Poisson arrivals without an unbounded queue. The slots run at full occupancy in the bound (a partly
idle replica steps faster), so it is conservative.

It replaces the discrete-event ``serving_sim.server_throughput`` where that is too slow (~1,000 sequences
per replica); tests/workbench/test_serving_queue.py checks the two agree on small replicas."""

from __future__ import annotations

import math
from dataclasses import dataclass

from tpu_workbench.bench.projection.serving import StepModel, steady_state


def erlang_c(c: int, a: float) -> float:
    """Probability that an arrival waits in an M/M/c queue with offered load ``a`` = lambda x S (< c)."""
    if a <= 0:
        return 0.0
    b = 1.0
    for k in range(1, c + 1):  # Erlang B by its stable recursion
        b = a * b / (k + a * b)
    rho = a / c
    return b / (1 - rho * (1 - b))


def wait_tail(c: int, service_s: float, rate: float, t: float, cv2: float = 1.0) -> float:
    """P(queueing wait > t) for Poisson arrivals at ``rate`` onto ``c`` slots of mean service ``service_s``."""
    cap = c / service_s
    if rate >= cap:
        return 1.0
    return erlang_c(c, rate * service_s) * math.exp(-(cap - rate) * t * 2 / (1 + cv2))


@dataclass(frozen=True)
class ServerBound:
    """The highest Poisson rate (requests/s per replica) meeting the p99 TTFT limit at ``concurrency`` slots."""

    concurrency: int
    rate_per_s: float
    service_s: float
    output_tok_s_per_chip: float

    @property
    def utilisation(self) -> float:
        return self.rate_per_s * self.service_s / self.concurrency


def server_bound(
    m: StepModel,
    input_tokens: int,
    output_tokens: int,
    concurrency: int,
    *,
    ttft_limit_s: float,
    quantile: float = 0.99,
    cv2: float = 1.0,
) -> ServerBound | None:
    """None when the prefill alone at full occupancy misses the TTFT limit (no rate meets it)."""
    st = steady_state(m, input_tokens, output_tokens, concurrency)
    slack = ttft_limit_s - st.ttft_s
    if slack <= 0:
        return None
    service = st.ttft_s + (output_tokens - 1) * st.step_s
    lo, hi = 0.0, concurrency / service
    for _ in range(60):  # the tail grows with the rate: bisect
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if wait_tail(concurrency, service, mid, slack, cv2) <= 1 - quantile else (lo, mid)
    chips = m.deployment.chips_per_replica
    return ServerBound(concurrency, lo, service, lo * output_tokens / chips)
