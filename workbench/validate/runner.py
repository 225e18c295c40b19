"""Validate one architecture in the current process: build tiny, run on the CPU, run on "tpu", compare.

Stages, in order (each one's wall time is kept):

``config`` shrink the config · ``model`` build it with seed 0, float32, eval mode · ``inputs`` synthetic
inputs · ``cpu`` forward, probe loss, backward on the CPU (the reference; anything failing up to here is a
*harness* failure: the tiny model or its inputs are not valid) · ``tpu_forward`` · ``tpu_backward``
(tier 1) · ``compare`` outputs and parameter gradients (tier 2) · ``generate`` greedy decoding with the KV
cache on both devices (generative models) · ``compile`` one ``torch.compile(backend="tpu")`` forward.

A backward op rescued on the CPU or any CPU fallback during the "tpu" stages is a tier-1 failure.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import importlib.util
import os
import time
import traceback
import warnings
from collections.abc import Callable
from typing import Any

import torch

from tpu_workbench.backend import comparison as compare
from tpu_workbench.bench.validate import families, inputs, randomness, rounding, shrink, weights, zoo

GENERATE_FAMILIES = {"causal-lm", "vision-language", "seq2seq-lm", "speech-seq2seq"}
NEW_TOKENS = 3
HARNESS_STAGES = ("config", "model", "inputs", "cpu")

Emit = Callable[[str, dict], None]


class StageError(Exception):
    """A stage failed; carries the stage name and the original exception's text."""

    def __init__(self, stage: str, exc: BaseException):
        super().__init__(f"{type(exc).__name__}: {exc}")
        self.stage = stage
        self.exc = exc
        self.tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-12))


def _no_emit(event: str, data: dict) -> None:
    pass


def _to(obj: Any, device: str) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, dict):
        return {k: _to(v, device) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to(v, device) for v in obj)
    return obj


def _call(model: Any, args: Any) -> Any:
    if isinstance(args, dict):
        return model(**args)
    if isinstance(args, (list, tuple)):
        return model(*args)
    return model(args)


# --------------------------------------------------------------------------------------------- building
def build_config(arch: zoo.Architecture) -> tuple[Any, dict, set[int]]:
    """Tiny config of one architecture, the changes made, and the special token ids reserved."""
    import transformers  # lazy: heavy

    cls = getattr(transformers, arch.config_class)
    fam = families.family_for(arch.model_type)
    default = cls(**fam.init)
    d = default.to_dict()
    small, report, tokens = shrink.shrink_config_dict(d)
    for path, value in fam.config.items():
        report.note(path, shrink.get_path(small, path), value)
        shrink.set_path(small, path, value)
    small.pop("transformers_version", None)
    shrink.drop_derived(cls, small, d)
    config = cls.from_dict(small)
    shrink.fix_built_config(config, report)
    return config, report.changes, tokens.reserved


def _model_class(name: str) -> Any:
    import transformers  # lazy: heavy

    return getattr(transformers, name)


def _config_for(cls: Any, config: Any) -> Any:
    """The config a class is built from: a composite's nested config when the class serves only that part
    (MusicgenForCausalLM reads the ``decoder`` config of a MusicgenConfig); else the config itself."""
    wanted = getattr(cls, "config_class", None)
    if not isinstance(wanted, type) or isinstance(config, wanted):
        return config
    for value in vars(config).values():
        if isinstance(value, wanted):
            return value
    return config


def build_model(cls: Any, config: Any) -> Any:
    torch.manual_seed(0)
    config = _config_for(cls, config)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = cls(config)
    model = model.float().eval()
    weights.fill_zero_matrices(model)  # zero router gates tie every expert: see workbench.validate.weights
    return model


def count_parameters(model: Any) -> int:
    return sum(p.numel() for p in model.parameters())


