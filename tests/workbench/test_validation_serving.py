"""Validation on both vendors: every serving row of published-figures.md (4, 7, 9-14) is in the JSON table,
projected or with the reason it cannot be; one calibration point per vendor, phase family and precision;
the fitted serving overheads re-fit to the stored constants."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from tpu_workbench.bench.cli import main
from tpu_workbench.bench.projection.serving_validation import (
    SEQ_OVERHEAD_S,
    fit_seq_overhead,
    group_of,
    serving_rows,
    summary,
    vs_published_json,
)

FIELDS = {
    "source",
    "date",
    "vendor",
    "chip",
    "phase",
    "precision",
    "role",
    "published",
    "projected",
    "unit",
    "error_pct",
    "note",
}


@pytest.fixture(scope="module")
def table():
    return vs_published_json()


def test_the_fitted_overheads_are_what_the_calibration_rows_give():
    for vendor in ("tpu", "gpu"):
        assert fit_seq_overhead(vendor) == pytest.approx(SEQ_OVERHEAD_S[vendor], rel=0.01)


def test_every_serving_row_is_in_the_table_projected_or_with_its_reason(table):
    rows = table["rows"]
    assert all(FIELDS <= set(r) for r in rows)
    ids = Counter(r["id"] for r in rows)
    for n in (4, 7, 9, 10, 11, 12, 13, 14):
        assert ids[f"row {n}"] >= 1, n
    for r in rows:
        assert r["role"] in ("calibration", "validation") and r["vendor"] in ("gpu", "tpu")
        if r["projected"] is None:  # never projected: the note says so first, and why
            assert r["note"].startswith("UNANCHORED (not projected); ") and len(r["note"]) > 40
        if r["role"] == "validation" and r["projected"] is not None and not isinstance(r["published"], str):
            assert r["error_pct"] == pytest.approx(100 * (r["projected"] / r["published"] - 1))
    assert {r["vendor"] for r in rows if r["phase"] == "train"} == {"gpu", "tpu"}


def test_at_most_one_calibration_point_per_vendor_phase_family_and_precision(table):
    points = {  # one published point may give two rows (tokens/s and MFU)
        (r["vendor"], "train" if r["phase"] == "train" else "serve", r["precision"], r["id"], r["chip"])
        for r in table["rows"]
        if r["role"] == "calibration"
    }
    cal = Counter(p[:3] for p in points)
    assert cal and max(cal.values()) == 1
    ids = {r["id"] for r in table["rows"] if r["role"] == "calibration"}
    assert not ids & {r["id"] for r in table["rows"] if r["role"] == "validation" and r["id"] != "row 12"}


@pytest.mark.slow  # (quick loop: several seconds; runs in the full suite)
def test_groups_count_only_projected_validation_rows_and_judge_the_targets():
    rows = serving_rows()
    s = summary(rows)
    tpu = s["tpu serve"]
    assert tpu["calibration_rows"] == 1 and tpu["validation_rows"] == sum(
        1 for r in rows if group_of(r) == "tpu serve" and r.role == "validation" and r.error_pct is not None
    )
    assert s["both serve"]["validation_rows"] == sum(1 for r in rows if " vs " in r.chip) > 0
    assert tpu["meets_target"] == (tpu["share_within_15pct"] >= 0.9 and tpu["max_abs_error_pct"] <= 25)


def test_the_cli_prints_the_json_table(capsys):
    assert main(["project", "--vs-published", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert isinstance(rows, list) and len(rows) > 100
    assert all(FIELDS <= set(r) for r in rows)
    assert {r["vendor"] for r in rows} == {"gpu", "tpu"} and {r["role"] for r in rows} == {
        "calibration",
        "validation",
    }
    assert main(["project", "--vs-published", "--json", "--groups"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"rows", "groups", "targets", "calibration"} and out["rows"] == rows


def test_a_serving_miss_opens_its_note_with_miss_and_a_reason():
    from tpu_workbench.bench.projection.serving_validation import serving_rows

    rows = [r for r in serving_rows() if r.role == "validation" and r.error_pct is not None]
    assert any(abs(r.error_pct) > 15 for r in rows)  # the table still has misses: the check is live
    for r in rows:
        if abs(r.error_pct) > 15:
            assert r.note.startswith(f"MISS ({r.error_pct:+.1f} %): "), r.note[:80]
            assert "; SETTING: " in r.note
        else:
            assert not r.note.startswith("MISS")


def test_littles_law_on_the_published_row_12_point_gives_four_chip_replicas():
    from tpu_workbench.bench.projection.serving_validation import implied_chips_per_replica

    # 256 users at 20 tok/s/user and the published mean TTFT: ~4-5 chips per replica, not 8 (the source's tp 4)
    for chip, tok_s in (("TPU v7", 9364.0), ("B200", 8903.0), ("B300", 8925.0)):
        assert 4.0 < implied_chips_per_replica(chip, tok_s) < 5.0
    assert implied_chips_per_replica("TPU v7", 9364.0 / 2) == pytest.approx(
        2 * implied_chips_per_replica("TPU v7", 9364.0)
    )


def test_the_inferencex_notes_carry_the_chunk_exact_closed_form():
    rows = [r for r in serving_rows() if r.id in ("row 11", "row 12", "row 14")]
    assert len(rows) == 9
    for r in rows:
        assert "chunk-exact closed form (serving_chunked): " in r.note
    assert all("Little's law" in r.note for r in rows if r.id == "row 12")


def test_the_inferencex_prices_are_the_ones_the_articles_ratios_imply():
    from tpu_workbench.bench.projection.serving_validation import INFERENCEX_TCO

    # tokens per $ ratio = (v7 tok/s / v7 $) / (gpu tok/s / gpu $): external ($1.21) and internal ($1.03) TCO
    tput = {"TPU v7": 9364.0, "B200": 8903.0, "B300": 8925.0}
    for chip, external, internal in (("B200", 1.504, 1.767), ("B300", 1.96, 2.302)):
        for v7_price, ratio in ((INFERENCEX_TCO["TPU v7"], external), (1.03, internal)):
            implied = ratio * tput[chip] * v7_price / tput["TPU v7"]
            assert implied == pytest.approx(INFERENCEX_TCO[chip], rel=0.005)
