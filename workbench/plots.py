"""Matplotlib figures in one style. Provenance is always visible: measured = solid bars / filled
circles with solid lines, projected = hatched bars / dashed lines with open squares, published = stars.

Every function takes records (or a DataFrame of them, or an :mod:`tpu_workbench.bench.analysis` table), returns the
Figure, and saves a PNG when given ``path``. Figures are built with ``matplotlib.figure.Figure`` (no
pyplot), so drawing never depends on, or changes, the session's backend.

Conventions every figure keeps: quantities of different kinds never share an axis unlabelled (output
tokens/s of decode and total tokens/s of training sit in separate panels; MFU under the palm and the
causal FLOP conventions too); numbers are printed in the workbench format (:func:`tpu_workbench.bench.tables.fmt`);
measured bars carry the interquartile range of their timed steps; a projected configuration that does not
fit in HBM is drawn as an empty cross-hatched bar marked "does not fit".
"""

from __future__ import annotations

import statistics
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib
import numpy as np
import pandas as pd
from cycler import cycler
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from tpu_workbench.bench import analysis
from tpu_workbench.bench.catalog import load_catalog
from tpu_workbench.bench.plot_kinds import KINDS
from tpu_workbench.bench.projection import decode_sweep, project
from tpu_workbench.bench.results import Record, load_results, variant_label
from tpu_workbench.bench.tables import fmt
from tpu_workbench.bench.workloads.config import get_config

if TYPE_CHECKING:  # typing only: demo_chain imports the codemod
    from tpu_workbench.bench.demo_chain import LossCheck

STYLE = {
    "measured": {"hatch": "", "alpha": 0.95, "marker": "o", "linestyle": "-"},
    "projected": {"hatch": "//", "alpha": 0.55, "marker": "s", "linestyle": "--"},
    "published": {"hatch": "", "alpha": 1.0, "marker": "*", "linestyle": ":"},
}
RC = {
    "figure.figsize": (9, 5),
    "figure.dpi": 110,
    "axes.grid": True,
    "grid.linestyle": ":",
    "grid.alpha": 0.6,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "font.size": 9,
    "axes.titlesize": 10,
    "legend.fontsize": 7.5,
    "axes.prop_cycle": cycler(color=matplotlib.colormaps["tab10"].colors),
}
COLORS = RC["axes.prop_cycle"].by_key()["color"]
NOFIT = "does not fit in HBM"
NOT_PRICED = "not priced"
CONVENTION_TITLES = {
    "palm": "FLOP convention palm: full attention (PaLM, nanoGPT, torchtitan)",
    "causal": "FLOP convention causal: attention halved (MaxText, Megatron)",
    "flop_counter": "FLOPs counted by torch.utils.flop_counter",
    "user": "FLOPs given by the user",
}
TOKEN_PANELS = {
    "total": ("total tokens/s per device", "train and prefill: every processed token"),
    "output": ("output tokens/s per device", "decode: generated tokens only"),
    "images": ("images/s per device", "vision models"),
}
ROOFLINE_MARKERS = ("s", "^", "D", "v", "P", "X", "o")
LABELLED_BATCHES = {
    1,
    4,
    16,
    64,
    256,
}  # batch labels on a Pareto front: every other point, so they stay legible


def _frame(data) -> pd.DataFrame:
    if isinstance(data, pd.DataFrame):
        return data
    return pd.DataFrame([r.to_dict() if isinstance(r, Record) else r for r in data])


def _figure(width: float, height: float) -> Figure:
    return Figure(figsize=(width, height), layout="constrained")


def _finish(fig: Figure, path: str | Path | None) -> Figure:
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path)
    return fig


def _wrap(text: str, width: int = 95) -> str:
    return "\n".join(textwrap.wrap(text, width))


def _number_ticks(ax, axis: str = "y", subs: tuple[float, ...] = (1.0, 2.0, 5.0)) -> None:
    """Tick labels in the workbench number format (3,000 not 3x10^3), also on log axes (ticks at ``subs``
    times each power of ten)."""
    target = ax.yaxis if axis == "y" else ax.xaxis
    if target.get_scale() == "log":
        target.set_major_locator(LogLocator(base=10, subs=subs))
    target.set_major_formatter(FuncFormatter(lambda v, _: fmt(float(v)) if v > 0 else "0"))
    target.set_minor_formatter(NullFormatter())


def _fits(row: dict) -> bool:
    extra = row.get("extra")
    return bool(extra.get("fits_in_hbm", True)) if isinstance(extra, dict) else True


def _spread(row: dict) -> tuple[float, float] | None:
    """Factors (low, high) that turn a rate measured at the median step time into the rates at the third and
    first quartile of the recorded step times: the interquartile range of the run."""
    samples = row.get("step_samples_s")
    if row.get("provenance") != "measured" or not isinstance(samples, list) or len(samples) < 2:
        return None
    q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    median = row["step_median_s"]
    return median / q3, median / q1


