"""Tables, figures and ipywidgets controls for the notebooks (``notebooks/0*.ipynb``) and the demo report.

The notebooks stay thin: each calls one or two functions here, shows a table and a figure, and says what
to see. Every figure marks provenance the same way as :mod:`workbench.plots` (measured = solid / filled,
projected = dashed / hatched / open squares, published = stars) and its legend says which is which.
A ``"tpu"`` run that JAX executes on a CPU is labelled "tpu via XLA:CPU", never as a TPU.
"""

from __future__ import annotations

import glob
import io
import math
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from workbench.plots import RC, STYLE  # noqa: E402

COLORS = RC["axes.prop_cycle"].by_key()["color"]


# ----------------------------------------------------------------------------------------- display

def show(fig) -> None:
    """Display a figure as a PNG (works with any matplotlib backend, in a notebook or an Output widget)."""
    from IPython.display import Image, display

    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    display(Image(data=buf.getvalue()))


def show_md(text: str) -> None:
    from IPython.display import Markdown, display

    display(Markdown(text))


def show_table(df: pd.DataFrame, *, digits: int = 3) -> None:
    """Display a table with numbers rounded to ``digits`` significant figures (no index)."""
    from IPython.display import display

    display(df.style.format(lambda v: _fmt(v, digits)).hide(axis="index"))


def _fmt(v, digits: int = 3) -> str:
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "-"
        if v != 0 and (abs(v) >= 1e5 or abs(v) < 1e-3):
            return f"{v:.{digits}g}"
        return f"{v:,.{max(digits - 1 - int(math.floor(math.log10(abs(v)))) if v else 2, 0)}f}"
    return str(v)


# ----------------------------------------------------------------------------------------- provenance labels

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


def resolve_files(patterns: Sequence[str] | str | None) -> list[Path]:
    """Result files from paths or globs, tried relative to the current folder and then to the project
    root (so ``results/*.jsonl`` works from ``notebooks/`` too). Missing patterns are an error."""
    from workbench.demo_chain import repo_root

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
    from workbench.results import load_results

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


def _redrawer(out, draw):
    """Observer that redraws into the Output widget ``out`` when a control changes.

    The first drawing (parameter defaults) goes straight into the cell, not into ``out``: headless
    executors (nbclient / nbmake) stall on rich output captured by an Output widget, and the defaults must
    render without a browser. In Jupyter, changes then appear below the controls."""
    def redraw(*_):
        out.clear_output(wait=True)
        with out:
            draw()
    return redraw


# ----------------------------------------------------------------------------------------- 03: MFU

def _config(cfg: dict):
    from workbench.workloads.config import DecoderConfig

    return DecoderConfig(**{k: v for k, v in cfg.items() if k in DecoderConfig.__dataclass_fields__})


def mfu_conventions(df: pd.DataFrame) -> pd.DataFrame:
    """MFU of each decoder record under both FLOP conventions (palm = full attention; causal = halved,
    MaxText/Megatron), recomputed from the record's config, phase and seq; decode MBU beside it."""
    from workbench.flops import flops_per_token

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
    from workbench.projection import project

    batches = batches or {"train": 1, "prefill": 1, "decode": 64}
    return [project(chip, w, ph, n_chips, layout, batch=b, seq=seq) for w in workloads for ph, b in batches.items()]


def plot_mfu_conventions(table: pd.DataFrame, *, path=None):
    """Horizontal grouped bars: MFU under palm vs causal for each row; measured and projected in separate
    panels (their peaks differ: measured host-CPU peak vs catalog chip peak)."""
    kinds = [k for k in ("measured", "projected") if (table["provenance"] == k).any()]
    sizes = [max(int((table["provenance"] == k).sum()), 1) for k in kinds] or [1]
    with plt.rc_context(RC):
        fig, axes = plt.subplots(len(kinds) or 1, 1, figsize=(10, 1.2 + 0.42 * sum(sizes) + 0.9 * len(sizes)),
                                 squeeze=False, gridspec_kw={"height_ratios": sizes})
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
    with plt.rc_context(RC):
        fig, ax = plt.subplots(figsize=(9, 4.8))
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
        handles = [plt.Rectangle((0, 0), 1, 1, color=COLORS[2], label="MBU (bytes read per step / step time / "
                                                                       "bandwidth)"),
                   plt.Rectangle((0, 0), 1, 1, color=COLORS[3], label="MFU (palm)")]
        for kind in sorted(set(t["provenance"])):
            handles.append(plt.Rectangle((0, 0), 1, 1, facecolor="0.7", hatch=STYLE[kind]["hatch"], edgecolor="k",
                                         label=kind))
        ax.legend(handles=handles, loc="best")
        fig.tight_layout()
        if path:
            fig.savefig(path)
        return fig


