"""Backward runs on the thread that uses the device, not on PyTorch's per-device autograd worker.

PyTorch's autograd engine sends every node of a non-CPU device to a worker thread of its own. For a Python
backend that thread costs on every node: the engine's device-guard calls reach the Python guard across the GIL
from a thread that does not hold it (a tiny GPT train step measured 37.7 ms with the worker, 23.9 ms without,
on a 2-core host), and Python thread-locals such as ``torch.tpu.precision(...)`` are not visible in backward.
XLA dispatch is inline here, so the worker brings nothing. PyTorch's lazy and meta devices run backward on the
calling thread for the same kind of reason; this does it with PyTorch's public, thread-local switch
``torch.autograd.set_multithreading_enabled(False)``, set once per thread when the thread first moves host
data onto the device (which every thread that trains on it does). ``TORCH_TPU_AUTOGRAD_DEVICE_THREAD=1`` keeps
PyTorch's worker thread.
"""

from __future__ import annotations

import os
import threading

import torch

from tpu_workbench.backend import _torch_private as private


class _PerThread(threading.local):
    adopted = False


_this_thread = _PerThread()


def keep_device_thread() -> bool:
    """True when the user asked for PyTorch's autograd device thread (``TORCH_TPU_AUTOGRAD_DEVICE_THREAD=1``)."""
    return os.environ.get("TORCH_TPU_AUTOGRAD_DEVICE_THREAD", "0") == "1"


def adopt_calling_thread() -> None:
    """Make backward passes started on this thread run on it (once per thread; cheap after the first call)."""
    if _this_thread.adopted:
        return
    if private.current_graph_task_id() != -1:
        return  # inside some backward (maybe on an engine thread): decide on the user's thread instead
    _this_thread.adopted = True
    if not keep_device_thread():
        torch.autograd.set_multithreading_enabled(
            False
        )  # thread-local; stays set (set_grad_enabled's pattern)
