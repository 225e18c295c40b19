"""Checkpoint save -> resume -> continue, the nanoGPT/ImageNet-example way, through real files.

Run as a script (``python -m idioms.resume OUT_DIR``) so that an interpreter crash inside ``torch.load`` fails
the tests that read its report instead of killing the test run. It prints one JSON object: the reference
losses of an uninterrupted run and, per case, the losses after resuming (or the error).

A case is (where the saved tensors lived, the ``map_location`` spelling, ``weights_only``). The model trains
on "tpu" for ``STEPS`` steps, its state is saved (as is, or moved to the CPU first, as many scripts do), the
run continues for ``STEPS`` more steps (the reference). Each case loads the file, reports where its tensors
landed and whether every one equals what was saved (values and dtype), and loads it into a fresh model,
optimizer, scheduler and scaler; the cases in ``CONTINUE`` (every spelling, both ``weights_only`` values and
all three checkpoint kinds appear among them) then train ``STEPS`` more steps, whose losses must equal the
reference exactly. ``trained_on_cpu`` is a checkpoint written by a CPU-only run, resumed on "tpu"; the
tests compare its continuation with the CPU run's own (close, not equal: different kernels).
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path
from typing import Any

import torch
from torch.serialization import default_restore_location

from idioms.tiny import TinyGPT, token_batches

STEPS = 3
KINDS = ("on_tpu", "on_cpu", "trained_on_cpu")
MAP_LOCATIONS: dict[str, Any] = {
    "none": None,
    "cpu": "cpu",
    "str": "tpu",
    "str:0": "tpu:0",
    "device": torch.device("tpu"),
    "dict": {"cpu": "tpu", "tpu:0": "tpu"},
    "callable-host": lambda storage, loc: storage,
    "callable-restore": lambda storage, loc: default_restore_location(storage, "tpu"),
}


CONTINUE = {
    "on_tpu/none/weights_only=True", "on_tpu/str/weights_only=False", "on_tpu/callable-host/weights_only=True",
    "on_cpu/device/weights_only=True", "on_cpu/dict/weights_only=False", "on_cpu/callable-restore/weights_only=True",
    "trained_on_cpu/str:0/weights_only=True", "trained_on_cpu/cpu/weights_only=False",
}  # fmt: skip


def build(device: str, seed: int):
    torch.manual_seed(seed)
    model = TinyGPT().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-2, weight_decay=0.1, betas=(0.9, 0.95))
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4 * STEPS, eta_min=1e-3)
    scaler = torch.amp.GradScaler(device, init_scale=2.0**10)
    return model, opt, sched, scaler


def train(model, opt, sched, scaler, batches, device: str) -> list[float]:
    losses = []
    for x, y in batches:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        _, loss = model(x, y)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        sched.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses


def host_copy(obj: Any) -> Any:
    """A CPU snapshot: a copy even of CPU tensors (the optimizer's step counters change in place later)."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return {k: host_copy(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [host_copy(v) for v in obj]
    return obj


def checkpoint(model, opt, sched, scaler, step: int) -> dict:
    return {"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
            "scaler": scaler.state_dict(), "iter_num": step, "config": {"lr": 3e-2, "name": "tiny"},
            "cpu_rng": torch.get_rng_state()}  # fmt: skip


def tensor_devices(obj: Any) -> list[str]:
    if isinstance(obj, torch.Tensor):
        return [obj.device.type]
    if isinstance(obj, dict):
        return [d for v in obj.values() for d in tensor_devices(v)]
    if isinstance(obj, list | tuple):
        return [d for v in obj for d in tensor_devices(v)]
    return []


def tensors(obj: Any, prefix: str = "") -> dict[str, torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        return {prefix: obj}
    if isinstance(obj, dict):
        return {k: v for key, val in obj.items() for k, v in tensors(val, f"{prefix}/{key}").items()}
    if isinstance(obj, list | tuple):
        return {k: v for i, val in enumerate(obj) for k, v in tensors(val, f"{prefix}/{i}").items()}
    return {}


def mismatches(loaded: Any, saved: Any) -> list[str]:
    """Names of the tensors whose dtype, shape or values differ (bit-exact) between two nested states."""
    got, want = tensors(loaded), tensors(saved)
    bad = sorted(set(got) ^ set(want))
    for name in sorted(set(got) & set(want)):
        a, b = got[name].detach().cpu(), want[name].detach().cpu()
        if a.dtype != b.dtype or a.shape != b.shape or not torch.equal(a, b):
            bad.append(name)
    return bad


def resume(path: Path, map_location: Any, weights_only: bool, saved: dict, later, train_on: bool) -> dict:
    ck = torch.load(path, map_location=map_location, weights_only=weights_only)
    result: dict[str, Any] = {"model_devices": sorted(set(tensor_devices(ck["model"]))),
                              "loaded_mismatches": mismatches(ck, saved)}  # fmt: skip
    model, opt, sched, scaler = build(
        "tpu", seed=99
    )  # a different init: only the checkpoint can make it match
    model.load_state_dict(ck["model"])
    opt.load_state_dict(ck["optimizer"])
    sched.load_state_dict(ck["scheduler"])
    scaler.load_state_dict(ck["scaler"])
    result["state_mismatches"] = mismatches({"model": model.state_dict(), "optimizer": opt.state_dict()},
                                            {"model": saved["model"], "optimizer": saved["optimizer"]})  # fmt: skip
    result["iter_num"], result["config"] = ck["iter_num"], ck["config"]
    if train_on:
        result["losses"] = train(model, opt, sched, scaler, later, "tpu")
    return result


def main(out: Path) -> dict:
    batches = token_batches(2 * STEPS, seed=5)
    first, later = batches[:STEPS], batches[STEPS:]
    report: dict[str, Any] = {"cases": {}}

    model, opt, sched, scaler = build("tpu", seed=0)
    report["first"] = train(model, opt, sched, scaler, first, "tpu")
    states = {"on_tpu": host_copy(checkpoint(model, opt, sched, scaler, STEPS))}
    torch.save(checkpoint(model, opt, sched, scaler, STEPS), out / "on_tpu.pt")
    torch.save(states["on_tpu"], out / "on_cpu.pt")
    states["on_cpu"] = states["on_tpu"]
    report["reference"] = train(model, opt, sched, scaler, later, "tpu")

    cpu_model, cpu_opt, cpu_sched, cpu_scaler = build("cpu", seed=0)
    train(cpu_model, cpu_opt, cpu_sched, cpu_scaler, first, "cpu")
    states["trained_on_cpu"] = host_copy(checkpoint(cpu_model, cpu_opt, cpu_sched, cpu_scaler, STEPS))
    torch.save(states["trained_on_cpu"], out / "trained_on_cpu.pt")
    report["cpu_reference"] = train(cpu_model, cpu_opt, cpu_sched, cpu_scaler, later, "cpu")

    for saved in KINDS:
        for name, ml in MAP_LOCATIONS.items():
            for weights_only in (True, False):
                key = f"{saved}/{name}/weights_only={weights_only}"
                try:
                    report["cases"][key] = resume(out / f"{saved}.pt", ml, weights_only, states[saved], later,
                                                  key in CONTINUE)  # fmt: skip
                except Exception as e:  # recorded per case; the test names the case that failed
                    report["cases"][key] = {
                        "error": f"{type(e).__name__}: {e}",
                        "trace": traceback.format_exc(),
                    }
                print(f"done {key}", file=sys.stderr, flush=True)
    return report


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]))))
