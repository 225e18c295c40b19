"""Analysis tables behind the notebooks and the demo: serving frontiers at an interactivity target,
weak-scaling efficiency, MFU under both FLOP conventions, and labels saying where each number came from.

Every function returns a pandas DataFrame (or plain values); nothing here draws or displays.
Measured rows come from result files, projected rows from :mod:`tpu_workbench.bench.projection`, published rows
from :mod:`tpu_workbench.bench.published`, and each row keeps its provenance.
"""

from __future__ import annotations

import glob
import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from tpu_workbench.bench.catalog import load_catalog
from tpu_workbench.bench.catalog.prices import KIND_MEANING
from tpu_workbench.bench.compare import NOISY_IQR_PCT, compare_table
from tpu_workbench.bench.cost import HEADLINE_KINDS, line_of_kind, pick_price, usd_per_million_tokens
from tpu_workbench.bench.cost import price_kind as cost_price_kind
from tpu_workbench.bench.flops import flops_per_token
from tpu_workbench.bench.paths import repo_root
from tpu_workbench.bench.projection import decode_sweep, project, projection_vs_published
from tpu_workbench.bench.published import published_records
from tpu_workbench.bench.results import load_results, variant_label
from tpu_workbench.bench.tables import fmt
from tpu_workbench.bench.workloads.config import DecoderConfig

DEFAULT_PRICE_KIND = HEADLINE_KINDS[0]
"""Kind of price the serving tables use unless told: an owner's TCO (every GPU and TPU v7 have one)."""


def device_label(row: dict) -> str:
    """What produced a number, in words: 'cpu (measured, host CPU)', 'tpu via XLA:CPU (measured; not a
    TPU)', 'TPU v7 x8 (projected)', 'B200 (published)'."""
    prov = row.get("provenance")
    if prov == "measured":
        name = variant_label(row)
        plat = str(row.get("platform") or "")
        if "via" in plat:
            return f"{name} via {plat.split('via ', 1)[1].split(' (')[0]} (measured; not a TPU)"
        if isinstance(row.get("chip"), str) and row["chip"]:
            return f"{name} = {row['chip']} (measured)"
        return f"{name} (measured, {plat.split(' (')[0] or 'host'})"
    chip = row.get("chip") if isinstance(row.get("chip"), str) and row.get("chip") else row.get("device")
    n = row.get("n_chips")
    size = f" x{int(n)}" if isinstance(n, int | float) and not pd.isna(n) and n >= 1 else ""
    return f"{chip}{size} ({prov})"


def emulation_note(df: pd.DataFrame) -> str:
    """A sentence naming the platforms that are emulated (e.g. the "tpu" device on XLA:CPU)."""
    if df.empty or "platform" not in df:
        return ""
    emu = sorted(
        {
            p
            for p, prov in zip(df["platform"], df["provenance"], strict=False)
            if prov == "measured" and isinstance(p, str) and "via XLA:" in p and "XLA:TPU" not in p
        }
    )
    if not emu:
        return ""
    return (
        "Rows labelled " + ", ".join(f"'{p}'" for p in emu) + ' are this project\'s "tpu" device executing '
        "through JAX on the host processor: they measure the backend's overhead, not a TPU."
    )


def resolve_files(patterns: Sequence[str] | str | None) -> list[Path]:
    """Result files from paths or globs, tried relative to the current folder and then to the project
    root (so ``results/*.jsonl`` works from ``notebooks/`` too). Missing patterns are an error."""
    if not patterns:
        return []
    if isinstance(patterns, str):
        patterns = [patterns]
    out: list[Path] = []
    for pat in patterns:
        hits = sorted(glob.glob(str(pat))) or sorted(glob.glob(str(repo_root() / pat)))
        if not hits:
            raise FileNotFoundError(f"no result file matches {pat!r} (from {Path.cwd()} or {repo_root()})")
        out += [Path(h) for h in hits]
    return list(dict.fromkeys(out))


def load_frames(records=(), files: Sequence[str] | str | None = None) -> pd.DataFrame:
    """Records just measured plus the records of result files, one frame; ``file`` says where each
    row came from ('this run' for fresh records)."""
    parts = []
    if records:
        parts.append(pd.DataFrame([{**r.to_dict(), "file": "this run"} for r in records]))
    paths = resolve_files(files)
    if paths:
        parts.append(load_results(*paths))
    if not parts:
        return pd.DataFrame()
    df = pd.concat(parts, ignore_index=True)
    df["label"] = [device_label(r) for r in df.to_dict("records")]
    return df