# ----------------------------------------------------------------------------------------- 04: TCO

def decode_frontier(chips: Sequence[str], workload: str, *, n_chips: int = 8, layout: str = "tp", seq: int = 4096,
                    precision: str = "bf16", batches: Sequence[int] = (1, 2, 4, 8, 16, 32, 64, 128, 256)):
    """Projected decode batch sweep per chip: one record per (chip, batch)."""
    from workbench.projection import decode_sweep

    return [r for c in chips for r in decode_sweep(c, workload, n_chips=n_chips, layout=layout,
                                                   batches=tuple(batches), seq=seq, precision=precision)]


def price_for(chip: str, tier: str, override: float | None = None) -> tuple[float | None, str]:
    """$/chip-hour of ``chip`` at ``tier`` ('cheapest' = lowest listed), or ``override`` for every chip.
    Returns (price, where it came from); price None when the chip lists no such tier."""
    from workbench.catalog import load_catalog

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
    from workbench.catalog import load_catalog

    cat = load_catalog()
    return ["cheapest", *sorted({p.tier for c in chips for p in cat.chip(c).prices})]


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


def published_serving() -> pd.DataFrame:
    """Published serving points with tokens/s per user (InferenceX rows 11-12): chip, x, tokens/s per chip,
    $ per M tokens, setting."""
    from workbench.published import published_records

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


def plot_tco(frame: pd.DataFrame, *, target: float, workload: str, published: pd.DataFrame | None = None,
             measured: pd.DataFrame | None = None, path=None):
    """Left: Pareto front (tokens/s per chip vs tokens/s per user); right: $ per M output tokens vs tokens/s
    per user at the chosen price. Projected = dashed, published = stars, measured = filled circles."""
    with plt.rc_context(RC):
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12.5, 5.2))
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


def tco_explorer(records, *, chips: Sequence[str], workload: str, target: float, tier: str = "cheapest",
                 price: float = 0.0, published: pd.DataFrame | None = None):
    """ipywidgets: chips to show, price tier, a $/chip-hour override (0 = catalog), the interactivity target.
    Redraws the table and the figure; returns the widget (headless it renders the defaults once)."""
    import ipywidgets as w
    from IPython.display import display

    all_chips = list(dict.fromkeys(r.chip for r in records))
    c_chips = w.SelectMultiple(options=all_chips, value=tuple(c for c in chips if c in all_chips),
                               description="chips", rows=min(len(all_chips), 6))
    c_tier = w.Dropdown(options=tiers(all_chips), value=tier, description="price tier")
    c_price = w.BoundedFloatText(value=price or 0.0, min=0.0, max=1000.0, step=0.1,
                                 description="$/chip-hr", tooltip="0 = use the catalog price of the tier")
    c_target = w.FloatLogSlider(value=target, base=10, min=0, max=3, step=0.05, description="tok/s/user")
    out = w.Output()

    def draw():
        sel = [r for r in records if r.chip in c_chips.value]
        if not sel:
            print("select at least one chip")
            return
        frame = frontier_frame(sel, c_tier.value, c_price.value or None)
        pub = published[published["chip"].isin(c_chips.value)] if published is not None else None
        show_table(at_target(frame, c_target.value))
        show(plot_tco(frame, target=c_target.value, workload=workload, published=pub))

    redraw = _redrawer(out, draw)
    for c in (c_chips, c_tier, c_price, c_target):
        c.observe(redraw, names="value")
    box = w.VBox([w.HBox([c_chips, w.VBox([c_tier, c_price, c_target])]), out])
    display(box)
    draw()  # the defaults, straight into the cell (see _redrawer)
    return box


# ----------------------------------------------------------------------------------------- 05: scaling

def scaling_frame(chips: Sequence[str], workload: str, layouts: Sequence[str], counts: Sequence[int], *,
                  assumptions=None, batch: int = 4, seq: int = 4096) -> pd.DataFrame:
    """Projected training per chip count; efficiency = per-chip throughput / that at the smallest count."""
    from workbench.projection import project

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
    from dataclasses import asdict

    from workbench.projection import Assumptions, project
    from workbench.published import published_records

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


def plot_scaling_efficiency(frames: Sequence[pd.DataFrame], published: pd.DataFrame | None = None, *, path=None):
    """One panel per workload: projected weak-scaling efficiency per chip × layout (dashed), the published
    TorchTitan points (stars, annotated with the projection's relative error)."""
    frames = [f for f in frames if not f.empty]
    with plt.rc_context(RC):
        fig, axes = plt.subplots(1, len(frames), figsize=(6.3 * len(frames), 5), squeeze=False)
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


