"""What the notebooks display: figures as PNGs, tables in the workbench's number format, and controls.

A control panel (:class:`LiveView`) owns exactly one table widget and one image widget and redraws them
in place when a control changes. There is no ``Output`` widget and nothing is printed into the cell, so
JupyterLab shows one view that stays live, and a headless run (nbclient, nbmake, papermill) executes the
same code once with the parameter defaults and never waits for input.

Slider values are the numbers the figure shows: each slider offers a fixed list of round values
(``SelectionSlider``) instead of a log scale whose steps land on 35.4813.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import ipywidgets as w
import pandas as pd
from IPython.display import Image, Markdown, display
from matplotlib.figure import Figure

from tpu_workbench.bench import analysis, tables
from tpu_workbench.bench.plots import plot_scaling, plot_tco, plot_throughput_bars
from tpu_workbench.bench.projection import Assumptions

TARGETS = (
    1.0,
    2.0,
    3.0,
    5.0,
    7.5,
    10.0,
    15.0,
    20.0,
    25.0,
    30.0,
    40.0,
    50.0,
    75.0,
    100.0,
    150.0,
    200.0,
    300.0,
    500.0,
    1000.0,
)
"""Interactivity targets offered by the TCO explorer [output tokens/s per user]."""
SCALEOUT_GBYTES_PER_S = (1.0, 2.0, 5.0, 10.0, 12.5, 25.0, 50.0, 100.0, 200.0, 400.0, 800.0)
"""Scale-out bandwidths per chip offered by the scaling explorer [GB/s]."""
FRACTIONS = tuple(round(0.05 * i, 2) for i in range(21))
"""0.00, 0.05, ... 1.00 for efficiencies and overlap."""
WIDE = {"description_width": "initial"}  # labels are never cut off ("compute efficiency", not "compute …")


def png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def show(fig: Figure) -> None:
    """Display a figure as a PNG."""
    display(Image(data=png(fig)))


_CODE = re.compile(r"(```.*?```|`[^`\n]*`)", re.S)


def no_math(text: str) -> str:
    """``text`` with each ``$`` outside code escaped: JupyterLab renders ``$...$`` in Markdown as LaTeX, so
    "$2.23e-06 vs $5.6e-06" came out as italic math with its dollar signs gone."""
    parts = _CODE.split(text)
    return "".join(p if i % 2 else re.sub(r"(?<!\\)\$", r"\\$", p) for i, p in enumerate(parts))


def show_md(text: str) -> None:
    display(Markdown(no_math(text)))


def show_table(df: pd.DataFrame, *, digits: int = 3) -> None:
    """Display a table in the workbench number format (see :mod:`tpu_workbench.bench.tables`), without the index."""
    display(tables.styled(df, digits))


class Progress:
    """One line saying what runs now, redrawn in place (a step over ~10 s is never silent); :meth:`answer`
    puts the verdict in its place, so the cell's first output is the answer, not a log of its steps."""

    def __init__(self, text: str) -> None:
        self._handle = display(Markdown(text), display_id=True)

    def say(self, text: str) -> None:
        self._handle.update(Markdown(text))

    def answer(self, df: pd.DataFrame, *, digits: int = 3) -> None:
        self._handle.update(tables.styled(df, digits))


def choices(values: Sequence[float], default: float) -> tuple[float, ...]:
    """Slider options: ``values`` plus ``default`` (so a parameter outside the list is offered as is)."""
    return tuple(sorted({float(v) for v in values} | {float(default)}))


def _label(value: float) -> str:
    return f"{value:g}"


CATALOG = "catalog"
"""Slider stop meaning "use the catalog's figure" (the model's None)."""


def selection_slider(
    description: str, values: Sequence[float], default: float | None, *, catalog_stop: bool = False
) -> w.SelectionSlider:
    """A slider over fixed values, each labelled exactly as the figure prints it; ``catalog_stop`` adds a
    first stop, "catalog", that means the catalog's own figure (the default when ``default`` is None)."""
    options: list[tuple[str, float | str]] = [
        (_label(v), v) for v in (choices(values, default) if default is not None else sorted(values))
    ]
    if catalog_stop:
        options.insert(0, (CATALOG, CATALOG))
    return w.SelectionSlider(
        options=options,
        value=CATALOG if default is None else float(default),
        description=description,
        style=WIDE,
        continuous_update=False,
        layout=w.Layout(width="460px"),
    )


def _or_catalog(value: float | str) -> float | None:
    return None if value == CATALOG else float(value)


class LiveView:
    """Controls, one table and one figure; ``draw(values)`` returns (table or None, figure or None) or a
    message, and is called once at construction and again on every change of a control's value."""

    def __init__(
        self,
        controls: dict[str, w.ValueWidget],
        draw: Callable[[dict], tuple[pd.DataFrame | None, Figure | None] | str],
        *,
        layout: Callable[[dict[str, w.ValueWidget]], w.Widget] | None = None,
    ):
        self.controls = controls
        self._draw = draw
        self.message = w.HTML()
        self.table = w.HTML()
        self.image = w.Image(format="png")
        self.redraws = 0
        panel = layout(controls) if layout else w.VBox(list(controls.values()))
        self.box = w.VBox([panel, self.message, self.table, self.image])
        for control in controls.values():
            control.observe(self.refresh, names="value")
        self.refresh()

    def values(self) -> dict:
        return {name: c.value for name, c in self.controls.items()}

    def refresh(self, *_) -> None:
        result = self._draw(self.values())
        if isinstance(result, str):
            self.message.value = f"<b>{result}</b>"
            self.table.value, self.image.value = "", b""
        else:
            table, fig = result
            self.message.value = ""
            self.table.value = tables.styled(table).to_html() if table is not None else ""
            self.image.value = png(fig) if fig is not None else b""
        self.redraws += 1

    def _ipython_display_(self) -> None:
        display(self.box)


