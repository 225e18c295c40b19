"""Per-architecture corrections where the generic shrinker or input builder is wrong.

Each entry says what differs from the generic rule and why, in the config's own terms. ``config`` holds
dotted-path assignments applied after the generic shrink (``"vision_config.depth": 2``); ``inputs`` holds
input overrides read by ``workbench.validate.inputs`` (sequence length, image size, extra tensors).
Architectures that cannot be built offline from a config at all are listed in ``UNBUILDABLE`` with the
reason, and reported as harness failures, never as passes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Family:
    """Corrections for one model_type."""

    config: dict[str, Any] = field(default_factory=dict)
    init: dict[str, Any] = field(default_factory=dict)
    inputs: dict[str, Any] = field(default_factory=dict)
    submodel: tuple[str, str] | None = None  # (class, config attribute) validated instead of the mapped class
    entry: str | None = None  # method run as the forward pass when the class has no forward (``encode``)
    why: str = ""


_EFFICIENTNET = {  # blocks of the stock B7 list feed each other through width/depth coefficients: use 3 blocks
    "kernel_sizes": [3, 3, 5],
    "in_channels": [32, 16, 24],
    "out_channels": [16, 24, 20],
    "strides": [1, 1, 2],
    "num_block_repeats": [1, 1, 2],
    "expand_ratios": [1, 6, 6],
    "width_coefficient": 1.0,
    "depth_coefficient": 1.0,
    "hidden_dim": 1280,
    "depthwise_padding": [],
}
# label_length (Autoformer's decoder warm-up window, default 10) is cut from the context window
_TIME_SERIES = {"prediction_length": 4, "context_length": 8, "lags_sequence": [1, 2, 3], "label_length": 4}

OVERRIDES: dict[str, Family] = {
    "efficientnet": Family(config=_EFFICIENTNET, why="block lists are coupled through the coefficients"),
    "align": Family(
        config={f"vision_config.{k}": v for k, v in _EFFICIENTNET.items()},
        why="its vision tower is an EfficientNet",
    ),
    "deepseek_v2": Family(
        config={"num_experts_per_tok": 2, "topk_group": 1, "n_group": 1},
        why="the default config leaves the router's top-k unset",
    ),
    "bamba": Family(
        config={"attn_layer_indices": [1]}, why="attention layers are listed by index (default none)"
    ),
    "dory": Family(
        config={
            "num_hidden_layers": 3,
            "n_input_layers": 1,
            "n_recurrent_layers": 1,
            "n_output_layers": 1,
            "n_recurrent_loops": 2,
        },
        why="input + recurrent + output layer counts must add up to the depth",
    ),
    "autoformer": Family(
        config=_TIME_SERIES,
        inputs={"time_series": True},
        why="no default forecast horizon; inputs are past/future values and time features",
    ),
    "informer": Family(config=_TIME_SERIES, inputs={"time_series": True}, why="as autoformer"),
    "time_series_transformer": Family(config=_TIME_SERIES, inputs={"time_series": True}, why="as autoformer"),
}

OVERRIDES.update(
    {
        "align": Family(
            config={**OVERRIDES["align"].config, "projection_dim": 24},
            why="its vision tower is an EfficientNet; ALIGN compares the pooled vision features (the last "
            "block's 24 channels here) with the text projection directly, so projection_dim equals them",
        ),
        "bark": Family(
            submodel=("BarkSemanticModel", "semantic_config"),
            why="BarkModel only generates (no forward); its semantic model is the causal LM it runs first",
        ),
        "qwen2_5_omni": Family(
            submodel=("Qwen2_5OmniThinkerForConditionalGeneration", "thinker_config"),
            why="the composite only generates (no forward); the thinker is the multimodal LM inside it",
        ),
        "glm_image_vqmodel": Family(
            entry="encode", why="the VQ-VAE has no forward; encode is its image pass"
        ),
        "blt": Family(
            inputs={"constants": {"use_cache": False}},
            why="its cache reads num_hidden_layers, "
            "which BltConfig does not have (the layer counts are per sub-model)",
        ),
        "bros": Family(
            config={"dim_bbox_projection": 16},
            why="the box projection is added to each attention head: it equals hidden_size / heads",
        ),
    }
)

_NEEDS = "needs the {} package, which is not a dependency of this project"
UNBUILDABLE: dict[str, str] = {
    "dinat": _NEEDS.format("natten"),
    "layoutlmv2": _NEEDS.format("detectron2"),
    "higgs_audio_v2_tokenizer": _NEEDS.format("torchaudio"),
    "timm_wrapper": _NEEDS.format("timm"),
    "timm_backbone": _NEEDS.format("timm"),
}


def family_for(model_type: str) -> Family:
    return OVERRIDES.get(model_type, Family())
