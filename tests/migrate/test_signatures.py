"""Every call the codemod writes binds to the real signature of the API it calls (torch 2.13, or the local
replacement it adds), by parameter names and kinds, for every argument form of the call it replaced.

A battery of calls is generated from the signatures of the replaced APIs: the real ``inspect.signature`` of
``torch.cuda.*`` and, since torch_xla is not installed here, the signatures of the torch_xla APIs the rules
handle, written down below from torch_xla's source (xla_model.py, runtime.py, torch_xla.py, test_utils.py,
utils.py). Each API is called with its required arguments, all of them positionally, all by keyword, and each
optional one alone with a non-default value. The migrated output is parsed, every call to a ``torch.*`` API or
a ``_tpu``/``_Tpu`` helper is resolved, and its arguments are bound with ``Signature.bind``.
"""

from __future__ import annotations

import ast
import inspect
import re
from functools import cache, lru_cache

import libcst as cst
import pytest

from tpu_workbench.migrate import migrate_source
from tpu_workbench.migrate.names import import_table
from tpu_workbench.migrate.rules import all_rules
from tpu_workbench.migrate.rules._helpers import all_helpers

torch = pytest.importorskip("torch")

# torch_xla signatures (torch_xla 2.x source), by the alias the battery imports them under.
XLA_SIGNATURES = {
    "xm.xla_device": "n=None, devkind=None",
    "torch_xla.device": "index=None",
    "xm.is_xla_tensor": "tensor",
    "xm.xla_device_hw": "device",
    "xm.get_xla_supported_devices": "max_devices=None",
    "xm.mark_step": "wait=False, reset_scope=True",
    "torch_xla.sync": "wait=False, reset_scope=True",
    "xm.wait_device_ops": "devices=[]",
    "xm.optimizer_step": "optimizer, barrier=False, optimizer_args={}, groups=None, pin_layout=True",
    "xm.reduce_gradients": "optimizer, groups=None, pin_layout=True",
    "xm._fetch_gradients": "optimizer",
    "xm.xrt_world_size": "defval=1",
    "xm.get_ordinal": "defval=0",
    "xm.get_local_ordinal": "defval=0",
    "xr.world_size": "",
    "xr.global_ordinal": "",
    "xr.local_ordinal": "",
    "xm.is_master_ordinal": "local=True",
    "xm.master_print": "*args, fd=sys.stdout, local=False, flush=False",
    "xm.save": "data, file_or_path, master_only=True, global_master=False",
    "xm.rendezvous": "tag, payload=b'', replicas=[]",
    "xm.mesh_reduce": "tag, data, reduce_fn",
    "xm.all_reduce": "reduce_type, inputs, scale=1.0, groups=None, pin_layout=True",
    "xm.add_step_closure": "closure, args=(), run_async=False",
    "xm.set_rng_state": "seed, device=None",
    "xm.get_rng_state": "device=None",
    "torch_xla.manual_seed": "seed, device=None",
    "xm.RateTracker": "smooth_factor=None",
    "xm.broadcast_master_param": "model",
    "xu.SampleGenerator": "data, sample_count",
    "test_utils.print_training_update": "device, step, loss, rate, global_rate, epoch=None, summary_writer=None",
    "test_utils.print_test_update": "device, accuracy, epoch=None, step=None",
    "test_utils.now": "format='%H:%M:%S'",
    "test_utils.get_summary_writer": "logdir",
    "test_utils.write_to_summary": "summary_writer, global_step=None, dict_to_write={}, write_xla_metrics=False",
    "test_utils.close_summary_writer": "summary_writer",
    "xr.global_runtime_device_count": "",
    "xr.addressable_device_count": "",
    "xr.process_index": "",
    "xr.process_count": "",
    "xr.device_type": "",
    "torch_xla.compile": "f=None, full_graph=False, name=None, max_different_graphs=None, custom_compile_options=None",
    "xp.Trace": "name, **kwargs",
    "xp.StepTrace": "name, **kwargs",
    "torch_xla.amp.autocast": "device, enabled=True, dtype=None, cache_enabled=True",
    "syncfree.AdamW": "params, lr=0.001, betas=(0.9, 0.999), eps=1e-08, weight_decay=0.01, amsgrad=False",
    "syncfree.SGD": "params, lr=0.001, momentum=0, dampening=0, weight_decay=0, nesterov=False",
    "pl.MpDeviceLoader": "loader, device, **kwargs",
    "xmp.spawn": "fn, args=(), nprocs=None, join=True, daemon=False, start_method='spawn'",
    "torch_xla.launch": "fn, args=(), start_method='spawn', debug_single_process=False",
    "xmp.MpModelWrapper": "model",
}
XLA_IMPORTS = (
    "import sys\nimport torch\nimport torch_xla\nimport torch_xla.amp\nimport torch_xla.core.xla_model as xm\n"
    "import torch_xla.runtime as xr\nimport torch_xla.utils.utils as xu\nimport torch_xla.test.test_utils as test_utils\n"
    "import torch_xla.debug.profiler as xp\nimport torch_xla.distributed.parallel_loader as pl\n"
    "import torch_xla.distributed.xla_multiprocessing as xmp\nfrom torch_xla.amp import syncfree\n"
)
# torch.cuda APIs the rules rewrite: their signatures come from torch itself.
CUDA_APIS = [
    "is_available",
    "device_count",
    "synchronize",
    "current_device",
    "set_device",
    "current_stream",
    "set_stream",
    "manual_seed",
    "manual_seed_all",
    "get_device_name",
    "get_device_properties",
    "is_bf16_supported",
    "empty_cache",
    "Event",
    "Stream",
    "amp.autocast",
    "amp.GradScaler",
]
TORCH_APIS = [
    "amp.GradScaler",
    "autocast",
    "compile",
    "load",
    "distributed.init_process_group",
    "set_default_tensor_type",
    "optim.AdamW",
]


