"""Processes a program starts itself (mp.spawn, Process, process pools) whose work opens the device."""

from __future__ import annotations

import ast
import os
import re

import libcst as cst

from .._walk import child_nodes
from ..project import facts_for
from ._util import arg, code, kwarg, mentions
from .base import Context, Rule, register

#: Calls that start processes of this program, with the argument naming the function each one runs (mp.spawn
#: belongs to TPU406, which asks :func:`check_workers` too).
_STARTS: dict[str, tuple[int, str]] = dict.fromkeys(
    ("multiprocessing.Process", "torch.multiprocessing.Process", "multiprocessing.process.BaseProcess"),
    (-1, "target"),
)
#: Methods of a process pool that run a function in its worker processes.
_POOL_METHODS = frozenset(
    {"submit", "map", "starmap", "imap", "imap_unordered", "apply_async", "map_async", "starmap_async"}
)
#: Code that opens an accelerator (what the migration turns into the "tpu" device), once the calls the migration
#: deletes are gone (_DELETED: F5-TTS's run_asr_wer only called torch.cuda.set_device(rank), then ran CTranslate2);
#: a process group on the accelerator's backend binds the worker to a device too (verl's test_engine `_worker`).
_OPENS_DEVICE = re.compile(r"\bcuda\b|['\"]cuda|['\"]tpu\b|torch\.accelerator|['\"](?:nccl|tpu_dist)['\"]")
#: (one level of nested calls: nnUNet's `torch.cuda.set_device(torch.device('cuda', dist.get_rank()))`)
_DELETED = re.compile(
    r"torch\.cuda\.(?:set_device|empty_cache|ipc_collect|manual_seed(?:_all)?)\((?:[^()]|\([^()]*\))*\)"
)


def _opens(text: str) -> bool:
    return _OPENS_DEVICE.search(_DELETED.sub("", text)) is not None


#: A device literal anywhere in the file (handed to workers defined in other modules).
_DEVICE_LITERAL = re.compile(r"['\"]cuda")


@register
class DeviceWorkers(Rule):
    code = "TPU409"
    name = "device-workers"
    family = "workers"
    outcome = "flagged"
    summary = "Flag processes the program starts itself (mp.spawn, Process, process pools) whose work opens the device."
    rationale = (
        "On a GPU host each worker picked its own GPU (cuda:{rank}) or shared one; TorchTPU binds one chip to a "
        "process and a chip serves one process, so workers started by the program itself all open the same chip "
        "unless each is bound first: torch.tpu.distributed.set_tpu_launch_env(nnodes=1, nproc_per_node=N) before "
        "starting N device workers (or torchrun after `python -m torch.tpu.distributed`); workers that need no "
        "accelerator stay on 'cpu'. Flagged once per file."
    )
    before = (
        "import torch\nimport torch.multiprocessing as mp\n\n\ndef worker(rank):\n"
        '    x = torch.ones(2, device=f"cuda:{rank}")\n\n\nworkers = [mp.Process(target=worker, args=(r,)) for r in range(4)]\n'
    )
    after = (
        "import torch\nimport torch.multiprocessing as mp\n\n\ndef worker(rank):\n"
        '    x = torch.ones(2, device="tpu")\n\n\n'
        "# TODO(tpu-migrate TPU409): `mp.Process(target=worker, ...)` starts processes of this program whose work opens the "
        "device (`worker`): TorchTPU binds one chip per process and a chip serves one process; bind each worker "
        "first with torch.tpu.distributed.set_tpu_launch_env(nnodes=1, nproc_per_node=N) before starting N of them "
        "(or launch with torchrun after `python -m torch.tpu.distributed`), and keep workers that need no "
        "accelerator on 'cpu'\n"
        "workers = [mp.Process(target=worker, args=(r,)) for r in range(4)]\n"
    )
    requires = ("TPU101",)
    calls = frozenset(_STARTS)
    methods = _POOL_METHODS
    words = _POOL_METHODS

    def call(self, ctx, orig, node, qname):
        position, keyword = _STARTS[qname]
        a = kwarg(orig, keyword) if position < 0 else arg(orig, position, keyword)
        if a is not None:
            check_workers(ctx, orig, a.value)
        return None

    def method(self, ctx, orig, node):
        func = orig.func
        if not (isinstance(func, cst.Attribute) and type(func.value) is cst.Name and orig.args):
            return None
        pools = ctx.scratch.get("process-pools")
        if pools is None:  # (once per file: a file may call .map( a thousand times)
            pools = ctx.scratch["process-pools"] = _process_pools(ctx.source_text)
        if func.value.value not in pools:  # type: ignore[operator]
            return None
        check_workers(ctx, orig, orig.args[0].value)
        return None


