"""Options of one assessment (a config dataclass, so the CLI, the notebook and tests build the same thing)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

#: exit statuses of ``tpu-bench assess`` (documented in --help and docs/assess.md)
EXIT_RUNS_ON_TPU = 0
EXIT_NEEDS_CHANGES = 1
EXIT_BAD_INPUT = 2


@dataclass
class AssessOptions:
    """``run``/``tests``: commands run in the copy's root (``{device}`` becomes ``cpu`` before the migration and
    ``tpu`` after); ``candidates``: also run the proposed ones; ``timeout``: seconds per command and phase;
    ``gpu``/``tpu``: catalog chips to project to; ``chips``: how many of each; ``tokens``: tokens of the
    projected run (training); ``workers``: commands at once; ``engine``: executor engine; ``default_device``: in the tpu run, make "tpu"
    torch's default device (a test suite that never names a device then exercises it); ``resume``: reuse the
    runs finished in ``<out>/tasks.jsonl`` whose tree digest, command, device and options are unchanged."""

    path: Path
    out: Path = Path("assessment")
    run: list[str] = field(default_factory=list)
    tests: list[str] = field(default_factory=list)
    candidates: bool = False
    timeout: float = 300.0
    gpu: str = "H100 SXM"
    tpu: str = "TPU v7"
    chips: int = 8
    tokens: float = 1e9
    workers: int = 1
    engine: str = "local"
    default_device: bool = False
    ray_address: str | None = None
    resume: bool = True
