"""Process groups: 'nccl'/'xla' backends, init_method, DDP device_ids, XLA backend imports."""

from __future__ import annotations

import os
import re

import libcst as cst

from .._host import DATA_PARALLEL
from .._walk import child_nodes
from ..flow import PER_HOST
from ..project import facts_for
from . import _helpers
from ._literal import LiteralRule, creates_group, walk_code
from ._util import code, drop_kwargs, expr, kwarg, literals, mentions, string_body, with_body
from .base import Rule, register
from .workers import check_workers

_INIT = frozenset(
    {"torch.distributed.init_process_group", "torch.distributed.distributed_c10d.init_process_group"}
)
_DDP = frozenset(
    {"torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel"}
)
#: A backend string per device type (``"cpu:gloo,cuda:nccl"``) with a CUDA entry.
_PER_DEVICE_BACKENDS = re.compile(r"(?:[a-z]+:[a-z_]+,)*cuda:nccl(?:,[a-z]+:[a-z_]+)*")
_BARRIER = frozenset({"torch.distributed.barrier", "torch.distributed.distributed_c10d.barrier"})


#: Code of a function that an NCCL test keeps to NCCL itself (streams, NCCL's own settings and module).
_NCCL_OWN_CODE = re.compile(r"[Ss]tream|NCCL_|\.nccl\b|ProcessGroupNCCL|symmetric_memory|device_ids")


def _nccl_operand(ctx, node: cst.BaseExpression) -> bool:
    """``"nccl"``, ``Backend.NCCL`` or ``dist.Backend.NCCL``."""
    if type(node) is cst.SimpleString:
        return string_body(node) == "nccl"
    return type(node) is cst.Attribute and node.attr.value == "NCCL" and "Backend" in code(node.value)


def _asks_backend(ctx, node: cst.BaseExpression) -> bool:
    """``dist.get_backend()`` / ``dist.get_backend(group)``: the backend torch.distributed runs; or a backend
    parameter of the function around the test (torchdrug's ``def init_process_group(backend, ...)``), which its
    callers fill: migrated ones pass 'tpu_dist', others (and the docstring) still 'nccl'."""
    if type(node) is cst.Name:
        return node.value in ctx.scratch.get("backend-params", ())  # type: ignore[operator]
    return type(node) is cst.Call and (ctx.qname(node.func) or "").endswith("distributed.get_backend")


def _rebound(fn: cst.FunctionDef, name: str) -> bool:
    """Whether the function's body binds ``name`` again (``backend = ...``, ``for backend in ...``)."""
    for n in walk_code(fn.body):
        targets = (
            [t.target for t in n.targets]
            if type(n) is cst.Assign
            else [n.target]
            if type(n) in (cst.AnnAssign, cst.AugAssign, cst.For, cst.NamedExpr)
            else []
        )
        if any(type(t) is cst.Name and t.value == name for t in targets):
            return True
    return False


def _backend_params(fn: cst.FunctionDef) -> frozenset[str]:
    """The function's parameters named for a process-group backend that its body never rebinds."""
    params = (*fn.params.params, *fn.params.kwonly_params, *fn.params.posonly_params)
    return frozenset(
        p.name.value for p in params if "backend" in p.name.value.lower() and not _rebound(fn, p.name.value)
    )