def check_workers(ctx: Context, call: cst.Call, target: cst.BaseExpression) -> None:
    """Flag ``call`` (once per file) when the function it starts in other processes opens the device."""
    if not ctx.enabled(DeviceWorkers.code) or ctx.scratch.get("device-workers"):
        return
    if mentions(ctx, "set_tpu_launch_env"):
        return
    why = _opens_device(ctx, target)
    if why is None:
        return
    ctx.scratch["device-workers"] = True
    ctx.flag(
        call,
        f"`{_short(call)}` starts processes of this program whose work opens the device ({why}): TorchTPU "
        "binds one chip per process and a chip serves one process; bind each worker first with "
        "torch.tpu.distributed.set_tpu_launch_env(nnodes=1, nproc_per_node=N) before starting N of them (or "
        "launch with torchrun after `python -m torch.tpu.distributed`), and keep workers that need no "
        f"accelerator on 'cpu'{_HANDED if _hands_values(call, target) and _parent_places(ctx, target) else ''}",
        code=DeviceWorkers.code,
    )


#: Said when the parent hands the workers values: CUDA tensors cross processes by CUDA's IPC handles.
_HANDED = (
    "; tensors the parent hands them (arguments, queues) must be on the CPU: TorchTPU tensors cannot cross "
    "processes as CUDA's do, so place them in each worker"
)


_CONSTANTS = (cst.Integer, cst.Float, cst.SimpleString)
#: A placement on CUDA in the text: `.cuda(`, `.to("cuda`, `device="cuda` (not a `device_type="cuda"` default).
_PLACES = re.compile(r"""\.cuda\(|\.to\(\s*(?:device\s*=\s*)?['"]cuda|\bdevice\s*=\s*['"]cuda""")


def _parent_places(ctx: Context, target: cst.BaseExpression) -> bool:
    """The code around the start (its class, else its function) places tensors on CUDA outside the worker
    function itself (torchdrug's comm test builds its `.cuda()` objects in setUp, then hands them to the workers;
    a launcher handing its workers a config places nothing)."""
    scopes = ctx.enclosing_definitions()
    around = next((d for d in reversed(scopes) if type(d) is cst.ClassDef), None) or (
        scopes[-1] if scopes else None
    )
    if around is None:
        return False
    fn = _module_function(getattr(ctx, "module", None), target.value) if type(target) is cst.Name else None
    text = code(around)
    if fn is not None:
        text = text.replace(code(fn), "")
    return _PLACES.search(text) is not None


def _hands_values(call: cst.Call, target: cst.BaseExpression) -> bool:
    """``call`` passes its workers values besides the function (``mp.spawn(worker, (fn, objs, queue))``,
    ``Process(target=f, args=(x,))``), not just counts and flags."""
    for a in call.args:
        if a.value is target or (a.keyword is not None and a.keyword.value not in ("args", "kwargs")):
            continue
        if type(a.value) in (cst.Tuple, cst.List) and any(
            type(e.value) not in _CONSTANTS for e in a.value.elements
        ):
            return True
        if type(a.value) is cst.Dict and a.value.elements:
            return True
    return False


def _short(call: cst.Call) -> str:
    """``mp.spawn(worker, ...)``: the callee and the function it starts."""
    first = code(call.args[0].with_changes(comma=cst.MaybeSentinel.DEFAULT)) if call.args else ""
    return f"{code(call.func)}({first}, ...)" if len(call.args) > 1 else f"{code(call.func)}({first})"


def _opens_device(ctx: Context, target: cst.BaseExpression) -> str | None:
    """Why the function a started process runs opens the device (this module's def, read; another module's,
    when this file hands devices around), or None."""
    if (
        type(target) is cst.Attribute
        and type(target.value) is cst.Name
        and target.value.value == "self"
        and (cls := next((d for d in reversed(ctx.enclosing_definitions()) if type(d) is cst.ClassDef), None))
        is not None
    ):
        # ElegantRL's AM_TSP: `mp.spawn(self._train_worker, nprocs=world_size)`, a method of this class
        method = next(
            (s for s in cls.body.body if type(s) is cst.FunctionDef and s.name.value == target.attr.value),
            None,
        )
        if method is not None and _opens(code(method.body)):
            return f"`{code(target)}`"
        return None
    if type(target) is cst.Name:
        fn = _module_function(getattr(ctx, "module", None), target.value)
        if fn is not None:
            if _opens(code(fn.body)):
                return f"`{target.value}`"
            # Depth-Anything's main_worker reaches the device only through the project's parallelize(); nnUNet's
            # run_ddp through this module's setup_ddp (its process group), once set_device is gone
            for callee in _called_names(fn):
                local = _module_function(getattr(ctx, "module", None), callee.value)
                if type(local) is cst.FunctionDef and local is not fn and _opens(code(local.body)):
                    return f"`{target.value}`, through `{callee.value}`"
                qname = ctx.qname(callee)
                body = _project_function(ctx, qname, hops=2) if qname else None
                if body is not None and _opens(body):
                    return f"`{target.value}`, through `{callee.value}`"
            return None
        qname = ctx.qname(target)
        body = _project_function(ctx, qname) if qname else None
        if body is not None:  # (F5-TTS: run_sim opens the device, run_asr_wer hands it to another library)
            return f"`{target.value}` in its module" if _opens(body) else None
        if qname is not None or _DEVICE_LITERAL.search(ctx.source_text):
            # imported from the project, which picks devices in this file (DRL-Pytorch's actor/learner options)
            return f"`{target.value}`, from another module, with the devices this file picks"
    return None