def _variant(row: dict) -> str:
    if row.get("provenance") == "measured":
        label = variant_label(row)
        suffix = label[len(str(row["device"])) :]  # "+compiled", "+fused"
        platform = str(row.get("platform") or "")
        if " via " in platform:  # "tpu via XLA:CPU (JAX ...)": say what really ran
            return platform.split(" (")[0].replace(" via ", suffix + " via ", 1)
        return label
    n = row.get("n_chips")
    chip = row.get("chip") or row["device"]
    return f"{chip} x{int(n)} ({row['provenance']})" if isinstance(n, int | float) and n == n else str(chip)


def _source(row: dict) -> str:
    """Measured runs from different files are different bars (another host, another day), never one median:
    the variant names its file ("this run" for records just measured)."""
    if row.get("provenance") != "measured" or not row.get("file"):
        return ""
    return f" [{Path(str(row['file'])).name}]"


def _group(row: dict) -> str:
    seq = "" if row.get("seq") is None or row.get("seq") != row.get("seq") else f" s{int(row['seq'])}"
    batch = (
        "" if row.get("batch") is None or row.get("batch") != row.get("batch") else f" b{int(row['batch'])}"
    )
    return f"{row['workload']} {row['phase']}\n{batch.strip()}{seq}"


def _provenance_handles(kinds) -> list:
    handles = []
    for kind in sorted(set(kinds)):
        if kind == "published":
            handles.append(
                Line2D([], [], marker="*", color="k", linestyle="", markersize=11, label="published")
            )
        else:
            handles.append(
                Patch(
                    facecolor="0.6",
                    hatch=STYLE[kind]["hatch"],
                    alpha=STYLE[kind]["alpha"],
                    edgecolor="k",
                    label=kind,
                )
            )
    return handles


def _bar_panels(
    df: pd.DataFrame,
    *,
    value: Callable[[dict], float | None],
    panel_of: Callable[[dict], str],
    title_of: Callable[[str, pd.DataFrame], str],
    ylabel_of: Callable[[str], str],
    suptitle: str,
    suffix: str = "",
) -> Figure:
    """Grouped bars, one panel per kind of quantity; measured bars get IQR error bars, non-fitting
    projected configurations an empty cross-hatched bar marked "does not fit"."""
    rows = df.to_dict("records")
    sources = {str(r["file"]) for r in rows if r.get("provenance") == "measured" and r.get("file")}
    rows = [
        {
            **r,
            "_value": value(r),
            "_panel": panel_of(r),
            "_variant": _variant(r) + (_source(r) if len(sources) > 1 else ""),
            "_group": _group(r),
            "_fits": _fits(r),
            "_spread": _spread(r),
        }
        for r in rows
    ]
    # a projected setting that does not fit keeps its slot (a "does not fit" label, never a bar or a number)
    rows = [r for r in rows if not r["_fits"] or (r["_value"] is not None and r["_value"] == r["_value"])]
    if not rows:
        raise ValueError(f"no records with a value for {suptitle}")
    cells: dict[tuple, list[dict]] = {}
    for r in rows:
        cells.setdefault((r["_panel"], r["_group"], r["_variant"], r["provenance"]), []).append(r)
    variants = list(dict.fromkeys(r["_variant"] for r in rows))
    colors = {v: COLORS[i % 10] for i, v in enumerate(variants)}
    panels = list(dict.fromkeys(r["_panel"] for r in rows))
    widest = max(
        len({k[1] for k in cells if k[0] == p}) * len({k[2] for k in cells if k[0] == p}) for p in panels
    )
    any_nofit = any_spread = False
    with matplotlib.rc_context(RC):
        fig = _figure(max(8.0, 1.0 + 0.75 * widest), 0.9 + 3.5 * len(panels))
        axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
        for ax, panel in zip(axes, panels, strict=True):
            keys = [k for k in cells if k[0] == panel]
            groups = list(dict.fromkeys(k[1] for k in keys))
            present = [v for v in variants if any(k[2] == v for k in keys)]
            width = 0.8 / len(present)
            top = 0.0
            for key in keys:
                members = cells[key]
                _, group, variant, prov = key
                fitting = [m["_value"] for m in members if m["_fits"] and m["_value"] is not None]
                v = float(np.median(fitting)) if fitting else 0.0
                x = groups.index(group) + (present.index(variant) - (len(present) - 1) / 2) * width
                color = colors[variant]
                if prov == "published":
                    ax.plot(x, v, marker="*", markersize=14, color=color, markeredgecolor="k", linestyle="")
                    ax.annotate(
                        fmt(v) + suffix,
                        (x, v),
                        ha="center",
                        va="bottom",
                        fontsize=7,
                        xytext=(0, 6),
                        textcoords="offset points",
                    )
                    top = max(top, v)
                    continue
                if not all(m["_fits"] for m in members):
                    any_nofit = True
                    ax.annotate(
                        NOFIT,
                        (x, 0.0),
                        ha="center",
                        va="bottom",
                        fontsize=8,
                        color="firebrick",
                        rotation=90,
                        xytext=(0, 2),
                        textcoords="offset points",
                    )
                    continue
                st = STYLE[prov]
                ax.bar(
                    x,
                    v,
                    width * 0.95,
                    color=color,
                    hatch=st["hatch"],
                    alpha=st["alpha"],
                    edgecolor="k",
                    linewidth=0.5,
                )
                label_at = v
                spreads = [m["_spread"] for m in members if m["_spread"]]
                if spreads:
                    any_spread = True
                    low = v * float(np.median([s[0] for s in spreads]))
                    high = v * float(np.median([s[1] for s in spreads]))
                    ax.errorbar(x, v, yerr=[[v - low], [high - v]], color="k", capsize=3, linewidth=0.9)
                    label_at = high
                ax.annotate(
                    fmt(v) + suffix,
                    (x, label_at),
                    ha="center",
                    va="bottom",
                    fontsize=7,
                    xytext=(0, 2),
                    textcoords="offset points",
                )
                top = max(top, label_at)
            ax.set_xticks(range(len(groups)), groups)
            ax.set_xlim(-0.6, len(groups) - 0.4)  # a slot with no bar ("does not fit") keeps its width
            ax.set_ylim(0, top * 1.22 if top > 0 else 1)
            ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:,.6g}"))
            ax.set_ylabel(ylabel_of(panel))
            ax.set_title(title_of(panel, pd.DataFrame([m for k in keys for m in cells[k]])), loc="left")
        handles = [Patch(color=colors[v], label=v) for v in variants]
        handles += _provenance_handles({r["provenance"] for r in rows})
        if any_spread:
            handles.append(
                Line2D(
                    [],
                    [],
                    color="k",
                    marker="|",
                    markersize=10,
                    linestyle="-",
                    label="error bar: interquartile range of the timed steps",
                )
            )
        if any_nofit:
            handles.append(
                Patch(facecolor="none", edgecolor="none", label=NOFIT + ": projected, no bar, no number")
            )
        fig.legend(handles=handles, loc="outside lower center", ncol=min(3, len(handles)))
        fig.suptitle(suptitle)
        return fig


