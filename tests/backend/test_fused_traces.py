"""Ops that run TPU-level code under a JAX trace (a decomposition traced into one program, a backward computed
as the vjp of its torch-level forward, a compiled graph) must not record into, or flush, fused eager's pending
graph, nor fill a cache: under a trace every JAX call gives tracers, and one kept past the trace fails later
(``UnexpectedTracerError``) or strands the pending graph (``a pending value was lost``). Found on Hugging Face
ConvBERT (unfold), EnCodec (reflect padding) and MobileViT (upsampling backward) in fused eager."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tpu_workbench.backend import state

FUSED = torch.tpu.EagerMode.DEFER_AND_FUSE


def _on_both(fn, steps: int = 4) -> None:
    """Run ``fn`` on "tpu" (fused eager) and check it against the exact answer, ``fn`` in float64 on the CPU.

    The tolerance is norm-wise: ``1e-5 × max|exact|`` per output, with no element-wise relative term. An
    element-wise ``rtol`` against a float32 CPU result failed on some machines (7.1e-6 where 1e-6 was allowed):
    a gradient element of 0.09 is the sum of terms of size ~100, and float32 rounds such a sum to ~1e-5 whatever
    the order, so two correct summation orders (XLA's dot and the host BLAS differ by machine) disagree there.
    The CPU's own float32 result must pass the same check, so the tolerance cannot drift below what a correct
    float32 computation achieves; a wrong padding or gradient is off by O(max|exact|) and still fails."""
    exact = [t.double() for t in fn("cpu", torch.float64)]
    cpu32 = fn("cpu", torch.float32)
    with torch.tpu.set_eager_mode(FUSED):
        for _ in range(steps):  # first sighting, program built, cached program
            got = fn("tpu", torch.float32)
            for g, c, e in zip(got, cpu32, exact, strict=True):
                atol = 1e-5 * e.abs().max().item()
                torch.testing.assert_close(
                    c.double(), e, rtol=0, atol=atol, msg="the CPU misses its own bound"
                )
                torch.testing.assert_close(g.double(), e, rtol=0, atol=atol)


def _weights(seed: int = 0) -> tuple:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(16, 16, generator=g), torch.randn(2, 7, 16, generator=g)


def test_unfold_of_a_pending_transposed_view() -> None:
    w, x = _weights()

    def run(dev: str, dtype: torch.dtype) -> list:
        h = (x.to(dev, dtype) @ w.to(dev, dtype)).transpose(1, 2).contiguous().unsqueeze(-1)
        return [F.unfold(h, kernel_size=[5, 1], padding=[2, 0]).cpu()]

    _on_both(run)


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
def test_padding_of_a_pending_value_forward_and_backward(mode: str) -> None:
    w, x = _weights(1)

    def run(dev: str, dtype: torch.dtype) -> list:
        xi = x.clone().to(dev, dtype).requires_grad_()
        y = F.pad((xi @ w.to(dev, dtype)).transpose(1, 2), (3, 2), mode=mode)
        (y * y).sum().backward()
        return [y.detach().cpu(), xi.grad.cpu()]

    _on_both(run)


def test_upsampling_backward_between_pending_values() -> None:
    """The upsampling backward lowering evaluates the torch-level forward on tracers (jax.vjp)."""
    g = torch.Generator().manual_seed(2)
    x, k = torch.randn(2, 3, 4, 4, generator=g), torch.randn(3, 3, 3, 3, generator=g)

    def run(dev: str, dtype: torch.dtype) -> list:
        xi = x.clone().to(dev, dtype).requires_grad_()
        h = F.conv2d(xi, k.to(dev, dtype), padding=1)
        y = F.interpolate(h, scale_factor=2, mode="bilinear", align_corners=False) + 1.0
        y.square().mean().backward()
        return [y.detach().cpu(), xi.grad.cpu()]

    _on_both(run)


def test_an_empty_host_tensor_moved_under_a_trace_is_not_cached_as_a_tracer() -> None:
    import jax

    from tpu_workbench.backend._jax import cpu_to_jax

    def traced(x):
        with state.jax_trace():
            return x + cpu_to_jax(torch.empty(0, 3)).sum()

    jax.jit(traced)(jax.numpy.ones(3))
    assert not isinstance(cpu_to_jax(torch.empty(0, 3)), jax.core.Tracer)
    assert torch.empty(0, 3).to("tpu").cpu().shape == (0, 3)
