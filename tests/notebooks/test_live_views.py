"""The notebooks' control panels in-process (no browser): one table widget and one image widget, redrawn in
place on every control change, nothing printed into the cell; slider stops are the values the figure prints."""

from __future__ import annotations

import pytest

from tpu_workbench.bench import analysis
from tpu_workbench.bench import notebook_views as nbv

CHIPS = ["TPU v7", "H100 SXM", "B200"]


@pytest.fixture(scope="module")
def tco():
    records = analysis.decode_frontier(CHIPS, "llama3-8b", batches=(1, 16, 128))
    return nbv.tco_explorer(
        records, chips=CHIPS, workload="llama3-8b", target=20.0, published=analysis.published_serving()
    )


@pytest.mark.slow
def test_tco_panel_redraws_its_one_view_for_every_control(tco, capsys):
    assert tco.redraws == 1 and tco.image.value[:4] == b"\x89PNG" and "<table" in tco.table.value
    assert tco.box.children[-2:] == (tco.table, tco.image)  # the view lives inside the panel, once
    for name, value in (
        ("target", 50.0),
        ("price_kind", "committed"),
        ("price", 2.5),
        ("chips", ("TPU v7",)),
    ):
        before = (tco.image.value, tco.table.value)
        tco.controls[name].value = value
        assert (tco.image.value, tco.table.value) != before, name
    assert tco.redraws == 5 and capsys.readouterr().out == ""  # nothing printed into the cell
    tco.controls["chips"].value = ()
    assert "select at least one chip" in tco.message.value and tco.image.value == b""


def test_slider_stops_are_the_numbers_the_figure_prints(tco):
    slider = tco.controls["target"]
    assert [label for label, _ in slider.options][:6] == ["1", "2", "3", "5", "7.5", "10"]
    for label, value in slider.options:
        assert f"{value:g}" == label  # 35.4813 cannot happen: every stop is a round value
    slider.value = 25.0
    frame = analysis.frontier_frame(
        [r for r in analysis.decode_frontier(["TPU v7"], "llama3-8b", batches=(1,))]
    )
    fig = nbv.plot_tco(frame, target=slider.value, workload="llama3-8b")
    assert "target 25 tok/s per user" in [t.get_text() for t in fig.legends[0].get_texts()]
    assert nbv.choices([10.0, 20.0], 35.0) == (10.0, 20.0, 35.0)  # a parameter off the list is offered as is
    assert tco.controls["target"].style.description_width == "initial"  # labels are never cut off


def test_scaling_panel_has_a_catalog_stop_and_names_the_assumptions_it_used():
    view = nbv.scaling_explorer(["TPU v7"], [("llama3-8b", ["fsdp"])], [1, 8, 64])
    scaleout = view.controls["scaleout"]
    assert scaleout.options[0] == ("catalog", "catalog") and scaleout.value == "catalog"
    before = view.image.value
    scaleout.value = 25.0
    assert view.image.value != before and view.redraws == 2


def test_scaling_panel_table_changes_with_its_controls():
    """Issue 34: the slider left the table unchanged (it showed published figures); the table is now the
    projected efficiency the controls change."""
    view = nbv.scaling_explorer(["TPU v7", "H100 SXM"], [("llama3-8b", ["dp"])], [1, 64, 1024])
    before = view.table.value
    assert "1,024 chips" in before
    view.controls["overlap"].value = 0.0
    assert view.table.value != before