def _token_panel(row: dict) -> str:
    return "images" if row.get("unit") == "images" else str(row.get("tokens_kind") or "total")


def plot_throughput_bars(records, *, path: str | Path | None = None) -> Figure:
    """Tokens (or images) per second per device variant, one panel per kind of token: total tokens/s
    (train, prefill) and output tokens/s (decode) are different quantities and never share an axis."""
    df = _frame(records)

    def value(r: dict) -> float | None:
        return r.get("tokens_per_s") if r["provenance"] == "measured" else r.get("tokens_per_s_per_device")

    def title(panel: str, _: pd.DataFrame) -> str:
        label, what = TOKEN_PANELS.get(panel, (f"{panel} tokens/s per device", ""))
        return f"{label} ({what})" if what else label

    fig = _bar_panels(
        df,
        value=value,
        panel_of=_token_panel,
        title_of=title,
        ylabel_of=lambda p: TOKEN_PANELS.get(p, (f"{p} tokens/s per device",))[0],
        suptitle="Throughput per device (median of timed steps)",
    )
    return _finish(fig, path)


def plot_mfu_bars(records, *, path: str | Path | None = None) -> Figure:
    """MFU in % per device variant, one panel per FLOP convention (palm and causal MFU of the same run
    differ by the attention term); each panel names the peaks its bars are measured against."""
    df = _frame(records)

    def title(panel: str, members: pd.DataFrame) -> str:
        bases = sorted({str(b).split(":")[0] for b in members["peak_basis"].dropna()})
        return _wrap(f"{CONVENTION_TITLES.get(panel, panel)}. Peak: {'; '.join(bases)}")

    fig = _bar_panels(
        df,
        value=lambda r: 100 * r["mfu"] if pd.notna(r.get("mfu")) else None,
        panel_of=lambda r: str(r.get("flop_convention") or "unstated"),
        title_of=title,
        ylabel_of=lambda _: "MFU [% of peak]",
        suffix="%",
        suptitle="Model FLOP utilisation = FLOPs per token x tokens/s / peak FLOP/s",
    )
    return _finish(fig, path)


def _cost_panels(rows: list[dict]) -> dict[tuple[str, str], list[tuple[dict, dict | None]]]:
    """(token kind, price kind) -> [(row, cost line)], in first-seen order; a row that does not fit in HBM
    comes once per price kind of its token kind with no line (it gets "no cost", never a bar)."""
    panels: dict[tuple[str, str], list[tuple[dict, dict | None]]] = {}
    for r in rows:
        for c in r.get("cost") or [] if _fits(r) else []:
            panels.setdefault((_token_panel(r), analysis.price_kind(c)), []).append((r, c))
    for r in rows:
        if not _fits(r):
            kinds = [k for k in panels if k[0] == _token_panel(r)] or [(_token_panel(r), NOT_PRICED)]
            for key in kinds:
                panels.setdefault(key, []).append((r, None))
    return panels


