"""FP8 training quantizes the linears only: attention runs at the bf16 peak (torchtitan Float8, Transformer
Engine), so its share of the fp8 peak is bf16/fp8; so does fp8 serving on TPU (vLLM TPU's bf16 queries); bf16
training and fp8 serving on GPUs are unchanged."""

from __future__ import annotations

import pytest

from tpu_workbench.bench.catalog import load_catalog
from tpu_workbench.bench.errors import WorkbenchError
from tpu_workbench.bench.projection import project
from tpu_workbench.bench.projection.assumptions import Assumptions
from tpu_workbench.bench.projection.spec import Deployment, Kernels, Workload, resolve


def _eff(phase: str, precision: str, chip: str = "H100 SXM") -> float:
    s = resolve(
        Workload("llama3-8b", phase, 1, 8192),
        Deployment(chip, 8, "fsdp=8" if phase == "train" else "tp=8", precision=precision),
        Kernels(attention_efficiency=0.35),
    )
    return s.eff["attention"]


def test_fp8_training_attention_runs_at_the_bf16_peak():
    c = load_catalog().chip("H100 SXM")
    assert _eff("train", "fp8") == pytest.approx(
        0.35 * c.peak("bf16", per="chip") / c.peak("fp8", per="chip")
    )
    assert _eff("train", "bf16") == pytest.approx(0.35)


@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_fp8_inference_keeps_its_attention_efficiency_on_gpus(phase):
    assert _eff(phase, "fp8") == pytest.approx(0.35)


@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_fp8_serving_on_tpu_runs_attention_at_the_bf16_peak(phase):
    """vLLM TPU keeps the query in bf16 beside an fp8 KV cache (tpu-inference@b8692ff: q_scale None), so a fp8
    deployment's attention matmuls reach bf16/fp8 of the fp8 peak; bf16 serving is unchanged."""
    c = load_catalog().chip("TPU v7")
    assert _eff(phase, "fp8", "TPU v7") == pytest.approx(
        0.35 * c.peak("bf16", per="chip") / c.peak("fp8", per="chip")
    )
    assert _eff(phase, "bf16", "TPU v7") == pytest.approx(0.35)


def test_attention_backward_relative_slows_only_the_attention_backward():
    """FlashAttention-2 runs its backward at ~2/3 of its forward rate (attention_backward_relative): the
    backward's attention time grows by 1/relative, the forward and every other kernel stay."""

    def run(rel):
        return project(
            "H100 SXM",
            "llama3-8b",
            "train",
            8,
            "fsdp=8",
            batch=1,
            seq=32768,
            remat="full",
            attention_efficiency=0.35,
            attention_backward_relative=rel,
        ).extra["time_breakdown_s"]

    base, slow = run(None), run(0.5)
    assert slow["forward"] == base["forward"] and slow["recompute"] == base["recompute"]
    assert base["backward"] < slow["backward"] < 2 * base["backward"]
    assert run(1.0) == base


def test_fp8_training_keeps_bf16_activations_serving_does_not():
    """Float8/TE/MaxText fp8 training quantizes the linears only: activations stay 2 bytes; fp8 serving (W8A8)
    keeps 1-byte activations."""

    def nb(phase):
        return resolve(
            Workload("llama3-8b", phase, 1, 8192),
            Deployment("H100 SXM", 8, "fsdp=8" if phase == "train" else "tp=8", precision="fp8"),
            Kernels(),
        ).nb

    assert nb("train") == 2.0 and nb("prefill") == 1.0 and nb("decode") == 1.0


@pytest.mark.parametrize("rel", [0.0, -0.5, 1.5])
def test_attention_backward_relative_outside_zero_one_is_refused(rel):
    with pytest.raises(WorkbenchError, match="attention_backward_relative"):
        project(
            "H100 SXM", "llama3-8b", "train", 8, "fsdp=8", batch=1, seq=4096, attention_backward_relative=rel
        )


