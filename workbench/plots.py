"""Matplotlib figures in one style. Provenance is always visible: measured = solid bars / filled
circles with solid lines, projected = hatched bars / dashed lines with open squares, published = stars.

Every function takes records (or a DataFrame of them), returns the Figure, and saves a PNG when given
``path``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib
import numpy as np
import pandas as pd
from cycler import cycler
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from workbench.catalog import load_catalog
from workbench.projection import Assumptions, decode_sweep, project, scaling_curve
from workbench.published import published_records
from workbench.results import Record, load_results

if TYPE_CHECKING:  # typing only: demo_chain imports the codemod
    from workbench.demo_chain import LossCheck

KINDS = ("throughput", "mfu", "cost", "pareto", "scaling", "roofline")
STYLE = {
    "measured": {"hatch": "", "alpha": 0.95, "marker": "o", "linestyle": "-"},
    "projected": {"hatch": "//", "alpha": 0.55, "marker": "s", "linestyle": "--"},
    "published": {"hatch": "", "alpha": 1.0, "marker": "*", "linestyle": ":"},
}
RC = {"figure.figsize": (9, 5), "figure.dpi": 110, "axes.grid": True, "grid.linestyle": ":", "grid.alpha": 0.6,
      "axes.spines.top": False, "axes.spines.right": False, "font.size": 9, "axes.titlesize": 11,
      "legend.fontsize": 8, "axes.prop_cycle": cycler(color=matplotlib.colormaps["tab10"].colors)}
COLORS = RC["axes.prop_cycle"].by_key()["color"]


def _frame(data) -> pd.DataFrame:
    if isinstance(data, pd.DataFrame):
        return data
    return pd.DataFrame([r.to_dict() if isinstance(r, Record) else r for r in data])


def _finish(fig: Figure, path: str | Path | None) -> Figure:
    fig.tight_layout()
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path)
    return fig


def _provenance_legend(ax, kinds: Iterable[str], extra: list | None = None) -> None:
    handles = list(extra or [])
    for kind in sorted(set(kinds)):
        if kind == "published":
            handles.append(Line2D([], [], marker="*", color="k", linestyle="", markersize=11, label="published"))
        else:
            handles.append(Patch(facecolor="0.6", hatch=STYLE[kind]["hatch"], alpha=STYLE[kind]["alpha"],
                                 edgecolor="k", label=kind))
    ax.legend(handles=handles, loc="best")


def _variant(row) -> str:
    if row.get("provenance") == "measured":
        name = row["device"] + ("+compiled" if row.get("compiled") else "")
        if row.get("platform") and "via" in str(row.get("platform")):
            name += "\n(" + str(row["platform"]).split(" (")[0] + ")"
        return name
    return f"{row.get('chip') or row['device']} x{int(row['n_chips'])}" if row.get("n_chips") else str(row["device"])


def _bars(df: pd.DataFrame, value, ylabel: str, title: str, path) -> Figure:
    with matplotlib.rc_context(RC):
        fig = Figure()
        ax = fig.subplots()
        df = df.copy()
        df["variant"] = [_variant(r) for r in df.to_dict("records")]
        df["group"] = [f"{r['workload']} {r['phase']} b{r['batch']} s{r['seq']}" for r in df.to_dict("records")]
        df["value"] = [value(r) for r in df.to_dict("records")]
        df = df.dropna(subset=["value"])
        if df.empty:
            raise ValueError(f"no records with a value for {ylabel}")
        df = df.groupby(["group", "variant", "provenance"], as_index=False)["value"].median()
        groups = list(dict.fromkeys(df["group"]))
        variants = list(dict.fromkeys(df["variant"]))
        width = 0.8 / max(len(variants), 1)
        colors = {v: RC["axes.prop_cycle"].by_key()["color"][i % 10] for i, v in enumerate(variants)}
        for _, r in df.iterrows():
            x = groups.index(r["group"]) + (variants.index(r["variant"]) - (len(variants) - 1) / 2) * width
            st = STYLE[r["provenance"]]
            if r["provenance"] == "published":
                ax.plot(x, r["value"], marker="*", markersize=14, color=colors[r["variant"]], linestyle="")
            else:
                ax.bar(x, r["value"], width * 0.95, color=colors[r["variant"]], hatch=st["hatch"], alpha=st["alpha"],
                       edgecolor="k", linewidth=0.5)
                ax.annotate(f"{r['value']:,.3g}", (x, r["value"]), ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(groups)), groups)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        _provenance_legend(ax, df["provenance"], [Patch(color=colors[v], label=v) for v in variants])
        return _finish(fig, path)


def plot_throughput_bars(records, *, path: str | Path | None = None) -> Figure:
    """Tokens (or images) per second per device variant, grouped by workload/phase/size."""
    df = _frame(records)
    kinds = ", ".join(sorted(set(df["tokens_kind"].dropna())))
    return _bars(df, lambda r: r.get("tokens_per_s_per_device") if r["provenance"] != "measured"
                 else r.get("tokens_per_s"), f"throughput per device [{kinds} tokens/s]",
                 "Throughput per device (median of timed steps)", path)


def plot_mfu_bars(records, *, path: str | Path | None = None) -> Figure:
    """MFU in % per device variant; the peak basis differs (catalog vs measured CPU peak) and is in the title."""
    df = _frame(records)
    bases = sorted({str(b).split(":")[0] for b in df["peak_basis"].dropna()})
    conv = ", ".join(sorted({str(c) for c in df["flop_convention"].dropna()}))
    return _bars(df, lambda r: 100 * r["mfu"] if pd.notna(r.get("mfu")) else None, "MFU [%]",
                 f"Model FLOP utilisation (convention: {conv}; peak: {'; '.join(bases)})", path)


def plot_cost_per_tier(records, *, path: str | Path | None = None) -> Figure:
    """$ per million tokens for each price tier and chip (tier, source and date are in the records)."""
    df = _frame(records)
    rows = [{"label": f"{r.get('chip')}\n{r['workload']} {r['phase']} b{r.get('batch')} x{r.get('n_chips'):g} chips"
                      f"\n({r.get('tokens_kind')} tokens)", "tier": c["tier"],
             "usd": c["usd_per_mtok"], "provenance": r["provenance"]}
            for r in df.to_dict("records") for c in (r.get("cost") or [])]
    if not rows:
        raise ValueError("no records with cost lines (cost needs a catalog chip with prices)")
    cdf = pd.DataFrame(rows)
    with matplotlib.rc_context(RC):
        fig = Figure()
        ax = fig.subplots()
        labels = list(dict.fromkeys(cdf["label"]))
        tiers = list(dict.fromkeys(cdf["tier"]))
        width = 0.8 / len(tiers)
        colors = RC["axes.prop_cycle"].by_key()["color"]
        for _, r in cdf.iterrows():
            x = labels.index(r["label"]) + (tiers.index(r["tier"]) - (len(tiers) - 1) / 2) * width
            color = colors[tiers.index(r["tier"]) % 10]
            if r["provenance"] == "published":
                ax.plot(x, r["usd"], marker="*", markersize=14, color=color, linestyle="")
            else:
                st = STYLE[r["provenance"]]
                ax.bar(x, r["usd"], width * 0.95, color=color, hatch=st["hatch"], alpha=st["alpha"],
                       edgecolor="k", linewidth=0.5)
        ax.set_xticks(range(len(labels)), labels)
        ax.set_ylabel("$ per million tokens")
        ax.set_title("Cost per million tokens by price tier ($/chip-hr ÷ tokens/s per chip)")
        _provenance_legend(ax, cdf["provenance"], [Patch(color=colors[i % 10], label=t) for i, t in enumerate(tiers)])
        return _finish(fig, path)


def plot_pareto(records, *, path: str | Path | None = None) -> Figure:
    """Decode batch sweep: tokens/s per chip (y) vs tokens/s per user = 1/step time (x), per chip."""
    df = _frame(records)
    df = df.dropna(subset=["tokens_per_s_per_user"])
    with matplotlib.rc_context(RC):
        fig = Figure()
        ax = fig.subplots()
        for (label, prov), g in df.groupby([df["chip"].fillna(df["device"]), "provenance"]):
            g = g.sort_values("tokens_per_s_per_user")
            y = g["tokens_per_s_per_chip"].fillna(g["tokens_per_s"])
            st = STYLE[prov]
            ls = "" if prov == "published" else st["linestyle"]
            ax.plot(g["tokens_per_s_per_user"], y, marker=st["marker"], linestyle=ls, markersize=12 if
                    prov == "published" else 5, label=f"{label} ({prov})")
            if prov != "published" and "batch" in g:
                for xx, yy, b in zip(g["tokens_per_s_per_user"], y, g["batch"], strict=False):
                    ax.annotate(f"b{int(b)}", (xx, yy), fontsize=6, xytext=(2, 2), textcoords="offset points")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("interactivity [output tokens/s per user] (= 1 / decode step time)")
        ax.set_ylabel("throughput [output tokens/s per chip]")
        ax.set_title("Decode throughput vs interactivity (batch sweep)")
        ax.legend(loc="best")
        return _finish(fig, path)


def plot_scaling(records, *, path: str | Path | None = None) -> Figure:
    """Scaling efficiency = per-chip throughput at N / per-chip throughput at the smallest N, per series."""
    df = _frame(records).dropna(subset=["n_chips"])
    df = df[df["n_chips"] > 0]
    with matplotlib.rc_context(RC):
        fig = Figure()
        ax = fig.subplots()
        for (chip, wl, prov), g in df.groupby([df["chip"].fillna(df["device"]), "workload", "provenance"]):
            g = g.sort_values("n_chips")
            y = g["tokens_per_s_per_chip"].fillna(g["tokens_per_s_per_device"])
            if y.isna().all():
                continue
            eff = y / y.iloc[0]
            st = STYLE[prov]
            ax.plot(g["n_chips"], eff, marker=st["marker"], linestyle="" if prov == "published" else st["linestyle"],
                    markersize=13 if prov == "published" else 5,
                    label=f"{chip} {wl} ({prov}, vs {int(g['n_chips'].iloc[0])} chips)")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("chips")
        ax.set_ylabel("scaling efficiency [per-chip throughput / smallest-N per-chip]")
        ax.set_title("Weak-scaling efficiency vs chip count")
        ax.axhline(1.0, color="0.5", linewidth=0.8)
        ax.legend(loc="best")
        return _finish(fig, path)


def plot_roofline(chips: Sequence, records=(), *, path: str | Path | None = None, precision: str = "bf16") -> Figure:
    """Log-log attainable FLOP/s vs arithmetic intensity (FLOP per HBM byte) for catalog chips, with
    projected points (intensity = FLOPs per step / HBM bytes per step)."""
    with matplotlib.rc_context(RC):
        fig = Figure()
        ax = fig.subplots()
        ai = np.logspace(-1, 5, 200)
        colors = RC["axes.prop_cycle"].by_key()["color"]
        for i, chip in enumerate(chips):
            peak = chip.peak(precision) / 1e12
            bw = chip.hbm_bw_gbps * 1e9 / 1e12
            ax.plot(ai, np.minimum(peak, ai * bw), color=colors[i % 10],
                    label=f"{chip.name} roof ({precision} {peak:,.0f} TF/s, {chip.hbm_bw_gbps:,.0f} GB/s, "
                          f"ridge {peak / bw:,.0f} FLOP/B)")
        for rec in _frame(records).to_dict("records") if len(records) else []:
            extra = rec.get("extra") or {}
            if "hbm_bytes_per_step" not in extra:
                continue
            chip_names = [c.name for c in chips]
            idx = chip_names.index(rec["chip"]) if rec["chip"] in chip_names else 0
            tokens = rec["batch"] * (1 if rec["phase"] == "decode" else rec["seq"])
            x = rec["flops_per_token"] * tokens / extra["hbm_bytes_per_step"]
            st = STYLE[rec["provenance"]]
            ax.plot(x, rec["achieved_tflops"], marker=st["marker"], color=colors[idx % 10], linestyle="",
                    markerfacecolor="none")
            ax.annotate(f"{rec['phase']} b{rec['batch']}", (x, rec["achieved_tflops"]), fontsize=6,
                        xytext=(3, -8), textcoords="offset points")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("arithmetic intensity [FLOP / HBM byte]")
        ax.set_ylabel("attainable [TFLOP/s per chip]")
        ax.set_title("Roofline (lines: catalog roofs; open markers: workload points)")
        handles, _ = ax.get_legend_handles_labels()
        kinds = sorted({r["provenance"] for r in _frame(records).to_dict("records")}) if len(records) else []
        handles += [Line2D([], [], marker=STYLE[k]["marker"], color="k", linestyle="", markerfacecolor="none",
                           label=f"{k} point") for k in kinds]
        ax.legend(handles=handles, loc="lower right")
        return _finish(fig, path)


def plot_cost_tiers(records, *, title_suffix: str = "", path=None):
    """$ per million tokens per price tier and chip (:func:`workbench.plots.plot_cost_per_tier`) with short
    tick labels (chip names) and the setting in the title."""
    fig = plot_cost_per_tier(records)
    ax = fig.axes[0]
    ax.set_xticks(range(len(records)), [r.chip for r in records])
    ax.set_title(f"Cost per million {records[0].tokens_kind} tokens by price tier{title_suffix}\n"
                 "($/chip-hr ÷ tokens/s per chip; catalog prices with tier and date)", fontsize=10)
    fig.tight_layout()
    if path:
        fig.savefig(path)
    return fig


def plot_mfu_conventions(table: pd.DataFrame, *, path=None):
    """Horizontal grouped bars: MFU under palm vs causal for each row; measured and projected in separate
    panels (their peaks differ: measured host-CPU peak vs catalog chip peak)."""
    kinds = [k for k in ("measured", "projected") if (table["provenance"] == k).any()]
    sizes = [max(int((table["provenance"] == k).sum()), 1) for k in kinds] or [1]
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(10, 1.2 + 0.42 * sum(sizes) + 0.9 * len(sizes)))
        axes = fig.subplots(len(kinds) or 1, 1, squeeze=False, gridspec_kw={"height_ratios": sizes})
        for ax, kind in zip(axes[:, 0], kinds, strict=False):
            t = table[table["provenance"] == kind].reset_index(drop=True)
            ys = range(len(t))
            st = STYLE[kind]
            for j, conv in enumerate(("palm", "causal")):
                vals = t[f"MFU % ({conv})"]
                pos = [y + (j - 0.5) * 0.4 for y in ys]
                ax.barh(pos, vals, 0.38, color=COLORS[j], hatch=st["hatch"], alpha=st["alpha"], edgecolor="k",
                        linewidth=0.5, label=f"{conv} convention ({kind})")
                for y, v in zip(pos, vals, strict=False):
                    ax.annotate(f"{v:.3g}%", (v, y), va="center", fontsize=6.5, xytext=(2, 0),
                                textcoords="offset points")
            src = t["source"] if "source" in t else [""] * len(t)
            ax.set_yticks(list(ys), [f"{r['workload']} {r['phase']} b{r['batch']} s{r['seq']} · "
                                     f"{r['label'].split(' (')[0]}{(' · ' + s_) if s_ else ''}"
                                     for r, s_ in zip(t.to_dict("records"), src, strict=False)], fontsize=7)
            ax.invert_yaxis()
            ax.set_xlabel("MFU [% of peak]")
            basis = "; ".join(sorted(set(t["peak basis"])))
            ax.set_title(f"{kind} — peak: {basis}"[:150], fontsize=9)
            ax.legend(loc="lower right")
        fig.suptitle("MFU under both FLOP conventions: palm = full attention (PaLM/nanoGPT/torchtitan), "
                     "causal = halved (MaxText/Megatron)", fontsize=10)
        fig.tight_layout()
        if path:
            fig.savefig(path)
        return fig


def plot_decode_bandwidth(table: pd.DataFrame, *, path=None):
    """Decode rows: memory-bandwidth utilisation beside MFU (decode is bandwidth-bound: MBU ≫ MFU)."""
    t = table[table["phase"] == "decode"].reset_index(drop=True)
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(9, 4.8))
        ax = fig.subplots()
        for i, r in enumerate(t.to_dict("records")):
            st = STYLE[r["provenance"]]
            for j, col in enumerate(("MBU % (decode)", "MFU % (palm)")):
                ax.bar(i + (j - 0.5) * 0.4, r[col], 0.38, color=COLORS[2 + j], hatch=st["hatch"], alpha=st["alpha"],
                       edgecolor="k", linewidth=0.5)
                ax.annotate(f"{r[col]:.2g}", (i + (j - 0.5) * 0.4, r[col]), ha="center", va="bottom", fontsize=6.5)
        ax.set_xticks(range(len(t)), [f"{r['workload']} b{r['batch']} ctx{r['seq']}\n{r['label'].split(' (')[0]}"
                                      f"\n{r.get('source') or ''}" for r in t.to_dict("records")], fontsize=6.5)
        ax.set_ylabel("utilisation [% of peak bandwidth / peak FLOP/s]")
        ax.set_title("Decode: memory-bandwidth utilisation (MBU) vs MFU")
        handles = [Rectangle((0, 0), 1, 1, color=COLORS[2], label="MBU (bytes read per step / step time / "
                                                                       "bandwidth)"),
                   Rectangle((0, 0), 1, 1, color=COLORS[3], label="MFU (palm)")]
        for kind in sorted(set(t["provenance"])):
            handles.append(Rectangle((0, 0), 1, 1, facecolor="0.7", hatch=STYLE[kind]["hatch"], edgecolor="k",
                                         label=kind))
        ax.legend(handles=handles, loc="best")
        fig.tight_layout()
        if path:
            fig.savefig(path)
        return fig


def plot_tco(frame: pd.DataFrame, *, target: float, workload: str, published: pd.DataFrame | None = None,
             measured: pd.DataFrame | None = None, path=None):
    """Left: Pareto front (tokens/s per chip vs tokens/s per user); right: $ per M output tokens vs tokens/s
    per user at the chosen price. Projected = dashed, published = stars, measured = filled circles."""
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(12.5, 5.2))
        (ax1, ax2) = fig.subplots(1, 2)
        chips = list(dict.fromkeys(frame["chip"]))
        col = {c: COLORS[i % 10] for i, c in enumerate(chips)}
        any_nofit = False
        for chip, g in frame.groupby("chip", sort=False):
            g = g.sort_values("tok/s/user")
            ax1.plot(g["tok/s/user"], g["tok/s/chip"], "s--", color=col[chip], markerfacecolor="none",
                     label=f"{chip} (projected)")
            for x, y, b in zip(g["tok/s/user"], g["tok/s/chip"], g["batch"], strict=False):
                ax1.annotate(f"b{int(b)}", (x, y), fontsize=6, xytext=(2, 2), textcoords="offset points")
            if g["$/M output tokens"].notna().any():
                ax2.plot(g["tok/s/user"], g["$/M output tokens"], "s--", color=col[chip], markerfacecolor="none",
                         label=f"{chip} (projected, {g['price'].iloc[0]})")
            nofit = g[~g["fits in HBM"]]
            if len(nofit):
                ax1.plot(nofit["tok/s/user"], nofit["tok/s/chip"], "x", color="k", markersize=7,
                         label="does not fit in HBM (projected)" if not any_nofit else None)
                any_nofit = True
        if measured is not None and not measured.empty:
            for r in measured.to_dict("records"):
                ax1.plot(r["tok/s/user"], r["tok/s/chip"], "o", color="k", label=f"{r['label']} (measured)")
        if published is not None and not published.empty:
            for r in published.to_dict("records"):
                c = col.get(r["chip"], "k")
                if r["tok/s/chip"] and not pd.isna(r["tok/s/chip"]):
                    ax1.plot(r["tok/s/user"], r["tok/s/chip"], "*", color=c, markersize=14, markeredgecolor="k",
                             label=f"{r['chip']} (published, row {r['row']}: Qwen3.5-397B FP8 serving)")
                if r["$/M tokens"] and not pd.isna(r["$/M tokens"]):
                    ax2.plot(r["tok/s/user"], r["$/M tokens"], "*", color=c, markersize=14, markeredgecolor="k",
                             label=f"{r['chip']} (published, row {r['row']}: {r['price tier']}, total tokens)")
        for ax in (ax1, ax2):
            ax.axvline(target, color="0.3", linestyle=":", linewidth=1.2)
            ax.annotate(f"target {target:g} tok/s/user", (target, 0.98), xycoords=("data", "axes fraction"),
                        fontsize=7, rotation=90, ha="right", va="top")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("interactivity [output tokens/s per user] (= 1 / decode step time)")
            ax.legend(loc="best", fontsize=6.5)
        ax1.set_ylabel("throughput [output tokens/s per chip]")
        ax1.set_title(f"Pareto front: {workload} decode batch sweep")
        ax2.set_ylabel("cost [$ per million output tokens]")
        ax2.set_title("Cost vs interactivity at the chosen price")
        fig.tight_layout()
        if path:
            fig.savefig(path)
        return fig


def plot_scaling_efficiency(frames: Sequence[pd.DataFrame], published: pd.DataFrame | None = None, *, path=None):
    """One panel per workload: projected weak-scaling efficiency per chip × layout (dashed), the published
    TorchTitan points (stars, annotated with the projection's relative error)."""
    frames = [f for f in frames if not f.empty]
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(6.3 * len(frames), 5))
        axes = fig.subplots(1, len(frames), squeeze=False)
        for ax, f in zip(axes[0], frames, strict=False):
            series = list(dict.fromkeys(zip(f["chip"], f["layout"], strict=False)))
            chips = list(dict.fromkeys(f["chip"]))
            dashes = ["--", "-.", ":", (0, (5, 1, 1, 1))]
            layouts = list(dict.fromkeys(f["layout"]))
            for chip, layout in series:
                g = f[(f["chip"] == chip) & (f["layout"] == layout)]
                ax.plot(g["chips"], g["efficiency"], marker="s", markerfacecolor="none",
                        linestyle=dashes[layouts.index(layout) % 4], color=COLORS[chips.index(chip) % 10],
                        label=f"{chip} {layout} (projected, vs {int(g['chips'].iloc[0])} chip)")
            wl = f["workload"].iloc[0]
            if published is not None and not published.empty and wl == "qwen3-235b-a22b":
                errs = ", ".join(f"{100 * r['rel error']:+.0f}% @ {r['chips']}" for r in published.to_dict("records"))
                ax.plot(published["chips"], published["published efficiency"], "*", markersize=15, color="gold",
                        markeredgecolor="k", label="TPU v7 TorchTitan (published, vs 1 slice = 1024 chips)")
                ax.plot(published["chips"], published["projected efficiency"], "s", color="k",
                        markerfacecolor="none", markersize=8,
                        label=f"TPU v7 fsdp+ep, slice = 1024 (projected, vs 1024 chips);\n  projected tok/s per "
                              f"TensorCore vs published: {errs}")
            ax.set_xscale("log", base=2)
            ax.set_xlabel("chips")
            ax.set_ylabel("weak-scaling efficiency [per-chip tokens/s ÷ that at the smallest count]")
            ax.set_title(f"{wl} training: scaling efficiency")
            ax.axhline(1.0, color="0.5", linewidth=0.8)
            ax.set_ylim(bottom=0)
            ax.legend(loc="lower left", fontsize=6.5)
        fig.tight_layout()
        if path:
            fig.savefig(path)
        return fig


