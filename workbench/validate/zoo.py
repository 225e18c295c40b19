"""The model zoo: every architecture (``model_type``) the installed ``transformers`` can build from a config.

The auto mappings of ``transformers.models.auto.modeling_auto`` name, per task, the class that serves a
``model_type``. Each architecture is validated through one class: the first of its tasks in
``TASK_PRIORITY`` (the head users run: an encoder-decoder before its decoder alone, a causal LM before its bare base
model), then the base model as the
second candidate. ``family`` is the task group that class belongs to (one compiled check per family).
"""

from __future__ import annotations

import fnmatch
import functools
from dataclasses import dataclass, field

from tpu_workbench.bench.errors import WorkbenchError, unknown

# (mapping name in modeling_auto, family). Earlier entries are preferred as the class to validate.
TASK_PRIORITY: tuple[tuple[str, str], ...] = (
    ("MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES", "vision-language"),
    ("MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES", "vision-language"),
    ("MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES", "speech-seq2seq"),
    ("MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES", "seq2seq-lm"),
    # before causal LM: BERT-like encoders list their decoder variant (BertLMHeadModel) as a causal LM too
    ("MODEL_FOR_MASKED_LM_MAPPING_NAMES", "masked-lm"),
    ("MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "causal-lm"),
    ("MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES", "image-classification"),
    ("MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES", "audio-classification"),
    ("MODEL_FOR_CTC_MAPPING_NAMES", "ctc"),
    ("MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES", "sequence-classification"),
    ("MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES", "token-classification"),
    ("MODEL_FOR_VISUAL_QUESTION_ANSWERING_MAPPING_NAMES", "vision-language"),
    ("MODEL_FOR_TEXT_TO_SPECTROGRAM_MAPPING_NAMES", "text-to-audio"),
    ("MODEL_FOR_TEXT_TO_WAVEFORM_MAPPING_NAMES", "text-to-audio"),
    ("MODEL_FOR_TIME_SERIES_PREDICTION_MAPPING_NAMES", "time-series"),
    ("MODEL_FOR_SEMANTIC_SEGMENTATION_MAPPING_NAMES", "vision-dense"),
    ("MODEL_FOR_DEPTH_ESTIMATION_MAPPING_NAMES", "vision-dense"),
    ("MODEL_FOR_OBJECT_DETECTION_MAPPING_NAMES", "vision-detection"),
    ("MODEL_FOR_ZERO_SHOT_IMAGE_CLASSIFICATION_MAPPING_NAMES", "vision-text-dual"),
)
BASE_MAPPING = "MODEL_MAPPING_NAMES"
BASE_FAMILY = {  # family of an architecture validated through its base model, by main input name
    "input_ids": "text-encoder",
    "pixel_values": "vision-encoder",
    "input_values": "audio-encoder",
    "input_features": "audio-encoder",
    "past_values": "time-series",
}


@dataclass(frozen=True)
class Candidate:
    """One class that can serve an architecture, with the task mapping it came from."""

    class_name: str
    mapping: str
    family: str


@dataclass(frozen=True)
class Architecture:
    """One ``model_type``: its config class name and the classes to try, best first."""

    model_type: str
    config_class: str
    candidates: tuple[Candidate, ...]
    tasks: tuple[str, ...] = field(default=())

    @property
    def family(self) -> str:
        return self.candidates[0].family if self.candidates else "unknown"


def _mapping(name: str) -> dict:
    from transformers.models.auto import modeling_auto  # lazy: heavy

    return getattr(modeling_auto, name, {}) or {}


def _first_name(value) -> str:
    return value[0] if isinstance(value, (tuple, list)) else value


def all_mapping_names() -> list[str]:
    """Every ``*MAPPING_NAMES`` table of the auto models (tasks and the base model)."""
    from transformers.models.auto import modeling_auto  # lazy: heavy

    return sorted(n for n in dir(modeling_auto) if n.startswith("MODEL") and n.endswith("MAPPING_NAMES"))


def architectures() -> list[Architecture]:
    """Every model_type that appears in any auto model mapping and has a config class, sorted by name."""
    return list(_architectures())


@functools.lru_cache(maxsize=1)
def _architectures() -> tuple[Architecture, ...]:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES  # lazy: heavy

    tables = {name: _mapping(name) for name in all_mapping_names()}
    model_types = sorted({t for table in tables.values() for t in table})
    out = []
    for model_type in model_types:
        config_class = CONFIG_MAPPING_NAMES.get(model_type)
        if config_class is None:
            continue
        candidates: list[Candidate] = []
        for mapping, family in TASK_PRIORITY:
            if model_type in tables[mapping]:
                candidates.append(Candidate(_first_name(tables[mapping][model_type]), mapping, family))
                break
        if model_type in tables[BASE_MAPPING]:
            base = _first_name(tables[BASE_MAPPING][model_type])
            if all(c.class_name != base for c in candidates):
                candidates.append(Candidate(base, BASE_MAPPING, "base"))
        if not candidates:  # only in a task table not in TASK_PRIORITY (backbones, matching, ...)
            for mapping in sorted(tables):
                if model_type in tables[mapping]:
                    family = mapping.removeprefix("MODEL_FOR_").removesuffix("_MAPPING_NAMES").lower()
                    candidates.append(
                        Candidate(_first_name(tables[mapping][model_type]), mapping, family.replace("_", "-"))
                    )
                    break
        tasks = tuple(sorted(m for m, table in tables.items() if model_type in table))
        out.append(Architecture(model_type, config_class, tuple(candidates), tasks))
    return tuple(out)


def select(patterns: list[str] | None, zoo: list[Architecture] | None = None) -> list[Architecture]:
    """Architectures matching any of ``patterns`` (exact names, comma lists, shell globs); all if empty.

    A pattern that matches nothing is an error naming how to list the valid names.
    """
    zoo = architectures() if zoo is None else zoo
    if not patterns:
        return zoo
    wanted: list[str] = [p.strip() for item in patterns for p in item.split(",") if p.strip()]
    by_name = {a.model_type: a for a in zoo}
    chosen: dict[str, Architecture] = {}
    for pattern in wanted:
        hits = [n for n in by_name if fnmatch.fnmatchcase(n, pattern)]
        if not hits:
            close = [n for n in by_name if pattern.lower() in n][:12]
            hint = f"; similar: {', '.join(close)}" if close else "; see `tpu-bench validate --list`"
            raise WorkbenchError(unknown("architecture", pattern, []).split(";")[0] + hint)
        for n in sorted(hits):
            chosen[n] = by_name[n]
    return [chosen[n] for n in sorted(chosen)]