@register
class BackendAskedNccl(Rule):
    code = "TPU410"
    name = "backend-asked-nccl"
    family = "distributed"
    outcome = "warned"
    summary = (
        "`dist.get_backend() == 'nccl'` (or Backend.NCCL), or a function's backend parameter compared so -> "
        "`in ('nccl', 'tpu_dist')`, `!=` -> `not in`, where the code around it keeps no NCCL-only machinery."
    )
    rationale = (
        "The test asks torch.distributed which backend runs, to put collective tensors on the device (allennlp's "
        "`if dist.get_backend() == 'nccl': t = t.cuda()`, ClassyVision's Backend.NCCL test): once the process "
        "group is created with 'tpu_dist', which also needs device tensors, a test for NCCL alone sends them to "
        "the collective on the CPU, which TorchTPU's backend does not serve. Both names keep CUDA hosts as before."
    )
    before = "import torch.distributed as dist\n\nif dist.get_backend() == 'nccl':\n    t = t.to(device)\n"
    after = "import torch.distributed as dist\n\nif dist.get_backend() in ('nccl', 'tpu_dist'):\n    t = t.to(device)\n"
    node_types = (cst.FunctionDef, cst.Comparison)

    def visit_node(self, ctx, node):
        if not mentions(ctx, "nccl") and not mentions(ctx, "NCCL"):
            return  # (cheap: the function-level walk below runs only where NCCL is named)
        # A file that creates the group itself tests the same way: the asked backend is what the run made it
        # (Pointcept's `get_backend() == "nccl"` for a gloo side group, its WORLD group made in another file that
        # keeps NCCL), and both names keep either run as written. (Claimed from the function down: the backend
        # literal rule claims a function's compared strings when it enters the function, TPU102.)
        if type(node) is cst.FunctionDef:
            if not _NCCL_OWN_CODE.search(code(node)):
                ctx.scratch["backend-params"] = _backend_params(node)
                for n in walk_code(node.body):
                    if type(n) is cst.Comparison:
                        self._mark(ctx, n)
                ctx.scratch["backend-params"] = frozenset()
            return
        if not ctx.enclosing_definitions() and not _NCCL_OWN_CODE.search(ctx.source_text):
            self._mark(ctx, node)

    def _mark(self, ctx, node: cst.Comparison) -> None:
        if len(node.comparisons) != 1:
            return
        op = type(node.comparisons[0].operator)
        if op in (cst.In, cst.NotIn) and _asks_backend(ctx, node.left):
            # `get_backend() in ("nccl", "tpu_dist")` (this rule's output, or written so): both names stay
            names = literals(node.comparisons[0].comparator)
            if any(string_body(s) == "tpu_dist" for s in names):
                for s in names:
                    ctx.claim_string(s, "", "rewritten", "", value=None)
            return
        if op not in (cst.Equal, cst.NotEqual):
            return
        left, right = node.left, node.comparisons[0].comparator
        asked, named = (left, right) if _asks_backend(ctx, left) else (right, left)
        if not _asks_backend(ctx, asked) or not _nccl_operand(ctx, named):
            return
        if type(named) is cst.SimpleString:
            ctx.claim_string(named, "", "rewritten", "", value=None)
        ctx.scratch.setdefault(self.code, {})[id(node)] = (named, asked is left)  # type: ignore[index]

    def leave_node(self, ctx, orig, node):
        marked = ctx.scratch.get(self.code, {}).get(id(orig))  # type: ignore[union-attr]
        if marked is None:
            return None
        named, asked_left = marked
        equal = type(node.comparisons[0].operator) is cst.Equal
        asked = node.left if asked_left else node.comparisons[0].comparator
        quote = named.value[-1] if type(named) is cst.SimpleString else '"'
        both = expr(f"({code(named)}, {quote}tpu_dist{quote})")
        ctx.report(
            orig,
            f"`{code(orig)}` -> also true for 'tpu_dist' (TorchTPU's backend, which also needs device tensors)",
            code=self.code,
            outcome="warned",
        )
        return cst.Comparison(
            left=asked,
            comparisons=[cst.ComparisonTarget(operator=cst.In() if equal else cst.NotIn(), comparator=both)],
        )


@register
class NcclLiteral(LiteralRule):
    code = "TPU401"
    name = "nccl-backend-string"
    family = "distributed"
    summary = "Rewrite the process-group backend string 'nccl' to 'tpu_dist'."
    rationale = (
        "TorchTPU registers the backend 'tpu_dist' (alias 'tpu') for the 'tpu' device. A comparison such "
        "as `get_backend() == 'nccl'` gates NCCL-specific code (barrier device_ids, CUDA streams): it is "
        "flagged and kept (TPU102), never made true on TPU."
    )
    before = 'import torch.distributed as dist\n\ndist.init_process_group(backend="nccl")\n'
    after = 'import torch.distributed as dist\n\ndist.init_process_group(backend="tpu_dist")\n'
    pattern = re.compile(r"nccl(?P<suffix>)")
    replacement = "tpu_dist"
    what = "process-group backend"
    flag_compared = True  # `if get_backend() == "nccl": barrier(device_ids=...)` is NCCL's own code
    word = "nccl"

    def new_body(self, body: str | None) -> str | None:
        """Also the per-device form ``"cpu:gloo,cuda:nccl"``: its CUDA entry becomes ``tpu:tpu_dist`` (left
        alone, no backend serves "tpu" tensors in that group)."""
        if body is not None and _PER_DEVICE_BACKENDS.fullmatch(body):
            return body.replace("cuda:nccl", "tpu:tpu_dist")
        if (
            body == "NCCL"
        ):  # torch lower-cases a backend's name (Pointcept's `init_process_group(backend="NCCL")`)
            return "tpu_dist"
        return super().new_body(body)

    def data_reason(self, ctx):
        """A file that never creates a process group hands its backend name to a framework (ignite's
        idist.Parallel, accelerate, Lightning) that has its own names: 'tpu_dist' means nothing there."""
        if "creates-group" not in ctx.scratch:
            ctx.scratch["creates-group"] = creates_group(ctx.source_text)
        if ctx.scratch["creates-group"]:
            return None
        where = _group_file_for(ctx, facts_for(ctx.scratch, ctx.source_text).groups_from_data)
        if where:
            # (Depth-Anything: config.dist_backend = 'nccl' read by zoedepth's parallelize())
            return (
                "the backend name is data this file creates no process group with; where it reaches the "
                f"process group this project creates (in `{os.path.basename(where)}`), the migration translates "
                "it there at run time (_tpu_backend); a framework that takes it names its own backends"
            )
        return (
            "the backend name goes to code that is not torch.distributed (this file creates no process "
            "group), and frameworks name their own backends"
        )


