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

Architectures where the generic rule is wrong get a small entry in ``workbench.validate.families``, which is
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
    IntRule("queries", _name("num_queries", "num_query_tokens"), 8),
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
        if value is None and key in ("image_token_id", "image_token_index") and _query_former(d):
            value = _UNSET_IMAGE_TOKEN  # a fixed number of query tokens stand in for the image: they need a place
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
            new = [min(v, IMAGE) for v in value]
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
    _fit_layer_lists(d, out, depths, report, path)
    for fixer in FIXERS:
        fixer(d, out, depths, report, path)
    return out


_UNSET_IMAGE_TOKEN = 10**9  # stands for "no id in the default config": renumbered like any other


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
DIMENSION_NAME = re.compile(r".*(_dim|_size|_channels|dim|channels|hidden|_groups)$")


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
    return (_is_int(value) and value in widths and shrunk == value and key not in KEEP
            and bool(DIMENSION_NAME.fullmatch(key)) and not TOKEN_ID.fullmatch(key)
            and "position" not in key and "vocab" not in key and "max_" not in key)


def _follow_widths(d: dict, out: dict, widths: dict[int, int], report: ShrinkReport, path: str) -> None:
    """A dimension that equalled a width of this config before shrinking still equals it afterwards
    (``codebook_dim == hidden_size``, ``condition_dim == hidden_size`` ...)."""
    for key, value in d.items():
        if _follows_a_width(key, value, out.get(key), widths):
            report.note(f"{path}{key}", value, widths[value])
            out[key] = widths[value]


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
                new_dict.setdefault(str(depth.index(int(k))).zfill(width), v)
            report.note(f"{path}{key}", sorted(value), sorted(new_dict))
            out[key] = new_dict


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
    """Multi-head latent attention: a query/key head is its non-rotary part plus its rotary part."""
    nope, rope = out.get("qk_nope_head_dim"), out.get("qk_rope_head_dim")
    if _is_int(out.get("qk_head_dim")) and _is_int(nope) and _is_int(rope) and out["qk_head_dim"] != nope + rope:
        report.note(f"{path}qk_head_dim", out["qk_head_dim"], nope + rope)
        out["qk_head_dim"] = nope + rope


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
    if not (_is_int(patch) and _is_int(merge) and _is_int(window) and patch > 1 and _is_int(out.get("patch_size"))):
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
    if "sliding_window" in out and out["sliding_window"] is None and "sliding_attention" in (
        out.get("layer_types") or ()
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
    return out, report, tokens


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


def drop_derived(cls: Any, small: dict, original: dict) -> None:
    """Drop, in place, the values a config dataclass derives at construction (``feature_size`` from the
    lags, Swin's ``num_layers`` and ``hidden_size`` from ``depths``) that ``to_dict`` wrote out: left in,
    they keep their full-size value; dropped, ``from_dict`` derives them again from the shrunk sizes.
    ``original`` is the default config's dictionary, so every such key there was derived by the class;
    keys a family override added are kept. Nested configs too, through their own classes."""
    import dataclasses  # lazy: private

    if not dataclasses.is_dataclass(cls):
        return
    fields = {f.name for f in dataclasses.fields(cls)}
    for key in list(small):
        value = small[key]
        if isinstance(value, dict):
            sub_cls = _config_class(value.get("model_type") or "")
            if sub_cls is not None and isinstance(original.get(key), dict):
                drop_derived(sub_cls, value, original[key])
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
