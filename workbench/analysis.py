"""Analysis tables behind the notebooks and the demo: serving frontiers at an interactivity target,
weak-scaling efficiency, MFU under both FLOP conventions, and labels saying where each number came from.

Every function returns a pandas DataFrame (or plain values); nothing here draws or displays.
Measured rows come from result files, projected rows from :mod:`workbench.projection`, published rows
from :mod:`workbench.published`, and each row keeps its provenance.
"""

from __future__ import annotations

import glob
import math
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from workbench.catalog import load_catalog
from workbench.compare import compare_table
from workbench.flops import flops_per_token
from workbench.paths import repo_root
from workbench.projection import Assumptions, decode_sweep, project
from workbench.published import published_records
from workbench.results import load_results
from workbench.workloads.config import DecoderConfig


def device_label(row: dict) -> str:
    """What produced a number, in words: 'cpu (measured, host CPU)', 'tpu via XLA:CPU (measured; not a
    TPU)', 'TPU v7 x8 (projected)', 'B200 (published)'."""
    prov = row.get("provenance")
    if prov == "measured":
        name = str(row.get("device")) + ("+compiled" if row.get("compiled") else "")
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
    emu = sorted({p for p, prov in zip(df["platform"], df["provenance"], strict=False)
                  if prov == "measured" and isinstance(p, str) and "via XLA:" in p and "XLA:TPU" not in p})
    if not emu:
        return ""
    return ("Rows labelled " + ", ".join(f"'{p}'" for p in emu) + " are this project's \"tpu\" device executing "
            "through JAX on the host processor: they measure the backend's overhead, not a TPU.")


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
    """One row per measured record: where it came from, what ran where, tokens/s, step, MFU and its basis."""
    m = df[df["provenance"] == "measured"]
    rows = []
    for r in m.to_dict("records"):
        rows.append({"file": Path(str(r["file"])).name, "workload": r["workload"], "phase": r["phase"],
                     "batch": r["batch"], "seq": r["seq"], "device (platform)": device_label(r),
                     "tokens/s": r["tokens_per_s"], "tokens": r["tokens_kind"],
                     "step ms": 1e3 * r["step_median_s"],
                     "IQR %": 100 * r["step_iqr_s"] / r["step_median_s"] if r["step_median_s"] else math.nan,
                     "MFU %": 100 * r["mfu"] if r["mfu"] is not None and not pd.isna(r["mfu"]) else math.nan,
                     "MFU peak basis": str(r["peak_basis"]).split(":")[0],
                     "date": str((r.get("source") or {}).get("date", ""))[:16]})
    return pd.DataFrame(rows)


def measured_serving(df: pd.DataFrame) -> pd.DataFrame:
    """Measured decode records on catalog chips (a GPU or a real TPU), as Pareto points with cost."""
    if df.empty:
        return pd.DataFrame(columns=["label", "tok/s/user", "tok/s/chip"])
    m = df[(df["provenance"] == "measured") & (df["phase"] == "decode") & df["chip"].notna()]
    return pd.DataFrame([{"label": device_label(r), "tok/s/user": r["tokens_per_s_per_user"],
                          "tok/s/chip": r["tokens_per_s_per_chip"]} for r in m.to_dict("records")],
                        columns=["label", "tok/s/user", "tok/s/chip"])


def accelerator_comparison(df: pd.DataFrame):
    """GPU vs TPU where both were measured: the compare table with ``cuda`` as the baseline, or None and a
    sentence saying what is missing. A "tpu" emulated on a CPU/GPU does not count as a TPU."""
    m = df[df["provenance"] == "measured"]
    has_gpu = (m["device"] == "cuda").any()
    real_tpu = ((m["device"] == "tpu") & ~m["platform"].astype(str).str.contains("via XLA:(?:CPU|GPU|CUDA)",
                                                                                  regex=True)).any()
    if not (has_gpu and real_tpu):
        missing = [n for n, ok in (("a GPU (cuda) run", has_gpu), ("a run on a real TPU", real_tpu)) if not ok]
        return None, ("No GPU-vs-TPU comparison: the results lack " + " and ".join(missing) +
                      ". Point RESULT_FILES at a result file from a GPU box and one from a TPU VM "
                      "(`tpu-bench run ... -o gpu.jsonl` there).")
    return compare_table(m, baseline="cuda"), "Ratios are tokens/s relative to the GPU (cuda) run of the same cell."


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
        f = {conv: flops_per_token(c, r["phase"], int(r["seq"]), convention=conv) for conv in ("palm", "causal")}
        own = r.get("flop_convention")
        if own not in f:
            continue
        scale = r["mfu"] / f[own]
        rows.append({"label": device_label(r), "provenance": r["provenance"],
                     "source": Path(str(r.get("file") or "")).name if r["provenance"] == "measured" else "",
                     "workload": r["workload"],
                     "phase": r["phase"], "batch": r["batch"], "seq": r["seq"],
                     "MFU % (palm)": 100 * scale * f["palm"], "MFU % (causal)": 100 * scale * f["causal"],
                     "causal/palm": f["causal"] / f["palm"],
                     "MBU % (decode)": 100 * r["mbu"] if r.get("mbu") is not None and not pd.isna(r["mbu"])
                     else math.nan,
                     "peak basis": str(r.get("peak_basis")).split(":")[0],
                     "recorded convention": own})
    return pd.DataFrame(rows)


