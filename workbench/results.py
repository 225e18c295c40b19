"""Result records: one versioned schema for measured, projected and published numbers.

Stored as JSON lines. ``append_records`` writes, flushes and fsyncs each record, so a killed run loses at
most the record being written; a torn line is skipped on load with a warning.
"""

from __future__ import annotations

import json
import math
import os
import uuid
import warnings
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from tpu_workbench.bench.errors import WorkbenchError

SCHEMA_VERSION = 1
PROVENANCES = ("measured", "projected", "published")
TOKEN_KINDS = ("total", "output", "input", "images", "unstated", "n/a")
POSITIVE_FIELDS = ("batch", "seq", "tokens_per_s", "step_median_s", "peak_memory_bytes")
"""Fields that, when set, must be > 0: a record of 0 tokens/s or batch 0 is never written or read."""


class SchemaError(ValueError):
    """A record that does not fit the schema (bad provenance, newer schema_version, missing field)."""


class ResultsFileError(WorkbenchError):
    """A results file the user named holds no usable record."""


@dataclass
class Record:
    """One number (or set of numbers) about one workload on one device/chip, and where it came from.

    Throughput fields say whose tokens they count (``tokens_kind``: total = input+output processed,
    output = generated only). ``source`` holds the provenance details:
    measured → host, versions, git revision, date, platform; projected → model name/version and every
    input; published → title/URL and the exact setting. Raw step-time samples are in ``step_samples_s``.
    ``eager_mode`` is the "tpu" device's eager mode of an uncompiled run ("strict" or "fused"; None elsewhere).
    ``peak_memory_bytes`` (measured) is the most memory the step held on the device, and
    ``peak_memory_basis`` says what that number is (``torch.cuda.max_memory_allocated``, or on a host CPU
    the process's peak resident set, which includes the interpreter and libraries).
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
    eager_mode: str | None = None
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
    peak_memory_bytes: float | None = None
    peak_memory_basis: str | None = None
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
        for name in POSITIVE_FIELDS:
            value = getattr(self, name)
            if value is not None and not (
                isinstance(value, int | float) and math.isfinite(value) and value > 0
            ):
                raise SchemaError(f"{name} must be a positive finite number, got {value!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Record:
        """Inverse of to_dict. Refuses newer schema versions; unknown keys (from a newer minor
        writer) are kept under ``extra['unknown_fields']`` rather than dropped."""
        missing = [k for k in ("schema_version", "provenance", "workload", "phase", "device") if k not in d]
        if missing:
            raise SchemaError(f"record missing {', '.join(missing)}")
        version = d["schema_version"]
        if not isinstance(version, int) or version > SCHEMA_VERSION or version < 1:
            raise SchemaError(f"schema_version {version!r} not supported (this reader: 1..{SCHEMA_VERSION})")
        names = {f.name for f in fields(cls)}
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
    """Records of one file. A line that is not a record is skipped with a one-line warning naming the
    file and line: unparseable JSON (a torn write), JSON that is not an object, an object that is not a
    valid record, or a record from a newer schema. A file with lines but no record at all is an error."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise ResultsFileError(f"{path}: not a results file (not UTF-8 text)") from None
    out: list[Record] = []
    skipped: list[str] = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        problem = None
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            problem = "torn/corrupt JSON (an interrupted write?)"
        else:
            if not isinstance(data, dict):
                problem = f"a JSON {_json_kind(data)}, not a record object"
            else:
                try:
                    out.append(Record.from_dict(data))
                except (SchemaError, TypeError) as exc:
                    problem = f"not a valid record: {str(exc).splitlines()[0]}"
        if problem:
            skipped.append(
                f"line {i} of {len(lines)}" + (" (last line)" if i == len(lines) else "") + f": {problem}"
            )
    if skipped and not out:
        more = f" (and {len(skipped) - 1} more line(s))" if len(skipped) > 1 else ""
        raise ResultsFileError(f"{path}: no result record; {skipped[0]}{more}")
    for where in skipped:
        warnings.warn(f"{path}: skipping {where}", stacklevel=2)
    return out


def _json_kind(value: object) -> str:
    return {list: "array", str: "string", int: "number", float: "number", bool: "boolean"}.get(
        type(value), "null" if value is None else type(value).__name__
    )


def load_results(*paths: str | Path):
    """All records of the given JSONL files (directories are searched for *.jsonl) as one DataFrame.

    One row per record; columns are the record fields plus ``file``. The published reference points
    are :func:`tpu_workbench.bench.published.published_records`.
    """
    import pandas as pd  # lazy: heavy (writers and readers of records never need pandas)

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


def variant_label(row: Any) -> str:
    """How tables and plots name a measured variant: the device, ``+compiled`` for torch.compile, ``+fused``
    for fused eager on "tpu" (a Record or a row/dict with those fields)."""
    get = row.get if isinstance(row, dict) or hasattr(row, "get") else (lambda k, d=None: getattr(row, k, d))
    label = str(get("device"))
    if get("compiled"):
        label += "+compiled"
    if get("eager_mode") == "fused":
        label += "+fused"
    return label