def measured_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per measured record: where it came from, what ran where, tokens/s, step, its spread (NOISY when
    the step-time IQR is above NOISY_IQR_PCT of the median), MFU and its basis."""
    m = df[df["provenance"] == "measured"]
    rows = []
    for r in m.to_dict("records"):
        rows.append(
            {
                "file": Path(str(r["file"])).name,
                "workload": r["workload"],
                "phase": r["phase"],
                "batch": r["batch"],
                "seq": r["seq"],
                "device (platform)": device_label(r),
                "tokens/s": r["tokens_per_s"],
                "tokens": r["tokens_kind"],
                "step ms": 1e3 * r["step_median_s"],
                "IQR %": (
                    iqr := 100 * r["step_iqr_s"] / r["step_median_s"] if r["step_median_s"] else math.nan
                ),
                "noisy": "NOISY" if iqr > NOISY_IQR_PCT else "",
                "MFU %": 100 * r["mfu"] if r["mfu"] is not None and not pd.isna(r["mfu"]) else math.nan,
                "MFU peak basis": str(r["peak_basis"]).split(":")[0],
                "date": str((r.get("source") or {}).get("date", ""))[:16],
            }
        )
    return pd.DataFrame(rows)


def measured_serving(df: pd.DataFrame) -> pd.DataFrame:
    """Measured decode records on catalog chips (a GPU or a real TPU), as Pareto points with cost."""
    if df.empty:
        return pd.DataFrame(columns=["label", "tok/s/user", "tok/s/chip"])
    m = df[(df["provenance"] == "measured") & (df["phase"] == "decode") & df["chip"].notna()]
    return pd.DataFrame(
        [
            {
                "label": device_label(r),
                "tok/s/user": r["tokens_per_s_per_user"],
                "tok/s/chip": r["tokens_per_s_per_chip"],
            }
            for r in m.to_dict("records")
        ],
        columns=["label", "tok/s/user", "tok/s/chip"],
    )


def accelerator_comparison(df: pd.DataFrame):
    """GPU vs TPU where both were measured: the compare table with ``cuda`` as the baseline, or None and a
    sentence saying what is missing. A "tpu" emulated on a CPU/GPU does not count as a TPU."""
    m = df[df["provenance"] == "measured"]
    has_gpu = (m["device"] == "cuda").any()
    real_tpu = (
        (m["device"] == "tpu")
        & ~m["platform"].astype(str).str.contains("via XLA:(?:CPU|GPU|CUDA)", regex=True)
    ).any()
    if not (has_gpu and real_tpu):
        missing = [
            n for n, ok in (("a GPU (cuda) run", has_gpu), ("a run on a real TPU", real_tpu)) if not ok
        ]
        return None, (
            "No GPU-vs-TPU comparison: the results lack "
            + " and ".join(missing)
            + ". Point RESULT_FILES at a result file from a GPU box and one from a TPU VM "
            "(`tpu-bench run ... -o gpu.jsonl` there)."
        )
    return compare_table(
        m, baseline="cuda"
    ), "Ratios are tokens/s relative to the GPU (cuda) run of the same cell."


def _config(cfg: dict):
    return DecoderConfig(**{k: v for k, v in cfg.items() if k in DecoderConfig.__dataclass_fields__})


def mfu_conventions(df: pd.DataFrame) -> pd.DataFrame:
    """MFU of each decoder record under both FLOP conventions (palm = full attention; causal = halved,
    MaxText/Megatron), recomputed from the record's config, phase and seq; decode MBU beside it."""
    rows = []
    for r in df.to_dict("records"):
        cfg = r.get("config") or {}
        if r.get("mfu") is None or pd.isna(r.get("mfu")) or "n_layers" not in cfg or r.get("seq") is None:
            continue
        c = _config(cfg)
        f = {
            conv: flops_per_token(c, r["phase"], int(r["seq"]), convention=conv)
            for conv in ("palm", "causal")
        }
        own = r.get("flop_convention")
        if own not in f:
            continue
        scale = r["mfu"] / f[own]
        rows.append(
            {
                "label": device_label(r),
                "provenance": r["provenance"],
                "source": Path(str(r.get("file") or "")).name if r["provenance"] == "measured" else "",
                "workload": r["workload"],
                "phase": r["phase"],
                "batch": r["batch"],
                "seq": r["seq"],
                "MFU % (palm)": 100 * scale * f["palm"],
                "MFU % (causal)": 100 * scale * f["causal"],
                "causal/palm": f["causal"] / f["palm"],
                "MBU % (decode)": 100 * r["mbu"]
                if r.get("mbu") is not None and not pd.isna(r["mbu"])
                else math.nan,
                "peak basis": str(r.get("peak_basis")).split(":")[0],
                "recorded convention": own,
            }
        )
    return pd.DataFrame(rows)


