"""Tiny MLP regressor trained the modern torch_xla way (torch_xla >= 2.5 style).

torch_xla.device(), torch_xla.sync(), torch_xla.runtime.world_size()/global_ordinal(),
torch_xla.launch and the 'xla' process group.

    python train.py --steps 5
"""

import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch_xla
import torch_xla.distributed.xla_backend  # noqa: F401  (registers the 'xla' process group)
import torch_xla.runtime as xr


def get_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--device", default=None, help="override the device (e.g. cpu)")
    return p.parse_args()


def train(index, args):
    if "WORLD_SIZE" in os.environ:
        dist.init_process_group("xla", init_method="xla://")
    device = torch.device(args.device) if args.device else torch_xla.device()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(8, 1, generator=gen)
    for step in range(args.steps):
        x = torch.randn(32, 8, generator=gen)
        y = x @ w
        x, y = x.to(device), y.to(device)
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        torch_xla.sync()
        if xr.global_ordinal() == 0:
            print(f"step {step} loss {loss.item():.6f}")
    if xr.global_ordinal() == 0:
        print(f"trained on {xr.world_size()} process(es), device type {device.type}")
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    torch_xla.launch(train, args=(get_args(),))
