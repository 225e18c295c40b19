"""FP8 training quantizes the linears only: attention runs at the bf16 peak (torchtitan Float8, Transformer
Engine), so its share of the fp8 peak is bf16/fp8; bf16 training and fp8 serving are unchanged."""

from __future__ import annotations

import pytest

from tpu_workbench.bench.catalog import load_catalog
from tpu_workbench.bench.errors import WorkbenchError
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
def test_fp8_inference_keeps_its_attention_efficiency(phase):
    assert _eff(phase, "fp8") == pytest.approx(0.35)


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
