"""Pipeline (1F1B, interleaved) and context parallelism in training projections: the bubble, the stage
memory, the ring-attention traffic, and refusals for what is not modelled."""

from __future__ import annotations

import pytest

from tpu_workbench.bench.errors import WorkbenchError
from tpu_workbench.bench.projection import project
from tpu_workbench.bench.projection.assumptions import Assumptions
from tpu_workbench.bench.projection.layout import Layout


def _train(layout: str, n: int = 64, batch: float = 0.5, model: str = "llama3-70b", chip: str = "H100 SXM"):
    return project(chip, model, "train", n, layout, batch=batch, seq=8192)


def test_no_pipeline_no_context_is_the_old_projection():
    a, b = _train("fsdp=8,tp=8"), _train("fsdp=8,tp=8,pp=1,cp=1")
    assert a.tokens_per_s_per_chip == b.tokens_per_s_per_chip and a.extra[
        "memory_per_chip_gb"
    ] == pytest.approx(b.extra["memory_per_chip_gb"])
    assert (
        "pipeline_bubble" not in a.extra["time_breakdown_s"]
        and "cp_kv_ring" not in a.extra["comm_breakdown_s"]
    )


@pytest.mark.parametrize("vpp,micro", [(1, 0), (2, 0), (1, 32), (2, 32)])
def test_bubble_is_pp_minus_one_over_vpp_times_microbatches(vpp, micro):
    lay = f"fsdp=2,tp=8,pp=4,vpp={vpp},microbatches={micro}"
    r = _train(lay)
    t = r.extra["time_breakdown_s"]
    m = micro or round(0.5 * 4 * 8)  # one sequence each: batch x pp x tp
    busy = sum(v for k, v in t.items() if k in ("forward", "backward", "recompute", "loss"))
    assert t["pipeline_imbalance"] == 0.0  # 80 layers split evenly
    assert t["pipeline_bubble"] == pytest.approx(3 / (vpp * m) * busy)
    assert Layout(fsdp=2, tp=8, pp=4, vpp=vpp, microbatches=micro).bubble_fraction(0.5) == pytest.approx(
        3 / (vpp * m)
    )


def test_interleaving_and_more_microbatches_shrink_the_bubble():
    plain, inter = _train("fsdp=2,tp=8,pp=4"), _train("fsdp=2,tp=8,pp=4,vpp=2")
    many = _train("fsdp=2,tp=8,pp=4,microbatches=128")
    assert plain.tokens_per_s_per_chip < inter.tokens_per_s_per_chip
    assert plain.tokens_per_s_per_chip < many.tokens_per_s_per_chip
    assert inter.extra["comm_breakdown_s"]["pp_send_recv"] == pytest.approx(
        2 * plain.extra["comm_breakdown_s"]["pp_send_recv"], rel=0.01
    )  # an interleaved chip sends each micro-batch vpp times


def test_a_stage_holds_one_pp_th_of_the_weights_and_optimizer():
    flat = _train("fsdp=8,tp=8").extra["memory_breakdown_gb"]["weights_grads_optimizer"]
    staged = _train("fsdp=2,tp=8,pp=4").extra["memory_breakdown_gb"]["weights_grads_optimizer"]
    # fsdp=8 shards over 8 x tp; the pipeline over 2 x tp x 4 stages: the same 64-way split
    assert staged == pytest.approx(flat, rel=1e-9)
    assert _train("fsdp=1,tp=8,pp=8").extra["memory_breakdown_gb"][
        "weights_grads_optimizer"
    ] == pytest.approx(flat, rel=1e-9)


def test_uneven_stages_cost_the_slowest_stage():
    assert Layout(pp=8).stage_imbalance(126) == pytest.approx(128 / 126)
    assert Layout(pp=8).stage_imbalance(128) == 1.0
    assert Layout().stage_imbalance(126) == 1.0


