import pytest

from tpu_workbench.bench.catalog import load_catalog
from tpu_workbench.bench.flops import param_counts
from tpu_workbench.bench.projection.block import Block, block_param_counts
from tpu_workbench.bench.published import (
    published_records,
    training_blocks,
    training_models,
    training_points,
    training_records,
)
from tpu_workbench.bench.workloads.config import PRESETS, DecoderConfig

COMPLETE = (
    "chip",
    "n_chips",
    "model",
    "seq",
    "per_device_batch",
    "precision",
    "layout",
    "remat",
    "mfu_convention",
    "text",
    "async_collectives",
)


def test_every_point_names_its_source_commit_date_and_figure():
    pts = training_points()
    assert len(pts) >= 60 and len({p["id"] for p in pts}) == len(pts)
    for p in pts:
        src = p["source"]
        assert src["repo"] and src["path"] and len(src["commit"]) == 40 and src["date"][:2] == "20", p["id"]
        assert p["figure"] and p["published"] and p["setting"]["text"], p["id"]
        if not p.get("unanchored"):
            missing = [k for k in COMPLETE if k not in p["setting"]]
            assert not missing, (p["id"], missing)


def test_models_are_decoder_configs_of_the_stated_size():
    models = training_models()
    sizes = {f"maxtext-synthetic-{s}b": s for s in (16, 32, 64, 128, 256, 512, 1024)}
    for name, size in sizes.items():
        block = Block.from_dict(training_blocks()[name])  # 2023 MaxText: ReLU MLP of 2 matrices
        total = block_param_counts(DecoderConfig(**models[name]), block).total / 1e9
        assert total == pytest.approx(size, rel=0.05), name
    assert param_counts(DecoderConfig(**models["llama3.1-405b"])).total / 1e9 == pytest.approx(
        405.9, rel=0.01
    )
    names = {p["setting"]["model"] for p in training_points() if not p.get("unanchored")}
    assert names <= set(models) | set(PRESETS)


def test_maxtext_v5e_table_is_self_consistent():
    v5e = load_catalog().chip("TPU v5e")
    pts = [p for p in training_points() if p["id"].startswith("maxtext-v5e-")]
    assert len(pts) == 24 and {p["setting"]["slices"] for p in pts} == {1, 2, 4, 8, 16, 32}
    for p in pts:
        assert p["published"]["tflops_per_chip"] / v5e.peak_tflops["bf16"] == pytest.approx(
            p["published"]["mfu"], abs=0.006
        )


def test_training_records_are_published_records_apart_from_the_torchtpu_rows():
    recs = training_records()
    assert all(r.provenance == "published" and r.source["id"] and r.source["commit"] for r in recs)
    v7 = next(r for r in recs if r.source["id"] == "maxtext-tpu7x-llama3.1-70b-8k-64")
    assert v7.tokens_per_s_per_chip == pytest.approx(2686.98) and v7.tokens_per_s_per_device == pytest.approx(
        1343.49
    )
    assert v7.mfu == pytest.approx(1207.05 / 2307) and "catalog bf16 peak" in v7.extra["mfu_basis"]
    assert {r.source["row"] for r in published_records()} == {1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14}


def _point(point_id: str) -> dict:
    return next(p for p in training_points() if p["id"] == point_id)


def test_the_2023_tables_count_attention_as_the_maxtext_of_their_date_did():
    """MaxText/train.py counted full attention from 0e650131c (2023-06-02) and halved it for causality from
    64ee4e938 (2023-11-08, the commit that added attention='flash', which the v5p scripts pass)."""
    for p in training_points():
        st = p["setting"]
        if p["id"].startswith("maxtext-v5e-"):
            assert st["mfu_convention"] == "palm" and "0e650131c" in st["convention_basis"], p["id"]
        elif p["id"].startswith("maxtext-v5p-") and st.get("model", "").startswith("maxtext-synthetic"):
            assert st["mfu_convention"] == "causal" and "64ee4e938" in st["convention_basis"], p["id"]


def test_v6e_llama2_70b_is_read_as_the_logged_run():
    """The table's 43.8% / ~900 tokens/s are the recipe's log line, whose total_weights 2,097,152 =
    256 devices x 2 x 4096: the run had per_device_batch_size 2 (the config later says 3)."""
    p = _point("maxtext-v6e-llama2-70b-256")
    st = p["setting"]
    assert st["per_device_batch"] == 2 and 256 * st["per_device_batch"] * st["seq"] == 2_097_152
    assert "total_weights: 2097152" in st["setting_conflict"] and "44189f9" in p["source"]["config"]
    assert 905.021 * 9.052 == pytest.approx(st["per_device_batch"] * st["seq"], rel=1e-3)
