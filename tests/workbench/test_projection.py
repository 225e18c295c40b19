import math

import pytest

from tpu_workbench.bench.catalog import UnknownChipError, load_catalog
from tpu_workbench.bench.errors import WorkbenchError
from tpu_workbench.bench.projection import Assumptions, project, resolve_layout, scaling_curve
from tpu_workbench.bench.projection.topology import Fabric, mean_hops, spanned_extents, torus_shape
from tpu_workbench.bench.workloads import get_config


def test_prefill_is_compute_bound_below_the_gemm_efficiency_and_names_every_input():
    a = Assumptions(gemm_efficiency=0.4)
    r = project("H100", "llama3-8b", "prefill", 1, batch=1, seq=4096, assumptions=a)
    assert r.extra["bound"] == "compute"
    assert (
        0.3 < r.mfu < 0.4
    )  # attention tile fill, elementwise passes and the LM head cost below the GEMM rate
    assert r.source["assumptions"]["gemm_efficiency"] == 0.4 and r.source["model_version"]
    named = r.source["inputs"]["named"]
    assert named["peak_tflops_per_chip"] == {
        "value": 989.0,
        "unit": "TFLOP/s dense",
        "source": named["peak_tflops_per_chip"]["source"],
    }
    for name, entry in named.items():
        assert set(entry) == {"value", "unit", "source"} and entry["unit"] and entry["source"], name


def test_small_batch_decode_is_memory_bound_and_reports_mbu():
    r = project("H200", "llama3-8b", "decode", 1, batch=1, seq=1024)
    assert r.extra["bound"] == "memory"
    assert r.mbu == pytest.approx(Assumptions().memory_efficiency, rel=0.1)
    assert r.tokens_per_s_per_user <= 4800e9 / (8.03e9 * 2)  # the weights are read once per token


def test_decode_batch_trades_interactivity_for_throughput():
    small = project("B200", "llama3-70b", "decode", 8, "tp", batch=1)
    big = project("B200", "llama3-70b", "decode", 8, "tp", batch=64)
    assert big.tokens_per_s_per_chip > small.tokens_per_s_per_chip
    assert big.tokens_per_s_per_user < small.tokens_per_s_per_user


def test_fsdp_beyond_the_scale_up_domain_uses_the_nic_and_costs_when_not_hidden():
    kw = dict(layout="fsdp", batch=1, seq=4096, remat="full")
    recs = scaling_curve("H100", "llama3-70b", chips=(8, 64, 1024), **kw)
    fsdp = ("fsdp_gather", "fsdp_grad_reduce_scatter")
    comm = [sum(r.extra["comm_breakdown_s"][k] for k in fsdp) for r in recs]
    assert comm[0] < comm[1] <= comm[2] * 1.01
    assert recs[0].tokens_per_s_per_chip is None and recs[0].cost == []  # 70B on 8 chips does not fit
    assert "does not fit" in recs[0].extra["infeasible"]
    serial = scaling_curve("H100", "llama3-70b", chips=(64, 1024), assumptions=Assumptions(overlap=0.0), **kw)
    assert serial[1].tokens_per_s_per_chip < serial[0].tokens_per_s_per_chip
    assert serial[0].tokens_per_s_per_chip < recs[1].tokens_per_s_per_chip  # hiding the gathers matters


def test_two_device_chips_fit_per_device_not_per_chip():
    v7 = load_catalog().chip("TPU v7")
    r = project(v7, "llama3-8b", "train", 4)
    assert r.n_devices == 8 and r.tokens_per_s_per_device == pytest.approx(r.tokens_per_s_per_chip / 2)
    assert r.extra["memory_capacity_per_device_gb"] == pytest.approx(96 * 1.073741824)
    assert r.extra["memory_per_chip_gb"] == pytest.approx(2 * r.extra["memory_per_device_gb"])
    # a 70B model with full remat on 1 chip needs more than one die's HBM: not a fit, even below 2 x 96 GiB
    big = project(v7, "llama3-70b", "train", 1, batch=1, seq=2048, remat="full")
    assert not big.extra["fits_in_hbm"]
    assert "die_to_die" in r.extra["comm_breakdown_s"]


