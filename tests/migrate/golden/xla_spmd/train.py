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

# TODO(tpu-migrate TPU901): `xr.use_spmd`: SPMD is not supported by TorchTPU; use DTensor (init_device_mesh("tpu", ...), distribute_tensor, parallelize_module) or FSDP2 fully_shard
xr.use_spmd()


def main(steps=5):
    # TODO(tpu-migrate TPU901): `torch_xla.device` in an SPMD program: port it together with the sharding design (DTensor on TorchTPU); not rewritten
    device = torch_xla.device()
    # TODO(tpu-migrate TPU901): `xr.global_runtime_device_count` in an SPMD program: port it together with the sharding design (DTensor on TorchTPU); not rewritten
    num_devices = xr.global_runtime_device_count()
    # TODO(tpu-migrate TPU901): `xs.Mesh`: SPMD is not supported by TorchTPU; use DTensor (init_device_mesh("tpu", ...), distribute_tensor, parallelize_module) or FSDP2 fully_shard
    mesh = xs.Mesh(np.arange(num_devices), (num_devices, 1), ("data", "model"))
    model = nn.Linear(16, 16).to(device)
    # TODO(tpu-migrate TPU901): `xs.mark_sharding`: SPMD is not supported by TorchTPU; use DTensor (init_device_mesh("tpu", ...), distribute_tensor, parallelize_module) or FSDP2 fully_shard
    xs.mark_sharding(model.weight, mesh, ("model", None))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(steps):
        x = torch.randn(32, 16).to(device)
        # TODO(tpu-migrate TPU901): `xs.mark_sharding`: SPMD is not supported by TorchTPU; use DTensor (init_device_mesh("tpu", ...), distribute_tensor, parallelize_module) or FSDP2 fully_shard
        xs.mark_sharding(x, mesh, ("data", None))
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        # TODO(tpu-migrate TPU901): `torch_xla.sync` in an SPMD program: port it together with the sharding design (DTensor on TorchTPU); not rewritten
        torch_xla.sync()
        print(f"step {step} loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