@register
class DdpDeviceIds(Rule):
    code = "TPU402"
    name = "ddp-device-ids"
    family = "distributed"
    outcome = "warned"
    summary = "Drop device_ids / output_device from DistributedDataParallel(...) and device_ids from dist.barrier(...)."
    rationale = (
        "TorchTPU builds DDP without device_ids (one device per process); integer ids are CUDA ordinals. "
        "barrier(device_ids=[device.index]) is the same ordinal, and None once the device is the process's own 'tpu'."
    )
    before = (
        "from torch.nn.parallel import DistributedDataParallel as DDP\n\n"
        "model = DDP(model.cuda(), device_ids=[local_rank], output_device=local_rank)\n"
    )
    after = "from torch.nn.parallel import DistributedDataParallel as DDP\n\nmodel = DDP(model.cuda())\n"
    calls = _DDP | _BARRIER

    def call(self, ctx, orig, node, qname):
        if qname in _BARRIER:
            if kwarg(node, "device_ids") is None or _in_nccl_branch(ctx):
                return (
                    None  # (under an NCCL test, which stays: NCCL's own argument, Pointcept's `synchronize`)
                )
            ctx.report(
                orig,
                "dropped barrier device_ids (CUDA ordinals; TorchTPU: one device per process)",
                code=self.code,
                outcome="warned",
            )
            return drop_kwargs(node, {"device_ids"})
        names = {"device_ids", "output_device"}
        if not any(a.keyword is not None and a.keyword.value in names for a in node.args):
            positional = [a for a in node.args if a.keyword is None and not a.star]
            if len(positional) > 1:
                ctx.flag(
                    orig,
                    "DDP with positional device_ids: pass only the module (TorchTPU builds DDP "
                    "without device_ids)",
                    code=self.code,
                )
            return None
        ctx.report(
            orig,
            "dropped DDP device_ids/output_device (TorchTPU: one device per process)",
            code=self.code,
            outcome="warned",
        )
        return drop_kwargs(node, names)


@register
class InitProcessGroupXla(Rule):
    code = "TPU403"
    name = "xla-process-group"
    family = "distributed"
    summary = "Rewrite init_process_group('xla', init_method='xla://' or 'pjrt://') to ('tpu_dist', init_method='env://')."
    rationale = (
        "TorchTPU's backend is 'tpu_dist'; rendezvous uses the standard env:// variables set by torchrun "
        "(MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE)."
    )
    before = 'import torch.distributed as dist\n\ndist.init_process_group("xla", init_method="xla://")\n'
    after = 'import torch.distributed as dist\n\ndist.init_process_group("tpu_dist", init_method="env://")\n'
    node_types = (cst.Call, cst.SimpleString)

    def visit_node(self, ctx, node):
        if isinstance(node, cst.Call):
            if ctx.qname(node.func) not in _INIT:
                return
            positional = [a for a in node.args if a.keyword is None]
            backend = positional[0] if positional else kwarg(node, "backend")
            if backend is not None and string_body(backend.value) == "xla":
                ctx.claim_string(
                    backend.value,
                    self.code,
                    "rewritten",
                    "process-group backend 'xla' -> 'tpu_dist'",
                    value="tpu_dist",
                )
            im = kwarg(node, "init_method")
            if im is not None and string_body(im.value) in ("xla://", "pjrt://"):
                ctx.claim_string(
                    im.value,
                    self.code,
                    "rewritten",
                    f"init_method '{string_body(im.value)}' -> 'env://'",
                    value="env://",
                )

    def leave_node(self, ctx, orig, node):
        if not isinstance(node, cst.SimpleString):
            return None
        claim = ctx.string_claims.get(id(orig))
        if claim is None or claim[0] != self.code or claim[3] is None:
            return None
        ctx.report(orig, claim[2], code=self.code, outcome=claim[1])
        return with_body(node, claim[3])