def project_phases(chip: str, workloads: Sequence[str], *, seq: int = 8192, n_chips: int = 8, layout: str = "tp",
                   batches: dict | None = None) -> list:
    """Projected train / prefill / decode records of ``workloads`` on ``chip`` (for the MFU comparison)."""
    batches = batches or {"train": 1, "prefill": 1, "decode": 64}
    return [project(chip, w, ph, n_chips, layout, batch=b, seq=seq) for w in workloads for ph, b in batches.items()]


def price_for(chip: str, tier: str, override: float | None = None) -> tuple[float | None, str]:
    """$/chip-hour of ``chip`` at ``tier`` ('cheapest' = lowest listed), or ``override`` for every chip.
    Returns (price, where it came from); price None when the chip lists no such tier."""
    if override:
        return float(override), f"user price ${override:g}/chip-hr"
    prices = load_catalog().chip(chip).prices
    if tier == "cheapest":
        prices = sorted(prices, key=lambda p: p.usd_per_chip_hour)[:1]
    else:
        prices = [p for p in prices if p.tier == tier]
    if not prices:
        return None, f"no {tier} price in the catalog"
    p = prices[0]
    return p.usd_per_chip_hour, f"{p.tier} ${p.usd_per_chip_hour:g} ({p.date})"


def tiers(chips: Sequence[str]) -> list[str]:
    cat = load_catalog()
    return ["cheapest", *sorted({p.tier for c in chips for p in cat.chip(c).prices})]


def decode_frontier(chips: Sequence[str], workload: str, *, n_chips: int = 8, layout: str = "tp", seq: int = 4096,
                    precision: str = "bf16", batches: Sequence[int] = (1, 2, 4, 8, 16, 32, 64, 128, 256)):
    """Projected decode batch sweep per chip: one record per (chip, batch)."""
    return [r for c in chips for r in decode_sweep(c, workload, n_chips=n_chips, layout=layout,
                                                   batches=tuple(batches), seq=seq, precision=precision)]


def frontier_frame(records, tier: str = "cheapest", price_override: float | None = None) -> pd.DataFrame:
    rows = []
    for r in records:
        usd, basis = price_for(r.chip, tier, price_override)
        per_chip = r.tokens_per_s_per_chip
        rows.append({"chip": r.chip, "provenance": r.provenance, "batch": r.batch, "tok/s/user": r.tokens_per_s_per_user,
                     "tok/s/chip": per_chip, "MFU %": 100 * r.mfu, "bound": r.extra.get("bound"),
                     "fits in HBM": bool(r.extra.get("fits_in_hbm", True)),
                     "$/chip-hr": usd, "price": basis,
                     "$/M output tokens": (usd / (per_chip * 3600) * 1e6) if usd else math.nan})
    return pd.DataFrame(rows)


def at_target(frame: pd.DataFrame, target: float) -> pd.DataFrame:
    """Per chip: the batch with the most throughput per chip that still gives every user ≥ ``target``
    tokens/s and fits in HBM, its throughput per chip and cost; chips that cannot reach it say why."""
    rows = []
    for chip, g in frame.groupby("chip", sort=False):
        ok = g[(g["tok/s/user"] >= target) & g["fits in HBM"]]
        if ok.empty:
            why = "no batch fits in HBM" if not g["fits in HBM"].any() else "target not reached by a batch that fits"
            rows.append({"chip": chip, "meets target": False, "batch": None, "tok/s/user": g["tok/s/user"].max(),
                         "tok/s/chip": math.nan, "$/M output tokens": math.nan, "price": g["price"].iloc[0],
                         "note": why})
            continue
        best = ok.loc[ok["tok/s/chip"].idxmax()]
        rows.append({"chip": chip, "meets target": True, "batch": int(best["batch"]), "tok/s/user": best["tok/s/user"],
                     "tok/s/chip": best["tok/s/chip"], "$/M output tokens": best["$/M output tokens"],
                     "price": best["price"]})
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
        rows.append({"row": p.source["row"], "chip": p.chip, "tok/s/user": p.tokens_per_s_per_user,
                     "tok/s/chip": p.tokens_per_s_per_chip,
                     "$/M tokens": p.cost[0]["usd_per_mtok"] if p.cost else None,
                     "price tier": p.cost[0]["tier"] if p.cost else None, "setting": p.source["setting"],
                     "source": p.source["title"]})
    return pd.DataFrame(rows)