#: Builtins that carry neither a signature nor a docstring in torch 2.13 (from the torch documentation).
BUILTIN_SIGNATURES = {
    "device": "type=None, index=None",
    # (no docstring in torch 2.13; the device-type overload of torch/csrc/autograd/init.cpp)
    "is_autocast_enabled": "device_type=None, /",
    "get_autocast_dtype": "device_type, /",
}


def _doc_signature(obj) -> inspect.Signature | None:
    """A builtin's signature from the first line of its docstring (``Event(device=None, *, ...)``)."""
    if getattr(obj, "__name__", None) in BUILTIN_SIGNATURES and getattr(obj, "__module__", "") == "torch":
        return _parse_signature(BUILTIN_SIGNATURES[obj.__name__])
    first = (obj.__doc__ or "").strip().splitlines()[:1]
    m = re.match(r"^\w+\((.*)\)", first[0]) if first else None
    if not m:
        return None
    params = ", ".join(
        p if "=" in p or p.strip() in ("*", "/") or p.strip().startswith("*") else f"{p}=None"
        for p in m.group(1).split(",")
    )  # names and kinds only: every parameter optional
    return _parse_signature(params)


@cache
def _parse_signature(params: str) -> inspect.Signature:
    ns: dict = {}
    exec(f"def f({params}): pass", {"sys": __import__("sys")}, ns)  # noqa: S102 - our own literal text
    return inspect.signature(ns["f"])


def _signature(obj) -> inspect.Signature | None:
    try:
        return inspect.signature(obj)
    except (TypeError, ValueError):
        return _doc_signature(obj)


def _placeholder(p: inspect.Parameter, alternative: bool) -> str:
    """A value for parameter ``p``: its name, or (``alternative``) a literal other than its default."""
    d = p.default
    if alternative and d is not inspect.Parameter.empty:
        if d is True or d is False:
            return repr(not d)
        if d is None:
            return p.name
        if isinstance(d, (int, float)) and not isinstance(d, bool):
            return repr(d + 1)
    return p.name


