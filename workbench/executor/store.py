"""Append-only JSONL store of task outcomes: one line per finished task, flushed as it finishes, so that a run
stopped at any point (Ctrl-C, a killed machine) keeps every finished task and a rerun skips them."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tpu_workbench.bench.executor.task import Outcome


class ResultStore:
    def __init__(self, path: str | Path):
        self.path = Path(path)

    def load(self) -> dict[str, Outcome]:
        """The latest outcome per key; a torn last line (a run killed mid-write) is skipped."""
        out: dict[str, Outcome] = {}
        if not self.path.exists():
            return out
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                data = json.loads(line)
                out[data["key"]] = Outcome(**data)
            except (ValueError, TypeError, KeyError):
                continue
        return out

    def append(self, outcome: Outcome) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(outcome.to_json(), default=str) + "\n"
        with open(self.path, "a+b") as f:
            f.seek(0, os.SEEK_END)
            if f.tell():  # a torn last line (a run killed mid-write) must not swallow this one
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    line = "\n" + line
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