_XLA_BACKEND_MODULES = ("torch_xla.distributed.xla_backend", "torch_xla.experimental.pjrt_backend")


@register
class XlaBackendImport(Rule):
    code = "TPU404"
    name = "xla-backend-import"
    family = "distributed"
    summary = "Delete `import torch_xla.distributed.xla_backend` (and the pjrt_backend variant)."
    rationale = "They are imported only to register the 'xla' process-group backend, which TPU403 replaces."
    before = "import torch_xla.distributed.xla_backend\nimport torch.distributed as dist\n"
    after = "import torch.distributed as dist\n"
    node_types = (cst.Import,)

    def leave_node(self, ctx, orig, node):
        assert isinstance(node, cst.Import)
        keep = [
            a
            for a in node.names
            if (cst.helpers.get_full_name_for_node(a.name) or "") not in _XLA_BACKEND_MODULES
        ]
        if len(keep) == len(node.names):
            return None
        ctx.report(orig, "removed the torch_xla process-group backend import", code=self.code)
        if not keep:
            return cst.RemovalSentinel.REMOVE
        keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return node.with_changes(names=keep)


_NEW_GROUP = frozenset({"torch.distributed.new_group", "torch.distributed.distributed_c10d.new_group"})
_NCCL_QUERIES = frozenset(
    {"torch.distributed.is_nccl_available", "torch.distributed.distributed_c10d.is_nccl_available"}
)


@register
class BackendFromData(Rule):
    code = "TPU405"
    name = "backend-from-data"
    family = "distributed"
    outcome = "warned"
    summary = (
        "Wrap a process-group backend that comes from data (init_process_group(backend=args.backend)) in a "
        "local _tpu_backend(...); rewrite dist.is_nccl_available() to is_backend_available('tpu_dist')."
    )
    rationale = (
        "The literal 'nccl' may live in an option default, a dict, a YAML or JSON config the script reads, or "
        "be passed on the command line: renaming one place leaves the others. Translating at the one place "
        "where the value reaches the process group covers every source."
    )
    before = "import torch.distributed as dist\n\ndist.init_process_group(backend=cfg['backend'])\n"
    after = (
        "import torch.distributed as dist\n\n\n" + _helpers.helper(_helpers.BACKEND).source + "\n\n"
        "dist.init_process_group(backend=_tpu_backend(cfg['backend']))\n"
    )
    calls = _INIT | _NEW_GROUP | _NCCL_QUERIES

    def call(self, ctx, orig, node, qname):
        if qname in _NCCL_QUERIES and id(orig) in ctx.scratch.get("bf16-beside-kept", ()):  # type: ignore[operator]
            return None  # in an and/or that stays CUDA's test (torch.version.cuda, a kept check): kept whole
        if qname in _NCCL_QUERIES:
            ctx.report(orig, "`is_nccl_available()` -> `is_backend_available('tpu_dist')`", code=self.code)
            ctx.need_import("torch")
            return expr("torch.distributed.is_backend_available('tpu_dist')")
        dropped = _drop_device_id(ctx, orig, node) if qname in _INIT else None
        return self._backend(ctx, orig, dropped or node, qname) or dropped

    def _backend(self, ctx, orig: cst.Call, node: cst.Call, qname: str) -> cst.Call | None:
        positional = [a for a in node.args if a.keyword is None]
        backend = kwarg(node, "backend") or (positional[0] if positional and qname in _INIT else None)
        if backend is None or backend.star or list(literals(backend.value)) or _is_wrapped(backend.value):
            return None
        if type(backend.value) is cst.Name and (
            backend.value.value == "None" or _literal_only(ctx.source_text, backend.value.value)
        ):
            return None  # (a name set only from literals: TPU401 renames those)
        picker = _backend_picker(ctx, backend.value)
        if picker is not None:
            if not picker.startswith("torch."):
                ctx.flag(
                    orig,
                    f"the backend comes from `{picker}(...)`, a function of this program that picks it by device: "
                    "on a TPU host it must answer 'tpu_dist' (gloo does not reduce 'tpu' tensors); give the TPU its "
                    "own branch there (kept)",
                    code=self.code,
                )
            return None  # (torch's get_default_backend_for_device answers 'tpu_dist' for 'tpu' itself)
        ctx.report(
            orig,
            f"backend `{code(backend.value)}` comes from data: -> `_tpu_backend(...)` ('nccl' -> 'tpu_dist')",
            code=self.code,
            outcome="warned",
        )
        ctx.need_helper(_helpers.BACKEND)
        wrapped = backend.with_changes(value=expr(f"{_helpers.BACKEND}({code(backend.value)})"))
        return node.with_changes(args=[wrapped if a is backend else a for a in node.args])