def test_context_parallelism_adds_the_key_value_ring_and_grows_with_cp():
    def ring(cp):
        r = project("TPU v7", "llama3-70b", "train", 256, f"fsdp=256,cp={cp}", batch=0.125, seq=131072)
        return r.extra["comm_breakdown_s"].get("cp_kv_ring", 0.0)

    assert ring(1) == 0.0 < ring(2) < ring(8)


def _torch_cp(cp: int, ring: str = "torch"):
    return project(
        "H100 SXM",
        "llama3-8b",
        "train",
        8,
        f"fsdp=8,cp={cp}",
        batch=1 / cp,
        seq=32768 * cp,
        remat="full",
        ring_attention=ring,
    )


def test_torch_ring_attention_merges_cost_hbm_passes_per_ring_step():
    """PyTorch's context_parallel merges each ring step's SDPA output in eager fp32 ops: HBM time that grows
    with the ring steps (cp - 1) at a fixed local sequence, absent from the all-gather (XLA) attention and
    at cp = 1."""
    merge = {cp: _torch_cp(cp).extra["time_breakdown_s"].get("cp_ring_merge", 0.0) for cp in (1, 2, 4, 8)}
    assert merge[1] == 0.0 < merge[2] < merge[4] < merge[8]
    # per ring step the same work: the growth is linear in cp - 1 past the fixed part
    assert merge[8] - merge[4] == pytest.approx((merge[4] - merge[2]) * 2, rel=1e-6)
    assert "cp_ring_merge" not in _torch_cp(4, "allgather").extra["time_breakdown_s"]
    assert _torch_cp(4).tokens_per_s_per_chip < _torch_cp(4, "allgather").tokens_per_s_per_chip


def test_torch_ring_gathers_the_repeated_kv_heads():
    """torchtitan repeats the KV heads to all query heads before SDPA, so its ring moves n_heads / n_kv_heads
    (4 for Llama 3 8B) times the all-gather ring's keys and values, plus the fp32 dK/dV each step."""
    torch_ring = _torch_cp(8).extra["comm_breakdown_s"]["cp_kv_ring"]
    xla_ring = _torch_cp(8, "allgather").extra["comm_breakdown_s"]["cp_kv_ring"]
    assert torch_ring > 4 * xla_ring


def test_unknown_ring_attention_is_refused():
    with pytest.raises(WorkbenchError, match="ring attention"):
        _torch_cp(2, "ulysses")


@pytest.mark.parametrize(
    "phase,layout,n",
    [
        ("decode", "tp=4,pp=2", 8),
        ("prefill", "fsdp=4,cp=2", 4),
        ("train", "pp=128", 128),
        ("train", "fsdp=3,cp=2", 3),
    ],
)
def test_refused_settings(phase, layout, n):
    with pytest.raises(WorkbenchError):
        project("H100 SXM", "llama3-8b", phase, n, layout, batch=1, seq=1024)


def test_published_pipeline_and_context_points_are_validated_not_unanchored():
    from tpu_workbench.bench.projection.calibration import vs_published

    t = vs_published()
    pp = t[t["id"].astype(str).str.contains("405b-512")]
    assert len(pp) == 6 and set(pp["category"]) == {"validation (assumed setting)"}
    by = dict(zip(pp["id"], pp["projected"], strict=True))
    # torchtitan Table 5: interleaved 1F1B is 128/100 = 1.28x the plain schedule; the bubble model gives the same
    ratio = by["torchtitan-h100-llama3.1-405b-512-i1f1b"] / by["torchtitan-h100-llama3.1-405b-512-1f1b"]
    assert ratio == pytest.approx(1.28, rel=0.05)