def project_phases(
    chip: str,
    workloads: Sequence[str],
    *,
    seq: int = 8192,
    n_chips: int = 8,
    layout: str = "tp",
    batches: dict | None = None,
) -> list:
    """Projected train / prefill / decode records of ``workloads`` on ``chip`` (for the MFU comparison)."""
    batches = batches or {"train": 1, "prefill": 1, "decode": 64}
    return [
        project(chip, w, ph, n_chips, layout, batch=b, seq=seq)
        for w in workloads
        for ph, b in batches.items()
    ]


def price_for(chip: str, price: str | None = None, override: float | None = None) -> tuple[float | None, str]:
    """$/chip-hour of ``chip`` at ``price``: a kind of price (``list``, ``committed``, ``owner-tco`` …: the
    chip's cheapest fresh price of that kind) or a tier (``on-demand``, ``rent-3yr`` …); ``override`` is one
    user price for every chip. Returns (price or None when the chip has none of that kind, what it is)."""
    if override:
        return float(override), f"user price ${override:g}/chip-hr"
    c = load_catalog().chip(chip)
    price = price or DEFAULT_PRICE_KIND
    if price in KIND_MEANING:
        p = pick_price(c, price)
    else:
        p = next((q for q in c.prices if q.tier == price), None)
    if p is None:
        return None, f"no {price} price in the catalog"
    stale = " (stale)" if p.staleness() else ""
    return p.usd_per_chip_hour, f"{p.kind}: {p.tier} ${p.usd_per_chip_hour:g} ({p.date}){stale}"


def price_choices(chips: Sequence[str]) -> list[str]:
    """What a price control offers for ``chips``: the kinds of price (each compares like with like), the
    headline kinds first, then the individual tiers any of the chips lists."""
    cat = load_catalog()
    listed = [p for c in chips for p in cat.chip(c).prices]
    kinds = [k for k in (*HEADLINE_KINDS, *KIND_MEANING) if any(p.kind == k for p in listed)]
    return [*dict.fromkeys(kinds), *sorted({p.tier for p in listed})]


def decode_frontier(
    chips: Sequence[str],
    workload: str,
    *,
    n_chips: int = 8,
    layout: str = "tp",
    seq: int = 4096,
    precision: str = "bf16",
    batches: Sequence[int] = (1, 2, 4, 8, 16, 32, 64, 128, 256),
):
    """Projected decode batch sweep per chip: one record per (chip, batch)."""
    return [
        r
        for c in chips
        for r in decode_sweep(
            c, workload, n_chips=n_chips, layout=layout, batches=tuple(batches), seq=seq, precision=precision
        )
    ]


def frontier_frame(records, price: str | None = None, price_override: float | None = None) -> pd.DataFrame:
    """One row per projected decode record: interactivity, throughput per chip, and the cost at ``price``
    (a kind of price or a tier, see :func:`price_for`; or ``price_override`` $/chip-hr for every chip). A batch
    that does not fit in HBM has no cost."""
    rows = []
    for r in records:
        usd, basis = price_for(r.chip, price, price_override)
        per_chip = r.tokens_per_s_per_chip
        fits = fits_in_memory(r)
        rows.append(
            {
                "chip": r.chip,
                "provenance": r.provenance,
                "batch": r.batch,
                "tok/s/user": _num(r.tokens_per_s_per_user),
                "tok/s/chip": _num(per_chip),
                "MFU %": 100 * _num(r.mfu),
                "bound": r.extra.get("bound"),
                "fits in HBM": fits,
                "$/chip-hr": usd,
                "price": basis,
                "$/M output tokens": usd_per_million_tokens(usd, per_chip) if usd and fits else math.nan,
            }
        )
    return pd.DataFrame(rows)