def scaling_explorer(chips: Sequence[str], specs: Sequence[tuple[str, Sequence[str]]], counts: Sequence[int], *,
                     shown: Sequence[str] | None = None):
    """ipywidgets: chips to show, compute efficiency, overlap and scale-out bandwidth; redraws the curves
    and the published comparison."""
    import ipywidgets as w
    from IPython.display import display

    from workbench.projection import Assumptions

    c_chips = w.SelectMultiple(options=list(chips), value=tuple(shown or chips), description="chips",
                               rows=min(len(chips), 6))
    c_eff = w.FloatSlider(value=0.5, min=0.1, max=1.0, step=0.05, description="compute eff.")
    c_ovl = w.FloatSlider(value=0.5, min=0.0, max=1.0, step=0.05, description="overlap")
    c_out = w.FloatLogSlider(value=50, base=10, min=0.5, max=3, step=0.05, description="scale-out GB/s")
    out = w.Output()

    def draw():
        if not c_chips.value:
            print("select at least one chip")
            return
        a = Assumptions(compute_efficiency=c_eff.value, overlap=c_ovl.value,
                        scaleout_gbps_per_chip=c_out.value)
        frames = [scaling_frame(c_chips.value, wl, lays, counts, assumptions=a) for wl, lays in specs]
        pub = published_scaling(a)
        show_table(pub.drop(columns=["source"]))
        show(plot_scaling_efficiency(frames, pub))

    redraw = _redrawer(out, draw)
    for c in (c_chips, c_eff, c_ovl, c_out):
        c.observe(redraw, names="value")
    box = w.VBox([w.HBox([c_chips, w.VBox([c_eff, c_ovl, c_out])]), out])
    display(box)
    draw()  # the defaults, straight into the cell (see _redrawer)
    return box


# ----------------------------------------------------------------------------------------- 02: throughput

def throughput_explorer(df: pd.DataFrame):
    """ipywidgets: which result files (sources) to show; redraws the bars."""
    import ipywidgets as w
    from IPython.display import display

    from workbench.plots import plot_throughput_bars

    files = list(dict.fromkeys(df["file"].map(lambda f: Path(str(f)).name)))
    c_files = w.SelectMultiple(options=files, value=tuple(files), description="sources", rows=min(len(files), 6))
    out = w.Output()

    def draw():
        sel = df[df["file"].map(lambda f: Path(str(f)).name).isin(c_files.value)]
        if sel.empty:
            print("select at least one source")
            return
        show(plot_throughput_bars(sel))

    c_files.observe(_redrawer(out, draw), names="value")
    box = w.VBox([c_files, out])
    display(box)
    draw()  # the defaults, straight into the cell (see _redrawer)
    return box


def provenance_legend_handles(kinds: Sequence[str]) -> list:
    return [Line2D([], [], marker=STYLE[k]["marker"], color="k", linestyle=STYLE[k]["linestyle"], label=k)
            for k in kinds]


def plot_cost_tiers(records, *, title_suffix: str = "", path=None):
    """$ per million tokens per price tier and chip (:func:`workbench.plots.plot_cost_per_tier`) with short
    tick labels (chip names) and the setting in the title."""
    from workbench.plots import plot_cost_per_tier

    fig = plot_cost_per_tier(records)
    ax = fig.axes[0]
    ax.set_xticks(range(len(records)), [r.chip for r in records])
    ax.set_title(f"Cost per million {records[0].tokens_kind} tokens by price tier{title_suffix}\n"
                 "($/chip-hr ÷ tokens/s per chip; catalog prices with tier and date)", fontsize=10)
    fig.tight_layout()
    if path:
        fig.savefig(path)
    return fig


def accelerator_comparison(df: pd.DataFrame):
    """GPU vs TPU where both were measured: the compare table with ``cuda`` as the baseline, or None and a
    sentence saying what is missing. A "tpu" emulated on a CPU/GPU does not count as a TPU."""
    from workbench.compare import compare_table

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


def measured_serving(df: pd.DataFrame) -> pd.DataFrame:
    """Measured decode records on catalog chips (a GPU or a real TPU), as Pareto points with cost."""
    if df.empty:
        return pd.DataFrame(columns=["label", "tok/s/user", "tok/s/chip"])
    m = df[(df["provenance"] == "measured") & (df["phase"] == "decode") & df["chip"].notna()]
    return pd.DataFrame([{"label": device_label(r), "tok/s/user": r["tokens_per_s_per_user"],
                          "tok/s/chip": r["tokens_per_s_per_chip"]} for r in m.to_dict("records")],
                        columns=["label", "tok/s/user", "tok/s/chip"])


def records_at_target(records, table: pd.DataFrame) -> list:
    """The projected records picked by :func:`at_target` (one per chip that meets the target)."""
    picked = {(r["chip"], r["batch"]) for r in table.to_dict("records") if r["meets target"]}
    return [r for r in records if (r.chip, r.batch) in picked]
