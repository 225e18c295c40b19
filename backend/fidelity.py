"""The released TorchTPU 0.2.0 op table as data, the comparison with ours, and a fidelity mode.

``torchtpu_0_2_0_ops.json`` lists the aten overloads the real wheel registers for PrivateUse1 (read from the
wheel in a throwaway venv; how and when are in the file). An op that reaches our dispatcher (an op with its
own device kernel: composite ops decompose before) and is absent from that table will fail on a real TPU even
though it runs here. With fidelity on — ``TORCH_TPU_FIDELITY=torchtpu-0.2.0`` or ``set_fidelity(True)`` —
such an op raises ``NotImplementedError`` here too, so a test suite run on this machine predicts the device.
Ops with a CompositeExplicitAutograd kernel run through it on both, so they are never refused.
"""

from __future__ import annotations

import functools
import json
import os
import pathlib
from typing import Any

TABLE_FILE = pathlib.Path(__file__).with_name("torchtpu_0_2_0_ops.json")
_ENV = "TORCH_TPU_FIDELITY"


class _State:
    enabled = os.environ.get(_ENV, "").lower() in ("1", "torchtpu", "torchtpu-0.2.0")
    listeners: list = []


def set_fidelity(enabled: bool) -> None:
    """Refuse (True) or run (False, the default) ops that TorchTPU 0.2.0 does not register."""
    _State.enabled = bool(enabled)
    for cb in _State.listeners:
        cb()


def fidelity_enabled() -> bool:
    return _State.enabled


def on_change(cb: Any) -> None:
    _State.listeners.append(cb)


@functools.cache
def torchtpu_table() -> frozenset[str]:
    """The real wheel's PrivateUse1 aten overloads, as ``OpOverload.name()`` spells them (``aten::add.Tensor``)."""
    return frozenset(json.loads(TABLE_FILE.read_text())["overloads"])


def _op(name: str) -> str:
    """``aten::add_.Tensor`` -> ``add``: the op an overload belongs to (in-place and out= forms included)."""
    return name.removeprefix("aten::").split(".")[0].rstrip("_") or name


@functools.cache
def torchtpu_op_names() -> frozenset[str]:
    """The ops (483) the real table registers some overload of. The wheel registers ``add.out`` but not
    ``add.Tensor`` (it derives the functional and in-place forms), so fidelity is judged per op, not per
    overload: an op is absent when no overload of it is registered."""
    return frozenset(_op(n) for n in torchtpu_table())


def absent_on_torchtpu(func: Any) -> bool:
    """``func`` would find no kernel on the real device (``torchtpu_status`` says "absent")."""
    return torchtpu_status(func.name()) == "absent"


# Overloads this backend issues in place of the upstream op a model called (backend/composite.py: a one-op
# linear travels under mkldnn_linear's schema); the real wheel registers linear itself.
STAND_INS = {
    "aten::mkldnn_linear": "aten::linear",
    "aten::mkldnn_linear_backward": "aten::linear_backward",
}

# What the real wheel does with an overload that reaches the device, from best to worst.
STATUSES = ("registered", "sibling", "composite", "absent")


def torchtpu_status(name: str) -> str:
    """How TorchTPU 0.2.0 answers the overload ``name`` (``aten::add.Tensor``) when it reaches the device:
    "registered" (that exact overload is in the table), "sibling" (another overload of the same op is, e.g.
    ``add.out`` for ``add.Tensor``: the wheel derives the functional and in-place forms, so the op runs),
    "composite" (a CompositeImplicit/Explicit(NonFunctional) kernel runs it through other ops) or "absent" (no
    kernel, or a composite that forwards to its own ``out=`` form which has none: it fails on a real TPU)."""
    from tpu_workbench.backend import _torch_private as private  # lazy: startup

    name = STAND_INS.get(name, name)
    if name in torchtpu_table() or not name.startswith("aten::"):
        return "registered"
    if _op(name) in torchtpu_op_names():
        return "sibling"
    try:
        if private.dispatch_has_kernel_for_dispatch_key(name, "CompositeImplicitAutograd"):
            return "composite"
        if any(private.dispatch_has_kernel_for_dispatch_key(name, key) for key in _EXPLICIT):
            return "absent" if _out_form_needs_a_kernel(name) else "composite"
    except RuntimeError:  # an overload the dispatcher does not know
        pass
    return "absent"


_EXPLICIT = ("CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional")


def _out_form_needs_a_kernel(name: str) -> bool:
    """A CompositeExplicitAutograd functional that forwards to its own ``out=`` form (``median.dim`` calls
    ``median.dim_values``) fails on the device when that form needs a device kernel the wheel lacks."""
    import torch  # lazy: startup

    from tpu_workbench.backend import _torch_private as private  # lazy: startup

    packet = getattr(torch.ops.aten, name.removeprefix("aten::").split(".")[0], None)
    for overload in packet.overloads() if packet is not None else ():
        op = getattr(packet, overload)
        if not any(a.is_out for a in private.schema(op).arguments):
            continue
        if not any(
            private.dispatch_has_kernel_for_dispatch_key(op.name(), key)
            for key in ("CompositeImplicitAutograd", *_EXPLICIT)
        ):
            return True
    return False


def refusal_message(func: Any) -> str:
    return (
        f"operator '{func.name()}' is not registered by TorchTPU 0.2.0, so it fails on a real TPU; fidelity mode "
        f"({_ENV}) refuses it here too. Unset {_ENV} (or set_fidelity(False)) to run it anyway."
    )


def compare(ours: set[str], per_op: bool = False) -> dict[str, list[str]]:
    """Our overload names against the real table: both, only ours, only theirs (``per_op``: by op name)."""
    theirs: Any = torchtpu_table()
    if per_op:
        ours, theirs = {_op(n) for n in ours}, torchtpu_op_names()
    return {
        "both": sorted(ours & theirs),
        "only_ours": sorted(ours - theirs),
        "only_theirs": sorted(theirs - ours),
    }
