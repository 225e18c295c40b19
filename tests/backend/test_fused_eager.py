"""Fused eager (EagerMode.DEFER_AND_FUSE): the same results as strict eager, one cached executable per repeating
graph, materialisation where a value is needed, strict fallback where the graph cannot be recorded."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from tpu_workbench.backend import lazy

ROOT = Path(__file__).resolve().parents[2]
FUSED = torch.tpu.EagerMode.DEFER_AND_FUSE
STRICT = torch.tpu.EagerMode.DEFER_NEVER


class Net(torch.nn.Module):
    """Linear + LayerNorm + GELU + dropout + a view and an in-place op: what a small training step touches."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(8, 16)
        self.ln = torch.nn.LayerNorm(16)
        self.b = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.dropout(F.gelu(self.ln(self.a(x))), p=0.1, training=self.training)
        h = h.view(x.shape[0], 4, 4).transpose(1, 2).reshape(x.shape[0], 16)
        h.mul_(0.5)
        return self.b(h)


def _train(mode: torch.tpu.EagerMode, steps: int, schedule: bool = True) -> list[float]:
    torch.manual_seed(0)
    model = Net().to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1 + s)) if schedule else None
    g = torch.Generator().manual_seed(1)
    data = [(torch.randn(6, 8, generator=g), torch.randint(0, 4, (6,), generator=g)) for _ in range(steps)]
    losses = []
    with torch.tpu.set_eager_mode(mode):
        for x, y in data:
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x.to("tpu")), y.to("tpu"))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            if sched is not None:
                sched.step()
            losses.append(loss.item())
    return losses


@pytest.mark.slow
def test_twenty_training_steps_match_strict_eager_and_hit_the_cache() -> None:
    strict = _train(STRICT, 20)
    lazy.reset_stats()
    fused = _train(FUSED, 20)
    worst = max(abs(a - b) / max(abs(a), 1e-12) for a, b in zip(strict, fused, strict=True))
    assert worst <= 1e-6, (worst, strict, fused)
    s = torch.tpu._get_cache_stats()["fused_eager"]
    assert s["ops_recorded"] > 600  # (views and aliases are not recorded: they replay inside their readers)
    assert s["compiles"] <= 3, s  # the step repeats (a new learning rate is an input, not a new program)
    assert s["cache_hits"] >= 15, s
    assert s["pending_nodes"] == 0


def test_materialisation_points_see_the_pending_values() -> None:
    with torch.tpu.set_eager_mode(FUSED):
        x = torch.arange(6.0, device="tpu").reshape(2, 3)
        y = (x * 2 + 1).sum(0)
        assert lazy.stats()["pending_nodes"] > 0
        assert y.cpu().tolist() == [8.0, 12.0, 16.0]
        z = x.exp().max()
        assert abs(z.item() - float(torch.arange(6.0).exp().max())) < 1e-4
        assert "device='tpu:0'" in repr(x + 1)
        if (x.sum() > 10).item():  # data-dependent control flow materialises
            w = x[x > 2]  # data-dependent shape: recorded ops flush, the op runs strictly
        assert w.cpu().tolist() == [3.0, 4.0, 5.0]


def test_views_and_in_place_writes_through_views() -> None:
    lazy.reset_stats()

    def run() -> list:
        x = torch.zeros(3, 4, device="tpu")
        x[1].add_(5)
        x.t()[2].fill_(7)
        v = x.view(12)[::3]
        v.mul_(2)
        return x.cpu().tolist()

    strict = run()
    with torch.tpu.set_eager_mode(FUSED):
        fused = run()
    assert fused == strict


def test_random_ops_draw_the_same_values_as_strict() -> None:
    def draw() -> list:
        torch.manual_seed(7)
        a = torch.randn(5, device="tpu")
        b = F.dropout(torch.ones(8, device="tpu"), 0.5)
        torch.manual_seed(7)  # reseeding mid-graph: the recorded draws come first
        c = torch.rand(3, device="tpu")
        return [a.cpu().tolist(), b.cpu().tolist(), c.cpu().tolist()]

    strict = draw()
    with torch.tpu.set_eager_mode(FUSED):
        fused = draw()
    assert fused == strict


@torch.library.custom_op("tpu_workbench_test::cpu_only_twice", mutates_args=())
def _cpu_only_twice(x: torch.Tensor) -> torch.Tensor:
    """An op with a CPU kernel only: on "tpu" it has no lowering and no decomposition."""
    return x * 2


