"""Shrink a ``transformers`` config to a tiny one of the same architecture.

How transformers' own model testers size theirs (tests/models/*/test_modeling_*.py): 2 layers, width 32,
2-4 heads, intermediate ~37, vocabulary 99, 8 experts with top-2, images of 8-30 pixels. The generic rule
here works on the config's own dictionary, by attribute name, and only ever makes numbers smaller:

* layer counts -> 2; per-layer lists (``layer_types`` ...) keep one layer of each kind, in order, and the
  layer count grows to hold them; layer-index lists (``global_attn_indexes`` ...) are rescaled into the
  new depth;
* widths -> 64, head dims -> 16, heads -> 4 (key/value heads -> 2, or 4 without grouped attention),
  feed-forward widths -> 128, experts -> 4 with top-2;
* vocabularies -> 128; every special token id (``*_token_id``, ``*_token_index``) is renumbered into the
  small vocabulary, the same original id to the same new id across all nested configs;
* image sizes -> 32 pixels (patches at most 8), per-stage lists (``depths``, ``hidden_sizes``) shrunk with
  their ratios kept.

Architectures where the generic rule is wrong get a small entry in ``tpu_workbench.bench.validate.families``, which is
applied on top. The config is then rebuilt through ``config_class.from_dict`` so the class's own
validation and derived attributes run on the shrunk values.
"""

from __future__ import annotations

import copy
import itertools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

LAYERS = 2
WIDTH = 64
HEAD_DIM = 16
HEADS = 4
KV_HEADS = 2
FFN = 128
EXPERT_FFN = 32
EXPERTS = 4
TOP_K = 2
VOCAB = 128
IMAGE = 32
PATCH = 8
SPECIAL_BASE = VOCAB - 1  # special ids are numbered downward from the top of the vocabulary


def _name(*names: str) -> Callable[[str], bool]:
    wanted = set(names)
    return lambda key: key in wanted


def _regex(pattern: str) -> Callable[[str], bool]:
    compiled = re.compile(pattern)
    return lambda key: bool(compiled.fullmatch(key))


@dataclass(frozen=True)
class IntRule:
    """Integers whose key matches get ``min(value, cap)`` (values at or below ``floor`` are left alone)."""

    kind: str
    match: Callable[[str], bool]
    cap: int
    floor: int = 0


