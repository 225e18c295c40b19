"""Training frameworks' own device knobs (Lightning, Hugging Face Trainer, composer, accelerate): flagged.

``Trainer(accelerator="tpu")`` in Lightning, ``tpu_num_cores`` in Hugging Face, ``device="tpu"`` in
composer and ``accelerate launch --tpu`` all select the framework's torch_xla integration; their CUDA
twins (``accelerator="gpu"``, ``device="gpu"``) select CUDA. Whether and how each framework drives the
native TorchTPU device is the framework's decision, so these are flagged for a human and their literals
are never rewritten: turning ``accelerator="cuda"`` into ``accelerator="tpu"`` would silently pick
Lightning's torch_xla path.
"""

from __future__ import annotations

import libcst as cst

from .._frameworks import COMPOSER_ENTRIES, HF_ENTRIES, LIGHTNING_ENTRIES
from ._util import literals, mentions, string_body
from .base import Rule, register

#: The last name of every entry point: a cheap text test before a qualified-name look-up.
_ENTRY_NAMES = frozenset(q.rsplit(".", 1)[1] for q in LIGHTNING_ENTRIES | COMPOSER_ENTRIES | HF_ENTRIES)

#: Keyword -> literal values that pick torch_xla or CUDA (None: any value).
_LIGHTNING_KNOBS: dict[str, frozenset[str] | None] = {
    "accelerator": frozenset({"tpu", "xla", "gpu", "cuda", "auto"}),
    "strategy": frozenset(
        {"xla", "xla_debug", "xla_fsdp", "single_xla", "tpu_spawn", "tpu_spawn_debug", "single_tpu"}
    ),
    "tpu_cores": None,
    "gpus": None,
}
#: Knobs flagged also when their value is computed (a variable, an option).
_RUNTIME_KNOBS = frozenset({"accelerator"})
_COMPOSER_KNOBS: dict[str, frozenset[str] | None] = {"device": frozenset({"tpu", "gpu"})}
_HF_KNOBS: dict[str, frozenset[str] | None] = {
    "tpu_num_cores": None,
    "tpu_metrics_debug": None,
    "debug": frozenset({"tpu_metrics_debug"}),
}
_LIGHTNING_XLA_CLASSES = frozenset(
    {
        "XLAStrategy",
        "XLAFSDPStrategy",
        "SingleDeviceXLAStrategy",
        "XLAAccelerator",
        "XLAPrecision",
        "XLAPrecisionPlugin",
        "XLABf16PrecisionPlugin",
        "XLACheckpointIO",
        "XLAProfiler",
        "XLAEnvironment",
        "TPUAccelerator",
        "TPUSpawnStrategy",
        "SingleTPUStrategy",
        "TPUSpawnPlugin",
        "SingleTPUPlugin",
        "TPUPrecisionPlugin",
        "TPUBf16PrecisionPlugin",
        "TPUHalfPrecisionPlugin",
    }
)


def _entry(ctx, call: cst.Call) -> str | None:
    """Qualified name of the framework entry point ``call`` constructs, else None: the entry itself, or a class of
    this module built on one (``class Lite(LightningLite)`` ... ``Lite(accelerator="gpu")``)."""
    f = call.func
    last = f.attr.value if isinstance(f, cst.Attribute) else f.value if isinstance(f, cst.Name) else None
    if last not in _ENTRY_NAMES:
        found = _subclassed_entry(ctx, f.value) if isinstance(f, cst.Name) else None
        return found or _accelerator_keyword_entry(ctx, call)
    q = ctx.qname(f)
    return q if q in _ALL_ENTRIES else None


_ALL_ENTRIES = LIGHTNING_ENTRIES | COMPOSER_ENTRIES | HF_ENTRIES


#: What an unknown callee's ``accelerator=`` knob looks like when it is Lightning's (or a subclass's from another
#: module or package: torch-uncertainty's ``TUTrainer(accelerator="gpu")``); torch itself has no such keyword.
_KEYWORD_ENTRY = "lightning.Trainer"