def plot_cost_per_tier(records, *, title_suffix: str = "", path: str | Path | None = None) -> Figure:
    """$ per million tokens for each chip and price tier, one panel per kind of tokens and kind of price (a
    list price, a committed rent and an owner's TCO are different money, and training, output and total tokens
    different units: neither shares a ranking or an axis), chips in each panel ranked cheapest first; each bar
    labelled with its price's date (and "stale" when the catalog flags the price); a configuration that does
    not fit in HBM gets no cost."""
    df = _frame(records)
    if df.empty:
        raise ValueError("no records to price")
    rows = df.to_dict("records")
    chips = [str(r.get("chip")) for r in rows]
    if len(set(chips)) < len(chips):  # one chip in several settings: say which bar is which
        chips = [
            f"{c}\n{r['workload']} {r['phase']} b{r.get('batch')} x{fmt(r.get('n_chips'))}"
            for c, r in zip(chips, rows, strict=True)
        ]
    for r, label in zip(rows, chips, strict=True):
        r["_label"] = label
    panels = _cost_panels(rows)
    if not any(c for members in panels.values() for _, c in members) and all(_fits(r) for r in rows):
        raise ValueError("no records with cost lines (cost needs a catalog chip with prices)")
    tiers = list(dict.fromkeys(c["tier"] for members in panels.values() for _, c in members if c))
    n = len(panels)
    cols = 2 if n == 4 else min(n, 3)
    widest = max(len({r["_label"] for r, _ in members}) for members in panels.values())
    with matplotlib.rc_context(RC):
        fig = _figure(max(9.0, cols * max(3.8, 0.8 * widest + 1.4)), 4.2 * -(-n // cols) + 1.0)
        axes = fig.subplots(-(-n // cols), cols, squeeze=False).ravel()
        any_stale = False
        for ax, ((tokens, kind), members) in zip(axes, panels.items(), strict=False):
            best: dict[str, float] = {}
            for r, c in members:
                value = c["usd_per_mtok"] if c else float("inf")
                best[r["_label"]] = min(best.get(r["_label"], value), value)
            labels = sorted(best, key=best.get)  # the ranking: cheapest chip first
            in_panel = list(dict.fromkeys(c["tier"] for _, c in members if c))
            width = 0.8 / max(len(in_panel), 1)
            top = max([c["usd_per_mtok"] for _, c in members if c] or [1.0])
            for r, c in members:
                i = labels.index(r["_label"])
                if c is None:
                    ax.annotate(
                        f"{NOFIT}:\nno cost",
                        (i, top * 0.03),
                        ha="center",
                        rotation=90,
                        fontsize=7,
                        color="firebrick",
                    )
                    continue
                x = i + (in_panel.index(c["tier"]) - (len(in_panel) - 1) / 2) * width
                st = STYLE[r["provenance"]]
                stale = str(c.get("stale") or "")
                any_stale = any_stale or bool(stale)
                ax.bar(
                    x,
                    c["usd_per_mtok"],
                    width * 0.95,
                    color=COLORS[tiers.index(c["tier"]) % 10],
                    hatch=st["hatch"],
                    alpha=st["alpha"],
                    edgecolor="firebrick" if stale else "k",
                    linewidth=1.4 if stale else 0.5,
                    linestyle="--" if stale else "-",
                )
                ax.annotate(
                    f"${fmt(c['usd_per_mtok'])}  {c['tier']}  {c.get('price_date', '?')}"
                    + ("  STALE" if stale else ""),
                    (x, c["usd_per_mtok"]),
                    rotation=90,
                    ha="center",
                    va="bottom",
                    fontsize=6.5,
                    xytext=(0, 2),
                    textcoords="offset points",
                    color="firebrick" if stale else "k",
                )
            ax.set_xticks(range(len(labels)), labels)
            ax.set_xlim(-0.6, len(labels) - 0.4)
            ax.set_ylim(0, top * 1.75)
            ax.set_ylabel(f"$ per million {tokens} tokens")
            title = f"{kind} prices, cheapest first" if kind != NOT_PRICED else NOT_PRICED
            ax.set_title(title, loc="left", fontsize=10)
        for ax in axes[n:]:
            ax.set_visible(False)
        fig.suptitle(
            _wrap(
                f"Cost per million tokens{title_suffix}, one panel per kind of price: $/chip-hr / tokens/s per "
                "chip; each bar: cost, price tier, price date"
            ),
            x=0.01,
            ha="left",
            fontsize=10,
        )
        kinds_of = {c["tier"]: kind for (_, kind), members in panels.items() for _, c in members if c}
        handles = [Patch(color=COLORS[i % 10], label=f"{t} ({kinds_of[t]})") for i, t in enumerate(tiers)]
        handles += _provenance_handles(df["provenance"])
        if any_stale:
            handles.append(
                Patch(
                    facecolor="none",
                    edgecolor="firebrick",
                    linestyle="--",
                    linewidth=1.4,
                    label="STALE price: older than a year, dated by year only, or superseded",
                )
            )
        fig.legend(handles=handles, loc="outside lower center", ncol=3)
        return _finish(fig, path)


def plot_mfu_conventions(table: pd.DataFrame, *, path: str | Path | None = None) -> Figure:
    """Horizontal grouped bars: MFU under palm vs causal for each row (the comparison is the point, so the
    two conventions share an axis, each named in the legend); measured and projected in separate panels
    (their peaks differ: measured host-CPU peak vs catalog chip peak)."""
    kinds = [k for k in ("measured", "projected") if (table["provenance"] == k).any()]
    sizes = [max(int((table["provenance"] == k).sum()), 1) for k in kinds] or [1]
    with matplotlib.rc_context(RC):
        fig = _figure(10, 1.6 + 0.45 * sum(sizes) + 1.1 * len(sizes))
        axes = fig.subplots(len(kinds) or 1, 1, squeeze=False, gridspec_kw={"height_ratios": sizes})
        for ax, kind in zip(axes[:, 0], kinds, strict=False):
            t = table[table["provenance"] == kind].reset_index(drop=True)
            ys = range(len(t))
            st = STYLE[kind]
            for j, conv in enumerate(("palm", "causal")):
                vals = t[f"MFU % ({conv})"]
                pos = [y + (j - 0.5) * 0.4 for y in ys]
                ax.barh(
                    pos,
                    vals,
                    0.38,
                    color=COLORS[j],
                    hatch=st["hatch"],
                    alpha=st["alpha"],
                    edgecolor="k",
                    linewidth=0.5,
                    label=f"{conv} convention ({kind})",
                )
                for y, v in zip(pos, vals, strict=False):
                    ax.annotate(
                        f"{fmt(float(v))}%",
                        (v, y),
                        va="center",
                        fontsize=6.5,
                        xytext=(2, 0),
                        textcoords="offset points",
                    )
            src = t["source"] if "source" in t else [""] * len(t)
            ax.set_yticks(
                list(ys),
                [
                    f"{r['workload']} {r['phase']} b{r['batch']} s{r['seq']} · "
                    f"{r['label'].split(' (')[0]}{(' · ' + s_) if s_ else ''}"
                    for r, s_ in zip(t.to_dict("records"), src, strict=False)
                ],
                fontsize=7,
            )
            ax.invert_yaxis()
            ax.set_xlim(0, float(t[["MFU % (palm)", "MFU % (causal)"]].max().max()) * 1.15)
            ax.set_xlabel("MFU [% of peak]")
            ax.set_title(_wrap(f"{kind}: peak {'; '.join(sorted(set(t['peak basis'])))}", 110), loc="left")
            ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
        fig.suptitle(
            "MFU under both FLOP conventions: palm = full attention (PaLM/nanoGPT/torchtitan), "
            "causal = halved (MaxText/Megatron)"
        )
        return _finish(fig, path)


def plot_decode_bandwidth(table: pd.DataFrame, *, path: str | Path | None = None) -> Figure:
    """Decode rows: memory-bandwidth utilisation beside MFU (decode is bandwidth-bound: MBU ≫ MFU)."""
    t = table[table["phase"] == "decode"].reset_index(drop=True)
    with matplotlib.rc_context(RC):
        fig = _figure(9.5, 5.2)
        ax = fig.subplots()
        for i, r in enumerate(t.to_dict("records")):
            st = STYLE[r["provenance"]]
            for j, col in enumerate(("MBU % (decode)", "MFU % (palm)")):
                ax.bar(
                    i + (j - 0.5) * 0.4,
                    r[col],
                    0.38,
                    color=COLORS[2 + j],
                    hatch=st["hatch"],
                    alpha=st["alpha"],
                    edgecolor="k",
                    linewidth=0.5,
                )
                ax.annotate(
                    f"{fmt(float(r[col]))}%",
                    (i + (j - 0.5) * 0.4, r[col]),
                    ha="center",
                    va="bottom",
                    fontsize=6.5,
                )
        ax.set_xticks(
            range(len(t)),
            [
                f"{r['workload']} b{r['batch']} ctx{r['seq']}\n{r['label'].split(' (')[0]}"
                f"\n{r.get('source') or ''}"
                for r in t.to_dict("records")
            ],
            fontsize=6.5,
        )
        ax.set_ylabel("utilisation [% of peak bandwidth / peak FLOP/s]")
        ax.set_title("Decode: memory-bandwidth utilisation (MBU) vs MFU")
        handles = [
            Patch(color=COLORS[2], label="MBU (bytes read per step / step time / bandwidth)"),
            Patch(color=COLORS[3], label="MFU (palm)"),
            *_provenance_handles(t["provenance"]),
        ]
        fig.legend(handles=handles, loc="outside lower center", ncol=4)
        return _finish(fig, path)


def _label_points(ax, points: list[tuple[float, float, str, str]]) -> None:
    """Name published stars without covering each other: labels fan out to the right, one row each."""
    for k, (x, y, text, color) in enumerate(sorted(points, key=lambda p: -p[1])):
        ax.annotate(
            text,
            (x, y),
            xytext=(28, 16 - 13 * k),
            textcoords="offset points",
            fontsize=6.5,
            va="center",
            color="k",
            arrowprops={"arrowstyle": "-", "color": color, "linewidth": 0.7},
        )


def plot_tco(
    frame: pd.DataFrame,
    *,
    target: float,
    workload: str,
    published: pd.DataFrame | None = None,
    measured: pd.DataFrame | None = None,
    path: str | Path | None = None,
) -> Figure:
    """Left: Pareto front (tokens/s per chip vs tokens/s per user); right: $ per M output tokens vs tokens/s
    per user at the chosen price. Projected = dashed, published = stars (each named), measured = filled
    circles; one legend below both panels, never over a curve."""
    with matplotlib.rc_context(RC):
        fig = _figure(13, 7.0)
        ax1, ax2 = fig.subplots(1, 2)
        chips = list(dict.fromkeys(frame["chip"]))
        col = {c: COLORS[i % 10] for i, c in enumerate(chips)}
        handles = []
        for chip, g in frame.groupby("chip", sort=False):
            g = g.sort_values("tok/s/user")
            style = {"color": col[chip], "markerfacecolor": "none", "marker": "s", "linestyle": "--"}
            ax1.plot(g["tok/s/user"], g["tok/s/chip"], **style)
            for x, y, b in zip(g["tok/s/user"], g["tok/s/chip"], g["batch"], strict=False):
                if int(b) in LABELLED_BATCHES:
                    ax1.annotate(f"b{int(b)}", (x, y), fontsize=6, xytext=(2, 2), textcoords="offset points")
            priced = g[g["$/M output tokens"].notna()]
            if len(priced):
                ax2.plot(priced["tok/s/user"], priced["$/M output tokens"], **style)
            handles.append(Line2D([], [], **style, label=f"{chip} (projected; price {g['price'].iloc[0]})"))
        nofit = frame[~frame["fits in HBM"]]
        if len(nofit):
            ax1.plot(nofit["tok/s/user"], nofit["tok/s/chip"], "x", color="k", markersize=7, linestyle="")
            handles.append(
                Line2D([], [], marker="x", color="k", linestyle="", label=f"{NOFIT} (projected; no cost)")
            )
        if measured is not None and not measured.empty:
            for r in measured.to_dict("records"):
                ax1.plot(r["tok/s/user"], r["tok/s/chip"], "o", color="k")
                handles.append(
                    Line2D([], [], marker="o", color="k", linestyle="", label=f"{r['label']} (measured)")
                )
        if published is not None and not published.empty:
            left, right = [], []
            for r in published.to_dict("records"):
                c = col.get(r["chip"], "0.2")
                if r["tok/s/chip"] and not pd.isna(r["tok/s/chip"]):
                    ax1.plot(
                        r["tok/s/user"], r["tok/s/chip"], "*", color=c, markersize=13, markeredgecolor="k"
                    )
                    left.append((r["tok/s/user"], r["tok/s/chip"], f"{r['chip']} {fmt(r['tok/s/chip'])}", c))
                if r["$/M tokens"] and not pd.isna(r["$/M tokens"]):  # total tokens: not this axis's kind
                    right.append(f"{r['chip']} ${fmt(r['$/M tokens'])} at {fmt(r['tok/s/user'])} tok/s/user")
            _label_points(ax1, left)
            if right:
                ax2.text(
                    0.02,
                    0.02,
                    _wrap(
                        "published $ per million TOTAL tokens (not drawn: this axis counts output tokens): "
                        + "; ".join(right)
                    ),
                    transform=ax2.transAxes,
                    fontsize=6.5,
                    va="bottom",
                    bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "0.6"},
                )
            rows = sorted({int(r) for r in published["row"]})
            handles.append(
                Line2D(
                    [],
                    [],
                    marker="*",
                    color="0.5",
                    markeredgecolor="k",
                    markersize=11,
                    linestyle="",
                    label=f"published (rows {', '.join(map(str, rows))}): Qwen3.5-397B FP8 serving, "
                    "a different model; its $ per million total tokens is listed, not drawn",
                )
            )
        for ax in (ax1, ax2):
            ax.axvline(target, color="0.3", linestyle=":", linewidth=1.2)
            ax.set_xscale("log")
            ax.set_yscale("log")
            _number_ticks(ax, "x")
            _number_ticks(ax, "y")
            ax.set_xlabel("interactivity [output tokens/s per user] (= 1 / decode step time)")
        handles.append(Line2D([], [], color="0.3", linestyle=":", label=f"target {target:g} tok/s per user"))
        ax1.set_ylabel("throughput [output tokens/s per chip]")
        ax1.set_title(f"Pareto front: {workload} decode batch sweep")
        ax2.set_ylabel("cost [$ per million output tokens]")
        ax2.set_title("Cost vs interactivity at the chosen price")
        fig.legend(handles=handles, loc="outside lower center", ncol=2, fontsize=7)
        return _finish(fig, path)


def plot_scaling(
    frames: Sequence[pd.DataFrame],
    published: pd.DataFrame | None = None,
    *,
    subtitle: str = "",
    path: str | Path | None = None,
) -> Figure:
    """One column per workload (frames of :func:`tpu_workbench.bench.analysis.scaling_frame`), one line per chip and
    layout. Top: tokens/s per chip, where the published TorchTitan points sit as they were published
    (stars) beside the projection set up the same way (open squares). Bottom: weak-scaling efficiency of
    each projected series against its own smallest chip count that fits in HBM. Counts that do not fit
    are crosses. ``subtitle`` (e.g. the assumptions used) goes above both columns."""
    frames = [f for f in frames if not f.empty]
    if not frames:
        raise ValueError("no scaling series to draw")
    with matplotlib.rc_context(RC):
        fig = _figure(6.6 * len(frames), 9.0)
        axes = fig.subplots(2, len(frames), squeeze=False, sharex="col")
        for column, f in enumerate(frames):
            top, bottom = axes[0, column], axes[1, column]
            chips = list(dict.fromkeys(f["chip"]))
            layouts = list(dict.fromkeys(f["layout"]))
            dashes = ["--", "-.", ":", (0, (5, 1, 1, 1))]
            for (chip, layout), g in f.groupby(["chip", "layout"], sort=False):
                style = {
                    "color": COLORS[chips.index(chip) % 10],
                    "linestyle": dashes[layouts.index(layout) % 4],
                }
                if not g["fits in HBM"].any():  # a series that never fits draws nothing, it is only named
                    top.plot([], [], " ", label=f"{chip} {layout}: {NOFIT} at any count (no points)")
                    continue
                base = g["baseline chips"].iloc[0]
                what = f"vs {int(base)} chips"
                top.plot(
                    g["chips"],
                    g["tok/s/chip"],
                    marker="s",
                    markerfacecolor="none",
                    label=f"{chip} {layout} (projected)",
                    **style,
                )
                bottom.plot(
                    g["chips"],
                    g["efficiency"],
                    marker="s",
                    markerfacecolor="none",
                    label=f"{chip} {layout} (projected, {what})",
                    **style,
                )
            if (~f["fits in HBM"]).any():
                top.plot([], [], " ", label=f"counts that {NOFIT.replace('does', 'do')}: no point, no price")
            wl = f["workload"].iloc[0]
            if published is not None and not published.empty and wl == "qwen3-235b-a22b":
                errs = ", ".join(
                    f"{100 * r['rel error']:+.0f}% at {fmt(r['chips'])}" for r in published.to_dict("records")
                )
                top.plot(
                    published["chips"],
                    published["published tok/s per chip"],
                    "*",
                    markersize=15,
                    color="gold",
                    markeredgecolor="k",
                    linestyle="",
                    label="TPU v7 TorchTitan (published, 2 TensorCores per chip)",
                )
                top.plot(
                    published["chips"],
                    published["projected tok/s per chip"],
                    "s",
                    color="k",
                    markerfacecolor="none",
                    markersize=8,
                    linestyle="",
                    label=_wrap(
                        f"TPU v7 as published: FSDP in each 1,024-chip slice, data parallel "
                        f"across slices, MaxText recipe's batch and remat assumed (projected; "
                        f"error {errs})",
                        60,
                    ),
                )
            top.set_yscale("log")
            _number_ticks(top)
            top.set_ylabel("training throughput [tokens/s per chip]")
            top.set_title(f"{wl} training: throughput per chip", loc="left")
            top.legend(
                loc="upper center",
                bbox_to_anchor=(0.5, -0.06),
                fontsize=6.5,
                ncol=2 if len(frames) > 1 else 1,
            )
            bottom.set_xscale("log", base=2)
            bottom.set_xlabel("chips")
            bottom.set_ylabel("efficiency [per-chip tokens/s / that at the smallest count that fits]")
            bottom.set_title(f"{wl}: weak-scaling efficiency of each projected series", loc="left")
            bottom.axhline(1.0, color="0.5", linewidth=0.8)
            bottom.set_ylim(bottom=0)
            bottom.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), fontsize=6.5, ncol=2)
        if subtitle:
            fig.suptitle(subtitle)
        return _finish(fig, path)


def plot_roofline(
    chips: Sequence, records=(), *, path: str | Path | None = None, precision: str = "bf16"
) -> Figure:
    """Log-log attainable FLOP/s vs arithmetic intensity (FLOP per HBM byte) for catalog chips, with
    projected points (intensity = FLOPs per step / HBM bytes per step): colour = chip, marker = phase and
    batch (named in the legend, not beside each point, so nothing overlaps)."""
    with matplotlib.rc_context(RC):
        fig = _figure(10, 6.2)
        ax = fig.subplots()
        ai = np.logspace(-1, 5, 200)
        names = [c.name for c in chips]
        for i, chip in enumerate(chips):
            peak = chip.peak(precision) / 1e12
            bw = chip.hbm_bw_gbps * 1e9 / 1e12
            ax.plot(
                ai,
                np.minimum(peak, ai * bw),
                color=COLORS[i % 10],
                label=f"{chip.name} roof ({precision} {fmt(peak)} TF/s, {fmt(chip.hbm_bw_gbps)} GB/s, "
                f"ridge {fmt(peak / bw)} FLOP/B)",
            )
        rows = (
            [r for r in _frame(records).to_dict("records") if "hbm_bytes_per_step" in (r.get("extra") or {})]
            if len(records)
            else []
        )
        settings = list(dict.fromkeys(f"{r['phase']} b{r['batch']}" for r in rows))
        marker_of = {s: ROOFLINE_MARKERS[i % len(ROOFLINE_MARKERS)] for i, s in enumerate(settings)}
        for r in rows:
            tokens = r["batch"] * (1 if r["phase"] == "decode" else r["seq"])
            x = r["flops_per_token"] * tokens / r["extra"]["hbm_bytes_per_step"]
            color = COLORS[names.index(r["chip"]) % 10] if r["chip"] in names else "k"
            ax.plot(
                x,
                r["achieved_tflops"],
                marker=marker_of[f"{r['phase']} b{r['batch']}"],
                color=color,
                markerfacecolor="none" if _fits(r) else color,
                markersize=8,
                linestyle="",
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        _number_ticks(ax, "x", subs=(1.0,))
        _number_ticks(ax, "y", subs=(1.0,))
        ax.set_xlabel("arithmetic intensity [FLOP / HBM byte]")
        ax.set_ylabel("attainable [TFLOP/s per chip]")
        ax.set_title("Roofline: catalog roofs (lines) and projected workload points (markers)")
        handles, _ = ax.get_legend_handles_labels()
        handles += [
            Line2D(
                [], [], marker=m, color="k", markerfacecolor="none", linestyle="", label=f"{s} (projected)"
            )
            for s, m in marker_of.items()
        ]
        if any(not _fits(r) for r in rows):
            handles.append(Line2D([], [], marker="s", color="k", linestyle="", label=f"filled: {NOFIT}"))
        fig.legend(handles=handles, loc="outside right upper")
        return _finish(fig, path)


def plot_losses(checks: list[LossCheck], *, tpu_label: str = "tpu", path: str | Path | None = None) -> Figure:
    """One panel per sample: the cpu loss curve (solid) and the tpu one (dashed), both measured here."""
    checks = [c for c in checks if c.cpu.losses or c.tpu.losses] or checks
    n = max(len(checks), 1)
    with matplotlib.rc_context(RC):
        fig = _figure(max(4.2 * n, 8.0), 4.4)
        axes = fig.subplots(1, n, squeeze=False)
        for ax, c in zip(axes[0], checks, strict=False):
            ax.plot(range(len(c.cpu.losses)), c.cpu.losses, "o-", label="cpu, torch eager (measured)")
            ax.plot(
                range(len(c.tpu.losses)), c.tpu.losses, "x--", markersize=9, label=f"{tpu_label} (measured)"
            )
            verdict = "agree" if c.ok else "DIFFER / FAILED"
            ax.set_title(
                f"{c.sample}: {verdict}\nmax rel diff {c.max_rel_diff:.1e} (tol {c.rtol:g})", fontsize=9
            )
            ax.set_xlabel("training step")
            ax.set_ylabel("loss printed by the script [nats / MSE]")
            ax.legend(loc="best")
        fig.suptitle('Migrated samples: loss on cpu vs on the "tpu" device (same seeds, measured here)')
        return _finish(fig, path)


def _cost_batch(chips: Sequence, workload: str, batches: Sequence[int] = (64, 32, 16, 8)) -> int:
    """The largest decode batch per chip (of ``batches``) at which every priced chip fits in HBM, so the
    cost figure prices every chip (each with its own price dates and stale flags); the smallest otherwise."""
    priced = [c for c in chips if c.prices]
    for b in batches:
        if all(project(c, workload, "decode", 8, "tp", batch=b).extra["fits_in_hbm"] for c in priced):
            return b
    return batches[-1]


def make_plots(
    files: Sequence[str],
    *,
    kinds: Sequence[str] = ("all",),
    outdir: str | Path = "plots",
    chips: Sequence[str] = ("TPU v7", "H100 SXM", "B200"),
    workload: str = "llama3-70b",
) -> list[Path]:
    """Write the requested PNGs: bars from measured files; cost, Pareto, scaling and roofline from
    projections for ``chips`` × ``workload`` (with published points where they describe that setting)."""
    kinds = list(KINDS) if "all" in kinds else list(kinds)
    outdir = Path(outdir)
    catalog = load_catalog()
    chip_objs = [catalog.chip(c) for c in chips]
    get_config(workload)  # an unknown workload is refused before any figure is written
    measured = load_results(*files) if files else pd.DataFrame()
    written: list[Path] = []
    for kind in kinds:
        path = outdir / f"{kind}.png"
        if kind in ("throughput", "mfu"):
            if measured.empty:
                continue
            (plot_throughput_bars if kind == "throughput" else plot_mfu_bars)(measured, path=path)
        elif kind == "cost":
            batch = _cost_batch(chip_objs, workload)
            recs = [project(c, workload, "decode", 8, "tp", batch=batch) for c in chip_objs if c.prices]
            with_cost = measured[measured["cost"].map(bool)] if not measured.empty else []
            plot_cost_per_tier(
                [*recs, *(_frame(with_cost).to_dict("records") if len(with_cost) else [])],
                title_suffix=f" ({workload} decode, b{batch} per chip, 8 chips, TP)",
                path=path,
            )
        elif kind == "pareto":
            frame = analysis.frontier_frame([r for c in chip_objs for r in decode_sweep(c, workload)])
            plot_tco(frame, target=20, workload=workload, published=analysis.published_serving(), path=path)
        elif kind == "scaling":
            counts = (1, 8, 64, 256, 1024, 4096, 8192)
            layouts = ("fsdp", "fsdp+ep") if get_config(workload).is_moe else ("dp", "fsdp")
            frames = [analysis.scaling_frame([c.name for c in chip_objs], workload, layouts, counts)]
            plot_scaling(frames, analysis.published_scaling(), path=path)
        elif kind == "roofline":
            recs = [
                project(c, workload, ph, 8, "tp", batch=b)
                for c in chip_objs
                for ph, b in (("train", 4), ("prefill", 1), ("decode", 1), ("decode", 64))
            ]
            plot_roofline(chip_objs, recs, path=path)
        written.append(path)
    return written
