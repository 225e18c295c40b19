"""Tiny MLP classifier trained the legacy torch_xla way (PJRT era, torch_xla <= 2.4 style).

xmp.spawn, MpDeviceLoader, xm.optimizer_step, xm.mesh_reduce, xm.master_print and a metrics
report at the end.

    PJRT_DEVICE=TPU python train.py --steps 5
"""

import argparse
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


def _tpu_distributed():
    """Added by tpu-migrate: whether collectives have peers to talk to.

    torch_xla's runtime always knew its replicas; with torchrun the default process group is created
    here on first use when WORLD_SIZE > 1 (call init_process_group yourself before to choose options).
    """
    if torch.distributed.is_initialized():
        return torch.distributed.get_world_size() > 1
    if int(os.environ.get("WORLD_SIZE", 1)) > 1:
        torch.distributed.init_process_group("tpu_dist")
        return True
    return False


def _tpu_rank():
    """Added by tpu-migrate: the global rank, as xr.global_ordinal() (torchrun's RANK before a process
    group exists)."""
    if torch.distributed.is_initialized():
        return torch.distributed.get_rank()
    return int(os.environ.get("RANK", 0))


def _tpu_world_size():
    """Added by tpu-migrate: the number of processes, as xr.world_size() (torchrun's WORLD_SIZE before a
    process group exists)."""
    if torch.distributed.is_initialized():
        return torch.distributed.get_world_size()
    return int(os.environ.get("WORLD_SIZE", 1))


def _tpu_all_reduce_gradients(optimizer):
    """Added by tpu-migrate: average the gradients over the processes, as xm.reduce_gradients did
    (xm.optimizer_step = this + optimizer.step())."""
    if not _tpu_distributed():
        return
    world = torch.distributed.get_world_size()
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.grad is not None:
                torch.distributed.all_reduce(p.grad)
                p.grad.div_(world)


def _tpu_mesh_reduce(tag, data, reduce_fn):
    """Added by tpu-migrate: xm.mesh_reduce: `reduce_fn` over every process's copy of `data` (on the CPU)."""
    data = torch.utils._pytree.tree_map(lambda t: t.cpu() if isinstance(t, torch.Tensor) else t, data)
    if not _tpu_distributed():
        return reduce_fn([data])
    gathered = [None] * torch.distributed.get_world_size()
    torch.distributed.all_gather_object(gathered, data)
    return reduce_fn(gathered)


def _tpu_rendezvous(tag, payload=b""):
    """Added by tpu-migrate: xm.rendezvous: wait for every process; returns each process's payload."""
    if not _tpu_distributed():
        return [payload]
    gathered = [None] * torch.distributed.get_world_size()
    torch.distributed.all_gather_object(gathered, payload)
    return gathered


class _TpuDeviceLoader:
    """Added by tpu-migrate: moves each batch to `device`, as pl.MpDeviceLoader did."""

    def __init__(self, loader, device):
        self.loader = loader
        self.device = device

    def __len__(self):
        return len(self.loader)

    def __iter__(self):
        for batch in self.loader:
            yield torch.utils._pytree.tree_map(
                lambda t: t.to(self.device, non_blocking=True) if isinstance(t, torch.Tensor) else t, batch
            )


def get_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--device", default=None, help="override the device (e.g. cpu)")
    p.add_argument("--ckpt", default=None)
    return p.parse_args()


def make_data(n=512, dim=20, classes=4):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(n, dim, generator=gen)
    w = torch.randn(dim, classes, generator=gen)
    y = (x @ w).argmax(dim=1)
    return TensorDataset(x, y)


def _mp_fn(index, args):
    torch.manual_seed(1)
    device = torch.device(args.device) if args.device else torch.device("tpu")
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 4)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loader = DataLoader(make_data(), batch_size=args.batch_size, shuffle=False, drop_last=True)
    train_loader = _TpuDeviceLoader(loader, device)

    step = 0
    while step < args.steps:
        for x, y in train_loader:
            if step >= args.steps:
                break
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            _tpu_all_reduce_gradients(opt)
            opt.step()
            if _tpu_rank() == 0:
                print(f"step {step} loss {loss.item():.6f}")
            step += 1

    acc = (model(next(iter(train_loader))[0]).argmax(1) == next(iter(train_loader))[1]).float().mean().item()
    acc = _tpu_mesh_reduce("accuracy", acc, np.mean)
    if _tpu_rank() == 0:
        print(f"accuracy {acc:.3f} on {_tpu_world_size()} replica(s), ordinal {_tpu_rank()}")
    if args.ckpt:
        if int(os.environ.get("LOCAL_RANK", 0)) == 0:
            torch.save(torch.utils._pytree.tree_map(lambda t: t.cpu() if isinstance(t, torch.Tensor) else t, model.state_dict()), args.ckpt)
    _tpu_rendezvous("done")


if __name__ == "__main__":
    _mp_fn(int(os.environ.get("LOCAL_RANK", 0)), get_args())
