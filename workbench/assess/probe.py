"""What assess observes inside the user's process, installed by a ``sitecustomize`` on ``PYTHONPATH`` (so the
user's code is unchanged): per top-level module call its class, parameters, the devices its parameters are on,
the input shapes it saw (each new shape is a new compilation on a TPU) and the tokens it processed; in the
"cpu" run the FLOPs of its first call (``torch.utils.flop_counter.FlopCounterMode``); Dynamo's recompile
messages; the ops the "tpu" backend ran on the CPU; in the "tpu" run, from the first model call on, the ATen
overloads that reached the device (``tpu_workbench.backend.coverage.recording``), which ``torchtpu_gaps``
checks against TorchTPU 0.2.0's op table. Written as JSON at exit, one file per process.

Nothing here may break the user's run: every observation is guarded, and a failed FLOP count falls back to
the plain call.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import sys
import threading

MAX_SHAPES = 50
MAX_FLOP_MODULES = 3
STUB = "from tpu_workbench.bench.assess.probe import install\ninstall()\n"

_local = threading.local()
_state: dict = {"modules": {}, "recompiles": [], "aten_ops": set(), "device_ops": None}
_recorder = None


def _record_device_ops() -> None:
    """In the "tpu" run, once the device's dispatcher is loaded: count what reaches it (until exit)."""
    if _state["device_ops"] is not None or os.environ.get("TPU_ASSESS_DEVICE") != "tpu":
        return
    if "tpu_workbench.backend.dispatch" not in sys.modules:
        return
    from tpu_workbench.backend import coverage  # lazy: jax (already loaded by the run)

    recorder = coverage.recording()  # left open for the process's whole run: kept, or collecting it ends it
    _state["device_ops"] = recorder.__enter__()
    _state["device_recorder"] = recorder