# Order matters: the first rule whose key matches applies.
INT_RULES: tuple[IntRule, ...] = (
    IntRule(
        "layers",
        _regex(
            r"(num_)?(hidden_|encoder_|decoder_|text_|vision_|audio_|cross_|global_|local_)?"
            r"(layers|n_layers?|num_layers|layer|blocks|hidden_layers|depth)"
        ),
        LAYERS,
    ),
    IntRule(
        "layers",
        _name(
            "n_layer",
            "num_hidden_layers",
            "encoder_layers",
            "decoder_layers",
            "num_layers",
            "depth",
            "num_decoder_layers",
            "num_encoder_layers",
            "n_layers",
            "decoder_num_layers",
            "encoder_num_layers",
            "num_hidden_blocks",
            "text_layers",
            "vision_layers",
        ),
        LAYERS,
    ),
    IntRule(
        "heads",
        _name(
            "num_key_value_heads",
            "n_kv_heads",
            "num_kv_heads",
            "multi_query_group_num",
            "encoder_num_key_value_heads",
            "decoder_num_key_value_heads",
        ),
        KV_HEADS,
    ),
    IntRule(
        "heads",
        _regex(
            r"(num_|n_)?((encoder|decoder|text|vision|cross|global|swa|linear_num_key|"
            r"linear_num_value|index_n)_)?(attention_heads|heads|head|attn_heads)"
        ),
        HEADS,
    ),
    IntRule(
        "head_dim",
        _regex(r".*(head_dim|d_kv|kv_channels|attention_head_size|dim_head|head_size|d_head)"),
        HEAD_DIM,
    ),
    IntRule("rotary_dim", _name("rotary_dim", "rotary_emb_base_dim", "rope_dim"), HEAD_DIM),
    IntRule("mamba_heads", _name("mamba_n_heads"), 8),
    IntRule("state", _name("mamba_d_state", "state_size", "ssm_state_size", "d_state"), 16),
    IntRule("chunk", _name("mamba_chunk_size", "chunk_size"), 16),
    IntRule("groups", _name("num_groups", "norm_num_groups", "num_norm_groups", "resnet_groups"), 4),
    IntRule("rope_head_dim", _name("qk_rope_head_dim", "qk_nope_head_dim"), HEAD_DIM // 2),
    IntRule("lora_rank", _name("kv_lora_rank", "q_lora_rank"), 32),
    IntRule(
        "experts", _regex(r"(num_|n_)?(local_|routed_|moe_num_)?experts|moe_num_experts|num_experts"), EXPERTS
    ),
    IntRule(
        "top_k",
        _name(
            "num_experts_per_tok",
            "moe_topk",
            "top_k",
            "num_experts_per_token",
            "moe_top_k",
            "experts_per_token",
            "top_k_experts",
            "moe_k",
        ),
        TOP_K,
    ),
    IntRule("expert_groups", _name("n_group", "topk_group"), 1),
    IntRule("shared_experts", _name("n_shared_experts", "num_shared_experts", "moe_num_shared_experts"), 1),
    IntRule("ffn", _regex(r"(moe_|shared_expert_|expert_)intermediate_size"), EXPERT_FFN),
    IntRule(
        "ffn",
        _regex(
            r".*(intermediate_size|ffn_dim|d_ff|mlp_dim|ffn_hidden_size|intermediate_dim|"
            r"inner_dim|n_inner|ffn_size|intermediate)"
        ),
        FFN,
    ),
    IntRule("vocab", _regex(r".*vocab_size.*"), VOCAB, floor=VOCAB),
    IntRule(
        "width",
        _regex(
            r".*(hidden_size|d_model|n_embd|embed_dim|embedding_dim|embedding_size|"
            r"hidden_dim|model_dim|emb_dim|projection_dim|_dim_model|word_embed_proj_dim|"
            r"proj_dim|text_dim|vision_dim|d_embed|out_dim|output_dim|hidden_size_per_layer_input)"
        ),
        WIDTH,
        floor=WIDTH,
    ),
    IntRule("width", _name("dim", "hidden", "channels", "embed_size"), WIDTH, floor=WIDTH),
    IntRule(
        "image",
        _name(
            "image_size",
            "img_size",
            "input_size",
            "image_resolution",
            "resolution",
            "pretrain_image_size",
            "crop_size",
            "max_img_size",
        ),
        IMAGE,
        floor=IMAGE,
    ),
    IntRule("patch", _name("patch_size", "patch_sizes"), PATCH),
    IntRule(
        "window",
        _name(
            "sliding_window",
            "sliding_window_size",
            "attention_window",
            "local_attention",
            "attention_chunk_size",
        ),
        4,
    ),
    IntRule("leading_dense", _name("first_k_dense_replace", "num_dense_layers", "first_dense_layers"), 1),
    IntRule(
        "period", _regex(r".*_(period|interval|freq|step)|sliding_window_pattern|decoder_sparse_step"), 2
    ),
    IntRule("offset", _regex(r".*_offset"), 1),
    IntRule("codebook", _name("codebook_size", "num_embeddings", "n_codes"), 64, floor=64),
    IntRule("queries", _name("num_queries", "num_query_tokens", "latent_query_num"), 8),
    IntRule("max_window_layers", _name("max_window_layers"), LAYERS),
    IntRule("source_positions", _name("max_source_positions"), 32),  # whisper-like: input frames = 2x this
    IntRule("frames", _name("num_frames", "frames_per_clip"), 4),
    IntRule("window_size", _name("window_size"), 4),
    IntRule("windows", _name("num_windows"), 1),  # image_size must stay divisible by it
    IntRule("ssm_groups", _name("n_groups", "mamba_n_groups", "ssm_n_groups"), 1),
    IntRule("kv_shared", _name("num_kv_shared_layers"), 0),
)
# Structural integers that the generic rules would mis-read: never touched.
KEEP = {
    "num_channels",
    "in_channels",
    "num_labels",
    "pad_token_id",
    "type_vocab_size",
    "num_mel_bins",
    "max_position_embeddings",
    "spatial_merge_size",
    "temporal_patch_size",
    "merge_size",
    "num_beams",
    "max_length",
    "min_length",
    "chunk_size_feed_forward",
    "pretraining_tp",
    "num_return_sequences",
    "sampling_rate",
    "audio_channels",
    "no_repeat_ngram_size",
    "top_k_sampling",
    "rope_theta",
    "tokens_per_second",
    "position_id_per_seconds",
}
TOKEN_ID = re.compile(r".*(_token_id|_token_index|_token_ids|token_id)$")
STAGE_LISTS = {  # per-stage sizes: shrunk with their ratios kept
    "depths": "layers",
    "stage_num_blocks": "layers",
    "blocks_per_stage": "layers",
    "num_block_repeats": "layers",
    "stage_numb_of_layers": "layers",
    "n_attn_blocks": "layers",
    "block_repeats": "layers",
    "hidden_sizes": "width",
    "embed_dim_per_stage": "width",
    "embed_dims": "width",
    "neck_hidden_sizes": "width",
    "stage_out_channels": "width",
    "stage_in_channels": "width",
    "stage_mid_channels": "width",
    "conv_dim": "width",
    "tdnn_dim": "width",
    "encoder_in_channels": "width",
    "decoder_in_channels": "width",
    "backbone_channel_list": "width",
    "out_channels": "width",
    "in_channels": "width",
    "encoder_hidden_sizes": "width",
    "downsample_channels": "width",
    "fusion_hidden_sizes": "width",
    "convstream_hidden_sizes": "width",
    "post_process_channels": "width",
    "layer_list_out_channels": "width",
    "base_attn_unit_dims": "width",
    "keypoint_encoder_sizes": "width",
    "out_features": "width",
    "fine_fusion_dims": "width",
    "mask_feature_channels": "width",
    "intermediate_feature_dims": "width",
    "enc_channels": "width",
    "vision_features_channels": "width",
    "num_heads": "heads",
    "num_attention_heads": "heads",
    "num_attention_heads_per_stage": "heads",
}
# Other per-stage channel lists, by name (``stem_channels``, ``subsampling_conv_channels`` ...); lists of
# kernel sizes, strides, paddings and ratios are not widths.
WIDTH_LIST = re.compile(r".*(channels|channel_list|channel_size|hidden_sizes|_dims|dim_per_stage|embed_dim)$")
NOT_WIDTH_LIST = re.compile(r".*(kernel|stride|patch|pad|dilation|ratio|rate|multiplier|pool|window).*")
INDEX_LIST = re.compile(r".*(index|indexes|indices|idxs|_ids|layers|_layer)$")
STAGE_CAPS = {"layers": 1, "width": WIDTH, "heads": HEADS}


@dataclass
class ShrinkReport:
    """What the shrinker changed, for the record: ``path: old -> new``."""

    changes: dict[str, Any] = field(default_factory=dict)

    def note(self, path: str, old: Any, new: Any) -> None:
        if old != new:
            self.changes[path] = [_jsonable(old), _jsonable(new)]


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return list(value)
    return value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_list(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and len(value) > 0 and all(_is_int(v) for v in value)


def _rule_for(key: str) -> IntRule | None:
    if key in KEEP:
        return None
    for rule in INT_RULES:
        if rule.match(key):
            return rule
    return None


def is_subconfig(value: Any) -> bool:
    return isinstance(value, dict) and (
        "model_type" in value or "architectures" in value or "transformers_version" in value
    )


class TokenIds:
    """Renumbers special token ids into the small vocabulary: one new id per distinct original id,
    downward from the top of the smallest (shrunk) text vocabulary."""

    def __init__(self, top: int = SPECIAL_BASE) -> None:
        self.mapping: dict[int, int] = {}
        self.top = top

    def new(self, old: int) -> int:
        if old < 0:
            return old
        if old < 8:  # pad/bos/eos of small vocabularies: already valid
            self.mapping.setdefault(old, old)
            return old
        if old not in self.mapping:
            self.mapping[old] = self.top - len([v for k, v in self.mapping.items() if k >= 8])
        return self.mapping[old]

    @property
    def reserved(self) -> set[int]:
        return set(self.mapping.values())


def _scale_widths(values: list[int], factor: int, scalars: dict[int, int] | None = None) -> list[int]:
    """Channel lists divided by one factor per config tree (so that lists feeding each other stay equal);
    input-channel counts (at most 4) are kept, and an entry equal to a width of the same config
    (``decoder_in_channels`` == ``d_model``) takes that width's new value."""
    scalars = scalars or {}
    return [scalars.get(v, v if v <= 4 else max(8, (v // factor) // 8 * 8)) for v in values]


def _scale_stage_list(
    values: list[int], kind: str, width_factor: int, scalars: dict[int, int] | None = None
) -> list[int]:
    if kind == "layers":
        return [min(v, STAGE_CAPS["layers"]) for v in values]
    if kind == "heads":
        if max(values) <= HEADS:
            return list(values)
        base = min(v for v in values if v > 0) if any(v > 0 for v in values) else 1
        return [max(1, v // base) if v > 0 else 0 for v in values]
    return _scale_widths(values, width_factor, scalars)


def list_kind(key: str) -> str | None:
    """What a per-stage integer list holds (``layers``, ``width``, ``heads``), or None."""
    if key in STAGE_LISTS:
        return STAGE_LISTS[key]
    if WIDTH_LIST.fullmatch(key) and not NOT_WIDTH_LIST.fullmatch(key) and key not in KEEP:
        return "width"
    return None


def _width_factor(d: dict) -> int:
    """One divisor for every channel list of a whole config tree (nested configs included, so that a
    backbone's output channels and the neck's input channels stay equal): the widest entry ends at most
    at 2x WIDTH."""
    widest = 0

    def walk(node: dict) -> None:
        nonlocal widest
        for key, value in node.items():
            if isinstance(value, dict):
                walk(value)
            elif _int_list(value) and list_kind(key) == "width":
                widest = max(widest, max(value))

    walk(d)
    return max(1, math.ceil(widest / (2 * WIDTH)))


def _representative(values: list, n: int) -> tuple[list, list[int]]:
    """One entry of each distinct kind (first occurrences, in order), padded to ``n`` entries; also the
    original index of each kept entry."""
    try:
        seen: dict = {}
        for i, v in enumerate(values):
            seen.setdefault(tuple(v) if isinstance(v, list) else v, i)
    except TypeError:
        return list(values[:n]), list(range(min(n, len(values))))
    if len(seen) == len(values):  # every entry distinct: a plain prefix
        return list(values[:n]), list(range(min(n, len(values))))
    picks = sorted(seen.values())
    i = 0
    while len(picks) < n and i < len(values):
        if i not in picks:
            picks.append(i)
        i += 1
    picks.sort()
    return [values[i] for i in picks], picks


class _Depth:
    """How one layer count was shrunk: old and new count and, when a per-layer list chose representative
    layers, which new layer stands for each old one."""

    def __init__(self, old: int, new: int):
        self.old, self.new = old, new
        self.layer_of: dict[int, int] | None = None

    def index(self, i: int) -> int:
        if self.layer_of is not None and i in self.layer_of:
            return self.layer_of[i]
        return min(self.new - 1, (i * self.new) // self.old)


def shrink_dict(
    d: dict, tokens: TokenIds, report: ShrinkReport, path: str = "", factor: int | None = None
) -> dict:
    """Shrunk copy of one config dictionary (recursing into nested configs)."""
    out = dict(d)
    depths: dict[str, _Depth] = {}
    widths: dict[int, int] = {}
    factor = _width_factor(d) if factor is None else factor
    stage_lists: list[str] = []
    stage_counts = _stage_counts(d)
    for key, value in d.items():
        where = f"{path}{key}"
        if is_subconfig(value):
            out[key] = shrink_dict(value, tokens, report, f"{where}.", factor)
            continue
        if isinstance(value, dict) and value and all(is_subconfig(v) for v in value.values()):
            out[key] = {k: shrink_dict(v, tokens, report, f"{where}.{k}.", factor) for k, v in value.items()}
            continue
        if value is None and key in _QUERY_PLACEHOLDERS and _query_former(d):
            value = (
                _UNSET_IMAGE_TOKEN  # a fixed number of query tokens stand in for the image: they need a place
            )
        if TOKEN_ID.fullmatch(key) and (_is_int(value) or _int_list(value)):
            new = tokens.new(value) if _is_int(value) else [tokens.new(v) for v in value]
            report.note(where, value, new)
            out[key] = new
            continue
        if _is_int(value):
            rule = _rule_for(key)
            if rule is None or value <= rule.floor:
                continue
            if rule.kind == "layers" and value in stage_counts:  # counts stages (len(depths)), not layers
                continue
            new = min(value, rule.cap)
            if rule.kind == "layers":
                depths[key] = _Depth(value, new)
            if rule.kind == "width":
                widths[value] = new
            report.note(where, value, new)
            out[key] = new
        elif _int_list(value) and list_kind(key):
            stage_lists.append(key)  # after the scalar widths: entries equal to one follow it
        elif _int_list(value) and key in ("image_size", "input_size", "img_size"):
            new = _shrink_image_sides(list(value))
            report.note(where, value, new)
            out[key] = new
        elif _int_list(value) and key in ("patch_size",) and len(value) == 2:
            new = [min(v, PATCH) for v in value]
            report.note(where, value, new)
            out[key] = new
    dims = dict(widths)  # list entries equal to a width of this config follow it, even an unshrunk one
    for key, value in d.items():
        if _is_int(value) and value > 4 and value not in dims and _unshrunk_dimension(key, value, out):
            dims[value] = value
    for key in stage_lists:
        new = _scale_stage_list(list(d[key]), list_kind(key), factor, dims)
        first = d[key][0]
        if (
            list_kind(key) == "width"
            and d.get("hidden_size") == first
            and all(a < b for a, b in itertools.pairwise(d[key]))
            and _order(new) != _order(d[key])
        ):
            # the embedding width is the first of widening stages (Hiera: hidden_size == the first
            # stage's width): it follows the list, whose stages keep their ratios
            new = _scale_stage_list(list(d[key]), "width", factor)
            report.note(f"{path}hidden_size", out["hidden_size"], new[0])
            out["hidden_size"] = new[0]
        report.note(f"{path}{key}", d[key], new)
        out[key] = new
    _follow_widths(d, out, widths, report, path)
    _follow_channels_in_specs(d, out, stage_lists, report, path)
    _fit_layer_lists(d, out, depths, report, path)
    for fixer in FIXERS:
        fixer(d, out, depths, report, path)
    return out


def _shrink_image_sides(sides: list[int]) -> list[int]:
    """Image sides capped at ``IMAGE``; a non-square image whose sides are whole multiples of the short
    one keeps its shape (SegGPT's 896 x 448: a prompt image stacked on the input image) as ``IMAGE``
    times those multiples."""
    short = min(sides)
    if short > IMAGE and len(set(sides)) > 1 and all(v % short == 0 for v in sides):
        return [IMAGE * (v // short) for v in sides]
    return [min(v, IMAGE) for v in sides]


_UNSET_IMAGE_TOKEN = 10**9  # stands for "no id in the default config": renumbered like any other
# the placeholder a Q-Former's query tokens take in the text: an image's, or a video's (InstructBLIP-Video)
_QUERY_PLACEHOLDERS = ("image_token_id", "image_token_index", "video_token_id", "video_token_index")


def _query_former(d: dict) -> bool:
    """BLIP-2 style: a vision tower whose image reaches the language model as ``num_query_tokens``
    placeholder tokens."""
    return "num_query_tokens" in d and is_subconfig(d.get("vision_config"))


def _order(values: list[int]) -> list[int]:
    """Which entries of a list grow, shrink or stay from one to the next (-1, 0, 1)."""
    return [(b > a) - (b < a) for a, b in itertools.pairwise(values)]


def _stage_counts(d: dict) -> set[int]:
    """Lengths of the per-stage block-count lists (``depths`` ...): a layer count equal to one counts
    stages, and the stage lists are shrunk entry by entry instead."""
    return {len(v) for k, v in d.items() if _int_list(v) and STAGE_LISTS.get(k) == "layers"}


# ``upsample_groups == hidden_size``: a depthwise convolution's group count follows its channels too
# ``bottleneck_features == fusion_hidden_size`` (ZoeDepth): channel counts named by what they carry too
DIMENSION_NAME = re.compile(r".*(_dim|_size|_channels|dim|channels|hidden|_groups)$|bottleneck_features")


def _unshrunk_dimension(key: str, value: int, out: dict) -> bool:
    """A channel count the rules left as it was (``stem_out_channels``): lists that repeat it must too."""
    return (
        out.get(key) == value
        and key not in KEEP
        and key.endswith(("_channels", "_dim", "hidden_size", "embedding_size"))
        and (_rule_for(key) is None or _rule_for(key).kind == "width")
    )


def _follows_a_width(key: str, value: Any, shrunk: Any, widths: dict[int, int]) -> bool:
    """``key`` is a dimension, left as it was, whose value equalled a width that shrank (not a token id,
    position count, vocabulary size or maximum)."""
    return (
        _is_int(value)
        and value in widths
        and shrunk == value
        and key not in KEEP
        and bool(DIMENSION_NAME.fullmatch(key))
        and not TOKEN_ID.fullmatch(key)
        and "position" not in key
        and "vocab" not in key
        and "max_" not in key
    )


def _follow_widths(d: dict, out: dict, widths: dict[int, int], report: ShrinkReport, path: str) -> None:
    """A dimension that equalled a width of this config before shrinking still equals it afterwards
    (``codebook_dim == hidden_size``, ``condition_dim == hidden_size`` ...)."""
    for key, value in d.items():
        if _follows_a_width(key, value, out.get(key), widths):
            report.note(f"{path}{key}", value, widths[value])
            out[key] = widths[value]


def _nested(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and any(isinstance(v, (list, tuple)) for v in value)


def _map_ints(value: Any, mapping: dict[int, int]) -> Any:
    if _is_int(value):
        return mapping.get(value, value) if value > 4 else value
    if isinstance(value, (list, tuple)):
        return [_map_ints(v, mapping) for v in value]
    return value


def _follow_channels_in_specs(
    d: dict, out: dict, stage_lists: list[str], report: ShrinkReport, path: str
) -> None:
    """Per-block specifications written as nested lists (PP-LCNet's ``block_configs``: per stage, per block
    ``[kernel, in_channels, out_channels, stride, use_se]``) hold the same channel counts as the config's
    channel lists: every entry equal to a channel count that was scaled takes its new value, so that the
    blocks still chain into each other and into the lists derived from them."""
    channels: dict[int, int] = {}
    for key in stage_lists:
        if list_kind(key) == "width":
            for old, new in zip(d[key], out[key], strict=False):
                if old > 4 and old != new:
                    channels.setdefault(old, new)
    if not channels:
        return
    for key, value in d.items():
        if _nested(value) and key not in stage_lists and not TOKEN_ID.fullmatch(key):
            new = _map_ints(value, channels)
            if new != [list(v) if isinstance(v, tuple) else v for v in value]:
                report.note(f"{path}{key}", value, new)
                out[key] = new


def _fit_layer_lists(d: dict, out: dict, depths: dict[str, _Depth], report: ShrinkReport, path: str) -> None:
    """Per-layer lists keep one layer of each kind; layer-index lists and per-layer dicts are renumbered
    into the new depth."""
    if not depths:
        return
    by_length: dict[int, list[str]] = {}
    for key, depth in depths.items():
        by_length.setdefault(depth.old, []).append(key)
    index_lists = []
    for key, value in d.items():
        if not isinstance(value, (list, tuple)) or not value or TOKEN_ID.fullmatch(key):
            continue
        if _int_list(value) and INDEX_LIST.fullmatch(key) and _looks_like_indices(value):
            index_lists.append(key)
            continue
        owners = by_length.get(len(value))
        if not owners:
            continue
        current = out[key] if isinstance(out[key], (list, tuple)) else value
        n = max(out[k] for k in owners)
        new, picks = _representative(list(current), n)
        for k in owners:
            depth = depths[k]
            if out[k] != len(new):
                report.note(f"{path}{k}", out[k], len(new))
                out[k] = depth.new = len(new)
            if depth.layer_of is None and len(set(map(repr, value))) < len(value):
                kinds = {repr(value[p]): j for j, p in enumerate(picks)}
                depth.layer_of = {
                    i: kinds.get(repr(v), min(j, len(new) - 1)) for j, (i, v) in enumerate(enumerate(value))
                }
        report.note(f"{path}{key}", value, new)
        out[key] = new
    for key in index_lists:
        value = list(d[key])
        top = max(v for v in value if v >= 0) if any(v >= 0 for v in value) else -1
        candidates = [k for k, dep in depths.items() if dep.old > top]
        if not candidates:
            continue
        k = min(candidates, key=lambda k: depths[k].old)
        depth = depths[k]
        scalars = _layer_index_scalars(d, depth.old, key)
        if scalars and depth.layer_of is None:
            _renumber_by_rank(d, out, key, scalars, k, depth, report, path)
            continue
        new = sorted({depth.index(v) if v >= 0 else v for v in value})
        if len(new) < len(value) <= 6 and depth.layer_of is None:  # keep every listed layer: deepen instead
            report.note(f"{path}{k}", out[k], max(out[k], len(value)))
            out[k] = depth.new = max(out[k], len(value))
            new = sorted({depth.index(v) if v >= 0 else v for v in value})
        report.note(f"{path}{key}", value, new)
        out[key] = new
    for key, value in d.items():  # {"5": {...}, "11": {...}}: settings for individual layers
        if isinstance(value, dict) and value and all(str(k).isdigit() for k in value):
            depth = max(depths.values(), key=lambda dep: dep.old)
            width = max(len(str(k)) for k in value)  # "05", "11": keys keep their zero padding
            new_dict: dict = {}
            for k, v in value.items():
                # a layer's own settings are sizes like the config's: shrunk by the same rules
                if isinstance(v, dict):
                    small = shrink_dict(v, TokenIds(), ShrinkReport())
                    _fix_mla_head({**d, **v}, merged := {**out, **small}, {}, ShrinkReport(), path)
                    if "head_dim" not in v and merged.get("head_dim") != out.get("head_dim"):
                        # the layer's parts add up to the config's head (dots.llm3: its own
                        # non-rotary part plus the shared rotary part)
                        report.note(f"{path}head_dim", out["head_dim"], merged["head_dim"])
                        out["head_dim"] = merged["head_dim"]
                    v = small
                new_dict.setdefault(str(depth.index(int(k))).zfill(width), v)
            report.note(f"{path}{key}", sorted(value), sorted(new_dict))
            out[key] = new_dict


def _layer_index_scalars(d: dict, depth: int, list_key: str) -> list[str]:
    """Single layer indices of the config (SegGPT's ``merge_index``) that sit among the layers of a
    layer-index list: their order against the list's layers is part of the architecture."""
    listed = [v for v in d[list_key] if v >= 0]
    if not listed:
        return []
    return [
        k
        for k, v in d.items()
        if k.endswith("_index") and not TOKEN_ID.fullmatch(k) and _is_int(v) and 0 <= v <= max(listed) < depth
    ]


def _renumber_by_rank(
    d: dict,
    out: dict,
    list_key: str,
    scalars: list[str],
    depth_key: str,
    depth: _Depth,
    report: ShrinkReport,
    path: str,
) -> None:
    """Renumber a layer-index list and the single layer indices among it by rank (the i-th distinct layer
    named becomes layer i), deepening so that every named layer stays a layer of its own: SegGPT merges
    at ``merge_index``, before the first of ``intermediate_hidden_state_indices``, and still does."""
    named = sorted({v for v in d[list_key] if v >= 0} | {d[k] for k in scalars})
    rank = {v: i for i, v in enumerate(named)}
    if out[depth_key] < len(named):
        report.note(f"{path}{depth_key}", out[depth_key], len(named))
        out[depth_key] = depth.new = len(named)
    new = [rank[v] if v >= 0 else v for v in d[list_key]]
    report.note(f"{path}{list_key}", d[list_key], new)
    out[list_key] = new
    for k in scalars:
        report.note(f"{path}{k}", d[k], rank[d[k]])
        out[k] = rank[d[k]]


def _looks_like_indices(values) -> bool:
    return len(set(values)) == len(values) and list(values) == sorted(values)


# ------------------------------------------------------------------------------------------ fixers
# Each fixer restores one invariant that configs check (or models assume) after the generic shrink.
Fixer = Callable[[dict, dict, dict, ShrinkReport, str], None]


def _fix_kv_heads(d: dict, out: dict, depths: dict, report: ShrinkReport, path: str) -> None:
    """Key/value heads divide the attention heads; full multi-head attention stays so."""
    for prefix in ("encoder_", "decoder_"):  # Moonshine: per-part heads, full attention kept full
        heads, kv = out.get(f"{prefix}num_attention_heads"), out.get(f"{prefix}num_key_value_heads")
        if _is_int(heads) and _is_int(kv) and kv > 0:
            old_heads, old_kv = d.get(f"{prefix}num_attention_heads"), d.get(f"{prefix}num_key_value_heads")
            new = heads if old_kv == old_heads else (math.gcd(heads, kv) if heads % kv else kv)
            report.note(f"{path}{prefix}num_key_value_heads", kv, new)
            out[f"{prefix}num_key_value_heads"] = new
    for heads_key in ("num_attention_heads", "n_head", "num_heads"):
        heads, old_heads = out.get(heads_key), d.get(heads_key)
        if not _is_int(heads):
            continue
        for kv_key in ("num_key_value_heads", "n_kv_heads", "num_kv_heads"):
            kv, old_kv = out.get(kv_key), d.get(kv_key)
            if not _is_int(kv) or kv <= 0:
                continue
            new = heads if old_kv == old_heads else (math.gcd(heads, kv) if heads % kv else kv)
            report.note(f"{path}{kv_key}", kv, new)
            out[kv_key] = new
        break


def _fix_head_dim(d: dict, out: dict, depths: dict, report: ShrinkReport, path: str) -> None:
    """An unset ``head_dim`` means hidden_size // heads: write it, since a stale derived value can survive
    a ``from_dict`` round trip."""
    if "head_dim" in out and out["head_dim"] is None and _is_int(out.get("hidden_size")):
        heads = out.get("num_attention_heads")
        if _is_int(heads) and heads > 0:
            out["head_dim"] = out["hidden_size"] // heads
            report.note(f"{path}head_dim", None, out["head_dim"])


def _fix_mla_head(d: dict, out: dict, depths: dict, report: ShrinkReport, path: str) -> None:
    """Multi-head latent attention: a query/key head is its non-rotary part plus its rotary part (also a
    plain ``head_dim`` that was that sum, as dots.llm3's sliding-window layers check)."""
    nope, rope = out.get("qk_nope_head_dim"), out.get("qk_rope_head_dim")
    if not (_is_int(nope) and _is_int(rope)):
        return
    if _is_int(out.get("qk_head_dim")) and out["qk_head_dim"] != nope + rope:
        report.note(f"{path}qk_head_dim", out["qk_head_dim"], nope + rope)
        out["qk_head_dim"] = nope + rope
    old_sum = (d.get("qk_nope_head_dim") or 0) + (d.get("qk_rope_head_dim") or 0)
    if _is_int(out.get("head_dim")) and d.get("head_dim") == old_sum and out["head_dim"] != nope + rope:
        report.note(f"{path}head_dim", out["head_dim"], nope + rope)
        out["head_dim"] = nope + rope


def _rotary_head(cfg: dict) -> int | None:
    for key in ("qk_rope_head_dim", "head_dim"):
        if _is_int(cfg.get(key)):
            return cfg[key]
    if (
        _is_int(cfg.get("hidden_size"))
        and _is_int(cfg.get("num_attention_heads"))
        and cfg["num_attention_heads"]
    ):
        return cfg["hidden_size"] // cfg["num_attention_heads"]
    return None


def _fix_mrope(d: dict, out: dict, depths: dict, report: ShrinkReport, path: str) -> None:
    """Multimodal RoPE sections add up to half the rotary dimension: rescale them with the head size."""
    old_head, head = _rotary_head(d), _rotary_head(out)
    if not old_head or not head:
        return
    for key in ("rope_parameters", "rope_scaling"):
        params = out.get(key)
        if not isinstance(params, dict):
            continue
        for g in [params] + [v for v in params.values() if isinstance(v, dict)]:
            section = g.get("mrope_section")
            if not _int_list(section):
                continue
            total = max(len(section), round(sum(section) * head / old_head))
            new = _split_like(section, total)
            if new != list(section):
                g["mrope_section"] = new
                report.note(f"{path}{key}.mrope_section", section, new)


def _split_like(section: list[int], total: int) -> list[int]:
    """Integers proportional to ``section`` that add up to ``total`` (each at least 1)."""
    s = sum(section)
    raw = [max(1, v * total // s) for v in section]
    i = 0
    while sum(raw) < total:
        raw[i % len(raw)] += 1
        i += 1
    while sum(raw) > total and max(raw) > 1:
        raw[raw.index(max(raw))] -= 1
    return raw


def _fix_mamba(d: dict, out: dict, depths: dict, report: ShrinkReport, path: str) -> None:
    """Mamba-2 heads: n_heads * head_dim == expand * hidden_size."""
    hidden = out.get("hidden_size")
    for heads_key, dim_key, expand_key in (
        ("mamba_n_heads", "mamba_d_head", "mamba_expand"),
        ("num_heads", "head_dim", "expand"),
    ):
        heads, expand = out.get(heads_key), out.get(expand_key)
        if not (_is_int(hidden) and _is_int(heads) and heads > 0 and isinstance(expand, (int, float))):
            continue
        if dim_key not in out:
            continue
        inner = int(expand * hidden)
        if heads_key == "mamba_n_heads" and _is_int(out.get("mamba_d_ssm")):  # an explicit inner width
            report.note(f"{path}mamba_d_ssm", out["mamba_d_ssm"], inner)
            out["mamba_d_ssm"] = inner
        if inner % heads:
            continue
        new = inner // heads
        report.note(f"{path}{dim_key}", out.get(dim_key), new)
        out[dim_key] = new


def _fix_backbone_stages(d: dict, out: dict, depths: dict, report: ShrinkReport, path: str) -> None:
    """Backbone outputs name stages by layer number (``stage12``): keep as many outputs, on the last layers."""
    names = d.get("stage_names")
    if not isinstance(names, list) or not depths:
        return
    depth = next((dep for dep in depths.values() if dep.old + 1 == len(names)), None)
    if depth is None:
        return
    out.pop("stage_names", None)  # rebuilt by the config from the new depth
    indices = d.get("out_indices")
    if not _int_list(indices):
        out["out_features"] = None
        out["out_indices"] = None
        return
    k = len(indices)
    layer_key = next(key for key, dep in depths.items() if dep is depth)
    if k > out[layer_key]:
        report.note(f"{path}{layer_key}", out[layer_key], k)
        out[layer_key] = depth.new = k
    n = out[layer_key]
    new = list(range(n - k + 1, n + 1))
    report.note(f"{path}out_indices", indices, new)
    out["out_indices"] = new
    out["out_features"] = [f"stage{i}" for i in new]


def _fix_timm(d: dict, out: dict, depths: dict, report: ShrinkReport, path: str) -> None:
    """Use a transformers ResNet instead of a timm backbone (timm is not a dependency), with the same
    output stages."""
    for key, value in list(out.items()):
        if isinstance(value, dict) and value.get("model_type") == "timm_backbone":
            indices = value.get("out_indices") or [4]
            out[key] = {
                "model_type": "resnet",
                "depths": [1, 1, 1, 1],
                "hidden_sizes": [16, 32, 64, 128],
                "embedding_size": 16,
                "num_channels": value.get("num_channels", 3),
                "out_features": [f"stage{i}" for i in indices if 1 <= i <= 4] or ["stage4"],
            }
            report.note(f"{path}{key}", "timm_backbone", "resnet")
    if out.get("use_timm_backbone") is True:
        out["use_timm_backbone"] = False
        out.setdefault("backbone_config", None)
        if out.get("backbone") and not out.get("backbone_config"):
            out["backbone"] = None
        report.note(f"{path}use_timm_backbone", True, False)


def _fix_pixel_window(d: dict, out: dict, depths: dict, report: ShrinkReport, path: str) -> None:
    """A window measured in pixels (Qwen2.5-VL: ``window_size == patch * merge * 4``) stays a whole number
    of merged patches (at most 2, so that the small image holds a window)."""
    patch, merge, window = d.get("patch_size"), d.get("spatial_merge_size") or 1, d.get("window_size")
    if not (
        _is_int(patch) and _is_int(merge) and _is_int(window) and patch > 1 and _is_int(out.get("patch_size"))
    ):
        return
    unit = patch * merge
    if window < unit or window % unit:
        return
    new = out["patch_size"] * merge * min(window // unit, 2)
    report.note(f"{path}window_size", out.get("window_size"), new)
    out["window_size"] = new


_PART_HEADS = re.compile(r"([a-z]+)_num_attention_heads")


def _fix_part_heads(d: dict, out: dict, depths: dict, report: ShrinkReport, path: str) -> None:
    """The heads of a named part with its own width (V-JEPA 2's ``pred_num_attention_heads`` over
    ``pred_hidden_size``) split the shrunk width: at most ``HEADS`` of them."""
    for key, value in list(out.items()):
        match = _PART_HEADS.fullmatch(key)
        if not match or not _is_int(value) or value <= HEADS:
            continue
        width = f"{match.group(1)}_hidden_size"
        if _is_int(out.get(width)) and out[width] != d.get(width) and out[width] % value:
            report.note(f"{path}{key}", value, HEADS)
            out[key] = HEADS


def _plans_experts(model_type: Any) -> bool:
    """The config class lays out expert tensors (its tensor/expert-parallel plans name ``experts``): its
    layers are mixtures of experts whatever the default config leaves unset."""
    cls = _config_class(model_type) if isinstance(model_type, str) else None
    plans = [getattr(cls, n, None) for n in ("base_model_tp_plan", "base_model_ep_plan")] if cls else []
    return any(isinstance(p, dict) and any("experts" in k for k in p) for p in plans)


def _fix_unset(d: dict, out: dict, depths: dict, report: ShrinkReport, path: str) -> None:
    """Sizes the default config leaves None that the modeling code reads unconditionally get a value
    consistent with the config: the small vocabulary, full multi-head attention for unset key/value heads,
    the tiny expert sizes for a mixture-of-experts class, a small window for sliding-attention layers."""
    fills: dict[str, Any] = {}
    if "vocab_size" in out and out["vocab_size"] is None:
        fills["vocab_size"] = VOCAB
    if out.get("num_key_value_heads", 0) is None and _is_int(out.get("num_attention_heads")):
        fills["num_key_value_heads"] = out["num_attention_heads"]
    if (
        "sliding_window" in out
        and out["sliding_window"] is None
        and "sliding_attention" in (out.get("layer_types") or ())
    ):
        fills["sliding_window"] = 4
    if _plans_experts(out.get("model_type")):
        for key, value in out.items():
            rule = _rule_for(key) if value is None else None
            if rule is None:
                continue
            if rule.kind in ("experts", "top_k", "expert_groups", "shared_experts") or (
                rule.kind == "ffn" and ("moe" in key or "expert" in key)
            ):
                fills[key] = EXPERT_FFN if rule.kind == "ffn" else rule.cap
    for key, value in fills.items():
        report.note(f"{path}{key}", None, value)
        out[key] = value


def _fix_stage_heads(d: dict, out: dict, depths: dict, report: ShrinkReport, path: str) -> None:
    """Per-stage widths split into per-stage heads (CvT: ``embed_dim[i] / num_heads[i]``): each shrunk
    stage width is rounded to a multiple of its stage's head count."""
    heads = [k for k, v in out.items() if _int_list(v) and list_kind(k) == "heads"]
    for key, value in list(out.items()):
        if not (_int_list(value) and list_kind(key) == "width"):
            continue
        for hk in heads:
            h = out[hk]
            if len(h) != len(value) or all(w % max(n, 1) == 0 for w, n in zip(value, h, strict=True)):
                continue
            units = [math.lcm(max(n, 1), 8) for n in h]  # whole heads, each a multiple of 8 wide
            new = [u * max(1, round(w / u)) for w, u in zip(value, units, strict=True)]
            report.note(f"{path}{key}", d.get(key, value), new)
            out[key] = value = new


_MAIN_WIDTHS = ("hidden_size", "d_model", "n_embd", "embed_dim")


def _fix_width_parts(d: dict, out: dict, depths: dict, report: ShrinkReport, path: str) -> None:
    """A list of dimensions that added up to the width (Reformer's ``axial_pos_embds_dim``: the axial
    position embeddings are concatenated into ``hidden_size``) is split again, in proportion, to add up
    to the shrunk width."""
    width_key = next((k for k in _MAIN_WIDTHS if _is_int(d.get(k)) and _is_int(out.get(k))), None)
    if width_key is None or d[width_key] == out[width_key]:
        return
    old, new_width = d[width_key], out[width_key]
    for key, value in d.items():
        named_dimension = "dim" in key or "size" in key
        if not (_int_list(value) and len(value) > 1 and list_kind(key) is None and named_dimension):
            continue
        if sum(value) != old or min(value) <= 0:
            continue
        new = _split_like(list(value), new_width)
        report.note(f"{path}{key}", value, new)
        out[key] = new


BOX_PARTS = 6  # x0, y0, x1, y1, height, width
BOX_WIDTH = BOX_PARTS * 16  # a multiple of the six box parts and of the heads


_PIXEL_BORDER = re.compile(r".*prompt_size")


def _fix_pixel_borders(d: dict, out: dict, depths: dict, report: ShrinkReport, path: str) -> None:
    """A border measured in pixels of the image (TVP's ``visual_prompt_size``: learned frames padded around
    a ``max_img_size - 2 * visual_prompt_size`` centre) keeps its share of the shrunk image."""
    images = [k for k in ("max_img_size", "image_size") if _is_int(d.get(k)) and _is_int(out.get(k))]
    key_image = images[0] if images else None
    if key_image is None or d[key_image] == out[key_image]:
        return
    for key, value in d.items():
        if _PIXEL_BORDER.fullmatch(key) and _is_int(value) and 0 < 2 * value < d[key_image]:
            new = max(1, value * out[key_image] // d[key_image])
            report.note(f"{path}{key}", value, new)
            out[key] = new


def _fix_window_stages(d: dict, out: dict, depths: dict, report: ShrinkReport, path: str) -> None:
    """Windowed attention over stages that halve the map (Swin): the last stage's map is still at least
    one window wide, so the image grows to ``patch * window * 2**(stages - 1)`` when the shrunk one is
    smaller (the relative position bias is sized for whole windows)."""
    stages, window = out.get("depths"), out.get("window_size")
    patch, image = out.get("patch_size"), out.get("image_size")
    sizes = _is_int(window) and _is_int(patch) and _is_int(image)
    if not (_int_list(stages) and sizes) or "num_heads" not in out:
        return
    need = patch * window * 2 ** (len(stages) - 1)
    if image < need <= d.get("image_size", need):
        report.note(f"{path}image_size", d.get("image_size"), need)
        out["image_size"] = need


def _fix_stage_doubling(d: dict, out: dict, depths: dict, report: ShrinkReport, path: str) -> None:
    """Stages that double the width from a base (CLAP's audio Swin: ``patch_embeds_hidden_size * 2**i``)
    end at ``hidden_size`` when they did before: the base becomes the shrunk width over the doubling."""
    stages, hidden = d.get("depths"), d.get("hidden_size")
    if not (_int_list(stages) and _is_int(hidden) and _is_int(out.get("hidden_size"))) or len(stages) < 2:
        return
    if "hidden_size" in _derived_fields(d.get("model_type")):
        return  # Swin derives hidden_size from the base itself: nothing to keep in step
    doubling = 2 ** (len(stages) - 1)
    for key, value in d.items():
        doubled = _is_int(value) and value * doubling == hidden
        if key == "hidden_size" or not (doubled and DIMENSION_NAME.fullmatch(key)):
            continue
        new = out["hidden_size"] // doubling
        if new >= 4 and out["hidden_size"] % doubling == 0 and out.get(key) != new:
            report.note(f"{path}{key}", value, new)
            out[key] = new


def _fix_box_embeddings(d: dict, out: dict, depths: dict, report: ShrinkReport, path: str) -> None:
    """2-D layout models that split the width into the six box embeddings (LiLT: ``hidden_size // 6``
    each, concatenated back to ``hidden_size``; LayoutLMv3: four ``coordinate_size`` and two
    ``shape_size`` parts) need a width divisible by six: it becomes ``BOX_WIDTH``, each part a sixth."""
    if "max_2d_position_embeddings" not in d or not _is_int(out.get("hidden_size")):
        return
    if not any(k in d for k in ("coordinate_size", "shape_size", "channel_shrink_ratio")):
        return  # LayoutLM v1 adds full-width box embeddings: any width works
    old = out["hidden_size"]
    for key, value in d.items():  # everything that was the width still is
        if _is_int(value) and value == d["hidden_size"] and out.get(key) == old:
            report.note(f"{path}{key}", value, BOX_WIDTH)
            out[key] = BOX_WIDTH
    for key in ("coordinate_size", "shape_size"):
        if _is_int(d.get(key)):
            report.note(f"{path}{key}", d[key], BOX_WIDTH // BOX_PARTS)
            out[key] = BOX_WIDTH // BOX_PARTS


def _is_layer_plan(value: Any) -> bool:
    """[[pattern, repeats], ...] with a pattern of layer kinds (GPT-Neo's ``attention_types``)."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(
            isinstance(e, (list, tuple))
            and len(e) == 2
            and isinstance(e[0], list)
            and bool(e[0])
            and all(isinstance(k, str) for k in e[0])
            and _is_int(e[1])
            for e in value
        )
    )


def _fix_layer_plan(d: dict, out: dict, depths: dict, report: ShrinkReport, path: str) -> None:
    """A plan of (pattern, repeats) pairs that spelled out a layer count keeps spelling out the shrunk count:
    the config class expands it again into the per-layer list and checks its length."""
    for key, value in d.items():
        if not _is_layer_plan(value):
            continue
        total = sum(len(pattern) * n for pattern, n in value)
        for depth in depths.values():
            if depth.old != total or depth.new == depth.old:
                continue
            pattern = value[0][0]
            if depth.new % len(pattern) == 0:
                plan = [[pattern, depth.new // len(pattern)]]
            else:
                plan = [[pattern[:1], depth.new]]
            report.note(f"{path}{key}", value, plan)
            out[key] = plan
            break


FIXERS: tuple[Fixer, ...] = (
    _fix_unset,
    _fix_part_heads,
    _fix_pixel_window,
    _fix_kv_heads,
    _fix_head_dim,
    _fix_mla_head,
    _fix_mrope,
    _fix_mamba,
    _fix_backbone_stages,
    _fix_timm,
    _fix_stage_heads,
    _fix_width_parts,
    _fix_box_embeddings,
    _fix_pixel_borders,
    _fix_window_stages,
    _fix_stage_doubling,
    _fix_layer_plan,
)


def smallest_text_vocab(d: dict) -> int:
    """The smallest vocabulary of at least 16 entries anywhere in a (shrunk) config tree."""
    found = []

    def walk(node: dict) -> None:
        for key, value in node.items():
            if is_subconfig(value):
                walk(value)
            elif _is_int(value) and key.endswith("vocab_size") and value >= 16:
                found.append(value)

    walk(d)
    return min(found) if found else VOCAB


def set_path(d: dict, dotted: str, value: Any) -> None:
    """``d["a"]["b"] = value`` for ``dotted == "a.b"`` (creating nested dicts as needed)."""
    *parents, last = dotted.split(".")
    node = d
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value


def get_attr_path(obj: Any, dotted: str) -> Any:
    """``obj.a.b`` for ``dotted == "a.b"``."""
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def get_path(d: dict, dotted: str, default: Any = None) -> Any:
    node: Any = d
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def shrink_config_dict(d: dict) -> tuple[dict, ShrinkReport, TokenIds]:
    """Generic shrink of a config dictionary; returns the new dictionary, the changes and the token ids."""
    report = ShrinkReport()
    first = shrink_dict(copy.deepcopy(d), TokenIds(), ShrinkReport())  # to learn the shrunk vocabularies
    tokens = TokenIds(top=min(VOCAB, smallest_text_vocab(first)) - 1)
    out = shrink_dict(copy.deepcopy(d), tokens, report)
    _follow_widths_across(d, out, report)
    _follow_width_sums(d, out, report)
    _follow_half_widths(d, out, report)
    _follow_image_grid(d, out, report)
    return out, report, tokens


def _config_pairs(d: dict, out: dict, path: str = "") -> list[tuple[dict, dict, str]]:
    """(original, shrunk, path) of every config in the tree, outermost first."""
    pairs = [(d, out, path)]
    for key, value in d.items():
        if is_subconfig(value) and isinstance(out.get(key), dict):
            pairs += _config_pairs(value, out[key], f"{path}{key}.")
    return pairs


def _follow_width_sums(d: dict, out: dict, report: ShrinkReport) -> None:
    """A dimension no rule shrank that was the sum of two model widths of the tree (NeuCodec's
    ``quantization_dim``: the acoustic ``hidden_size`` plus the semantic encoder's, concatenated) is the
    sum of the two shrunk widths. A sum two different pairs could explain is left alone."""
    widths: list[tuple[int, int]] = []
    for orig, new, _ in _config_pairs(d, out):
        widths += [
            (orig[k], new[k])
            for k in _MAIN_WIDTHS
            if _is_int(orig.get(k)) and _is_int(new.get(k)) and new[k] != orig[k]
        ]
    sums: dict[int, set[int]] = {}
    for (a, a2), (b, b2) in itertools.combinations(widths, 2):
        sums.setdefault(a + b, set()).add(a2 + b2)
    for orig, new, path in _config_pairs(d, out):
        derived = _unset_by_default(_config_class(orig.get("model_type") or ""))  # derived again later
        for key, value in orig.items():
            if not (_is_int(value) and new.get(key) == value and len(sums.get(value, ())) == 1):
                continue
            if key in derived:
                continue
            if key in KEEP or not DIMENSION_NAME.fullmatch(key) or "position" in key or "max_" in key:
                continue
            if TOKEN_ID.fullmatch(key) or "vocab" in key:
                continue
            (total,) = sums[value]
            report.note(f"{path}{key}", value, total)
            new[key] = total


_HALF_WIDTH = re.compile(r".*pos_feats")


def _follow_half_widths(d: dict, out: dict, report: ShrinkReport) -> None:
    """Sinusoidal position features come in sine/cosine pairs: a count that was half a channel width of
    its config (SAM's ``num_pos_feats`` is half of ``output_channels``) is half of the shrunk width."""
    for orig, new, path in _config_pairs(d, out):
        halves = {
            v: new[k] // 2
            for k, v in orig.items()
            if _is_int(v) and _is_int(new.get(k)) and new[k] != v and DIMENSION_NAME.fullmatch(k)
        }
        for key, value in orig.items():
            half = _HALF_WIDTH.fullmatch(key) and _is_int(value) and 2 * value in halves
            if half and new.get(key) == value:
                report.note(f"{path}{key}", value, halves[2 * value])
                new[key] = halves[2 * value]


_GRID = re.compile(r"image_embedding_size|.*feature_sizes")


def _side(value: Any) -> int | None:
    if _is_int(value):
        return value
    if _int_list(value) and len(set(value)) == 1:
        return value[0]
    return None


def _image_geometry(pairs: list[tuple[dict, dict, str]]) -> tuple[int, int, int | None, int | None] | None:
    """(old image, new image, old patch, new patch) of the first config of ``pairs`` that has an image."""
    for orig, new, _ in pairs:
        image, small = _side(orig.get("image_size")), _side(new.get("image_size"))
        if image and small:
            patch, small_patch = _side(orig.get("patch_size")), _side(new.get("patch_size"))
            return image, small, patch, small_patch
    return None


def _rescale_grid(value: Any, scale: Callable[[int], int | None]) -> Any:
    if _is_int(value):
        return scale(value)
    if isinstance(value, (list, tuple)):
        items = [_rescale_grid(v, scale) for v in value]
        return None if any(i is None for i in items) else items
    return None


def _follow_image_grid(d: dict, out: dict, report: ShrinkReport) -> None:
    """Sizes measured on the image's feature maps (SAM's ``image_embedding_size``, SAM 2's
    ``backbone_feature_sizes``: the backbone's grids at strides 4, 8, 16) follow the shrunk image: by the
    patch grid's ratio where the image is cut into patches, else by the image's ratio. A prompt encoder
    whose ``image_size / patch_size`` was one of those grids keeps meaning that grid (its patch size is
    the total stride of the backbone level it reads)."""
    pairs = _config_pairs(d, out)
    grids: dict[int, int] = {}
    for i, (orig, new, path) in enumerate(pairs):
        for key, value in orig.items():
            if not _GRID.fullmatch(key) or new.get(key) != value:
                continue
            subs = [p for p in pairs[i:] if p[2].startswith(path)]  # this config, then its nested ones
            geo = _image_geometry(subs) or _image_geometry(pairs)
            if geo is None:
                continue
            image, small, patch, small_patch = geo
            flat = [v for v in _flatten(value) if v > 0]
            if not flat:
                continue
            if patch and small_patch and image % patch == 0 and all(v % (image // patch) == 0 for v in flat):
                old_unit, new_unit = image // patch, small // small_patch
            else:
                old_unit, new_unit = image, small

            def scale(v: int, a: int = old_unit, b: int = new_unit) -> int | None:
                return v * b // a if (v * b) % a == 0 and v * b >= a else None

            rescaled = _rescale_grid(value, scale)
            if rescaled is None or rescaled == value:
                continue
            grids.update(zip(flat, (v for v in _flatten(rescaled)), strict=True))
            report.note(f"{path}{key}", value, rescaled)
            new[key] = rescaled
    for orig, new, path in pairs:
        image, patch = _side(orig.get("image_size")), _side(orig.get("patch_size"))
        small = _side(new.get("image_size"))
        if not (image and patch and small and _is_int(new.get("patch_size"))) or image % patch:
            continue
        grid = grids.get(image // patch)
        if grid and small % grid == 0 and new["patch_size"] != small // grid:
            new["patch_size"] = small // grid
            report.changes.pop(f"{path}patch_size", None)
            report.note(f"{path}patch_size", patch, small // grid)


def _flatten(value: Any) -> list[int]:
    if _is_int(value):
        return [value]
    return [x for v in value for x in _flatten(v)] if isinstance(value, (list, tuple)) else []


def _follow_widths_across(d: dict, out: dict, report: ShrinkReport) -> None:
    """Across nested configs too: a dimension of one sub-config that equalled a width of another (a flow
    head's ``condition_dim`` and the backbone's ``hidden_size``) still equals it."""
    widths: dict[int, int] = {}

    def collect(orig: dict, new: dict) -> None:
        for key, value in orig.items():
            if is_subconfig(value) and isinstance(new.get(key), dict):
                collect(value, new[key])
            elif (
                _is_int(value)
                and key in ("hidden_size", "d_model", "n_embd", "embed_dim")
                and new.get(key) != value
            ):
                widths.setdefault(value, new[key])

    def apply(orig: dict, new: dict, path: str) -> None:
        for key, value in orig.items():
            if is_subconfig(value) and isinstance(new.get(key), dict):
                apply(value, new[key], f"{path}{key}.")
            elif _follows_a_width(key, value, new.get(key), widths) and value >= WIDTH:
                new[key] = widths[value]
                report.note(f"{path}{key}", value, widths[value])

    collect(d, out)
    apply(d, out, "")


def fix_built_config(config: Any, report: ShrinkReport, path: str = "") -> None:
    """Invariants of values the config class fills in itself at construction (so the dictionary pass could
    not see them): multimodal RoPE sections injected by default add up to half the rotary dimension."""
    for key, value in list(vars(config).items()):
        if hasattr(value, "to_dict") and hasattr(value, "model_type") and value is not config:
            fix_built_config(value, report, f"{path}{key}.")
    params = getattr(config, "rope_parameters", None)
    if not isinstance(params, dict):
        return
    head = _rotary_head(
        {k: _attr(config, k) for k in ("qk_rope_head_dim", "head_dim", "hidden_size", "num_attention_heads")}
    )
    if not head:
        return
    # Qwen2-VL-style models fall back to a built-in section ([16, 24, 24]) when the config has none
    implicit = "mrope_section" in (getattr(type(config), "ignore_keys_at_rope_validation", None) or ())
    for g in [params] + [v for v in params.values() if isinstance(v, dict)]:
        section = g.get("mrope_section")
        added = section is None and implicit and g is params
        if added:
            section = [2, 3, 3]
        factor = g.get("partial_rotary_factor", _attr(config, "partial_rotary_factor") or 1.0) or 1.0
        if not _int_list(section):
            continue
        total = max(len(section), int(head * factor) // 2)
        if added or sum(section) != total:
            new = _split_like(section, total)
            report.note(f"{path}rope_parameters.mrope_section", section, new)
            g["mrope_section"] = new


def _attr(config: Any, name: str) -> Any:
    try:
        return getattr(config, name, None)
    except Exception:  # noqa: BLE001 - per-layer configs refuse global reads of per-layer attributes
        return None


# Values a config class fills in itself whose own name is also an output selection the user makes.
_KEEP_DERIVED = {"out_features", "out_indices", "model_type", "_name_or_path", "output_attentions"}


def _derived_fields(model_type: Any) -> set[str]:
    """Attributes a config class writes out but does not take as fields (it derives them: Swin's
    ``hidden_size`` from ``embed_dim`` and the depths); empty for an unknown class."""
    import dataclasses  # lazy: private

    cls = _config_class(model_type) if isinstance(model_type, str) else None
    if cls is None or not dataclasses.is_dataclass(cls):
        return set()
    fields = {f.name for f in dataclasses.fields(cls)}
    return {"hidden_size"} - fields


def _unset_by_default(cls: Any) -> set[str]:
    """Fields of a config dataclass whose declared default is None (the class fills them in itself)."""
    import dataclasses  # lazy: private

    if cls is None or not dataclasses.is_dataclass(cls):
        return set()
    return {f.name for f in dataclasses.fields(cls) if f.default is None}


def drop_derived(cls: Any, small: dict, original: dict, top: bool = True) -> None:
    """Drop, in place, the values a config dataclass derives at construction (``feature_size`` from the
    lags, Swin's ``num_layers`` and ``hidden_size`` from ``depths``) that ``to_dict`` wrote out: left in,
    they keep their full-size value; dropped, ``from_dict`` derives them again from the shrunk sizes.
    ``original`` is the default config's dictionary, so every such key there was derived by the class;
    keys a family override added are kept. Nested configs too, through their own classes.

    Fields work the same way when their declared default is None but the default config holds a number
    (X-codec's ``codebook_dim``, the acoustic plus the semantic width): the class derived it, and if no
    rule shrank it, it is unset again so that the class derives it from the shrunk sizes (top level only:
    a composite may set its parts' values itself)."""
    import dataclasses  # lazy: private

    if not dataclasses.is_dataclass(cls):
        return
    fields = {f.name for f in dataclasses.fields(cls)}
    unset_by_default = _unset_by_default(cls) if top else set()
    for key in list(small):
        value = small[key]
        if isinstance(value, dict):
            sub_cls = _config_class(value.get("model_type") or "")
            if sub_cls is not None and isinstance(original.get(key), dict):
                drop_derived(sub_cls, value, original[key], top=False)
            continue
        untouched = _is_int(value) and value == original.get(key)
        if key in unset_by_default and untouched and not TOKEN_ID.fullmatch(key):
            small[key] = None
            continue
        if key in fields or key in _KEEP_DERIVED or key.startswith("_") or key not in original:
            continue
        small.pop(key)


def _config_class(model_type: str) -> Any:
    try:
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING  # lazy: heavy

        return CONFIG_MAPPING[model_type]
    except Exception:  # noqa: BLE001 - an unknown or custom model type: leave its dictionary as it is
        return None


# ------------------------------------------------------------------------ attributes the config lacks
_MISSING_ATTR = re.compile(r"'(\w+)' object has no attribute '(\w+)'")


def _configs_in(config: Any) -> list[Any]:
    """``config`` and every config nested in it, breadth first."""
    out, level = [], [config]
    while level:
        out += level
        level = [
            v
            for cfg in level
            for k, v in vars(cfg).items()
            if not k.startswith("_") and hasattr(v, "to_dict") and hasattr(v, "model_type") and v not in out
        ]
    return out


def missing_default(config: Any, owner: Any, name: str, reserved: set[int]) -> Any:
    """A value for an attribute the modeling code reads but the (default) config never set: the same
    attribute of a sibling config when one has it, else one consistent with the owner's own sizes (a
    fresh special token id below the vocabulary, no dropout, full multi-head attention, the expert width,
    the usual RoPE base); None when nothing sensible is known."""
    for cfg in _configs_in(config):
        value = _attr(cfg, name)
        if cfg is not owner and value is not None and not hasattr(value, "to_dict"):
            return copy.deepcopy(value)
    if TOKEN_ID.fullmatch(name):
        vocab = _attr(owner, "vocab_size") or _attr(config.get_text_config(), "vocab_size") or VOCAB
        taken = set(reserved)
        for cfg in _configs_in(config):
            taken.update(v for k, v in vars(cfg).items() if TOKEN_ID.fullmatch(k) and _is_int(v))
        free = [i for i in range(vocab - 1, 7, -1) if i not in taken]
        if free:
            reserved.add(free[0])
            return free[0]
        return None
    if "dropout" in name:
        return 0.0
    if name == "rope_theta":
        return 10000.0
    if name in ("num_key_value_heads", "num_kv_heads"):
        return _attr(owner, "num_attention_heads")
    if name.endswith("intermediate_size"):
        return _attr(owner, "moe_intermediate_size") or EXPERT_FFN
    return None


def fill_missing_attribute(config: Any, exc: BaseException, reserved: set[int], extra: tuple = ()) -> bool:
    """When ``exc`` says a config object lacks an attribute, give every config of that class (in the
    tree of ``config`` and in ``extra``, copies the model made) a value from ``missing_default``; True
    when one was set, so that the caller builds or runs again."""
    match = _MISSING_ATTR.search(str(exc)) if isinstance(exc, AttributeError) else None
    if match is None or not match.group(1).endswith("Config"):
        return False
    cls_name, name = match.groups()
    owners = [c for c in [*_configs_in(config), *extra] if type(c).__name__ == cls_name]
    if not owners:
        return False
    value = missing_default(config, owners[0], name, reserved)
    if value is None:
        return False
    for owner in owners:
        setattr(owner, name, value)
    return True
