"""One harness-only build per class of architectures the harness learned to build: each builds a tiny
model of a representative architecture and runs its real forward and backward on the CPU."""

from __future__ import annotations

import pytest
import torch

from tpu_workbench.bench.validate import inputs, runner, shrink

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
SLOW_2 = {
    "unset_experts",
    "text_with_pixels",
    "query_former_image_token",
    "part_heads",
    "main_input_alias",
    "documented_optional",  # (lxmert: 10 s of the quick loop)
}


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
    assert not shrink.fill_missing_attribute(
        config, AttributeError("'Foo' object has no attribute 'x'"), reserved
    )


def test_masked_image_models_get_their_noise_from_the_harness() -> None:
    """ViTMAE draws per-patch noise in its forward; made by the harness, both runs mask the same patches."""
    from tpu_workbench.bench.validate import inputs, zoo

    arch = zoo.select(["vit_mae"])[0]
    config, _, reserved = runner.build_config(arch)
    model = runner.build_model(runner._model_class(arch.candidates[0].class_name), config)
    args = inputs.build_inputs(model, config, reserved, {}, None, {})
    patches = (config.image_size // config.patch_size) ** 2
    assert tuple(args["noise"].shape) == (args["pixel_values"].shape[0], patches)


CLASSES_3 = {
    # 2-D layout models split the width into six box embeddings
    "box_embeddings": "lilt",
    # sizes on the image's feature maps follow the shrunk image (SAM's image_embedding_size)
    "image_grid": "sam",
    # a per-layer settings dict is shrunk like the config; a head that was the sum of its parts stays so
    "per_layer_settings": "dots3_note_text",
    # flattened patches of a tower that also reads each image's spatial merge
    "merge_sizes": "video_llama_3_vision",
    # docstring shapes with arithmetic (``dim * len(config.target_layer_ids)``) and a mask over two inputs
    "documented_arithmetic": "muse_glimmer_assistant",
    # per-stage widths split into per-stage heads
    "stage_heads": "cvt",
    # nested per-block specs hold the channel counts of the channel lists
    "block_specs": "pp_lcnet_v4",
    # a codec reading waveform and features: one feature frame per hop, (batch, 1, samples) audio
    "codec_features": "xcodec2",
    # several images per sample with the mask of which text tokens see which image
    "image_attention_mask": "idefics",
    # image features placed at positions a mask marks, no placeholder id
    "image_positions": "kosmos-2",
    # "inputs" read as token ids
    "inputs_as_tokens": "perceiver",
}
SLOW_3 = {
    "stage_heads",
    "block_specs",
    "codec_features",
    "image_attention_mask",
    "image_positions",
    "inputs_as_tokens",
    "image_grid",
}


def test_stage_widths_are_multiples_of_their_heads() -> None:
    out, _, _ = shrink.shrink_config_dict({"embed_dim": [64, 192, 384], "num_heads": [1, 3, 6]})
    assert all(w % h == 0 for w, h in zip(out["embed_dim"], out["num_heads"], strict=True))
    assert max(out["embed_dim"]) < 384


def test_width_parts_add_up_to_the_shrunk_width() -> None:
    out, _, _ = shrink.shrink_config_dict({"hidden_size": 256, "axial_pos_embds_dim": [64, 192]})
    assert sum(out["axial_pos_embds_dim"]) == out["hidden_size"] < 256
    assert out["axial_pos_embds_dim"][0] < out["axial_pos_embds_dim"][1]  # the proportions are kept


def test_box_embeddings_split_the_width_in_six() -> None:
    layout = {"hidden_size": 768, "num_attention_heads": 12, "max_2d_position_embeddings": 1024}
    v3, _, _ = shrink.shrink_config_dict({**layout, "coordinate_size": 128, "shape_size": 128})
    assert 4 * v3["coordinate_size"] + 2 * v3["shape_size"] == v3["hidden_size"]
    assert v3["hidden_size"] % v3["num_attention_heads"] == 0
    lilt, _, _ = shrink.shrink_config_dict({**layout, "channel_shrink_ratio": 4})
    assert lilt["hidden_size"] % 6 == 0 and (lilt["hidden_size"] // 4) % lilt["num_attention_heads"] == 0
    v1, _, _ = shrink.shrink_config_dict(layout)  # full-width box embeddings: the generic width
    assert v1["hidden_size"] == shrink.WIDTH


def test_position_features_are_half_the_channels() -> None:
    d = {
        "vision_config": {
            "model_type": "v",
            "hidden_size": 768,
            "output_channels": 256,
            "num_pos_feats": 128,
        },
        "prompt_encoder_config": {"model_type": "p", "hidden_size": 256},
    }
    out, _, _ = shrink.shrink_config_dict(d)
    vision = out["vision_config"]
    assert vision["output_channels"] < 256 and 2 * vision["num_pos_feats"] == vision["output_channels"]


def test_feature_map_sizes_follow_the_image() -> None:
    d = {
        "vision_config": {
            "model_type": "v",
            "backbone_feature_sizes": [[256, 256], [128, 128], [64, 64]],
            "backbone_config": {"model_type": "b", "image_size": [1024, 1024]},
        },
        "prompt_encoder_config": {"model_type": "p", "image_size": 1024, "patch_size": 16},
    }
    out, _, _ = shrink.shrink_config_dict(d)
    image = out["vision_config"]["backbone_config"]["image_size"][0]
    sizes = out["vision_config"]["backbone_feature_sizes"]
    assert [s[0] for s in sizes] == [image // 4, image // 8, image // 16]
    prompt = out["prompt_encoder_config"]
    assert prompt["image_size"] // prompt["patch_size"] == sizes[-1][0]  # the prompt grid is the last level


def test_block_specs_keep_their_channels_chained() -> None:
    d = {
        "stage_out_channels": [96, 192, 384],
        "block_configs": [[[3, 96, 96, 1, True]], [[3, 96, 192, 2, False]], [[3, 192, 384, 2, False]]],
    }
    out, _, _ = shrink.shrink_config_dict(d)
    blocks = [stage[0] for stage in out["block_configs"]]
    assert [b[2] for b in blocks] == out["stage_out_channels"] != [96, 192, 384]
    assert all(blocks[i + 1][1] == blocks[i][2] for i in range(len(blocks) - 1))
    assert all(b[0] == 3 for b in blocks)  # kernel sizes are not channels


def test_a_sum_of_two_widths_stays_their_sum() -> None:
    d = {
        "hidden_size": 1024,
        "quantization_dim": 2048,
        "semantic_model_config": {"model_type": "s", "hidden_size": 1024},
    }
    out, _, _ = shrink.shrink_config_dict(d)
    assert out["quantization_dim"] == out["hidden_size"] + out["semantic_model_config"]["hidden_size"] < 2048


def test_fields_derived_when_unset_are_derived_again() -> None:
    from transformers import XcodecConfig  # lazy: heavy

    d = XcodecConfig().to_dict()
    small, _, _ = shrink.shrink_config_dict(d)
    shrink.drop_derived(XcodecConfig, small, d)
    config = XcodecConfig.from_dict(small)
    parts = config.acoustic_model_config.hidden_size + config.semantic_model_config.hidden_size
    assert config.codebook_dim == parts < d["codebook_dim"]


def test_head_that_was_the_sum_of_its_parts() -> None:
    out, _, _ = shrink.shrink_config_dict(
        {"hidden_size": 1024, "head_dim": 192, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64}
    )
    assert out["head_dim"] == out["qk_nope_head_dim"] + out["qk_rope_head_dim"] < 192
    per_layer = {
        "num_hidden_layers": 4,
        "hidden_size": 1024,
        "head_dim": 256,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "per_layer_config": {"1": {"qk_nope_head_dim": 192, "num_attention_heads": 64}},
    }
    out, _, _ = shrink.shrink_config_dict(per_layer)
    (layer,) = out["per_layer_config"].values()
    assert layer["num_attention_heads"] <= shrink.HEADS
    assert out["head_dim"] == layer["qk_nope_head_dim"] + out["qk_rope_head_dim"]


def test_pixel_border_keeps_its_share_of_the_image() -> None:
    out, _, _ = shrink.shrink_config_dict({"max_img_size": 448, "visual_prompt_size": 96})
    assert out["max_img_size"] == shrink.IMAGE
    assert 0 < out["visual_prompt_size"] and 2 * out["visual_prompt_size"] < out["max_img_size"]


def _ctx(config, built=None, model=None):
    ctx = inputs.InputContext(model, config, set())
    ctx.overrides["_built"] = dict(built or {})
    return ctx


class _Cfg:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def test_documented_dimensions_with_arithmetic() -> None:
    ctx = _Cfg(hidden_size=64, target_layer_ids=[1, 2, 3], block_size=16)
    c = _ctx(ctx)
    assert inputs._dimension(c, "dim * len(config.target_layer_ids)") == 64 * 3
    assert inputs._dimension(c, "number_of_previous_accepted_tokens + config.block_size") == inputs.SEQ + 16


def test_image_attention_mask_has_one_column_per_image() -> None:
    ids = torch.zeros(2, 7, dtype=torch.long)
    build = inputs.BUILDERS["image_attention_mask"]
    mask = build(_ctx(_Cfg(), {"input_ids": ids, "pixel_values": torch.zeros(2, 3, 3, 8, 8)}))
    assert tuple(mask.shape) == (2, 7, 3)
    assert build(_ctx(_Cfg(), {"input_ids": ids, "pixel_values": torch.zeros(2, 3, 8, 8)})) is None


def test_image_positions_are_marked_by_a_mask() -> None:
    built = {"input_ids": torch.full((2, 7), 5), "attention_mask": torch.ones(2, 7, dtype=torch.long)}
    ctx = _ctx(_Cfg(latent_query_num=4, vocab_size=32), built)
    inputs._place_image_positions(ctx.config, built, ctx)
    assert built["input_ids"].shape == built["attention_mask"].shape == (2, 11)
    assert built["image_embeds_position_mask"].shape == (2, 11)
    assert built["image_embeds_position_mask"].sum().item() == 2 * 4


def test_codec_features_have_one_frame_per_hop() -> None:
    ctx = _ctx(_Cfg(hop_length=320, feature_size=160), {"input_values": torch.zeros(2, 1, 3200)})
    feats = inputs.BUILDERS["input_features"](ctx)
    assert 10 in feats.shape[1:] and 160 in feats.shape[1:]


def test_merge_sizes_are_integers_per_image() -> None:
    sizes = inputs.BUILDERS["merge_sizes"](_ctx(_Cfg(spatial_merge_size=2)))
    assert sizes.dtype == torch.long and sizes.tolist() == [2] * inputs.BATCH


CLASSES_4 = {
    # a layer index among a layer-index list keeps its order against it (SegGPT's merge_index)
    "layer_index_order": "seggpt",
    # stages that double a base width end at hidden_size (CLAP's audio Swin); spectrogram as an image
    "stage_doubling": "clap",
    # the last Swin stage's map is still a whole window
    "window_stages": "swin",
    # a Q-Former alone reads the image features it cross-attends to
    "query_former_alone": "blip_2_qformer",
    # Pix2Struct's flattened patches lead with their row and column numbers
    "flattened_patches_with_positions": "pix2struct",
    # a decoder's latents: as many channels as its first convolution reads
    "latents_for_first_conv": "vibevoice_acoustic_tokenizer_decoder",
    # MiniCPM-V's tower reads the patch grid of each image
    "target_sizes": "minicpm_ocr_vision",
    # a video-only Q-Former model: video placeholder tokens, frames, the instruction text
    "video_query_tokens": "instructblipvideo",
    # a convolutional patch embedding over flattened patch rows
    "patch_rows_as_images": "kimi_k25_vision",
}
SLOW_4 = {
    "stage_doubling",
    "video_query_tokens",
    "query_former_alone",
    "layer_index_order",
    "latents_for_first_conv",
}


def test_a_layer_index_keeps_its_place_among_listed_layers() -> None:
    d = {"num_hidden_layers": 24, "merge_index": 2, "intermediate_hidden_state_indices": [5, 11, 17, 23]}
    out, _, _ = shrink.shrink_config_dict(d)
    listed = out["intermediate_hidden_state_indices"]
    assert out["merge_index"] < min(listed) and len(set(listed)) == 4
    assert max(listed) < out["num_hidden_layers"] < 24


def test_non_square_image_keeps_its_shape() -> None:
    out, _, _ = shrink.shrink_config_dict({"image_size": [896, 448]})
    assert out["image_size"] == [2 * shrink.IMAGE, shrink.IMAGE]
    out, _, _ = shrink.shrink_config_dict({"image_size": [640, 384]})  # not whole multiples: capped
    assert out["image_size"] == [shrink.IMAGE, shrink.IMAGE]


def test_last_stage_holds_a_window() -> None:
    d = {"image_size": 224, "patch_size": 4, "window_size": 7, "depths": [2, 2, 6, 2]}
    d["num_heads"] = [3, 6, 12, 24]
    out, _, _ = shrink.shrink_config_dict(d)
    last = out["image_size"] // out["patch_size"] // 2 ** (len(out["depths"]) - 1)
    assert last >= out["window_size"] and out["image_size"] <= 224


def test_doubling_stages_end_at_the_width() -> None:
    d = {"hidden_size": 768, "patch_embeds_hidden_size": 96, "depths": [2, 2, 6, 2]}
    out, _, _ = shrink.shrink_config_dict(d)
    assert out["patch_embeds_hidden_size"] * 2**3 == out["hidden_size"] < 768


def test_query_former_features_are_encoder_wide() -> None:
    states = inputs.BUILDERS["encoder_hidden_states"](_ctx(_Cfg(encoder_hidden_size=48)))
    assert states.shape[0] == inputs.BATCH and states.shape[-1] == 48
    assert inputs.BUILDERS["encoder_hidden_states"](_ctx(_Cfg())) is None


def test_target_sizes_are_the_patch_grid() -> None:
    ctx = _ctx(_Cfg(patch_size=8), {"pixel_values": torch.zeros(1, 3, 32, 16)})
    assert inputs.BUILDERS["target_sizes"](ctx).tolist() == [[4, 2]]


def test_flattened_patches_lead_with_positions() -> None:
    patches = inputs.BUILDERS["flattened_patches"](_ctx(_Cfg(patch_embed_hidden_size=12)))
    assert patches.shape[-1] == 12 + 2
    rows, cols = patches[0, :, 0], patches[0, :, 1]
    assert rows.min() >= 1 and cols.min() >= 1 and torch.equal(rows, rows.round())


def test_a_layer_plan_of_pattern_and_repeats_spells_out_the_shrunk_layer_count() -> None:
    """GPT-Neo's attention_types [[["global", "local"], 12]] spelled out its 24 layers; the class expands it
    again and checks the length, so the plan must spell out the shrunk count too."""
    small, _, _ = shrink.shrink_config_dict(
        {"num_layers": 24, "attention_types": [[["global", "local"], 12]], "hidden_size": 2048}
    )
    plan, layers = small["attention_types"], small["num_layers"]
    assert sum(len(p) * n for p, n in plan) == layers < 24
    assert plan[0][0] == ["global", "local"]


# every class above, one harness-only build each (the codec / composite builds over 10 s are slow)
ALL_CLASSES = {**CLASSES, **CLASSES_2, **CLASSES_3, **CLASSES_4}
ALL_SLOW = SLOW | SLOW_2 | SLOW_3 | SLOW_4
#: Builds of about a second or more each (2-core host, 2026-12-05): the full suite runs them, the quick loop keeps
#: the cheaper half of the classes.
QUICK_LOOP_HEAVY = frozenset(
    {
        "mla_head",
        "language_ids",
        "part_kv_heads",
        "per_layer_settings",
        "missing_attribute",
        "flattened_patches_with_positions",
        "documented_shape",
        "moe_k",
    }
)


@pytest.mark.parametrize(
    "kind",
    [
        pytest.param(k, marks=pytest.mark.slow) if k in ALL_SLOW | QUICK_LOOP_HEAVY else k
        for k in sorted(ALL_CLASSES)
    ],
)
def test_representative_builds(kind: str) -> None:
    name = ALL_CLASSES[kind]
    res = runner.validate(name, device="cpu", check_generate=False, harness_only=True)
    assert res["status"] == "built", (name, res.get("failed_stage"), res.get("error"))
    assert res["harness_ok"] is True