def _called_names(fn: cst.CSTNode) -> list[cst.Name]:
    """The plain names ``fn`` calls (``parallelize(config, model)``), in order, each once."""
    seen: dict[str, cst.Name] = {}
    todo: list[cst.CSTNode] = [fn]
    while todo:
        n = todo.pop()
        if type(n) is cst.Call and type(n.func) is cst.Name:
            seen.setdefault(n.func.value, n.func)
        todo.extend(child_nodes(n))
    return list(seen.values())


def _project_function(ctx: Context, qname: str, hops: int = 0) -> str | None:
    """The source of the function ``qname`` names when it is defined in a module of the run's tree (found by its
    dotted path below the tree or its src/ folder, or beside this file), else None; with ``hops``, followed by the
    source of the functions of the same module it calls, that many calls deep (pytext's train_model ->
    prepare_task -> _set_cuda)."""
    module, _, name = qname.rpartition(".")
    if not module:
        return None
    tree = facts_for(ctx.scratch, ctx.source_text).tree
    here = os.path.dirname(os.path.abspath(getattr(ctx, "path", "") or "."))
    rel = module.replace(".", os.sep) + ".py"
    for root in dict.fromkeys(r for r in (tree, os.path.join(tree, "src") if tree else "", here) if r):
        path = os.path.join(root, rel)
        if not os.path.isfile(path):
            path = os.path.join(here, module.rsplit(".", 1)[-1] + ".py")
            if root != here or not os.path.isfile(path):
                continue
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            defs = {
                n.name: n
                for n in ast.parse(text).body
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            }
            if name in defs:
                return _with_callees(text, defs, name, hops)
        except (OSError, SyntaxError, ValueError):
            return None
    return None


def _with_callees(text: str, defs: dict[str, ast.AST], name: str, hops: int) -> str:
    """The source of ``defs[name]`` and of the module's functions it calls, ``hops`` calls deep."""
    parts, seen, level = [], {name}, [name]
    for depth in range(hops + 1):
        nxt = []
        for n in level:
            parts.append(ast.get_source_segment(text, defs[n]) or "")  # type: ignore[arg-type]
            if depth < hops:
                for c in ast.walk(defs[n]):
                    if isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id in defs:
                        if c.func.id not in seen:
                            seen.add(c.func.id)
                            nxt.append(c.func.id)
        level = nxt
    return "\n".join(parts)


def _module_function(module: cst.Module | None, name: str) -> cst.FunctionDef | cst.ClassDef | None:
    """A def (or a class, whose construction is the work: RobustVideoMatting's ``mp.spawn(Trainer, ...)``) named
    ``name`` anywhere in ``module`` (workers are often nested in main())."""
    todo: list[cst.CSTNode] = list(getattr(module, "body", ()))
    while todo:
        n = todo.pop()
        if type(n) in (cst.FunctionDef, cst.ClassDef) and n.name.value == name:  # type: ignore[attr-defined]
            return n  # type: ignore[return-value]
        if type(n) in (cst.FunctionDef, cst.ClassDef, cst.If, cst.Try, cst.With, cst.IndentedBlock, cst.Else):
            todo.extend(child_nodes(n))
    return None


def _process_pools(text: str) -> frozenset[str]:
    """The names bound to a process pool in the file (``with ProcessPoolExecutor(n) as ex``, ``pool =
    mp.Pool(n)``, ``ctx.Pool(n)``); a thread pool shares the process and its device."""
    if "Pool" not in text:
        return frozenset()
    pool = r"[\w.]*(?:ProcessPoolExecutor|(?<!Thread)Pool)\("
    bound = re.findall(rf"\b(\w+)\s*=\s*{pool}", text)
    bound += re.findall(rf"{pool}[^\n]*\)\s+as\s+(\w+)\b", text)
    return frozenset(bound)
