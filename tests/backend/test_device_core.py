"""The device behaves like an accelerator where scripts touch it around the ops: checkpoints, storages, pinning,
generators, ordinals, memory queries, numpy, formatting, data pointers. Each test does what a user does."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
TPU = torch.device("tpu", 0)


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3), torch.nn.Linear(3, 2))


MAP_LOCATIONS = {
    "str": "tpu",
    "str0": "tpu:0",
    "device": torch.device("tpu"),
    "dict": {"cpu": "tpu"},
    "callable-to": lambda storage, loc: storage.to(device="tpu"),
    "callable-tpu": lambda storage, loc: storage.tpu(),
}


@pytest.mark.parametrize("weights_only", [True, False])
@pytest.mark.parametrize("spelling", list(MAP_LOCATIONS))
def test_cpu_checkpoint_loads_onto_the_device(tmp_path: Path, spelling: str, weights_only: bool) -> None:
    """torch.load(map_location=<tpu>) used to kill the interpreter (a storage on a device with no allocator)."""
    m = _model()
    path = tmp_path / "ckpt.pt"
    torch.save({"model": m.state_dict(), "step": 3}, path)
    ck = torch.load(path, map_location=MAP_LOCATIONS[spelling], weights_only=weights_only)
    assert ck["step"] == 3
    for k, v in m.state_dict().items():
        assert ck["model"][k].device == TPU, k
        assert torch.equal(ck["model"][k].cpu(), v)
        assert not ck["model"][k].requires_grad


@pytest.mark.parametrize("weights_only", [True, False])
def test_device_checkpoint_round_trips_and_map_location_cpu_brings_it_home(
    tmp_path: Path, weights_only: bool
) -> None:
    m = _model().to("tpu")
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    m(torch.randn(5, 4, device="tpu")).sum().backward()
    opt.step()
    path = tmp_path / "ckpt.pt"
    torch.save({"model": m.state_dict(), "opt": opt.state_dict()}, path)
    on_device = torch.load(path, weights_only=weights_only)
    on_cpu = torch.load(path, map_location="cpu", weights_only=weights_only)
    for k, v in m.state_dict().items():
        assert on_device["model"][k].device == TPU and on_cpu["model"][k].device.type == "cpu"
        assert torch.equal(on_device["model"][k].cpu(), v.cpu()) and torch.equal(on_cpu["model"][k], v.cpu())
    fresh = _model().to("tpu")
    fresh.load_state_dict(on_device["model"])
    opt2 = torch.optim.AdamW(fresh.parameters(), lr=1e-2)
    opt2.load_state_dict(on_device["opt"])
    assert opt2.state_dict()["state"][0]["exp_avg"].device == TPU


def test_whole_module_pickle_keeps_parameters(tmp_path: Path) -> None:
    m = _model().to("tpu")
    path = tmp_path / "m.pt"
    torch.save(m, path)
    back = torch.load(path, weights_only=False)
    params = list(back.parameters())
    assert len(params) == len(list(m.parameters()))
    assert all(isinstance(p, torch.nn.Parameter) and p.device == TPU and p.requires_grad for p in params)
    x = torch.randn(2, 4, device="tpu")
    assert torch.allclose(back(x).cpu(), m(x).cpu())


def test_mmap_load_onto_the_device(tmp_path: Path) -> None:
    path = tmp_path / "w.pt"
    w = torch.arange(12.0).reshape(3, 4)
    torch.save({"w": w}, path)
    got = torch.load(path, map_location="tpu", mmap=True, weights_only=True)["w"]
    assert got.device == TPU and torch.equal(got.cpu(), w)


def test_storage_on_the_device_is_refused_not_a_crash() -> None:
    for make in (
        lambda: torch.UntypedStorage(8, device="tpu"),
        lambda: torch.ones(2).untyped_storage().to(device="tpu"),
    ):
        with pytest.raises(RuntimeError, match=r"storage on 'tpu(:0)?' cannot be created"):
            make()


def test_storage_queries_of_device_tensors_answer() -> None:
    t = torch.zeros(4, 3, device="tpu")
    assert t.untyped_storage().nbytes() == 48
    assert t.data_ptr() == t.view(12).data_ptr() == t[0].data_ptr() != t[1].data_ptr()
    assert t[1].data_ptr() - t.data_ptr() == 3 * 4
    u = torch.zeros(4, 3, device="tpu")
    assert u.untyped_storage().data_ptr() != t.untyped_storage().data_ptr()
    assert t.untyped_storage().data_ptr() == t.t().untyped_storage().data_ptr()
    with pytest.raises(RuntimeError, match="not PyTorch storages"):
        t.untyped_storage().resize_(0)


def test_pin_memory_then_non_blocking_copy() -> None:
    x = torch.arange(6.0).reshape(2, 3)
    assert not x.is_pinned()
    p = x.pin_memory()
    assert p.is_pinned() and p[1].is_pinned() and p.pin_memory() is p
    assert torch.equal(p, x) and p.data_ptr() != x.data_ptr()
    y = p.to("tpu", non_blocking=True)
    assert y.device == TPU and torch.equal(y.cpu(), x)
    with pytest.raises(RuntimeError, match="only dense CPU tensors can be pinned"):
        y.pin_memory()


def test_dataloader_pin_memory_with_workers() -> None:
    data = torch.utils.data.TensorDataset(torch.arange(16.0).reshape(8, 2), torch.arange(8))
    loader = torch.utils.data.DataLoader(
        data,
        batch_size=4,
        num_workers=1,
        pin_memory=True,
        multiprocessing_context="spawn" if sys.platform == "darwin" else None,
    )
    seen = 0
    for xb, yb in loader:
        assert xb.is_pinned() and yb.is_pinned()
        seen += xb.to("tpu", non_blocking=True).sum().item()
    assert seen == float(torch.arange(16.0).sum())


def test_seeded_tpu_generator_repeats() -> None:
    g = torch.Generator("tpu")
    assert g.device == TPU and isinstance(g, torch.Generator)
    assert isinstance(torch.default_generator, torch.Generator)
    g.manual_seed(1234)
    a = torch.randn(5, device="tpu", generator=g)
    b = torch.rand(3, device="tpu", generator=g)
    g.manual_seed(1234)
    assert torch.equal(torch.randn(5, device="tpu", generator=g).cpu(), a.cpu())
    assert torch.equal(torch.rand(3, device="tpu", generator=g).cpu(), b.cpu())
    state = g.get_state()
    c = torch.randn(4, device="tpu", generator=g)
    g.set_state(state)
    assert torch.equal(torch.randn(4, device="tpu", generator=g).cpu(), c.cpu())
    assert type(torch.Generator("cpu")) is not type(g)


def test_only_this_process_ordinal_exists() -> None:
    for bad in (
        lambda: torch.randn(3, device="tpu:1"),
        lambda: torch.zeros(2).to("tpu:1"),
        lambda: torch.ones(2, device="tpu").to("tpu:2"),
        lambda: torch.accelerator.set_device_index(1),
        lambda: torch.Generator("tpu:1"),
    ):
        with pytest.raises(RuntimeError, match="invalid device ordinal"):
            bad()
    assert torch.randn(2, device="tpu:0").device == TPU
    torch.accelerator.set_device_index(0)
    assert torch.accelerator.device_count() == 1 and torch.accelerator.current_device_index() == 0


@pytest.mark.slow
def test_local_rank_names_the_same_device() -> None:
    code = (
        "import torch; x = torch.ones(2, device='tpu:1'); torch.accelerator.set_device_index(1);"
        "print(x.device, torch.accelerator.device_count())\n"
        "try:\n    torch.ones(1, device='tpu:2')\nexcept RuntimeError as e:\n    print('refused', 'tpu:2' in str(e))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "LOCAL_RANK": "1"},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["tpu:0", "1", "refused", "True"]


def test_memory_queries_answer_or_name_the_limit() -> None:
    x = torch.zeros(1024, device="tpu")
    assert torch.accelerator.memory_allocated() >= x.numel() * 4
    assert torch.accelerator.memory_stats()["allocated_bytes.all.current"] >= 4096
    free, total = torch.accelerator.get_memory_info()
    assert 0 < free <= total
    torch.accelerator.empty_cache()
    with pytest.warns(UserWarning, match="cannot be reset"):
        from tpu_workbench.backend import memory

        memory._reset_warned = False
        torch.accelerator.reset_peak_memory_stats()
    from tpu_workbench.backend._jax import jax_module

    if jax_module().devices()[0].platform == "cpu":
        with pytest.raises(RuntimeError, match="does not report peak memory"):
            torch.accelerator.max_memory_allocated()


def test_numpy_is_refused_like_cuda() -> None:
    t = torch.ones(3, device="tpu")
    for conv in (t.numpy, lambda: __import__("numpy").asarray(t)):
        with pytest.raises(
            TypeError, match=r"can't convert tpu:0 device type tensor to numpy\. Use Tensor\.cpu\(\)"
        ):
            conv()
    assert t.cpu().numpy().tolist() == [1.0, 1.0, 1.0] and t.tolist() == [1.0, 1.0, 1.0]


def test_zero_dim_tensor_formats_as_its_number() -> None:
    t = torch.tensor(2.5, device="tpu")
    assert (
        f"{t}" == "2.5" and f"{t:.3f}" == "2.500" and "{:>5}".format(torch.tensor(3, device="tpu")) == "    3"
    )
    assert f"{torch.ones(2, device='tpu')}".startswith("tensor([1., 1.], device='tpu:0'")


def test_buffer_io_in_memory() -> None:
    buf = io.BytesIO()
    torch.save(torch.arange(5, device="tpu"), buf)
    buf.seek(0)
    assert torch.load(buf).device == TPU


@pytest.mark.parametrize("weights_only", [True, False])
def test_device_checkpoint_with_a_callable_map_location(tmp_path: Path, weights_only: bool) -> None:
    """The classic "load a GPU checkpoint onto the CPU" line, on a "tpu" checkpoint."""
    path = tmp_path / "c.pt"
    torch.save({"w": torch.arange(3.0, device="tpu")}, path)
    to_cpu = torch.load(path, map_location=lambda storage, loc: storage, weights_only=weights_only)["w"]
    assert to_cpu.device.type == "cpu" and to_cpu.tolist() == [0.0, 1.0, 2.0]
    seen = []
    torch.load(path, map_location=lambda storage, loc: seen.append(loc) or storage, weights_only=weights_only)
    assert seen == ["tpu:0"]
    back = torch.load(path, map_location={"tpu:0": "cpu"}, weights_only=weights_only)["w"]
    assert back.device.type == "cpu"


@pytest.mark.slow
def test_a_forked_worker_touching_the_device_raises_like_cuda() -> None:
    code = (
        "import torch\ntorch.ones(1, device='tpu').sum().item()\n"
        "class D(torch.utils.data.Dataset):\n    def __len__(self): return 2\n"
        "    def __getitem__(self, i): return torch.ones(2, device='tpu').cpu()\n"
        "try:\n    list(torch.utils.data.DataLoader(D(), num_workers=1, multiprocessing_context='fork', timeout=60))\n"
        "except RuntimeError as e:\n    print('forked' in str(e) and 'spawn' in str(e))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.stdout.strip().endswith("True"), (out.stdout, out.stderr[-2000:])


def test_compilation_cache_dir_switch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from tpu_workbench.backend._jax import compilation_cache_dir

    monkeypatch.setenv("TORCH_TPU_COMPILATION_CACHE_DIR", str(tmp_path))
    assert compilation_cache_dir() == tmp_path
    monkeypatch.setenv("TORCH_TPU_COMPILATION_CACHE_DIR", "0")
    assert compilation_cache_dir() is None


def test_as_strided_in_place_on_a_tensor_nothing_views() -> None:
    # Dynamo's clone_input restrides a fresh buffer this way; a viewed tensor cannot change shape under its views
    cpu = torch.arange(40.0)
    cpu.as_strided_((2, 3), (3, 1), 2)
    dev = torch.arange(40.0).to("tpu")
    dev.as_strided_((2, 3), (3, 1), 2)
    assert dev.shape == (2, 3) and dev.cpu().tolist() == cpu.tolist()
    base = torch.arange(40.0).to("tpu")
    _view = base[1:]
    with pytest.raises(RuntimeError, match="other tensors view"):
        base.as_strided_((2, 3), (3, 1), 0)