def load_factory(spec: str) -> Callable[[], Any]:
    """``module:function`` or ``path/to/file.py:function`` -> the callable."""
    if ":" not in spec:
        raise ValueError(f"--model wants module:factory (e.g. my_models:build), got {spec!r}")
    module_name, attr = spec.rsplit(":", 1)
    if module_name.endswith(".py") or os.sep in module_name:
        loader = importlib.util.spec_from_file_location("user_model", module_name)
        if loader is None or loader.loader is None:
            raise ValueError(f"cannot load {module_name}")
        module = importlib.util.module_from_spec(loader)
        loader.loader.exec_module(module)
    else:
        module = importlib.import_module(module_name)
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise ValueError(f"{module_name} has no callable {attr!r}")
    return fn


def _user_model(spec: str) -> tuple[Any, Any, dict]:
    """A user factory returns ``model`` (a transformers model: inputs are built from its config) or
    ``(model, inputs)`` with inputs a dict of keyword arguments or a tuple of positional ones."""
    torch.manual_seed(0)
    made = load_factory(spec)()
    model, args = made if isinstance(made, tuple) and len(made) == 2 else (made, None)
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"{spec} returned {type(model).__name__}, not a torch.nn.Module")
    model = model.float().eval()
    if args is None:
        config = getattr(model, "config", None)
        if config is None:
            raise TypeError(f"{spec} returned a model without a config; return (model, inputs) instead")
        args = inputs.build_inputs(model, config, set())
    return model, args, {}


# --------------------------------------------------------------------------------------------- stages
class Run:
    """State and results of one validation run; ``result`` is what goes back to the parent process."""

    def __init__(self, emit: Emit):
        self.emit = emit
        self.result: dict[str, Any] = {"stages": {}, "status": "running"}

    def stage(self, name: str, fn: Callable[[], Any]) -> Any:
        self.emit("stage", {"stage": name})
        t0 = time.perf_counter()
        try:
            out = fn()
        except Exception as exc:  # noqa: BLE001 - every failure is data for the report
            self.result["stages"][name] = {"ok": False, "s": round(time.perf_counter() - t0, 3)}
            raise StageError(name, exc) from exc
        self.result["stages"][name] = {"ok": True, "s": round(time.perf_counter() - t0, 3)}
        return out


def _forward_backward(
    model: Any, args: Any
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor | None]]:
    outputs = _call(model, args)
    leaves = {name: t.detach().to("cpu") for name, t in compare.tensor_leaves(outputs)}
    loss = compare.probe_loss(outputs)
    if loss is None:
        raise RuntimeError("the model's outputs carry no gradient (nothing to differentiate)")
    loss.backward()
    grads = {
        n: (p.grad.detach().to("cpu") if p.grad is not None else None)
        for n, p in model.named_parameters()
        if p.requires_grad
    }
    return leaves, grads


