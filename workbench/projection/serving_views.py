"""Tables and a figure of the serving model for notebooks 04 (cost) and 03 (decode bandwidth): $/M output and
$/M input tokens per chip at an interactivity target, the tok/s/chip vs tok/s/user curves, and the decode
step against context length. A chip whose setting does not fit or misses the target is a row that says
why, never a number or a point. Output and total tokens are never on one axis."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from tpu_workbench.bench.catalog import load_catalog
from tpu_workbench.bench.cost import comparable_prices
from tpu_workbench.bench.projection.model import project
from tpu_workbench.bench.projection.serving import ServingDeployment, StepModel, at_interactivity, curve
from tpu_workbench.bench.projection.serving_validation import INPUT, OUTPUT, engine_overhead, model_for


def _models(chips, workload, n_chips, layout, precision, kv_precision, max_batch):
    return {
        c: StepModel.build(
            workload,
            ServingDeployment(
                c,
                n_chips,
                layout,
                precision=precision,
                kv_precision=kv_precision,
                max_batch=max_batch,
                seq_overhead_s=engine_overhead(c),
            ),
        )
        for c in chips
    }


def cost_table(
    chips: Sequence[str],
    workload: str,
    *,
    mix: tuple[int, int] = (1024, 1024),
    target: float = 20.0,
    n_chips: int = 8,
    layout: str = "tp",
    precision: str = "bf16",
    kv_precision: str | None = None,
    price_kind: str | None = "owner-tco",
    max_batch: int = 512,
) -> pd.DataFrame:
    """One row per chip: the largest concurrency meeting ``target`` tok/s/user for ``mix`` (input, output
    tokens), its throughput, and $/M output, input and total tokens at one kind of price for every chip."""
    catalog = load_catalog()
    prices = comparable_prices([catalog.chip(c) for c in chips], price_kind)
    rows = []
    for chip, m in _models(chips, workload, n_chips, layout, precision, kv_precision, max_batch).items():
        price = prices.prices.get(catalog.chip(chip).name)
        row = {
            "chip": chip,
            "price": f"{prices.kind} ${price.usd_per_chip_hour:.2f}/chip-hr" if price else "none",
        }
        if price is None:
            rows.append({**row, "why not": f"no {prices.kind} price in the catalog"})
            continue
        p = at_interactivity(m, *mix, target, price.usd_per_chip_hour)
        if p.infeasible:
            rows.append({**row, "why not": p.infeasible})
            continue
        st = p.state
        rows.append(
            {
                **row,
                "concurrency": st.concurrency,
                "tok/s/user": st.tok_s_per_user,
                "output tok/s/chip": st.output_tok_s_per_chip,
                "TTFT s (closed form)": st.ttft_s,
                "$/M output": p.usd_per_m_output,
                "$/M input": p.usd_per_m_input,
                "$/M total": p.usd_per_m_total,
                "why not": "",
            }
        )
    return pd.DataFrame(rows)


def curve_frame(
    chips: Sequence[str],
    workload: str,
    *,
    mix: tuple[int, int] = (1024, 1024),
    n_chips: int = 8,
    layout: str = "tp",
    precision: str = "bf16",
    kv_precision: str | None = None,
    max_batch: int = 512,
) -> pd.DataFrame:
    """Throughput-interactivity points per chip (feasible concurrencies only; a chip that fits none is one
    row with its reason)."""
    rows = []
    for chip, m in _models(chips, workload, n_chips, layout, precision, kv_precision, max_batch).items():
        for pt in curve(m, *mix):
            rows.append(
                {
                    "chip": chip,
                    "concurrency": pt.concurrency,
                    "tok/s/user": pt.tok_s_per_user,
                    "output tok/s/chip": pt.output_tok_s_per_chip,
                    "why not": pt.infeasible or "",
                }
            )
    return pd.DataFrame(rows)


def published_vs_projected() -> pd.DataFrame:
    """InferenceX rows 11-12 (Qwen3.5-397B FP8, 8k/1k) beside the serving model's projection, in the
    published unit: total tokens."""
    rows = []
    for chip, tps, usd in (("TPU v7", 9364.0, 0.181), ("B200", 8903.0, 0.222), ("B300", 8925.0, 0.276)):
        m = model_for(chip)
        at20 = at_interactivity(m, INPUT, OUTPUT, 20.0, 1.0).state
        at100 = at_interactivity(m, INPUT, OUTPUT, 100.0, 1.0).state
        price = load_catalog().chip(chip).price("own-hyperscaler").usd_per_chip_hour
        rows.append(
            {
                "chip": chip,
                "published total tok/s/chip @20": tps,
                "projected total tok/s/chip @20": at20.total_tok_s_per_chip if at20 else None,
                "published $/M total @100": usd,
                "projected $/M total @100": price / (at100.total_tok_s_per_chip * 3600) * 1e6
                if at100
                else None,
            }
        )
    return pd.DataFrame(rows)


def plot_serving(
    curves: pd.DataFrame, costs: pd.DataFrame, *, target: float, published: pd.DataFrame | None = None
):
    """Left: output tok/s/chip vs tok/s/user per chip (the target dashed). Middle: $/M output tokens at the
    target per chip ("does not fit" / "misses the target" written where there is no number). Right (when
    ``published`` is given): the InferenceX $/M total tokens at 100 tok/s/user beside the projection."""
    import matplotlib.pyplot as plt  # lazy: heavy

    n = 3 if published is not None else 2
    fig, axes = plt.subplots(1, n, figsize=(5.2 * n, 4.2), layout="constrained")
    ax = axes[0]
    for chip, g in curves[curves["why not"] == ""].groupby("chip", sort=False):
        ax.plot(g["tok/s/user"], g["output tok/s/chip"], marker="o", label=chip)
    ax.axvline(target, color="k", linestyle="--", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("output tokens/s per user (projected)")
    ax.set_ylabel("output tokens/s per chip (projected)")
    ax.legend(fontsize=8)
    ax = axes[1]
    for i, r in enumerate(costs.to_dict("records")):
        if r.get("why not"):
            ax.annotate(
                str(r["why not"])[:40],
                (i, 0),
                rotation=90,
                fontsize=7,
                color="firebrick",
                va="bottom",
                ha="center",
            )
        else:
            ax.bar(i, r["$/M output"], color=f"C{i}")
            ax.annotate(f"${r['$/M output']:.3f}", (i, r["$/M output"]), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(costs)), costs["chip"], rotation=20)
    ax.set_ylabel(f"$ per M output tokens at {target:g} tok/s/user")
    if published is not None:
        ax = axes[2]
        x = range(len(published))
        ax.bar(list(x), published["projected $/M total @100"], width=0.5, label="projected (serving model)")
        ax.plot(
            x,
            published["published $/M total @100"],
            "*",
            markersize=14,
            color="gold",
            markeredgecolor="k",
            label="InferenceX (published)",
        )
        ax.set_xticks(list(x), published["chip"])
        ax.set_ylabel("$ per M total tokens at 100 tok/s/user\n(Qwen3.5-397B FP8, 8k/1k)")
        ax.legend(fontsize=8)
    return fig


def decode_context_frame(
    chip: str,
    workload: str,
    *,
    n_chips: int = 8,
    layout: str = "tp",
    seqs: int = 64,
    contexts: Sequence[int] = (512, 2048, 8192, 16384, 32768),
) -> pd.DataFrame:
    """Projected decode step, bytes, MFU and MBU against context for ``seqs`` concurrent sequences: the cache
    read grows with the context; a context that does not fit has no numbers."""
    rows = []
    for ctx in contexts:
        r = project(chip, workload, "decode", n_chips, layout, batch=seqs / n_chips, seq=ctx)
        rows.append(
            {
                "context": ctx,
                "step ms": None if r.step_median_s is None else 1e3 * r.step_median_s,
                "GB read per chip-step": r.extra["hbm_bytes_per_step"] / 1e9 if r.step_median_s else None,
                "MFU %": None if r.mfu is None else 100 * r.mfu,
                "MBU %": None if r.mbu is None else 100 * r.mbu,
                "why not": r.extra["infeasible"] or "",
            }
        )
    return pd.DataFrame(rows)