def _in_nccl_branch(ctx) -> bool:
    """Whether the statement being visited lies in the NCCL branch of ``if <backend> == NCCL`` (kept with the
    device_ids it holds, TPU410: taken out, the next run would see the test free of NCCL's code and rewrite it)."""
    stack = ctx.statements()
    for outer, inner in zip(stack, stack[1:], strict=False):
        if (
            type(outer) is not cst.If
            or type(outer.test) is not cst.Comparison
            or len(outer.test.comparisons) != 1
        ):
            continue
        test = outer.test
        if type(test.comparisons[0].operator) is not cst.Equal:
            continue
        if (_nccl_operand(ctx, test.left) or _nccl_operand(ctx, test.comparisons[0].comparator)) and any(
            inner is s for s in getattr(outer.body, "body", ())
        ):
            return True
    return False


def _drop_device_id(ctx, orig: cst.Call, node: cst.Call) -> cst.Call | None:
    """``init_process_group(..., device_id=device)``: the migrated device is the process's own ``"tpu"``, which
    torch refuses there ("Please use a device_id with index"); TorchTPU binds one device per process, so the
    argument has nothing to say. A CPU-only backend (gloo, mpi) keeps it."""
    if kwarg(node, "device_id") is None:
        return None
    positional = [a for a in orig.args if a.keyword is None]
    backend = kwarg(orig, "backend") or (positional[0] if positional else None)
    if backend is not None and (string_body(backend.value) or "").split(":")[-1] in ("gloo", "mpi"):
        return None
    ctx.report(
        orig,
        "dropped init_process_group device_id= (TorchTPU binds one device per process; torch refuses the "
        "index-less 'tpu' device there)",
        code=DdpDeviceIds.code,
        outcome="warned",
    )
    return drop_kwargs(node, {"device_id"})


def _group_file_for(ctx, groups: tuple[tuple[str, str], ...]) -> str:
    """The project file that creates a process group from data stored under the name this literal is assigned to
    (``config.dist_backend = 'nccl'`` -> the file calling ``init_process_group(backend=config.dist_backend)``),
    else "" (Vim's ``dict(backend='nccl')`` goes to mmcv's init_dist, which translates nothing)."""
    stmt = ctx.statement()
    if (
        not groups
        or type(stmt) is not cst.SimpleStatementLine
        or type(stmt.body[0]) not in (cst.Assign, cst.AnnAssign)
    ):
        return ""
    small = stmt.body[0]
    targets = [t.target for t in small.targets] if type(small) is cst.Assign else [small.target]
    names = {code(t).rsplit(".", 1)[-1].strip("'\"[] ") for t in targets}
    return next((path for name, path in groups if name in names), "")


def _literal_only(source: str, name: str) -> bool:
    """Whether every assignment to ``name`` in the file starts with a string literal."""
    values = re.findall(rf"(?m)^[ \t]*{re.escape(name)}[ \t]*=(?!=)[ \t]*(.)", source)
    return bool(values) and all(v in "'\"" for v in values)


#: Calls that read a backend from data (an environment variable, a mapping, a string conversion).
_DATA_READS = frozenset({"get", "getenv", "str", "getattr", "lower", "strip", "pop", "format"})