def plot_losses(checks: list[LossCheck], *, tpu_label: str = "tpu", path: str | Path | None = None):
    """One panel per sample: the cpu loss curve (solid) and the tpu one (dashed), both measured here."""
    checks = [c for c in checks if c.cpu.losses or c.tpu.losses] or checks
    n = max(len(checks), 1)
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(max(4.2 * n, 8.0), 4.2))
        axes = fig.subplots(1, n, squeeze=False)
        for ax, c in zip(axes[0], checks, strict=False):
            ax.plot(range(len(c.cpu.losses)), c.cpu.losses, "o-", label="cpu, torch eager (measured)")
            ax.plot(range(len(c.tpu.losses)), c.tpu.losses, "x--", markersize=9,
                    label=f"{tpu_label} (measured)")
            verdict = "agree" if c.ok else "DIFFER / FAILED"
            ax.set_title(f"{c.sample}: {verdict}\nmax rel diff {c.max_rel_diff:.1e} (tol {c.rtol:g})", fontsize=9)
            ax.set_xlabel("training step")
            ax.set_ylabel("loss printed by the script [nats / MSE]")
            ax.legend(loc="best")
        fig.suptitle("Migrated samples: loss on cpu vs on the \"tpu\" device (same seeds, measured here)")
        fig.tight_layout()
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(path)
        return fig


