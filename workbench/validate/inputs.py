"""Synthetic inputs for a tiny model, built from its config and forward signature (no tokenizer, no
processor, no files).

The model's ``main_input_name`` says what it reads (``input_ids``, ``pixel_values``, ``input_features``,
``input_values``, ``past_values`` ...); the forward signature says which companions it takes
(``attention_mask``, ``decoder_input_ids``, ``image_grid_thw`` ...). Each input has a builder in
``BUILDERS``; vision-language models get image placeholder tokens, as many as their vision tower
produces for the synthetic image (found by running ``get_image_features`` once).
"""

from __future__ import annotations

import inspect
import itertools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from tpu_workbench.bench.validate import shrink

BATCH = 2
SEQ = 7
DECODER_SEQ = 5
AUDIO_SAMPLES = 3200
AUDIO_FRAMES = 64


@dataclass
class InputContext:
    """What the builders know: the model, its config, the reserved token ids and the overrides."""

    model: Any
    config: Any
    reserved_ids: set[int]
    overrides: dict[str, Any] = field(default_factory=dict)
    variant: dict[str, int] = field(default_factory=dict)
    axes: dict[str, int] = field(default_factory=dict)
    generator: torch.Generator = field(default_factory=lambda: torch.Generator().manual_seed(0))

    def opt(self, key: str, default: Any) -> Any:
        return self.overrides.get(key, default)

    def choose(self, axis: str, options: list) -> Any:
        """One of several plausible layouts; the runner tries the others when the CPU refuses the first."""
        if axis in self.overrides:
            return self.overrides[axis]
        self.axes[axis] = len(options)
        return options[min(self.variant.get(axis, 0), len(options) - 1)]

    @property
    def batch(self) -> int:
        return self.opt("batch", BATCH)

    @property
    def seq(self) -> int:
        return self.opt("seq", SEQ)


def _sub(config: Any, *names: str) -> Any:
    for name in names:
        sub = getattr(config, name, None)
        if sub is not None and hasattr(sub, "to_dict"):
            return sub
    return None


def text_config(config: Any) -> Any:
    getter = getattr(config, "get_text_config", None)
    if callable(getter):
        try:
            return getter(decoder=True)
        except TypeError:
            return getter()
    return config


def _find(config: Any, names: tuple[str, ...], depth: int = 3) -> Any:
    """The first nested config of one of ``names``, breadth first (``vlm_config.vision_config`` ...)."""
    level = [config]
    for _ in range(depth):
        nxt = []
        for cfg in level:
            hit = _sub(cfg, *names)
            if hit is not None:
                return hit
            nxt += [v for v in vars(cfg).values() if hasattr(v, "to_dict") and hasattr(v, "model_type")]
        level = nxt
    return None


def _nested_configs(config: Any, depth: int = 2) -> list[Any]:
    """Configs nested in ``config`` (breadth first, ``depth`` levels), not ``config`` itself."""
    out, level = [], [config]
    for _ in range(depth):
        level = [
            v
            for cfg in level
            for v in vars(cfg).values()
            if hasattr(v, "to_dict") and hasattr(v, "model_type")
        ]
        out += level
    return out


def vision_config(config: Any) -> Any:
    return _find(config, ("vision_config", "image_config", "vision_encoder_config", "encoder")) or config


def audio_config(config: Any) -> Any:
    return (
        _sub(config, "audio_config", "encoder_config", "audio_encoder_config", "speech_config", "encoder")
        or config
    )


def vocab_size(config: Any) -> int:
    for cfg in (text_config(config), config):
        v = getattr(cfg, "vocab_size", None)
        if isinstance(v, int) and v > 0:
            return v
    return shrink.VOCAB


def _token_pool(ctx: InputContext, config: Any) -> torch.Tensor:
    v = vocab_size(config)
    special = set(ctx.reserved_ids)
    for name in (
        "pad_token_id",
        "bos_token_id",
        "eos_token_id",
        "image_token_id",
        "image_token_index",
        "decoder_start_token_id",
    ):
        for cfg in (config, text_config(config)):
            value = getattr(cfg, name, None)
            if isinstance(value, int):
                special.add(value)
            elif isinstance(value, (list, tuple)):
                special.update(x for x in value if isinstance(x, int))
    pool = [i for i in range(3, v) if i not in special]
    return torch.tensor(pool or list(range(v)))


def token_ids(ctx: InputContext, shape: tuple[int, ...], config: Any | None = None) -> torch.Tensor:
    pool = _token_pool(ctx, config or ctx.config)
    idx = torch.randint(0, len(pool), shape, generator=ctx.generator)
    return pool[idx]


def image_size(ctx: InputContext) -> tuple[int, int]:
    if "image_size" in ctx.overrides:
        s = ctx.overrides["image_size"]
        return (s, s) if isinstance(s, int) else tuple(s)
    for cfg in (vision_config(ctx.config), ctx.config, _find(ctx.config, ("backbone_config",))):
        s = None
        for name in ("image_size", "max_img_size"):  # TVP pads every frame to max_img_size
            s = s or (getattr(cfg, name, None) if cfg is not None else None)
        if isinstance(s, int) and s > 0:
            return s, s
        if isinstance(s, (list, tuple)) and len(s) == 2:
            return int(s[0]), int(s[1])
    side = ctx.choose("image_side", [64, 32, 128])  # no size in the config: the CPU says which works
    return side, side