def _op_recorder():
    """A dispatch mode that records the ATen op names a model's forward runs (made once, on first use)."""
    global _recorder
    if _recorder is None:
        from torch.utils._python_dispatch import TorchDispatchMode  # lazy: heavy

        class Record(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                _state["aten_ops"].add(func.name())
                return func(*args, **(kwargs or {}))

        _recorder = Record
    return _recorder()


def _tensors(args, kwargs):
    import torch  # lazy: heavy

    out = [a for a in args if isinstance(a, torch.Tensor)]
    out += [v for v in kwargs.values() if isinstance(v, torch.Tensor)]
    return out


def _tokens(tensors) -> int:
    if not tensors:
        return 0
    t = tensors[0]
    if not t.is_floating_point() and not t.is_complex():
        return int(t.numel())  # token ids: batch x sequence
    return int(t.shape[0]) if t.dim() else 1  # samples (images, feature rows)


HF_KEYS = (
    "model_type", "vocab_size", "hidden_size", "n_embd", "num_hidden_layers", "n_layer", "num_attention_heads",
    "n_head", "num_key_value_heads", "intermediate_size", "n_inner", "hidden_act", "activation_function",
    "tie_word_embeddings", "head_dim", "is_encoder_decoder", "num_local_experts", "num_experts",
)  # fmt: skip


def _hf_config(module) -> dict | None:
    """The shape fields of a transformers model's config (for the full projection), else None."""
    cfg = getattr(module, "config", None)
    if cfg is None or not hasattr(cfg, "to_dict"):
        return None
    try:
        d = cfg.to_dict()
    except Exception:  # noqa: BLE001
        return None
    return {k: d[k] for k in HF_KEYS if isinstance(d.get(k), int | float | str | bool)}


def _unit(tensors) -> str:
    """What ``_tokens`` counts for this module: token ids, or samples (rows of a float input)."""
    if tensors and not tensors[0].is_floating_point() and not tensors[0].is_complex():
        return "token"
    return "sample"


def _record(module, tensors) -> dict:
    key = type(module).__module__ + "." + type(module).__qualname__
    rec = _state["modules"].get(key)
    if rec is None:
        params = list(module.parameters())
        rec = {
            "class": key,
            "parameters": sum(p.numel() for p in {id(p): p for p in params}.values()),
            "param_devices": sorted({p.device.type for p in params}),
            "input_devices": [],
            "calls": 0,
            "tokens": 0,
            "shapes": [],
            "distinct_shapes": 0,
            "flops": None,
            "flop_tokens": None,
            "unit": _unit(tensors),
            "hf_config": _hf_config(module),
        }
        _state["modules"][key] = rec
    rec["calls"] += 1
    rec["tokens"] += _tokens(tensors)
    devs = sorted(set(rec["input_devices"]) | {t.device.type for t in tensors})
    rec["input_devices"] = devs
    sig = [list(t.shape) for t in tensors[:4]]
    if sig not in rec["shapes"]:
        rec["distinct_shapes"] += 1
        if len(rec["shapes"]) < MAX_SHAPES:
            rec["shapes"].append(sig)
    return rec


def _wrap(orig, count_flops: bool):
    def call(self, *args, **kwargs):
        if getattr(_local, "depth", 0):
            return orig(self, *args, **kwargs)
        _local.depth = 1
        try:
            try:
                _record_device_ops()
                tensors = _tensors(args, kwargs)
                rec = _record(self, tensors)
            except Exception:  # noqa: BLE001 - observing must not break the run
                rec = None
            counted = sum(r["flops"] is not None for r in _state["modules"].values())
            if count_flops and rec is not None and rec["flops"] is None and counted < MAX_FLOP_MODULES:
                try:
                    from torch.utils.flop_counter import FlopCounterMode  # lazy: heavy

                    with FlopCounterMode(display=False) as fc, _op_recorder():
                        out = orig(self, *args, **kwargs)
                    rec["flops"] = int(fc.get_total_flops())
                    rec["flop_tokens"] = _tokens(tensors)
                    return out
                except Exception:  # noqa: BLE001 - count failed (or the call did): run it plainly
                    rec["flops"] = -1
            if (
                count_flops and type(self).__name__ != "OptimizedModule"
            ):  # the cpu run only; never under Dynamo
                try:
                    mode = _op_recorder()
                except Exception:  # noqa: BLE001
                    mode = None
                if mode is not None:
                    with mode:
                        return orig(self, *args, **kwargs)
            return orig(self, *args, **kwargs)
        finally:
            _local.depth = 0

    return call


class _Recompiles(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        try:
            msg = record.getMessage()
        except Exception:  # noqa: BLE001
            return
        if "ecompil" in msg and len(_state["recompiles"]) < 20:
            _state["recompiles"].append(msg.strip()[:400])


def _dump(path: str) -> None:
    data = {k: v for k, v in _state.items() if k != "device_recorder"}
    data["aten_ops"] = sorted(_state["aten_ops"])
    data["device_ops"] = dict(_state["device_ops"] or {})
    dispatch = sys.modules.get("tpu_workbench.backend.dispatch")
    data["cpu_fallback_ops"] = dict(getattr(dispatch, "FALLBACK_COUNTS", {}) or {})
    compile_mod = sys.modules.get("tpu_workbench.backend.compile")
    data["tpu_compile_stats"] = compile_mod.stats() if compile_mod else None
    try:
        with open(f"{path}.{os.getpid()}.json", "w") as f:
            json.dump(data, f, default=str)
    except OSError:
        pass


def install() -> None:
    """Hook the process when ``TPU_ASSESS_PROBE`` names an output prefix (otherwise do nothing)."""
    out = os.environ.get("TPU_ASSESS_PROBE")
    if not out:
        return
    try:
        import torch  # lazy: heavy
    except Exception:  # noqa: BLE001 - a project without torch: nothing to observe
        return
    default = os.environ.get("TPU_ASSESS_DEFAULT_DEVICE")
    if default:
        try:
            torch.set_default_device(default)
        except Exception as exc:  # noqa: BLE001 - say so in the run's log, run on
            print(f"tpu-bench assess: could not make {default!r} the default device: {exc}", file=sys.stderr)
    torch.nn.Module.__call__ = _wrap(torch.nn.Module.__call__, os.environ.get("TPU_ASSESS_FLOPS") == "1")
    try:
        torch._logging.set_logs(recompiles=True)
        logging.getLogger("torch._dynamo").addHandler(_Recompiles())
    except Exception:  # noqa: BLE001 - older torch
        pass
    atexit.register(_dump, out)
