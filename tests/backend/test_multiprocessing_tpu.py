"""Issue 33: "tpu" tensors across processes like CUDA tensors (through host memory), and deepcopy keeping a
tensor and its view sharing storage."""

from __future__ import annotations

import copy
import subprocess
import sys
import textwrap

import pytest
import torch


def test_deepcopy_of_a_tensor_and_its_view_keeps_them_sharing():
    x = torch.arange(6.0).to("tpu")
    v = x[2:4]
    for pair in ((x, v), (v, x)):
        a, b = copy.deepcopy(pair)
        xc, vc = (a, b) if pair[0] is x else (b, a)
        vc.add_(100)
        assert xc.cpu().tolist() == [0.0, 1.0, 102.0, 103.0, 4.0, 5.0]
        assert (vc.stride(), vc.storage_offset()) == (v.stride(), v.storage_offset())
    assert x.cpu().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]  # the original is untouched


def test_deepcopy_of_a_view_alone_is_its_values():
    t = torch.arange(6.0).to("tpu").reshape(2, 3).t()
    c = copy.deepcopy(t)
    assert torch.equal(c.cpu(), t.cpu()) and c.stride() == t.stride()


_SCRIPT = textwrap.dedent(
    """
    import torch, torch.multiprocessing as mp
    from torch.utils.data import DataLoader, Dataset

    class DS(Dataset):
        def __len__(self): return 4
        def __getitem__(self, i): return torch.full((2,), float(i), device="tpu")

    def child(q, done):
        q.put(torch.arange(3.0, device="tpu"))
        done.wait()  # the sender keeps the shared memory alive until the receiver has it, as with CPU tensors

    if __name__ == "__main__":
        dl = DataLoader(DS(), batch_size=2, num_workers=1, multiprocessing_context="spawn",
                        persistent_workers=True)
        for b in dl:
            print("batch", b.device, b.cpu().tolist())
        ctx = mp.get_context("spawn")
        q, done = ctx.Queue(), ctx.Event()
        p = ctx.Process(target=child, args=(q, done))
        p.start()
        t = q.get(timeout=240)
        done.set()
        p.join()
        print("queue", t.device, t.cpu().tolist())
    """
)


@pytest.mark.slow
def test_spawn_workers_and_queues_carry_tpu_tensors(tmp_path):
    script = tmp_path / "mp_tpu.py"
    script.write_text(_SCRIPT)
    res = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=600, cwd=tmp_path
    )
    assert res.returncode == 0, res.stderr[-2000:]
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith(("batch", "queue"))]
    assert lines == [
        "batch tpu:0 [[0.0, 0.0], [1.0, 1.0]]",
        "batch tpu:0 [[2.0, 2.0], [3.0, 3.0]]",
        "queue tpu:0 [0.0, 1.0, 2.0]",
    ]
