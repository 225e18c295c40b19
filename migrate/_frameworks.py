"""The entry points of training frameworks that choose the device themselves (Lightning, composer, Hugging
Face): shared by the framework rules (rules/frameworks.py) and the flow layer (a device check whose value
reaches one of them is kept: the framework does not use the native TPU because a check says it is there)."""

from __future__ import annotations


def _qualified(roots: tuple[str, ...], paths: tuple[str, ...]) -> frozenset[str]:
    return frozenset(f"{r}.{p}" for r in roots for p in paths)


_LIGHTNING = ("lightning.pytorch", "pytorch_lightning")
_FABRIC = ("lightning.fabric", "lightning_fabric")
LIGHTNING_ENTRIES = (
    _qualified(_LIGHTNING, ("Trainer", "trainer.Trainer", "trainer.trainer.Trainer"))
    | _qualified(_FABRIC, ("Fabric", "fabric.Fabric"))
    | {"lightning.Trainer", "lightning.Fabric"}
    # Fabric's predecessor, subclassed with a run() method (co-tracker's training scripts)
    | {"pytorch_lightning.lite.LightningLite", "pytorch_lightning.lite.lite.LightningLite"}
    | {"lightning_lite.LightningLite", "lightning.lite.LightningLite"}
)
COMPOSER_ENTRIES = frozenset(
    {"composer.Trainer", "composer.trainer.Trainer", "composer.trainer.trainer.Trainer"}
)
HF_ENTRIES = _qualified(
    ("transformers",),
    (
        "TrainingArguments",
        "training_args.TrainingArguments",
        "Seq2SeqTrainingArguments",
        "training_args_seq2seq.Seq2SeqTrainingArguments",
    ),
)
FRAMEWORK_ENTRIES = LIGHTNING_ENTRIES | COMPOSER_ENTRIES | HF_ENTRIES
