import math

import pytest

from tpu_workbench.bench.catalog import load_catalog
from tpu_workbench.bench.projection import CALIBRATED_GEMM_EFFICIENCY, projection_vs_published
from tpu_workbench.bench.projection.calibration import (
    ACCEPTANCE,
    CALIBRATION_POINT,
    GPU_CALIBRATION_POINT,
    GPU_FP8_CALIBRATION_POINT,
    TPU_FP8_CALIBRATION_POINT,
    calibrate,
    consistency,
    summary,
)
from tpu_workbench.bench.projection.report import format_table
from tpu_workbench.bench.workloads import get_config


@pytest.fixture(scope="module")
def table():
    return projection_vs_published()


def test_the_shipped_efficiency_is_the_fit_on_the_named_point():
    eff, rec = calibrate()
    assert eff == pytest.approx(CALIBRATED_GEMM_EFFICIENCY, abs=5e-4)
    assert rec.source["assumptions"]["gemm_efficiency"] == pytest.approx(eff)


def test_one_calibration_point_and_every_other_point_categorised(table):
    cal = table[table["category"] == "calibration"]
    # one per vendor and precision
    assert set(cal["id"]) == {
        CALIBRATION_POINT,
        GPU_CALIBRATION_POINT,
        GPU_FP8_CALIBRATION_POINT,
        TPU_FP8_CALIBRATION_POINT,
    }
    tok = cal[cal["metric"].str.startswith("tokens/s")]
    assert all(abs(e) < 1e-4 for e in tok["rel_error"])  # tokens/s exactly
    tpu_mfu = cal[(cal["id"] == CALIBRATION_POINT) & ~cal["metric"].str.startswith("tokens/s")]
    assert all(abs(e) < 1e-4 for e in tpu_mfu["rel_error"])  # MFU to the printed rounding
    # the GPU point's MFU range (33-39 %) is torchtitan's own reading of its power-limited chips: +10 % beyond it
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
    rows = table[table["id"] == "torchtitan-h100-llama3.1-8b-128-compile"]
    assert len(rows) == 2 and set(rows["category"]) == {"validation (assumed setting)"}
    assert rows["assumptions"].str.contains("ASSUMED: the chip's BF16 peak").all()


# validation points still outside +/-15% at model 2.1, each explained in docs/workbench.md
DOCUMENTED_MISSES = {
    "maxtext-v5p-128b-2xv5p-512",
    "maxtext-v5p-512b-1xv5p-1024",
    "maxtext-tpu7x-qwen3-235b-4k-256",
}


def test_validation_misses_are_only_the_documented_ones(table):
    """58 of 62 complete-setting rows within +/-15% once the 2023 MaxText tables are read with the model
    they ran (ReLU MLP, parallel layer, heads of 256), v6e Llama 2 70B with its logged batch and its flags'
    gradient reduce-scatter on the critical path (62: the tpu7x 70B 128k context-parallel recipe added,
    tokens/s and MFU)."""
    s = summary(table)
    assert s["validation_rows"] == 62 and s["within_acceptance"] == 58
    val = table[table["category"] == "validation"]
    missed = set(val[val["rel_error"].abs() > ACCEPTANCE]["id"])
    assert missed <= DOCUMENTED_MISSES
    fixed = (
        "maxtext-v5e-32b-1x256",
        "maxtext-v5p-512b-2xv5p-1024",
        "maxtext-v5p-1024b-1xv5p-4096",
        "maxtext-v6e-llama2-70b-256",
    )
    assert all(abs(e) <= ACCEPTANCE for e in val[val["id"].isin(fixed)]["rel_error"])


def test_every_miss_carries_its_source_recheck_and_a_labelled_hypothesis(table):
    """A validation row outside the band is reported with the re-check of its setting against the source
    and what the model lacks, labelled a hypothesis (training.json ``model_gap``), never silently."""
    from tpu_workbench.bench.projection.calibration import misses

    found = misses(table)
    assert {m["id"] for m in found} <= DOCUMENTED_MISSES
    for m in found:
        assert m["hypothesis"].startswith("HYPOTHESIS:"), m["id"]
        assert "The record is right." in m["record_check"], m["id"]
        assert all(abs(e) > ACCEPTANCE for e in m["errors"].values())
    text = format_table(table, details=False)
    assert "MISSES (validation rows outside" in text
    for m in found:
        assert f"- {m['id']} (" in text


