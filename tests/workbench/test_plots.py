"""The figures say what they show: kinds of quantity in separate panels, numbers in the workbench format,
IQR error bars on measured bars, "does not fit" marks, legends and labels that cover nothing, price dates
and stale marks, and scaling series that are neither merged nor normalised to impossible points."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.container import ErrorbarContainer
from matplotlib.text import Text  # the label's own box, without its leader line

from tpu_workbench.bench import analysis, plots
from tpu_workbench.bench.catalog import load_catalog
from tpu_workbench.bench.projection import project
from tpu_workbench.bench.results import load_results

RESULTS = Path(__file__).resolve().parents[2] / "results"


@pytest.fixture(scope="module")
def measured():
    return load_results(RESULTS / "tiny-phases.jsonl", RESULTS / "tiny-train.jsonl")


def _texts(fig) -> list[str]:
    out = [fig._suptitle.get_text()] if fig._suptitle else []
    for ax in fig.axes:
        out += [t.get_text() for t in ax.texts] + [ax.get_title(loc="left"), ax.get_title(), ax.get_ylabel()]
        out += [t.get_text() for t in ax.get_yticklabels()]
    return out


def _renderer(fig):
    canvas = FigureCanvasAgg(fig)  # figures are built without pyplot: give them a canvas to lay out on
    canvas.draw()
    return canvas.get_renderer()


def _inside_figure(fig, artist) -> bool:
    renderer = _renderer(fig)
    box, page = artist.get_window_extent(renderer), fig.bbox
    return box.x0 >= page.x0 - 1 and box.x1 <= page.x1 + 1 and box.y0 >= page.y0 - 1 and box.y1 <= page.y1 + 1


def _overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_throughput_keeps_output_and_total_tokens_apart_with_iqr_error_bars(measured, tmp_path):
    fig = plots.plot_throughput_bars(measured, path=tmp_path / "t.png")
    assert [ax.get_ylabel() for ax in fig.axes] == ["total tokens/s per device", "output tokens/s per device"]
    assert all(any(isinstance(c, ErrorbarContainer) for c in ax.containers) for ax in fig.axes)
    texts = _texts(fig)
    assert not [t for t in texts if "e+" in t or "e-0" in t], "numbers in exponent notation"
    assert any(t == "162,551" for t in texts)  # the tiny prefill on cpu, printed in full
    decode = measured[measured["phase"] == "decode"].iloc[0].to_dict()
    low, high = plots._spread(decode)
    assert low < 1 < high  # the IQR brackets the median rate
    assert _inside_figure(fig, fig._suptitle) and (tmp_path / "t.png").stat().st_size > 0


def test_mfu_has_one_panel_per_flop_convention_and_labels_tiny_bars(measured):
    causal = project("TPU v7", "llama3-8b", "train", 8, "fsdp", batch=1, seq=4096)  # projected: causal
    df = measured.to_dict("records") + [causal.to_dict()]
    fig = plots.plot_mfu_bars(df)
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert len(titles) == 2 and titles[0].startswith("FLOP convention palm") and "causal" in titles[1]
    assert "0.0133%" in _texts(fig)  # the smallest bar (tiny-moe decode on the emulated tpu) is labelled
    for ax in fig.axes:
        assert _inside_figure(fig, ax._left_title), "a title is cut off"


def test_a_configuration_that_does_not_fit_is_marked_not_priced():
    nofit = project("H100", "llama3-8b", "train", 1, "fsdp", batch=1, seq=4096)
    fits = project("H100", "llama3-8b", "train", 8, "fsdp", batch=1, seq=4096)
    assert not nofit.extra["fits_in_hbm"] and fits.extra["fits_in_hbm"]
    fig = plots.plot_throughput_bars([nofit, fits])
    assert any(t.startswith("does not fit in HBM") for t in _texts(fig))
    assert analysis.cost_cells(nofit)["prices (date)"].startswith("does not fit in HBM")
    assert all(v != v for k, v in analysis.cost_cells(nofit).items() if k.startswith("$/M tok"))
    fig = plots.plot_cost_per_tier([nofit, fits])
    assert "does not fit in HBM:\nno cost" in _texts(fig)


def test_cost_bars_show_price_dates_and_the_stale_flag():
    recs = [project(c, "llama3-8b", "decode", 8, "tp", batch=64) for c in ("H100 SXM", "TPU v7")]
    stale = [c for r in recs for c in r.cost if c["stale"]]
    assert stale, "the catalog flags H100's pre-cut on-demand price as stale"
    texts = _texts(plots.plot_cost_per_tier(recs))
    for line in (c for r in recs for c in r.cost):
        assert any(line["price_date"] in t for t in texts)
    assert sum("STALE" in t for t in texts) == len(stale)
    assert analysis.price_kind(recs[1].cost[0]) in ("owner-tco", "committed", "provider-internal")


def test_the_default_cost_figure_prices_every_chip_so_stale_prices_show():
    """At 64 sequences per chip Llama-3-70B decode does not fit an 80 GB H100, so the default cost figure
    priced only TPU v7 and B200, none of whose prices is stale; it now takes the largest batch every chip fits."""
    chips = [load_catalog().chip(c) for c in ("TPU v7", "H100 SXM", "B200")]
    assert not project(chips[1], "llama3-70b", "decode", 8, "tp", batch=64).extra["fits_in_hbm"]
    batch = plots._cost_batch(chips, "llama3-70b")
    assert batch == 32
    recs = [project(c, "llama3-70b", "decode", 8, "tp", batch=batch) for c in chips]
    assert all(r.extra["fits_in_hbm"] for r in recs)
    texts = _texts(plots.plot_cost_per_tier(recs))
    assert any("STALE" in t for t in texts) and not any(t.startswith("does not fit") for t in texts)


@pytest.mark.slow
def test_pareto_legend_covers_no_curve_and_star_labels_do_not_overlap():
    frame = analysis.frontier_frame(analysis.decode_frontier(["TPU v7", "B200", "H100 SXM"], "llama3-8b"))
    fig = plots.plot_tco(frame, target=20, workload="llama3-8b", published=analysis.published_serving())
    renderer = _renderer(fig)
    legend = fig.legends[0].get_window_extent(renderer)
    assert all(not _overlap(legend, ax.get_window_extent(renderer)) for ax in fig.axes)
    throughput, cost = fig.axes
    boxes = [
        Text.get_window_extent(t, renderer) for t in throughput.texts if not t.get_text().startswith("b")
    ]
    assert len(boxes) == 3  # TPU v7, B200, B300 stars are named (published tok/s per chip: same axis)
    assert not any(_overlap(a, b) for a, b in itertools.combinations(boxes, 2))
    # published $ per million TOTAL tokens never sits on the $ per million OUTPUT tokens axis: listed, not drawn
    (listed,) = [t.get_text() for t in cost.texts]
    assert "not drawn" in listed and all(chip in listed for chip in ("TPU v7", "B200", "B300"))
    assert "target 20 tok/s per user" in [t.get_text() for t in fig.legends[0].get_texts()]


def test_scaling_keeps_layouts_apart_and_normalises_only_to_points_that_fit():
    counts = (1, 8, 64, 1024)
    frame = analysis.scaling_frame(["TPU v7"], "qwen3-235b-a22b", ("fsdp", "fsdp+ep"), counts)
    for _, g in frame.groupby("layout"):
        base = g["baseline chips"].iloc[0]
        assert (
            g.loc[g["chips"] == base, "fits in HBM"].all()
            and (g["chips"] < base).sum() == (~g["fits in HBM"]).sum()
        )
        assert g.loc[~g["fits in HBM"], "efficiency"].isna().all()
    pub = analysis.published_scaling()
    fig = plots.plot_scaling([frame], pub)
    top, bottom = fig.axes[0], fig.axes[1]
    labels = [line.get_label() for line in bottom.get_lines()]
    assert sum(x.startswith("TPU v7 fsdp (") for x in labels) == 1  # two layouts, two lines: no zig-zag
    assert sum(x.startswith("TPU v7 fsdp+ep (") for x in labels) == 1
    stars = next(line for line in top.get_lines() if line.get_marker() == "*")
    assert list(stars.get_ydata()) == list(pub["published tok/s per chip"])  # as published, not normalised
    assert not any(line.get_marker() == "*" for line in bottom.get_lines())
    nofit = set(frame.loc[~frame["fits in HBM"], "chips"])
    assert nofit  # 235B on 1 and 8 chips does not fit: no plotted point there, on any line
    for line in top.get_lines():
        if line.get_marker() == "s":
            ys = dict(zip(line.get_xdata(), line.get_ydata(), strict=True))
            assert all(ys[n] != ys[n] for n in nofit if n in ys)
    # the open squares are the as-published setting (FSDP per slice, data parallel across), not fsdp+ep
    square = next(
        x.get_label() for x in top.get_lines() if x.get_marker() == "s" and x.get_linestyle() == "None"
    )
    assert "FSDP in each 1,024-chip slice" in square and "fsdp+ep" not in square
    fig.canvas.draw()  # legends of a one-chip column stay inside the figure
    width = fig.bbox.width
    for ax in (top, bottom):
        box = ax.get_legend().get_window_extent()
        assert box.x0 >= 0 and box.x1 <= width, (box, width)


def test_roofline_names_points_in_the_legend_not_beside_them():
    cat = load_catalog()
    recs = [
        project(c, "llama3-8b", ph, 8, "tp", batch=b)
        for c in ("TPU v7", "H100 SXM")
        for ph, b in (("train", 4), ("decode", 64), ("decode", 1))
    ]
    fig = plots.plot_roofline([cat.chip("TPU v7"), cat.chip("H100 SXM")], recs)
    assert len(fig.axes[0].texts) == 0
    names = [t.get_text() for t in fig.legends[0].get_texts()]
    assert {"train b4 (projected)", "decode b64 (projected)", "decode b1 (projected)"} <= set(names)


@pytest.mark.slow
def test_make_plots_writes_every_kind(tmp_path):
    written = plots.make_plots([str(RESULTS / "tiny-train.jsonl")], outdir=tmp_path, workload="llama3-8b")
    assert sorted(p.name for p in written) == sorted(f"{k}.png" for k in plots.KINDS)
    assert all(p.read_bytes()[:4] == b"\x89PNG" for p in written)


def test_cost_figure_has_one_ranked_panel_per_kind_of_price_and_of_tokens():
    """Issue 34: a list price, a committed rent and an owner's TCO never share a ranking, and output and
    total tokens never share an axis: one panel each, its bars ranked cheapest first."""
    recs = [project(c, "llama3-70b", "decode", 8, "tp", batch=32) for c in ("TPU v7", "H100 SXM", "B200")]
    recs.append(project("H100 SXM", "llama3-8b", "train", 8, "fsdp", batch=1, seq=4096))
    fig = plots.plot_cost_per_tier(recs)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    kinds = {(analysis.price_kind(c), r.tokens_kind) for r in recs for c in r.cost}
    assert len(panels) == len(kinds) > 2
    seen = set()
    for ax in panels:
        title, unit = ax.get_title(loc="left"), ax.get_ylabel()
        kind = title.split(" prices")[0]
        tokens = unit.removeprefix("$ per million ").removesuffix(" tokens")
        seen.add((kind, tokens))
        expected = {
            str(r.chip): min(c["usd_per_mtok"] for c in r.cost if analysis.price_kind(c) == kind)
            for r in recs
            if r.tokens_kind == tokens and any(analysis.price_kind(c) == kind for c in r.cost)
        }
        shown = [t.get_text().split("\n")[0] for t in ax.get_xticklabels()]  # chip (and its setting)
        assert set(shown) == set(expected) and shown == sorted(shown, key=expected.get), (title, shown)
        for text in ax.texts:  # every bar's label is a cost of this panel's kind
            assert text.get_text().startswith("$")
    assert seen == kinds
