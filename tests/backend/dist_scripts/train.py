"""Worker: train a tiny MLP on "tpu" data-parallel and print the per-step global losses.

    python train.py single            # one process, the whole global batch
    torchrun --nproc_per_node=2 train.py ddp|ddp_compiled|fsdp [tpu_dist|tpu|auto]
    python train.py spawn             # torch.multiprocessing.spawn of 2 DDP workers

Rank 0 prints one line ``LOSSES <json list>``; the global loss of a step is the mean over the global
batch (each rank's local mean loss, averaged over ranks), so every mode must print the same numbers.
"""

from __future__ import annotations

import faulthandler
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

STEPS = 4
GLOBAL_BATCH = 8


def data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(123)
    x = torch.randn(STEPS, GLOBAL_BATCH, 6, generator=g)
    y = torch.randn(STEPS, GLOBAL_BATCH, 2, generator=g)
    return x, y


def model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 2))


def train(mode: str, rank: int, world: int) -> list[float]:
    m = model().to("tpu")
    if mode in ("ddp", "spawn", "ddp_compiled"):
        from torch.nn.parallel import DistributedDataParallel as DDP

        m = DDP(m)  # no device_ids, as on TorchTPU
        if mode == "ddp_compiled":
            m = torch.compile(m, backend="tpu")
    elif mode == "fsdp":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh("tpu", (world,))  # also initialises the default group if needed
        for layer in m:
            if isinstance(layer, nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(m, mesh=mesh)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    xs, ys = data()
    per = GLOBAL_BATCH // world
    losses = []
    for s in range(STEPS):
        x = xs[s, rank * per : (rank + 1) * per].to("tpu")
        y = ys[s, rank * per : (rank + 1) * per].to("tpu")
        opt.zero_grad()
        loss = nn.functional.mse_loss(m(x), y)
        loss.backward()
        opt.step()
        g = loss.detach().clone()
        if world > 1:
            dist.all_reduce(g)
        losses.append(float(g.cpu()) / world)
    return losses


def _worker(rank: int, world: int, port: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(rank), WORLD_SIZE=str(world))
    dist.init_process_group("tpu_dist", rank=rank, world_size=world)
    losses = train("spawn", rank, world)
    if rank == 0:
        print("LOSSES " + json.dumps(losses), flush=True)
    dist.destroy_process_group()


def main() -> None:
    faulthandler.dump_traceback_later(int(os.environ.get("TPU_DIST_TEST_TIMEOUT", "150")), exit=True)
    mode = sys.argv[1]
    if mode == "single":
        print("LOSSES " + json.dumps(train(mode, 0, 1)), flush=True)
        return
    if mode == "spawn":
        import torch.multiprocessing as mp

        mp.spawn(_worker, args=(2, sys.argv[2]), nprocs=2, join=True)
        return
    backend = sys.argv[2] if len(sys.argv) > 2 else "tpu_dist"
    if backend != "auto":  # "auto": no init_process_group; init_device_mesh("tpu", ...) does it
        dist.init_process_group(backend)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    losses = train(mode, rank, world)
    if dist.get_rank() == 0:
        print("LOSSES " + json.dumps(losses), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
