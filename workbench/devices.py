"""Which devices are present, what they really are, and how to synchronise them.

The "tpu" device of this project may execute through JAX on the host CPU; ``describe_device`` reports
the platform JAX actually uses so that such a run is labelled "tpu via XLA:CPU", never as a TPU.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass

import torch

from tpu_workbench.bench.errors import WorkbenchError

KNOWN_DEVICES = ("cpu", "cuda", "tpu")


@dataclass(frozen=True)
class DeviceInfo:
    """What a device string means on this host. ``chip`` is a catalog name or None (host CPU,
    or an emulated TPU whose work runs on some other processor)."""

    device: str
    name: str
    platform: str
    chip: str | None
    is_emulated: bool


def _ensure_backend() -> None:
    """Import our backend so "tpu" is registered; a broken backend must not break cpu measurement."""
    try:
        from tpu_workbench import backend  # noqa: F401  # lazy: optional

        register = getattr(backend, "register", None)
        if callable(register):
            register()
    except Exception:  # noqa: BLE001 - any backend failure just means "tpu" is absent
        pass


def tpu_present() -> bool:
    """True when the current accelerator is a "tpu" device (our backend or the real TorchTPU)."""
    _ensure_backend()
    try:
        acc = torch.accelerator.current_accelerator()
    except Exception:  # noqa: BLE001
        return False
    return acc is not None and acc.type == "tpu"


def present_devices() -> list[str]:
    """cpu always; cuda if available; tpu if it is the current accelerator."""
    devices = ["cpu"]
    if torch.cuda.is_available():
        devices.append("cuda")
    if tpu_present():
        devices.append("tpu")
    return devices


def check_device(device: str) -> str:
    """Return the device type or raise naming the devices present here."""
    kind = device.split(":")[0]
    present = present_devices()
    if kind not in present:
        hint = "" if kind in KNOWN_DEVICES else f" (known device types: {', '.join(KNOWN_DEVICES)})"
        raise WorkbenchError(
            f"device {device!r} is not present on this host; present: {', '.join(present)}{hint}"
        )
    if ":" in device:
        _check_index(device, kind)
    return kind


def _device_count(kind: str) -> int:
    if kind == "cpu":
        return 1
    if kind == "cuda":
        return torch.cuda.device_count()
    try:
        return torch.accelerator.device_count()
    except Exception:  # noqa: BLE001 - an accelerator that cannot count its devices has one
        return 1


def _check_index(device: str, kind: str) -> None:
    """``tpu:7`` on a host with one tpu is refused up front, like an absent device type."""
    text = device.split(":", 1)[1]
    count = _device_count(kind)
    if not (text.isdigit() and text.isascii()) or int(text) >= count:
        valid = ", ".join(f"{kind}:{i}" for i in range(min(count, 8))) + (", ..." if count > 8 else "")
        raise WorkbenchError(f"device {device!r} is not present on this host; {kind} devices here: {valid}")


def synchronize(device: str) -> None:
    """Wait for queued work on an accelerator (no-op on cpu)."""
    if device.split(":")[0] != "cpu" and torch.accelerator.is_available():
        torch.accelerator.synchronize()


def cpu_name() -> str:
    """Host CPU model name (from /proc/cpuinfo on Linux)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _jax_platform() -> str:
    try:
        import jax  # lazy: jax

        dev = jax.devices()[0]
        return f"XLA:{dev.platform.upper()} (JAX {jax.__version__}, {dev.device_kind})"
    except Exception as exc:  # noqa: BLE001
        return f"unknown JAX platform ({type(exc).__name__})"


def describe_device(device: str, catalog=None) -> DeviceInfo:
    """Name, platform and catalog chip of ``device``; matching the chip needs a catalog."""
    kind = device.split(":")[0]
    if kind == "cpu":
        return DeviceInfo(
            "cpu", cpu_name(), f"host CPU ({platform.machine()}, torch {torch.__version__})", None, False
        )
    if kind == "cuda":
        name = torch.cuda.get_device_name()
        chip = catalog.match_device_name(name) if catalog is not None else None
        return DeviceInfo("cuda", name, f"CUDA {torch.version.cuda}", chip.name if chip else None, False)
    if kind == "tpu":
        jax_plat = _jax_platform()
        emulated = "XLA:TPU" not in jax_plat
        if emulated:
            return DeviceInfo("tpu", f"tpu via {jax_plat}", f"tpu via {jax_plat}", None, True)
        try:
            import jax  # lazy: jax

            name = jax.devices()[0].device_kind
        except Exception:  # noqa: BLE001
            name = "TPU"
        chip = catalog.match_device_name(name) if catalog is not None else None
        return DeviceInfo("tpu", name, jax_plat, chip.name if chip else None, False)
    raise WorkbenchError(f"device {device!r} unknown; known device types: {', '.join(KNOWN_DEVICES)}")