def test_gradients_are_reduced_in_fp32_whatever_the_weight_precision():
    """MaxText (grad_dtype float32) and torchtitan (FSDP2 reduce_dtype float32) reduce gradients in fp32: the
    data-parallel gradient traffic is the same for bf16 and fp8 weights, while the weight gathers halve."""

    def comm(precision):
        r = project(
            "TPU v5p", "llama3-8b", "train", 512, "fsdp", batch=1, seq=4096, precision=precision, slices=2
        )
        return r.extra["comm_breakdown_s"]

    bf16, fp8 = comm("bf16"), comm("fp8")
    dcn = "dp_allreduce_across_slices_dcn"
    assert bf16[dcn] > 0 and fp8[dcn] == pytest.approx(bf16[dcn], rel=0.02)
    # FSDP: 2 gathers at the weights' width + 1 reduce-scatter in fp32: (2 x 2 + 4) / (2 x 1 + 4) for bf16 / fp8
    assert bf16["fsdp_gather"] / fp8["fsdp_gather"] == pytest.approx(2, rel=0.05)
    rs = "fsdp_grad_reduce_scatter"
    assert bf16[rs] == pytest.approx(fp8[rs], rel=0.02) and bf16[rs] / bf16["fsdp_gather"] == pytest.approx(
        1.0
    )


def test_torch_ring_all_gather_is_hidden_only_by_the_first_ring_step():
    """PyTorch's ALL_GATHER rotater waits for the whole K/V gather at ring step 1: only step 0's attention hides
    it. Inside an NVLink node that suffices; a cp ring over the scale-out network (tp = 8 fills the node) leaves
    part of it on the critical path, more as cp grows."""

    def exposed(cp, tp):
        n = 8 * tp  # cp groups split the fsdp chips
        r = project(
            "H100 SXM",
            "llama3-70b",
            "train",
            n,
            f"fsdp=8,tp={tp},cp={cp}",
            batch=1 / cp,
            seq=32768 * cp,
            remat="full",
            ring_attention="torch",
            require_fit=False,
        )
        return r.extra["comm_breakdown_s"].get("cp_kv_ring_exposed", 0.0)

    assert exposed(4, 1) == 0.0
    assert 0.0 < exposed(4, 8) < exposed(8, 8)


def test_a_gradient_reduce_scatter_the_flags_do_not_overlap_is_on_the_critical_path():
    """grad_reduce_async=False (XLA flags with neither data-parallel pipelining nor a SparseCore reduce-scatter)
    moves the FSDP gradient reduce-scatter from the hidden to the exposed communication: a comm-heavy FSDP
    step (few tokens per chip) slows by about that time; the gathers stay hidden."""
    kw = dict(batch=2, seq=4096, remat="full")
    hidden = project("TPU v6e", "llama3-70b", "train", 256, "fsdp", **kw)
    blocking = project("TPU v6e", "llama3-70b", "train", 256, "fsdp", grad_reduce_async=False, **kw)
    rs = "fsdp_grad_reduce_scatter"
    assert blocking.extra["comm_overlap"][rs] == "critical path"
    assert hidden.extra["comm_overlap"][rs].startswith("async")
    assert blocking.extra["comm_overlap"]["fsdp_gather"].startswith("async")
    t_rs = blocking.extra["comm_breakdown_s"][rs]
    assert t_rs > 0
    tb, th = blocking.extra["time_breakdown_s"], hidden.extra["time_breakdown_s"]
    assert tb["critical_comm"] - th["critical_comm"] == pytest.approx(t_rs)
    assert tb["async_exposed"] == th["async_exposed"] == 0.0  # the gathers hide either way
    assert tb["step"] - th["step"] == pytest.approx(t_rs * (1 - Assumptions().critical_overlap), rel=0.1)


def test_every_row_with_a_blocking_gradient_reduce_scatter_names_its_flags():
    """A published setting marked grad_reduce_async false says which flags (repo@commit) leave it blocking."""
    from tpu_workbench.bench.projection.calibration import training_points

    points = training_points()
    assert all(isinstance(p["setting"].get("grad_reduce_async", True), bool) for p in points)
    marked = [p for p in points if p["setting"].get("grad_reduce_async") is False]
    assert {p["id"] for p in marked} >= {"maxtext-v6e-llama2-70b-256"}
    for p in marked:
        basis = p["setting"]["grad_reduce_basis"]
        assert "DATA_PARALLEL_OVERLAP" in basis and "@" in basis, p["id"]
