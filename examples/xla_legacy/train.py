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
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
import torch_xla.distributed.parallel_loader as pl
import torch_xla.distributed.xla_multiprocessing as xmp
from torch.utils.data import DataLoader, TensorDataset

os.environ.setdefault("PJRT_DEVICE", "TPU")


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
    device = torch.device(args.device) if args.device else xm.xla_device()
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 4)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loader = DataLoader(make_data(), batch_size=args.batch_size, shuffle=False, drop_last=True)
    train_loader = pl.MpDeviceLoader(loader, device)

    step = 0
    while step < args.steps:
        for x, y in train_loader:
            if step >= args.steps:
                break
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            xm.optimizer_step(opt)
            xm.master_print(f"step {step} loss {loss.item():.6f}")
            step += 1

    acc = (model(next(iter(train_loader))[0]).argmax(1) == next(iter(train_loader))[1]).float().mean().item()
    acc = xm.mesh_reduce("accuracy", acc, np.mean)
    xm.master_print(f"accuracy {acc:.3f} on {xm.xrt_world_size()} replica(s), ordinal {xm.get_ordinal()}")
    if args.ckpt:
        xm.save(model.state_dict(), args.ckpt)
    xm.rendezvous("done")
    xm.master_print(met.metrics_report())


if __name__ == "__main__":
    xmp.spawn(_mp_fn, args=(get_args(),))
