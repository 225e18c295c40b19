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


def get_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--device", default=None, help="override the device (e.g. cpu)")
    return p.parse_args()


def train(index, args):
    if "WORLD_SIZE" in os.environ:
        dist.init_process_group("tpu_dist", init_method="env://")
    device = torch.device(args.device) if args.device else torch.device("tpu")
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
        if _tpu_rank() == 0:
            print(f"step {step} loss {loss.item():.6f}")
    if _tpu_rank() == 0:
        print(f"trained on {_tpu_world_size()} process(es), device type {device.type}")
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    train(int(os.environ.get("LOCAL_RANK", 0)), get_args())
