"""One harness-only build per class of architectures the harness learned to build: each builds a tiny
model of a representative architecture and runs its real forward and backward on the CPU."""

from __future__ import annotations

import pytest

from workbench.validate import runner, shrink

CLASSES = {
    # a layer count equal to len(depths) counts stages: the stages and backbone outputs are kept
    "stage_count": "pvt_v2",
    # values the config class derives (feature_size from the lags) are derived again after the shrink
    "derived_attributes": "autoformer",
    # a depthwise convolution's group count (upsample_groups == hidden_size) follows the width
    "groups_follow_width": "mimi",
    # Linear patch embeddings read flattened patches with their positions (spatial_shapes, grid_thw)
    "flattened_patches": "siglip2_vision_model",
    # a window measured in pixels stays a whole number of merged patches
    "pixel_window": "qwen2_5_vl_vision",
    # the docstring's shape for the main input (AST: frames x mel bins, as many frames as positions)
    "documented_shape": "audio-spectrogram-transformer",
    # masks over the audio frames are built with the features
    "features_mask": "audioflamingo3_encoder",
    # hybrid/recurrent models whose default cache refuses a plain forward run without one
    "no_cache_layout": "recurrent_gemma",
    # a class serving one part of a composite config is built from that part
    "composite_part": "musicgen",
    # adapter models that need the language of each sample
    "language_ids": "xmod",
}


SLOW = {"groups_follow_width", "composite_part"}  # codec / composite builds take over 10 s


@pytest.mark.parametrize(
    "kind", [pytest.param(k, marks=pytest.mark.slow) if k in SLOW else k for k in sorted(CLASSES)]
)
def test_representative_builds(kind: str) -> None:
    name = CLASSES[kind]
    res = runner.validate(name, device="cpu", check_generate=False, harness_only=True)
    assert res["status"] == "built", (name, res.get("failed_stage"), res.get("error"))
    assert res["harness_ok"] is True


def test_stage_count_is_not_a_layer_count() -> None:
    d = {"num_layers": 4, "depths": [2, 2, 18, 2], "num_hidden_layers": 12}
    out, _, _ = shrink.shrink_config_dict(d)
    assert out["num_layers"] == 4 and out["depths"] == [1, 1, 1, 1]
    assert out["num_hidden_layers"] == shrink.LAYERS


def test_derived_values_are_dropped_before_rebuilding() -> None:
    from transformers import AutoformerConfig  # lazy: heavy

    d = AutoformerConfig().to_dict()
    small = dict(d, lags_sequence=[1, 2, 3])
    shrink.drop_derived(AutoformerConfig, small, d)
    assert "feature_size" not in small and small["lags_sequence"] == [1, 2, 3]
    assert AutoformerConfig.from_dict(small).feature_size == 3 + 2


CLASSES_2 = {
    # an attribute the modeling code reads that the default config never set gets a consistent value
    "missing_attribute": "t5gemma2_encoder",
    # sizes left None (key/value heads) are filled from the config: full multi-head attention
    "unset_sizes": "nemotron",
    # a mixture-of-experts class whose default config leaves the expert counts None
    "unset_experts": "dots1",
    # Mamba heads times head size equal an explicit inner width (mamba_d_ssm)
    "mamba_inner_width": "falcon_h1",
    # MLA: the query/key head is its non-rotary plus its rotary part
    "mla_head": "longcat_flash",
    # top-k named moe_k
    "moe_k": "ernie4_5_moe",
    # per-part (encoder_/decoder_) key/value heads keep full attention full
    "part_kv_heads": "moonshine",
    # Q-Former models: an image token id for the query tokens when the default has none
    "query_former_image_token": "blip-2",
    # models named by their pixels that read text too
    "text_with_pixels": "instructblip",
    # optional forward arguments read unguarded, built from the docstring
    "documented_optional": "lxmert",
    # the main input read under the forward's own name for it
    "main_input_alias": "vibevoice_acoustic_tokenizer_encoder",
    # a width equal to one stage follows the stage list (Hiera: hidden_size == first stage)
    "stage_width_follows_list": "sam2_vision_model",
    # the heads of a named part with its own width split that width
    "part_heads": "vjepa2",
}
SLOW_2 = {"unset_experts", "text_with_pixels", "query_former_image_token", "part_heads", "main_input_alias"}


@pytest.mark.parametrize(
    "kind", [pytest.param(k, marks=pytest.mark.slow) if k in SLOW_2 else k for k in sorted(CLASSES_2)]
)
def test_representative_builds_2(kind: str) -> None:
    name = CLASSES_2[kind]
    res = runner.validate(name, device="cpu", check_generate=False, harness_only=True)
    assert res["status"] == "built", (name, res.get("failed_stage"), res.get("error"))
    assert res["harness_ok"] is True


def test_unset_sizes_are_filled() -> None:
    out, _, _ = shrink.shrink_config_dict(
        {"model_type": "nemotron", "num_attention_heads": 32, "num_key_value_heads": None, "vocab_size": None}
    )
    assert out["num_key_value_heads"] == out["num_attention_heads"] == shrink.HEADS
    assert out["vocab_size"] == shrink.VOCAB


def test_mla_head_is_nope_plus_rope() -> None:
    out, _, _ = shrink.shrink_config_dict(
        {"qk_head_dim": 192, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "hidden_size": 1024}
    )
    assert out["qk_head_dim"] == out["qk_nope_head_dim"] + out["qk_rope_head_dim"]


def test_stage_width_follows_the_list() -> None:
    out, _, _ = shrink.shrink_config_dict({"hidden_size": 96, "embed_dim_per_stage": [96, 192, 384, 768]})
    assert out["embed_dim_per_stage"] == [16, 32, 64, 128] and out["hidden_size"] == 16


def test_missing_attribute_gets_a_value() -> None:
    from transformers import LlamaConfig  # lazy: heavy

    config = LlamaConfig(num_hidden_layers=1, hidden_size=64, num_attention_heads=4, vocab_size=128)
    exc = AttributeError("'LlamaConfig' object has no attribute 'vision_start_token_id'")
    reserved: set[int] = set()
    assert shrink.fill_missing_attribute(config, exc, reserved)
    assert 8 <= config.vision_start_token_id < 128 and config.vision_start_token_id in reserved
    assert not shrink.fill_missing_attribute(config, AttributeError("'Foo' object has no attribute 'x'"), reserved)


def test_masked_image_models_get_their_noise_from_the_harness() -> None:
    """ViTMAE draws per-patch noise in its forward; made by the harness, both runs mask the same patches."""
    from workbench.validate import inputs, zoo

    arch = zoo.select(["vit_mae"])[0]
    config, _, reserved = runner.build_config(arch)
    model = runner.build_model(runner._model_class(arch.candidates[0].class_name), config)
    args = inputs.build_inputs(model, config, reserved, {}, None, {})
    patches = (config.image_size // config.patch_size) ** 2
    assert tuple(args["noise"].shape) == (args["pixel_values"].shape[0], patches)
