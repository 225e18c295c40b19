"""Sharing "tpu" tensors across processes like CUDA tensors: through host memory.

A JAX array has no inter-process handle, so a "tpu" tensor sent through ``torch.multiprocessing`` (a queue, a
pipe, a DataLoader worker's result) travels as a CPU tensor — in shared memory, as torch sends CPU tensors — and
is moved back to "tpu" in the receiving process (whose device is started by that move, as CUDA's is). Without
this, pickling falls back to the checkpoint format and the tensor arrived on the CPU.

DataLoader workers collate "tpu" samples with ``torch.stack`` (the stock collate asks the sample for a
shared-memory storage to stack into, which a wrapper has not: a ``TypedStorage`` TypeError before).
"""

from __future__ import annotations

from multiprocessing.reduction import ForkingPickler
from typing import Any

import torch

from tpu_workbench.backend import _torch_private as private
from tpu_workbench.backend.tensor import TpuTensor


def _rebuild_on_tpu(cpu: torch.Tensor, requires_grad: bool) -> torch.Tensor:
    t = cpu.to("tpu")
    return t.requires_grad_(requires_grad) if requires_grad else t


def _reduce_tpu(t: TpuTensor) -> tuple:
    if t.requires_grad and not t.is_leaf:
        raise RuntimeError(
            "Cowardly refusing to serialize non-leaf tensor which requires_grad, since autograd does not support "
            "crossing process boundaries.  If you just want to transfer the data, call detach() on the tensor "
            "before serializing (e.g., putting it on the queue)."
        )
    return (_rebuild_on_tpu, (t.detach().cpu(), t.requires_grad))


def _collate_tpu(batch: Any, *, collate_fn_map: Any = None) -> torch.Tensor:
    return torch.stack(list(batch), 0)


def install() -> None:
    """Register the reducer with multiprocessing's pickler and the collate rule with DataLoader."""
    ForkingPickler.register(TpuTensor, _reduce_tpu)
    private.default_collate_fn_map()[TpuTensor] = _collate_tpu