def calls_for(api: str, sig: inspect.Signature) -> list[str]:
    """Call texts covering the argument forms of ``sig``."""
    ps = [p for p in sig.parameters.values() if p.name != "self"]
    pos_ok = [p for p in ps if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in ps if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    optional = [p for p in ps if p.default is not p.empty]
    req_pos = [p.name for p in required if p.kind is not p.KEYWORD_ONLY]
    req_kw = [f"{p.name}={p.name}" for p in required if p.kind is p.KEYWORD_ONLY]
    out = [", ".join(req_pos + req_kw)]
    out.append(", ".join([_placeholder(p, True) for p in pos_ok] + req_kw))
    out.append(
        ", ".join(
            f"{p.name}={_placeholder(p, True)}" if p.kind is not p.POSITIONAL_ONLY else p.name
            for p in ps
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        )
    )
    for p in optional:
        if p.kind is not p.POSITIONAL_ONLY:
            out.append(", ".join([*req_pos, *req_kw, f"{p.name}={_placeholder(p, True)}"]))
    if any(p.kind is p.VAR_POSITIONAL for p in ps):
        out.append("'a', 'b'")
    return [f"{api}({args})" for args in dict.fromkeys(out)]


def battery() -> list[tuple[str, str]]:
    """(source, call) pairs: a small module around each generated call, the call as written."""
    cases = []
    for api, params in XLA_SIGNATURES.items():
        for call in calls_for(api, _parse_signature(params)):
            cases.append((XLA_IMPORTS + f"v = {call}\n{call}\n", call))
    for name in CUDA_APIS:
        obj = torch.cuda
        for part in name.split("."):
            obj = getattr(obj, part)
        sig = _signature(obj.__init__ if inspect.isclass(obj) and name.startswith("amp.") else obj)
        assert sig is not None, name
        for call in calls_for(f"torch.cuda.{name}", sig):
            cases.append((f"import torch\nv = {call}\n{call}\n", call))
    for name in TORCH_APIS:
        obj = torch
        for part in name.split("."):
            obj = getattr(obj, part)
        sig = _signature(obj.__init__ if inspect.isclass(obj) else obj)
        for call in calls_for(f"torch.{name}", sig):
            for dev in ("'cuda'", "'xla'"):
                text = re.sub(r"(?<![\w=])(device_type|device)(?![\w=])", dev, call)
                cases.append((f"import torch\nv = {text}\n", text))
    cases += [(r.before, r.code) for r in all_rules()]
    return cases


@lru_cache(maxsize=1)
def _helper_signatures() -> dict[str, inspect.Signature]:
    ns: dict = {}
    for h in all_helpers():
        exec(h.source, {"torch": torch, "os": __import__("os"), "time": __import__("time")}, ns)  # noqa: S102
    return {name: inspect.signature(obj) for name, obj in ns.items()}


def _resolve(qname: str):
    obj = torch
    for part in qname.split(".")[1:]:
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def emitted_calls(src: str) -> list[tuple[str, str, cst.Call]]:
    """(kind, qualified name, call) for every call to a torch API or a local replacement in ``src``."""
    module = cst.parse_module(src)
    table = import_table(module)
    found = []

    class V(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            f = node.func
            if isinstance(f, cst.Name) and f.value.startswith(("_tpu_", "_Tpu")):
                found.append(("helper", f.value, node))
                return
            q = table.qname(f) if isinstance(f, (cst.Name, cst.Attribute)) else None
            if q and q.startswith("torch.") and not q.startswith("torch_xla"):
                found.append(("torch", q, node))

    module.visit(V())
    return found


def _shape(qname: str, call: cst.Call) -> tuple:
    """What binding depends on: the callee, the number of positional arguments, the keyword names."""
    return (
        qname,
        sum(1 for a in call.args if a.keyword is None and not a.star),
        tuple(a.keyword.value for a in call.args if a.keyword is not None),
        any(a.star for a in call.args),
    )


def _bind(sig: inspect.Signature, call: cst.Call) -> str | None:
    """None when the call's arguments bind to ``sig``, else the error."""
    if any(a.star for a in call.args):
        return None
    pos = [object() for a in call.args if a.keyword is None]
    kw = {a.keyword.value: object() for a in call.args if a.keyword is not None}
    try:
        sig.bind(*pos, **kw)
    except TypeError as exc:
        return str(exc)
    return None


CASES = battery()


@pytest.mark.parametrize(("source", "label"), CASES, ids=[c[1][:60] for c in CASES])
def test_every_emitted_call_binds_to_the_real_signature(source, label):
    before = {_shape(q, c) for _k, q, c in emitted_calls(source)}
    res = migrate_source(source)
    problems = []
    for kind, q, call in emitted_calls(res.new_source):
        text = cst.parse_module("").code_for_node(call)
        if _shape(q, call) in before:
            continue  # the user's own call (at most a literal value changed)
        if kind == "helper":
            sig = _helper_signatures().get(q)
            assert sig is not None, f"{label}: calls {q}, which no helper defines"
        else:
            obj = _resolve(q)
            if obj is None:
                problems.append(f"{text}: {q} does not exist in torch {torch.__version__}")
                continue
            if not callable(obj):
                continue
            sig = _signature(obj)
            if sig is None:
                problems.append(f"{text}: no signature for {q}")
                continue
        err = _bind(sig, call)
        if err:
            problems.append(f"{text}: {err}")
    assert not problems, f"{label} -> {problems}\n{res.new_source}"


def test_helper_sources_trigger_no_rule():
    """The local replacements are final code: migrating a file that holds them changes nothing."""
    for h in all_helpers():
        src = "import os\nimport time\nimport torch\n\n\n" + h.source
        res = migrate_source(src)
        assert res.new_source == src and not res.diagnostics, (h.name, [d.format() for d in res.diagnostics])


def test_helper_requirements_are_complete():
    """Every _tpu/_Tpu name a helper calls is a declared requirement (the file gets all it needs)."""
    names = {h.name for h in all_helpers()}
    for h in all_helpers():
        used = {n.id for n in ast.walk(ast.parse(h.source)) if isinstance(n, ast.Name) and n.id in names} - {
            h.name
        }
        assert used <= set(h.requires), (h.name, used - set(h.requires))
