"""Published reference points as ``published`` records: the figure, its source and the exact setting.

Data beside this file:

- ``figures.json``: the TorchTPU / InferenceX figures of the project's published-figures reference
  (rows 1-14; row 8 is a qualitative limitation, not a number, and has no record) -> :func:`published_records`.
- ``training.json``: training benchmarks with complete settings (MaxText v5e/v5p tables, MaxText model
  tiering on v6e/v5p, MaxText TPU7x recipes, torchtitan H100), each with repository, file, commit, date
  and the config it was run with -> :func:`training_points`, :func:`training_records`.
- ``mlperf_inference.json`` (MLPerf Inference v4.1 llama2-70b logs and configs) and ``jetstream_pytorch.json``
  (jetstream-pytorch's TPU v5e table): serving benchmarks with repository, commit, path and date, read by
  :mod:`~workbench.projection.serving_benchmarks`; ``models/``: the config.json fields of their models.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from tpu_workbench.bench.catalog import load_catalog
from tpu_workbench.bench.results import Record

DATA = Path(__file__).parent / "figures.json"
TRAINING = Path(__file__).parent / "training.json"


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
        source = {
            "kind": "published",
            "row": p["row"],
            **p["source"],
            "setting": p["setting"],
            "figure": p["figure"],
            "document": "shared/reference/published-figures.md",
        }
        out.append(
            Record(
                provenance="published",
                source=source,
                created=p["source"].get("date", ""),
                record_id=f"published-row{p['row']}-{len(out)}",
                **fields,
            )
        )
    return out


@lru_cache(maxsize=1)
def _training() -> dict:
    return json.loads(TRAINING.read_text())


def training_models() -> dict[str, dict]:
    """DecoderConfig fields (with ``source``) of the published models that are not workload presets."""
    return {k: {f: x for f, x in v.items() if f != "block"} for k, v in _training()["models"].items()}


def training_blocks() -> dict[str, dict]:
    """Layer wiring (``tpu_workbench.bench.projection.block.Block`` fields: mlp, parallel, source) of the published
    models whose layer is not the Llama layer DecoderConfig assumes; absent = the default."""
    return {k: dict(v["block"]) for k, v in _training()["models"].items() if v.get("block")}


def training_points() -> list[dict]:
    """The published training points as dicts: id, group, source {title, repo, path, commit, date, config},
    figure (as printed), published {tflops_per_chip, mfu, tokens_per_s_per_device | _per_chip, ...},
    setting {...}, and ``unanchored`` (the reason) where the projection cannot set the point up."""
    return [json.loads(json.dumps(p)) for p in _training()["points"]]


def training_records() -> list[Record]:
    """One ``published`` record per training point (per-chip and per-device figures as printed or implied
    by the chip's devices per chip; MFU as printed, else TFLOP/s per chip / catalog peak, said in ``extra``)."""
    catalog = load_catalog()
    out = []
    for p in training_points():
        st, pub = p["setting"], p["published"]
        chip = catalog.chip(st["chip"]) if st.get("chip") in catalog else None
        dev = chip.devices_per_chip if chip else 1
        per_dev = pub.get("tokens_per_s_per_device") or (
            pub["tokens_per_s_per_chip"] / dev if pub.get("tokens_per_s_per_chip") else None
        )
        mfu, mfu_basis = pub.get("mfu"), "as printed"
        if mfu is None and pub.get("tflops_per_chip") and chip and st.get("precision", "bf16") == "bf16":
            mfu, mfu_basis = (
                pub["tflops_per_chip"] / chip.peak_tflops["bf16"],
                "TFLOP/s per chip / catalog bf16 peak",
            )
        n = st.get("n_chips")
        out.append(
            Record(
                provenance="published",
                workload=str(st.get("model", "")),
                phase="train",
                device=st.get("chip", ""),
                chip=st.get("chip"),
                precision=st.get("precision", "unstated"),
                batch=st.get("per_device_batch"),
                seq=st.get("seq"),
                n_chips=n,
                n_devices=n * dev if n else None,
                tokens_kind="total",
                tokens_per_s_per_device=per_dev,
                tokens_per_s_per_chip=per_dev * dev if per_dev else None,
                tokens_per_s=per_dev * dev * n if per_dev and n else None,
                achieved_tflops=pub.get("tflops_per_chip"),
                mfu=mfu,
                flop_convention=st.get("mfu_convention"),
                source={
                    "kind": "published",
                    "id": p["id"],
                    "group": p["group"],
                    **p["source"],
                    "setting": st["text"],
                    "figure": p["figure"],
                    "document": "workbench/published/training.json",
                },
                extra={"mfu_basis": mfu_basis, "unanchored": p.get("unanchored"), "setting": st},
                created=p["source"]["date"],
                record_id=f"published-{p['id']}",
            )
        )
    return out