def test_cost_lines_follow_the_identity_and_carry_kind_and_staleness():
    r = project("TPU v7", "llama3-8b", "decode", 1, batch=8)
    line = next(c for c in r.cost if c["tier"] == "own-hyperscaler")
    assert line["usd_per_mtok"] == pytest.approx(1.21 / (r.tokens_per_s_per_chip * 3600) * 1e6)
    assert line["price_kind"] == "owner-tco" and "stale" in line


def test_layouts_hybrid_slices_and_errors():
    cfg = get_config("qwen3-235b-a22b")
    lay = resolve_layout("fsdp+ep", 256, cfg, 9216, 8)
    assert (lay.fsdp, lay.ep) == (256, 128)
    assert resolve_layout("dp=2,fsdp=4,tp=2", 16, cfg, 9216, 8).tp == 2
    hybrid = resolve_layout("fsdp", 8192, cfg, 1024, 8, slices=8)
    assert (hybrid.dp, hybrid.fsdp, hybrid.slices, hybrid.dp_across_slices) == (8, 1024, 8, 8)
    with pytest.raises(WorkbenchError, match="fsdp"):
        resolve_layout("zigzag", 8, cfg, 8, 8)
    with pytest.raises(WorkbenchError, match="dense"):
        resolve_layout("ep", 8, get_config("llama3-8b"), 8, 8)
    with pytest.raises(WorkbenchError, match="chips"):
        resolve_layout("dp=2,tp=2", 8, cfg, 8, 8)
    with pytest.raises(UnknownChipError):
        project("Gaudi3", "llama3-8b", "train", 1)
    with pytest.raises(WorkbenchError):
        Assumptions(gemm_efficiency=1.5)
    with pytest.raises(WorkbenchError, match="remat"):
        project("TPU v7", "llama3-8b", "train", 4, remat="sometimes")


def test_a_job_larger_than_the_largest_tpu_slice_is_split_over_dcn():
    r = project("TPU v5p", "llama3-70b", "train", 8192, "fsdp", batch=1, seq=2048)
    assert r.extra["slices"] == 2 and "6144" in r.extra["notes"][0]
    assert r.extra["comm_breakdown_s"]["dp_allreduce_across_slices_dcn"] > 0
    dcn = r.source["inputs"]["named"]["scaleout_gbytes_per_s_per_chip"]
    assert dcn["value"] == pytest.approx(50 / 8) and "Gb/s" in dcn["source"]


def test_all_to_all_on_a_torus_pays_the_hop_count_a_full_mesh_does_not():
    cat = load_catalog()
    a = Assumptions()
    v7 = Fabric.for_chip(cat.chip("TPU v7"), a, slice_chips=256)
    volume = 1e9
    ring = v7.ring(volume, 128) - v7.latency_s
    a2a = v7.all_to_all(volume, 128) - v7.latency_s
    ext = spanned_extents(v7.shape, 1, 128)
    assert v7.shape == (4, 8, 8) and [e for e, _ in ext] == [4, 8, 4]
    # per byte, an all-to-all crosses the mean hop count where a ring collective crosses one link: 1/4 of
    # all-gathering the whole activation on a ring (maxtext sharding.md, scaling book)
    assert a2a / ring == pytest.approx(sum(mean_hops(e, w) for e, w in ext), rel=0.02)
    assert a2a > 4 * ring
    mi = Fabric.for_chip(cat.chip("MI300X"), a)
    t = mi.all_to_all(volume, 8) - mi.latency_s
    assert t == pytest.approx(volume * 7 / 8 / (7 * 64e9 * a.collective_efficiency))
    assert torus_shape(256, 2) == (16, 16) and torus_shape(1024, 3) == (8, 8, 16)
    assert mean_hops(8, True) == 2 and mean_hops(4, False) == pytest.approx(15 / 12)


