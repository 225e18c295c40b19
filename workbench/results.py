"""Result records: one versioned schema for measured, projected and published numbers.

Stored as JSON lines. ``append_records`` writes, flushes and fsyncs each record, so a killed run loses at
most the record being written; a torn line is skipped on load with a warning.
"""

from __future__ import annotations

import json
import os
import uuid
import warnings
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
PROVENANCES = ("measured", "projected", "published")
TOKEN_KINDS = ("total", "output", "input", "images", "unstated", "n/a")


class SchemaError(ValueError):
    """A record that does not fit the schema (bad provenance, newer schema_version, missing field)."""


@dataclass
class Record:
    """One number (or set of numbers) about one workload on one device/chip, and where it came from.

    Throughput fields say whose tokens they count (``tokens_kind``: total = input+output processed,
    output = generated only). ``source`` holds the provenance details:
    measured → host, versions, git revision, date, platform; projected → model name/version and every
    input; published → title/URL and the exact setting. Raw step-time samples are in ``step_samples_s``.
    """

    provenance: str
    workload: str
    phase: str
    device: str
    platform: str = ""
    device_name: str = ""
    chip: str | None = None
    precision: str = ""
    batch: int | None = None
    seq: int | None = None
    compiled: bool = False
    n_chips: float | None = 1
    n_devices: float | None = 1
    tokens_kind: str = "total"
    unit: str = "tokens"
    tokens_per_s: float | None = None
    tokens_per_s_per_chip: float | None = None
    tokens_per_s_per_device: float | None = None
    output_tokens_per_s: float | None = None
    tokens_per_s_per_user: float | None = None
    step_median_s: float | None = None
    step_iqr_s: float | None = None
    step_mean_s: float | None = None
    step_samples_s: list[float] = field(default_factory=list)
    number_per_run: int | None = None
    first_call_s: float | None = None
    compile_s: float | None = None
    timing_method: str = ""
    flops_per_token: float | None = None
    flop_convention: str | None = None
    achieved_tflops: float | None = None
    mfu: float | None = None
    peak_tflops: float | None = None
    peak_basis: str | None = None
    mbu: float | None = None
    bandwidth_basis: str | None = None
    cost: list[dict] = field(default_factory=list)
    energy: dict[str, float] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    source: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    created: str = ""
    record_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        if self.provenance not in PROVENANCES:
            raise SchemaError(f"provenance {self.provenance!r} not one of {', '.join(PROVENANCES)}")
        if self.tokens_kind not in TOKEN_KINDS:
            raise SchemaError(f"tokens_kind {self.tokens_kind!r} not one of {', '.join(TOKEN_KINDS)}")
        if self.provenance == "measured" and self.tokens_per_s is not None and not self.step_samples_s:
            raise SchemaError("a measured record must keep its raw step-time samples")
        if not self.source:
            raise SchemaError("every record needs its provenance details in `source`")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Record:
        """Inverse of to_dict. Refuses newer schema versions; unknown keys (from a newer minor
        writer) are kept under ``extra['unknown_fields']`` rather than dropped."""
        version = d.get("schema_version", 0)
        if not isinstance(version, int) or version > SCHEMA_VERSION or version < 1:
            raise SchemaError(f"schema_version {version!r} not supported (this reader: 1..{SCHEMA_VERSION})")
        names = {f.name for f in fields(cls)}
        missing = [k for k in ("provenance", "workload", "phase", "device") if k not in d]
        if missing:
            raise SchemaError(f"record missing {', '.join(missing)}")
        known = {k: v for k, v in d.items() if k in names}
        unknown_fields = {k: v for k, v in d.items() if k not in names}
        rec = cls(**known)
        if unknown_fields:
            rec.extra = {**rec.extra, "unknown_fields": unknown_fields}
        return rec


def append_records(path: str | Path, records: list[Record] | Record) -> Path:
    """Append records to a JSON-lines file, one fsync per record (crash-safe)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(records, Record):
        records = [records]
    needs_newline = path.exists() and path.stat().st_size > 0 and not _ends_with_newline(path)
    with path.open("a", encoding="utf-8") as f:
        if needs_newline:  # a previous writer died mid-line: keep its fragment on a line of its own
            f.write("\n")
        for rec in records:
            rec.validate()
            f.write(json.dumps(rec.to_dict(), sort_keys=True, allow_nan=True) + "\n")
            f.flush()
            os.fsync(f.fileno())
    return path


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def read_records(path: str | Path) -> list[Record]:
    """Records of one file; unparseable lines (a torn last write) are skipped with a warning."""
    path = Path(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Record] = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            where = "last line" if i == len(lines) else f"line {i} of {len(lines)}"
            warnings.warn(f"{path}: skipping torn/corrupt {where} (an interrupted write?)", stacklevel=2)
            continue
        out.append(Record.from_dict(data))
    return out


def load_results(*paths: str | Path):
    """All records of the given JSONL files (directories are searched for *.jsonl) as one DataFrame.

    One row per record; columns are the record fields plus ``file``. The published reference points
    are :func:`workbench.published.published_records`.
    """
    import pandas as pd

    rows: list[dict] = []
    for p in paths:
        p = Path(p)
        files = sorted(p.glob("**/*.jsonl")) if p.is_dir() else [p]
        for fpath in files:
            if not fpath.exists():
                raise FileNotFoundError(f"results file not found: {fpath}")
            rows += [{**r.to_dict(), "file": str(fpath)} for r in read_records(fpath)]
    columns = [f.name for f in fields(Record)] + ["file"]
    return pd.DataFrame(rows, columns=columns)