def make_plots(files: Sequence[str], *, kinds: Sequence[str] = ("all",), outdir: str | Path = "plots",
               chips: Sequence[str] = ("TPU v7", "H100 SXM", "B200"), workload: str = "llama3-70b") -> list[Path]:
    """Write the requested PNGs: bars from measured files; cost, Pareto, scaling and roofline from
    projections for ``chips`` × ``workload`` (with published points where they describe that setting)."""
    kinds = list(KINDS) if "all" in kinds else list(kinds)
    outdir = Path(outdir)
    catalog = load_catalog()
    chip_objs = [catalog.chip(c) for c in chips]
    measured = load_results(*files) if files else pd.DataFrame()
    written: list[Path] = []
    for kind in kinds:
        path = outdir / f"{kind}.png"
        if kind in ("throughput", "mfu"):
            if measured.empty:
                continue
            (plot_throughput_bars if kind == "throughput" else plot_mfu_bars)(measured, path=path)
        elif kind == "cost":
            recs = [project(c, workload, "decode", 8, "tp", batch=64) for c in chip_objs if c.prices]
            with_cost = measured[measured["cost"].map(bool)] if not measured.empty else []
            plot_cost_per_tier([*recs, *(_frame(with_cost).to_dict("records") if len(with_cost) else [])],
                               path=path)
        elif kind == "pareto":
            recs = [r for c in chip_objs for r in decode_sweep(c, workload)]
            plot_pareto(recs, path=path)
        elif kind == "scaling":
            recs = [r for c in chip_objs for r in scaling_curve(c, workload)]
            pub = [p for p in published_records() if p.source.get("row") == 5]
            recs += pub + scaling_curve("TPU v7", "qwen3-235b-a22b", layout="fsdp+ep", chips=(1024, 2048, 4096, 8192),
                                        assumptions=Assumptions(scaleup_domain=1024))
            plot_scaling(recs, path=path)
        elif kind == "roofline":
            recs = [project(c, workload, ph, 8, "tp", batch=b) for c in chip_objs
                    for ph, b in (("train", 4), ("prefill", 1), ("decode", 1), ("decode", 64))]
            plot_roofline(chip_objs, recs, path=path)
        written.append(path)
    return written