def _accelerator_keyword_entry(ctx, call: cst.Call) -> str | None:
    """Lightning's entry for a call of something else that takes ``accelerator="cuda"``/``"gpu"``/...: a Trainer
    subclass defined elsewhere (handed "tpu" it would pick Lightning's torch_xla accelerator)."""
    for a in call.args:
        if a.keyword is not None and a.keyword.value == "accelerator":
            body = string_body(a.value)
            if body is None or body.lower() not in _LIGHTNING_KNOBS["accelerator"]:  # type: ignore[operator]
                return None
            q = ctx.qname(call.func)
            return None if q is not None and q.split(".")[0] == "torch" else _KEYWORD_ENTRY
    return None


def _subclassed_entry(ctx, name: str) -> str | None:
    """The framework entry a top-level class ``name`` of this module derives from directly, else None."""
    found = ctx.scratch.get("framework-subclasses")
    if found is None:
        found = {}
        for stmt in getattr(ctx.module, "body", ()):
            if isinstance(stmt, cst.ClassDef):
                for base in stmt.bases:
                    q = ctx.qname(base.value) if isinstance(base.value, (cst.Name, cst.Attribute)) else None
                    if q in _ALL_ENTRIES:
                        found[stmt.name.value] = q
        ctx.scratch["framework-subclasses"] = found
    return found.get(name)


def _knobs(call: cst.Call, knobs: dict[str, frozenset[str] | None]) -> list[tuple[str, cst.Arg]]:
    """``keyword=value`` texts of the arguments that select a device, with their Arg nodes."""
    found = []
    for a in call.args:
        if a.keyword is None or a.keyword.value not in knobs:
            continue
        values = knobs[a.keyword.value]
        bodies = [b for b in (string_body(s) for s in literals(a.value)) if b is not None]
        if values is None:
            body = string_body(a.value)
            found.append((a.keyword.value + "=" + (repr(body) if body is not None else "..."), a))
        elif not bodies and a.keyword.value in _RUNTIME_KNOBS:
            # accelerator=args.accelerator: chosen at run time, where "tpu" would mean torch_xla
            found.append((f"{a.keyword.value}={cst.Module([]).code_for_node(a.value)}", a))
        elif any(v in values for b in bodies for v in b.lower().split(",")):
            shown = f'"{bodies[0]}"' if isinstance(a.value, cst.SimpleString) else "..."
            found.append((f"{a.keyword.value}={shown}", a))
    return found


def framework_knob_strings(ctx, call: cst.Call) -> list[cst.SimpleString]:
    """String literals that are a framework's device knob in ``call`` (the device-string rules keep them)."""
    q = _entry(ctx, call)
    if q is None:
        return []
    knobs = (
        _LIGHTNING_KNOBS
        if q in LIGHTNING_ENTRIES
        else _COMPOSER_KNOBS
        if q in COMPOSER_ENTRIES
        else _HF_KNOBS
    )
    return [s for _text, a in _knobs(call, knobs) for s in literals(a.value)]


class _KnobRule(Rule):
    """Shared: flag the device knobs of one framework's entry points."""

    entries: frozenset[str] = frozenset()
    knobs: dict[str, frozenset[str] | None] = {}
    node_types = (cst.Call,)

    def message(self, short: str, found: str) -> str:
        raise NotImplementedError

    @staticmethod
    def backend(found: str) -> str:
        """What the knobs select, in words."""
        return "torch_xla" if "tpu" in found or "xla" in found else "CUDA"

    def implicit(self, qname: str, call: cst.Call) -> list[tuple[str, cst.Arg]]:
        """Knobs a call sets by leaving them out (Lightning's accelerator defaults to 'auto')."""
        return []

    def visit_node(self, ctx, node):
        q = _entry(ctx, node)
        if q is None or q not in self.entries:
            return
        found = _knobs(node, self.knobs) or self.implicit(q, node)
        if found:
            for _text, a in found:
                for lit in literals(a.value):
                    ctx.claim_string(lit, "", "rewritten", "", value=None)  # kept as written
            f = node.func
            own = (
                f.attr.value if isinstance(f, cst.Attribute) else f.value if isinstance(f, cst.Name) else None
            )
            short = own if q == _KEYWORD_ENTRY and own else q.rsplit(".", 1)[1]
            message = self.message(short, ", ".join(t for t, _a in found))
            if q == _KEYWORD_ENTRY and own not in _ENTRY_NAMES:
                message += f" (`{own}` takes Lightning's accelerator names)"
            ctx.flag(node, message, code=self.code)


