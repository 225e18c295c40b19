"""Data-loading idioms of GPU training scripts, on "tpu": DataLoader workers with pin_memory, direct pinning
and non_blocking copies, host index tensors, and the errors CUDA gives for numpy() and a second ordinal."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from idioms.datasets import DictDataset, RandomCropDataset, ShardedStream, SquaresDataset
from torch.utils.data import DataLoader, Dataset

# seconds a DataLoader waits for a worker's batch: a deadlocked worker fails the test, not the run
TIMEOUT = 60


def _expected_sums(ds: SquaresDataset, batch: int) -> list[float]:
    return [
        sum(float(ds[i][0].sum()) * 2 for i in range(s, min(s + batch, len(ds))))
        for s in range(0, len(ds), batch)
    ]


def _device_sums(loader: DataLoader) -> list[float]:
    sums = []
    for x, y in loader:
        assert x.is_pinned() and y.is_pinned(), "pin_memory=True hands out pinned batches, as on CUDA"
        x, y = x.to("tpu", non_blocking=True), y.to("tpu", non_blocking=True)
        assert x.device.type == "tpu" and y.dtype == torch.int64
        sums.append((x * 2).sum().item())
    return sums


def test_workers_with_pin_memory_fork_after_device_init() -> None:
    torch.ones(2, device="tpu").sum().item()  # the device (JAX) is live before workers fork, as in scripts
    ds = SquaresDataset()
    loader = DataLoader(ds, batch_size=4, num_workers=2, pin_memory=True, multiprocessing_context="fork",
                        timeout=TIMEOUT)  # fmt: skip
    assert _device_sums(loader) == _expected_sums(ds, 4)


@pytest.mark.slow
@pytest.mark.parametrize("context", ["spawn", "forkserver"])
def test_workers_with_pin_memory_fresh_interpreters(context: str) -> None:
    ds = SquaresDataset()
    loader = DataLoader(ds, batch_size=4, num_workers=2, pin_memory=True, multiprocessing_context=context,
                        persistent_workers=True, timeout=TIMEOUT)  # fmt: skip
    want = _expected_sums(ds, 4)
    assert _device_sums(loader) == want
    assert _device_sums(loader) == want  # second epoch on the same persistent workers


def test_dict_batches_are_pinned_leaving_other_fields() -> None:
    loader = DataLoader(DictDataset(n=8), batch_size=4, num_workers=1, pin_memory=True,
                        multiprocessing_context="fork", timeout=TIMEOUT)  # fmt: skip
    for i, batch in enumerate(loader):
        assert batch["name"] == [f"item{j}" for j in range(4 * i, 4 * i + 4)]
        assert batch["input"].is_pinned() and batch["label"].is_pinned()
        moved = {k: v.to("tpu", non_blocking=True) for k, v in batch.items() if isinstance(v, torch.Tensor)}
        torch.testing.assert_close(moved["input"].cpu(), batch["input"], rtol=0, atol=0)


def test_iterable_dataset_sharded_between_workers() -> None:
    loader = DataLoader(ShardedStream(n=20), batch_size=None, num_workers=2, pin_memory=True,
                        multiprocessing_context="fork", timeout=TIMEOUT)  # fmt: skip
    seen = sorted(int(t.to("tpu")[0].item()) for t in loader)
    assert seen == list(range(20))


def test_seeded_loader_gives_the_same_augmentations_twice() -> None:
    def epoch() -> list[list[float]]:
        g = torch.Generator().manual_seed(1234)
        loader = DataLoader(RandomCropDataset(), batch_size=2, shuffle=True, generator=g, num_workers=2,
                            pin_memory=True, multiprocessing_context="fork", timeout=TIMEOUT)  # fmt: skip
        return [b.to("tpu").cpu().flatten().tolist() for b in loader]

    first, second = epoch(), epoch()
    assert first == second
    assert len({tuple(b) for b in first}) == len(first)


class _MovesToDevice(Dataset):
    def __len__(self) -> int:
        return 2

    def __getitem__(self, i: int) -> torch.Tensor:
        return (torch.ones(2, device="tpu") * i).cpu()


def test_forked_worker_using_the_device_raises_like_cuda() -> None:
    torch.ones(2, device="tpu").sum().item()
    loader = DataLoader(
        _MovesToDevice(), batch_size=2, num_workers=1, multiprocessing_context="fork", timeout=8
    )
    with pytest.raises(RuntimeError, match="(?i)fork.*spawn|spawn.*fork"):
        list(loader)


# ------------------------------------------------------------------------------------------- direct pinning
@pytest.mark.slow
def test_pin_memory_then_non_blocking_copy() -> None:
    x = torch.randn(4, 3)
    assert not x.is_pinned()
    pinned = x.pin_memory()
    assert pinned.is_pinned() and not x.is_pinned()
    assert pinned[1:].is_pinned(), "a view of pinned memory is pinned"
    assert pinned.pin_memory() is pinned
    dev = pinned.to("tpu", non_blocking=True)
    assert torch.equal(dev.cpu(), x)
    back = (dev * 3).to("cpu", non_blocking=True)
    torch.accelerator.synchronize()
    assert torch.equal(back, x * 3)


def test_factory_pin_memory_argument() -> None:
    """Scripts preallocate a pinned staging buffer and copy each batch through it (as CUDA prefetchers do)."""
    buf = torch.empty(8, pin_memory=True)
    assert buf.is_pinned() and not torch.empty(8).is_pinned()
    buf.copy_(torch.arange(8.0))
    assert torch.equal(buf.to("tpu", non_blocking=True).cpu(), torch.arange(8.0))
    assert torch.zeros(2, 2, pin_memory=True).is_pinned()
    assert torch.tensor([1.0, 2.0], pin_memory=True).is_pinned()
    assert torch.empty_like(buf, pin_memory=True).is_pinned()
    assert torch.full((3,), 7, dtype=torch.int32, pin_memory=True).dtype == torch.int32


# ------------------------------------------------------------------------------ host tensors used on device
@pytest.mark.slow  # 5.6 s: a quick-loop budget item
def test_host_index_tensors_index_a_device_tensor() -> None:
    x = torch.arange(12.0).view(4, 3)
    xt = x.to("tpu")
    idx, mask = torch.tensor([0, 2]), torch.tensor([True, False, True, True])
    assert torch.equal(xt[idx].cpu(), x[idx])
    assert torch.equal(xt[mask].cpu(), x[mask])
    assert torch.equal(xt[idx, torch.tensor([1, 2])].cpu(), x[idx, torch.tensor([1, 2])])
    xt[idx] = 0.5
    x[idx] = 0.5
    assert torch.equal(xt.cpu(), x)


def test_host_scalar_tensor_broadcasts_but_host_vector_is_refused() -> None:
    xt = torch.ones(3, device="tpu")
    assert torch.equal((xt * torch.tensor(2.5)).cpu(), torch.full((3,), 2.5))
    with pytest.raises(RuntimeError, match="same device"):
        xt + torch.ones(3)


def test_numpy_on_a_device_tensor_raises_like_cuda() -> None:
    xt = torch.ones(2, device="tpu")
    msg = "can't convert tpu:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory first."
    with pytest.raises(TypeError) as err:
        xt.numpy()
    assert str(err.value) == msg
    with pytest.raises(TypeError, match="Use Tensor.cpu"):
        np.asarray(xt)
    assert xt.cpu().numpy().tolist() == [1.0, 1.0]
    assert xt.tolist() == [1.0, 1.0]


@pytest.mark.slow  # (quick loop: several seconds; runs in the full suite)
def test_second_ordinal_is_an_invalid_device_like_cuda() -> None:
    assert torch.device("tpu:1").index == 1  # naming it is fine, as for CUDA
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.randn(3, device="tpu:1")
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.ones(2).to(torch.device("tpu", 1))
    assert torch.randn(3, device="tpu:0").device == torch.device("tpu", 0)


@pytest.mark.parametrize("spec", ["", ".4f", ".2e", "8.3f", "g"])
def test_f_string_of_a_0_dim_tensor_formats_its_value(spec: str) -> None:
    cpu = torch.tensor(3.14159)
    assert format(cpu.to("tpu"), spec) == format(cpu, spec)
    loss = (torch.ones((), device="tpu", requires_grad=True) * 2.5).sum()
    assert f"{loss:.3f}" == "2.500"
    step = torch.tensor(7, device="tpu")
    assert f"{step}" == "7" and f"{step:03d}" == "007"
    assert {f"{step}": 1} == {"7": 1}  # used as a key, as some models do


# ------------------------------------------------------------------------------ side-stream prefetcher
def test_prefetcher_records_its_stream_on_the_batch() -> None:
    """The prefetcher of many ImageNet scripts: pinned batch, copy on a side stream, record_stream on the batch."""
    side = torch.Stream(device="tpu")
    batch = torch.arange(6.0).view(2, 3).pin_memory()
    with side:
        moved = batch.to("tpu", non_blocking=True)
    torch.accelerator.current_stream().wait_stream(side)
    moved.record_stream(torch.accelerator.current_stream())
    assert torch.equal(moved.cpu(), batch)


def test_share_memory_of_a_device_model_is_refused_with_advice() -> None:
    model = torch.nn.Linear(2, 2).to("tpu")
    with pytest.raises(RuntimeError, match="cannot be shared between processes.*on the CPU"):
        model.share_memory()
    torch.nn.Linear(2, 2).share_memory()  # a CPU model shares as before
