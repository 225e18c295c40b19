"""Workloads: decoder LM presets (dense and MoE), a small CNN, and phase step builders.

Names, presets and configs (``config``) import no torch, so ``tpu-bench --help`` stays light; the models and
step builders load torch on first use (module ``__getattr__``)."""

from importlib import import_module

from tpu_workbench.bench.workloads.config import (
    PHASES,
    PRESETS,
    VISION_PHASES,
    VISION_WORKLOADS,
    DecoderConfig,
    VisionConfig,
    get_config,
    preset_names,
    workload_names,
)

_TORCH_NAMES = {
    "Decoder": "decoder",
    "KVCache": "decoder",
    "build_model": "decoder",
    "Step": "steps",
    "decoder_step": "steps",
    "vision_step": "steps",
    "build_vision_model": "vision",
}


def __getattr__(name: str):  # PEP 562: the torch-backed names, imported when first asked for
    if name in _TORCH_NAMES:
        return getattr(import_module(f"{__name__}.{_TORCH_NAMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DecoderConfig",
    "Decoder",
    "KVCache",
    "PRESETS",
    "PHASES",
    "VISION_PHASES",
    "Step",
    "VisionConfig",
    "VISION_WORKLOADS",
    "build_model",
    "build_vision_model",
    "decoder_step",
    "get_config",
    "preset_names",
    "vision_step",
    "workload_names",
]
