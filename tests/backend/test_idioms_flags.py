"""The torch.backends / precision / determinism switches GPU scripts set at the top: setting them must not
break a "tpu" training step, and results must equal the run without them (float32 on XLA:CPU)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch
import torch.nn.functional as F
from idioms.tiny import TinyMLP, train_losses, vector_batches
from torch.nn.attention import SDPBackend, sdpa_kernel


def _step_losses() -> list[float]:
    torch.manual_seed(0)
    model = TinyMLP().to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    return train_losses(model, opt, vector_batches(2))


@contextmanager
def _gpu_script_flags() -> Iterator[None]:
    """What the top of a typical CUDA training script sets, restored afterwards. The cuDNN switches go
    through ``cudnn.flags()``: torch's own test utilities (OpInfo, run earlier in the same worker) freeze
    plain assignment to them for the rest of the process."""
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.get_float32_matmul_precision(),
             torch.backends.cuda.flash_sdp_enabled(), torch.backends.cuda.mem_efficient_sdp_enabled(),
             torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction)  # fmt: skip
    cudnn = torch.backends.cudnn.flags(enabled=torch.backends.cudnn.enabled, benchmark=True, deterministic=True,
                                       allow_tf32=True)  # fmt: skip
    cudnn.__enter__()
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.set_float32_matmul_precision("high")
    torch.backends.cuda.enable_flash_sdp(True)
    torch.backends.cuda.enable_mem_efficient_sdp(False)
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True
    try:
        yield
    finally:
        cudnn.__exit__(None, None, None)
        torch.backends.cuda.matmul.allow_tf32 = saved[0]
        torch.set_float32_matmul_precision(saved[1])
        torch.backends.cuda.enable_flash_sdp(saved[2])
        torch.backends.cuda.enable_mem_efficient_sdp(saved[3])
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = saved[4]


def test_gpu_script_flags_leave_training_unchanged() -> None:
    want = _step_losses()
    with _gpu_script_flags():
        got = _step_losses()
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=1e-6, atol=1e-6)


def test_deterministic_algorithms_allow_the_usual_training_ops() -> None:
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    want = _step_losses()
    torch.use_deterministic_algorithms(True)
    try:
        got = _step_losses()
        emb = torch.nn.Embedding(6, 3).to("tpu")  # embedding backward and index_add_ are scatter-adds
        emb(torch.tensor([1, 1, 4], device="tpu")).sum().backward()
        acc = torch.zeros(3, device="tpu").index_add_(0, torch.tensor([0, 0, 2], device="tpu"),
                                                      torch.ones(3, device="tpu"))  # fmt: skip
    finally:
        torch.use_deterministic_algorithms(False)
    assert got == want
    assert emb.weight.grad.cpu()[1].tolist() == [2.0, 2.0, 2.0]
    assert acc.cpu().tolist() == [2.0, 0.0, 1.0]


@pytest.mark.parametrize("kernel", [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH,
                                    [SDPBackend.FLASH_ATTENTION, SDPBackend.MATH]])  # fmt: skip
def test_sdpa_kernel_choice_does_not_change_attention(kernel) -> None:
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 2, 5, 8) for _ in range(3))
    want = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    with sdpa_kernel(kernel):
        got = F.scaled_dot_product_attention(q.to("tpu"), k.to("tpu"), v.to("tpu"), is_causal=True)
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-6)


def test_anomaly_detection_runs_a_step() -> None:
    with torch.autograd.set_detect_anomaly(True):
        model = TinyMLP().to("tpu")
        x, y = (t.to("tpu") for t in vector_batches(1)[0])
        model(x, y)[1].backward()
    assert all(p.grad is not None for p in model.parameters())


def test_matmul_precision_settings_are_accepted() -> None:
    a, b = torch.randn(8, 8), torch.randn(8, 8)
    before = torch.get_float32_matmul_precision()
    try:
        for setting in ("highest", "high", "medium"):
            torch.set_float32_matmul_precision(setting)
            got = (a.to("tpu") @ b.to("tpu")).cpu()
            torch.testing.assert_close(got, a @ b, rtol=1e-2 if setting == "medium" else 1e-5, atol=1e-2)
    finally:
        torch.set_float32_matmul_precision(before)