def at_target(frame: pd.DataFrame, target: float) -> pd.DataFrame:
    """Per chip: the batch with the most throughput per chip that still gives every user ≥ ``target``
    tokens/s and fits in HBM, its throughput per chip and cost; chips that cannot reach it say why."""
    rows = []
    for chip, g in frame.groupby("chip", sort=False):
        ok = g[(g["tok/s/user"] >= target) & g["fits in HBM"]]
        if ok.empty:
            why = (
                "no batch fits in HBM"
                if not g["fits in HBM"].any()
                else "target not reached by a batch that fits"
            )
            rows.append(
                {
                    "chip": chip,
                    "meets target": False,
                    "batch": None,
                    "tok/s/user": g["tok/s/user"].max(),
                    "tok/s/chip": math.nan,
                    "$/M output tokens": math.nan,
                    "price": g["price"].iloc[0],
                    "note": why,
                }
            )
            continue
        best = ok.loc[ok["tok/s/chip"].idxmax()]
        rows.append(
            {
                "chip": chip,
                "meets target": True,
                "batch": int(best["batch"]),
                "tok/s/user": best["tok/s/user"],
                "tok/s/chip": best["tok/s/chip"],
                "$/M output tokens": best["$/M output tokens"],
                "price": best["price"],
            }
        )
    return pd.DataFrame(rows).sort_values("$/M output tokens", na_position="last")


def records_at_target(records, table: pd.DataFrame) -> list:
    """The projected records picked by :func:`at_target` (one per chip that meets the target)."""
    picked = {(r["chip"], r["batch"]) for r in table.to_dict("records") if r["meets target"]}
    return [r for r in records if (r.chip, r.batch) in picked]


def published_serving() -> pd.DataFrame:
    """Published serving points with tokens/s per user (InferenceX rows 11-12): chip, x, tokens/s per chip,
    $ per M tokens, setting."""
    rows = []
    for p in published_records():
        if p.tokens_per_s_per_user is None:
            continue
        rows.append(
            {
                "row": p.source["row"],
                "chip": p.chip,
                "tok/s/user": p.tokens_per_s_per_user,
                "tok/s/chip": p.tokens_per_s_per_chip,
                "$/M tokens": p.cost[0]["usd_per_mtok"] if p.cost else None,
                "price tier": p.cost[0]["tier"] if p.cost else None,
                "setting": p.source["setting"],
                "source": p.source["title"],
            }
        )
    return pd.DataFrame(rows)


def scaling_frame(
    chips: Sequence[str],
    workload: str,
    layouts: Sequence[str],
    counts: Sequence[int],
    *,
    assumptions=None,
    batch: int = 4,
    seq: int = 4096,
) -> pd.DataFrame:
    """Projected training per chip count, one series per (chip, layout).

    ``efficiency`` = per-chip throughput ÷ that at the series' smallest count whose configuration fits in
    HBM (``baseline chips``); a series normalised to a point that cannot run would not mean anything, so
    counts that do not fit have no efficiency, and neither has a series in which no count fits."""
    rows = []
    for chip in chips:
        for layout in layouts:
            series = []
            for n in counts:
                r = project(chip, workload, "train", n, layout, batch=batch, seq=seq, assumptions=assumptions)
                series.append(
                    {
                        "chip": chip,
                        "workload": workload,
                        "layout": layout,
                        "resolved": r.extra["layout"],
                        "chips": n,
                        "tok/s/chip": _num(r.tokens_per_s_per_chip),
                        "MFU %": 100 * _num(r.mfu),
                        "bound": r.extra["bound"] if fits_in_memory(r) else "does not fit",
                        "comm %": 100 * r.extra["comm_fraction"] if fits_in_memory(r) else math.nan,
                        "fits in HBM": fits_in_memory(r),
                        "GB per chip": r.extra.get("memory_per_chip_gb", math.nan),
                        "provenance": "projected",
                    }
                )
            base = next((row for row in series if row["fits in HBM"]), None)
            for row in series:
                row["baseline chips"] = base["chips"] if base else None
                row["efficiency"] = (
                    row["tok/s/chip"] / base["tok/s/chip"] if base and row["fits in HBM"] else math.nan
                )
            rows += series
    return pd.DataFrame(rows)


