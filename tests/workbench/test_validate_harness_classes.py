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
