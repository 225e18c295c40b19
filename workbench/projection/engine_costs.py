"""The serving engine's host (CPU) cost per step, per engine, from published measurements
(``published/engine_costs.json``, each with its source, date and what it measured).

Why: the step model adds ``ServingDeployment.step_overhead_s`` to every engine step whatever its batch
(scheduler, sampler bookkeeping, input preparation between forward passes). Engines that overlap that work
with the device's step (SGLang's zero-overhead scheduler, TensorRT-LLM's overlap scheduler, vLLM V1 and
vLLM-TPU's async scheduling) hide it while it is shorter than the step: their exposed cost is 0, by their
own profiles. A non-overlapped engine would carry its measured cost here, never a value fitted on a row.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "published" / "engine_costs.json"
# the engine each InferenceX / MLPerf chip ran (docs/projection.md: SGLang on B200/B300, vLLM TorchTPU on v7)
INFERENCEX_ENGINE = {"TPU v7": "vllm-tpu", "B200": "sglang", "B300": "sglang"}


@dataclass(frozen=True)
class EngineCost:
    """One engine's host cost per step: exposed (adds to the step) unless overlapped with the device."""

    key: str
    name: str
    host_overlapped: bool
    exposed_step_s: float
    sources: tuple[dict, ...]


@lru_cache(maxsize=1)
def engines() -> dict[str, EngineCost]:
    """The registry, keyed by engine (``sglang``, ``tensorrt-llm``, ``vllm-v1``, ``vllm-tpu``)."""
    raw = json.loads(DATA.read_text())["engines"]
    return {
        k: EngineCost(k, v["name"], v["host_overlapped"], float(v["exposed_step_s"]), tuple(v["sources"]))
        for k, v in raw.items()
    }


def step_overhead_s(engine: str) -> float:
    """Host time one step of ``engine`` adds to the device's step; a KeyError names an unknown engine."""
    return engines()[engine].exposed_step_s