def scaling_frame(chips: Sequence[str], workload: str, layouts: Sequence[str], counts: Sequence[int], *,
                  assumptions=None, batch: int = 4, seq: int = 4096) -> pd.DataFrame:
    """Projected training per chip count; efficiency = per-chip throughput / that at the smallest count."""
    rows = []
    for chip in chips:
        for layout in layouts:
            base = None
            for n in counts:
                r = project(chip, workload, "train", n, layout, batch=batch, seq=seq, assumptions=assumptions)
                base = base or r.tokens_per_s_per_chip
                rows.append({"chip": chip, "workload": workload, "layout": layout, "resolved": r.extra["layout"],
                             "chips": n, "tok/s/chip": r.tokens_per_s_per_chip,
                             "efficiency": r.tokens_per_s_per_chip / base, "MFU %": 100 * r.mfu,
                             "bound": r.extra["bound"], "comm %": 100 * r.extra["comm_fraction"],
                             "fits in HBM": r.extra["fits_in_hbm"], "provenance": "projected"})
    return pd.DataFrame(rows)


def published_scaling(assumptions=None) -> pd.DataFrame:
    """Row 5 (TorchTitan Qwen3-MoE-235B on TPU v7, 1 → 8 slices of 1,024 chips): published per-TensorCore
    throughput and efficiency vs the 1-slice point, beside the projection set up the same way."""
    a = asdict(assumptions or Assumptions())
    a["scaleup_domain"] = 1024
    pts = sorted((p for p in published_records() if p.source.get("row") == 5), key=lambda p: p.n_chips)
    rows = []
    base_pub = base_proj = None
    for p in pts:
        rec = project("TPU v7", "qwen3-235b-a22b", "train", int(p.n_chips), "fsdp+ep", batch=4, seq=4096,
                      assumptions=Assumptions(**a))
        base_pub = base_pub or p.tokens_per_s_per_device
        base_proj = base_proj or rec.tokens_per_s_per_device
        rows.append({"chips": int(p.n_chips), "published tok/s per TensorCore": p.tokens_per_s_per_device,
                     "projected tok/s per TensorCore": rec.tokens_per_s_per_device,
                     "rel error": rec.tokens_per_s_per_device / p.tokens_per_s_per_device - 1,
                     "rel error %": 100 * (rec.tokens_per_s_per_device / p.tokens_per_s_per_device - 1),
                     "published efficiency": p.tokens_per_s_per_device / base_pub,
                     "projected efficiency": rec.tokens_per_s_per_device / base_proj,
                     "source": f"{p.source['title']} ({p.source.get('via', p.source.get('url', ''))})"})
    return pd.DataFrame(rows)



def fits_in_memory(rec) -> bool:
    """False only when the projection says the configuration does not fit in HBM."""
    return bool((rec.extra or {}).get("fits_in_hbm", True))


def does_not_fit_note(rec) -> str:
    need = (rec.extra or {}).get("memory_per_chip_gb")
    return f"does not fit in HBM ({need:,.0f} GB per chip needed)" if need else "does not fit in HBM"


def price_kind(line: dict) -> str:
    """The kind of money a cost line is (list price, committed rent, owner's TCO, a provider's internal
    cost); lines that carry no kind are grouped by their tier."""
    return str(line.get("kind") or line["tier"])


def cost_cells(rec) -> dict:
    """Table cells for one projected record: the cheapest cost line with tier and date, or a visible
    "does not fit" and no cost when the configuration does not fit in HBM."""
    if not fits_in_memory(rec):
        return {"fits HBM": False, "$/M tok (cheapest tier)": math.nan, "tier (price date)": does_not_fit_note(rec)}
    if not rec.cost:
        return {"fits HBM": True, "$/M tok (cheapest tier)": math.nan, "tier (price date)": "no price in catalog"}
    c = min(rec.cost, key=lambda line: line["usd_per_mtok"])
    return {"fits HBM": True, "$/M tok (cheapest tier)": c["usd_per_mtok"],
            "tier (price date)": f"{c['tier']} ${c['usd_per_chip_hour']:g} ({c['price_date']})"}


def cheapest_by_price_kind(records, top: int = 3) -> list[str]:
    """One line per kind of price: the ``top`` chips with the lowest $ per million tokens at that kind.
    Chips are only compared within one kind; configurations that do not fit in HBM are left out."""
    best: dict[str, dict[str, dict]] = {}
    for rec in records:
        if not fits_in_memory(rec):
            continue
        for line in rec.cost:
            per_chip = best.setdefault(price_kind(line), {})
            if rec.chip not in per_chip or line["usd_per_mtok"] < per_chip[rec.chip]["usd_per_mtok"]:
                per_chip[rec.chip] = line
    out = []
    for kind, per_chip in sorted(best.items()):
        ranked = sorted(per_chip.items(), key=lambda kv: kv[1]["usd_per_mtok"])[:top]
        out.append(f"{kind}: " + ", ".join(f"{chip} ${line['usd_per_mtok']:.3g} ({line['tier']}, {line['price_date']})"
                                           for chip, line in ranked))
    return out