@register
class LightningKnobs(_KnobRule):
    code = "TPU911"
    name = "lightning-device-knobs"
    family = "frameworks"
    outcome = "flagged"
    summary = (
        "Flag Lightning's device knobs: Trainer/Fabric(accelerator='tpu'/'xla'/'gpu'/'cuda'/'auto' or left out, "
        "strategy='xla'…, tpu_cores=, gpus=) and its XLA/TPU strategy, accelerator and precision classes."
    )
    rationale = (
        "These pick Lightning's torch_xla integration (or CUDA). How Lightning drives the native "
        "TorchTPU device is Lightning's decision; rewriting accelerator='cuda' to 'tpu' would "
        "silently select its torch_xla path."
    )
    before = 'import lightning as L\n\ntrainer = L.Trainer(accelerator="tpu", devices=8)\n'
    after = (
        'import lightning as L\n\n# TODO(tpu-migrate TPU911): `Trainer(accelerator="tpu")` selects Lightning\'s '
        "torch_xla integration; TorchTPU support depends on Lightning: choose the device by hand\n"
        'trainer = L.Trainer(accelerator="tpu", devices=8)\n'
    )
    entries = LIGHTNING_ENTRIES
    knobs = _LIGHTNING_KNOBS
    ref_prefixes = ("lightning", "pytorch_lightning", "lightning_fabric")

    def message(self, short, found):
        if "tpu" in found or "xla" in found or not ('"' in found or "'" in found or "=..." in found):
            what = f"selects Lightning's {self.backend(found)} integration"
            if '"' not in found and "'" not in found and "tpu" not in found and "xla" not in found:
                what = (
                    "picks Lightning's accelerator at run time (its 'tpu' is torch_xla; 'gpu'/'auto' pick CUDA "
                    "or the CPU); never give it 'tpu' for the native device"
                )
        elif "auto" in found:
            what = "picks CUDA where there is one and the CPU otherwise (Lightning's 'tpu' is torch_xla)"
        else:
            what = f"selects Lightning's {self.backend(found)} integration"
        return f"`{short}({found})` {what}; TorchTPU support depends on Lightning: choose the device by hand"

    def implicit(self, qname, call):
        """Trainer()/Fabric() without an accelerator: Lightning's 'auto' (CUDA or the CPU; torch_xla's 'tpu'),
        the same as accelerator='auto' written out. Not when arguments come positionally or from a splat."""
        if qname not in LIGHTNING_ENTRIES or any(a.keyword is None for a in call.args):
            return []
        if any(a.keyword.value == "accelerator" for a in call.args if a.keyword is not None):
            return []
        return [("accelerator='auto' by default", cst.Arg(cst.Name("_")))]

    def ref(self, ctx, orig, node, qname):
        name = next((p for p in qname.split(".") if p in _LIGHTNING_XLA_CLASSES), None)
        if name is not None:
            ctx.flag(
                orig,
                f"`{name}` is Lightning's torch_xla integration; TorchTPU support depends on "
                "Lightning: port by hand",
                code=self.code,
            )
        return None


@register
class HfTrainerKnobs(_KnobRule):
    code = "TPU912"
    name = "hf-trainer-tpu-knobs"
    family = "frameworks"
    outcome = "flagged"
    summary = (
        "Flag Hugging Face TrainingArguments(tpu_num_cores=, debug='tpu_metrics_debug') and the "
        "--tpu_num_cores / tpu_metrics_debug command-line strings."
    )
    rationale = (
        "The Trainer drives TPUs through torch_xla (xmp.spawn, metrics reports); with TorchTPU it runs "
        "under torchrun like any accelerator, so these options go, and the launch changes."
    )
    before = (
        'from transformers import TrainingArguments\n\nargs = TrainingArguments("out", tpu_num_cores=8)\n'
    )
    after = (
        "from transformers import TrainingArguments\n\n# TODO(tpu-migrate TPU912): `TrainingArguments("
        "tpu_num_cores=...)` configures the Trainer's torch_xla path; with TorchTPU launch with torchrun "
        'and drop it\nargs = TrainingArguments("out", tpu_num_cores=8)\n'
    )
    entries = HF_ENTRIES
    knobs = _HF_KNOBS
    node_types = (cst.Call, cst.SimpleString)
    _TOKENS = frozenset({"--tpu_num_cores", "tpu_metrics_debug"})

    def message(self, short, found):
        return (
            f"`{short}({found})` configures the Trainer's torch_xla path; with TorchTPU launch with "
            "torchrun and drop it"
        )

    def visit_node(self, ctx, node):
        if type(node) is not cst.SimpleString:
            return super().visit_node(ctx, node)
        claim = ctx.string_claims.get(id(node))
        if "tpu_" not in node.value or (claim is not None and claim[0]):  # flagged already by another rule
            return None
        option = _command_option(string_body(node), self._TOKENS)
        if option:
            ctx.flag(
                node,
                f"`{option}` is a Hugging Face Trainer option for torch_xla TPUs; with TorchTPU "
                "launch with torchrun and drop it",
                code=self.code,
            )
        return None