def test_an_op_without_lowering_raises_as_in_strict_after_the_pending_work() -> None:
    with (
        torch.tpu.set_eager_mode(STRICT),
        pytest.raises(NotImplementedError, match="cpu_only_twice") as strict,
    ):
        _cpu_only_twice(torch.ones(3, device="tpu"))
    with torch.tpu.set_eager_mode(FUSED):
        x = torch.ones(3, device="tpu")
        x.add_(1)
        with pytest.raises(NotImplementedError, match="cpu_only_twice") as fused:
            _cpu_only_twice(x)
        assert lazy.stats()["pending_nodes"] == 0  # the recorded work ran before the error
        assert x.cpu().tolist() == [2.0, 2.0, 2.0]
    assert str(fused.value) == str(strict.value)


@pytest.mark.slow
def test_shapes_that_change_every_step_pause_recording() -> None:
    lazy.reset_stats()
    with torch.tpu.set_eager_mode(FUSED):
        for n in range(2, 40):
            x = torch.randn(n, 3, device="tpu")
            # (abs too: a sum of random numbers can sit near 0, where summation order moves the relative error)
            assert (x * 2).sum().item() == pytest.approx(float((x.cpu() * 2).sum()), rel=1e-5, abs=1e-5)
    s = lazy.stats()
    assert s["fallback_pauses"] >= 1 and s["compiles"] == 0, s


def test_a_training_warm_up_does_not_pause_recording() -> None:
    """Three graphs a step (forward read by .item(), backward, optimizer), the optimizer's first step creating
    its state: the first steps are all new signatures, yet the loop repeats, so recording must not pause (it
    once paused here and ran the measured steps strictly)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)).to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randn(4, 8, device="tpu"), torch.randn(4, 1, device="tpu")
    lazy.reset_stats()
    with torch.tpu.set_eager_mode(FUSED):
        for _ in range(8):
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.item()
            loss.backward()
            lazy.flush()
            opt.step()
            lazy.flush()
    s = lazy.stats()
    assert s["fallback_pauses"] == 0 and s["ops_strict"] == 0, s
    assert s["cache_hits"] >= 6, s


def test_the_fallback_ignores_a_warm_up_whose_graphs_then_repeat() -> None:
    """The flush outcomes of the 17M-parameter GPT's first steps (forward, backward and optimizer graphs; the
    optimizer's first two steps differ from the rest): new, new, new | new, new, compiled | new, compiled, hit |
    hits. Recording must not pause on that (it once did, and the measured steps ran strictly)."""
    warm_up = [True, True, True, True, True, False, True, False, False] + [False] * 12
    lazy.reset_stats()
    for new in warm_up:
        lazy._note_flush(new)
    assert lazy.stats()["fallback_pauses"] == 0
    for _ in range(lazy._WINDOW):  # shapes that never repeat still pause it
        lazy._note_flush(True)
    assert lazy.stats()["fallback_pauses"] == 1
    lazy.reset_stats()


def test_leaving_the_mode_runs_recorded_work() -> None:
    with torch.tpu.set_eager_mode(FUSED):
        x = torch.ones(4, device="tpu") * 3
    assert lazy.stats()["pending_nodes"] == 0
    assert x.cpu().tolist() == [3.0] * 4


@pytest.mark.slow
def test_environment_switch() -> None:
    code = (
        "import torch; x = torch.ones(2, device='tpu') + 1; print(torch.tpu.eager_mode.name, x.sum().item())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "TORCH_TPU_DEFER_AND_FUSE": "1"},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["DEFER_AND_FUSE", "4.0"]


def test_cnn_with_batchnorm_matches_strict() -> None:
    def train(mode: torch.tpu.EagerMode) -> tuple[list[float], list[float]]:
        torch.manual_seed(0)
        net = torch.nn.Sequential(
            torch.nn.Conv2d(3, 4, 3),
            torch.nn.BatchNorm2d(4),
            torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1),
            torch.nn.Flatten(),
            torch.nn.Linear(4, 2),
        ).to("tpu")
        opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
        g = torch.Generator().manual_seed(3)
        losses = []
        with torch.tpu.set_eager_mode(mode):
            for _ in range(5):
                x = torch.randn(4, 3, 8, 8, generator=g).to("tpu")
                opt.zero_grad()
                loss = net(x).pow(2).mean()
                loss.backward()
                opt.step()
                losses.append(loss.item())
        return losses, net[1].running_mean.cpu().tolist()

    (ls, rs), (lf, rf) = train(STRICT), train(FUSED)
    assert max(abs(a - b) / abs(a) for a, b in zip(ls, lf, strict=True)) <= 1e-6
    assert max(abs(a - b) for a, b in zip(rs, rf, strict=True)) <= 1e-6