def test_the_v5p_512b_point_is_the_bf16_script_of_the_table_not_its_int8_first_version():
    """The 512B script ran int8_training=true only in its first version (maxtext b1bd9f03f, 2023-11-03);
    the table (76bd53b0f, 2023-12-15) ran bf16, per_device_batch_size 2, remat full."""
    from tpu_workbench.bench.published import training_points

    p = next(q for q in training_points() if q["id"] == "maxtext-v5p-512b-1xv5p-1024")
    st = p["setting"]
    assert (st["precision"], st["per_device_batch"], st["remat"]) == ("bf16", 2, "full")
    check = p["model_gap"]["record_check"]
    assert "int8_training=false" in check and "b1bd9f03f" in check and "5f8614c41" in check


def test_every_miss_says_why_first(table):
    """A validation row outside +/-15 % stays, and its note opens with its error and the recorded reason
    (training.json model_gap, or the TorchTPU rows' shared one), before the setting."""
    val = table[table["category"].str.startswith("validation") & table["rel_error"].notna()]
    missed = val[val["rel_error"].abs() > ACCEPTANCE]
    assert len(missed) > 0
    for note in missed["assumptions"]:
        assert note.startswith("MISS (") and "HYPOTHESIS" in note, note[:120]
    within = val[val["rel_error"].abs() <= ACCEPTANCE]
    assert not within["assumptions"].str.startswith("MISS").any()


def test_gpu_training_meets_the_target_with_flash_attention_relative_to_the_gemms(table):
    """torchtitan's H100 rows (FlashAttention-2 at 0.41 of the fitted GEMM efficiency, fp8 rows relative to
    the bf16 GEMMs): 14 of 15 within +/-15 %, none beyond +/-25 % (with the eager-ring cost of the context-parallel stage, the 8B 64k CP 2 row is the miss, -17.7 %). With
    attention at 35 % of the peak absolute the CP rows were +16...+82 % and 6 of 15 within."""
    gpu = table[
        table["chip"].astype(str).str.startswith("H100") & table["category"].str.startswith("validation")
    ]
    err = gpu["rel_error"].dropna().abs()
    assert len(err) == 15 and (err <= ACCEPTANCE).sum() >= 14 and err.max() <= 0.25
    cp = gpu[gpu["id"].str.contains("-cp")].set_index("id")["rel_error"]
    assert cp["torchtitan-h100-llama3.1-8b-8-cp8-256k"] < 0.25


def test_an_fp8_run_is_compared_by_its_printed_tflops_not_a_bf16_mfu(table):
    """MaxText prints model TFLOP/s; over the bf16 peak an fp8 run's figure is no MFU of either peak (the
    70B fp8_full run would read 80 %): fp8 rows compare TFLOP/s per chip, on the same FLOP count."""
    fp8 = table[
        table["id"].str.contains("tpu7x")
        & table["id"].str.contains("fp8")
        & (table["category"] != "unanchored")
    ]
    assert set(fp8["id"]) >= {TPU_FP8_CALIBRATION_POINT, "maxtext-tpu7x-llama3.1-405b-fp8-256"}
    flops = fp8[~fp8["metric"].str.startswith("tokens/s")]
    assert (
        set(flops["metric"]) == {"TFLOP/s per chip (causal)"}
        and not fp8["metric"].str.startswith("MFU").any()
    )
    for pid in set(fp8["id"]):  # the two metrics of one point agree: the same step and FLOPs per token
        errs = fp8[fp8["id"] == pid]["rel_error"].tolist()
        assert len(errs) == 2 and errs[0] == pytest.approx(errs[1], abs=1e-4)  # printed figures are rounded