#: First words of a command line (``python train.py --tpu_num_cores 8``), as opposed to prose.
_COMMANDS = ("python", "accelerate", "torchrun", "deepspeed", "launch")


def _command_option(body: str | None, options: frozenset[str]) -> str | None:
    """The first of ``options`` in a string that is one argument (``"--tpu_num_cores"``) or a command line."""
    words = [w.split("=", 1)[0] for w in body.split()] if body else []
    hits = [w for w in words if w in options]
    if not hits:
        return None
    if len(words) <= 2 or words[0].startswith(_COMMANDS) or words[0].endswith(".py"):
        return hits[0]
    return None


@register
class ComposerDevice(_KnobRule):
    code = "TPU913"
    name = "composer-device"
    family = "frameworks"
    outcome = "flagged"
    summary = "Flag composer Trainer(device='tpu'/'gpu') and its DeviceTPU/DeviceGPU classes."
    rationale = (
        "composer's 'tpu' device is its torch_xla integration and 'gpu' is CUDA; TorchTPU support "
        "depends on composer."
    )
    before = 'from composer import Trainer\n\ntrainer = Trainer(model=m, device="tpu")\n'
    after = (
        'from composer import Trainer\n\n# TODO(tpu-migrate TPU913): `Trainer(device="tpu")` selects '
        "composer's torch_xla device; TorchTPU support depends on composer: choose the device by hand\n"
        'trainer = Trainer(model=m, device="tpu")\n'
    )
    entries = COMPOSER_ENTRIES
    knobs = _COMPOSER_KNOBS
    refs = frozenset(
        {
            "composer.devices.DeviceTPU",
            "composer.devices.device_tpu.DeviceTPU",
            "composer.devices.DeviceGPU",
            "composer.devices.device_gpu.DeviceGPU",
        }
    )

    def message(self, short, found):
        return (
            f"`{short}({found})` selects composer's {self.backend(found)} device; TorchTPU support depends "
            "on composer: choose the device by hand"
        )

    def ref(self, ctx, orig, node, qname):
        name = qname.rsplit(".", 1)[1]
        ctx.flag(
            orig,
            f"`{name}` is composer's {'torch_xla' if name == 'DeviceTPU' else 'CUDA'} device; "
            "TorchTPU support depends on composer: port by hand",
            code=self.code,
        )
        return None


@register
class AccelerateLaunchTpu(Rule):
    code = "TPU914"
    name = "accelerate-launch-tpu"
    family = "frameworks"
    outcome = "flagged"
    summary = "Flag `accelerate launch --tpu …` command lines (one string, or a list of arguments)."
    rationale = (
        "accelerate's --tpu options launch through torch_xla (xmp.spawn, TPU pods); with TorchTPU a "
        "plain multi-process launch (torchrun) replaces them."
    )
    before = 'import subprocess\n\nsubprocess.run(["accelerate", "launch", "--tpu", "train.py"])\n'
    after = (
        "import subprocess\n\n# TODO(tpu-migrate TPU914): `accelerate launch --tpu` starts torch_xla "
        "workers; with TorchTPU launch with torchrun (or accelerate launch without --tpu)\n"
        'subprocess.run(["accelerate", "launch", "--tpu", "train.py"])\n'
    )
    node_types = (cst.SimpleString, cst.List, cst.Tuple)

    def visit_node(self, ctx, node):
        if type(node) is cst.SimpleString:
            if "--tpu" not in node.value:
                return
            body = string_body(node)
            words = body.split() if body is not None else []
            hit = "accelerate" in words and any(w.startswith("--tpu") for w in words)
        else:
            words = [b for b in (string_body(e.value) for e in node.elements) if b is not None]
            hit = ("accelerate" in words or "launch" in words) and any(w.startswith("--tpu") for w in words)
        if hit:
            ctx.flag(
                node,
                "`accelerate launch --tpu` starts torch_xla workers; with TorchTPU launch with torchrun "
                "(or accelerate launch without --tpu)",
                code=self.code,
            )


