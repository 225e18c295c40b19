"""Seeding idioms: torch.manual_seed makes device draws and whole training runs reproducible, a seeded
torch.Generator("tpu") replays its stream (and leaves the global one alone), fork_rng scopes draws."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from idioms.tiny import TinyMLP, train_losses, vector_batches


def _draws(seed: int) -> list[torch.Tensor]:
    torch.manual_seed(seed)
    x = torch.ones(64, device="tpu")
    return [t.cpu() for t in (
        torch.randn(5, device="tpu"), torch.rand(5, device="tpu"), torch.randint(0, 100, (5,), device="tpu"),
        torch.randperm(10, device="tpu"), torch.nn.functional.dropout(x, 0.5), torch.bernoulli(x * 0.3),
        torch.multinomial(torch.ones(8, device="tpu"), 4), torch.empty(5, device="tpu").normal_(),
        torch.empty(5, device="tpu").uniform_(-1, 1),
    )]  # fmt: skip


def test_manual_seed_reproduces_every_kind_of_draw() -> None:
    a, b, c = _draws(11), _draws(11), _draws(12)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert sum(not torch.equal(x, y) for x, y in zip(a, c, strict=True)) >= len(a) - 1


def _dropout_run() -> list[float]:
    torch.manual_seed(3)
    model = TinyMLP(dropout=0.3).to("tpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    return train_losses(model, opt, vector_batches(3))


def test_seeded_training_with_dropout_is_reproducible() -> None:
    assert _dropout_run() == _dropout_run()


@pytest.mark.slow
def test_the_first_seeded_run_of_a_process_equals_the_next() -> None:
    """op_jit and traced decompositions run a signature's first sighting plainly only when that gives the
    program's bits: SGD's ``add_(grad, alpha=-lr)`` and layer norm's backward (a multiply feeding an add, which
    XLA:CPU contracts into one FMA) run their programs from the first call, so a process's first seeded run
    equals its later ones, as on CUDA. Run in a fresh
    process: in this one, earlier tests may already have seen the signatures."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import torch, tpu_workbench.backend\n"
        "from test_idioms_seed import _dropout_run\n"
        "a = _dropout_run(); b = _dropout_run()\n"
        "print(a == b, a, b)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(Path(__file__).parent)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("True"), out.stdout


def test_seed_everything_helper() -> None:
    """The helper most repositories carry (random, numpy, torch, the device's own seeding call)."""

    def seed_everything(seed: int) -> None:
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)
        torch.tpu.manual_seed_all(seed)

    seed_everything(5)
    a = (random.random(), np.random.rand(), torch.randn(3, device="tpu").cpu())
    seed_everything(5)
    b = (random.random(), np.random.rand(), torch.randn(3, device="tpu").cpu())
    assert a[:2] == b[:2] and torch.equal(a[2], b[2])


def test_device_generator_replays_and_is_independent_of_the_global_stream() -> None:
    g = torch.Generator("tpu")
    assert g.device == torch.device("tpu", 0)
    g.manual_seed(42)
    assert g.initial_seed() == 42
    first = torch.randn(4, device="tpu", generator=g).cpu()
    state = g.get_state()
    second = torch.rand(4, device="tpu", generator=g).cpu()
    g.set_state(state)
    assert torch.equal(torch.rand(4, device="tpu", generator=g).cpu(), second)
    assert torch.equal(
        torch.randn(4, device="tpu", generator=torch.Generator("tpu").manual_seed(42)).cpu(), first
    )

    torch.manual_seed(0)
    want = torch.randn(4, device="tpu").cpu()
    torch.manual_seed(0)
    torch.randn(100, device="tpu", generator=torch.Generator("tpu").manual_seed(1))
    assert torch.equal(torch.randn(4, device="tpu").cpu(), want), (
        "a private generator leaves the global one alone"
    )


def test_device_generator_in_init_and_permutations() -> None:
    def draw() -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator(device="tpu").manual_seed(9)
        w = torch.empty(4, 4, device="tpu")
        torch.nn.init.normal_(w, std=0.02, generator=g)
        return w.cpu(), torch.randperm(12, device="tpu", generator=g).cpu()

    (w1, p1), (w2, p2) = draw(), draw()
    assert torch.equal(w1, w2) and torch.equal(p1, p2)
    assert sorted(p1.tolist()) == list(range(12))


def test_fork_rng_scopes_device_draws() -> None:
    torch.manual_seed(0)
    want = torch.rand(3, device="tpu").cpu()
    torch.manual_seed(0)
    with torch.random.fork_rng(device_type="tpu"):
        torch.rand(50, device="tpu")
    assert torch.equal(torch.rand(3, device="tpu").cpu(), want)


@pytest.mark.parametrize("seed", [0, 2**31 + 5])
def test_model_init_on_the_device_is_seeded(seed: int) -> None:
    def init() -> list[torch.Tensor]:
        torch.manual_seed(seed)
        with torch.device("tpu"):
            model = TinyMLP()
        return [p.detach().cpu() for p in model.parameters()]

    a, b = init(), init()
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert {p.device.type for p in TinyMLP().to("tpu").parameters()} == {"tpu"}