def _backend_picker(ctx, value: cst.BaseExpression) -> str | None:
    """The function that computes the backend (``helper.get_process_group_backend()``, LLaMA-Factory's per-device
    answer; torch's ``get_default_backend_for_device``), or None when ``value`` is data (a name, ``os.environ.get``,
    ``cfg.get``, ``str(...)``)."""
    if type(value) is not cst.Call or _is_wrapped(value):
        return None
    func = value.func
    last = func.attr.value if type(func) is cst.Attribute else func.value if type(func) is cst.Name else None
    if last is None or last in _DATA_READS:
        return None
    return ctx.qname(func) or code(func)


def _is_wrapped(value: cst.BaseExpression) -> bool:
    return type(value) is cst.Call and type(value.func) is cst.Name and value.func.value == _helpers.BACKEND


_SPAWN = frozenset(
    {
        # (the standard library has no spawn() function, only a submodule: `mp.spawn(...)` where a file imports
        # both `multiprocessing as mp` and `torch.multiprocessing as mp` is torch's, whichever name resolution
        # picks: nnUNet's run_training_from_pretrained)
        "multiprocessing.spawn",
        "torch.multiprocessing.spawn",
        "torch.multiprocessing.spawn.spawn",
        "torch.multiprocessing.start_processes",
        "torch.multiprocessing.spawn.start_processes",
    }
)


def _kept_count_name(ctx, name: cst.Name) -> str | None:
    """The text of ``name = <... torch.cuda.device_count() ...>`` when that count is kept as CUDA's devices per
    host (the flow layer's guard table); reads the enclosing function, or the module (function-wide context)."""
    kept = ctx.scratch.get("cuda-guards", {})
    if not kept:
        return None
    defs = ctx.enclosing_definitions()
    where = defs[-1] if defs and type(defs[-1]) is cst.FunctionDef else ctx.module
    todo: list[cst.CSTNode] = [where]
    while todo:
        n = todo.pop()
        if (
            type(n) is cst.Assign
            and any(type(t.target) is cst.Name and t.target.value == name.value for t in n.targets)
            and any(str(kept.get(id(c), "")).startswith(PER_HOST) for c in _calls(n.value))
        ):
            return code(n)
        if n is where or not isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            todo.extend(child_nodes(n))
    return None


def _calls(node: cst.CSTNode) -> list[cst.Call]:
    out, todo = [], [node]
    while todo:
        n = todo.pop()
        if type(n) is cst.Call:
            out.append(n)
        todo.extend(child_nodes(n))
    return out


@register
class SpawnKeptCount(Rule):
    code = "TPU406"
    name = "spawn-kept-count"
    family = "distributed"
    outcome = "flagged"
    summary = "Flag mp.spawn(nprocs=n) where n is a device count kept as CUDA's (0 on a TPU host)."
    rationale = (
        "A count that divides work per host stays torch.cuda.device_count() (TPU201 flags it); handed to "
        "mp.spawn as nprocs it is 0 without CUDA, and spawn(nprocs=0) starts nothing and returns: the run "
        "ends at once, silently. Launch with torchrun --nproc_per_node=<chips> and read LOCAL_WORLD_SIZE."
    )
    requires = ("TPU201",)
    before = (
        "import torch\nimport torch.multiprocessing as mp\n\n\ndef main(args):\n"
        "    ngpus = torch.cuda.device_count()\n    args.batch_size = args.batch_size // ngpus\n"
        "    mp.spawn(worker, nprocs=ngpus, args=(args,))\n"
    )
    after = (
        "import torch\nimport torch.multiprocessing as mp\n\n\ndef main(args):\n"
        "    # TODO(tpu-migrate TPU201): `torch.cuda.device_count()` kept as CUDA's: it counts devices per host "
        "and divides work (`args.batch_size // ngpus`): TorchTPU counts one device per process, so every "
        "process would keep the whole share; under torchrun use int(os.environ['LOCAL_WORLD_SIZE']) (0 without "
        "CUDA: dividing by it raises, spawning that many processes starts none)\n"
        "    ngpus = torch.cuda.device_count()\n    args.batch_size = args.batch_size // ngpus\n"
        "    # TODO(tpu-migrate TPU406): nprocs=ngpus is a device count kept as CUDA's (`ngpus = "
        "torch.cuda.device_count()`): 0 on a TPU host, where spawn(nprocs=0) starts nothing and returns at "
        "once (the run ends silently); launch with torchrun --nproc_per_node=<chips> and use "
        "int(os.environ['LOCAL_WORLD_SIZE'])\n"
        "    mp.spawn(worker, nprocs=ngpus, args=(args,))\n"
    )
    calls = _SPAWN

    def call(self, ctx, orig, node, qname):
        fn = kwarg(orig, "fn") or next((x for x in orig.args if x.keyword is None and not x.star), None)
        if fn is not None:
            check_workers(ctx, orig, fn.value)  # (TPU409: the workers it starts open the device)
        a = kwarg(orig, "nprocs")
        if a is None:
            positional = [x for x in orig.args if x.keyword is None and not x.star]
            a = positional[2] if len(positional) > 2 else None
        if a is None or type(a.value) is not cst.Name:
            return None
        bound = _kept_count_name(ctx, a.value)
        if bound is not None:
            ctx.flag(
                orig,
                f"nprocs={a.value.value} is a device count kept as CUDA's (`{bound[:60]}`): 0 on a TPU host, "
                "where spawn(nprocs=0) starts nothing and returns at once (the run ends silently); launch with "
                "torchrun --nproc_per_node=<chips> and use int(os.environ['LOCAL_WORLD_SIZE'])",
                code=self.code,
            )
        return None


