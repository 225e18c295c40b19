"""Writing rows and blocks into a big "tpu" tensor (a replay buffer filled step by step): the same values as on
the CPU, no program per row, and no old version of the buffer kept alive by a cached program (held-out 17:
DRL-Pytorch's DQN grew 30 MB a step until the kernel killed it)."""

from __future__ import annotations

import gc

import jax
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tpu_workbench.backend import tensor as tpu_tensor


@st.composite
def block_writes(draw: st.DrawFn) -> tuple[tuple[int, ...], list]:
    """A shape and an index of selects and unit-step slices (what `buf[i] = row`, `buf[a:b, j] = x` make)."""
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    index: list = []
    for n in shape[: draw(st.integers(1, len(shape)))]:
        if draw(st.booleans()):
            index.append(draw(st.integers(-n, n - 1)))
        else:
            a = draw(st.integers(-n - 1, n + 1))
            b = draw(st.integers(-n - 1, n + 1))
            index.append(slice(a, b))
    return shape, index


@settings(max_examples=60, deadline=None)
@given(
    case=block_writes(), dtype=st.sampled_from([torch.float32, torch.int64, torch.bool]), scalar=st.booleans()
)
def test_a_block_write_matches_the_cpu(case: tuple, dtype: torch.dtype, scalar: bool) -> None:
    shape, index = case
    base = torch.arange(int(torch.tensor(shape).prod())).reshape(shape).to(dtype)
    cpu, tpu = base.clone(), base.clone().to("tpu")
    region = cpu[tuple(index)]
    value = (
        torch.tensor(7).to(dtype) if scalar else (torch.arange(region.numel()) * 3 + 1).reshape(region.shape)
    )
    cpu[tuple(index)] = value.to(dtype)
    tpu[tuple(index)] = value.to(dtype).to("tpu")
    assert torch.equal(cpu, tpu.cpu())


def test_writing_row_after_row_builds_no_program_per_row() -> None:
    buf = torch.zeros((1000, 4), device="tpu")
    before = len(tpu_tensor._SCATTER_THROUGH.cache)
    for i in range(50):
        buf[i] = torch.full((4,), float(i), device="tpu")
    assert len(tpu_tensor._SCATTER_THROUGH.cache) == before
    assert buf[:50, 0].cpu().tolist() == [float(i) for i in range(50)]


def test_cached_programs_keep_no_old_buffer_alive() -> None:
    """Two buffers written in turn, through a strided view (the generic scatter path, cached per signature)."""
    n = 100_003  # a size no other test allocates
    a, b = torch.zeros((n, 2), device="tpu"), torch.zeros((n, 2), device="tpu")
    for i in range(6):
        a[::2][i] = torch.ones(2, device="tpu")  # a step-2 slice: not a block, written by the scatter program
        b[::2][i] = torch.ones(2, device="tpu")
    gc.collect()
    alive = [x for x in jax.live_arrays() if x.shape == (n, 2)]
    assert len(alive) == 2  # the two buffers' current values, nothing older


def test_first_device_use_leaves_the_random_streams_as_they_were() -> None:
    """JAX draws from NumPy's global generator while it imports; the first "tpu" op imports it: a program that
    seeded NumPy, then touched the device, drew other numbers than on the CPU (held-out 18: torchdiffeq)."""
    import subprocess
    import sys

    code = (
        "import random, numpy, torch\nnumpy.random.seed(0); random.seed(0)\n"
        "(torch.ones(3).to('tpu') * 2).cpu()\nprint(numpy.random.rand(), random.random())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-1500:]
    np_value, py_value = map(float, out.stdout.split())
    assert (np_value, py_value) == (0.5488135039273248, 0.8444218515250481)  # the seeds' first draws
