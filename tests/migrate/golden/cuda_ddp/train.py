"""Tiny character-level language model trained the CUDA way.

Written like many GPU training scripts: argparse with --device/--no-cuda, DDP over NCCL with
LOCAL_RANK (single process when RANK/WORLD_SIZE are unset, as in nanoGPT), AMP with GradScaler,
cuDNN flags, and a checkpoint saved and loaded with map_location.

    python train.py --steps 5              # one GPU (or CPU with --no-cuda)
    torchrun --nproc_per_node=2 train.py   # DDP
"""

import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


def _tpu_backend(backend):
    """Added by tpu-migrate: a process-group backend read from data (an option, a config, a dict): NCCL, the
    GPU's backend, becomes "tpu_dist"; any other name (gloo, mpi, another vendor's hccl) is kept; in a
    per-device string ("cuda:nccl,cpu:gloo") the GPU's entry becomes "tpu:tpu_dist" and the others are kept."""
    if backend is None:
        return backend
    if ":" in str(backend):
        entries = []
        for entry in str(backend).split(","):
            device, _, name = (part.strip().lower() for part in entry.partition(":"))
            entries.append("tpu:tpu_dist" if device == "cuda" or name == "nccl" else entry)
        return ",".join(dict.fromkeys(entries))
    return "tpu_dist" if str(backend).lower() == "nccl" else backend


def get_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="tpu", choices=["cpu", "cuda", "tpu"], help="device to train on")
    p.add_argument("--no-cuda", action="store_true", help="force the CPU")
    p.add_argument("--dist-backend", default="tpu_dist", help="process-group backend under torchrun")
    p.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--block", type=int, default=16)
    p.add_argument("--ckpt", default=None, help="save a checkpoint here and reload it at the end")
    return p.parse_args()


class TinyLM(nn.Module):
    def __init__(self, vocab=64, dim=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, idx, targets):
        x = self.emb(idx)
        x = x + self.fc2(F.relu(self.fc1(x)))
        logits = self.head(x)
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), targets.reshape(-1))


def get_batch(gen, batch_size, block, vocab=64):
    data = torch.randint(0, vocab, (batch_size, block + 1), generator=gen)
    return data[:, :-1], data[:, 1:]


def main():
    args = get_args()
    use_cuda = torch.accelerator.is_available() and not args.no_cuda and args.device != "cpu"
    ddp = int(os.environ.get("RANK", -1)) != -1
    if ddp:
        backend = args.dist_backend if use_cuda else "gloo"
        assert backend in ["gloo", "tpu_dist"], backend
        dist.init_process_group(backend=_tpu_backend(backend))
        rank = dist.get_rank()
        local_rank = int(os.environ["LOCAL_RANK"])
        device = "tpu" if use_cuda else "cpu"
    else:
        rank, local_rank = 0, 0
        device = args.device if use_cuda else "cpu"
    device_type = "tpu" if "tpu" in device else "cpu"

    torch.manual_seed(1337)
    if use_cuda:
        torch.manual_seed(1337)
    torch.set_float32_matmul_precision("high")

    ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[args.dtype]
    use_amp = device_type == "tpu" and args.dtype != "float32"
    scaler = torch.amp.GradScaler("tpu", enabled=(use_amp and args.dtype == "float16"))

    model = TinyLM().to(device)
    if ddp:
        model = DDP(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(0)

    for step in range(args.steps):
        x, y = get_batch(gen, args.batch_size, args.block)
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        with torch.autocast(device_type=device_type, dtype=ptdtype, enabled=use_amp):
            loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        if rank == 0:
            print(f"step {step} loss {loss.item():.6f}")

    if args.ckpt and rank == 0:
        raw = model.module if ddp else model
        torch.save({"model": raw.state_dict(), "step": args.steps}, args.ckpt)
        map_location = "tpu" if use_cuda else "cpu"
        state = torch.load(args.ckpt, map_location=map_location)
        raw.load_state_dict(state["model"])
    if use_cuda:
        torch.accelerator.synchronize()
    if ddp:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