_DATA_PARALLEL = DATA_PARALLEL


_MMCV_WRAPPER = re.compile(r"(?:^|\.)mmcv\.parallel(?:\.\w+)?\.(MMDataParallel|MMDistributedDataParallel)$")


def _mmcv_wrapper(qname: str) -> str | None:
    """mmcv's MMDataParallel / MMDistributedDataParallel, from mmcv or a copy of it carried in the tree (LAVIS's
    ``annotator.uniformer.mmcv.parallel``): the wrapper's name, else None."""
    m = _MMCV_WRAPPER.search(qname)
    return m.group(1) if m else None


@register
class DataParallelFlag(Rule):
    code = "TPU407"
    name = "data-parallel"
    family = "distributed"
    outcome = "flagged"
    summary = "Flag nn.DataParallel / data_parallel: it splits a batch over the CUDA devices of one process."
    rationale = (
        "DataParallel scatters each batch and replicates the module with CUDA's own comm functions "
        "(torch._C._scatter, _broadcast_coalesced), which a build without CUDA does not have: once the module "
        "is on 'tpu' its first forward raises AttributeError. TorchTPU binds one device per process: call the "
        "module itself (its state_dict then lacks the 'module.' prefix) or use DistributedDataParallel / "
        "FSDP2 with one process per chip. Flagged, never rewritten: dropping the wrapper changes `.module` "
        "and checkpoint keys."
    )
    before = "import torch\n\nmodel = torch.nn.DataParallel(model)\n"
    after = (
        "import torch\n\n# TODO(tpu-migrate TPU407): `torch.nn.DataParallel` splits each batch over the CUDA "
        "devices of one process with CUDA's own scatter (absent without CUDA: the first forward on 'tpu' "
        "raises); TorchTPU binds one device per process: call the module itself (its state_dict keys then "
        "lack 'module.') or use DistributedDataParallel / FSDP2 with one process per chip\n"
        "model = torch.nn.DataParallel(model)\n"
    )
    calls = _DATA_PARALLEL
    node_types = (cst.ClassDef, cst.Call)

    def call(self, ctx, orig, node, qname):
        short = (
            "torch.nn.parallel.data_parallel" if qname.endswith("data_parallel") else "torch.nn.DataParallel"
        )
        self._flag(ctx, orig, f"`{short}`")
        return None

    def _flag(self, ctx, node, what: str) -> None:
        ctx.flag(
            node,
            f"{what} splits each batch over the CUDA devices of one process with CUDA's own scatter (absent "
            "without CUDA: the first forward on 'tpu' raises); TorchTPU binds one device per process: call the "
            "module itself (its state_dict keys then lack 'module.') or use DistributedDataParallel / FSDP2 "
            "with one process per chip",
            code=self.code,
        )

    def visit_node(self, ctx, node):
        """A subclass of DataParallel in this file (StyleTTS2's ``class MyDataParallel(torch.nn.DataParallel)``)
        scatters like it: the class and each construction of it are flagged."""
        subclasses = ctx.scratch.setdefault("data-parallel-subclasses", set())
        if type(node) is cst.Call and (wrapper := _mmcv_wrapper(ctx.qname(node.func) or "")) is not None:
            ctx.flag(
                node,
                f"`{wrapper}` (mmcv) moves each batch to its device_ids with mmcv's own scatter, which knows "
                "CUDA, MLU and NPU devices only (with the model on 'tpu' it raises or feeds it CPU tensors): wrap "
                "the module in torch's DistributedDataParallel without device_ids, or call it directly",
                code=self.code,
            )
            return
        if type(node) is cst.ClassDef:
            if any(ctx.qname(b.value) in _DATA_PARALLEL for b in node.bases):
                subclasses.add(node.name.value)  # type: ignore[union-attr]
        elif type(node.func) is cst.Name and node.func.value in subclasses and ctx.qname(node.func) is None:
            self._flag(ctx, node, f"`{node.func.value}` (a subclass of torch.nn.DataParallel)")