def _rel_eff(precision: str, a: Assumptions) -> float:
    s = resolve(
        Workload("llama3-8b", "train", 1, 8192),
        Deployment("H100 SXM", 8, "fsdp=8", precision=precision),
        Kernels(),
        a,
    )
    return s.eff["attention"]


def test_relative_attention_follows_the_gemm_efficiency():
    """attention_relative scales with the (fitted) GEMM efficiency: a power cap that slows the GEMMs slows
    the attention kernel alike (FlashAttention-2: 35 % of the H100 peak where GEMMs reach 80-90 %)."""
    lo, hi = (_rel_eff("bf16", Assumptions(gemm_efficiency=e, attention_relative=0.41)) for e in (0.4, 0.8))
    assert lo == pytest.approx(0.4 * 0.41) and hi == pytest.approx(2 * lo)


def test_fp8_attention_is_relative_to_the_bf16_gemms_not_the_fp8_ones():
    c = load_catalog().chip("H100 SXM")
    share = c.peak("bf16", per="chip") / c.peak("fp8", per="chip")
    a = Assumptions(gemm_efficiency=0.3, attention_relative=0.41, attention_gemm_efficiency=0.5)
    assert _rel_eff("fp8", a) == pytest.approx(0.5 * 0.41 * share)
    # without a bf16 reference the fp8 GEMM efficiency is the reference (the former behaviour)
    assert _rel_eff("fp8", a.with_(attention_gemm_efficiency=None)) == pytest.approx(0.3 * 0.41 * share)
    with pytest.raises(WorkbenchError):
        Assumptions(attention_gemm_efficiency=1.5)


def test_float8_tensor_parallel_gathers_one_byte_and_reduces_in_bf16():
    """torchao's float8 TP casts before the all-gathers (forward and backward) and reduce-scatters bf16:
    tp_gather_bytes=1 halves the all-gather time and leaves the reduce-scatter; with both on the critical
    path (2D without AsyncTP) the step shortens by that half."""
    kw = dict(batch=2, seq=8192, remat="full", precision="fp8")
    plain = project("H100", "llama3-70b", "train", 256, "fsdp=32,tp=8", **kw)
    cast = project("H100", "llama3-70b", "train", 256, "fsdp=32,tp=8", tp_gather_bytes=1, **kw)
    cp, cc = plain.extra["comm_breakdown_s"], cast.extra["comm_breakdown_s"]
    assert cc["tp_all_gather"] == pytest.approx(cp["tp_all_gather"] / 2, rel=0.01)
    assert cc["tp_reduce_scatter"] == pytest.approx(cp["tp_reduce_scatter"])
    saved = plain.extra["time_breakdown_s"]["critical_comm"] - cast.extra["time_breakdown_s"]["critical_comm"]
    assert saved == pytest.approx(cp["tp_all_gather"] / 2, rel=0.01)
    assert cast.tokens_per_s_per_chip > plain.tokens_per_s_per_chip
    assert cast.source["inputs"]["named"]["tp_gather_bytes"]["value"] == 1


def test_every_row_with_float8_tp_gathers_is_float8_torchtitan_and_names_its_source():
    from tpu_workbench.bench.projection.calibration import training_points

    marked = [p for p in training_points() if p["setting"].get("tp_gather_bytes") is not None]
    assert {p["id"] for p in marked} >= {"torchtitan-h100-llama3.1-70b-256-2d"}
    for p in marked:
        st = p["setting"]
        assert st["precision"] == "fp8" and st["framework"].startswith("torchtitan"), p["id"]
        assert "torchao@" in st["tp_gather_basis"] and "tp=" in st["layout"], p["id"]


@pytest.mark.parametrize("bad", [0, -1.0])
def test_a_non_positive_tp_gather_width_is_refused(bad):
    with pytest.raises(WorkbenchError, match="tp_gather_bytes"):
        project("H100", "llama3-70b", "train", 256, "fsdp=32,tp=8", batch=2, seq=8192, tp_gather_bytes=bad)