def test_straggler_term_grows_with_hosts_and_is_absent_on_one_host():
    one = project("H100", "llama3-8b", "train", 8, batch=2, seq=8192)
    many = project("H100", "llama3-8b", "train", 1024, batch=2, seq=8192)
    assert one.extra["straggler_factor"] == 1.0
    assert many.extra["straggler_factor"] == pytest.approx(1 + 0.01 * math.sqrt(2 * math.log(128)))


def test_remat_full_recomputes_more_than_minimal_and_auto_fits():
    kw = dict(batch=2, seq=8192)
    full = project("TPU v7", "llama3-8b", "train", 64, remat="full", **kw)
    minimal = project("TPU v7", "llama3-8b", "train", 64, remat="minimal", **kw)
    assert full.extra["time_breakdown_s"]["recompute"] > minimal.extra["time_breakdown_s"]["recompute"] > 0
    assert full.tokens_per_s_per_chip < minimal.tokens_per_s_per_chip and full.mfu < minimal.mfu
    auto = project("TPU v7", "llama3-70b", "train", 64, batch=4, seq=8192)
    assert auto.extra["fits_in_hbm"] and auto.extra["remat"] != "none"


def test_async_collectives_take_the_tensor_parallel_gathers_off_the_critical_path():
    kw = dict(layout="dp=1,fsdp=16,tp=16", batch=1, seq=2048, remat="full")
    crit = project("TPU v5e", "llama3-70b", "train", 256, **kw)
    hidden = project("TPU v5e", "llama3-70b", "train", 256, async_collectives=("all_gather",), **kw)
    assert hidden.extra["exposed_comm_s"] < crit.extra["exposed_comm_s"]
    assert hidden.extra["comm_overlap"]["tp_all_gather"].startswith("async")
    assert crit.extra["comm_overlap"]["tp_reduce_scatter"] == "critical path"


def test_former_assumption_names_are_still_accepted():
    a = Assumptions(compute_efficiency=0.4, scaleout_gbps_per_chip=25)
    assert a.gemm_efficiency == 0.4 and a.scaleout_gbytes_per_s_per_chip == 25
    assert a.compute_efficiency == 0.4 and a.scaleout_gbps_per_chip == 25
    assert "compute_efficiency" not in a.to_dict()


def test_grouped_matmul_kernel_tiles_pad_small_experts_and_ragged_rows():
    from tpu_workbench.bench.projection.work import grouped_fill

    # Qwen3-MoE's 1536-wide experts on MaxText's default 1024-wide gmm tiles: padded to 2048 (3/4 useful),
    # and each expert's 4096 rows end in a half-full 512-row tile on average
    assert grouped_fill(4096, 4096, 1536, 256, (512, 1024, 1024)) == pytest.approx(0.75 * 4096 / 4352)
    # Mixtral's 14336-wide experts fill the same tiles exactly
    assert grouped_fill(36864, 4096, 14336, 128, (512, 1024, 1024)) == pytest.approx(36864 / 37120)
    # no kernel tiles stated: only the MXU tile, as for a dense matmul
    assert grouped_fill(4096, 4096, 1536, 256, None) == 1.0


def test_a_grouped_matmul_tile_slows_a_fine_grained_moe_and_is_recorded():
    kw = dict(batch=16, seq=4096, remat="full", attn_block=1024)
    plain = project("TPU v7", "qwen3-235b-a22b", "train", 256, "fsdp", **kw)
    tiled = project("TPU v7", "qwen3-235b-a22b", "train", 256, "fsdp", gmm_tile=(512, 1024, 1024), **kw)
    assert tiled.tokens_per_s_per_chip < 0.9 * plain.tokens_per_s_per_chip
    assert tiled.source["inputs"]["named"]["moe_gmm_tile"]["value"] == [512, 1024, 1024]