#: Hugging Face accelerate's automatic placements: it spreads the model over the devices it knows.
_AUTO_MAPS = frozenset({"auto", "balanced", "balanced_low_0", "sequential"})
_OFFLOADS = frozenset({"enable_model_cpu_offload", "enable_sequential_cpu_offload"})


@register
class HfDeviceMapAuto(Rule):
    code = "TPU915"
    name = "hf-device-map-auto"
    family = "frameworks"
    outcome = "flagged"
    summary = (
        "Flag device_map='auto' (balanced, sequential) handed to a library (from_pretrained, pipeline), and "
        "diffusers' enable_model_cpu_offload / enable_sequential_cpu_offload."
    )
    rationale = (
        "accelerate places such a model on the devices it knows (CUDA, XPU, NPU, MPS ...) or on the CPU; "
        "TorchTPU's 'tpu' is not one of them, so on a TPU host the model stays on the CPU while the "
        "migrated inputs go to 'tpu'. Load without device_map and move the model with .to('tpu')."
    )
    before = 'from transformers import AutoModel\n\nm = AutoModel.from_pretrained(name, device_map="auto")\nx = x.cuda()\n'
    after = (
        "from transformers import AutoModel\n\n# TODO(tpu-migrate TPU915): `device_map='auto'` lets accelerate "
        "place the model on the devices it knows (CUDA, XPU, NPU, MPS) or the CPU, never TorchTPU's 'tpu': "
        "load without device_map and move the model with .to('tpu')\n"
        'm = AutoModel.from_pretrained(name, device_map="auto")\nx = x.cuda()\n'
    )
    node_types = (cst.Call, cst.Assign, cst.Param)
    words = _OFFLOADS

    def visit_node(self, ctx, node):
        if (
            type(node) is cst.Call
            and type(node.func) is cst.Attribute
            and node.func.attr.value in _OFFLOADS
            and mentions(ctx, "diffusers")
        ):
            # CogVideo's replicate predictors: `.to("tpu")` then pipe.enable_model_cpu_offload(): diffusers picks
            # the offload device from CUDA/NPU/XPU/MPS (a CUDA default), never 'tpu'
            ctx.flag(
                node,
                f"`{node.func.attr.value}()` moves the pipeline through accelerate hooks onto the accelerator "
                "diffusers knows (CUDA, NPU, XPU, MPS) or the device= given, never TorchTPU's 'tpu' (a TPU host's "
                "accelerate device is the CPU): drop it and keep the pipeline on 'tpu' (.to('tpu')), or offload by "
                "hand",
                code=self.code,
            )
            return
        if type(node) is cst.Param:
            # InternVL's LLaVA builder: `def load_pretrained_model(..., device_map="auto", device="cuda")`, the
            # default handed on through kwargs: the model is placed by accelerate while `device` becomes 'tpu'
            value = node.default if node.name.value == "device_map" else None
        elif type(node) is cst.Call:
            value = next(
                (a.value for a in node.args if a.keyword is not None and a.keyword.value == "device_map"),
                None,
            )
        else:  # kwargs["device_map"] = "auto"
            t = node.targets[0].target if len(node.targets) == 1 else None
            key = (
                t.slice[0].slice.value
                if isinstance(t, cst.Subscript)
                and len(t.slice) == 1
                and isinstance(t.slice[0].slice, cst.Index)
                else None
            )
            value = node.value if string_body(key) == "device_map" else None
        if value is not None and string_body(value) in _AUTO_MAPS:
            ctx.flag(
                node,
                f"`device_map='{string_body(value)}'` lets accelerate place the model on the devices it knows "
                "(CUDA, XPU, NPU, MPS) or the CPU, never TorchTPU's 'tpu': load without device_map and move "
                "the model with .to('tpu')",
                code=self.code,
            )


