"""Data-parallel training with torch_xla SPMD (GSPMD sharding annotations).

TorchTPU has no GSPMD, so tpu-migrate flags this script instead of rewriting it: the port to DTensor
(init_device_mesh("tpu", ...), distribute_tensor, parallelize_module) is a design decision.
"""

import numpy as np
import torch
import torch.nn as nn
import torch_xla
import torch_xla.distributed.spmd as xs
import torch_xla.runtime as xr

xr.use_spmd()


def main(steps=5):
    device = torch_xla.device()
    num_devices = xr.global_runtime_device_count()
    mesh = xs.Mesh(np.arange(num_devices), (num_devices, 1), ("data", "model"))
    model = nn.Linear(16, 16).to(device)
    xs.mark_sharding(model.weight, mesh, ("model", None))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(steps):
        x = torch.randn(32, 16).to(device)
        xs.mark_sharding(x, mesh, ("data", None))
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
        print(f"step {step} loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
