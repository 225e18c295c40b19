"""The bundled sample projects the demo migrates and runs, and how each runs on a device: plain data, light
enough for ``tpu-bench demo --help`` (which lists them) to import no torch or pandas."""

from __future__ import annotations

from dataclasses import dataclass

RTOL = 1e-3
"""Relative tolerance for loss agreement between "tpu" and "cpu" (both run fp32)."""
ATOL = 1e-5
"""Absolute tolerance added to RTOL·|loss_cpu|."""


@dataclass(frozen=True)
class Sample:
    """One bundled sample project and how to run its migrated form on a device.

    ``cpu_args``/``tpu_args``: extra arguments for each device. The tpu run keeps the migrated default
    device (``"tpu"``) so it exercises what the migration wrote; the cpu run forces the CPU.
    ``common_args`` pin what must be equal on both sides for a fair comparison (e.g. fp32).
    """

    name: str
    path: str
    what: str
    runnable: bool = True
    kind: str = "script"  # or "notebook"
    common_args: tuple[str, ...] = ()
    cpu_args: tuple[str, ...] = ("--device", "cpu")
    tpu_args: tuple[str, ...] = ()
    distributed: bool = False
    why_not_run: str = ""
    rtol: float = RTOL
    precision_note: str = "fp32 on both devices"


SAMPLES: tuple[Sample, ...] = (
    Sample(
        "cuda_ddp",
        "cuda_ddp/train.py",
        "CUDA: argparse --device, DDP (nccl, LOCAL_RANK), AMP + GradScaler, "
        "cuDNN flags, checkpoint with map_location",
        common_args=("--dtype", "float32"),
        distributed=True,
        precision_note="fp32 on both devices (--dtype float32; the migrated default bfloat16 would turn "
        "autocast on for the accelerator only)",
    ),
    Sample(
        "xla_legacy",
        "xla_legacy/train.py",
        "torch_xla legacy: xmp.spawn, MpDeviceLoader, optimizer_step, "
        "mesh_reduce, master_print, metrics report",
    ),
    Sample(
        "xla_modern",
        "xla_modern/train.py",
        "torch_xla modern: torch_xla.device/sync/launch, xr.world_size, 'xla' process group",
    ),
    Sample(
        "xla_spmd",
        "xla_spmd/train.py",
        "torch_xla SPMD (GSPMD sharding annotations)",
        runnable=False,
        why_not_run="flagged, not rewritten: TorchTPU has no GSPMD; the port to DTensor is a design decision "
        "left to a human (see its TODO comments)",
    ),
    Sample(
        "notebook",
        "notebook/train.ipynb",
        "a CUDA notebook (magics, ! shell lines, autocast)",
        kind="notebook",
        cpu_args=(),
        tpu_args=(),
        rtol=2e-2,
        precision_note='its autocast runs bf16 on the accelerator ("tpu") and is off on cpu (fp32), so the '
        "tolerance is bf16-sized (rtol 2e-2)",
    ),
)


def sample(name: str) -> Sample:
    for s in SAMPLES:
        if s.name == name:
            return s
    raise KeyError(f"unknown sample {name!r}; known: {', '.join(s.name for s in SAMPLES)}")