#: Engines that pick their own device from the accelerators they know, with what they pick on a TPU host.
_OWN_DEVICE = {
    "deepspeed.initialize": (
        "DeepSpeed",
        "its get_accelerator() (CUDA, XPU, NPU, HPU, MPS or the CPU)",
        "its ds_config 'fp16'/'bf16' sections are DeepSpeed's own mixed precision on that device",
    ),
    "deepspeed.init_inference": (
        "DeepSpeed",
        "its get_accelerator() (CUDA, XPU, NPU, HPU, MPS or the CPU)",
        "",
    ),
    "accelerate.Accelerator": (
        "accelerate",
        "the backends it knows (CUDA, XPU, NPU, MLU, HPU, MPS, torch_xla's 'xla') or the CPU",
        "check accelerator.device on the TPU host",
    ),
    "accelerate.accelerator.Accelerator": (
        "accelerate",
        "the backends it knows (CUDA, XPU, NPU, MLU, HPU, MPS, torch_xla's 'xla') or the CPU",
        "check accelerator.device on the TPU host",
    ),
}


@register
class EngineOwnDevice(Rule):
    code = "TPU916"
    name = "engine-own-device"
    family = "frameworks"
    outcome = "flagged"
    summary = (
        "Flag deepspeed.initialize / init_inference and accelerate.Accelerator(): they pick their own device."
    )
    rationale = (
        "DeepSpeed moves the model to get_accelerator()'s device and accelerate to the backend it detects "
        "(releases that ask torch.accelerator, 1.16 here, find 'tpu'; older ones do not); DeepSpeed does not know "
        "TorchTPU's 'tpu', so on a TPU host its engine runs on the CPU while migrated code "
        "sends tensors to 'tpu'; a file that builds a DeepSpeed engine is therefore left as written (its "
        "tensors follow the engine). Train with plain torch on 'tpu' (DDP / FSDP2 on tpu_dist), or keep this "
        "path CUDA's."
    )
    before = "import deepspeed\n\nengine, opt, _, _ = deepspeed.initialize(model=model, config=cfg)\n"
    after = (
        "import deepspeed\n\n# TODO(tpu-migrate TPU916): `deepspeed.initialize` places the model with its "
        "get_accelerator() (CUDA, XPU, NPU, HPU, MPS or the CPU), never TorchTPU's 'tpu': on a TPU host it runs "
        "on the CPU (this file is left as written, its .cuda() calls with it; code it calls may be migrated); "
        "its ds_config 'fp16'/'bf16' sections are DeepSpeed's own mixed precision on that device; train with "
        "plain torch on 'tpu' (DDP or FSDP2 on tpu_dist) or keep this path CUDA's\n"
        "engine, opt, _, _ = deepspeed.initialize(model=model, config=cfg)\n"
    )
    calls = frozenset(_OWN_DEVICE)

    def call(self, ctx, orig, node, qname):
        _lib, picks, extra = _OWN_DEVICE[qname]
        if _lib == "accelerate":
            # accelerate 1.16's get_torch_accelerator_backend asks torch.accelerator.current_accelerator(), which
            # is TorchTPU's 'tpu' on a TPU host (measured here: Accelerator().device == 'tpu'); older releases
            # know a fixed list and fall back to the CPU
            ctx.flag(
                orig,
                f"`{qname}` places the model on the backend it detects: releases that ask torch.accelerator "
                f"(accelerate 1.16 does) pick 'tpu' on a TPU host, older ones only {picks}; {extra}, and upgrade "
                "accelerate if it says 'cpu'",
                code=self.code,
            )
            return None
        ctx.flag(
            orig,
            f"`{qname}` places the model with {picks}, never TorchTPU's 'tpu': on a TPU host it runs on the CPU "
            + (
                "(this file is left as written, its .cuda() calls with it; code it calls may be migrated); "
                if self.flag_only
                else "while migrated tensors go to 'tpu'; "
            )
            + f"{extra + '; ' if extra else ''}train with plain torch on 'tpu' "
            "(DDP or FSDP2 on tpu_dist) or keep this path CUDA's",
            code=self.code,
        )
        return None
