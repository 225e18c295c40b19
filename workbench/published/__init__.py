"""Published reference points as ``published`` records: the figure, its source and the exact setting.

Data: ``figures.json`` beside this file (transcribed from the project's published-figures reference).
Row 8 of that table is a qualitative limitation, not a number, and has no record.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from workbench.results import Record

DATA = Path(__file__).parent / "figures.json"


@lru_cache(maxsize=1)
def _points() -> tuple[dict, ...]:
    return tuple(json.loads(DATA.read_text())["points"])


def published_records() -> list[Record]:
    """One record per published point, each with ``source`` = {row, title, via/url, date, setting,
    figure as printed}. Precision is "unstated" where the source does not give it."""
    out = []
    for p in _points():
        fields = dict(p["record"])
        fields.setdefault("precision", "unstated")
        source = {"kind": "published", "row": p["row"], **p["source"], "setting": p["setting"],
                  "figure": p["figure"], "document": "shared/reference/published-figures.md"}
        out.append(Record(provenance="published", source=source, created=p["source"].get("date", ""),
                          record_id=f"published-row{p['row']}-{len(out)}", **fields))
    return out
