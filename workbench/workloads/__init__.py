"""Workloads: decoder LM presets (dense and MoE), a small CNN, and phase step builders."""

from tpu_workbench.bench.workloads.config import PRESETS, DecoderConfig, get_config, preset_names
from tpu_workbench.bench.workloads.decoder import Decoder, KVCache, build_model
from tpu_workbench.bench.workloads.steps import PHASES, VISION_PHASES, Step, decoder_step, vision_step
from tpu_workbench.bench.workloads.vision import VisionConfig, build_vision_model

VISION_WORKLOADS = {"small-cnn": VisionConfig()}


def workload_names() -> list[str]:
    """Every name ``run_benchmark`` accepts: decoder presets plus vision models."""
    return [*preset_names(), *VISION_WORKLOADS]


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