def tco_explorer(
    records,
    *,
    chips: Sequence[str],
    workload: str,
    target: float,
    price_kind: str = analysis.DEFAULT_PRICE_KIND,
    price: float = 0.0,
    published: pd.DataFrame | None = None,
) -> LiveView:
    """Chips to show, the kind of price (or one tier), a $/chip-hour for every chip (0 = the catalog's), the
    interactivity target; redraws the table of the best batch at the target and the Pareto/cost figure."""
    all_chips = list(dict.fromkeys(r.chip for r in records))
    controls = {
        "chips": w.SelectMultiple(
            options=all_chips,
            value=tuple(c for c in chips if c in all_chips),
            description="chips",
            rows=min(len(all_chips), 6),
            style=WIDE,
        ),
        "price_kind": w.Dropdown(
            options=analysis.price_choices(all_chips),
            value=price_kind,
            style=WIDE,
            description="price (kind or tier)",
        ),
        "price": w.BoundedFloatText(
            value=price or 0.0,
            min=0.0,
            max=1000.0,
            step=0.1,
            style=WIDE,
            description="$/chip-hr (0 = catalog)",
        ),
        "target": selection_slider("target [tok/s/user]", TARGETS, target),
    }

    def draw(v: dict):
        chosen = [r for r in records if r.chip in v["chips"]]
        if not chosen:
            return "select at least one chip"
        frame = analysis.frontier_frame(chosen, v["price_kind"], v["price"] or None)
        pub = published[published["chip"].isin(v["chips"])] if published is not None else None
        return (
            analysis.at_target(frame, v["target"]),
            plot_tco(frame, target=v["target"], workload=workload, published=pub),
        )

    return LiveView(
        controls,
        draw,
        layout=lambda c: w.HBox([c["chips"], w.VBox([c["price_kind"], c["price"], c["target"]])]),
    )


def scaling_explorer(
    chips: Sequence[str],
    specs: Sequence[tuple[str, Sequence[str]]],
    counts: Sequence[int],
    *,
    shown: Sequence[str] | None = None,
) -> LiveView:
    """Chips to show, compute efficiency, overlap and scale-out bandwidth; redraws the projected
    weak-scaling efficiency table (what the controls change) and the scaling curves with the published
    points."""
    defaults = Assumptions()
    controls = {
        "chips": w.SelectMultiple(
            options=list(chips),
            value=tuple(shown or chips),
            description="chips",
            rows=min(len(chips), 6),
            style=WIDE,
        ),
        "gemm_efficiency": selection_slider("GEMM efficiency", FRACTIONS[2:], defaults.gemm_efficiency),
        "overlap": selection_slider("overlap of async collectives", FRACTIONS, defaults.overlap),
        "scaleout": selection_slider(
            "scale-out [GB/s per chip]",
            SCALEOUT_GBYTES_PER_S,
            defaults.scaleout_gbytes_per_s_per_chip,
            catalog_stop=True,
        ),
    }

    def draw(v: dict):
        if not v["chips"]:
            return "select at least one chip"
        a = Assumptions(
            gemm_efficiency=v["gemm_efficiency"],
            overlap=v["overlap"],
            scaleout_gbytes_per_s_per_chip=_or_catalog(v["scaleout"]),
        )
        frames = [analysis.scaling_frame(v["chips"], wl, lays, counts, assumptions=a) for wl, lays in specs]
        pub = analysis.published_scaling(a)
        scaleout = (
            "the catalog's figure" if v["scaleout"] == CATALOG else f"{_label(v['scaleout'])} GB/s per chip"
        )
        used = (
            f"Projected with GEMM efficiency {_label(v['gemm_efficiency'])}, overlap of async collectives "
            f"{_label(v['overlap'])}, scale-out {scaleout}"
        )
        efficiency = pd.concat(frames).pivot_table(
            index=["workload", "chip", "layout"], columns="chips", values="efficiency"
        )
        efficiency.columns = [f"{int(c):,} chips" for c in efficiency.columns]
        return efficiency.reset_index(), plot_scaling(frames, pub, subtitle=used)

    return LiveView(
        controls,
        draw,
        layout=lambda c: w.HBox([c["chips"], w.VBox([c["gemm_efficiency"], c["overlap"], c["scaleout"]])]),
    )


def throughput_explorer(df: pd.DataFrame) -> LiveView:
    """Which result files (sources) the throughput bars show."""
    names = df["file"].map(lambda f: Path(str(f)).name)
    files = list(dict.fromkeys(names))
    controls = {
        "sources": w.SelectMultiple(
            options=files, value=tuple(files), description="sources", rows=min(len(files), 6), style=WIDE
        )
    }

    def draw(v: dict):
        chosen = df[names.isin(v["sources"])]
        if chosen.empty:
            return "select at least one source"
        return None, plot_throughput_bars(chosen)

    return LiveView(controls, draw)
