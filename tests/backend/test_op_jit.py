"""Strict eager's per-signature executables (backend/op_jit.py): what gets compiled, when, and that the answer is
the plain lowering's, bit for bit."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from tpu_workbench import backend  # noqa: F401 - registers the device
from tpu_workbench.backend import dispatch, op_jit
from tpu_workbench.backend import random as rng
from tpu_workbench.backend._jax import jax_module
from tpu_workbench.backend.ops.registry import lookup

jax = jax_module()
jnp = jax.numpy


def _entries(e: object) -> list:
    return list(e.cache.values())  # type: ignore[attr-defined]


def test_a_signature_compiles_on_its_second_sighting_and_matches_the_plain_lowering() -> None:
    fn = lookup(torch.ops.aten.add.Tensor).fn
    e = op_jit.op_jit(fn)
    a, b = jnp.arange(6.0, dtype=jnp.float32).reshape(2, 3), jnp.full((2, 3), 0.1, jnp.float32)
    first = e(a, b)
    assert _entries(e) == [op_jit._SEEN_ONCE]  # one-off calls of a one-primitive lowering pay no compile
    second = e(a, b)
    (entry,) = _entries(e)
    assert isinstance(entry, tuple)  # (lifted, executable)
    plain = fn(a, b)
    for got in (first, second, e(a, b)):
        assert got.dtype == plain.dtype and np.array_equal(np.asarray(got), np.asarray(plain))


def test_a_lowering_that_fusion_could_round_differently_runs_its_program_from_the_first_call() -> None:
    """``add(x, g, alpha=-0.1)`` (SGD's step) is a multiply feeding an add: XLA:CPU contracts them into one FMA
    inside the program, so a plain first call would round twice and differ in the last bits from later calls."""
    e = op_jit.op_jit(lookup(torch.ops.aten.add.Tensor).fn)
    g = np.random.default_rng(0)
    x, y = (jnp.asarray(g.standard_normal(4096), jnp.float32) for _ in range(2))
    first = np.asarray(e(x, y, alpha=-0.1))
    assert op_jit._SEEN_ONCE not in _entries(e)  # built at the first sighting
    assert all(np.array_equal(first, np.asarray(e(x, y, alpha=-0.1))) for _ in range(2))
    assert op_jit._fusion_free(lookup(torch.ops.aten.add.Tensor).fn, (x, y), {})
    assert not op_jit._fusion_free(lookup(torch.ops.aten.add.Tensor).fn, (x, y), {"alpha": -0.1})


def test_float_arguments_are_inputs_so_a_schedule_does_not_recompile() -> None:
    def scaled(x: object, lr: float) -> object:
        return x * lr

    e = op_jit.op_jit(scaled)
    x = jnp.ones((4,), jnp.float32)
    for lr in (0.1, 0.2, 0.3, 0.4, -0.0):
        got = e(x, lr)
        assert np.array_equal(np.asarray(got), np.asarray(scaled(x, lr)))
        assert got.dtype == jnp.float32  # a Python float stays weakly typed: no float64 promotion
    assert sum(isinstance(v, tuple) for v in _entries(e)) == 1
    assert np.signbit(np.asarray(e(x, -0.0))).all() and not np.signbit(np.asarray(e(x, 0.0))).any()


def test_a_lowering_that_branches_on_a_float_is_keyed_by_its_value() -> None:
    def clamp_or_scale(x: object, s: float) -> object:
        return x if s == 1.0 else x * s

    e = op_jit.op_jit(clamp_or_scale)
    x = jnp.arange(3.0)
    for s in (1.0, 2.0, 1.0, 2.0, 3.0):
        assert np.array_equal(np.asarray(e(x, s)), np.asarray(clamp_or_scale(x, s)))
    assert op_jit._BY_VALUE in _entries(e)


def test_host_reads_and_non_array_results_stay_plain_calls() -> None:
    def reads_host(x: object) -> object:
        return x * 2 if float(x.sum()) > 0 else x

    def shape_of(x: object) -> int:
        return x.shape[0]

    h, s = op_jit.op_jit(reads_host), op_jit.op_jit(shape_of)
    x = jnp.ones((5,))
    for _ in range(3):
        assert np.array_equal(np.asarray(h(x)), np.asarray(x * 2))
        out = s(x)
        assert out == 5 and type(out) is int  # jit would have made it an array
    assert op_jit._PLAIN in _entries(h) and op_jit._PLAIN in _entries(s)


def test_the_matmul_precision_is_part_of_the_key() -> None:
    e = op_jit.op_jit(lookup(torch.ops.aten.mm.default).fn)
    a = jnp.ones((4, 4), jnp.float32)
    before = torch.get_float32_matmul_precision()
    try:
        for p in ("highest", "high"):
            torch.set_float32_matmul_precision(p)
            e(a, a)
            e(a, a)
    finally:
        torch.set_float32_matmul_precision(before)
    assert sum(isinstance(v, tuple) for v in _entries(e)) == 2


def test_random_and_host_checking_lowerings_never_get_an_executable() -> None:
    def draws(x: object) -> object:
        return x + jax.random.uniform(rng.next_key(), x.shape, x.dtype)

    e = op_jit.op_jit(draws)
    x = jnp.zeros((3,), jnp.float32)
    a, b, c = (np.asarray(e(x)) for _ in range(3))
    assert not np.array_equal(a, b) and not np.array_equal(b, c)  # the key advanced every call
    assert op_jit._PLAIN in _entries(e)
    assert dispatch._strict_executable(lookup(torch.ops.aten.uniform_.default).fn) is None


def test_writes_through_a_view_match_the_cpu_once_compiled() -> None:
    """The second and third rounds run the cached replay and scatter executables."""
    base = torch.arange(12.0).reshape(3, 4)
    dev = base.to("tpu")
    for _ in range(3):
        view_c, view_t = base.t()[1:], dev.t()[1:]
        view_c.mul_(2).add_(1)
        view_t.mul_(2).add_(1)
        assert torch.equal(dev.cpu(), base)
        assert torch.equal(view_t.cpu(), view_c)


@pytest.mark.slow  # two child interpreters with JAX
def test_xla_cpu_runs_calls_inline_unless_jax_is_told_otherwise() -> None:
    code = (
        "import torch, backend; torch.ones(1, device='tpu'); import jax; "
        "print(jax.config._read('jax_cpu_enable_async_dispatch'))"
    )
    env = {k: v for k, v in os.environ.items() if k != "JAX_CPU_ENABLE_ASYNC_DISPATCH"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip().splitlines()[-1] == "False", out.stderr
    env["JAX_CPU_ENABLE_ASYNC_DISPATCH"] = "1"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip().splitlines()[-1] == "True", out.stderr


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_an_optimizer_loop_gives_the_same_losses_in_both_eager_modes_as_before_compiling(mode: str) -> None:
    """The first step runs plain, the second compiles, the rest hit the cache: all must give the CPU's losses."""
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    dev = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    dev.load_state_dict(cpu.state_dict())
    dev = dev.to("tpu")
    x, y = torch.randn(5, 6), torch.randn(5, 1)
    xd, yd = x.to("tpu"), y.to("tpu")
    oc = torch.optim.AdamW(cpu.parameters(), lr=0.01)
    od = torch.optim.AdamW(dev.parameters(), lr=0.01)
    em = torch.tpu.EagerMode.DEFER_AND_FUSE if mode == "fused" else torch.tpu.EagerMode.DEFER_NEVER
    with torch.tpu.set_eager_mode(em):
        for _ in range(5):
            for model, opt, a, b in ((cpu, oc, x, y), (dev, od, xd, yd)):
                opt.zero_grad()
                loss = torch.nn.functional.mse_loss(model(a), b)
                loss.backward()
                opt.step()
                if model is cpu:
                    want = loss.item()
                else:
                    assert loss.item() == pytest.approx(want, rel=1e-5)


def test_the_number_of_programs_kept_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(op_jit, "_MAX_EXECUTABLES", 3)
    monkeypatch.setattr(op_jit, "_compiled", 0)

    def double(x: object) -> object:
        return x * 2

    e = op_jit.op_jit(double)
    for n in range(1, 9):  # eight shapes, each seen twice: eight programs built, never more than three kept
        x = jnp.ones((n,), jnp.float32)
        e(x)
        assert np.array_equal(np.asarray(e(x)), np.full((n,), 2.0, np.float32))
        assert sum(isinstance(v, tuple) for v in _entries(e)) <= 3


def test_a_lowering_that_picks_its_formula_by_a_floats_value_is_not_lifted() -> None:
    """pow(z, 0.5) takes sqrt and pow(z, 2.0) a product (as ATen does); with the float traced the lowering
    would silently take the general formula (no error to catch), so the primitives are compared too."""
    fn = lookup(torch.ops.aten.pow.Tensor_Scalar).fn
    e = op_jit.op_jit(fn)
    z = jnp.asarray([complex(0, np.inf), complex(-2, -0.0), complex(1.5, 2)], jnp.complex64)
    for s in (2.0, 0.5, 2.0, 0.5, 1.5):
        got, want = np.asarray(e(z, s)), np.asarray(fn(z, s))
        assert np.array_equal(got, want, equal_nan=True), (s, got, want)
    assert op_jit._BY_VALUE in _entries(e)
