"""Edge values the differential fuzz found, each checked against the CPU: complex arithmetic at inf/NaN/signed
zero (glibc's cexp/clog/cpow, c10's division and naive product), sign of NaN, integer pow that wraps,
convolution padding meeting a non-finite weight, float16/bfloat16 transcendental ops computed in float32,
float16 x complex typed complex32 (refused: the device holds no complex32)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

_C = [0.0, -0.0, 1.5, -2.0, math.inf, -math.inf, math.nan]
Z = torch.tensor([complex(a, b) for a in _C for b in _C], dtype=torch.complex64)
W = torch.tensor([0.5 + 0.3j, 2 + 0j, -1 + 1j, 0j], dtype=torch.complex64)


def _same(cpu: torch.Tensor, tpu: torch.Tensor) -> None:
    tpu = tpu.cpu()
    assert tpu.dtype == cpu.dtype and tpu.shape == cpu.shape
    bad = ~torch.isclose(tpu, cpu, equal_nan=True)
    assert not bad.any(), [
        (i.tolist(), cpu[tuple(i)].item(), tpu[tuple(i)].item()) for i in bad.nonzero()[:5]
    ]


COMPLEX_CASES = {
    "exp": torch.exp,
    "exp2": torch.exp2,
    "sigmoid": torch.sigmoid,
    "reciprocal": torch.reciprocal,
    "abs": torch.abs,
    "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt,
    "expm1": torch.expm1,
    "tanh": torch.tanh,
    "sin": torch.sin,
    "log1p": torch.log1p,
    "log": torch.log,
    "div_zw": lambda z, w: z[:, None] / w[None],
    "div_wz": lambda z, w: w[None] / z[:, None],
    "pow_zw": lambda z, w: torch.pow(z[:, None], w[None]),
    "pow_wz": lambda z, w: torch.pow(w[None], z[:, None]),
    "pow_scalar": lambda z, w: torch.stack([z**e for e in (0, 1, 2, 3, -1, -2, 0.5, 1.5)]),
    "mul": lambda z, w: z[:, None] * w[None],
    "add": lambda z, w: z[:, None] + w[None],
    "sub": lambda z, w: w[None] - z[:, None],
    "add_alpha": lambda z, w: torch.add(w[None], z[:, None], alpha=2),
    "add_half": lambda z, w: torch.ones(len(z), dtype=torch.float16, device=z.device) + z,
    "prod_one": lambda z, w: z[None].prod(0),
    "prod_two": lambda z, w: torch.stack([z, torch.full_like(z, 2 + 1j)]).prod(0),
}


@pytest.mark.parametrize("name", sorted(COMPLEX_CASES))
def test_complex_edge_values_match_the_cpu(name):
    fn = COMPLEX_CASES[name]
    args = (Z, W)[: getattr(getattr(fn, "__code__", None), "co_argcount", 1)]
    _same(fn(*args), fn(*(a.to("tpu") for a in args)))


def test_sign_of_nan_is_zero_as_on_the_cpu():
    for dt in (torch.float32, torch.float16, torch.bfloat16):
        x = torch.tensor([math.nan, -0.0, 2.0, -math.inf], dtype=dt)
        assert torch.equal(torch.sign(x.to("tpu")).cpu(), torch.sign(x))


def test_integer_pow_wraps_like_the_cpu():
    b = torch.tensor([3, -5, 7, 2, -1, 0, 1], dtype=torch.int64)
    e = torch.tensor([40, 63, 100, 64, 1001, 5, 2**40], dtype=torch.int64)
    assert torch.equal(torch.pow(b.to("tpu"), e.to("tpu")).cpu(), torch.pow(b, e))
    b32, e32 = b.to(torch.int32), torch.tensor([40, 63, 100, 31, 7, 5, 99], dtype=torch.int32)
    assert torch.equal(torch.pow(b32.to("tpu"), e32.to("tpu")).cpu(), torch.pow(b32, e32))


def test_conv_padding_meeting_a_nonfinite_weight_gives_nan_as_the_native_cpu_path_does():
    """torch's native CPU convolution multiplies the zero padding (0 * NaN = NaN), for one sample or a batch;
    oneDNN's batched path skips it (a number for the same sample): the CPU is not self-consistent, "tpu" follows
    the native path (and the single-sample oneDNN path the fuzz draws)."""
    x = torch.randn(2, 2, 1, generator=torch.Generator().manual_seed(0))
    w = torch.randn(3, 2, 3, generator=torch.Generator().manual_seed(1))
    w[1, 0, 0] = math.nan
    with torch.backends.mkldnn.flags(enabled=False):
        native = F.conv1d(x, w, padding=1)
    assert native[:, 1].isnan().all()
    assert F.conv1d(x, w, padding=1)[0, 1].isfinite().all()  # oneDNN, batched: the padding skipped
    _same(native, F.conv1d(x.to("tpu"), w.to("tpu"), padding=1))
    _same(F.conv1d(x[:1], w, padding=1), F.conv1d(x[:1].to("tpu"), w.to("tpu"), padding=1))
    w[1, 0, 0] = 0.5  # finite weights: the plain path
    _same(F.conv1d(x, w, padding=1), F.conv1d(x.to("tpu"), w.to("tpu"), padding=1))


def test_low_precision_exp2_rounds_the_float32_value_once():
    x = torch.linspace(-120, 120, 97)
    for dt in (torch.bfloat16, torch.float16):
        cpu, tpu = torch.exp2(x.to(dt)), torch.exp2(x.to(dt).to("tpu")).cpu()
        assert torch.equal(tpu, cpu)


def test_float16_times_a_complex_tensor_is_complex32_which_the_device_refuses():
    h, z = torch.ones(3, dtype=torch.float16), torch.tensor(1 + 1j)
    assert (h * z).dtype == torch.complex32
    with pytest.raises(RuntimeError, match="complex32"):
        h.to("tpu") * z.to("tpu")
    assert (
        torch.ones(3, dtype=torch.float32).to("tpu") * torch.tensor(1j, dtype=torch.complex128).to("tpu")
    ).dtype == (torch.ones(3) * torch.tensor(1j, dtype=torch.complex128)).dtype


def test_pow_of_booleans_and_a_float16_exponent_overflow_match_the_cpu():
    b = torch.tensor([True, False])
    for e in (True, False):
        assert torch.equal(b.to("tpu").pow(e).cpu(), b.pow(e))
        assert torch.equal(b.clone().to("tpu").pow_(e).cpu(), b.clone().pow_(e))
    h = torch.ones(2, dtype=torch.float16)
    with pytest.raises(RuntimeError, match="Half without overflow"):
        h.pow(1e30)
    with pytest.raises(RuntimeError, match="Half without overflow"):
        h.to("tpu").pow(1e30)
    assert torch.equal(h.to("tpu").pow(2.5).cpu(), h.pow(2.5))


def test_division_of_booleans_gives_nan_for_false_by_false_as_on_the_cpu():
    a, b = torch.tensor([False, True, False, True]), torch.tensor([False, False, True, True])
    for args in ((a, b), (a, 0), (a, torch.tensor(False))):
        cpu = torch.div(*args)
        tpu = torch.div(*(x.to("tpu") if isinstance(x, torch.Tensor) else x for x in args)).cpu()
        assert torch.equal(cpu.isnan(), tpu.isnan()) and torch.equal(cpu.nan_to_num(), tpu.nan_to_num())
