"""torch.compile as training scripts call it: the model compiled once and trained (backend "tpu", or no backend
named), the compiled module's checkpoint (keys under `_orig_mod.`), and the `mode=` values GPU scripts pass."""

from __future__ import annotations

import pytest
import torch
from idioms.tiny import TinyMLP, vector_batches

STEPS = 3


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> None:
    torch._dynamo.reset()


def _train(compile_kwargs: dict | None) -> tuple[list[float], dict]:
    torch.manual_seed(0)
    model = TinyMLP().to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    run = model if compile_kwargs is None else torch.compile(model, **compile_kwargs)
    losses = []
    for x, y in vector_batches(STEPS):
        _, loss = run(x.to("tpu"), y.to("tpu"))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses, run.state_dict()


@pytest.mark.parametrize("kwargs", [{"backend": "tpu"}, {}, {"backend": "tpu", "dynamic": False, "fullgraph": True}],
                         ids=["backend=tpu", "no-backend", "fullgraph"])  # fmt: skip
def test_compiled_model_trains_like_eager(kwargs: dict) -> None:
    eager, _ = _train(None)
    compiled, state = _train(kwargs)
    torch.testing.assert_close(torch.tensor(compiled), torch.tensor(eager), rtol=1e-5, atol=1e-6)
    assert all(k.startswith("_orig_mod.") for k in state)


def test_compiled_checkpoint_loads_into_a_plain_model_after_stripping_the_prefix() -> None:
    _, state = _train({"backend": "tpu"})
    prefix = "_orig_mod."
    plain = TinyMLP().to("tpu")
    plain.load_state_dict({k.removeprefix(prefix): v for k, v in state.items()})
    for k, v in plain.state_dict().items():
        assert torch.equal(v.cpu(), state[prefix + k].cpu()), k


def test_compiled_train_step_function() -> None:
    """The whole micro-step (forward, backward, clip, optimizer step) in one compiled function."""
    torch.manual_seed(0)
    model = TinyMLP().to("tpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    @torch.compile(backend="tpu")
    def train_step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        _, loss = model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    compiled = [train_step(x.to("tpu"), y.to("tpu")).item() for x, y in vector_batches(STEPS)]
    torch.manual_seed(0)
    ref = TinyMLP().to("tpu")
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    eager = []
    for x, y in vector_batches(STEPS):
        _, loss = ref(x.to("tpu"), y.to("tpu"))
        loss.backward()
        ref_opt.step()
        ref_opt.zero_grad(set_to_none=True)
        eager.append(loss.item())
    torch.testing.assert_close(torch.tensor(compiled), torch.tensor(eager), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune"])
def test_inductor_modes_from_gpu_scripts_are_refused_as_torchtpu_does(mode: str) -> None:
    """TorchTPU 0.2.0 refuses mode= with backend "tpu" (contract §15): a GPU script must drop it."""
    with pytest.raises(ValueError, match="does not take mode="):
        _train({"mode": mode})


def test_decorated_function_without_a_backend_runs_on_the_device() -> None:
    @torch.compile(dynamic=False, fullgraph=True)
    def sgd_kernel(p: torch.Tensor, grad: torch.Tensor, lr: torch.Tensor) -> None:
        p.sub_(grad * lr)

    p = torch.ones(4, device="tpu")
    sgd_kernel(p, torch.full((4,), 2.0, device="tpu"), torch.tensor(0.25))  # a 0-dim CPU hyper-parameter
    assert p.cpu().tolist() == [0.5] * 4


def test_compiled_update_with_a_tensor_alpha() -> None:
    def update(p: torch.Tensor, u: torch.Tensor, step: torch.Tensor) -> None:
        p.add_(u, alpha=-step)
        p.addcmul_(u, u, value=0.5)

    p, u = torch.zeros(3, device="tpu"), torch.tensor([1.0, 2.0, 3.0], device="tpu")
    torch.compile(update, backend="tpu", fullgraph=True)(p, u, torch.tensor(0.5))
    cpu = torch.zeros(3)
    update(cpu, u.cpu(), torch.tensor(0.5))
    assert p.cpu().tolist() == cpu.tolist()


@pytest.mark.slow
def test_plain_function_on_cpu_inputs_still_goes_to_inductor() -> None:
    from tpu_workbench.backend import compile as tpu_compile

    graphs = tpu_compile.stats()["graphs"]

    @torch.compile(mode="max-autotune-no-cudagraphs")
    def scale(x: torch.Tensor) -> torch.Tensor:
        return x * 3 + 1

    assert scale(torch.ones(3)).tolist() == [4.0, 4.0, 4.0]
    assert tpu_compile.stats()["graphs"] == graphs, "a CPU graph reached the 'tpu' backend"


def test_compiled_frame_that_builds_a_device_tensor_from_data() -> None:
    """transformers' DynamicCache starts each layer's cache as torch.tensor([], device=...) inside the
    compiled forward, then concatenates the new keys onto it."""

    def append(cache_keys: list, new: torch.Tensor) -> torch.Tensor:
        empty = torch.tensor([], dtype=new.dtype, device=new.device)
        cache_keys.append(torch.cat([empty, new], dim=-2))
        return cache_keys[-1] * torch.tensor([2.0], device=new.device)

    new = torch.randn(2, 3, 4)
    got = torch.compile(append, backend="tpu", fullgraph=True)([], new.to("tpu"))
    torch.testing.assert_close(got.cpu(), new * 2)