def num_channels(ctx: InputContext) -> int:
    for cfg in (vision_config(ctx.config), ctx.config):
        c = getattr(cfg, "num_channels", None) or getattr(cfg, "in_channels", None)
        if isinstance(c, int) and c > 0:
            return c
    return 3


def randn(ctx: InputContext, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=ctx.generator)


# --------------------------------------------------------------------------------------------- builders
Builder = Callable[[InputContext], Any]
BUILDERS: dict[str, Builder] = {}


def builder(*names: str):
    def deco(fn: Builder) -> Builder:
        for n in names:
            BUILDERS[n] = fn
        return fn

    return deco


@builder("input_ids")
def _input_ids(ctx: InputContext) -> torch.Tensor:
    return token_ids(ctx, (ctx.batch, ctx.seq))


@builder("attention_mask")
def _attention_mask(ctx: InputContext) -> torch.Tensor | None:
    ids = ctx.overrides.get("_built", {}).get("input_ids")
    if ids is None:
        # no text: only a mask the docstring sizes as the sum of two inputs (a drafter's context plus its
        # block: its queries attend to both) is built, from that shape; otherwise the model makes its own
        doc = documented_args(ctx.model).get("attention_mask")
        if doc and any("+" in dim for dim in doc[1]):
            shape = tuple(_dimension(ctx, dim, "attention_mask") for dim in doc[1])
            return torch.ones(shape, dtype=torch.long)
        return None
    return torch.ones_like(ids)


@builder("decoder_input_ids")
def _decoder_input_ids(ctx: InputContext) -> torch.Tensor | None:
    if not getattr(ctx.config, "is_encoder_decoder", False):
        return None
    dec = getattr(ctx.config, "decoder", None)
    cfg = dec if dec is not None and hasattr(dec, "vocab_size") else ctx.config
    return token_ids(ctx, (ctx.batch, ctx.opt("decoder_seq", DECODER_SEQ)), cfg)


def num_frames(ctx: InputContext) -> int:
    for cfg in (vision_config(ctx.config), ctx.config):
        n = getattr(cfg, "num_frames", None)
        if isinstance(n, int) and n > 0:
            return min(n, 8)
    return 2


@builder("pixel_values")
def _pixel_values(ctx: InputContext) -> torch.Tensor:
    h, w = image_size(ctx)
    c = num_channels(ctx)
    layout = ctx.choose("pixel_layout", ["image", "frames", "images"])
    if layout == "frames":  # video: batch x frames x channels x height x width
        return randn(ctx, ctx.batch, num_frames(ctx), c, h, w)
    if layout == "images":  # several images per sample: batch x images x channels x height x width
        return randn(ctx, ctx.batch, 1, c, h, w)
    return randn(ctx, ctx.batch, c, h, w)


@builder("pixel_values_videos")
def _pixel_values_videos(ctx: InputContext) -> torch.Tensor:
    h, w = image_size(ctx)
    return randn(ctx, ctx.batch, num_frames(ctx), num_channels(ctx), h, w)


@builder("inputs")
def _inputs(ctx: InputContext) -> torch.Tensor:
    """``inputs``: speech encoder-decoders name the raw audio so, Perceiver its token ids (as the masked
    LM reads them); a model with a vocabulary is offered both, the CPU says which it reads."""
    has_vocabulary = bool(getattr(text_config(ctx.config), "vocab_size", None))
    if has_vocabulary and ctx.choose("inputs_kind", ["audio", "tokens"]) == "tokens":
        return token_ids(ctx, (ctx.batch, ctx.seq))
    return _input_values(ctx)


