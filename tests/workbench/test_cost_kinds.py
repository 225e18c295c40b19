import datetime as dt

import pytest

from tpu_workbench.bench import cost
from tpu_workbench.bench.catalog import load_catalog
from tpu_workbench.bench.errors import WorkbenchError

TODAY = dt.date(2026, 12, 1)


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def test_every_tier_has_a_kind():
    assert cost.price_kind("own-internal") == "provider-internal"
    assert cost.price_kind("own-hyperscaler") == cost.price_kind("own-neocloud") == "owner-tco"
    assert cost.price_kind("on-demand") == "list" and cost.price_kind("rent-3yr") == "committed"
    with pytest.raises(WorkbenchError, match="own-internal"):
        cost.price_kind("free")


def test_comparable_prices_never_mix_kinds(cat):
    chips = [cat.chip("TPU v7"), cat.chip("H100"), cat.chip("B200")]
    pick = cost.comparable_prices(chips, today=TODAY)
    assert pick.kind == "owner-tco" and not pick.missing
    assert {p.kind for p in pick.prices.values()} == {"owner-tco"}
    assert pick.prices["TPU v7"].usd_per_chip_hour == 1.21  # the external TCO, not Google's internal $1.03
    internal = cost.comparable_prices(chips, "provider-internal", today=TODAY)
    assert internal.prices["TPU v7"].usd_per_chip_hour == 1.03 and set(internal.missing) == {
        "H100 SXM",
        "B200",
    }
    with pytest.raises(WorkbenchError, match="owner-tco"):
        cost.comparable_prices(chips, "cheapest")


def test_fresh_prices_are_preferred_and_stale_ones_flagged(cat):
    h100 = cat.chip("H100")
    listed = cost.pick_price(h100, "list", today=TODAY)
    assert listed.tier in ("on-demand", "capacity-block") and listed.staleness(
        TODAY
    )  # only stale list prices
    pick = cost.comparable_prices([h100, cat.chip("TPU v5e")], "list", today=TODAY)
    assert set(pick.stale(TODAY)) == {"H100 SXM", "TPU v5e"}
    assert cost.kinds_in_common([cat.chip("TPU v7"), cat.chip("TPU v5e")]) == []


def test_cost_lines_and_line_of_kind(cat):
    lines = [c.to_dict() for c in cost.cost_lines(cat.chip("TPU v7").prices, 1000.0, TODAY)]
    assert {c["price_kind"] for c in lines} == {"owner-tco", "provider-internal", "committed"}
    best = cost.line_of_kind(lines, "owner-tco")
    assert best["tier"] == "own-hyperscaler" and best["stale"] == ""
    assert cost.line_of_kind(lines, "list") is None
    assert best["usd_per_mtok"] == pytest.approx(1.21 / (1000 * 3600) * 1e6)


def test_project_cli_prices_every_chip_at_one_kind(capsys):
    from tpu_workbench.bench.cli import main

    assert main(["project", "--chip", "TPU v7", "H100", "--chips", "8", "-w", "llama3-8b"]) == 0
    out = capsys.readouterr().out
    assert "$/Mtok (owner-tco)" in out and "own-internal" not in out and "cheapest" not in out
    assert (
        main(
            [
                "project",
                "--chip",
                "TPU v7",
                "H100",
                "--chips",
                "8",
                "-w",
                "llama3-8b",
                "--price-kind",
                "provider-internal",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "no provider-internal price" in out and "no provider-internal price for H100 SXM" in out