def published_scaling(assumptions=None) -> pd.DataFrame:
    """Row 5 (TorchTitan Qwen3-MoE-235B on TPU v7, 1 → 8 slices of 1,024 chips): the published throughput
    per TensorCore and per chip beside the projection of the same setting (the rows of
    :func:`tpu_workbench.bench.projection.projection_vs_published`, where that setting is stated), with the relative
    error. The efficiencies are each series' own: published vs its 1-slice point, projected vs its own."""
    table = projection_vs_published(assumptions=assumptions)
    rows5 = table[table["id"].astype(str).str.startswith("torchtpu-row5")].sort_values("n_chips")
    per_chip = load_catalog().chip("TPU v7").devices_per_chip
    rows = []
    for r in rows5.to_dict("records"):
        pub, proj = float(r["published"]), float(r["projected"])
        rows.append(
            {
                "chips": int(r["n_chips"]),
                "published tok/s per TensorCore": pub,
                "projected tok/s per TensorCore": proj,
                "published tok/s per chip": pub * per_chip,
                "projected tok/s per chip": proj * per_chip,
                "rel error": r["rel_error"],
                "rel error %": 100 * r["rel_error"],
                "category": r["category"],
                "source": r["source"],
            }
        )
    out = pd.DataFrame(rows)
    if len(out):
        out["published efficiency vs 1 slice"] = (
            out["published tok/s per chip"] / out["published tok/s per chip"].iloc[0]
        )
        out["projected efficiency vs 1 slice"] = (
            out["projected tok/s per chip"] / out["projected tok/s per chip"].iloc[0]
        )
    return out


def _num(v) -> float:
    """A projected rate, NaN where the projection gives none (a setting that does not fit)."""
    return math.nan if v is None else v


def fits_in_memory(rec) -> bool:
    """False only when the projection says the configuration does not fit in HBM."""
    return bool((rec.extra or {}).get("fits_in_hbm", True))


def does_not_fit_note(rec) -> str:
    """ "does not fit in HBM (needs 36 GB per device, has 34)" from the projection's memory figures."""
    extra = rec.extra or {}
    need = extra.get("memory_per_device_gb", extra.get("memory_per_chip_gb"))
    have = extra.get("memory_capacity_per_device_gb")
    if need and have:
        return f"does not fit in HBM (needs {fmt(need)} GB per device, has {fmt(have)})"
    return f"does not fit in HBM (needs {fmt(need)} GB per chip)" if need else "does not fit in HBM"


def price_kind(line: dict) -> str:
    """The kind of money a cost line is (list price, committed rent, owner's TCO, a provider's internal cost)."""
    return str(line.get("price_kind") or cost_price_kind(line["tier"]))


def _line_text(line: dict) -> str:
    stale = ", stale" if line.get("stale") else ""
    return f"{line['tier']} ${line['usd_per_chip_hour']:g}, {line['price_date']}{stale}"


def cost_cells(rec, kinds: Sequence[str] = HEADLINE_KINDS) -> dict:
    """Table cells for one projected record: its $ per million tokens at each kind of price (each chip's
    cheapest fresh price of that kind) and the prices used with their dates; a configuration that does not
    fit in HBM gets no cost and says so."""
    if not fits_in_memory(rec):
        return {**{f"$/M tok ({k})": math.nan for k in kinds}, "prices (date)": does_not_fit_note(rec)}
    lines = {k: line_of_kind(rec.cost, k) for k in kinds}
    used = "; ".join(f"{k}: {_line_text(line)}" for k, line in lines.items() if line) or "no price in catalog"
    return {
        **{f"$/M tok ({k})": line["usd_per_mtok"] if line else math.nan for k, line in lines.items()},
        "prices (date)": used,
    }


def cheapest_by_price_kind(records, kinds: Sequence[str] = HEADLINE_KINDS, top: int = 3) -> list[str]:
    """One line per kind of price: the ``top`` chips with the lowest $ per million tokens at that kind.
    Chips are compared only within one kind; configurations that do not fit in HBM are left out, and chips
    without a price of the kind are named."""
    out = []
    for kind in kinds:
        ranked, missing = [], []
        for rec in records:
            line = line_of_kind(rec.cost, kind) if fits_in_memory(rec) else None
            if line:
                ranked.append((line["usd_per_mtok"], rec.chip, line))
            elif fits_in_memory(rec):
                missing.append(rec.chip)
        if not ranked:
            continue
        best = ", ".join(
            f"{chip} ${fmt(usd)} ({_line_text(line)})" for usd, chip, line in sorted(ranked)[:top]
        )
        out.append(
            f"{kind} — {KIND_MEANING[kind]}: {best}"
            + (f"; no {kind} price: {', '.join(sorted(set(missing)))}" if missing else "")
        )
    return out
