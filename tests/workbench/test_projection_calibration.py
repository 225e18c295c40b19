import math

import pytest

from workbench.catalog import load_catalog
from workbench.projection import CALIBRATED_GEMM_EFFICIENCY, projection_vs_published
from workbench.projection.calibration import ACCEPTANCE, CALIBRATION_POINT, calibrate, consistency, summary
from workbench.projection.report import format_table
from workbench.workloads import get_config


@pytest.fixture(scope="module")
def table():
    return projection_vs_published()


def test_the_shipped_efficiency_is_the_fit_on_the_named_point():
    eff, rec = calibrate()
    assert eff == pytest.approx(CALIBRATED_GEMM_EFFICIENCY, abs=5e-4)
    assert rec.source["assumptions"]["gemm_efficiency"] == pytest.approx(eff)


def test_one_calibration_point_and_every_other_point_categorised(table):
    cal = table[table["category"] == "calibration"]
    assert set(cal["id"]) == {CALIBRATION_POINT}
    assert all(abs(e) < 1e-4 for e in cal["rel_error"])  # tokens/s exactly; MFU to the printed rounding
    assert set(table["category"]) <= {
        "calibration",
        "validation",
        "validation (assumed setting)",
        "inconsistent reading",
        "unanchored",
    }
    val = table[table["category"] == "validation"]
    assert len(val) >= 40 and all(math.isfinite(e) for e in val["rel_error"])
    assert all(len(c) > 10 for c in val["consistency"]) and all(len(s) > 10 for s in val["source"])
    un = table[table["category"] == "unanchored"]
    assert un["projected"].isna().all() and un["assumptions"].str.startswith("not modelled").all()
    assert {"torchtpu-row4", "torchtpu-row7"} <= set(un["id"])


def test_torchtpu_rows_5_and_6_are_set_up_with_stated_assumptions(table):
    rows = table[table["id"].str.startswith("torchtpu-row5") | table["id"].str.startswith("torchtpu-row6")]
    assert set(rows["category"]) == {"validation (assumed setting)"} and len(rows) == 4
    assert rows["assumptions"].str.contains("assumed as in MaxText").all()
    row5 = table[table["id"] == "torchtpu-row5-1slice"].iloc[0]
    assert "reproduced by causal" in row5["consistency"]


def test_consistency_check_catches_a_wrong_reading():
    v7 = load_catalog().chip("TPU v7")
    cfg = get_config("llama3-70b")
    good = {"tflops_per_chip": 1207.05, "tokens_per_s_per_chip": 2686.98}
    assert "reproduced by causal" in consistency(good, cfg, v7, 8192, stated="causal")
    halved = {"tflops_per_chip": 1207.05, "tokens_per_s_per_chip": 2686.98 / 2}  # per chip read as per device
    assert "INCONSISTENT" in consistency(halved, cfg, v7, 8192)
    wrong_peak = {"tflops_per_chip": 120, "mfu": 0.70}
    assert "INCONSISTENT" in consistency(wrong_peak, cfg, load_catalog().chip("v5e"), None)


def test_summary_and_text_report(table):
    s = summary(table)
    assert s["calibration_point"] == CALIBRATION_POINT and s["validation_rows"] >= 40
    assert 0 < s["within_acceptance"] <= s["validation_rows"] and s["acceptance"] == ACCEPTANCE
    text = format_table(table, details=False)
    for head in ("CALIBRATION", "VALIDATION (complete settings", "UNANCHORED", CALIBRATION_POINT):
        assert head in text
    assert "SETTINGS, SOURCES" not in text and "SETTINGS, SOURCES" in format_table(table)


def test_a_point_whose_chip_peak_is_unknown_is_validation_with_an_assumed_setting(table):
    rows = table[table["id"] == "torchtitan-h100-llama3.1-8b-8-compile"]
    assert len(rows) == 2 and set(rows["category"]) == {"validation (assumed setting)"}
    assert rows["assumptions"].str.contains("ASSUMED: the chip's BF16 peak").all()
