"""Request mixes for the serving model: input/output length distributions (e.g. 1k/1k, 8k/1k) with an
arrival process, or a user's JSONL trace of lengths and arrival times. Bad input is refused in one line."""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from pathlib import Path

from tpu_workbench.bench.errors import WorkbenchError

NAMED_MIXES = {"1k/1k": (1024, 1024), "1k/8k": (1024, 8192), "8k/1k": (8192, 1024)}


@dataclass(frozen=True)
class Request:
    arrival_s: float
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class RequestMix:
    """Lengths around ``input_tokens`` / ``output_tokens`` (``spread``: sigma of a log-normal around them,
    0 = fixed); ``rate_per_s`` Poisson arrivals (None = offline: every request at t = 0)."""

    input_tokens: int
    output_tokens: int
    spread: float = 0.0
    rate_per_s: float | None = None
    n: int = 512
    seed: int = 0

    @classmethod
    def named(cls, name: str, **kw) -> RequestMix:
        if name not in NAMED_MIXES:
            raise WorkbenchError(f"unknown request mix {name!r}; known: {', '.join(NAMED_MIXES)}")
        i, o = NAMED_MIXES[name]
        return cls(i, o, **kw)

    def sample(self, max_context: int | None = None) -> list[Request]:
        if self.input_tokens < 1 or self.output_tokens < 1 or self.n < 1:
            raise WorkbenchError("a request mix needs input_tokens, output_tokens and n >= 1")
        rng = random.Random(self.seed)
        t, out = 0.0, []
        for _ in range(self.n):
            if self.rate_per_s:
                t += rng.expovariate(self.rate_per_s)
            i, o = (
                (
                    _lognormal(rng, self.input_tokens, self.spread),
                    _lognormal(rng, self.output_tokens, self.spread),
                )
                if self.spread
                else (self.input_tokens, self.output_tokens)
            )
            out.append(Request(t, i, o))
        return check_lengths(out, max_context)


def _lognormal(rng: random.Random, mean: int, sigma: float) -> int:
    """A log-normal draw with the given mean (not median)."""
    return max(1, round(rng.lognormvariate(math.log(mean) - sigma**2 / 2, sigma)))


def load_trace(path: str | Path, max_context: int | None = None) -> list[Request]:
    """JSONL, one request a line: {"input_tokens": int, "output_tokens": int, "arrival_s": float (optional,
    default 0 = offline)}."""
    out = []
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as e:
        raise WorkbenchError(f"cannot read trace {path}: {e.strerror}") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            req = Request(
                float(row.get("arrival_s", 0.0)), int(row["input_tokens"]), int(row["output_tokens"])
            )
        except (ValueError, KeyError, TypeError, AttributeError, OverflowError) as e:
            raise WorkbenchError(
                f"{path}:{n}: a trace line needs input_tokens and output_tokens (ints) and optional arrival_s ({e})"
            ) from None
        if (
            req.input_tokens < 1
            or req.output_tokens < 1
            or req.arrival_s < 0
            or not math.isfinite(req.arrival_s)
        ):
            raise WorkbenchError(f"{path}:{n}: lengths must be >= 1 and arrival_s a time >= 0")
        out.append(req)
    if not out:
        raise WorkbenchError(f"{path}: no requests in the trace")
    return check_lengths(sorted(out, key=lambda r: r.arrival_s), max_context)


def check_lengths(reqs: list[Request], max_context: int | None) -> list[Request]:
    """Refuse requests longer than the model's context (input + output positions)."""
    if max_context:
        for r in reqs:
            if r.input_tokens + r.output_tokens > max_context:
                raise WorkbenchError(
                    f"a request of {r.input_tokens} + {r.output_tokens} tokens exceeds the model's context "
                    f"({max_context})"
                )
    return reqs