def _to_float64(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.double() if obj.is_floating_point() else obj
    if isinstance(obj, dict):
        return {k: _to_float64(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_float64(v) for v in obj)
    return obj


def _arbitrate(
    cpu_model: Any, args: Any, got_out: dict, ref_out: dict, got_grads: dict, ref_grads: dict, draws: bool
) -> dict:
    """Tier 2 again, each tensor over its tolerance judged against a float64 CPU run (compare.FP64_MULTIPLIER),
    then against the CPU run's own Monte Carlo rounding noise (compare.NOISE_MULTIPLIER). A model that
    draws random numbers in its forward (``draws``) gets no noise band: its spread would be its sampling."""
    g_got, g_ref = _grad_maps(ref_grads, got_grads)
    out64, g64, note = {}, {}, True
    try:
        model64 = copy.deepcopy(cpu_model).double()
        model64.zero_grad(set_to_none=True)
        torch.manual_seed(0)
        out64, grads64 = _forward_backward(model64, _to_float64(args))
        g64 = {n: g for n, g in grads64.items() if g is not None}
    except Exception as exc:  # noqa: BLE001 - a model that cannot run in float64 is judged by the noise band
        note = f"not run: {type(exc).__name__}: {exc}"[:300]

    def judge(noise_out: dict | None, noise_grads: dict | None) -> dict:
        return {
            "forward": compare.compare_all_fp64(
                got_out, ref_out, out64, compare.FORWARD_RTOL, compare.FORWARD_ATOL, noise_out
            ),
            "gradients": compare.compare_all_fp64(
                g_got, g_ref, g64, compare.GRAD_RTOL, compare.GRAD_ATOL, noise_grads
            ),
            "float64_reference": note,
        }

    verdict = judge(None, None)
    if draws:
        verdict["rounding_noise"] = "not used: the forward draws random numbers"
    elif not (verdict["forward"]["ok"] and verdict["gradients"]["ok"]):  # the reruns cost 8 CPU runs
        noise_out, noise_grads = rounding.noise_band(
            lambda m: _forward_backward(m, args), cpu_model, ref_out, g_ref
        )
        verdict = judge(noise_out, noise_grads)
        verdict["rounding_noise"] = {"samples": rounding.SAMPLES, "epsilon": rounding.EPSILON}
    return verdict


def _random_draws(cpu_model: Any, args: Any) -> dict[str, int]:
    """The random ops the model's CPU forward runs (see workbench.validate.randomness)."""
    with torch.no_grad():
        return randomness.count_random_draws(lambda: _call(cpu_model, args))[1]


def _grad_maps(cpu: dict, tpu: dict) -> tuple[dict, dict]:
    ref = {n: g for n, g in cpu.items() if g is not None}
    got = {n: g for n, g in tpu.items() if g is not None}
    missing = {n for n in ref if n not in got} | {n for n in got if n not in ref}
    for n in missing:  # a gradient present on one side only is compared against zeros, which shows it
        ref.setdefault(n, torch.zeros_like(got.get(n)))
        got.setdefault(n, torch.zeros_like(ref[n]))
    return got, ref


def _decoder_start(model: Any) -> dict:
    """An encoder-decoder whose configs name no decoder start token starts from its pad token, as T5 and
    its relatives are trained (their hub generation configs say so; a config built offline lacks them)."""
    cfg = getattr(model, "config", None)
    gen = getattr(model, "generation_config", None)
    if not getattr(cfg, "is_encoder_decoder", False):
        return {}
    if any(getattr(c, "decoder_start_token_id", None) is not None for c in (cfg, gen)):
        return {}
    pad = getattr(cfg, "pad_token_id", None)
    return {"decoder_start_token_id": pad} if pad is not None else {}


def _generate(model: Any, args: dict, device: str) -> list[list[int]]:
    gen_args = {k: v for k, v in args.items() if not k.startswith("decoder_")}
    gen_args.update(_decoder_start(model))
    with torch.no_grad():
        out = model.generate(
            **_to(gen_args, device),
            max_new_tokens=NEW_TOKENS,
            min_new_tokens=NEW_TOKENS,
            do_sample=False,
            use_cache=True,
            num_beams=1,
        )
    seq = out.sequences if hasattr(out, "sequences") else out
    return seq.to("cpu").tolist()


def validate(
    model_type: str | None = None,
    *,
    user_model: str | None = None,
    device: str = "tpu",
    check_generate: bool = True,
    check_compile: bool = False,
    harness_only: bool = False,
    emit: Emit = _no_emit,
) -> dict:
    """Run every stage for one architecture (or a user's model) and return the result dictionary.

    ``harness_only`` stops after the CPU reference (status ``"built"``): what the harness can build, fast,
    with no device involved."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    run = Run(emit)
    res = run.result
    res.update({"model_type": model_type or user_model, "device": device})
    ops = contextlib.ExitStack()  # the "tpu" stages run under the device-op recorder
    try:
        if user_model:
            res["family"] = "user"
            model, args, _ = run.stage("model", lambda: _user_model(user_model))
            res["model_class"] = type(model).__name__
            family = "user"
        else:
            arch = {a.model_type: a for a in zoo.architectures()}[model_type]
            res["family"] = family = arch.family
            res["config_class"] = arch.config_class
            if model_type in families.UNBUILDABLE:
                raise StageError("model", RuntimeError(families.UNBUILDABLE[model_type]))
            config, changes, reserved = run.stage("config", lambda: build_config(arch))
            res["shrunk"] = changes
            model, args, cand, reference = None, None, None, None
            errors = []
            fam = families.family_for(model_type)
            overrides = fam.inputs
            candidates = arch.candidates
            if fam.submodel:  # the mapped class has no forward of its own: validate the part that does
                class_name, attr = fam.submodel
                config = shrink.get_attr_path(config, attr)
                candidates = (zoo.Candidate(class_name, "override", arch.family),)
                res["submodel"] = {"class": class_name, "config": attr, "why": fam.why}
            for cand in candidates:
                try:
                    model, args, reference, tried = _build_reference(
                        run, cand, config, reserved, overrides, fam.entry
                    )
                    if tried:
                        res["input_variant"] = tried
                    break
                except StageError as exc:
                    errors.append((cand.class_name, exc))
                    model = None
            if model is None:  # report the head class's error unless it failed earlier than the base
                raise errors[0][1] if errors[0][1].stage == "cpu" or len(errors) == 1 else errors[-1][1]
            if errors:
                res["fallback_from"] = [
                    {"class": c, "stage": e.stage, "error": str(e)[:500]} for c, e in errors
                ]
            res["model_class"] = cand.class_name
            res["family"] = family = cand.family if cand.family != "base" else inputs_family(model)
        res["parameters"] = count_parameters(model)
        res["inputs"] = {
            k: list(v.shape) if isinstance(v, torch.Tensor) else repr(v)[:40]
            for k, v in (args.items() if isinstance(args, dict) else enumerate(args))
        }
        cpu_model = model
        if user_model:
            tpu_model = copy.deepcopy(cpu_model)  # before any backward: no .grad to copy
            ref_out, ref_grads = run.stage("cpu", lambda: _forward_backward(cpu_model, args))
        else:
            tpu_model, ref_out, ref_grads = reference
        res["harness_ok"] = True
        if harness_only:
            res["status"] = "built"
            return res
        if device == "tpu":
            from tpu_workbench.backend import coverage  # lazy: jax

            res["device_ops"] = ops.enter_context(coverage.recording())
        tpu_model = run.stage("tpu_move", lambda: tpu_model.to(device))
        tpu_args = _to(args, device)
        before = compare.fallback_counters()

        def tpu_forward():
            out = _call(tpu_model, tpu_args)
            loss = compare.probe_loss(out)
            if loss is not None and device != "cpu":
                torch.accelerator.synchronize()
            return out, loss

        out, loss = run.stage("tpu_forward", tpu_forward)

        def tpu_backward():
            loss.backward()
            if device != "cpu":
                torch.accelerator.synchronize()

        run.stage("tpu_backward", tpu_backward)
        counters = compare.counter_diff(before)
        res["cpu_rescued"] = counters
        res["tier1"] = not counters["rescues"] and not counters["fallbacks"]
        got_out = {name: t.detach().to("cpu") for name, t in compare.tensor_leaves(out)}
        got_grads = {
            n: (p.grad.detach().to("cpu") if p.grad is not None else None)
            for n, p in tpu_model.named_parameters()
            if p.requires_grad
        }

        def tier2():
            fwd = compare.compare_all(got_out, ref_out, compare.FORWARD_RTOL, compare.FORWARD_ATOL)
            g_got, g_ref = _grad_maps(ref_grads, got_grads)
            grd = compare.compare_all(g_got, g_ref, compare.GRAD_RTOL, compare.GRAD_ATOL)
            return {"forward": fwd, "gradients": grd}

        res["agreement"] = run.stage("compare", tier2)
        if res["tier1"] and not (res["agreement"]["forward"]["ok"] and res["agreement"]["gradients"]["ok"]):
            res["random_draws"] = _random_draws(cpu_model, args)
            try:
                res["agreement"] = _arbitrate(
                    cpu_model, args, got_out, ref_out, got_grads, ref_grads, bool(res["random_draws"])
                )
            except Exception as exc:  # noqa: BLE001 - a model the arbitration cannot rerun keeps its verdict
                res["agreement"]["arbitration"] = f"not run: {type(exc).__name__}: {exc}"[:300]
        res["tier2"] = bool(
            res["tier1"] and res["agreement"]["forward"]["ok"] and res["agreement"]["gradients"]["ok"]
        )
        res["status"] = "pass" if res["tier2"] else ("tier1" if res["tier1"] else "fail")
        partial = dict(res)  # kept by the parent if generate/compile later crash or hang
        if "device_ops" in partial:
            partial["device_ops"] = _device_ops(partial["device_ops"])
        emit("partial", partial)
        if (
            check_generate
            and family in GENERATE_FAMILIES
            and isinstance(args, dict)
            and _can_generate(cpu_model)
        ):
            res["generate"] = _run_generate(run, cpu_model, tpu_model, args, device)
        if check_compile:
            res["compile"] = _run_compile(run, tpu_model, tpu_args, ref_out)
        res["status"] = "pass" if res["tier2"] else ("tier1" if res["tier1"] else "fail")
    except StageError as exc:
        res["status"] = "harness" if exc.stage in HARNESS_STAGES or exc.stage == "model" else "fail"
        res["failed_stage"] = exc.stage
        res["error_type"] = type(exc.exc).__name__
        res["error"] = str(exc.exc)[:4000]
        res["traceback"] = exc.tb[-6000:]
        if res["status"] == "fail":
            res["tier1"] = False
            res["tier2"] = False
            res["cpu_rescued"] = compare.counter_diff(before) if "before" in locals() else {}
    finally:
        ops.close()
        if "device_ops" in res:
            res["device_ops"] = _device_ops(res["device_ops"])
    return res


def _device_ops(counts: dict[str, int]) -> dict:
    """The overloads the "tpu" stages dispatched, against TorchTPU 0.2.0's table and our registry."""
    from tpu_workbench.backend import coverage  # lazy: jax

    return coverage.device_ops(counts)


_FILL_TRIES = 4  # attributes a config may lack, filled one per failed attempt


def _build_filling(run: Run, cand: zoo.Candidate, config: Any, reserved: set[int]) -> Any:
    """Build the model; an attribute the modeling code reads that the default config never set gets a
    value consistent with the config (``shrink.missing_default``) and the build runs again."""
    for attempt in range(_FILL_TRIES + 1):
        try:
            return run.stage("model", lambda: build_model(_model_class(cand.class_name), config))
        except StageError as exc:
            if attempt == _FILL_TRIES or not shrink.fill_missing_attribute(config, exc.exc, reserved):
                raise
    raise AssertionError("unreachable")


def _cpu_filling(
    run: Run, model: Any, args: Any, config: Any, reserved: set[int], device_copy: Any
) -> tuple[dict, dict]:
    """The CPU forward and backward; as ``_build_filling`` for attributes first read in the forward (on
    the configs the model's modules hold too, and the device copy's: ``_from_config`` copies them)."""
    for attempt in range(_FILL_TRIES + 1):
        try:
            return run.stage("cpu", lambda: _forward_backward(model, args))
        except StageError as exc:
            held = tuple(
                {
                    id(c): c
                    for net in (model, device_copy)
                    for m in net.modules()
                    if hasattr(c := getattr(m, "config", None), "to_dict")
                }.values()
            )
            if attempt == _FILL_TRIES or not shrink.fill_missing_attribute(config, exc.exc, reserved, held):
                raise
            model.zero_grad(set_to_none=True)
    raise AssertionError("unreachable")


def _build_reference(
    run: Run, cand: zoo.Candidate, config: Any, reserved: set[int], overrides: dict, entry: str | None = None
):
    """Model of one candidate class, inputs and the CPU reference run. Inputs are built with the default
    layout first; when the CPU refuses them, the other layouts the builders offered are tried (at most 8).
    Returns the model, inputs, (untouched copy for the device, reference outputs, reference gradients) and
    the layout choice that worked (None for the default)."""
    model = _build_filling(run, cand, config, reserved)
    config = _config_for(type(model), config)  # inputs follow the part of a composite the model reads
    if entry:  # an instance attribute: deepcopy rebinds it to the copy
        model.forward = getattr(model, entry)
    # before any forward: a model may cache tensors of the autograd graph (LeViT's attention biases),
    # which deepcopy refuses
    pristine = run.stage("model", lambda: copy.deepcopy(model))
    axes: dict[str, int] = {}
    first_error: StageError | None = None
    try:
        args = run.stage(
            "inputs", lambda: inputs.build_inputs(model, config, reserved, overrides, None, axes)
        )
    except StageError as exc:
        first_error, args = exc, None
    for variant in [None, *inputs.variants(axes)]:
        if variant is not None:
            try:
                args = run.stage(
                    "inputs",
                    lambda v=variant, m=model: inputs.build_inputs(m, config, reserved, overrides, v),
                )
            except StageError:
                continue
        elif args is None:
            continue
        model.zero_grad(set_to_none=True)
        device_copy = copy.deepcopy(pristine)
        try:
            ref_out, ref_grads = _cpu_filling(run, model, args, config, reserved, device_copy)
        except StageError as exc:
            first_error = first_error or exc
            model = copy.deepcopy(pristine)  # the failed forward may have left state (caches) behind
            continue
        return model, args, (device_copy, ref_out, ref_grads), variant
    raise first_error or StageError("inputs", RuntimeError("no input layout ran on the CPU"))


def inputs_family(model: Any) -> str:
    return zoo.BASE_FAMILY.get(getattr(model, "main_input_name", ""), "base")


def _can_generate(model: Any) -> bool:
    fn = getattr(model, "can_generate", None)
    try:
        return bool(fn()) if callable(fn) else False
    except Exception:  # noqa: BLE001
        return False


def _run_generate(run: Run, cpu_model: Any, tpu_model: Any, args: dict, device: str) -> dict:
    """Greedy tokens on both devices; a CPU failure means the harness cannot say (not a tpu failure)."""
    try:
        ref = _generate(cpu_model, args, "cpu")
    except Exception as exc:  # noqa: BLE001
        return {"status": "harness", "error": f"{type(exc).__name__}: {exc}"[:1000]}
    before = compare.fallback_counters()
    try:
        got = run.stage("generate", lambda: _generate(tpu_model, args, device))
    except StageError as exc:
        return {
            "status": "fail",
            "error": str(exc)[:1000],
            "error_type": type(exc.exc).__name__,
            "traceback": exc.tb[-3000:],
        }
    counters = compare.counter_diff(before)
    ok = got == ref and not counters["fallbacks"] and not counters["rescues"]
    return {
        "status": "pass" if ok else "fail",
        "tokens_equal": got == ref,
        "cpu_rescued": counters,
        "new_tokens": NEW_TOKENS,
        "cpu": ref[:1],
        "tpu": got[:1],
    }


def _run_compile(run: Run, tpu_model: Any, tpu_args: Any, ref_out: dict) -> dict:
    before = compare.fallback_counters()
    try:
        compiled = torch.compile(tpu_model, backend="tpu")

        def fwd():
            with torch.no_grad():
                return _call(compiled, tpu_args)

        out = run.stage("compile", fwd)
    except StageError as exc:
        return {
            "status": "fail",
            "error": str(exc)[:1000],
            "error_type": type(exc.exc).__name__,
            "traceback": exc.tb[-3000:],
        }
    got = {name: t.detach().to("cpu") for name, t in compare.tensor_leaves(out)}
    agree = compare.compare_all(got, ref_out, compare.FORWARD_RTOL, compare.FORWARD_ATOL)
    counters = compare.counter_diff(before)
    ok = agree["ok"] and not counters["fallbacks"]
    return {"status": "pass" if ok else "fail", "agreement": agree, "cpu_rescued": counters}
