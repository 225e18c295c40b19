"""Models train for 20 steps on tpu and cpu from the same seed: losses agree and decrease."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from tests.backend.models import MLP, Encoder
from tests.backend.models import BatchNormCNN as CNN
from tests.backend.models import TiedGPT as GPT

STEPS = 20


def _data(kind: str) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    if kind == "mlp":
        return torch.randn(32, 16, generator=g), torch.randint(0, 4, (32,), generator=g)
    if kind == "cnn":
        return torch.randn(8, 3, 12, 12, generator=g), torch.randint(0, 4, (8,), generator=g)
    if kind == "gpt":
        idx = torch.randint(0, 32, (4, 16), generator=g)
        return idx, torch.roll(idx, -1, 1)
    return torch.randn(8, 6, 32, generator=g), torch.randint(0, 4, (8,), generator=g)


def _train(kind: str, device: str, opt_name: str) -> list[float]:
    torch.manual_seed(0)
    model = {"mlp": MLP, "cnn": CNN, "gpt": GPT, "encoder": Encoder}[kind]().to(device)
    opt = {
        "sgd": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9),
        "adam": lambda p: torch.optim.Adam(p, lr=3e-3),
        "adamw": lambda p: torch.optim.AdamW(p, lr=3e-3, foreach=True),
    }[opt_name](model.parameters())
    x, y = (t.to(device) for t in _data(kind))
    losses = []
    for _ in range(STEPS):
        opt.zero_grad(set_to_none=True)
        out = model(x)
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.slow
@pytest.mark.parametrize(
    "kind,opt", [("mlp", "sgd"), ("mlp", "adam"), ("cnn", "sgd"), ("cnn", "adamw"), ("gpt", "adamw"),
                 ("encoder", "adam")]
)  # fmt: skip
def test_train_matches_cpu(kind: str, opt: str) -> None:
    cpu = _train(kind, "cpu", opt)
    tpu = _train(kind, "tpu", opt)
    assert all(math.isfinite(v) for v in tpu)
    assert tpu[-1] < tpu[0] * 0.9, tpu
    for a, b in zip(cpu, tpu, strict=True):
        assert abs(a - b) <= 2e-3 * max(1.0, abs(a)), (cpu, tpu)


def test_tied_weights_stay_tied_after_to() -> None:
    m = GPT().to("tpu")
    assert m.head.weight is m.tok.weight
    assert m.head.weight.device.type == "tpu"


def test_dropout_and_eval_mode() -> None:
    torch.manual_seed(0)
    m = CNN(p=0.5).to("tpu")
    x = torch.randn(2, 3, 12, 12, device="tpu")
    m.train()
    a, b = m(x), m(x)
    assert not torch.equal(a.cpu(), b.cpu())  # dropout masks differ between calls
    m.eval()
    torch.testing.assert_close(m(x).cpu(), m(x).cpu())
