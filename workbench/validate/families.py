"""Per-architecture corrections where the generic shrinker or input builder is wrong.

Each entry says what differs from the generic rule and why, in the config's own terms. ``config`` holds
dotted-path assignments applied after the generic shrink (``"vision_config.depth": 2``); ``inputs`` holds
input overrides read by ``tpu_workbench.bench.validate.inputs`` (sequence length, image size, extra tensors).
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
            "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
        },
        why="input + recurrent + output layer counts must add up to the depth (layer_types as to_dict "
        "writes them interleave mlp blocks, which the config halves again)",
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
        "qwen3_omni_moe": Family(
            submodel=("Qwen3OmniMoeThinkerForConditionalGeneration", "thinker_config"),
            why="as qwen2_5_omni: the composite only generates; the thinker is the multimodal LM inside it",
        ),
        "dbrx": Family(
            config={"attn_config.clip_qkv": 8.0},
            why="the attention clamps q/k/v by clip_qkv even when it is unset (None); DBRX itself uses 8",
        ),
        "esm": Family(
            config={"pad_token_id": 1},
            why="positions are counted past the padding id (RoBERTa style), which the default leaves unset",
        ),
        "step3p7": Family(
            config={"text_config.sliding_window": 4},
            why="the text model builds its sliding-window mask on every forward, even with no sliding layers",
        ),
        "deepseek_ocr2": Family(
            config={"text_config.mlp_layer_types": ["dense", "sparse"]},
            why="the decoder reads mlp_layer_types per layer, which the default config leaves unset",
        ),
        "lfm2_moe": Family(
            config={"layer_types": ["conv", "full_attention"], "num_dense_layers": 1},
            why="the decoder reads layer_types per layer (unset by default); one dense and one MoE layer",
        ),
        "apertus1p5": Family(
            config={"image_token_offset": 1, "audio_token_offset": 65, "text_config.vocab_size": 192},
            why="image then audio codebook ids follow each other inside the text vocabulary",
        ),
        "molmo2": Family(
            config={"adapter_config.vision_feature_layer": [-1, -2]},
            why="the adapter reads vision layers by number (24, 18 of 25): the last two of the shrunk tower",
        ),
        "fun_asr_nano": Family(
            config={"adaptor_config.intermediate_size": 16},
            why="the adaptor's intermediate width is the text hidden size / 4",
        ),
        "cohere_compass": Family(
            config={
                "text_config.rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1e4}}
            },
            why="RoPE parameters are read per layer type, which the default config leaves empty",
        ),
        "cohere_compass_text": Family(
            config={"rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1e4}}},
            why="as cohere_compass",
        ),
        "qwen4_exp_text": Family(
            config={
                "indexer_n_heads": 2,
                "indexer_kv_heads": 1,
                "indexer_head_dim": 16,
                "indexer_budget": 4,
                "indexer_compress_ratio": 2,
            },
            why="its indexed-attention layers always build the token indexer, whose sizes the default "
            "config leaves unset (one key head, as the config requires)",
        ),
        "muse_spark_audio": Family(
            inputs={"samples": 3840},
            why="the waveform is a whole number of 1920-sample frames (its feature extractor pads to that)",
        ),
        "qwen3_asr_encoder": Family(
            inputs={"frames": 100},
            why="the encoder reads the features in windows of n_window * 2 (100) frames",
        ),
        "mobilevitv2": Family(
            inputs={"image_size": 64},
            why="five stride-2 stages leave a 1x1 map of a 32-pixel image, which the 2x2 unfold cannot cut",
        ),
        "levit": Family(
            config={"patch_size": 16, "image_size": 64},
            why="its convolutional stem always downsamples 16x: the attention biases are sized from "
            "image_size / patch_size",
        ),
        "glm_image_vqmodel": Family(
            entry="encode", why="the VQ-VAE has no forward; encode is its image pass"
        ),
        "blt": Family(
            inputs={"constants": {"use_cache": False}},
            why="its cache reads num_hidden_layers, "
            "which BltConfig does not have (the layer counts are per sub-model)",
        ),
        "efficientloftr": Family(
            config={"num_attention_heads": 8, "num_key_value_heads": 8},
            why="its 2-D rotary embedding fills hidden_size / 2 channels with head_dim * "
            "partial_rotary_factor (4) frequencies, which agree only with the default 8 heads",
        ),
        "llama4": Family(
            config={"vision_config.intermediate_size": 256},
            why="the vision adapter's first projection reads the pixel-shuffled patches, hidden_size / "
            "pixel_shuffle_ratio**2 wide, through intermediate_size (the default config's 768-wide tower "
            "does not satisfy this either; the released 1408-wide one does)",
        ),
        "tvp": Family(
            config={"max_img_size": 64, "visual_prompt_size": 12},
            inputs={"batch": 1, "pixel_layout": "frames"},
            why="its ResNet backbone downsamples 32x and then pools the map once more: a 32-pixel frame "
            "leaves nothing to pool (the prompt border keeps its share of the frame); its 2-D position "
            "embeddings reshape the column embeddings with the batch size, which only holds for one sample; "
            "a video's frames, which a single image would be broadcast to by the visual prompt",
        ),
        "minicpm_ocr_vision": Family(
            inputs={"batch": 1},
            why="the tower adds the position embeddings of all target_sizes as one sequence (a batch of "
            "one): it reads one image, or several packed into one, per call",
        ),
        "uvdoc": Family(
            config={
                "backbone_config.out_features": [f"stage{i}" for i in range(1, 7)],
                "backbone_config.out_indices": list(range(1, 7)),
            },
            why="the head concatenates one feature map per bridge stage (bridge_connector[0] * 6 channels), "
            "but the default backbone config returns only the last stage",
        ),
        "seggpt": Family(
            inputs={"image_size": [32, 32]},
            why="image_size is the prompt image stacked on the input image (896 x 448 for two 448-pixel "
            "images): each input is the upper half",
        ),
        "bros": Family(
            config={"dim_bbox_projection": 16},
            why="the box projection is added to each attention head: it equals hidden_size / heads",
        ),
    }
)

OVERRIDES["minicpmv4_7_vision"] = Family(inputs={"batch": 1}, why="as minicpm_ocr_vision")
OVERRIDES["qwen4_exp"] = Family(
    config={f"text_config.{k}": v for k, v in OVERRIDES["qwen4_exp_text"].config.items()},
    why="as qwen4_exp_text",
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