_HARNESS_PG = (
    "`self.create_pg(...)` of torch's DistributedTestBase builds a gloo group for 'tpu' and counts devices "
    "through torch.get_device_module('tpu'), which raises on torch >= 2.11: create the test's group with "
    "init_process_group('tpu_dist') (override backend() or create_pg)"
)


@register
class HarnessProcessGroup(Rule):
    code = "TPU411"
    name = "harness-process-group"
    family = "distributed"
    outcome = "flagged"
    summary = (
        "Flag `self.create_pg(device)` of torch's DistributedTestBase: for 'tpu' it builds a gloo group."
    )
    rationale = (
        "torch.testing's DistributedTestBase.create_pg(device) sizes its store with "
        "torch.get_device_module(device).device_count() (torch.tpu's raises on torch >= 2.11) and picks the "
        "backend by device type: anything but cuda/hpu/xpu gets gloo, whose collectives take CPU and CUDA tensors "
        "only (xtuner's model tests, whose cases and bodies move to 'tpu'). Flagged: the test's group needs "
        "init_process_group('tpu_dist') (override backend() or create_pg in the test's base class)."
    )
    before = 'class T(DistributedTestBase):\n    def test_x(self):\n        self.create_pg("cuda")\n'
    after = (
        "class T(DistributedTestBase):\n    def test_x(self):\n        # TODO(tpu-migrate TPU411): "
        f'{_HARNESS_PG}\n        self.create_pg("cuda")\n'
    )
    methods = frozenset({"create_pg"})
    words = methods

    def method(self, ctx, orig, node):
        f = orig.func
        if (
            type(f.value) is cst.Name and f.value.value == "self"
        ):  # (the harness's own method, on a test case)
            ctx.flag(orig, _HARNESS_PG, code=self.code)
        return None


_SYNC_BATCHNORM = frozenset(
    {
        "torch.nn.SyncBatchNorm",
        "torch.nn.modules.batchnorm.SyncBatchNorm",
        "torch.nn.SyncBatchNorm.convert_sync_batchnorm",
        "torch.nn.modules.batchnorm.SyncBatchNorm.convert_sync_batchnorm",
    }
)


@register
class SyncBatchNormFlag(Rule):
    code = "TPU408"
    name = "sync-batchnorm"
    family = "distributed"
    outcome = "flagged"
    summary = "Flag nn.SyncBatchNorm: its cross-process statistics run on kernels TorchTPU does not promise."
    rationale = (
        "With more than one process, SyncBatchNorm's training forward computes and gathers batch statistics "
        "with aten::batch_norm_stats / batch_norm_gather_stats_with_counts / batch_norm_elemt, kernels PyTorch "
        "has for CUDA only (the CPU raises too). TorchTPU's op list does not name them and this project's 'tpu' "
        "device lacks them (NotImplementedError on the first step, found on moco-v3): check them on the TPU, or "
        "keep per-process BatchNorm. Flagged, never rewritten: dropping the conversion changes the statistics."
    )
    before = "import torch\n\nmodel = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)\n"
    after = (
        "import torch\n\n# TODO(tpu-migrate TPU408): SyncBatchNorm gathers batch statistics across processes "
        "with aten::batch_norm_stats and friends, kernels PyTorch has for CUDA only (TorchTPU does not promise "
        "them); check a multi-process step on the TPU, or keep per-process BatchNorm\n"
        "model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)\n"
    )
    calls = _SYNC_BATCHNORM

    def call(self, ctx, orig, node, qname):
        ctx.flag(
            orig,
            "SyncBatchNorm gathers batch statistics across processes with aten::batch_norm_stats and friends, "
            "kernels PyTorch has for CUDA only (TorchTPU does not promise them); check a multi-process step on "
            "the TPU, or keep per-process BatchNorm",
            code=self.code,
        )
        return None
