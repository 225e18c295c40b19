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


class _TpuDeviceLoader:
    """Added by tpu-migrate (TPU701): moves each batch to `device`, as pl.MpDeviceLoader did."""

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
            if torch.distributed.is_initialized() and torch.distributed.get_world_size() > 1:
                for _group in opt.param_groups:
                    for _p in _group["params"]:
                        if _p.grad is not None:
                            torch.distributed.all_reduce(_p.grad)
                            _p.grad.div_(torch.distributed.get_world_size())
            opt.step()
            if (torch.distributed.get_rank() if torch.distributed.is_initialized() else 0) == 0:
                print(f"step {step} loss {loss.item():.6f}")
            step += 1

    acc = (model(next(iter(train_loader))[0]).argmax(1) == next(iter(train_loader))[1]).float().mean().item()
    if torch.distributed.is_initialized():
        _tpu_migrate_gathered = [None] * torch.distributed.get_world_size()
        torch.distributed.all_gather_object(_tpu_migrate_gathered, acc)
    else:
        _tpu_migrate_gathered = [acc]
    acc = np.mean(_tpu_migrate_gathered)
    if (torch.distributed.get_rank() if torch.distributed.is_initialized() else 0) == 0:
        print(f"accuracy {acc:.3f} on {(torch.distributed.get_world_size() if torch.distributed.is_initialized() else 1)} replica(s), ordinal {(torch.distributed.get_rank() if torch.distributed.is_initialized() else 0)}")
    if args.ckpt:
        if int(os.environ.get("LOCAL_RANK", 0)) == 0:
            torch.save(torch.utils._pytree.tree_map(lambda t: t.cpu() if isinstance(t, torch.Tensor) else t, model.state_dict()), args.ckpt)
    if torch.distributed.is_initialized():
        torch.distributed.barrier()


if __name__ == "__main__":
    _mp_fn(int(os.environ.get("LOCAL_RANK", 0)), get_args())