@builder("input_values")
def _input_values(ctx: InputContext) -> torch.Tensor:
    samples = ctx.opt("samples", AUDIO_SAMPLES)
    layout = ctx.choose("audio_layout", ["mono", "channels", "first_conv"])
    if layout == "channels":  # codecs: batch x channels x samples
        channels = getattr(ctx.config, "audio_channels", None) or getattr(ctx.config, "channels", None) or 1
        return randn(ctx, ctx.batch, channels if isinstance(channels, int) else 1, samples)
    if layout == "first_conv":  # a decoder's latents: as many channels as its first convolution reads
        conv = next((m for m in ctx.model.modules() if isinstance(m, torch.nn.Conv1d)), None)
        channels = conv.in_channels if conv is not None else 1
        return randn(ctx, ctx.batch, channels, samples // 64 if channels > 8 else samples)
    return randn(ctx, ctx.batch, samples)


@builder("mm_token_type_ids", "token_type_ids_mm")
def _mm_token_type_ids(ctx: InputContext) -> torch.Tensor | None:
    ids = ctx.overrides.get("_built", {}).get("input_ids")
    token = image_token_id(ctx.config)
    if ids is None or token is None:
        return None
    return (ids == token).int()


@builder("image_sizes")
def _image_sizes(ctx: InputContext) -> torch.Tensor:
    h, w = image_size(ctx)
    return torch.tensor([[h, w]] * ctx.batch)


@builder("pixel_attention_mask", "pixel_mask")
def _pixel_mask(ctx: InputContext) -> torch.Tensor | None:
    pixels = ctx.overrides.get("_built", {}).get("pixel_values")
    if pixels is None:
        return None
    shape = list(pixels.shape)
    del shape[-3]  # the channel dimension
    return torch.ones(shape, dtype=torch.long)


@builder("image_attention_mask")
def _image_attention_mask(ctx: InputContext) -> torch.Tensor | None:
    """IDEFICS: which images each text token may attend to (batch x text length x images per sample),
    for pixels laid out as several images per sample; all of them."""
    built = ctx.overrides.get("_built", {})
    ids, pixels = built.get("input_ids"), built.get("pixel_values")
    if ids is None or pixels is None or pixels.dim() != 5:
        return None
    return torch.ones(ids.shape[0], ids.shape[1], pixels.shape[1], dtype=torch.long)


@builder("state")
def _robot_state(ctx: InputContext) -> torch.Tensor | None:
    """PI0: the robot's state vector, ``max_state_dim`` wide."""
    width = getattr(ctx.config, "max_state_dim", None)
    return randn(ctx, ctx.batch, width) if isinstance(width, int) and width > 0 else None


@builder("timestep")
def _timestep(ctx: InputContext) -> torch.Tensor | None:
    """Flow-matching policies (PI0) draw the denoising time themselves when it is not given: drawn here,
    so that the CPU and the device denoise at the same time."""
    if not isinstance(getattr(ctx.config, "max_action_dim", None), int):
        return None
    return torch.rand(ctx.batch, generator=ctx.generator) * 0.9 + 0.05


@builder("noise")
def _noise(ctx: InputContext) -> torch.Tensor:
    """The draw a masked-image model would make itself (ViTMAE's per-patch noise): given, so that the CPU and
    the device, whose generators differ, mask the same patches. A flow-matching policy's noise (PI0) is a
    chunk of actions: ``chunk_size x max_action_dim``."""
    actions, chunk = getattr(ctx.config, "max_action_dim", None), getattr(ctx.config, "chunk_size", None)
    if isinstance(actions, int) and isinstance(chunk, int):
        return randn(ctx, ctx.batch, chunk, actions)
    h, w = image_size(ctx)
    patch = getattr(vision_config(ctx.config) or ctx.config, "patch_size", None)
    p = patch if isinstance(patch, int) and patch > 0 else 16
    return torch.rand(ctx.batch, (h // p) * (w // p), generator=ctx.generator)


@builder("lang_ids")
def _lang_ids(ctx: InputContext) -> torch.Tensor:
    """X-MOD: the language adapter of each sample (the first language)."""
    return torch.zeros(ctx.batch, dtype=torch.long)


@builder("bbox")
def _bbox(ctx: InputContext) -> torch.Tensor:
    low = torch.randint(0, 500, (ctx.batch, ctx.seq, 2), generator=ctx.generator)
    high = low + torch.randint(1, 500, (ctx.batch, ctx.seq, 2), generator=ctx.generator)
    return torch.cat([low, high], dim=-1)[..., [0, 1, 2, 3]]


@builder("qformer_input_ids")
def _qformer_input_ids(ctx: InputContext) -> torch.Tensor:
    qf = _sub(ctx.config, "qformer_config")
    return token_ids(ctx, (ctx.batch, ctx.seq), qf or ctx.config)


@builder("qformer_attention_mask")
def _qformer_attention_mask(ctx: InputContext) -> torch.Tensor:
    return torch.ones(ctx.batch, ctx.seq, dtype=torch.long)


@builder("hidden_states")
def _vision_hidden_states(ctx: InputContext) -> torch.Tensor:
    """Vision towers of Qwen2-VL style models read flattened patches plus their grid."""
    pixels, grid = _patch_flattened_pixels(ctx)
    ctx.overrides["_grid"] = grid
    return pixels


@builder("grid_thw")
def _grid_thw(ctx: InputContext) -> torch.Tensor:
    if "_grid" not in ctx.overrides:
        _, ctx.overrides["_grid"] = _patch_flattened_pixels(ctx)
    return torch.tensor([ctx.overrides["_grid"]] * ctx.batch)


@builder("flattened_patches")
def _flattened_patches(ctx: InputContext) -> torch.Tensor:
    """Pix2Struct: each row is a patch's row and column number (1-based, as its processor writes them)
    followed by its ``patch_embed_hidden_size`` pixel values."""
    vc = vision_config(ctx.config)
    width = getattr(vc, "patch_embed_hidden_size", None) or getattr(ctx.config, "patch_embed_hidden_size", 48)
    side = 4
    rows = torch.arange(side * side) // side + 1
    cols = torch.arange(side * side) % side + 1
    where = torch.stack([rows, cols], dim=-1).float().expand(ctx.batch, side * side, 2)
    return torch.cat([where, randn(ctx, ctx.batch, side * side, width)], dim=-1)


@builder("target_sizes")
def _target_sizes(ctx: InputContext) -> torch.Tensor | None:
    """MiniCPM-V's towers: the patch grid (rows, columns) of each image, for its position embeddings."""
    pixels = ctx.overrides.get("_built", {}).get("pixel_values")
    patch = getattr(vision_config(ctx.config), "patch_size", None)
    if pixels is None or pixels.dim() != 4 or not isinstance(patch, int) or patch <= 0:
        return None
    grid = [pixels.shape[-2] // patch, pixels.shape[-1] // patch]
    return torch.tensor([grid] * pixels.shape[0], dtype=torch.int32)


@builder("encoder_hidden_states")
def _encoder_hidden_states(ctx: InputContext) -> torch.Tensor | None:
    """A Q-Former on its own: the image features its cross-attention layers read (``encoder_hidden_size``
    wide, as many as the image's patches would be)."""
    width = getattr(ctx.config, "encoder_hidden_size", None)
    if not isinstance(width, int) or width <= 0:
        return None
    return randn(ctx, ctx.batch, 2 * ctx.seq, width)


@builder("merge_sizes")
def _merge_sizes(ctx: InputContext) -> torch.Tensor:
    """VideoLLaMA 3's tower: the spatial merge of each image of ``grid_thw`` (an integer per image)."""
    vc = vision_config(ctx.config)
    merge = getattr(vc, "spatial_merge_size", None) or getattr(vc, "merge_size", None) or 1
    return torch.full((ctx.batch,), merge if isinstance(merge, int) else 1, dtype=torch.long)


@builder("input_features", "audio_mel")  # "audio_mel": Gemma 3n's audio encoder names its features so
def _input_features(ctx: InputContext) -> torch.Tensor:
    cfg = audio_config(ctx.config)
    dims = []  # the feature width: configs name it differently; the CPU says which one the model reads
    for name in (
        "feature_projection_input_dim",
        "num_mel_bins",
        "feature_size",
        "input_feat_per_channel",
        "input_dim",
        "n_mels",
        "feature_dim",
        "num_features",
        "input_size",
    ):
        for c in (cfg, ctx.config, *_nested_configs(ctx.config)):  # a codec's semantic encoder too
            v = getattr(c, name, None)
            if isinstance(v, int) and 1 < v <= 1024 and v not in dims:
                dims.append(v)
    for v in list(dims):  # front ends that stack frames read a multiple of the mel bins
        for k in (2, 4):
            if k * v <= 1024 and k * v not in dims:
                dims.append(k * v)
    mel = ctx.choose("feature_dim", dims or [80, 160, 128])  # none named: common mel counts, stacked too
    frames = ctx.opt("frames", None)
    hop = getattr(ctx.config, "hop_length", None)
    waveform = ctx.overrides.get("_built", {}).get("input_values")
    if frames is None and waveform is not None and isinstance(hop, int) and 0 < hop < waveform.shape[-1]:
        # codecs reading the waveform and its features side by side (X-Codec 2 concatenates the two
        # encodings frame by frame): one feature frame per hop of the waveform
        frames = waveform.shape[-1] // hop
    if frames is None:
        src = getattr(cfg, "max_source_positions", None)
        frames = 2 * src if isinstance(src, int) and src <= 64 else AUDIO_FRAMES
    layout = ctx.choose(
        "features_layout",
        (
            ["channels_first", "time_first"]
            if hasattr(cfg, "num_mel_bins")
            else ["time_first", "channels_first"]
        )
        + ["spectrogram_image"],
    )
    ctx.overrides["_frames"] = frames
    if layout == "channels_first":
        return randn(ctx, ctx.batch, mel, frames)
    if layout == "spectrogram_image":  # CLAP: a one-channel image of frames x mel bins
        return randn(ctx, ctx.batch, 1, frames, mel)
    return randn(ctx, ctx.batch, frames, mel)


@builder("input_features_mask", "feature_attention_mask", "audio_mel_mask")
def _features_mask(ctx: InputContext) -> torch.Tensor | None:
    """One entry per frame of the features built (all of them real audio)."""
    frames = ctx.overrides.get("_frames")
    if frames is None:
        return None
    if ctx.choose("features_mask", ["long", "bool"]) == "bool":
        return torch.ones(ctx.batch, frames, dtype=torch.bool)
    return torch.ones(ctx.batch, frames, dtype=torch.long)


@builder("padding_mask")
def _padding_mask(ctx: InputContext) -> torch.Tensor | None:
    """Codecs: one entry per audio sample, shaped like the waveform."""
    values = ctx.overrides.get("_built", {}).get("input_values")
    if values is None:
        return None
    return torch.ones(values.shape, dtype=torch.long)


@builder("image_grid_thw")
def _image_grid_thw(ctx: InputContext) -> torch.Tensor | None:
    if "_grid" not in ctx.overrides:
        return None
    return torch.tensor([ctx.overrides["_grid"]] * ctx.batch)


def _patch_flattened_pixels(ctx: InputContext) -> tuple[torch.Tensor, list[int]]:
    """Qwen2-VL style: every image as rows of flattened ``temporal x patch x patch x channels`` patches."""
    vc = vision_config(ctx.config)
    patch = getattr(vc, "patch_size", 14)
    temporal = getattr(vc, "temporal_patch_size", None) or 1  # no temporal patching unless configured
    merge = getattr(vc, "spatial_merge_size", 2) or 1
    channels = getattr(vc, "in_channels", None) or getattr(vc, "num_channels", None) or 3
    side = ctx.opt("grid_side", 2 * merge)
    grid = [1, side, side]
    rows = ctx.batch * side * side
    linear = patch_linear_width(ctx.model)
    if linear is None and ctx.choose("patch_rows", ["flat", "images"]) == "images":
        # a convolutional patch embedding over the rows (Kimi K2.5): each patch a small image
        shape = (channels, patch, patch) if temporal == 1 else (channels, temporal, patch, patch)
        return randn(ctx, rows, *shape), grid
    width = linear or channels * temporal * patch * patch
    return randn(ctx, rows, width), grid


def patch_linear_width(model: Any) -> int | None:
    """Input width of the patch embedding when it is a ``Linear`` (SigLIP2, Qwen-VL style towers read
    pixels already cut into flattened patches, not images); None for convolutional patch embeddings."""
    for name, module in model.named_modules():
        leaf = name.rsplit(".", 1)[-1]
        if "patch" in name and isinstance(module, torch.nn.Linear) and "merg" not in name:
            return module.in_features
        if "patch" in name and isinstance(module, (torch.nn.Conv2d, torch.nn.Conv3d)) and leaf != "":
            return None
    return None


def _patched_inputs(ctx: InputContext, params: dict, built: dict) -> None:
    """Towers that read flattened patches plus where each patch sits: ``grid_thw`` (rows of all images,
    Qwen-VL style), ``spatial_shapes`` with a patch mask (batch x patches, SigLIP2) or per-patch
    ``pixel_position_ids`` (Gemma 4). The row width is the patch embedding's own input width."""
    if "pixel_values" not in params:
        return
    grid = [n for n in ("grid_thw", "image_grid_thw") if n in params]
    if grid and (params[grid[0]].default is inspect.Parameter.empty or patch_linear_width(ctx.model)):
        built["pixel_values"], ctx.overrides["_grid"] = _patch_flattened_pixels(ctx)
        return
    width = patch_linear_width(ctx.model)
    if width is None:
        return
    vc = vision_config(ctx.config)
    merge = getattr(vc, "spatial_merge_size", None) or getattr(vc, "merge_size", None) or 2
    merge = merge if isinstance(merge, int) else 2
    side = ctx.opt("grid_side", 2 * merge)
    n = side * side
    if "spatial_shapes" in params or "pixel_position_ids" in params:
        built["pixel_values"] = randn(ctx, ctx.batch, n, width)
        if "spatial_shapes" in params:
            built["spatial_shapes"] = torch.tensor([[side, side]] * ctx.batch)
        if "pixel_attention_mask" in params:
            built["pixel_attention_mask"] = torch.ones(ctx.batch, n, dtype=torch.long)
        if "pixel_position_ids" in params:
            ys, xs = torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij")
            pos = torch.stack([xs.flatten(), ys.flatten()], dim=-1)
            built["pixel_position_ids"] = pos.unsqueeze(0).expand(ctx.batch, n, 2).clone()


# ------------------------------------------------------------------------------- from the docstring
# ``states (`torch.Tensor` of shape `(batch_size, episode_length, state_dim)`)``: transformers documents
# every forward argument with its type and shape; an argument no builder knows is made from that.
_DOC_ARG = re.compile(r"^\s*(\w+) \(`([^`]*)`[^\n]*?of shape `[(\[]([^`]*)[)\]]`", re.MULTILINE)
_BATCH_DIMS = {"batch_size", "batch", "num_images", "num_images_or_videos", "num_videos", "bs"}
_GENERIC_LENGTHS = {"sequence_length", "seq_len", "num_samples", "time_steps", "length"}
_LEN_OF = re.compile(r"len\((?:config\.)?(\w+)\)")
_HIDDEN_DIMS = {"hidden_size", "hidden_dim", "embed_dim", "d_model", "dim", "embedding_dim"}


def documented_args(model: Any) -> dict[str, tuple[str, list[str]]]:
    """``name -> (type, [dimension names])`` from the docstring of ``model.forward``."""
    doc = getattr(model.forward, "__doc__", None) or ""
    out: dict[str, tuple[str, list[str]]] = {}
    for name, kind, shape in _DOC_ARG.findall(doc):
        out.setdefault(name, (kind, [d.strip() for d in shape.split(",") if d.strip()]))
    return out


def _dimension(ctx: InputContext, name: str, arg: str = "") -> int:
    """A documented dimension's size: batch and sequence as the harness uses them (audio samples and
    frames for waveforms and features), a config attribute of that name, the width for hidden sizes,
    else 4."""
    if name.isdigit():
        return int(name)
    # arithmetic of documented sizes: ``dim * len(config.target_layer_ids)``, ``tokens + config.block_size``
    if "+" in name:
        return sum(_dimension(ctx, part.strip(), arg) for part in name.split("+"))
    if "*" in name:
        return math.prod(_dimension(ctx, part.strip(), arg) for part in name.split("*"))
    length = _LEN_OF.fullmatch(name)
    if length:
        value = getattr(ctx.config, length.group(1), None)
        return len(value) if isinstance(value, (list, tuple)) else 1
    name = name.removeprefix("config.")  # ``[batch_size, config.block_size, dim]``
    if name in _BATCH_DIMS:
        return ctx.batch
    if name not in _GENERIC_LENGTHS:  # AST: ``max_length`` frames, exactly as many as its positions
        for cfg in (ctx.config, audio_config(ctx.config)):
            value = getattr(cfg, name, None)
            if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 4096:
                return value
    if arg in ("input_values", "audio_values") and ("length" in name or "samples" in name):
        return ctx.opt("samples", AUDIO_SAMPLES)
    if arg.startswith("input_features") and ("length" in name or "time" in name or "frames" in name):
        return ctx.overrides.get("_frames") or AUDIO_FRAMES
    if "channels" in name:
        return num_channels(ctx)
    if name in ("image_size", "height", "width"):
        return image_size(ctx)[1 if name == "width" else 0]
    for cfg in (ctx.config, text_config(ctx.config), vision_config(ctx.config)):
        value = getattr(cfg, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 4096:
            return value
    if name in _HIDDEN_DIMS:
        for cfg in (text_config(ctx.config), ctx.config):
            for key in ("hidden_size", "d_model", "n_embd"):
                value = getattr(cfg, key, None)
                if isinstance(value, int) and value > 0:
                    return value
    if "length" in name or "seq" in name or "patches" in name or "tokens" in name:
        return ctx.seq
    return 4


def documented_builder(model: Any, name: str) -> Builder | None:
    """A builder for an argument only the docstring describes: ids as tokens, masks as ones, integer
    tensors as small non-negative values, others as normal noise."""
    doc = documented_args(model).get(name)
    if doc is None:
        return None
    kind, dims = doc

    def build(ctx: InputContext) -> torch.Tensor:
        shape = tuple(_dimension(ctx, d, name) for d in dims)
        if name.endswith("mask"):
            return torch.ones(shape, dtype=torch.bool if "Bool" in kind else torch.long)
        if name.endswith("type_ids"):  # segment ids: the first segment (type vocabularies are tiny)
            return torch.zeros(shape, dtype=torch.long)
        if name.endswith("_ids") and "Long" in kind:
            return token_ids(ctx, shape)
        if "Long" in kind or "Int" in kind:
            return torch.randint(0, 4, shape, generator=ctx.generator)
        return randn(ctx, *shape)

    return build


# --------------------------------------------------------------------------------------------- assembly
def forward_params(model: Any) -> dict[str, inspect.Parameter]:
    try:
        return dict(inspect.signature(model.forward).parameters)
    except (TypeError, ValueError):
        return {}


def image_token_id(config: Any) -> int | None:
    """The placeholder id of an image in the text; a video's for models that only read videos."""
    image_names = ("image_token_id", "image_token_index", "image_token")
    for names in (image_names, ("video_token_id", "video_token_index")):
        for cfg in (config, text_config(config)):
            for name in names:
                value = getattr(cfg, name, None)
                if isinstance(value, int) and value >= 0:
                    return value
    return None


def _count_features(features: Any) -> int | None:
    """Number of feature vectors (rows) in whatever ``get_image_features`` returned."""
    if hasattr(features, "pooler_output") and features.pooler_output is not None:
        features = features.pooler_output
    elif hasattr(features, "last_hidden_state") and not isinstance(features, (list, tuple, torch.Tensor)):
        features = features.last_hidden_state
    if isinstance(features, torch.Tensor):
        return features.numel() // features.shape[-1] if features.dim() else None
    if isinstance(features, (list, tuple)):
        counts = [_count_features(f) for f in features]
        return sum(c for c in counts if c) if any(counts) else None
    return None


MODAL_INPUTS = ("pixel_values", "input_features", "input_values")


def _time_series_inputs(ctx: InputContext, params: dict) -> dict:
    """Forecasting models: a context window of past values (plus time features and observed mask, and the
    future window, when the model takes them)."""
    cfg = ctx.config
    context = getattr(cfg, "context_length", None) or 8
    lags = max(getattr(cfg, "lags_sequence", None) or [0])
    horizon = getattr(cfg, "prediction_length", None) or 4
    past = context + lags
    size = getattr(cfg, "input_size", 1) or 1
    channels = getattr(cfg, "num_input_channels", None)
    shape = (ctx.batch, past) if size == 1 and not channels else (ctx.batch, past, channels or size)
    n_time = (getattr(cfg, "num_time_features", 0) or 0) + (getattr(cfg, "num_dynamic_real_features", 0) or 0)
    out: dict[str, Any] = {"past_values": randn(ctx, *shape)}
    if "past_observed_mask" in params:
        out["past_observed_mask"] = torch.ones(shape)
    if "past_time_features" in params:
        out["past_time_features"] = randn(ctx, ctx.batch, past, n_time)
    if "future_values" in params and getattr(cfg, "is_encoder_decoder", False):
        fshape = (ctx.batch, horizon) + tuple(shape[2:])
        out["future_values"] = randn(ctx, *fshape)
    if "future_time_features" in params and "past_time_features" in out:
        out["future_time_features"] = randn(ctx, ctx.batch, horizon, n_time)
    return out


def build_inputs(
    model: Any,
    config: Any,
    reserved_ids: set[int],
    overrides: dict | None = None,
    variant: dict[str, int] | None = None,
    axes: dict[str, int] | None = None,
) -> dict:
    """Inputs for one forward call of ``model``; raises ``ValueError`` naming what it cannot build.

    ``variant`` picks alternatives of the layout choices the builders offer; the choices that were offered
    are written into ``axes`` (name -> number of options) so that the caller can try the others.
    """
    ctx = InputContext(model, config, reserved_ids, dict(overrides or {}), dict(variant or {}))
    try:
        return _assemble(ctx)
    finally:
        if axes is not None:
            axes.update(ctx.axes)


def _assemble(ctx: InputContext) -> dict:
    model, config = ctx.model, ctx.config
    params = forward_params(model)
    main = getattr(model, "main_input_name", "input_ids")
    companions: list[str] = []
    if isinstance(main, (list, tuple)):  # OneFormer: ["pixel_values", "task_inputs"], all of them read
        main, companions = main[0], list(main[1:])
    if main not in params and "input_ids" in params:
        main = "input_ids"
    if main not in params:  # a tower whose class inherited the main input of the composite model
        main = next((n for n in ("pixel_values", "input_features", "input_values") if n in params), main)
    alias = None
    if main in ("input_values", "input_features") and main not in params:
        # audio read under the forward's own name for it (VibeVoice's tokenizers: ``hidden_states``)
        first = next(
            (n for n, p in params.items() if p.default is inspect.Parameter.empty and n != "self"), None
        )
        if first is not None and first not in MODAL_INPUTS:
            alias = first
    built: dict[str, Any] = {}
    ctx.overrides["_built"] = built
    if main == "pixel_values":
        _patched_inputs(ctx, params, built)
    wanted = [main] + companions + [n for n in ctx.opt("extra_inputs", ()) if n != main]
    if main == "input_ids":  # vision-text and audio-text models: the other modality too, if the CPU takes it
        modal = next((m for m in MODAL_INPUTS if m in params), None)
        if modal and ctx.choose("other_modality", ["with", "without"]) == "with":
            wanted.append(modal)
    if main == "pixel_values" and "input_ids" in params and "input_ids" not in wanted:
        # image-to-text models named by their pixels (InstructBLIP, Kosmos-2): the text too, if the CPU wants it
        if ctx.choose("text_with_pixels", ["without", "with"]) == "with":
            wanted.insert(1, "input_ids")
    if ctx.choose("~documented_optional", ["required", "all"]) == "all":
        # optional in the signature, read unguarded (Decision Transformer's actions, LXMERT's visual
        # features): every tensor argument the docstring gives a shape for
        wanted += [n for n in _documented_optional(model, params) if n not in wanted]
    for name in (
        "bbox",
        "lang_ids",
    ):  # layout and adapter models: optional in the signature, required in practice
        if name in params and name not in wanted:
            wanted.append(name)
    if main == "pixel_values" and "target_sizes" in params and "target_sizes" not in wanted:
        wanted.append("target_sizes")  # MiniCPM-V towers: read unguarded for the position embeddings
    if "encoder_hidden_states" in params and getattr(config, "cross_attention_frequency", None):
        wanted.append("encoder_hidden_states")  # a Q-Former's cross-attention layers read them unguarded
    if "image_attention_mask" in params and "image_attention_mask" not in wanted:
        wanted.append("image_attention_mask")  # read unguarded whenever there are images (IDEFICS)
    if main == "pixel_values" and "noise" in params and "noise" not in wanted:
        wanted.append("noise")  # the model's own random draw, made here once for both runs
    if "state" in params and isinstance(getattr(config, "max_action_dim", None), int):
        wanted += [n for n in ("noise", "timestep") if n in params and n not in wanted]  # PI0's draws
    if ctx.opt("time_series", False) or main == "past_values":
        return _time_series_inputs(ctx, params)
    # masks over the audio frames or samples: optional in the signature, read unguarded by some encoders
    for name in ("attention_mask", "decoder_input_ids", "input_features_mask", "padding_mask"):
        if name in params and name not in wanted:
            wanted.append(name)
    required = [
        n
        for n, p in params.items()
        if p.default is inspect.Parameter.empty
        and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        and n != "self"
    ]
    for n in required:
        if n not in wanted and n != alias:
            wanted.append(n)
    vlm = (
        {main, "pixel_values", "input_ids"} <= {main, *wanted}
        and main in ("input_ids", "pixel_values")
        and image_token_id(config) is not None
    )
    if vlm and "image_grid_thw" in params:
        pixels, grid = _patch_flattened_pixels(ctx)
        built["pixel_values"] = pixels
        ctx.overrides["_grid"] = grid
        wanted.insert(wanted.index("pixel_values") + 1, "image_grid_thw")
    for name in _required(_image_getter(model)) if vlm else ():  # what the vision tower cannot do without
        if name not in wanted and name in BUILDERS:
            wanted.append(name)
    deferred = [n for n in ("mm_token_type_ids",) if n in params]
    for name in wanted:
        if name in built:
            continue
        fn = BUILDERS.get(name) or documented_builder(model, name)
        doc_fn = documented_builder(model, name) if name in BUILDERS and name in wanted[:1] else None
        if doc_fn is not None and ctx.choose("~documented_shape", ["builder", "docstring"]) == "docstring":
            fn = doc_fn  # the last resort: the shape the forward's docstring gives for the main input
        if fn is None:
            raise ValueError(
                f"no input builder for required argument {name!r} of {type(model).__name__}.forward"
            )
        value = fn(ctx)
        if value is not None:
            built[name] = value
    if alias is not None and main in built:
        built[alias] = built.pop(main)
        wanted = [alias if n == main else n for n in wanted]
    if vlm:
        _place_image_tokens(model, config, built, ctx)
    elif "image_embeds_position_mask" in params and {"input_ids", "pixel_values"} <= set(built):
        _place_image_positions(config, built, ctx)
    for name in deferred:  # built from the final input_ids (image tokens placed)
        value = BUILDERS[name](ctx)
        if value is not None:
            built[name] = value
    # recurrent and hybrid models whose default cache refuses a plain forward (a cache of linear-attention
    # layers only): the other layout runs the forward without one
    if (
        "use_cache" in params
        and "use_cache" not in built
        and ctx.choose("~use_cache", ["default", "off"]) == "off"
    ):
        built["use_cache"] = False
    for key, value in ctx.opt("constants", {}).items():
        built[key] = value
    return built


# documented arguments that are targets, caches, alternatives to the built inputs or masks (all ones
# when left out)
_NOT_INPUTS = re.compile(r".*(label|embeds|mask|past|cache|encoder_outputs|hidden_states|output_).*")


def _documented_optional(model: Any, params: dict) -> list[str]:
    """Optional forward arguments the docstring documents as tensors with a shape."""
    return [
        n
        for n, (kind, dims) in documented_args(model).items()
        if n in params and dims and "Tensor" in kind and not _NOT_INPUTS.fullmatch(n)
    ]


# choices that add inputs rather than reshape them: tried after every layout choice, one at a time
ADDING_AXES = ("text_with_pixels", "~documented_optional")


def variants(axes: dict[str, int], limit: int = 12) -> list[dict[str, int]]:
    """Assignments of the offered layout choices to try after the default one: at most ``limit`` of the
    layout choices, then each choice that adds inputs alone (so that adding one never crowds out a
    layout that used to be tried)."""
    names = sorted(n for n in axes if n not in ADDING_AXES)
    combos = itertools.product(*(range(axes[n]) for n in names))
    out = [dict(zip(names, c, strict=True)) for c in combos]
    out = [v for v in out if any(v.values())]
    out.sort(key=lambda v: sum(1 for x in v.values() if x))  # one choice changed at a time first
    adding = [{n: 1} for n in ADDING_AXES if axes.get(n, 0) > 1]
    # then an added input together with one layout change (InstructBLIP-Video: the instruction text and
    # the pixels laid out as frames)
    singles = [v for v in out if sum(1 for x in v.values() if x) == 1][:limit]
    paired = [{**v, **a} for a in adding for v in singles]
    return out[:limit] + adding + paired


def _image_getter(model: Any) -> Any:
    """``get_image_features`` of the model (or of its inner model); ``get_video_features`` for a model
    that only reads videos."""
    for name in ("get_image_features", "get_video_features"):
        for owner in (model, getattr(model, "model", None)):
            getter = getattr(owner, name, None) if owner is not None else None
            if getter is not None:
                return getter
    return None


def _required(fn: Any) -> list[str]:
    if fn is None:
        return []
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return []
    return [
        n
        for n, p in params.items()
        if p.default is inspect.Parameter.empty
        and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        and n != "self"
    ]


def _place_image_positions(config: Any, built: dict, ctx: InputContext) -> None:
    """Kosmos-2 style: the image's ``latent_query_num`` features replace the text embeddings at the
    positions a mask marks (no placeholder id): that many positions are put after the first token."""
    n = getattr(config, "latent_query_num", None)
    if not isinstance(n, int) or n <= 0:
        return
    text = built["input_ids"]
    fill = token_ids(ctx, (text.shape[0], n))
    ids = torch.cat([text[:, :1], fill, text[:, 1:]], dim=1)
    mask = torch.zeros_like(ids, dtype=torch.bool)
    mask[:, 1 : 1 + n] = True
    built["input_ids"], built["image_embeds_position_mask"] = ids, mask
    if "attention_mask" in built:
        built["attention_mask"] = torch.ones_like(ids)


def _place_image_tokens(model: Any, config: Any, built: dict, ctx: InputContext) -> None:
    """Put as many image placeholder tokens in ``input_ids`` as the vision tower yields per image."""
    getter = _image_getter(model)
    per_image = ctx.opt("image_tokens", None)
    if per_image is None:
        if getter is None:
            raise ValueError(
                f"{type(model).__name__} takes pixel_values with an image token but has no "
                "get_image_features to count them"
            )
        extra = {k: built[k] for k in ("image_grid_thw", "image_sizes", "pixel_attention_mask") if k in built}
        try:
            wanted = dict(inspect.signature(getter).parameters)
        except (TypeError, ValueError):
            wanted = {}
        if wanted and not any(p.kind == p.VAR_KEYWORD for p in wanted.values()):
            extra = {k: v for k, v in extra.items() if k in wanted}
        for k in _required(getter):  # InstructBLIP's Q-Former reads the instruction too
            if k in built and k != "pixel_values":
                extra[k] = built[k]
        with torch.no_grad():
            features = getter(pixel_values=built["pixel_values"], **extra)
        total = _count_features(features)
        if not total:
            raise ValueError(f"could not count the image features of {type(model).__name__}")
        per_image = total // ctx.batch
    token = image_token_id(config)
    text = built["input_ids"]
    ids = torch.cat([torch.full((ctx.batch, per_image), token, dtype=text.dtype), text], dim=1)
    built["input_ids"] = ids
    if "attention_mask" in built:
        built["attention_mask"] = torch.ones_like(ids)
