import math

import pytest

from workbench.catalog import UnknownChipError
from workbench.errors import WorkbenchError
from workbench.projection import Assumptions, project, projection_vs_published, resolve_layout, scaling_curve
from workbench.workloads import get_config


def test_single_chip_prefill_is_compute_bound_at_the_assumed_efficiency():
    a = Assumptions(compute_efficiency=0.4)
    r = project("H100", "llama3-8b", "prefill", 1, batch=1, seq=4096, assumptions=a)
    assert r.extra["bound"] == "compute"
    assert r.mfu == pytest.approx(0.4)
    assert r.provenance == "projected" and r.source["assumptions"]["compute_efficiency"] == 0.4
    assert r.source["inputs"]["chip"]["name"] == "H100 SXM" and r.source["model_version"]


def test_small_batch_decode_is_memory_bound_and_reports_mbu():
    r = project("H200", "llama3-8b", "decode", 1, batch=1, seq=1024)
    assert r.extra["bound"] == "memory"
    assert r.mbu == pytest.approx(Assumptions().memory_efficiency, rel=0.05)
    # the weights must be streamed once per token: tok/s/user <= HBM BW / weight bytes
    assert r.tokens_per_s_per_user <= 4800e9 / (8.03e9 * 2)


def test_decode_batch_trades_interactivity_for_throughput():
    small = project("B200", "llama3-70b", "decode", 8, "tp", batch=1)
    big = project("B200", "llama3-70b", "decode", 8, "tp", batch=64)
    assert big.tokens_per_s_per_chip > small.tokens_per_s_per_chip
    assert big.tokens_per_s_per_user < small.tokens_per_s_per_user


def test_scaling_beyond_the_scale_up_domain_costs_efficiency():
    recs = scaling_curve("H100", "llama3-70b", chips=(8, 64, 1024), layout="fsdp", batch=1, seq=4096)
    per_chip = [r.tokens_per_s_per_chip for r in recs]
    assert per_chip[0] >= per_chip[1] >= per_chip[2]
    assert recs[-1].extra["comm_breakdown_s"]["fsdp_gather_scatter"] > recs[0].extra["comm_breakdown_s"][
        "fsdp_gather_scatter"]


def test_per_device_figures_for_two_device_chips():
    r = project("TPU v7", "llama3-8b", "train", 4)
    assert r.n_devices == 8 and r.tokens_per_s_per_device == pytest.approx(r.tokens_per_s_per_chip / 2)


def test_cost_lines_follow_the_identity():
    r = project("TPU v7", "llama3-8b", "decode", 1, batch=8)
    line = next(c for c in r.cost if c["tier"] == "own-hyperscaler")
    assert line["usd_per_mtok"] == pytest.approx(1.21 / (r.tokens_per_s_per_chip * 3600) * 1e6)


def test_layouts_and_errors():
    cfg = get_config("qwen3-235b-a22b")
    lay = resolve_layout("fsdp+ep", 256, cfg, 9216, 8)
    assert (lay.fsdp, lay.ep) == (256, 128)
    assert resolve_layout("dp=2,fsdp=4,tp=2", 16, cfg, 9216, 8).tp == 2
    with pytest.raises(WorkbenchError, match="fsdp"):
        resolve_layout("zigzag", 8, cfg, 8, 8)
    with pytest.raises(WorkbenchError, match="dense"):
        resolve_layout("ep", 8, get_config("llama3-8b"), 8, 8)
    with pytest.raises(WorkbenchError, match="chips"):
        resolve_layout("dp=2,tp=2", 8, cfg, 8, 8)
    with pytest.raises(UnknownChipError):
        project("Gaudi3", "llama3-8b", "train", 1)
    with pytest.raises(WorkbenchError):
        Assumptions(compute_efficiency=1.5)


def test_projection_vs_published_table():
    t = projection_vs_published()
    modelled = t[t["projected"].notna()]
    assert set(modelled["row"]) == {4, 5, 6, 7}
    assert all(math.isfinite(e) for e in modelled["rel_error"])
    assert set(t[t["projected"].isna()]["row"]) == {9, 10, 11, 12, 13, 14}
    assert t["assumptions"].str.len().min() > 10
