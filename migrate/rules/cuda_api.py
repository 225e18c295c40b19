"""``torch.cuda.*`` APIs and ``torch.backends.cudnn`` flags -> ``torch.accelerator`` and friends.

TorchTPU's own ``torch.tpu.is_available/device_count/synchronize/current_device/set_device`` raise
with torch >= 2.11, so the device-agnostic ``torch.accelerator`` API is the target.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from functools import lru_cache

import libcst as cst

from .._foreign import third_party
from .._host import DATA_PARALLEL, HostHelpers
from .._walk import child_nodes
from ..flow import PER_HOST, walk_regions
from ..project import NEEDS_CUDA, TEST_FILE, current, facts_for, is_test_file
from . import _helpers
from ._calls import rebind, same_args
from ._util import (
    arg,
    code,
    expr,
    full_name,
    kwarg,
    literals,
    mentions,
    pure,
    string_body,
    unwrap_block,
    with_body,
)
from .base import Context, Rule, register

#: torch.cuda name -> (its signature, the torch.accelerator name, that one's signature, renamed parameters).
_ACCELERATOR: dict[str, tuple[str, str, str, dict[str, str]]] = {
    "is_available": ("", "is_available", "", {}),
    "device_count": ("", "device_count", "", {}),
    "synchronize": ("device=None", "synchronize", "device_index=None", {"device": "device_index"}),
    "current_device": ("", "current_device_index", "", {}),
    "current_stream": ("device=None", "current_stream", "device=None, /", {}),
    "set_stream": ("stream", "set_stream", "stream", {}),
}


#: torch.cuda memory statistics that torch.accelerator answers on TorchTPU 0.2.0 (contract §15: allocated, peak,
#: reset, from the device allocator), by the torch.accelerator name; CUDA's deprecated aliases map onto theirs.
_MEMORY_ACCELERATOR = {
    "memory_allocated": "memory_allocated",
    "max_memory_allocated": "max_memory_allocated",
    "memory_reserved": "memory_reserved",
    "max_memory_reserved": "max_memory_reserved",
    "memory_cached": "memory_reserved",
    "max_memory_cached": "max_memory_reserved",
    "reset_peak_memory_stats": "reset_peak_memory_stats",
    "reset_max_memory_allocated": "reset_peak_memory_stats",
    "memory_stats": "memory_stats",
    "reset_accumulated_memory_stats": "reset_accumulated_memory_stats",
}

#: Memory statistics that answer a number (a dict): CUDA's answered 0 ({}) without a GPU, torch.accelerator's raise.
_MEMORY_QUERIES = frozenset(
    {"memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved", "memory_stats"}
)
#: An if/while test that asks whether an accelerator is there (a user's flag such as `args.cuda` is no such test:
#: on a CPU-only host CUDA's query answered 0 under it too).
_DEVICE_TEST = re.compile(r"is_available|device_count|current_accelerator|is_cuda|\.type\s*[!=]=")


def _device_guarded(ctx: Context) -> bool:
    """The code being rewritten is inside an ``if``/``while`` whose test asks about the device."""
    return any(
        type(s) in (cst.If, cst.While) and _DEVICE_TEST.search(code(s.test))  # type: ignore[attr-defined]
        for s in ctx.statements()
    )


_GUARDS = frozenset({"torch.cuda.is_available", "torch.cuda.device_count"})
#: Keywords that hand a framework a count of CUDA GPUs (Lightning 1.x ``gpus=``, Ray's ``num_gpus=``).
_CUDA_GPU_COUNTS = frozenset({"gpus", "num_gpus"})
_GPU_COUNT = "a framework's count of CUDA GPUs"
#: torch.cuda APIs the rules migrate; any other torch.cuda call stays CUDA-only (it is flagged).
_MIGRATED = frozenset(
    {
        *(f"torch.cuda.{k}" for k in _ACCELERATOR),
        "torch.cuda.set_device",
        "torch.cuda.empty_cache",
        "torch.cuda.manual_seed",
        "torch.cuda.manual_seed_all",
        "torch.cuda.is_bf16_supported",
        "torch.cuda.Event",
        "torch.cuda.Stream",
        "torch.cuda.get_device_name",
        "torch.cuda.get_device_properties",  # (TPU205: rewritten, or flagged where a capability is read)
        *(f"torch.cuda.{k}" for k in _MEMORY_ACCELERATOR),
    }
)
_CUDA_WORD = re.compile(r"cuda|nvml|nvidia|nccl|gpu_info|cudnn", re.I)


#: Test-skip helpers: unittest.skipIf/skipUnless, pytest.mark.skipif, and the like.
_SKIPS = frozenset({"skipIf", "skipUnless", "skipif", "skip_if", "skip_unless", "skipIfNoCuda"})
#: What an assertion's message names besides "a GPU" when the code after it needs CUDA itself (APEX's optimizers,
#: a CUDA kernel or extension, NCCL, cuDNN ...).
_CUDA_ONLY_PART = re.compile(
    r"(?i)\b(?:apex|nvidia|cudnn|nccl|triton|flash|kernels?|extensions?|tensorrt|amp|fp16|half|bitsandbytes|"
    r"cupy|nvcc|compute capability|sm_?\d+|ampere|hopper|volta|a100|h100|v100|tensor cores?)\b"
)


def _raises_for_cuda(body: cst.BaseSuite) -> bool:
    """The block skips with a message that names CUDA or a GPU, or raises with one that also names a CUDA-only
    part (an error that asks only for CUDA, "CUDA not found; set cpu=True", asks for an accelerator, as an
    assertion does: the flow layer renames its check when the code after it was all migrated)."""
    for stmt in getattr(body, "body", ()):
        small = stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ()
        for s in small:
            call = (
                s.exc
                if isinstance(s, cst.Raise)
                else s.value
                if isinstance(s, (cst.Expr, cst.Return))
                else None
            )
            if isinstance(call, cst.Call) and isinstance(
                call.func, cst.Call
            ):  # return unittest.skip(why)(test)
                call = call.func
            if isinstance(call, cst.Call) and (
                isinstance(s, cst.Raise) or full_name(call.func).endswith("skip")
            ):
                if any(
                    (b := string_body(lit))
                    and NEEDS_CUDA.search(b)
                    and (not isinstance(s, cst.Raise) or _CUDA_ONLY_PART.search(b))
                    for a in call.args
                    for lit in literals(a.value)
                ):
                    return True
    return False


def _when_missing(test: cst.BaseExpression) -> bool:
    """A test that holds where CUDA is missing (``not ok``, ``count < 2``, ``device != "cuda"``, ``count == 0``),
    as opposed to one for too many GPUs (``count > 1``: "test requires 0 or 1 GPU"), which holds on no TPU host
    whichever count it reads."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return True
    if isinstance(test, cst.BooleanOperation):
        return _when_missing(test.left) or _when_missing(test.right)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        op, right = test.comparisons[0].operator, test.comparisons[0].comparator
        if isinstance(op, (cst.LessThan, cst.LessThanEqual, cst.NotEqual)):
            return True
        return isinstance(op, cst.Equal) and isinstance(right, cst.Integer) and right.value == "0"
    return False


_GATE_NAME = re.compile(r"(?:requires?|needs?|skip_?if_?no|only)_?(?:cuda|gpus?)|(?:cuda|gpus?)_?only", re.I)
_GATE_KEYWORD = re.compile(r"cuda|gpu", re.I)


def _gate_helper(ctx: Context, name: str) -> bool:
    """A definition named like a test gate on CUDA (``RunIf``, ``requires_gpu``, ``skip_if_no_cuda``), or one
    the project's own code shows to be one (migrate.project: it skips its test unless CUDA is there)."""
    return (
        name in ("RunIf", "run_if")
        or _GATE_NAME.search(name) is not None
        or name in facts_for(ctx.scratch, ctx.source_text).gates
    )


def _skips_tests(ctx: Context, d: cst.CSTNode) -> bool:
    """A gate helper that skips tests (``pytest.skip``, ``unittest.skipIf``, a decorator it returns), or one the
    project shows to be a gate; not a library guard named like one (LMFlow's ``require_cuda_for_gpu_mode()``,
    which raises in its evaluator and inferencer and gates no test)."""
    if type(d) is cst.ClassDef or d.name.value in facts_for(ctx.scratch, ctx.source_text).gates:  # type: ignore[attr-defined]
        return True
    return re.search(r"skip|pytest|unittest|mark\.", code(d)) is not None


def cuda_test_gate(ctx: Context, node: cst.BaseExpression) -> bool:
    """A decorator or mark that runs a test only where CUDA is: ``@skipUnless(torch.cuda.is_available(),
    "needs CUDA")``, ``@pytest.mark.skipif(not torch.cuda.is_available(), reason="requires a GPU")``,
    ``@RunIf(min_cuda_gpus=1)``, ``@requires_cuda``. What it gates is CUDA's test: migrated, it would run on
    a CUDA machine with TPU code and never on a TPU one."""
    func = node.func if isinstance(node, cst.Call) else node
    last = (full_name(func) or "").rsplit(".", 1)[-1]
    if not isinstance(node, cst.Call):  # (a name TPU217 knows is its to flag: one TODO, not two)
        return bool(_GATE_NAME.search(last)) or (
            last in facts_for(ctx.scratch, ctx.source_text).gates and not _GPU_ONLY_TEST.match(last)
        )
    if last in ("RunIf", "run_if"):
        return any(
            a.keyword is not None
            and _GATE_KEYWORD.search(a.keyword.value)
            and not (isinstance(a.value, cst.Integer) and int(a.value.value, 0) == 0)
            for a in node.args
        )
    if last not in _SKIPS or not node.args:
        return bool(_GATE_NAME.search(last))
    if _probed(ctx, node.args[0].value, last):
        return True  # `skipif(not is_flash_v2_installed(), ...)`: a test of a CUDA-only stack
    texts = [string_body(lit) or "" for a in node.args[1:] for lit in literals(a.value)]
    # a reason that names CUDA, or none at all (fairseq's `@skipUnless(torch.cuda.is_available(), "")` around the
    # tests of its CUDA extension): the guard alone says what the test needs
    reason = any(NEEDS_CUDA.search(b) for b in texts) or not any(b.strip() for b in texts)
    test = node.args[0].value
    if last in ("skipUnless", "skip_unless"):
        return reason and any(ctx.qname(c.func) in _GUARDS for c in _calls_in(test))
    # (`skipIf(torch.cuda.device_count() < 1, "This test requires CUDA device")`, torchrec's: the skip-call
    # branch of TPU201 keeps such a guard, so what it gates is CUDA's test too, not half-migrated)
    return reason and _when_missing(test) and any(ctx.qname(c.func) in _GUARDS for c in _calls_in(test))


#: torch.cuda functions the migration always renames to torch.accelerator's (not the checks: a kept guard still
#: calls CUDA's, so a test patching torch.cuda.is_available keeps patching it).
_ALWAYS_RENAMED = {
    **{k: v[1] for k, v in _ACCELERATOR.items() if k not in ("is_available", "device_count")},
    **_MEMORY_ACCELERATOR,
}
_PATCHERS = frozenset({"setattr", "object", "patch"})
_PATCH_TARGET = re.compile(r"(?:^|\.)torch\.cuda\.(\w+)$")


def _partial_keywords(ctx: Context, call: cst.Call) -> None:
    """``functools.partial(torch.cuda.synchronize, device=d)``: a renamed function bound with keywords that
    torch.accelerator's version names otherwise (``device_index=``); recorded for leave_node."""
    if ctx.qname(call.func) != "functools.partial" or call.args[0].keyword is not None:
        return
    q = ctx.qname(call.args[0].value) or ""
    if not q.startswith("torch.cuda.") or q.rsplit(".", 1)[1] not in _ACCELERATOR:
        return
    renames = _ACCELERATOR[q.rsplit(".", 1)[1]][3]
    if any(a.keyword is not None and a.keyword.value in renames for a in call.args[1:]):
        ctx.scratch.setdefault("partial-renames", {})[id(call)] = renames  # type: ignore[index]


def _patched_cuda_api(ctx: Context, call: cst.Call) -> tuple[str, str] | None:
    """``monkeypatch.setattr(torch.cuda, "synchronize", fake)``, ``mock.patch.object(torch.cuda, "synchronize")``,
    ``mock.patch("torch.cuda.current_device", ...)``: a test patching a torch.cuda function the migration renames
    in the code under test (Megatron's test_cache_refresh). Patched as written, the patch misses the migrated
    call: (CUDA's name, torch.accelerator's), else None."""
    f = call.func
    last = f.attr.value if type(f) is cst.Attribute else f.value if type(f) is cst.Name else ""
    if last not in _PATCHERS:
        return None
    args = [a for a in call.args if a.keyword is None and not a.star]
    if not args:
        return None
    first = args[0].value
    if type(first) is cst.SimpleString and last in ("patch", "setattr"):
        m = _PATCH_TARGET.search(string_body(first) or "")
    elif last in ("setattr", "object") and len(args) >= 2 and ctx.qname(first) == "torch.cuda":
        m = re.fullmatch(r"(\w+)", string_body(args[1].value) or "")
    else:
        return None
    if m is None or m.group(1) not in _ALWAYS_RENAMED:
        return None
    return m.group(1), _ALWAYS_RENAMED[m.group(1)]


#: A mock's own API read from a patched torch.cuda function (``torch.cuda.synchronize.assert_called_once()``).
_MOCK_USE = re.compile(
    r"torch\.cuda\.(\w+)(\.(?:assert_\w+|return_value|side_effect|call_count|call_args(?:_list)?|called|"
    r"mock_calls|reset_mock)(?:\.\w+)*)"
)


def _patched_here(ctx: Context, old: str) -> bool:
    """The file patches ``torch.cuda.<old>``, a function the migration renames (see _patched_cuda_api)."""
    if old not in _ALWAYS_RENAMED:
        return False
    return (
        re.search(
            rf"""patch\w*\(\s*['"][\w.]*torch\.cuda\.{old}['"]|(?:setattr|object)\(\s*torch\.cuda\s*,\s*['"]{old}['"]""",
            ctx.source_text,
        )
        is not None
    )


def _repatched(call: cst.Call, old: str, new: str) -> cst.Call:
    """``call`` patching torch.accelerator's ``new`` where it patched torch.cuda's ``old``."""
    args = list(call.args)
    i = next(i for i, a in enumerate(args) if a.keyword is None and not a.star)
    first = args[i].value
    if type(first) is cst.SimpleString:
        body = string_body(first) or ""
        args[i] = args[i].with_changes(
            value=with_body(first, body[: -len(f"torch.cuda.{old}")] + f"torch.accelerator.{new}")
        )
    else:
        args[i] = args[i].with_changes(value=cst.parse_expression("torch.accelerator"))
        args[i + 1] = args[i + 1].with_changes(value=with_body(args[i + 1].value, new))  # type: ignore[arg-type]
    return call.with_changes(args=args)


def _pytestmark_gate(ctx: Context, node: cst.CSTNode) -> cst.BaseExpression | None:
    """The CUDA gate of a module-level ``pytestmark = ...`` statement line, else None."""
    if (
        type(node) is not cst.SimpleStatementLine
        or len(node.body) != 1
        or type(node.body[0]) is not cst.Assign
    ):
        return None
    assign = node.body[0]
    if len(assign.targets) != 1 or code(assign.targets[0].target) != "pytestmark":
        return None
    return _cuda_mark(ctx, assign.value)


def _cuda_mark(ctx: Context, value: cst.BaseExpression) -> cst.BaseExpression | None:
    """The mark of ``pytestmark = <value>`` (one, or a list of them) that runs tests only where CUDA is."""
    marks = [e.value for e in value.elements] if type(value) in (cst.List, cst.Tuple) else [value]  # type: ignore[attr-defined]
    return next((m for m in marks if cuda_test_gate(ctx, m)), None)


def _before_module_gate(ctx: Context, module: cst.Module) -> None:
    """The statements above a module's CUDA ``pytestmark`` (axolotl's ``DEVICE = "cuda"`` two lines before it)
    belong to the same CUDA tests: no rule touches them (the gate's own statement flags and keeps the rest)."""
    body = list(module.body)
    at = next((i for i, stmt in enumerate(body) if _pytestmark_gate(ctx, stmt) is not None), None)
    for stmt in body[: at or 0]:
        ctx.skip_inside(stmt)


#: Words of a build of CUDA sources (a check choosing them is a CUDA build decision, not a device choice).
_CUDA_SOURCES_BUILD = re.compile(
    r"extra_cuda_cflags|_is_cuda_file|\bnvcc\b|CUDA_HOME|-DCUDA|WITH_CUDA|cuda_sources"
)

#: A function named for a CUDA-only path: transformers' Mamba ``cuda_kernels_forward``, ``*_triton``,
#: ``*_cuda_kernel``, ``*cuda_graph*`` (not ``*_cuda``: `to_cuda`, `is_cuda` helpers move data or ask).
_CUDA_KERNEL_FUNCTION = re.compile(r"(?i)cuda_?kernels?(?:_|$)|_triton(?:_|$)|^triton_|cuda_?graph")


#: A function named for CUDA's out-of-memory error (detectron2's ``retry_if_cuda_oom``, ``_ignore_torch_cuda_oom``).
_CUDA_OOM_FUNCTION = re.compile(r"(?i)cuda_?oom")


def _kept_whole(fn: cst.FunctionDef) -> str | None:
    """Why a function stays CUDA's whole (left as written, one TODO at its ``def``), else None."""
    name = fn.name.value
    if name in current().cuda_test_helpers:
        # torchmetrics' run_precision_test_gpu(device="cuda"): only the CUDA-gated tests above call it, and they
        # stay CUDA's whole: migrated alone, a CUDA box ran them with 'tpu' and a TPU skipped them
        return (
            f"`{name}` is called only by tests that run where CUDA is (kept as CUDA code): kept with them; add a "
            "TPU variant of both by hand"
        )
    if _CUDA_OOM_FUNCTION.search(name):
        # Mask2Former's copy of detectron2's retry_if_cuda_oom: its `torch.cuda.empty_cache()` runs only after a
        # CUDA out-of-memory error; removed, a CUDA run retried without clearing the cache
        return (
            f"`{name}` handles CUDA's out-of-memory error (its cache clearing and CPU retry are CUDA's): left as "
            "written; on TPU the error is not caught here"
        )
    if _CUDA_KERNEL_FUNCTION.search(name):
        # axolotl's falcon_h1 `patched_cuda_kernels_forward` (mamba_ssm's Triton scans, chosen by a kept
        # `"cuda" in weight.device.type`): only CUDA runs it; rewritten, a CUDA run lost its
        # `with torch.cuda.device(x.device)` and a TPU run gains nothing
        return (
            f"`{name}` is named for a CUDA-only path (CUDA kernels, Triton, a CUDA graph): left as written; give "
            "the TPU its own path"
        )
    return None


def _keep_what_follows(ctx: Context, node: cst.If) -> None:
    """``if not torch.cuda.is_available(): pytest.skip("... requires CUDA")`` kept as CUDA's: the statements after
    it in its block (axolotl's activation-offloading test: `.to("cuda")`, `device="cuda"`) are what runs only where
    CUDA is, CUDA's test: no rule touches them (renamed, a CUDA host would get 'tpu' tensors, a TPU host skips)."""
    stack = ctx.statements()
    parent = stack[-2] if len(stack) > 1 and stack[-1] is node else None
    block = getattr(getattr(parent, "body", None), "body", None)
    if not isinstance(block, (list, tuple)) or not any(s is node for s in block):
        return
    after = False
    for stmt in block:
        if after:
            ctx.skip_inside(stmt)
        after = after or stmt is node


def _module_gate(ctx: Context, node: cst.Assign, rule_code: str) -> None:
    """``pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA required")`` at module level
    (Megatron's test_mxfp8_utils.py) gates every test of the module on CUDA: the module stays CUDA's tests,
    whole, with one TODO (migrated, its tests would run on a CUDA machine with 'tpu' tensors, never on a TPU)."""
    if ctx.enclosing_definitions() or ctx.module is None or len(node.targets) != 1:
        return
    target = node.targets[0].target
    if type(target) is not cst.Name or target.value != "pytestmark":
        return
    gate = _cuda_mark(ctx, node.value)
    if gate is None:
        return
    ctx.flag(
        node,
        f"`pytestmark = {_one_line(code(gate))}` runs every test of this module only where CUDA is: kept as "
        "CUDA code; add TPU variants by hand",
        code=rule_code,
    )
    # (the other marks of the list are the same tests' gates: axolotl's VRAM guard
    # `torch.cuda.get_device_properties(0).total_memory < 24e9` measures the CUDA device those tests use)
    ctx.skip_inside(node.value)
    here = ctx.statement()
    body = list(ctx.module.body)
    after = next((i + 1 for i, stmt in enumerate(body) if stmt is here), len(body))
    for stmt in body[after:]:  # (those before it, imports and constants, were visited already)
        ctx.skip_inside(stmt)


#: Arithmetic that turns a process's ordinal into a position in the data (``gpu_idx * slice_idx``).
_INDEX_ARITHMETIC = (cst.Multiply, cst.Add, cst.FloorDivide, cst.Modulo)


def _ordinal_as_data_index(ctx: Context, node: cst.Assign, rule_code: str) -> None:
    """``gpu_idx = torch.cuda.current_device()`` then ``paths[gpu_idx * n:(gpu_idx + 1) * n]`` (EasyOCR's CRAFT
    eval, one process per GPU): the process's CUDA ordinal picks its share of the data. TorchTPU binds one device
    per process, so ``current_device_index()`` is 0 in every process and each would take the first share:
    rewritten (``torch.cuda`` raises on a TPU host) and flagged to use the process's rank."""
    if (
        not mentions(ctx, "current_device")  # (every assignment comes here: a per-file text test first)
        or len(node.targets) != 1
        or type(node.targets[0].target) is not cst.Name
        or type(node.value) is not cst.Call
    ):
        return
    if ctx.qname(node.value.func) != "torch.cuda.current_device":
        return
    name = node.targets[0].target.value
    scope = next((d for d in reversed(ctx.enclosing_definitions()) if type(d) is cst.FunctionDef), None)
    todo: list[cst.CSTNode] = [scope.body if scope is not None else (ctx.module or node)]
    while todo:
        n = todo.pop()
        t = type(n)
        if t is cst.BinaryOperation and isinstance(n.operator, _INDEX_ARITHMETIC):  # type: ignore[attr-defined]
            parts = (n.left, n.right)  # type: ignore[attr-defined]
        elif t is cst.Slice:
            parts = (n.lower, n.upper)  # type: ignore[attr-defined]
        else:
            todo.extend(child_nodes(n))
            continue
        if any(type(p) is cst.Name and p.value == name for p in parts):  # type: ignore[union-attr]
            ctx.flag(
                node,
                f"`{name}` (this process's CUDA ordinal) also picks this process's share of the data "
                f"(`{_one_line(code(n))}`): TorchTPU binds one device per process, so its ordinal is 0 in every "
                "process; use the process's rank (dist.get_rank() or LOCAL_RANK) for the share",
                code=rule_code,
            )
            return
        todo.extend(child_nodes(n))


def _one_line(text: str) -> str:
    """Code shown in a one-line TODO: a call written over several lines, joined (``f(\n  a,\n)`` -> ``f(a)``)."""
    text = re.sub(r"\s*\n\s*", " ", text)
    return re.sub(r"\(\s+", "(", re.sub(r",?\s+\)", ")", text))


def _probed(ctx: Context, test: cst.BaseExpression, skip: str) -> bool:
    """A skip that runs its test only where a probe of a CUDA-only stack (migrate.project: a function that
    imports one, llm-foundry's ``is_flash_v2_installed()``) answers True."""
    probes = facts_for(ctx.scratch, ctx.source_text).probes
    if not probes:
        return False
    if skip in ("skipUnless", "skip_unless"):
        return any(_last_part(c.func) in probes for c in _calls_in(test))
    negated = isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)
    return negated and any(_last_part(c.func) in probes for c in _calls_in(test))


def _last_part(func: cst.BaseExpression) -> str:
    return (full_name(func) or "").rsplit(".", 1)[-1]


_CUDA_LITERAL = re.compile(r"cuda(?::\d+)?")
#: A warning that says a feature is CUDA's only ("only works on CUDA devices", "requires a GPU"), as opposed to
#: one that merely names CUDA ("CUDA not available, falling back to CPU").
_CUDA_ONLY_TEXT = re.compile(
    r"\b(?:only|requires?|required|needs?)\b[^.;]{0,40}\b(?:cuda|gpus?|nvidia)\b|"
    r"\b(?:cuda|gpu)[- ]only\b",
    re.I,
)
_WARNS = ("warn", "warning", "error", "critical")


def _says_cuda_only(body: cst.BaseSuite) -> bool:
    """The block raises, skips or warns with a message that names CUDA or a GPU (``warnings.warn('OOMObserver
    only works on CUDA devices ...')``)."""
    if _raises_for_cuda(body):
        return True
    for stmt in getattr(body, "body", ()):
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            call = small.value if isinstance(small, cst.Expr) else None
            if (
                isinstance(call, cst.Call)
                and full_name(call.func).endswith(_WARNS)
                and any(
                    isinstance(a.value, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString))
                    and _CUDA_ONLY_TEXT.search(code(a.value))
                    for a in call.args
                )
            ):
                return True
    return False


_NVIDIA_PACKAGE = re.compile(r"nvidia|cupy|nvml|cudnn|tensorrt", re.I)


def _installs_nvidia(body: cst.BaseSuite) -> bool:
    """The block names an NVIDIA-only package in a string (``install_requires.append('nvidia-ml-py')``,
    ``f'cupy-cuda{v}'``): it is CUDA's branch."""
    todo: list[cst.CSTNode] = [body]
    while todo:
        n = todo.pop()
        if isinstance(n, (cst.SimpleString, cst.FormattedStringText)) and _NVIDIA_PACKAGE.search(n.value):
            return True
        if not isinstance(n, _OWN_SCOPE):
            todo.extend(child_nodes(n))
    return False


def _cuda_literals(test: cst.BaseExpression) -> list[cst.SimpleString]:
    """The 'cuda' literals a condition compares with (``device.type not in ('cuda', 'meta')``)."""
    out, todo = [], [test]
    while todo:
        n = todo.pop()
        if isinstance(n, cst.SimpleString) and _CUDA_LITERAL.fullmatch(string_body(n) or ""):
            out.append(n)
        elif not isinstance(n, _OWN_SCOPE):
            todo.extend(child_nodes(n))
    return out


def _marks(call: cst.Call) -> list[cst.BaseExpression]:
    """The marks of ``pytest.param(..., marks=...)`` (one mark or a display of them)."""
    value = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "marks"), None)
    if isinstance(value, (cst.List, cst.Tuple)):
        return [e.value for e in value.elements]
    return [value] if value is not None else []


_OWN_SCOPE = (
    cst.FunctionDef,
    cst.ClassDef,
    cst.Lambda,
    cst.ListComp,
    cst.SetComp,
    cst.DictComp,
    cst.GeneratorExp,
)


def _calls_in(node: cst.CSTNode) -> list[cst.Call]:
    """Every call in ``node`` outside nested scopes (defs, classes, lambdas, comprehensions): those run elsewhere
    or later, and ``ctx.qname`` is asked only about nodes of the scope being visited."""
    out, todo = [], [node]
    while todo:
        n = todo.pop()
        if isinstance(n, cst.Call):
            out.append(n)
        if n is node or not isinstance(n, _OWN_SCOPE):
            todo.extend(child_nodes(n))
    return out


def _deciding_calls(node: cst.BaseExpression) -> list[cst.Call]:
    """The calls in ``node`` whose value decides something: an if-expression's test, a comparison, a boolean
    operand, a ``not``. ``rank % torch.cuda.device_count()`` uses the count as a number, not as a check (swav's
    ``map_location="cuda:" + str(rank % torch.cuda.device_count())``): it is migrated like any other use."""
    out: list[cst.Call] = []
    todo: list[tuple[cst.CSTNode, bool]] = [(node, False)]
    while todo:
        n, deciding = todo.pop()
        if isinstance(n, cst.Call) and deciding:
            out.append(n)
        if n is not node and isinstance(n, _OWN_SCOPE):
            continue
        if isinstance(n, cst.IfExp):
            todo += [(n.test, True), (n.body, deciding), (n.orelse, deciding)]
        elif isinstance(n, (cst.Comparison, cst.BooleanOperation)) or (
            isinstance(n, cst.UnaryOperation) and isinstance(n.operator, cst.Not)
        ):
            todo += [(c, True) for c in child_nodes(n)]
        elif isinstance(n, (cst.BinaryOperation, cst.Call, cst.Subscript, cst.FormattedString)):
            todo += [(c, False) for c in child_nodes(n)]  # a value computed from it: a number, an argument
        else:
            todo += [(c, deciding) for c in child_nodes(n)]
    return out


def _own_scope_walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """``node`` and everything in it outside nested scopes (defs, classes, lambdas, comprehensions)."""
    todo = [node]
    while todo:
        n = todo.pop()
        yield n
        if n is node or not isinstance(n, _OWN_SCOPE):
            todo.extend(child_nodes(n))


def _branches(node: cst.If) -> list[cst.CSTNode]:
    return [node.body] + ([node.orelse] if node.orelse is not None else [])


def _kept_twin_reads(ctx: Context, node: cst.If, guards: list[cst.Call]) -> str | None:
    """Why ``if <guard>:`` must stay CUDA's because of a twin: another ``if`` on the same guard in the same function
    stays CUDA's (its branch calls a CUDA-only API) and reads a name this one's branches set (detr's MetricLogger
    builds ``log_msg`` with a '{memory}' field under one check and formats it with
    ``memory=torch.cuda.max_memory_allocated()`` under the other: rewriting only the first leaves the field
    unfilled on TPU, a KeyError). Reads the enclosing function (function-wide context)."""
    defs = ctx.enclosing_definitions()
    fn = defs[-1] if defs and type(defs[-1]) is cst.FunctionDef else None
    if fn is None:
        return None
    # The function's assignments and ifs, walked once per function (not twice per guarded `if` in it).
    walks: dict[int, tuple[cst.FunctionDef, list[cst.Assign], list[cst.If]]]
    walks = ctx.scratch.setdefault("cuda-twin-walks", {})  # type: ignore[assignment]
    walked = walks.get(id(fn))
    if walked is None or walked[0] is not fn:
        nodes = list(_own_scope_walk(fn.body))
        walked = walks[id(fn)] = (
            fn,
            [n for n in nodes if type(n) is cst.Assign],
            [n for n in nodes if type(n) is cst.If],
        )
    assigns = walked[1]
    bound, read_here = _derived(assigns, _bound_names(ctx, node)), _read_names(node)
    preds = {ctx.qname(c.func) for c in guards}
    for other in walked[2]:
        if other is node:
            continue
        if not any(ctx.qname(c.func) in preds for c in _calls_in(other.test)):
            continue
        why = next(
            (n for c in [*_calls_in(other.test), *_calls_in(other.body)] if (n := _cuda_only_call(ctx, c))),
            None,
        )
        if why is None:
            continue
        shared = sorted(
            (_read_names(other) & bound) | (_derived(assigns, _bound_names(ctx, other)) & read_here)
        )
        if shared:
            return (
                f"a twin check in this function stays CUDA's (`{why}`) and shares `{shared[0]}` with this "
                "check's branch: both stay CUDA's, or the two sides disagree on TPU"
            )
    return None


#: A name for the processes of one host: a device count compared with it counts devices per host.
#: A count or index of processes per host, by its name: a local size or rank, ``nproc_per_node``, or any count of
#: GPUs (``cfg.NUM_GPUS``, YOLOX's ``num_gpus_per_machine``: the processes it spawns per host).
_LOCAL_COUNT = re.compile(r"local_?(?:world_?)?size|nproc|local_?rank|gpu", re.I)
_LOCAL_RANK = re.compile(r"local_?rank", re.I)


def _per_host_comparison(ctx: Context, test: cst.BaseExpression) -> tuple[list[cst.Call], str] | None:
    """``my_local_size > torch.cuda.device_count()``: the count of this host's devices, against its processes
    (dlrm's extend_distributed); TorchTPU's count is 1 per process, so the test fails for any local size > 1."""
    if type(test) is not cst.Comparison:
        return None
    parts = [test.left, *(c.comparator for c in test.comparisons)]
    counts = [p for p in parts if type(p) is cst.Call and ctx.qname(p.func) == "torch.cuda.device_count"]
    other = next(
        (p for p in parts if p not in counts and _LOCAL_COUNT.search(code(p)) and not _counted_here(ctx, p)),
        None,
    )
    return (counts, code(other)) if counts and other is not None else None


def _counted_here(ctx: Context, value: cst.CSTNode) -> bool:
    """``value`` is a name its function binds from the device count itself (YOLOX's ``num_gpu =
    torch.cuda.device_count() if args.devices is None else args.devices``): compared with the count, it tests
    the count against itself, not processes per host; the two stay alike (both migrated)."""
    if type(value) is not cst.Name:
        return False
    scope = next(iter(ctx.enclosing_definitions()[::-1]), None) or getattr(ctx, "module", None)
    for n in _own_scope_walk(scope) if scope is not None else ():
        if type(n) is cst.Assign and any(
            type(t.target) is cst.Name and t.target.value == value.value for t in n.targets
        ):
            if any(ctx.qname(c.func) == "torch.cuda.device_count" for c in _calls_in(n.value)):
                return True
    return False


def _bound_names(ctx: Context, node: cst.If) -> set[str]:
    """Local names the branches of ``node`` set: assigned (``x = ...``, ``x += ...``, ``x[k] = ...``,
    ``x.a = ...``) or changed in place by a method call statement (``x.append(...)``); imported modules aside."""
    out: set[str] = set()
    for b in _branches(node):
        for n in _own_scope_walk(b):
            targets = (
                [a.target for a in n.targets]
                if type(n) is cst.Assign
                else [n.target]
                if type(n) in (cst.AnnAssign, cst.AugAssign)
                else [n.value.func.value]
                if type(n) is cst.Expr and type(n.value) is cst.Call and type(n.value.func) is cst.Attribute
                else []
            )
            for t in targets:
                while type(t) in (cst.Subscript, cst.Attribute):
                    t = t.value
                if type(t) is cst.Name and ctx.qname(t) is None:
                    out.add(t.value)
    return out


def _derived(assigns: list[cst.Assign], names: set[str]) -> set[str]:
    """``names`` and the local names assigned from them in the function (``line = ' '.join(parts)``)."""
    out, grew = set(names), bool(names)
    while grew:
        grew = False
        for a in assigns:
            if any(type(n) is cst.Name and n.value in out for n in _own_scope_walk(a.value)):
                for t in a.targets:
                    if type(t.target) is cst.Name and t.target.value not in out:
                        out.add(t.target.value)
                        grew = True
    return out


def _read_names(node: cst.If) -> set[str]:
    """Names the branches of ``node`` mention (a superset of those read: enough to find a shared one)."""
    return {n.value for b in _branches(node) for n in _own_scope_walk(b) if type(n) is cst.Name}


def _sets_gpu_count(body: cst.CSTNode) -> str | None:
    """The target of an assignment in ``body`` named for a framework's CUDA GPU count (``kwargs["gpus"] = -1``,
    ``self.num_gpus = n``), else None."""
    for n in walk_regions([body]):
        if type(n) is not cst.AssignTarget:
            continue
        t = n.target
        if type(t) is cst.Subscript and len(t.slice) == 1 and isinstance(t.slice[0].slice, cst.Index):
            key = string_body(t.slice[0].slice.value)  # type: ignore[arg-type]
        else:
            key = t.attr.value if type(t) is cst.Attribute else t.value if type(t) is cst.Name else None
        if key in _CUDA_GPU_COUNTS:
            return code(t)
    return None


#: Comparisons of a device count that are true where CUDA is absent.
_NONE_COUNTS = {(cst.Equal, "0"), (cst.LessThan, "1"), (cst.LessThanEqual, "0")}
#: Skips whose condition says when the test does not run.
_SKIP_WHEN = frozenset({"skipIf", "skipif", "skip_if"})


def _runs_without_cuda(ctx: Context, call: cst.Call) -> bool:
    """The code a kept check controls is its no-CUDA side (``X if not torch.cuda.is_available() else Y``,
    ``skipif(torch.cuda.device_count() > 0)``): a TPU host runs it, so saying it "never runs on TPU" is false
    (torchrl's compile test, LitServe's connector test)."""
    stmt = ctx.statement()
    if stmt is None:
        return False
    parents: dict[int, cst.CSTNode] = {}
    todo = [stmt]
    while todo and id(call) not in parents:
        n = todo.pop()
        for c in child_nodes(n):
            parents[id(c)] = n
            todo.append(c)
    negated, node = False, call
    while (up := parents.get(id(node))) is not None and not isinstance(
        up, cst.BaseSmallStatement | cst.BaseCompoundStatement | cst.Decorator
    ):
        if type(up) is cst.UnaryOperation and type(up.operator) is cst.Not:
            negated = not negated
        elif type(up) is cst.Comparison and up.left is node and len(up.comparisons) == 1:
            op, right = up.comparisons[0].operator, up.comparisons[0].comparator
            negated ^= type(right) is cst.Integer and (type(op), right.value) in _NONE_COUNTS
        elif type(up) is cst.Call and full_name(up.func).rsplit(".", 1)[-1] in _SKIP_WHEN:
            negated = not negated  # (skipif(cond): the test runs where cond is false)
        node = up
    return negated


def _cuda_only_call(ctx: Context, call: cst.Call) -> str | None:
    """The callee's name when ``call`` stays CUDA-only after the migration (a flagged torch.cuda API, or a
    function of the program or a library named for CUDA: check_cuda_fp8_capability, pynvml.nvmlInit ...)."""
    q = ctx.qname(call.func)
    if q is not None and q.startswith("torch."):
        if q in DATA_PARALLEL:
            return q  # its forward scatters with CUDA's torch._C._scatter (flagged TPU407): CUDA-only
        if q == "torch.cuda.stream" and _own_stream(ctx, call) is not None:
            return None  # `with torch.cuda.stream(s)` on a stream the file made: `with s:` (TPU207)
        return (
            q
            if q.startswith("torch.cuda.") and q not in _MIGRATED and not q.startswith("torch.cuda.amp")
            else None
        )
    if type(call.func) is cst.Attribute and call.func.attr.value == "cuda":
        return None  # the tensor/module method `.cuda()` (TPU105 migrates it)
    # (a method of a call's result, `torch.ones(2).cuda().sum()`: its own name, not the chain's calls)
    chained = type(call.func) is cst.Attribute and type(call.func.value) is cst.Call
    name = call.func.attr.value if chained else full_name(call.func)  # type: ignore[union-attr]
    if not name or not _CUDA_WORD.search(name):
        return None
    if type(call.func) is cst.Name and _portable(ctx, call.func.value):
        return None  # a project helper named for CUDA whose CUDA code the run migrates (`dataclass_to_cuda_`)
    receiver = name.rsplit(".", 1)[0] if "." in name else ""
    if receiver.rsplit(".", 1)[-1] in _torch_objects(ctx):
        return None  # self.rng_cuda.manual_seed(s): a torch.Generator named for CUDA, not a CUDA API
    return name


def host_helpers(ctx: Context) -> HostHelpers:
    """The file's answers about its project's functions and classes (migrate._host), once per file."""
    helpers = ctx.scratch.get("host-helpers")
    if helpers is None:
        helpers = ctx.scratch["host-helpers"] = HostHelpers(
            ctx.source_text, getattr(ctx, "path", None), cuda_only_module
        )
    return helpers  # type: ignore[return-value]


def _portable(ctx: Context, name: str) -> bool:
    """``name`` is a portable function of this file or of a project file it imports (migrate._host)."""
    return host_helpers(ctx).is_host(name)


def _torch_objects(ctx: Context) -> frozenset[str]:
    """Names (``rng_cuda`` of ``self.rng_cuda = th.Generator(dev())``, also a list of them) that the module binds
    to what a torch call returns: torch objects, whatever their name says (once per file)."""
    found = ctx.scratch.get("torch-objects")
    if found is None:
        names: set[str] = set()
        module = getattr(ctx, "module", None)
        todo: list[cst.CSTNode] = [module] if module is not None else []
        while todo:
            n = todo.pop()
            if isinstance(n, cst.Assign) and _CUDA_WORD.search(full_name(n.targets[0].target)):
                value = n.value.elt if isinstance(n.value, (cst.ListComp, cst.GeneratorExp)) else n.value
                q = ctx.qname(value.func) if isinstance(value, cst.Call) else None
                if q is not None and q.startswith("torch.") and not q.startswith("torch.cuda."):
                    for t in n.targets:
                        last = full_name(t.target).rsplit(".", 1)[-1]
                        if last:
                            names.add(last)
            todo.extend(child_nodes(n))
        found = ctx.scratch["torch-objects"] = frozenset(names)
    return found  # type: ignore[return-value]


_STREAMS = frozenset({"torch.cuda.current_stream", "torch.cuda.default_stream"})
_STREAM_NAMES = frozenset(q.rsplit(".", 1)[1] for q in _STREAMS)
#: Methods of torch's streams, events and tensors that take a stream.
_STREAM_METHODS = frozenset({"wait_stream", "wait_event", "record_stream", "record_event", "record"})


def _stream_handles_read(ctx: Context, values: list[cst.BaseExpression]) -> None:
    """``torch.cuda.current_stream().cuda_stream`` (CosyVoice's TensorRT ``execute_async_v3``): the raw CUDA handle of
    the stream, which a TPU stream has not (torch.Stream has no ``cuda_stream``): the stream stays CUDA's."""
    for v in values:
        if (
            type(v) is cst.Attribute
            and v.attr.value == "cuda_stream"
            and type(v.value) is cst.Call
            and type(v.value.func) is cst.Attribute
            and v.value.func.attr.value in _STREAM_NAMES
            and ctx.qname(v.value.func) in _STREAMS
        ):
            ctx.scratch.setdefault("cuda-streams-handed", {})[id(v.value)] = ".cuda_stream"  # type: ignore[index]


def _streams_handed_on(ctx: Context, call: cst.Call) -> None:
    """``group.broadcast(t, src=0, stream=torch.cuda.current_stream())`` where ``group`` is no torch object
    (OpenRLHF's and torchtune's vLLM PyNcclCommunicator): the callee reads the stream's CUDA handle, so the
    stream stays CUDA's (the call's qualified name is unknown, or a third-party library's)."""
    _stream_handles_read(ctx, [a.value for a in call.args])
    streams = [
        a.value
        for a in call.args
        if type(a.value) is cst.Call
        and type(a.value.func) is cst.Attribute
        and a.value.func.attr.value in _STREAM_NAMES
        and ctx.qname(a.value.func) in _STREAMS
    ]
    if not streams:
        return  # (most calls: no stream argument, no look-up of the callee)
    callee = ctx.qname(call.func)
    if callee is not None and (callee.split(".")[0].startswith("torch") or not third_party(callee, ctx.path)):
        return
    if callee is None and type(call.func) is not cst.Attribute:
        return  # (a function of this file: its own code is migrated with it)
    if type(call.func) is cst.Attribute and call.func.attr.value in _STREAM_METHODS:
        return  # `s.wait_stream(torch.cuda.current_stream())`, `t.record_stream(...)`: torch's own objects
    for v in streams:
        ctx.scratch.setdefault("cuda-streams-handed", {})[id(v)] = code(call.func)[:40]  # type: ignore[index]


@register
class CudaToAccelerator(Rule):
    code = "TPU201"
    name = "cuda-to-accelerator"
    family = "cuda_api"
    summary = (
        "Rewrite torch.cuda.is_available/device_count/synchronize/current_device/current_stream/... to "
        "torch.accelerator (arguments re-bound to its signature); delete torch.cuda.set_device(i)."
    )
    rationale = (
        "torch.accelerator is the device-agnostic API (PyTorch >= 2.6) that pytorch/examples moved to; "
        "TorchTPU's torch.tpu versions of these raise on torch >= 2.11. Its signatures differ "
        "(synchronize(device_index=...), current_stream(device, /)), so arguments are re-bound, never "
        "copied. is_available() is true for any accelerator. TorchTPU binds one device per process and "
        "set_device_index raises for another ordinal, so `torch.cuda.set_device(local_rank)` is deleted."
    )
    before = (
        "import torch\n\ntorch.cuda.set_device(local_rank)\nif torch.cuda.is_available():\n"
        "    torch.cuda.synchronize(device=d)\n"
    )
    after = "import torch\n\nif torch.accelerator.is_available():\n    torch.accelerator.synchronize(device_index=d)\n"
    refs = frozenset(f"torch.cuda.{k}" for k in _ACCELERATOR)
    calls = refs
    statements = frozenset({"torch.cuda.set_device"})
    emits = tuple(f"torch.accelerator.{v[1]}" for v in _ACCELERATOR.values())

    node_types = (
        cst.Module,
        cst.If,
        cst.IfExp,
        cst.Call,
        cst.Assert,
        cst.FunctionDef,
        cst.ClassDef,
        cst.Assign,
    )

    def visit_node(self, ctx: Context, node: cst.CSTNode) -> None:
        """``if torch.cuda.is_available() and not check_cuda_fp8_capability():`` guards CUDA-only code, and
        ``@skipUnless(torch.cuda.is_available(), "needs CUDA")`` skips a test that needs CUDA: made true on TPU they
        would run that code there. Such a guard is kept (and flagged), not rewritten."""
        if type(node) is cst.Module:
            if mentions(ctx, "pytestmark"):
                _before_module_gate(ctx, node)  # type: ignore[arg-type]
            return
        if type(node) is cst.Assign:
            _stream_handles_read(ctx, [node.value])  # type: ignore[attr-defined]
            _module_gate(ctx, node, self.code)  # type: ignore[arg-type]
            _ordinal_as_data_index(ctx, node, self.code)  # type: ignore[arg-type]
            return
        if type(node) is cst.Call and node.args:
            _streams_handed_on(ctx, node)
            _partial_keywords(ctx, node)  # type: ignore[arg-type]
            if (target := _patched_cuda_api(ctx, node)) is not None:  # type: ignore[arg-type]
                ctx.scratch.setdefault("patched-cuda-apis", {})[id(node)] = target  # type: ignore[index]
                ctx.skip_inside(node)  # (its `torch.cuda` is the patch's object, not a use to flag)
        if type(node) is cst.FunctionDef or type(node) is cst.ClassDef:
            gate = next((d for d in node.decorators if cuda_test_gate(ctx, d.decorator)), None)
            if gate is not None:  # a test that runs only with CUDA stays CUDA's test, whole
                ctx.flag(
                    node,
                    f"`@{_one_line(code(gate.decorator))}` runs this test only where CUDA is: kept as CUDA code; "
                    "add a TPU variant by hand",
                    code=self.code,
                )
                for part in (*node.decorators, node.body):  # (its parametrize values are CUDA's too)
                    ctx.skip_inside(part)
            elif type(node) is cst.FunctionDef and (why := _kept_whole(node)) is not None:
                ctx.flag(node, why, code=self.code)
                for part in (*node.decorators, node.params, node.body):
                    ctx.skip_inside(part)
            return
        if type(node) is cst.Call:
            for a in node.args:
                if a.keyword is not None and a.keyword.value in _CUDA_GPU_COUNTS:
                    # flash.Trainer(gpus=torch.cuda.device_count()) (Lightning 1.x; Ray's num_gpus=): a count of
                    # CUDA GPUs for the framework; renamed, a TPU host asks for GPUs it does not have and raises
                    guards = [c for c in _calls_in(a.value) if ctx.qname(c.func) in _GUARDS]
                    if guards:
                        self._keep(
                            ctx,
                            guards,
                            f"{_GPU_COUNT} (`{a.keyword.value}=`): 0 on a TPU host, where the framework runs on the "
                            "CPU (renamed, Lightning would ask for GPUs the host has not and raise); give the "
                            "framework its TPU setting by hand",
                        )
            f = node.func
            last = f.attr.value if type(f) is cst.Attribute else f.value if type(f) is cst.Name else ""
            if last == "compile" and (backend := arg(node, 99, "backend")) is not None:
                # fish-speech: `backend="inductor" if torch.cuda.is_available() else "aot_eager"`: made true on TPU
                # it asks for inductor, which TorchTPU's compile refuses for TPU inputs; kept, a TPU host compiles
                # with aot_eager as the original did there
                chosen = {string_body(s) for s in literals(backend.value)}
                # (and the twins in its other arguments: fish-speech's `mode="default" if torch.cuda...`)
                guards = [c for a in node.args for c in _calls_in(a.value) if ctx.qname(c.func) in _GUARDS]
                if "inductor" in chosen and guards and ctx.qname(f) == "torch.compile":
                    self._keep(
                        ctx,
                        guards,
                        "it picks torch.compile's backend 'inductor', which TorchTPU's compile refuses for TPU "
                        "inputs (with no backend it picks 'tpu' for them and inductor elsewhere)",
                    )
            if last == "load" and ctx.qname(f) == "torch.load":
                where = arg(node, 1, "map_location")
                guards = (
                    [c for c in _deciding_calls(where.value) if ctx.qname(c.func) in _GUARDS] if where else []
                )
                if guards:  # map_location='cpu' if not torch.cuda.is_available() else None
                    self._keep(
                        ctx,
                        guards,
                        "it picks torch.load's map_location: made true on TPU, its None would load a CUDA-saved "
                        "checkpoint onto CUDA",
                    )
                return
            if last == "param" and (gate := next((m for m in _marks(node) if cuda_test_gate(ctx, m)), None)):
                ctx.flag(
                    node,
                    f"this test case is marked `{code(gate)}` (it runs only where CUDA is): kept as "
                    "CUDA's case; add a TPU one by hand",
                    code=self.code,
                )
                ctx.skip_inside(node)
                return
            if last in _SKIPS:
                guards = [c for a in node.args for c in _calls_in(a.value) if ctx.qname(c.func) in _GUARDS]
                reason = next(
                    (
                        b
                        for a in node.args
                        for lit in literals(a.value)
                        if (b := string_body(lit)) and NEEDS_CUDA.search(b)
                    ),
                    None,
                )
                if guards and reason:
                    self._keep(ctx, guards, f"a skip whose reason needs CUDA: {reason!r}")
            return
        if type(node) is cst.Assert:  # assert torch.cuda.is_available(), "CUDA required for APEX optimizers"
            if (local := _per_host_comparison(ctx, node.test)) is not None and _LOCAL_RANK.search(local[1]):
                # `assert torch.cuda.device_count() > LOCAL_RANK, 'insufficient CUDA devices'` (the YOLO trainers'
                # DDP setup): a GPU for this process's index on the host. TorchTPU binds one chip per process (the
                # launcher picks it), so there is nothing to check; kept, it fails for every rank on TPU
                ctx.scratch.setdefault("cuda-rank-asserts", set()).add(id(node))  # type: ignore[union-attr]
                ctx.skip_inside(node)
                return
            if local is not None:  # device_count() > LOCAL_WORLD_SIZE
                self._keep(
                    ctx,
                    local[0],
                    f"{PER_HOST} (compared with `{local[1]}`, a count or index of processes per host)",
                )
                return
            msg = string_body(node.msg) if node.msg is not None else None
            guards = [c for c in _calls_in(node.test) if ctx.qname(c.func) in _GUARDS]
            if guards and msg and NEEDS_CUDA.search(msg) and _CUDA_ONLY_PART.search(msg):
                self._keep(ctx, guards, f"an assertion that CUDA is there: {msg!r}")
            # (one that asks only for a GPU, "Training currently requires at least one GPU.", asks for an
            # accelerator: the flow layer renames it when the code after it was all migrated, else keeps it)
            return
        if type(node) is cst.IfExp or type(node) is cst.If:
            _note_ladder(ctx, node)
        if type(node) is cst.IfExp:
            return
        assert isinstance(node, cst.If)
        orelse = node.orelse.body if isinstance(node.orelse, cst.Else) else None
        lits = _cuda_literals(node.test)
        if lits and (
            _says_cuda_only(node.body)
            or _installs_nvidia(node.body)
            or (orelse is not None and _says_cuda_only(orelse))
        ):
            # `if model_device.type not in ('cuda', 'meta'): warn('... only works on CUDA ...')`: the test keeps
            # a CUDA-only feature off other devices; renamed, it would switch that feature on for 'tpu'
            case = _parametrized_case(ctx, node.test)
            for lit in lits:
                ctx.claim_string(
                    lit,
                    self.code,
                    "flagged",
                    f"'{string_body(lit)}' is the test's pytest case `{case}` and this skips it where CUDA is "
                    "not: kept with its case; add a 'tpu' case skipped unless "
                    "torch.accelerator.current_accelerator() is a TPU"
                    if case
                    else f"'{string_body(lit)}' is tested by code that works only on "
                    "CUDA (a branch says so, or installs NVIDIA packages): kept, so that code never runs on TPU; "
                    "give the TPU path its own branch",
                    value=None,
                )
        guards = [c for c in _calls_in(node.test) if ctx.qname(c.func) in _GUARDS]
        if not guards:
            return
        if (local := _per_host_comparison(ctx, node.test)) is not None:
            self._keep(
                ctx,
                local[0],
                f"{PER_HOST} (compared with `{local[1]}`, a count or index of processes per host)",
            )
            return
        cuda_only = next(
            (
                name
                for c in [*_calls_in(node.test), *_calls_in(node.body)]
                if (name := _cuda_only_call(ctx, c))
            ),
            None,
        )
        cuda_only = f"`{cuda_only}`" if cuda_only else None
        if cuda_only is None and (build := _CUDA_SOURCES_BUILD.search(code(node))) is not None:
            # torchdrug's load_extension: `if torch.cuda.is_available(): extra_cuda_cflags = ["-O3"] else: <drop
            # the .cu sources>`: made true on TPU, the JIT build compiles CUDA sources with nvcc and fails
            cuda_only = f"it chooses whether to build CUDA sources (`{build.group(0)}`)"
        if cuda_only is None and (knob := _sets_gpu_count(node.body)) is not None:
            # lightning-flash's Trainer: `if torch.cuda.is_available(): kwargs["gpus"] = -1` (all CUDA GPUs, for
            # Lightning 1.x): made true on TPU, Lightning asks for GPUs the host has not and raises
            cuda_only = f"it sets `{knob}`, {_GPU_COUNT} (Lightning raises for GPUs a host has not)"
        if cuda_only is None and _when_missing(node.test) and _raises_for_cuda(node.body):
            case = _parametrized_case(ctx, node.test)
            cuda_only = (
                f"the skip of the test's CUDA case (pytest's `{case}`; the case is kept with it)"
                if case
                else "a skip or error that says CUDA is needed"
            )
            if not case and node.orelse is None:
                _keep_what_follows(ctx, node)
        if cuda_only is None:
            cuda_only = _kept_twin_reads(ctx, node, guards)
        if cuda_only is not None:
            self._keep(ctx, guards, cuda_only)
            ctx.skip_inside(node.body)  # the guarded code stays CUDA's, untouched

    @staticmethod
    def _keep(ctx: Context, guards: list[cst.Call], why: str) -> None:
        keep = ctx.scratch.setdefault("cuda-guards", {})
        for c in guards:
            keep[id(c)] = why  # type: ignore[index]

    def ref(self, ctx: Context, orig, node, qname: str):
        if ctx.is_called(orig):
            return None  # the call hook re-binds the arguments too
        new = f"torch.accelerator.{_ACCELERATOR[qname.rsplit('.', 1)[1]][1]}"
        ctx.report(
            orig,
            f"`{qname}` -> `{new}` (as a value: check how it is called)",
            code=self.code,
            outcome="warned",
        )
        ctx.need_import("torch")
        return expr(new)

    def call(self, ctx: Context, orig, node, qname: str):
        last = qname.rsplit(".", 1)[1]
        if last == "set_device":
            ctx.flag(
                orig,
                "`torch.cuda.set_device(...)` in an expression: TorchTPU binds one device per process; "
                "remove it",
                code=self.code,
            )
            return None
        if id(orig) in ctx.scratch.get("cuda-answers", ()):  # type: ignore[operator]
            return None  # `if d.startswith("cuda"): return torch.cuda.is_available()` (see _literal._support_table)
        guarded = ctx.scratch.get("cuda-guards", {}).get(id(orig))  # type: ignore[union-attr]
        gate = next(
            (
                d.name.value
                for d in ctx.enclosing_definitions()
                if _gate_helper(ctx, d.name.value) and _skips_tests(ctx, d)
            ),
            None,
        )
        if guarded is None and gate is not None and qname in _GUARDS:
            # the helper behind `@RunIf(min_gpus=1)` / `@requires_gpu`: each decorated test is kept as CUDA's
            # test (cuda_test_gate), so the helper's own CUDA test must stay too, or those tests run on TPU
            guarded = f"it is inside `{gate}`, a helper that gates tests on CUDA, whose tests stay CUDA's"
        if guarded is not None and guarded.startswith(_GPU_COUNT):  # a count for a framework, not a test
            ctx.flag(orig, f"`{qname}()` kept as CUDA's: {guarded}", code=self.code)
            return None
        if guarded is not None and guarded.startswith(PER_HOST):  # a count, not a test
            ctx.flag(
                orig,
                f"`{qname}()` kept as CUDA's: {guarded} (0 without CUDA: dividing by it raises, spawning that many processes starts none)",
                code=self.code,
            )
            return None
        if guarded is not None:
            effect = (
                "so a TPU host takes its path for a machine without CUDA"
                if _runs_without_cuda(ctx, orig)
                else "so the code it controls never runs on TPU; give the TPU path its own branch"
            )
            ctx.flag(orig, f"`{qname}()` kept as CUDA's check ({guarded}), {effect}", code=self.code)
            return None
        handed = ctx.scratch.get("cuda-streams-handed", {}).get(id(orig))  # type: ignore[union-attr]
        if handed == ".cuda_stream":
            ctx.flag(
                orig,
                f"`{qname}().cuda_stream` is the stream's raw CUDA handle (for TensorRT, CuPy, a CUDA kernel), "
                "which a TPU stream has not: kept as CUDA code",
                code=self.code,
            )
            return None
        if handed is not None:
            ctx.flag(
                orig,
                f"`{qname}()` is handed to `{handed}`, not torch's code: a library that takes a stream "
                "reads its CUDA handle (`.cuda_stream`, vLLM's PyNccl, CuPy), which a TPU stream has not; kept",
                code=self.code,
            )
            return None
        if last == "is_available" and id(orig) in ctx.scratch.get("cuda-ladders", ()):  # type: ignore[operator]
            # `if cuda ... elif mps ... else cpu`: torch.accelerator.is_available() is also true on a Mac (or an XPU
            # host), which would then take the TPU branch and never reach its own; ask for a TPU by name
            ctx.report(
                orig, f"`{qname}()` -> a test for a TPU (the ladder also picks mps/xpu)", code=self.code
            )
            ctx.need_import("torch")
            return expr(_helpers.TPU_PRESENT)
        old, name, new_sig, rename = _ACCELERATOR[last]
        return _to_accelerator(ctx, orig, node, qname, name, (old, new_sig, rename), self.code)

    def leave_node(self, ctx, orig, node):
        renames = ctx.scratch.get("partial-renames", {}).get(id(orig)) if type(orig) is cst.Call else None  # type: ignore[union-attr]
        if renames:
            # `partial(torch.cuda.synchronize, device=d)` (torchrl's env sync): the reference is renamed by ref();
            # its keywords follow torch.accelerator's signature, which calls the device device_index
            return node.with_changes(
                args=[
                    a.with_changes(keyword=cst.Name(renames[a.keyword.value]))
                    if a.keyword is not None and a.keyword.value in renames
                    else a
                    for a in node.args
                ]
            )
        if type(orig) is cst.Call and id(orig) in ctx.scratch.get("patched-cuda-apis", {}):  # type: ignore[operator]
            old, new = ctx.scratch["patched-cuda-apis"][id(orig)]  # type: ignore[index]
            ctx.report(
                orig,
                f"patched `torch.cuda.{old}` -> `torch.accelerator.{new}` (what the migrated code calls)",
                code=self.code,
                outcome="warned",
            )
            return _repatched(node, old, new)
        if type(orig) is cst.Assert and id(orig) in ctx.scratch.get("cuda-rank-asserts", ()):  # type: ignore[operator]
            ctx.report(
                orig,
                f"removed `assert {code(orig.test)[:60]}`: TorchTPU binds one chip per process (the launcher "
                "picks it), so no device count per host is checked",
                code=self.code,
                outcome="warned",
            )
            return cst.RemovalSentinel.REMOVE
        return None

    def statement(self, ctx: Context, orig, node, qname, call, target):
        if call is None or target is not None:
            return None
        chosen = call.args[0].value if call.args else None
        if type(chosen) is cst.Subscript and _USER_DEVICE_LIST.search(code(chosen.value)):
            # LLaMA2-Accessory's model workers: `torch.cuda.set_device(gpu_ids[rank - 1])` in processes started with
            # subprocess.Popen: removed, every worker opened the one unbound TPU and the user's list chose nothing
            ctx.flag(
                call,
                f"`torch.cuda.set_device({code(chosen)[:40]})` picks this process's GPU from the user's list: kept; "
                "TorchTPU binds one chip per process before it starts (TPU_VISIBLE_CHIPS, or "
                "torch.tpu.distributed.set_tpu_launch_env for the workers you start): bind each worker there and "
                "drop this call",
                code=self.code,
            )
            return None
        ctx.report(
            orig,
            "removed `torch.cuda.set_device(...)`: TorchTPU binds one device per process (the "
            "launcher picks it; set_device_index raises for another ordinal)",
            code=self.code,
            outcome="warned",
        )
        return cst.RemovalSentinel.REMOVE


@register
class EmptyCache(Rule):
    code = "TPU202"
    name = "cuda-empty-cache"
    family = "cuda_api"
    summary = "Delete `torch.cuda.empty_cache()` statements."
    rationale = "TorchTPU has no caching-allocator API; the call has nothing to release."
    before = "import torch\n\ntorch.cuda.empty_cache()\nx = 1\n"
    after = "import torch\n\nx = 1\n"
    statements = frozenset({"torch.cuda.empty_cache"})

    def statement(self, ctx, orig, node, qname, call, target):
        if target is not None:
            return None
        ctx.report(orig, "removed `torch.cuda.empty_cache()` (no TPU cache API)", code=self.code)
        return cst.RemovalSentinel.REMOVE

    def call(self, ctx, orig, node, qname):
        ctx.report(
            orig, "`torch.cuda.empty_cache()` -> `None` (no TPU cache API)", code=self.code, outcome="warned"
        )
        return expr("None")


@register
class CudaManualSeed(Rule):
    code = "TPU203"
    name = "cuda-manual-seed"
    family = "cuda_api"
    outcome = "warned"
    summary = (
        "Rewrite torch.cuda.manual_seed(_all)(s) to _tpu_random().manual_seed(_all)(s) (torch.tpu's where TorchTPU "
        "is loaded), or to torch.manual_seed(s) where the CPU was seeded with that same s just before."
    )
    rationale = (
        "torch.cuda.manual_seed seeds the GPU only; torch.manual_seed would also reseed the CPU generator, "
        "which changes every later CPU draw when the value differs (Rainbow seeds the GPU with a second "
        "np.random.randint). torch.tpu.manual_seed(_all) is the contract's mapping (TorchTPU 0.2.0: a no-op "
        "without a TPU, like CUDA's without a GPU); torch.tpu exists only where TorchTPU is loaded, so a helper "
        "picks it there and CUDA's call (a no-op without a GPU) elsewhere. Where torch.manual_seed(s) with the same call-free s runs "
        "just before (only other seeding between), one torch.manual_seed(s) seeds both and the repeated line "
        "goes; a CPU seed further up, with random draws between, is not reset again."
    )
    before = "import torch\n\ntorch.cuda.manual_seed_all(seed + rank)\n"
    after = (
        "import torch\n"
        "\n"
        "\n"
        "def _tpu_random():\n"
        '    """Added by tpu-migrate: the module whose manual_seed(_all) seeds the accelerator only, as CUDA\'s did:\n'
        "    torch.tpu where TorchTPU is loaded; elsewhere torch.cuda as written, whose seeding is a no-op without a GPU\n"
        '    (torch.tpu exists only where TorchTPU is loaded: naming it there would raise)."""\n'
        '    return getattr(torch, "tpu", None) or torch.cuda\n'
        "\n"
        "\n"
        "_tpu_random().manual_seed_all(seed + rank)\n"
    )
    calls = frozenset({"torch.cuda.manual_seed", "torch.cuda.manual_seed_all"})
    emits = ("torch.manual_seed", "torch.tpu", "torch.cuda")

    def call(self, ctx, orig, node, qname):
        seed = arg(node, 0, "seed")
        if seed is not None and _seeds_cpu_alike(ctx, seed.value):
            ctx.report(
                orig,
                f"`{qname}({code(seed.value)})` -> `torch.manual_seed`: the file seeds the CPU with the same "
                "value, and torch.manual_seed seeds every device",
                code=self.code,
                outcome="warned",
            )
            ctx.need_import("torch")
            return node.with_changes(func=expr("torch.manual_seed"))
        new = f"{_helpers.DEVICE_RANDOM}().{qname.rsplit('.', 1)[1]}"
        ctx.report(
            orig,
            f"`{qname}` -> `{new}` (torch.tpu's: seeds the TPU only, as CUDA's seeded the GPU only; "
            "torch.manual_seed would reseed the CPU generator too; CUDA's as written where TorchTPU is not loaded)",
            code=self.code,
            outcome="warned",
        )
        ctx.need_helper(_helpers.DEVICE_RANDOM)
        return node.with_changes(func=expr(new))


def _parametrized_case(ctx: Context, test: cst.BaseExpression) -> str | None:
    """The name compared in ``test`` (``device == "cuda"``) when the enclosing test function takes it from its
    own ``@pytest.mark.parametrize("device", [...])``: the string is one of pytest's cases, kept with its skip."""
    names, todo = set(), [test]
    while todo:
        n = todo.pop()
        if (  # `device == "cuda"` (not `config_cls == LoKrConfig and device not in [...]`)
            type(n) is cst.Comparison
            and type(n.left) is cst.Name
            and len(n.comparisons) == 1
            and type(n.comparisons[0].operator) in (cst.Equal, cst.NotEqual)
            and (string_body(n.comparisons[0].comparator) or "").startswith("cuda")
        ):
            names.add(n.left.value)
        todo.extend(child_nodes(n))
    for fn in reversed(ctx.enclosing_definitions()):
        if type(fn) is not cst.FunctionDef:
            continue
        for d in fn.decorators:
            call = d.decorator
            if type(call) is cst.Call and ctx.qname(call.func) == "pytest.mark.parametrize" and call.args:
                first = call.args[0].value
                declared = string_body(first) if type(first) is cst.SimpleString else None
                for name in sorted(names):
                    if declared and name in [p.strip() for p in declared.split(",")]:
                        return name
        return None
    return None


def _note_ladder(ctx: Context, node: cst.If | cst.IfExp) -> None:
    """``if torch.cuda.is_available(): ... elif torch.backends.mps.is_available(): ...`` (and the same as a
    conditional expression, or an ``else:`` holding the next ``if``, or a last branch that is itself another
    accelerator: ``"cuda" if torch.cuda.is_available() else "mps"``): the CUDA test's later branches pick another
    accelerator, so its rewrite must not be true for them (lerobot's auto-detected devices; lightly's examples)."""
    tests, rest = [], node.orelse
    while rest is not None:
        if isinstance(rest, (cst.If, cst.IfExp)):
            tests.append(rest.test)
            rest = rest.orelse
        elif (
            isinstance(rest, cst.Else) and len(rest.body.body) == 1 and isinstance(rest.body.body[0], cst.If)
        ):
            rest = rest.body.body[0]
        else:
            break
    if isinstance(rest, cst.Else):  # the last branch's own body: `else: device = "mps"`
        tests.append(rest.body)
    elif isinstance(rest, cst.BaseExpression):  # `"cuda" if torch.cuda.is_available() else "mps"`
        tests.append(rest)
    mine = [c for c in _calls_in(node.test) if ctx.qname(c.func) == "torch.cuda.is_available"]
    if not mine or (
        not any(_helpers.OTHER_ACCELERATOR.search(code(t)) for t in tests)
        and not _other_accelerator_next(ctx)
    ):
        return
    ladders = ctx.scratch.setdefault("cuda-ladders", set())
    for c in mine:
        ladders.add(id(c))  # type: ignore[union-attr]


#: A list of device ids the user chose (``gpu_ids``, ``args.devices``, ``device_list``).
_USER_DEVICE_LIST = re.compile(r"(?i)(?:gpu|device|cuda)s?_?(?:ids|list)\b|\bdevices\b|\bgpus\b")
#: A test for another accelerator's presence (``torch.backends.mps.is_available()``, ``torch.xpu.is_available()``).
_OTHER_PRESENT = re.compile(r"\b(?:backends\.)?(?:mps|xpu|npu|hpu|mlu|musa)\.is_available\(")


def _other_accelerator_next(ctx: Context) -> bool:
    """The function around the check also tests for another accelerator (tortoise's HiFi-GAN decoder: ``device =
    torch.device('cuda' if torch.cuda.is_available() else 'cpu')`` then ``if torch.backends.mps.is_available():
    device = torch.device('mps')``): a ladder written as two statements."""
    if not _OTHER_PRESENT.search(ctx.source_text):
        return False
    fn = next((d for d in reversed(ctx.enclosing_definitions()) if type(d) is cst.FunctionDef), None)
    if fn is None:
        return False
    seen = ctx.scratch.setdefault("other-accelerator-functions", {})
    if id(fn) not in seen:  # type: ignore[operator]
        seen[id(fn)] = _OTHER_PRESENT.search(code(fn)) is not None  # type: ignore[index]
    return seen[id(fn)]  # type: ignore[index,return-value]


def _to_accelerator(
    ctx: Context,
    orig: cst.Call,
    node: cst.Call,
    qname: str,
    name: str,
    signatures: tuple[str, str, dict[str, str]],
    rule_code: str,
) -> cst.Call | None:
    """``torch.cuda.<f>(...)`` as ``torch.accelerator.<name>(...)``, its arguments re-bound from the old signature
    to the new one (``signatures``: old, new, renamed parameters), or flagged where they do not map."""
    old, new_sig, rename = signatures
    args = rebind(node, old, new_sig, rename)
    new = f"torch.accelerator.{name}"
    if args is None:
        ctx.flag(
            orig,
            f"`{qname}(...)`: its arguments do not map onto `{new}({new_sig})`; port by hand",
            code=rule_code,
        )
        return None
    ctx.report(orig, f"`{qname}` -> `{new}`", code=rule_code)
    ctx.need_import("torch")
    func = expr(new)
    return node.with_changes(func=func) if same_args(node, args) else node.with_changes(func=func, args=args)


def _seeds_cpu_alike(ctx: Context, seed: cst.BaseExpression) -> bool:
    """``torch.manual_seed(<the same seed>)`` runs just before (only other seeding between, climbing out of the
    ``if torch.cuda.is_available():`` around the call) and the seed has no call in it (a second
    ``np.random.randint(...)`` is another value). A CPU seed further up, with random draws between, is not
    alike: one torch.manual_seed there would reset the CPU stream mid-program (Lightning's UvA notebook)."""
    if any(isinstance(n, cst.Call) for n in _calls_in(seed)):
        return False
    same = re.compile(rf"(?:torch|th)\.manual_seed\(\s*{re.escape(code(seed))}\s*\)")
    for stmt in _preceding(ctx):
        text = code(stmt).strip()
        if same.fullmatch(text):
            return True
        if not _SEEDING.fullmatch(text):
            return False
    return False


#: A statement that only seeds (random.seed(s), np.random.seed(s), torch.cuda.manual_seed_all(s), ...).
_SEEDING = re.compile(r"[\w.]*(?:seed|seed_all)\([^()]*\)|[\w.]*deterministic\w*\s*=.*|[\w.]*benchmark\s*=.*")


def _preceding(ctx: Context) -> Iterator[cst.CSTNode]:
    """The simple statements before the current one, nearest first, in its block and then before the ``if``
    blocks around it (never out of a def, class or loop)."""
    stack = ctx.statements()
    for depth in range(len(stack) - 1, -1, -1):
        stmt = stack[depth]
        parent = stack[depth - 1] if depth else getattr(ctx, "module", None)
        body = _block_holding(parent, stmt)
        if body is None:
            return
        i = next(k for k, s in enumerate(body) if s is stmt)
        for before in reversed(body[:i]):
            if not isinstance(before, cst.SimpleStatementLine):
                return
            yield from (cst.SimpleStatementLine(body=[small]) for small in reversed(before.body))
        if not isinstance(parent, cst.If):
            return


def _block_holding(parent: cst.CSTNode | None, stmt: cst.CSTNode) -> Sequence[cst.CSTNode] | None:
    """The statement list of ``parent`` (module, or a compound statement's body/else) that holds ``stmt``."""
    if parent is None or isinstance(parent, cst.SimpleStatementLine):
        return None
    blocks = [getattr(parent, "body", None)]
    orelse = getattr(parent, "orelse", None)
    if orelse is not None:
        blocks.append(orelse.body if isinstance(orelse, cst.Else) else None)
    for block in blocks:
        inner = getattr(block, "body", block)
        if isinstance(inner, (list, tuple)) and any(s is stmt for s in inner):
            return inner
    return None


#: The rest: no counterpart the released wheel is known to back (flagged), but memory_summary (a helper).
_MEMORY_FLAGGED = (
    "mem_get_info",
    "memory_summary",
    "memory_snapshot",
    "caching_allocator_alloc",
    "set_per_process_memory_fraction",
)
_MEMORY = (*_MEMORY_ACCELERATOR, *_MEMORY_FLAGGED)


@register
class CudaMemoryStats(Rule):
    code = "TPU204"
    name = "cuda-memory-stats"
    family = "cuda_api"
    outcome = "rewritten"
    summary = (
        "Rewrite torch.cuda memory statistics (memory_allocated, max_memory_allocated, memory_reserved, "
        "reset_peak_memory_stats, memory_stats ...) to torch.accelerator and memory_summary to "
        "_tpu_memory_summary (a listing of torch.accelerator.memory_stats on TPU); flag mem_get_info, "
        "memory_snapshot and the allocator knobs."
    )
    rationale = (
        "The released TorchTPU 0.2.0 answers memory statistics through torch.accelerator from its device "
        "allocator (torch.tpu has no memory_* names); left as torch.cuda they return 0 or raise on a TPU host. "
        "torch.accelerator takes the device positionally (device_index, /). Where no accelerator is present "
        "torch.accelerator raises (CUDA's returned 0 on a CPU-only machine): a query outside a device check goes "
        "through _tpu_memory_stat, which answers as CUDA's did there."
    )
    before = (
        "import torch\n\nif torch.cuda.is_available():\n    print(torch.cuda.max_memory_allocated(device=0))\n"
        "print(torch.cuda.mem_get_info())\n"
    )
    after = (
        "import torch\n\nif torch.cuda.is_available():\n    print(torch.accelerator.max_memory_allocated(0))\n"
        "# TODO(tpu-migrate TPU204): `torch.cuda.mem_get_info` has no TorchTPU equivalent (its statistics are "
        "torch.accelerator's: memory_allocated, max_memory_allocated, memory_reserved, memory_stats); remove it or "
        "guard it by device type\nprint(torch.cuda.mem_get_info())\n"
    )
    refs = frozenset(f"torch.cuda.{n}" for n in _MEMORY)
    calls = frozenset((*(f"torch.cuda.{n}" for n in _MEMORY_ACCELERATOR), "torch.cuda.memory_summary"))
    emits = tuple(sorted({f"torch.accelerator.{n}" for n in _MEMORY_ACCELERATOR.values()}))

    def ref(self, ctx, orig, node, qname):
        if ctx.is_called(orig) and qname in self.calls:
            return None  # (the call is rewritten)
        ctx.flag(
            orig,
            f"`{qname}` has no TorchTPU equivalent (its statistics are torch.accelerator's: memory_allocated, "
            "max_memory_allocated, memory_reserved, memory_stats); remove it or guard it by device type",
            code=self.code,
        )
        return None

    def call(self, ctx, orig, node, qname):
        if qname == "torch.cuda.memory_summary":
            # (pytorch-cifar100's `print(torch.cuda.memory_summary())` in the blocks its --gpu flag sends to
            # 'tpu': flagged only, the run raised there after its first evaluation)
            ctx.need_helper(_helpers.MEMORY_SUMMARY)
            ctx.report(
                orig,
                f"`{qname}` -> `{_helpers.MEMORY_SUMMARY}` (torch.accelerator.memory_stats listed on TPU; CUDA's table "
                "elsewhere)",
                code=self.code,
                outcome="rewritten",
            )
            return node.with_changes(func=cst.Name(_helpers.MEMORY_SUMMARY))
        name = _MEMORY_ACCELERATOR[qname.rsplit(".", 1)[1]]
        signatures = ("device=None", "device_index=None, /", {"device": "device_index"})
        new = _to_accelerator(ctx, orig, node, qname, name, signatures, self.code)
        if (
            name in _MEMORY_QUERIES
            and type(new) is cst.Call
            and not _device_guarded(ctx)
            and f"{qname}'" not in ctx.source_text  # (a test patches it by name: mmengine's mocks, TPU218)
            and f'{qname}"' not in ctx.source_text
        ):
            # icefall's f5-tts `--oom-check`: torch.cuda's query answered 0 on a CPU-only host, torch.accelerator's
            # raises there; the helper answers as CUDA's did where there is no accelerator
            ctx.need_helper(_helpers.MEMORY_STAT)
            return cst.Call(
                func=cst.Name(_helpers.MEMORY_STAT), args=[cst.Arg(cst.SimpleString(f'"{name}"')), *new.args]
            )
        return new


def _capability_names(ctx: Context) -> frozenset[str]:
    """Names the file assigns ``torch.cuda.get_device_capability(...)`` to (in any scope)."""
    if not mentions(ctx, "get_device_capability"):
        return frozenset()
    found: set[str] = set()
    todo: list[cst.CSTNode] = [getattr(ctx, "module", None) or cst.Module([])]
    while todo:
        n = todo.pop()
        if (
            type(n) is cst.Assign
            and type(n.value) is cst.Call  # type: ignore[attr-defined]
            and ctx.qname(n.value.func) == "torch.cuda.get_device_capability"  # type: ignore[attr-defined]
        ):
            found |= {t.target.value for t in n.targets if type(t.target) is cst.Name}  # type: ignore[attr-defined]
        todo.extend(child_nodes(n))
    return frozenset(found)


#: What torch.tpu.get_device_properties(...) is known to carry (TorchTPU 0.2.0).
_TPU_PROPERTIES = frozenset({"name", "total_memory"})
_PROPS = "torch.cuda.get_device_properties"


@register
class CudaDeviceInfo(Rule):
    code = "TPU205"
    name = "cuda-device-info"
    family = "cuda_api"
    outcome = "warned"
    summary = (
        "Rewrite torch.cuda.get_device_name/get_device_properties to torch.tpu; flag capability checks "
        "(.major, .minor, .multi_processor_count ..., get_device_capability, torch.version.cuda)."
    )
    rationale = (
        "torch.tpu.get_device_name/get_device_properties exist in TorchTPU 0.2.0, but the properties "
        "carry name and total_memory only: a compute-capability gate such as `.major >= 8` for bf16/tf32 "
        "has no TPU meaning and would raise AttributeError, so it is flagged and left as it is."
    )
    before = (
        "import torch\n\nname = torch.cuda.get_device_name(0)\n"
        "sm = torch.cuda.get_device_properties(0).major\n"
    )
    after = (
        "import torch\n\nname = torch.tpu.get_device_name(0)\n# TODO(tpu-migrate TPU205): "
        "`torch.cuda.get_device_properties(...).major` is a CUDA capability check (TPU properties have "
        "name and total_memory); decide what the TPU path needs\nsm = torch.cuda.get_device_properties(0).major\n"
    )
    refs = frozenset(
        {
            "torch.cuda.get_device_name",
            _PROPS,
            "torch.cuda.get_device_capability",
            "torch.version.cuda",
            "torch.cuda.get_arch_list",
        }
    )
    emits = ("torch.tpu.get_device_name", "torch.tpu.get_device_properties")
    node_types = (cst.Attribute, cst.Assign, cst.Comparison)

    def visit_node(self, ctx, node):
        """Before the reference is left: decide whether the properties' uses all exist on TPU, and whether a
        device name is read as a GPU model name."""
        if type(node) is cst.Comparison:
            for part in (node.left, *(c.comparator for c in node.comparisons)):
                self._note_name_test(ctx, part, "compared")
            self._capability_gate(ctx, node)
            return
        call, attrs = None, []
        value = node.value
        func = value.func if type(value) is cst.Call else None
        last = (
            func.attr.value if type(func) is cst.Attribute else func.value if type(func) is cst.Name else None
        )
        if last == "get_device_name":
            if type(node) is cst.Attribute and node.attr.value in _STRING_TESTS:
                self._note_name_test(ctx, value, f"`.{node.attr.value}(...)`")
            elif type(node) is cst.Assign and len(node.targets) == 1:
                target = node.targets[0].target
                fn = next(
                    (d for d in reversed(ctx.enclosing_definitions()) if isinstance(d, cst.FunctionDef)), None
                )
                text = code(fn) if fn is not None and isinstance(target, cst.Name) else ctx.source_text
                if isinstance(target, (cst.Name, cst.Attribute)) and _tests_name(text, code(target)):
                    self._note_name_test(ctx, value, f"`{code(target)}` is compared")
            return
        if last != "get_device_properties":
            return  # (cheap test first: this runs for every attribute)
        if isinstance(node, cst.Attribute):
            call, attrs = value, [node.attr.value]
        elif len(node.targets) == 1:
            call = node.value
            target = node.targets[0].target
            if isinstance(target, (cst.Name, cst.Attribute)):
                name = code(target)
                # a local name is read in its function (another `p` elsewhere, `p.numel()` in a generator, is
                # not these properties); a module-level or attribute target anywhere in the file
                fn = next(
                    (d for d in reversed(ctx.enclosing_definitions()) if isinstance(d, cst.FunctionDef)), None
                )
                text = code(fn) if fn is not None and isinstance(target, cst.Name) else ctx.source_text
                attrs = re.findall(rf"(?<![\w.]){re.escape(name)}\.(\w+)", text)
        if call is None or ctx.qname(call.func) != _PROPS:
            return
        unknown = sorted(set(attrs) - _TPU_PROPERTIES)
        if unknown:
            ctx.scratch.setdefault(self.code, {})[id(call.func)] = unknown  # type: ignore[index]

    def _capability_gate(self, ctx: Context, node: cst.Comparison) -> None:
        """``if GPU_SCORE >= (8, 0):`` where ``GPU_SCORE = torch.cuda.get_device_capability()`` elsewhere in the
        file (pytorch-deep-learning's TF32 cell; the capability kept as CUDA's, so on a TPU host the name is CUDA's
        answer or unset): the gate has no TPU meaning, whatever its branches were rewritten to."""
        names = ctx.scratch.get("capability-names")
        if names is None:  # (once per file)
            names = ctx.scratch["capability-names"] = _capability_names(ctx)
        for part in (node.left, *(c.comparator for c in node.comparisons)):
            if type(part) is cst.Name and part.value in names:  # type: ignore[operator]
                ctx.flag(
                    node,
                    f"`{part.value}` is CUDA's compute capability (`torch.cuda.get_device_capability()`, kept as "
                    "CUDA's): a TPU has none, so this test has no TPU meaning (and where that call is skipped the "
                    "name is unset); decide what the TPU path needs (bfloat16 and TF32-class matmuls are always "
                    "there: torch.set_float32_matmul_precision('high'))",
                    code=self.code,
                )
                return

    def _note_name_test(self, ctx: Context, value: cst.CSTNode, how: str) -> None:
        if type(value) is cst.Call and ctx.qname(value.func) == "torch.cuda.get_device_name":
            ctx.scratch.setdefault("device-name-tests", {})[id(value.func)] = how  # type: ignore[index]

    def ref(self, ctx, orig, node, qname):
        last = qname.rsplit(".", 1)[1]
        tested = ctx.scratch.get("device-name-tests", {}).get(id(orig))  # type: ignore[union-attr]
        if tested is not None:
            ctx.flag(
                orig,
                f"`{qname}()` is read as a GPU model name ({tested}: H100, A100, ZLUDA ...): a TPU's name matches "
                "none of them; kept as CUDA's: give the TPU its own entry (torch.tpu.get_device_name() names it)",
                code=self.code,
            )
            return None
        unknown = ctx.scratch.get(self.code, {}).get(id(orig))  # type: ignore[union-attr]
        if unknown:
            ctx.flag(
                orig,
                f"`{qname}(...).{unknown[0]}` is a CUDA capability check (TPU properties have name and "
                "total_memory); decide what the TPU path needs",
                code=self.code,
            )
            return None
        if last in ("get_device_name", "get_device_properties"):
            ctx.report(
                orig,
                f"`{qname}` -> `torch.tpu.{last}` (raises where no TPU is present)",
                code=self.code,
                outcome="warned",
            )
            ctx.need_import("torch")
            return expr(f"torch.tpu.{last}")
        ctx.flag(
            orig,
            f"`{qname}` is a CUDA capability/version check; decide what the TPU path needs",
            code=self.code,
        )
        return None


#: String methods that test a device name against known names.
_STRING_TESTS = frozenset(
    {"startswith", "endswith", "find", "__contains__"}
)  # (not formatting: .replace, .lower)


def _tests_name(text: str, name: str) -> bool:
    """``name`` (bound to a device name) is compared, searched or used as a key in ``text``."""
    n = re.escape(name)
    return (
        re.search(
            rf"(?<![\w.]){n}\s*(?:==|!=|\bin\b|\.(?:{'|'.join(_STRING_TESTS)})\b)|\bin\s+{n}(?![\w.])|\[\s*{n}\s*\]",
            text,
        )
        is not None
    )


#: transformers' bf16 probe (CUDA, XPU, MPS, NPU ...): a TPU is added beside it, never put in its place.
_TRANSFORMERS_BF16 = frozenset(
    f"transformers.{m}is_torch_bf16_gpu_available" for m in ("", "utils.", "utils.import_utils.")
)
#: A test that a CUDA device is there (what makes is_bf16_supported() after it mean "this GPU has bf16").
_AVAILABILITY = re.compile(r"cuda\.is_available\(|cuda\.device_count\(|is_torch_cuda_available\(")


def _reads_cuda_version(ctx: Context, node: cst.CSTNode) -> bool:
    """``torch.version.cuda`` read in ``node`` (outside nested scopes): CUDA's toolkit version, None elsewhere."""
    todo = [node]
    while todo:
        n = todo.pop()
        if type(n) is cst.Attribute and n.attr.value == "cuda" and ctx.qname(n) == "torch.version.cuda":
            return True
        if n is node or not isinstance(n, _OWN_SCOPE):
            todo.extend(child_nodes(n))
    return False


@register
class Bf16Supported(Rule):
    code = "TPU206"
    name = "cuda-is-bf16-supported"
    family = "cuda_api"
    summary = (
        "Rewrite torch.cuda.is_bf16_supported() to True after an availability check (folded), elsewhere to a "
        "test for a TPU."
    )
    rationale = (
        "Every TPU generation supports bfloat16; there is no torch.tpu.is_bf16_supported. After "
        '`torch.cuda.is_available() and` it meant "this GPU has bf16": True on a TPU, folded. Alone it also '
        "answered False where there was no CUDA (a CPU-only run kept float32): a test for a TPU keeps that."
    )
    requires = ("TPU201",)
    emits = ("torch.accelerator.current_accelerator",)
    before = (
        "import torch\n\nuse_bf16 = torch.cuda.is_available() and torch.cuda.is_bf16_supported()\n"
        'dtype = "bfloat16" if torch.cuda.is_bf16_supported() else "float16"\n'
    )
    after = (
        "import torch\n\nuse_bf16 = torch.accelerator.is_available()\n"
        f'dtype = "bfloat16" if {_helpers.TPU_PRESENT} else "float16"\n'
    )
    calls = frozenset({"torch.cuda.is_bf16_supported"}) | _TRANSFORMERS_BF16
    node_types = (cst.BooleanOperation, cst.IfExp)

    def call(self, ctx, orig, node, qname):
        if qname in _TRANSFORMERS_BF16:
            # LLaMA-Factory's `_is_bf16_available` beside its fp16 twin: transformers' probe also answers for
            # MPS/XPU/NPU (and Ampere CUDA): the TPU is added, the probe kept
            either = f"{_helpers.TPU_PRESENT} or {code(node)}"
            if either in ctx.source_text:
                return None  # (a second pass)
            ctx.report(orig, f"`{code(orig)}` -> `(<a test for a TPU> or {code(orig)})`", code=self.code)
            ctx.need_import("torch")
            return expr(f"({either})")
        if id(orig) in ctx.scratch.get("bf16-beside-kept", ()):
            return (
                None  # `torch.cuda.is_available() and is_bf16_supported()` with the guard kept: CUDA's test
            )
        if id(orig) in ctx.scratch.get("bf16-after-check", ()):
            ctx.report(orig, "`torch.cuda.is_bf16_supported()` -> `True`", code=self.code)
            return expr("True")
        # alone, it also answered False on a machine without CUDA (a CPU-only run kept float32/float16): ask for
        # a TPU by name, True there
        ctx.report(
            orig, "`torch.cuda.is_bf16_supported()` -> a test for a TPU (every TPU has bf16)", code=self.code
        )
        ctx.need_import("torch")
        return expr(_helpers.TPU_PRESENT)

    def visit_node(self, ctx, node):
        """An and/or holding a CUDA check the flow layer kept: its is_bf16_supported() stays CUDA's test too.
        One after an availability check (``torch.cuda.is_available() and torch.cuda.is_bf16_supported()``) is
        True wherever that check holds: folded."""
        if not isinstance(node, cst.BooleanOperation):
            return
        if isinstance(node.operator, cst.And) and _AVAILABILITY.search(code(node.left)):
            right = node.right
            if type(right) is cst.Call and ctx.qname(right.func) in self.calls:
                ctx.scratch.setdefault("bf16-after-check", set()).add(id(right))  # type: ignore[union-attr]
        kept = ctx.scratch.get("cuda-guards", {})
        capability = isinstance(node.operator, cst.And) and _CUDA_CAPABILITY.search(code(node)) is not None
        calls = _calls_in(node) if kept or capability or mentions(ctx, "torch.version.cuda") else []
        if (
            any(id(c) in kept for c in calls)
            or (
                calls and capability
            )  # (Fooocus: `is_bf16_supported() and get_device_properties(...).major >= 8`)
            or (calls and _reads_cuda_version(ctx, node))
        ):
            # (`torch.version.cuda and torch.cuda.is_bf16_supported() and ...`: a CUDA-version test, kept and
            # flagged, beside it; folding only the bf16 part half-migrates the conjunction)
            beside = ctx.scratch.setdefault("bf16-beside-kept", set())
            beside.update(id(c) for c in calls)

    def _was_check(self, ctx, orig: cst.BaseExpression, node: cst.BaseExpression) -> bool:
        return (
            isinstance(node, cst.Name)
            and node.value == "True"
            and isinstance(orig, cst.Call)
            and ctx.qname(orig.func) in self.calls
        )

    def leave_node(self, ctx, orig, node):
        """``x and True`` -> ``x``; ``a if True else b`` -> ``a`` (what the check became, folded)."""
        if isinstance(node, cst.BooleanOperation) and isinstance(node.operator, cst.And):
            if self._was_check(ctx, orig.right, node.right):
                return node.left.with_changes(lpar=node.lpar, rpar=node.rpar) if node.lpar else node.left
            if self._was_check(ctx, orig.left, node.left):
                return node.right.with_changes(lpar=node.lpar, rpar=node.rpar) if node.lpar else node.right
        if isinstance(node, cst.IfExp) and self._was_check(ctx, orig.test, node.test):
            return node.body.with_changes(lpar=node.lpar, rpar=node.rpar) if node.lpar else node.body
        return None


#: A CUDA compute-capability test (an and's operand beside is_bf16_supported(): Ampere and newer), kept as CUDA's.
_CUDA_CAPABILITY = re.compile(
    r"torch\.cuda\.(?:get_device_properties\([^()]*(?:\([^()]*\))?[^()]*\)\.major|get_device_capability)"
)


@register
class CudaEventStream(Rule):
    code = "TPU207"
    name = "cuda-event-stream"
    family = "cuda_api"
    outcome = "warned"
    summary = (
        "Rewrite torch.cuda.Event/Stream to torch.Event/torch.Stream (a timing Event to a local _TpuTimingEvent "
        "whose elapsed_time works); `with torch.cuda.stream(s)` on a stream the file made becomes `with s:`, other "
        "torch.cuda.stream(...) is flagged."
    )
    rationale = (
        "The generic classes follow the current accelerator; TorchTPU's streams and events are "
        "placeholders, so timings measured with them must be checked."
    )
    before = "import torch\n\nstream = torch.cuda.Stream()\ndone = torch.cuda.Event()\n"
    after = "import torch\n\nstream = torch.Stream()\ndone = torch.Event()\n"
    refs = frozenset({"torch.cuda.Event", "torch.cuda.Stream", "torch.cuda.stream"})
    calls = frozenset({"torch.cuda.Event", "torch.cuda.Stream", "torch.cuda.stream"})
    emits = ("torch.Event", "torch.Stream")
    #: name -> (torch.cuda signature, torch signature)
    _SIGNATURES = {
        "Event": (
            "enable_timing=False, blocking=False, interprocess=False, external=False",
            "device=None, *, enable_timing=False, blocking=False, interprocess=False",
        ),
        "Stream": ("device=None, priority=0, **kwargs", "device=None, *, priority=0"),
    }

    def ref(self, ctx, orig, node, qname):
        last = qname.rsplit(".", 1)[1]
        if last == "stream":
            if ctx.is_called(orig):
                return None  # the call hook: `with torch.cuda.stream(s)` on a stream this file made
            ctx.flag(
                orig,
                "`torch.cuda.stream(...)`: TorchTPU streams are placeholders; drop the context or "
                "use torch.Stream",
                code=self.code,
            )
            return None
        if ctx.is_called(orig):
            return None  # the call hook re-binds the arguments too
        ctx.report(
            orig,
            f"`{qname}` -> `torch.{last}` (placeholder on TorchTPU: check timings)",
            code=self.code,
            outcome="warned",
        )
        ctx.need_import("torch")
        return expr(f"torch.{last}")

    def call(self, ctx, orig, node, qname):
        last = qname.rsplit(".", 1)[1]
        if last == "stream":
            return self._stream_context(ctx, orig, node, qname)
        timing = kwarg(orig, "enable_timing")
        if last == "Event" and timing is not None and code(timing.value) != "False":
            # torch.Event's elapsed_time raises on TPU: a local event that reads the clock after synchronize
            ctx.report(
                orig,
                f"`{qname}(enable_timing=...)` -> `{_helpers.TIMING_EVENT}()` (synchronizes and reads the clock; "
                "elapsed_time in milliseconds)",
                code=self.code,
                outcome="warned",
            )
            ctx.need_helper(_helpers.TIMING_EVENT)
            return expr(f"{_helpers.TIMING_EVENT}()")
        old, new = self._SIGNATURES[last]
        args = rebind(node, old, new)
        if args is None:
            ctx.flag(
                orig,
                f"`{qname}(...)`: its arguments do not map onto `torch.{last}({new})`; port by hand",
                code=self.code,
            )
            return None
        ctx.report(
            orig,
            f"`{qname}` -> `torch.{last}` (placeholder on TorchTPU: check timings)",
            code=self.code,
            outcome="warned",
        )
        ctx.need_import("torch")
        func = expr(f"torch.{last}")
        return (
            node.with_changes(func=func) if same_args(node, args) else node.with_changes(func=func, args=args)
        )

    def _stream_context(self, ctx, orig: cst.Call, node: cst.Call, qname: str) -> cst.BaseExpression | None:
        """``with torch.cuda.stream(self.stream):`` where every binding of ``self.stream`` in the file is a
        ``torch.cuda.Stream()`` (rewritten to ``torch.Stream()``): the stream is its own context manager
        (``with self.stream:`` makes it current, as ``torch.cuda.stream`` did); kept, a CUDA context around a
        TPU stream raises (BasicSR's CUDAPrefetcher). Anything else is flagged as before."""
        a = _own_stream(ctx, orig)
        stmt = ctx.statement()
        if a is not None and type(stmt) is cst.With:
            if _is_with_item(stmt, orig):
                ctx.report(
                    orig,
                    f"`{qname}({code(a)})` -> `{code(a)}` (a torch.Stream is its own context manager)",
                    code=self.code,
                    outcome="warned",
                )
                return node.args[0].value
        ctx.flag(
            orig,
            "`torch.cuda.stream(...)`: TorchTPU streams are placeholders; drop the context or use torch.Stream",
            code=self.code,
        )
        return None


def _own_stream(ctx: Context, call: cst.Call) -> cst.BaseExpression | None:
    """The stream of ``torch.cuda.stream(s)`` when every binding of ``s`` in the file is a ``torch.cuda.Stream()``
    (migrated to ``torch.Stream()``, its own context manager), else None."""
    a = call.args[0].value if len(call.args) == 1 and call.args[0].keyword is None else None
    if not isinstance(a, (cst.Name, cst.Attribute)):
        return None
    bound = re.findall(rf"(?<![\w.]){re.escape(code(a))}\s*=(?!=)\s*([\w.]+)", ctx.source_text)
    made = [b for b in bound if b in ("torch.cuda.Stream", "torch.Stream")]
    return a if made and len(made) == len(bound) else None


def _is_with_item(stmt: cst.With, call: cst.Call) -> bool:
    return any(item.item is call for item in stmt.items)


#: CUDA's floating tensor types -> the dtype a default of that type sets.
_FLOAT_TYPES = {
    "FloatTensor": "float32",
    "DoubleTensor": "float64",
    "HalfTensor": "float16",
    "BFloat16Tensor": "bfloat16",
}
_TENSOR_TYPES = (
    "FloatTensor",
    "DoubleTensor",
    "HalfTensor",
    "BFloat16Tensor",
    "LongTensor",
    "IntTensor",
    "ShortTensor",
    "CharTensor",
    "ByteTensor",
    "BoolTensor",
)


#: ``torch.Tensor(...)`` / ``torch.FloatTensor(...)``: a tensor of the default tensor type, whatever the default device.
_LEGACY_CONSTRUCTOR = re.compile(r"\btorch\.(?:Float|Double|Half|Long|Int|Byte|Bool)?Tensor\s*\(")
_SIBLING_LIMIT = 64  # .py files of the script's folder read for legacy constructors


def _legacy_constructor(ctx) -> str | None:
    """Where the program calls a legacy constructor: this file, or a ``.py`` beside it (nerf-pytorch's
    run_nerf_helpers.py builds ``torch.Tensor(pose)`` for run_nerf.py, which sets the CUDA default type)."""
    if (m := _LEGACY_CONSTRUCTOR.search(ctx.source_text)) is not None:
        return m.group(0).rstrip("( ")
    path = getattr(ctx, "path", None)
    folder = os.path.dirname(os.path.abspath(path)) if path else None
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".py"))[:_SIBLING_LIMIT] if folder else []
    except OSError:
        return None
    for name in names:
        try:
            with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as f:  # type: ignore[arg-type]
                found = _LEGACY_CONSTRUCTOR.search(f.read(1 << 20))
        except OSError:
            continue
        if found is not None:
            return f"{found.group(0).rstrip('( ')} in {name}"
    return None


def _type_query(node: cst.CSTNode) -> bool:
    """``x.type()``: the tensor's type name, read as text."""
    return (
        type(node) is cst.Call
        and type(node.func) is cst.Attribute
        and node.func.attr.value == "type"
        and not node.args
    )


@register
class CudaTensorType(Rule):
    code = "TPU208"
    name = "cuda-tensor-type"
    family = "cuda_api"
    outcome = "warned"
    summary = (
        "Rewrite set_default_tensor_type(<a CUDA floating type>) to torch.set_default_device('tpu') (and "
        "torch.set_default_dtype for half, double, bfloat16); a CUDA tensor type only called, handed on or cast to "
        "becomes a 'tpu' constructor (_tpu_tensor_type) and x.type(it) _tpu_as_type(x, it); flag other "
        "torch.cuda.*Tensor uses."
    )
    rationale = (
        "set_default_tensor_type is deprecated; the default device and dtype are set separately. "
        "Typed CUDA tensor constructors have no TPU counterpart."
    )
    before = "import torch\n\ntorch.set_default_tensor_type('torch.cuda.FloatTensor')\n"
    after = "import torch\n\ntorch.set_default_device('tpu')\n"
    calls = frozenset({"torch.set_default_tensor_type"})
    statements = frozenset({"torch.set_default_tensor_type"})
    refs = frozenset(f"torch.cuda.{t}" for t in _TENSOR_TYPES)
    node_types = (cst.Call, cst.SimpleString, cst.Comparison)
    methods = frozenset({"type"})  # x.type(Tensor) where Tensor was bound to a CUDA tensor type
    emits = ("torch.set_default_device", "torch.set_default_dtype")

    def visit_node(self, ctx, node):
        if type(node) is cst.Call and ctx.qname(node.func) == "torch.set_default_tensor_type":
            ctx.skip_inside(node)
        if type(node) is cst.Comparison and len(node.comparisons) == 1:
            left, right = node.left, node.comparisons[0].comparator
            for side, other in ((left, right), (right, left)):
                if type(side) is cst.SimpleString and _type_query(other):
                    ctx.scratch.setdefault("type-tests", set()).add(id(side))  # type: ignore[union-attr]
            if (
                type(node.comparisons[0].operator) in (cst.In, cst.NotIn)
                and _type_query(left)
                and type(right) in (cst.List, cst.Tuple, cst.Set)
            ):
                # Megatron's `param.type() in ['torch.cuda.HalfTensor', 'torch.cuda.BFloat16Tensor']`: every
                # arm of the dispatch is renamed alike, or bf16 params fall through to its `raise TypeError`
                for e in right.elements:  # type: ignore[attr-defined]
                    if type(e.value) is cst.SimpleString:
                        ctx.scratch.setdefault("type-tests", set()).add(id(e.value))  # type: ignore[union-attr]

    def leave_node(self, ctx, orig, node):
        """The type's name as text: ``x.type() == 'torch.cuda.HalfTensor'`` is false for every 'tpu' tensor
        (a branch silently not taken), ``x.type('torch.cuda.FloatTensor')`` asks for CUDA."""
        body = string_body(orig)
        if body and body.startswith("torch.cuda.") and body[len("torch.cuda.") :] in _TENSOR_TYPES:
            if id(orig) in ctx.scratch.get("type-tests", ()):  # type: ignore[operator]
                # `spect.type() == 'torch.cuda.HalfTensor'` (fairseq's WaveGlow): the type a 'tpu' tensor reports
                new = "torch.tpu." + body[len("torch.cuda.") :]
                ctx.report(
                    orig, f"'{body}' compared with x.type() -> '{new}'", code=self.code, outcome="warned"
                )
                return with_body(node, new)
            ctx.flag(
                orig,
                f"'{body}' names a CUDA tensor type: no 'tpu' tensor has it (x.type() of one is "
                "'torch.tpu...'); test t.dtype and t.device.type instead",
                code=self.code,
            )
        return None

    def method(self, ctx, orig: cst.Call, node: cst.Call) -> cst.BaseExpression | None:
        """``x.type(Tensor)``: see ``_cast_aliases``."""
        f = orig.func
        if (
            type(f) is not cst.Attribute
            or f.attr.value != "type"
            or len(orig.args) != 1
            or orig.args[0].keyword is not None
            or not mentions(ctx, "torch.cuda.")
        ):
            return None
        target = code(orig.args[0].value)
        if target not in _cast_aliases(ctx):
            return None
        ctx.report(
            orig,
            f"`.type({target})` -> `{_helpers.AS_TYPE}(..., {target})` ({target} may be a CUDA tensor type, now a "
            "constructor of 'tpu' tensors: the cast is to its dtype on 'tpu')",
            code=self.code,
            outcome="warned",
        )
        ctx.need_helper(_helpers.AS_TYPE)
        new_f = node.func
        assert isinstance(new_f, cst.Attribute)
        return cst.Call(
            func=cst.Name(_helpers.AS_TYPE),
            args=[
                cst.Arg(new_f.value, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                node.args[0],
            ],
        )

    def statement(self, ctx, orig, node, qname, call, target):
        if call is None or target is not None:
            return None
        calls = self._default_type(ctx, orig.body[0].value)  # type: ignore[attr-defined]
        if calls is None:
            return None
        first = node.with_changes(body=[cst.Expr(calls[0])], leading_lines=[])  # (the caller puts them back)
        return [first, *(cst.SimpleStatementLine([cst.Expr(c)]) for c in calls[1:])]

    def call(self, ctx, orig, node, qname):
        calls = self._default_type(ctx, orig, one_call=True)
        return calls[0] if calls else None

    def _default_type(self, ctx, orig: cst.Call, one_call: bool = False) -> list[cst.Call] | None:
        """The calls that set what ``torch.set_default_tensor_type(<a CUDA type>)`` set: the default device
        'tpu', and for a floating type other than float32 its dtype (RIFE's ``torch.cuda.HalfTensor`` for
        --fp16: flagged, its device choice was kept on CUDA and met a model migrated to 'tpu')."""
        a = arg(orig, 0, "t")
        if a is None:
            return None
        body = string_body(a.value)
        text = body if body is not None else (ctx.qname(a.value) or "")
        if not text.startswith("torch.cuda."):
            return None
        dtype = _FLOAT_TYPES.get(text[len("torch.cuda.") :])
        if dtype is None or (dtype != "float32" and one_call):
            ctx.flag(
                orig,
                f"default tensor type `{text}`: use torch.set_default_device('tpu') and "
                "torch.set_default_dtype(...)",
                code=self.code,
            )
            return None
        if (where := _legacy_constructor(ctx)) is not None:
            ctx.flag(
                orig,
                f"default tensor type `{text}`: the program builds tensors with the legacy constructors "
                f"(`{where}`), which follow the default tensor type but not set_default_device: they would "
                "stay on the CPU beside 'tpu' tensors; replace them with torch.tensor / torch.empty, then use "
                "torch.set_default_device('tpu')",
                code=self.code,
            )
            return None
        extra = "" if dtype == "float32" else f" and set_default_dtype(torch.{dtype})"
        ctx.report(
            orig,
            f"set_default_tensor_type({text}) -> set_default_device('tpu'){extra}",
            code=self.code,
            outcome="warned",
        )
        device = orig.with_changes(
            func=expr("torch.set_default_device"), args=[cst.Arg(cst.SimpleString("'tpu'"))]
        )
        if dtype == "float32":
            return [device]
        ctx.need_import("torch")
        return [
            device,
            cst.Call(func=expr("torch.set_default_dtype"), args=[cst.Arg(expr(f"torch.{dtype}"))]),
        ]

    def ref(self, ctx, orig, node, qname):
        if not self.flag_only and (ctx.is_called(orig) or _called_alias(ctx)):
            # a constructor (ffjord's VAE: `self.FloatTensor = torch.cuda.FloatTensor` then
            # `self.FloatTensor(1).zero_()`): the CPU type's tensor moved to "tpu"
            cpu = f"torch.{qname.rsplit('.', 1)[1]}"
            ctx.report(
                orig,
                f"`{qname}` called as a constructor -> `{_helpers.LEGACY_TENSOR}({cpu})` (the CPU type's tensor, "
                "moved to 'tpu')",
                code=self.code,
                outcome="warned",
            )
            ctx.need_helper(_helpers.LEGACY_TENSOR)
            ctx.need_import("torch")  # (`import torch as th`: the finisher writes th.FloatTensor)
            return expr(f"{_helpers.LEGACY_TENSOR}({cpu})")
        if ctx.is_called(orig):
            ctx.flag(
                orig, f"`{qname}`: create the tensor with device='tpu' and an explicit dtype", code=self.code
            )
        else:  # a type, not a constructor: isinstance(t, (torch.FloatTensor, torch.cuda.FloatTensor)), a dict key
            ctx.flag(
                orig,
                f"`{qname}` used as a type: no 'tpu' tensor is an instance of it (nor of the CPU types beside "
                "it); test t.dtype and t.device.type instead",
                code=self.code,
            )
        return None


def _called_alias(ctx: Context) -> bool:
    """The reference is the value (or a branch of it) bound to a name or attribute that the file then calls:
    ``self.FloatTensor = torch.cuda.FloatTensor`` ... ``self.FloatTensor(1)``."""
    stmt = ctx.statement()
    if (
        type(stmt) is not cst.SimpleStatementLine
        or len(stmt.body) != 1
        or type(stmt.body[0]) is not cst.Assign
    ):
        return False
    targets = [code(t.target) for t in stmt.body[0].targets]
    for t in targets:
        uses = [
            (m.group(1), ctx.source_text[max(0, m.start() - 16) : m.start()])
            for m in re.finditer(rf"(?<![\w.]){re.escape(t)}(?!\w)(\s*=(?!=)|\(|)", ctx.source_text)
        ]
        casts = [u for u, before in uses if u == "" and _CAST.search(before)]
        calls = [u for u, _ in uses if u == "("]
        # called, handed on as an argument (SPADE's GANLoss(tensor=self.FloatTensor), which calls it), or cast to
        # (`x.type(Tensor)`: rewritten to _tpu_as_type); an isinstance or comparison use is a type use: flagged
        if (calls or casts) and not any(u == "" and _TYPE_USE.search(before) for u, before in uses):
            return True
    return False


def _cast_aliases(ctx: Context) -> frozenset[str]:
    """Names bound to a CUDA tensor type that the file only calls, hands on or casts to (``Tensor =
    torch.cuda.FloatTensor if cuda else torch.FloatTensor`` ... ``imgs.type(Tensor)``, PyTorch-YOLOv3's and
    PyTorch-GAN's idiom): their binding becomes ``_tpu_tensor_type(...)``, so ``x.type(Tensor)`` becomes
    ``_tpu_as_type(x, Tensor)``."""
    found = ctx.scratch.get("cast-aliases")
    if found is None:
        names = {m.group(1) for m in _CUDA_TYPE_BINDING.finditer(ctx.source_text)}
        found = ctx.scratch["cast-aliases"] = frozenset(
            n for n in names if _only_constructed(ctx.source_text, n)
        )
    return found  # type: ignore[return-value]


def _only_constructed(text: str, target: str) -> bool:
    uses = [
        (m.group(1), text[max(0, m.start() - 16) : m.start()])
        for m in re.finditer(rf"(?<![\w.]){re.escape(target)}(?!\w)(\s*=(?!=)|\(|)", text)
    ]
    return any(u == "" and _CAST.search(before) for u, before in uses) and not any(
        u == "" and _TYPE_USE.search(before) for u, before in uses
    )


#: `name = ... torch.cuda.FloatTensor ...` on one line: a binding of a CUDA tensor type (or a choice of one)
_CUDA_TYPE_BINDING = re.compile(
    rf"(?m)^[ \t]*([\w.]+)[ \t]*=[^=\n][^\n]*\btorch\.cuda\.(?:{'|'.join(_TENSOR_TYPES)})\b"
)
#: What precedes a tensor type's name where a tensor is cast to it: x.type(T)
_CAST = re.compile(r"\.type\(\s*$")
#: What precedes a tensor type's name where it is used as a type, not called: isinstance(x, (A, T)), t is T / == T,
#: or x.type(A, T) (a second argument: not a plain cast)
_TYPE_USE = re.compile(
    r"(?:isinstance|issubclass)\([^()]*\(?[^()]*$|\.type\([^()]+,\s*$|(?:==|!=|\bis|\bin)\s*$"
)


_ENV = {
    "CUDA_VISIBLE_DEVICES": "TPU chips are selected with TPU_VISIBLE_CHIPS",
    "CUDA_LAUNCH_BLOCKING": "use TorchTPU's Debug Eager mode (TORCH_TPU_LAUNCH_BLOCKING=1)",
    "CUDA_DEVICE_ORDER": "no TPU equivalent",
    "NCCL_DEBUG": "no TPU equivalent",
    "NCCL_SOCKET_IFNAME": "no TPU equivalent",
}


@register
class CudaEnvVar(Rule):
    code = "TPU209"
    name = "cuda-env-var"
    family = "cuda_api"
    outcome = "flagged"
    summary = "Flag CUDA/NCCL environment variables (CUDA_VISIBLE_DEVICES, CUDA_LAUNCH_BLOCKING, NCCL_*)."
    rationale = (
        "TorchTPU reads other variables (TPU_VISIBLE_CHIPS, TORCH_TPU_LAUNCH_BLOCKING); these do nothing."
    )
    before = 'import os\n\nos.environ["CUDA_VISIBLE_DEVICES"] = "0"\n'
    after = (
        "import os\n\n# TODO(tpu-migrate TPU209): CUDA_VISIBLE_DEVICES has no effect on TPU: TPU chips are "
        'selected with TPU_VISIBLE_CHIPS\nos.environ["CUDA_VISIBLE_DEVICES"] = "0"\n'
    )
    node_types = (cst.SimpleString,)

    def leave_node(self, ctx, orig, node):
        body = string_body(orig)
        if body in _ENV:
            ctx.flag(orig, f"{body} has no effect on TPU: {_ENV[body]}", code=self.code)
        return None


@register
class CudaGraphsNvtx(Rule):
    code = "TPU210"
    name = "cuda-graphs-nvtx-profiler"
    family = "cuda_api"
    outcome = "flagged"
    summary = "Flag CUDA graphs, NVTX ranges and ProfilerActivity.CUDA."
    rationale = (
        "Use torch.profiler with the TPU Kineto backend; XLA already compiles graphs, there is no CUDA graph."
    )
    before = "import torch\n\ng = torch.cuda.CUDAGraph()\n"
    after = (
        "import torch\n\n# TODO(tpu-migrate TPU210): `torch.cuda.CUDAGraph` is CUDA-only; use torch.profiler "
        "(TPU Kineto backend) or torch.compile instead\ng = torch.cuda.CUDAGraph()\n"
    )
    refs = frozenset(
        {
            "torch.cuda.CUDAGraph",
            "torch.cuda.graph",
            "torch.cuda.make_graphed_callables",
            "torch.profiler.ProfilerActivity.CUDA",
            "torch.autograd.profiler.emit_nvtx",
        }
    )
    ref_prefixes = ("torch.cuda.nvtx", "torch.cuda.graphs")

    def ref(self, ctx, orig, node, qname):
        ctx.flag(
            orig,
            f"`{qname}` is CUDA-only; use torch.profiler (TPU Kineto backend) or torch.compile instead",
            code=self.code,
        )
        return None


#: detectron2, judged by what a module takes from it (detrex): its structures, configs, checkpointer, data, layers
#: and backbones are plain torch; its detectors, their R-CNN parts (proposal generators, ROI heads, poolers: NMS and
#: ROIAlign inside, CPU and CUDA kernels only), ``build_model`` and ``DefaultPredictor`` / ``DefaultTrainer`` run on
#: a model placed by detectron2's own ``cfg.MODEL.DEVICE``. Those are the library a program is built on. Its ops
#: called by the project's own code (``batched_nms``, ``ROIAlign``, ``DeformConv``) are flagged at the call, as
#: torchvision's are (CPU_CUDA_OPS): DeformConv in detrex's ResNet runs only where a stage asks for it. Judged as
#: one package, detrex's model modules were left on 'cuda' while their criteria and configs moved to 'tpu'. A
#: name taken from a package (``from detectron2.modeling import build_model``) counts as that module
#: (imported_modules).
DETECTRON2_MODELS = tuple(
    f"detectron2.{name}"
    for name in (
        "_C",
        *(
            f"modeling.{n}"
            for n in ("poolers", "ROIPooler", "proposal_generator", "build_proposal_generator")
        ),
        *(f"modeling.{n}" for n in ("RPN", "roi_heads", "build_roi_heads", "ROIHeads", "StandardROIHeads")),
        *(
            f"modeling.{n}"
            for n in ("Res5ROIHeads", "CascadeROIHeads", "meta_arch.rcnn", "meta_arch.retinanet")
        ),
        *(f"modeling.{n}" for n in ("build_model", "meta_arch.build", "GeneralizedRCNN", "ProposalNetwork")),
        *(
            f"modeling.{n}"
            for n in ("RetinaNet", "FCOS", "PanopticFPN", "meta_arch.fcos", "meta_arch.panoptic_fpn")
        ),
        *(f"engine.{n}" for n in ("DefaultPredictor", "DefaultTrainer")),
        *(f"engine.defaults.{n}" for n in ("DefaultPredictor", "DefaultTrainer")),
    )
)
#: detectron2's ops with CPU and CUDA kernels only (detectron2._C, torchvision's nms / roi_align), by the names
#: the project calls them.
_DETECTRON2_OPS = frozenset(
    f"detectron2.layers.{where}{name}"
    for names, module in (
        (("nms", "batched_nms", "nms_rotated", "batched_nms_rotated"), "nms"),
        (("roi_align", "ROIAlign"), "roi_align"),
        (("roi_align_rotated", "ROIAlignRotated"), "roi_align_rotated"),
        (("DeformConv", "ModulatedDeformConv", "deform_conv", "modulated_deform_conv"), "deform_conv"),
        (("pairwise_iou_rotated",), "rotated_boxes"),
    )
    for name in names
    for where in ("", f"{module}.")
) | frozenset(
    {"detectron2.structures.pairwise_iou_rotated", "detectron2.structures.rotated_boxes.pairwise_iou_rotated"}
)
#: Python packages that only run on NVIDIA GPUs (kernels, compilers, bindings, monitoring).
KERNEL_MODULES = (
    "triton",
    "triton_pre_mlir",  # (MosaicML's pinned triton fork: MPT's flash_attn_triton in InternVL and LLaVA copies)
    "apex",
    "bitsandbytes",
    "flash_attn",
    "flash_attn_interface",
    "ring_flash_attn",  # (ring attention over flash_attn's varlen kernels: axolotl's ring_attn patch)
    "xformers",
    "cupy",
    "pycuda",
    "numba.cuda",
    "transformer_engine",
    "tensorrt",
    "torch_tensorrt",
    "torch2trt",
    "amp_C",  # apex's compiled multi-tensor kernels (fairseq's clip_grad_norm_)
    "cuda",
    "cuda.bindings",
    "deep_ep",
    "pynvml",
    *("nvidia_smi", "py3nvml"),  # NVML wrappers whose nvmlInit raises without a GPU (tensorboardX's demo)
    "nvidia",
    "cutlass",
    "flashinfer",
    "mamba_ssm",
    "causal_conv1d",
    "liger_kernel",
    "cudnn",
    # kernel compilers and kernel libraries built for CUDA only (mamba's tilelang kernels, open_lm's megablocks MoE)
    *(
        "tilelang",
        "megablocks",
        "stk",
        "grouped_gemm",
        "deep_gemm",
        "sgl_kernel",
        "flash_mla",
        "sageattention",
    ),
    *("exllama", "exllamav2", "awq_inference_engine", "marlin", "fused_dense_lib", "dropout_layer_norm"),
    *("selective_scan_cuda", "tinycudann", "nvdiffrast", "MinkowskiEngine", "spconv", "torchsparse"),
    *("diff_gaussian_rasterization", "simple_knn", "gsplat", "natten", "nvtx"),
    *("torchrec.distributed", "fbgemm_gpu"),  # (see _DEVICE_LIMITED: they run on the CPU too, never on TPU)
    *("torch_sparse", "torch_scatter", "torch_cluster", "torch_spline_conv", "dgl"),  # (the same)
    *DETECTRON2_MODELS,  # (the same)
    "warp",  # (the same)
    *("faster_whisper", "ctranslate2"),  # (the same: CTranslate2 runs on the CPU or CUDA only)
    "tvm",  # (the same: Apache TVM builds kernels for a target such as "llvm" or "cuda"; Pyraformer's)
    # quantization kernels: hqq's ATEN backends are the hqq_aten CUDA extension (fsdp_qlora's notebooks; hqq itself
    # and gptqmodel also have torch/CPU backends: not listed); AutoGPTQ, AutoAWQ and EETQ kernels
    *("hqq_aten", "auto_gptq", "awq", "eetq"),
    # RAPIDS: GPU dataframes and estimators (dinov2's cuml logistic regression)
    *("cuml", "cudf", "cugraph", "cuvs"),
    # NVIDIA's GPU-initiated communication (Megatron's nvshmem copy service) and DeepSpeed-MII, whose pipelines
    # place themselves on f"cuda:{rank}" (TorchServe's MII handlers)
    *("nvshmem", "mii"),
    # NVIDIA's inference stacks: TensorRT-LLM engines and Polygraphy's TensorRT runners (StreamDiffusion's and
    # ChatGLM3's TensorRT paths), Riva's CUDA WFST decoders and Triton Inference Server's Python backend, whose
    # model instances are KIND_GPU (CUDA) or KIND_CPU, never a TPU (wenet's runtime/gpu model repositories)
    *("tensorrt_llm", "polygraphy", "riva.asrlib", "triton_python_backend_utils"),
    # DeepSpeed4Science's Evoformer attention: CUDA kernels (openfold's use_deepspeed_evo_attention)
    "deepspeed.ops.deepspeed4science",
    *("k2", "fairscale.nn.data_parallel", "isaacgym"),  # (see _DEVICE_LIMITED)
    "basicsr.ops",  # (the same: BasicSR's compiled upfirdn2d / fused_act / dcn, GFPGAN's StyleGAN2 blocks)
)
#: What to do instead of a CUDA-only serving stack (its TODO; others say to port the kernels).
_STACK_ADVICE = {
    "triton_python_backend_utils": "Triton Inference Server has no TPU instance kind (on a TPU host its models "
    "run as KIND_CPU): serve on TPU with vLLM TPU or JetStream, or move tensors to 'tpu' by hand",
    "tensorrt_llm": "TensorRT-LLM engines run on NVIDIA GPUs only: serve on TPU with vLLM TPU or JetStream",
    "polygraphy": "Polygraphy's TensorRT and CUDA runners need an NVIDIA GPU: on TPU leave this path unused and "
    'compile the model with torch.compile(backend="tpu")',
}
#: The packages of KERNEL_MODULES a repository may carry a copy of (not the dotted entries, whose first part is a
#: general library: numba, torchrec).
_KERNEL_ROOTS = frozenset(m for m in KERNEL_MODULES if "." not in m) | {"detectron2"}
#: The dotted entries of KERNEL_MODULES, for a name taken from its package (``from detectron2.layers import nms``).
_DOTTED_KERNELS = frozenset(m for m in KERNEL_MODULES if "." in m)
#: Libraries that place, shard and compute on "cpu" or "cuda" only (torchrec's sharding planner, whose Topology
#: takes cpu/cuda/mtia, and DistributedModelParallel; fbgemm_gpu's CPU and CUDA embedding ops): a program built on
#: them ran on the CPU on a host without CUDA, and handed the device "tpu" it fails. Like the CUDA stacks, such a
#: file is flagged, not half-migrated. (torchrec's datasets and KeyedJaggedTensor are plain torch: not listed.)
_DEVICE_LIMITED: dict[str, str] = {
    "torchrec.distributed": "port its embeddings to torch.nn.EmbeddingBag",
    "fbgemm_gpu": "port its embeddings to torch.nn.EmbeddingBag",
    # graph libraries with CPU and CUDA kernels only (ogb's examples: SparseTensor adjacencies, DGL graphs)
    "torch_sparse": "port the adjacency to edge_index message passing (torch_geometric without SparseTensor)",
    "torch_scatter": "use torch's scatter_reduce / index_add",
    "torch_cluster": "sample on the CPU and move the batches",
    "torch_spline_conv": "port the convolution to torch ops",
    "dgl": "keep the graph on the CPU and move its feature tensors by hand",
    # detectron2's detectors place themselves by cfg.MODEL.DEVICE and run its CPU/CUDA ops (SlowFast's and
    # pytorchvideo's detectors); NVIDIA Warp compiles kernels for CPU or CUDA
    **dict.fromkeys(
        DETECTRON2_MODELS, "run its model on the CPU (cfg.MODEL.DEVICE = 'cpu') and move its outputs to 'tpu'"
    ),
    "warp": "give it the device 'cpu' and move its outputs to 'tpu'",
    # CTranslate2 engines (whisperX's and faster-whisper's ASR models): devices 'cpu', 'cuda' or 'auto' only
    "faster_whisper": "give its models the device 'cpu' (CTranslate2 runs on the CPU or CUDA only)",
    "ctranslate2": "give it the device 'cpu' (it runs on the CPU or CUDA only)",
    # Apache TVM: kernels built for the device type of their input (`tvm.build(..., target=device)`: 'llvm'
    # or 'cuda'), with no TPU target (LTSF-Linear's Pyraformer hierarchical_mm_tvm.py)
    "tvm": "hand its kernels CPU tensors, or use the plain torch path of the model (no TVM target is a TPU)",
    # k2's FSAs and losses: CPU and CUDA contexts only (wenet's LF-MMI and HLG decoding)
    "k2": "keep its graphs and decoding on the CPU (device 'cpu') and move the results to 'tpu'",
    # fairscale's FSDP computes on CUDA (its default compute_device) or a CPU it is given, never 'tpu' (esm's and
    # metaseq's FSDP training)
    "fairscale.nn.data_parallel": "shard with torch.distributed.fsdp (fully_shard) on 'tpu' instead",
    # NVIDIA's Isaac Gym physics API (ElegantRL's own Isaac tasks): sim_device 'cpu' or 'cuda:N' only, its
    # observation and action tensors live there (isaacgymenvs.make(sim_device=...) is a foreign call: TPU101)
    "isaacgym": "simulate with sim_device='cpu' and move its observations to 'tpu' (and the actions back)",
    # BasicSR's compiled ops (GFPGAN's and Real-ESRGAN's StyleGAN2 blocks): upfirdn2d, fused_act and dcn branch on
    # input.device.type between a CPU path and their CUDA kernels, so a 'tpu' tensor reaches the CUDA kernel
    "basicsr.ops": "run those blocks on CPU tensors, or use the project's pure-torch ('clean') architectures",
    # an op of a library with CPU and CUDA kernels only, reached by a call (fairseq's MMS alignment)
    "torchaudio.functional.forced_align": "run the alignment on CPU tensors (.cpu() before the call)",
    # AOTInductor: builds a shared library for the CPU or CUDA from the device of the model and example inputs
    # (TorchServe's resnet/bert export scripts for its C++ backend); Inductor has no TPU code generation
    **dict.fromkeys(
        (
            "torch._export.aot_compile",
            "torch._inductor.aot_compile",
            "torch._inductor.aoti_compile_and_package",
        ),
        'use torch.compile(backend="tpu") in Python instead (AOTInductor has no TPU target)',
    ),
}
#: The libraries of _DEVICE_LIMITED (for other rules' tests).
DEVICE_LIMITED_LIBRARIES: tuple[str, ...] = tuple(_DEVICE_LIMITED)
#: Calls that put a program on one of those libraries without importing it (PyG's SparseTensor adjacency), or
#: that are such an op (torchaudio's forced_align: CPU and CUDA kernels only).
DEVICE_LIMITED_CALLS = {
    "torch_geometric.transforms.ToSparseTensor": "torch_sparse",
    "torchaudio.functional.forced_align": "torchaudio.functional.forced_align",
    **{q: q for q in _DEVICE_LIMITED if q.startswith("torch._")},
}
#: torchvision's compiled detection ops (simple-faster-rcnn's nms and RoIPool): kernels for the CPU, CUDA and
#: MPS only; TorchTPU has no CPU fallback by default (contract §12), so on 'tpu' tensors they raise.
CPU_CUDA_OPS = (
    frozenset(
        f"torchvision.ops.{name}"
        for base in (
            "nms",
            "batched_nms",
            "roi_align",
            "roi_pool",
            "ps_roi_align",
            "ps_roi_pool",
            "deform_conv2d",
        )
        for name in (base, f"boxes.{base}", f"{base}.{base}")
    )
    | frozenset(
        f"torchvision.ops.{c}" for c in ("RoIAlign", "RoIPool", "PSRoIAlign", "PSRoIPool", "DeformConv2d")
    )
    | _DETECTRON2_OPS
)
_FLASH_ATTENTION = frozenset({"flash_attention_2", "flash_attention_3"})
#: transformers' loading keywords that quantize with bitsandbytes (LLaVA-style loaders pass them on).
_BNB_LOADS = frozenset({"load_in_8bit", "load_in_4bit"})


#: A compiled CUDA extension's module name (xentropy_cuda_lib, fused_layer_norm_cuda, wkv_cuda, my_cuda_ext).
_CUDA_EXTENSION = re.compile(r"(?:^|_)cuda(?:_|$)")


_JIT_BUILDS = frozenset({"torch.utils.cpp_extension.load", "torch.utils.cpp_extension.load_inline"})
_CU_SOURCE = re.compile(r"\.(?:cu|cuh)$")


#: Another library's CUDA build or CUDA provider named as data (a pip requirement, an ONNX Runtime provider).
_CUDA_BUILD = re.compile(
    r"(?:onnxruntime|paddlepaddle|tensorflow|faiss|mxnet|jaxlib|cupy)-gpu\b|"
    r"(?:CUDA|Tensorrt|TensorRT)ExecutionProvider\b|cupy-cuda\w*"
)


def _builds_cuda(call: cst.Call) -> bool:
    """``load(sources=["k.cpp", "k_cuda.cu"])`` / ``load_inline(cuda_sources=...)``: a CUDA build."""
    if kwarg(call, "cuda_sources") is not None:
        return True
    return any(_CU_SOURCE.search(string_body(s) or "") for a in call.args for s in literals(a.value))


#: ``cfg.MODEL.DEVICE`` in a file that imports the detectron2 family: the yacs key detectron2's build_model,
#: DefaultTrainer and DefaultPredictor place their detectors by (d2go's runners, maskrcnn-benchmark, AdelaiDet).
_MODEL_DEVICE = re.compile(r"\bMODEL\.DEVICE\b")
_DETECTRON2_FAMILY = re.compile(
    r"^[ \t]*(?:from|import)[ \t]+(?:detectron2|d2go|maskrcnn_benchmark|adet)\b", re.M
)
MODEL_DEVICE_MESSAGE = (
    "`MODEL.DEVICE` is the device detectron2's detectors are built on (build_model, DefaultTrainer, "
    "DefaultPredictor: NMS and ROIAlign inside, CPU and CUDA kernels only): this file is left as written; run the "
    "detector with MODEL.DEVICE = 'cpu' on a TPU host, or port its R-CNN parts"
)


def detectron2_device(source: str) -> bool:
    """The file sets or reads detectron2's ``MODEL.DEVICE`` and imports that family (d2go's distributed launch
    and QAT calibration, which move the model to ``cfg.MODEL.DEVICE``): its device is the detector's."""
    return _MODEL_DEVICE.search(source) is not None and _DETECTRON2_FAMILY.search(source) is not None


def device_limited(mod: str) -> bool:
    """``mod`` is (under) a library with CPU and CUDA kernels only (:data:`_DEVICE_LIMITED`)."""
    return any(mod == m or mod.startswith(m + ".") for m in _DEVICE_LIMITED)


def _limited_message(lib: str) -> str:
    return (
        f"`{lib}` runs on the CPU or CUDA only (its kernels have no TPU build): keep this program's device on "
        f"the CPU, or {_DEVICE_LIMITED[lib]}"
    )


#: setup.py text that builds CUDA code (apex's, detectron2's, mamba's own setup.py).
_SETUP_BUILDS_CUDA = re.compile(r"\bCUDAExtension\b|\bCUDA_HOME\b|\bnvcc\b")


@lru_cache(maxsize=512)
def cuda_library_copy(folder: str) -> str | None:
    """Where the copy of a CUDA library that ``folder`` holds is built, else None: the folder itself or the folder
    above, whichever has a setup.py that builds CUDA extensions (jukebox's vendored apex/, hustvl/Vim's det/ =
    detectron2), or the folder itself where .cu sources are in it."""
    for root in (folder, os.path.dirname(folder)):
        setup = os.path.join(root, "setup.py")
        try:
            with open(setup, encoding="utf-8", errors="replace") as fh:
                if _SETUP_BUILDS_CUDA.search(fh.read(200_000)):
                    return root
        except OSError:
            continue
    seen = 0
    for _, _, names in os.walk(folder):
        seen += len(names)
        if any(n.endswith((".cu", ".cuh")) for n in names):
            return folder
        if seen > 5_000:
            break
    return None


@lru_cache(maxsize=512)
def _library_repository(folder: str) -> str | None:
    """A folder holding a CUDA-only library's repository: a setup.py that builds CUDA extensions beside that
    library's package (Vim's det/setup.py beside det/detectron2/), whatever the folder is called."""
    setup = os.path.join(folder, "setup.py")
    if not os.path.isfile(setup):
        return None
    try:
        names = os.listdir(folder)
    except OSError:
        return None
    inner = next(
        (n for n in names if n in _KERNEL_ROOTS and os.path.isfile(os.path.join(folder, n, "__init__.py"))),
        None,
    )
    return inner if inner is not None and cuda_library_copy(os.path.join(folder, inner)) is not None else None


def _carried_copy(package: str) -> bool:
    """A package folder that is a copy of a CUDA library carried inside the run's tree (built below the tree's own
    folder: a run on that library's own repository keeps it the project's)."""
    base = cuda_library_copy(package)
    tree = current().tree
    return base is not None and (not tree or base.startswith(tree + os.sep))


def vendored_cuda_library(path: str | None) -> str | None:
    """The CUDA-only library whose copy ``path`` is part of (a folder above it named like the library, holding
    a CUDA build): its code is that library's, which runs on CPU/CUDA only, not the project's to migrate."""
    if not path:
        return None
    folder = os.path.dirname(os.path.abspath(path))
    tree = current().tree

    for _ in range(8):
        if tree and not folder.startswith(tree + os.sep):
            return None  # (the run's own folder and above: a run on the library's own repository migrates it)
        name = os.path.basename(folder)
        if name in _KERNEL_ROOTS and _carried_copy(folder):
            return name
        if (inner := _library_repository(folder)) is not None:
            return inner  # (Vim's det/: detectron2's repository renamed; its configs, tools and projects)
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return None


def _project_package(mod: str, path: str | None) -> bool:
    """A folder named like ``mod``'s first part beside the file or up to 3 folders above it, in a folder that is a
    source root (not a package itself), holding code one imports: the repository's own package (a module file of
    that name is not enough: ``lion_pytorch/triton.py`` wraps the real ``triton``; nor is a subpackage: ``import
    triton`` inside ``palm_pytorch/triton/`` is the real triton, the folder being ``palm_pytorch.triton``; nor a
    folder of tests: mamba's ``tests/ops/triton/`` holds only ``test_*.py``; nor one lacking the submodule named:
    ``import triton.language`` is not a ``triton/`` folder without ``language``)."""
    if not path or not os.path.isfile(path):
        return False
    root, *rest = mod.split(".")
    folder = os.path.dirname(os.path.abspath(path))
    for _ in range(4):
        if os.path.isdir(os.path.join(folder, root)) and not os.path.isfile(
            os.path.join(folder, "__init__.py")
        ):
            package = os.path.join(folder, root)
            # (a copy of the library itself, vendored with its CUDA build, is that library: Vim's det/detectron2)
            return _importable_package(package, rest[:1]) and not _carried_copy(package)
        folder = os.path.dirname(folder)
    return False


def _importable_package(folder: str, sub: list[str]) -> bool:
    """The folder is a package one imports from: it has the submodule named, or (none named) an ``__init__.py``
    or a module that is not a test."""
    try:
        names = os.listdir(folder)
    except OSError:
        return False
    if sub:
        return f"{sub[0]}.py" in names or os.path.isdir(os.path.join(folder, sub[0]))
    return "__init__.py" in names or any(
        n.endswith(".py") and n != "conftest.py" and not TEST_FILE.match(n) for n in names
    )


def cuda_only_module(mod: str, path: str | None = None) -> bool:
    """A CUDA-only package, or a third-party module named like a compiled CUDA extension (a module of the project
    beside the file, ``cuda_utils.py``, is the project's own code; so is a package of the repository that shares a
    CUDA stack's name, BingBertGlue's own ``nvidia/modeling.py``); a module the project builds from CUDA sources
    (Deformable-DETR's ``MultiScaleDeformableAttention``, named by its setup.py's CUDAExtension)."""
    if mod in current().cuda_extensions:
        return True
    if any(mod == m or mod.startswith(m + ".") for m in KERNEL_MODULES):
        return not _project_package(mod, path)
    last = mod.split(".")[-1]
    if "nccl" in mod.lower() and not mod.startswith("torch") and third_party(mod, path):
        return True  # another library's NCCL communicator (vLLM's nccl_engine, pynccl): NVIDIA's collectives
    if last == "cuda" or _CUDA_EXTENSION.search(last) is None:
        return False
    return third_party(mod, path) or _compiled_in_project(mod, path)


def _compiled_in_project(mod: str, path: str | None) -> bool:
    """``from fairseq import ngram_repeat_block_cuda``: a module of the project's own package that has no source
    (no ``.py``, no folder): setup.py builds it from ``.cu`` files, a compiled CUDA extension."""
    if not path or "." not in mod:
        return False
    here = os.path.dirname(os.path.abspath(path))
    parts = mod.split(".")
    for _ in range(4):  # (the package beside the file or up to 3 folders above it)
        package = os.path.join(here, *parts[:-1])
        if os.path.isfile(os.path.join(package, "__init__.py")):
            stem = os.path.join(package, parts[-1])
            return not (os.path.isfile(stem + ".py") or os.path.isdir(stem))
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    return False


def _earlier_import_of(ctx, node: cst.CSTNode, root: str) -> bool:
    """Whether an import of ``root`` (or a module under it) run at import time comes before the import ``node``
    (the module's own statements and those of its try/with/if blocks: nanotron's ``try: import megablocks.ops;
    from megablocks.layers.all_to_all import ...`` is one package, said once)."""
    earlier = False
    for small in import_time_smalls(getattr(ctx, "module", None)):
        if small is node:
            return earlier
        for full in imported_modules(small):
            if full == root or full.startswith(root + "."):  # (said there only if flagged there too)
                earlier = earlier or cuda_only_module(full, getattr(ctx, "path", None))
    # an import inside a def or class: one TODO per package in the file (Pyraformer imports tvm in three
    # functions, one of them twice: `import tvm` then `from tvm.contrib import nvcc`)
    said = ctx.scratch.setdefault("nested-imports-said", set())
    if root in said:  # type: ignore[operator]
        return True
    said.add(root)  # type: ignore[union-attr]
    return False


def imported_modules(small: cst.CSTNode) -> list[str]:
    """The absolute modules an import statement names (``import a.b, c`` -> a.b, c; ``from a import b`` -> a)."""
    if isinstance(small, cst.Import):
        return [cst.helpers.get_full_name_for_node(a.name) or "" for a in small.names]
    if isinstance(small, cst.ImportFrom) and small.module is not None and not small.relative:
        mod = cst.helpers.get_full_name_for_node(small.module) or ""
        names = () if isinstance(small.names, cst.ImportStar) else small.names
        # d2go's detr: `from detr import _C as MSDA` imports the `detr._C` its setup.py builds from CUDA sources
        kernels = [f"{mod}.{a.name.value}" for a in names if type(a.name) is cst.Name]
        return [mod, *(k for k in kernels if k in current().cuda_extensions or k in _DOTTED_KERNELS)]
    return []


def import_time_smalls(module) -> Iterator[cst.BaseSmallStatement]:
    """Small statements run at import time, in source order: the module's own and those of its try/with/if blocks
    (open-instruct's ``with contextlib.suppress(Exception): import deepspeed``), not those of defs or classes."""
    todo: list[cst.CSTNode] = list(reversed(getattr(module, "body", ())))
    while todo:
        stmt = todo.pop()
        if isinstance(stmt, cst.SimpleStatementLine):
            yield from stmt.body
        elif isinstance(stmt, cst.BaseSmallStatement):
            yield stmt  # (a one-line block: `try: from flash_attn import f`)
        elif isinstance(
            stmt, (cst.Try, cst.TryStar, cst.With, cst.If, cst.Else, cst.ExceptHandler, cst.Finally)
        ):
            inner: list[cst.CSTNode] = list(getattr(stmt.body, "body", ()))
            inner += list(getattr(stmt, "handlers", ()))
            inner += [o for extra in ("orelse", "finalbody") if (o := getattr(stmt, extra, None)) is not None]
            todo.extend(reversed(inner))


def loads_compiled_ops(qname: str) -> bool:
    """``ext_loader.load_ext('_ext', [...])``: mmcv's loader of its compiled operators (mmcv itself or a copy of it
    carried in the tree, LAVIS's and InternImage's): the module it returns runs CPU and CUDA kernels only."""
    return qname == "ext_loader.load_ext" or qname.endswith(".ext_loader.load_ext")


@register
class CustomKernels(Rule):
    code = "TPU211"
    name = "custom-cuda-kernels"
    family = "cuda_api"
    outcome = "flagged"
    summary = (
        "Flag CUDA-only stacks: CUDAExtension, triton, apex, bitsandbytes, flash_attn, xformers, TensorRT, "
        "cuda-python, DeepEP, pynvml, `nvidia-smi` calls, attn_implementation='flash_attention_2' ..."
    )
    rationale = (
        "These run CUDA code; on TPU write the kernel in JAX/Pallas (torch.tpu.pallas.jax_op) or use torch "
        "ops. A file that imports one of them at its top level cannot even be imported without CUDA: "
        "nothing else in it is rewritten (a half-migrated kernel file is worse than an untouched one)."
    )
    before = "import triton\n"
    after = (
        "# TODO(tpu-migrate TPU211): `triton` is CUDA-only (kernels or NVIDIA tooling); port to torch ops or a "
        "Pallas kernel (torch.tpu.pallas.jax_op), or drop it\nimport triton\n"
    )
    refs = frozenset({"torch.utils.cpp_extension.CUDAExtension"})
    words = frozenset(q.rsplit(".", 1)[-1] for q in (*DEVICE_LIMITED_CALLS, *CPU_CUDA_OPS)) | {
        "load_ext",
        "MODEL.DEVICE",
    }
    node_types = (cst.Import, cst.ImportFrom, cst.SimpleString, cst.Call, cst.Attribute)

    def _helper_of_cuda_only(self, ctx, node: cst.CSTNode) -> None:
        """A module only CUDA-only files of the project import (migrate.project) is left as written with them:
        said once, above its first import (a TODO needs a statement to sit on)."""
        if ctx.scratch.get("cuda-only-helper-said"):
            return
        ctx.scratch["cuda-only-helper-said"] = True
        path = getattr(ctx, "path", None)
        facts = current()
        key = os.path.abspath(path) if path else None
        why = facts.cuda_only_helpers.get(key) if key else None
        if key and not why and (why := facts.built_on_cuda_only.get(key)):
            test = bool(path and is_test_file(path, ctx.source_text))
            why += (
                (": a test of it, left as written" if test else ": left as written")
                if self.flag_only
                else ": this module is migrated, and runs on TPU once that is ported"
            )
        if why:
            ctx.scratch["file-why-said"] = True
            ctx.flag(node, why, code=self.code)

    @staticmethod
    def _nested_cuda_only(ctx, node: cst.Import | cst.ImportFrom) -> None:
        """An import inside a function, or in a module-level ``if``/``try`` (LLaMA2-Accessory's single_turn: ``if
        args.quant: from accessory.util.quant import quantize``), of a project file built on a CUDA-only stack
        (ProjectFacts.nested_cuda_only)."""
        path = getattr(ctx, "path", None)
        found = (
            facts_for(ctx.scratch, ctx.source_text).nested_cuda_only.get(os.path.abspath(path))
            if path
            else None
        )
        if not found:
            return
        if isinstance(node, cst.ImportFrom):
            mods = (
                ["." * len(node.relative) + (cst.helpers.get_full_name_for_node(node.module) or "")]
                if node.module
                else []
            )
        else:
            mods = [cst.helpers.get_full_name_for_node(a.name) or "" for a in node.names]
        mod = next((m for m in mods if m in found), None)
        said = ctx.scratch.setdefault("nested-cuda-only-said", set())
        if mod is not None and not ctx.enclosing_definitions() and ctx.in_try():
            return  # (an optional import with its fallback: InternVL's `try: from .flash_attention import ...`)
        if mod is not None and mod not in said:  # type: ignore[operator]
            said.add(mod)  # type: ignore[union-attr]  # (one TODO per module a file's functions import)
            why = found[mod]
            if not ctx.enclosing_definitions():
                why = why.replace("this function imports", "this module imports, in a branch,", 1)
            ctx.flag(node, why, code=CustomKernels.code)

    def _flag(self, ctx, node, mod: str):
        limited = next((m for m in _DEVICE_LIMITED if mod == m or mod.startswith(m + ".")), None)
        if limited is not None and cuda_only_module(mod, getattr(ctx, "path", None)):
            if _earlier_import_of(ctx, node, limited):
                return  # one TODO per file: the first import says it
            ctx.scratch["file-why-said"] = True
            ctx.flag(node, _limited_message(limited), code=self.code)
        elif cuda_only_module(mod, getattr(ctx, "path", None)):
            root = mod.split(".")[0]
            if _earlier_import_of(ctx, node, root):
                return  # one TODO per package at the top of a file (`import apex` / `from apex.parallel ...`)
            advice = next(
                (
                    advice
                    for stack, advice in _STACK_ADVICE.items()
                    if mod == stack or mod.startswith(stack + ".")
                ),
                None,
            )
            if advice is not None:  # (an NVIDIA serving stack: what it is and what serves on TPU)
                ctx.flag(node, f"`{mod}`: {advice}", code=self.code)
                return
            port = (
                "move its transfers to torch.distributed with the 'tpu_dist' backend"
                if "nccl" in mod.lower()
                else "port to torch ops or a Pallas kernel (torch.tpu.pallas.jax_op), or drop it"
            )
            ctx.flag(node, f"`{mod}` is CUDA-only (kernels or NVIDIA tooling); {port}", code=self.code)

    def visit_node(self, ctx, node):
        if (
            type(node) is cst.Attribute
            and node.attr.value == "DEVICE"
            and code(node.value).endswith("MODEL")
            and not ctx.scratch.get("model-device-said")
            and not ctx.scratch.get("file-why-said")  # (left as written for a reason said above it already)
            and detectron2_device(ctx.source_text)
        ):
            ctx.scratch["model-device-said"] = True
            ctx.flag(node, MODEL_DEVICE_MESSAGE, code=self.code)
        if type(node) is cst.Call and (lib := DEVICE_LIMITED_CALLS.get(ctx.qname(node.func) or "")):
            ctx.flag(node, _limited_message(lib), code=self.code)
        if type(node) is cst.Call and loads_compiled_ops(ctx.qname(node.func) or code(node.func)):
            ctx.flag(
                node,
                "loads mmcv's compiled operators (`_ext`: CPU and CUDA kernels only, none for 'tpu'): call them on "
                "CPU tensors and move their results back, or port them to torch ops",
                code=self.code,
            )
        if type(node) is cst.Call and (op := ctx.qname(node.func) or "") in CPU_CUDA_OPS:
            ctx.flag(
                node,
                f"`{op}` has CPU and CUDA kernels only (on 'tpu' it raises NotImplementedError): call it on CPU "
                "tensors (`.cpu()`) and move its result back",
                code=self.code,
            )
        if (
            type(node) is cst.Call
            and node.args
            and ctx.qname(node.func) == "importlib.import_module"
            and (name := string_body(node.args[0].value))
        ):
            self._flag(ctx, node, name)  # (openfold's importlib.import_module("attn_core_inplace_cuda"))
        if type(node) is cst.Call and ctx.qname(node.func) in _JIT_BUILDS and _builds_cuda(node):
            ctx.flag(
                node,
                "builds a CUDA kernel from .cu sources (torch.utils.cpp_extension): it cannot compile or run on "
                "TPU; port the kernel to torch ops or a Pallas kernel (torch.tpu.pallas.jax_op)",
                code=self.code,
            )
        if type(node) is cst.Call and node.args:
            q = next(
                (
                    a
                    for a in node.args
                    if a.keyword is not None
                    and a.keyword.value in _BNB_LOADS
                    and not (type(a.value) is cst.Name and a.value.value in ("False", "None"))
                ),
                None,
            )
            if q is not None:
                # PixArt-sigma's `T5EncoderModel.from_pretrained(..., load_in_8bit=True)`: transformers quantizes
                # with bitsandbytes, CUDA's kernels only (on a TPU host it raises); no import of it to flag
                ctx.flag(
                    node,
                    f"`{q.keyword.value}=` quantizes with bitsandbytes (CUDA kernels only): load in bfloat16 on "  # type: ignore[union-attr]
                    "TPU, or quantize with torchao",
                    code=self.code,
                )
        if type(node) is cst.Call:
            a = kwarg(node, "attn_implementation")
            if a is not None and string_body(a.value) in _FLASH_ATTENTION:
                ctx.claim_string(a.value, "", "rewritten", "", value=None)  # type: ignore[arg-type]
                ctx.flag(
                    node,
                    f"attn_implementation='{string_body(a.value)}' is a CUDA kernel; use 'sdpa' (or "
                    "torch.tpu.ops.splash_sdpa)",
                    code=self.code,
                )

    def leave_node(self, ctx, orig, node):
        if isinstance(orig, (cst.Import, cst.ImportFrom)):
            self._helper_of_cuda_only(ctx, orig)
            self._nested_cuda_only(ctx, orig)
        if isinstance(orig, cst.Import):
            for alias in orig.names:
                self._flag(ctx, orig, cst.helpers.get_full_name_for_node(alias.name) or "")
        elif isinstance(orig, cst.ImportFrom) and orig.module is not None and not orig.relative:
            mod = cst.helpers.get_full_name_for_node(orig.module) or ""
            # `from detr import _C`: the flag names the kernel (`detr._C`), where its package is plain code
            self._flag(ctx, orig, next((m for m in imported_modules(orig)[1:]), mod))
        elif type(orig) is cst.SimpleString and (m := _CUDA_BUILD.match(string_body(orig) or "")):
            # a device check that picks this name (`"onnxruntime-gpu" if cuda else "onnxruntime"`) is kept by the
            # flow layer through this finding: made true on TPU it would install / select CUDA's build
            ctx.flag(
                orig,
                f"`{m.group(0)}` is another library's CUDA build or provider: it has no TPU variant; on TPU use "
                "its CPU build (onnxruntime, CPUExecutionProvider, paddlepaddle) or keep this path CUDA-only",
                code=self.code,
            )
        elif type(orig) is cst.SimpleString and "nvidia-smi" in orig.value:
            ctx.flag(
                orig,
                "`nvidia-smi` queries NVIDIA GPUs; there is no TPU equivalent here (use "
                "torch.tpu.get_device_properties or tpu-info)",
                code=self.code,
            )
        return None

    def ref(self, ctx, orig, node, qname):
        ctx.flag(
            orig, "`CUDAExtension` builds CUDA kernels; port to torch ops or a Pallas kernel", code=self.code
        )
        return None


_KERNEL_REGISTRATIONS = frozenset(
    {
        "torch.library.custom_op",
        "torch._library.custom_ops.custom_op",
        "torch.library.register_kernel",
        "torch.library.impl",
    }
)
_CUDA_KEYS = frozenset({"cuda", "CUDA", "AutogradCUDA", "SparseCUDA", "QuantizedCUDA"})


#: A test decorator that runs its test only where CUDA GPUs are (torch's ``skip_if_lt_x_gpu(2)``, transformers'
#: ``require_torch_gpu``, ``skipIfNoCuda``, ``requires_cuda``).
_GPU_ONLY_TEST = re.compile(r"(?i)^(?:skip|requires?)_?\w*(?:gpu|cuda)\w*$")


def _probe_skip(ctx: Context, fn: cst.FunctionDef) -> str | None:
    """The probe of a CUDA-only stack (migrate.project) a test's own ``if not probe(): pytest.skip(...)`` asks
    (llm-foundry's ``if not is_flash_v2_installed(): pytest.skip('... requires flash attention 2.')``)."""
    probes = facts_for(ctx.scratch, ctx.source_text).probes
    if not probes or type(fn.body) is not cst.IndentedBlock:
        return None
    for stmt in fn.body.body:
        if type(stmt) is not cst.If or not any(
            type(s) is cst.SimpleStatementLine
            and any(
                type(small) is cst.Expr
                and type(small.value) is cst.Call
                and _last_part(small.value.func) in ("skip", "skipTest")
                for small in s.body
            )
            for s in getattr(stmt.body, "body", ())
        ):
            continue
        for n in _calls_in(stmt.test):
            parent_not = _negated_call(stmt.test, n)
            if parent_not and _last_part(n.func) in probes:
                return _last_part(n.func)
    return None


def _negated_call(test: cst.BaseExpression, call: cst.Call) -> bool:
    """``call`` appears as ``not call(...)`` in ``test`` (through ``and``/``or``)."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return test.expression is call
    if isinstance(test, cst.BooleanOperation):
        return _negated_call(test.left, call) or _negated_call(test.right, call)
    return False


def _decorator_name(d: cst.Decorator) -> str | None:
    f = d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator
    return f.attr.value if isinstance(f, cst.Attribute) else f.value if isinstance(f, cst.Name) else None


@register
class GpuOnlyTest(Rule):
    code = "TPU217"
    name = "gpu-only-test"
    family = "cuda_api"
    outcome = "flagged"
    summary = (
        "Leave a test that its decorator runs only with CUDA GPUs (skip_if_lt_x_gpu, require_torch_gpu, "
        "skipIfNoCuda) as written, flagged."
    )
    rationale = (
        "The decorator counts CUDA devices, so the test is skipped on a TPU host whatever its body says; "
        "migrating the body half-migrates the test (its guard still CUDA's, its tensors on 'tpu'). Give the TPU "
        "path its own test with a guard that counts TPU chips."
    )
    before = (
        "import torch\nfrom torch.testing._internal.common_distributed import skip_if_lt_x_gpu\n\n\n"
        "@skip_if_lt_x_gpu(2)\ndef test_sharded():\n    x = torch.ones(2).cuda()\n"
    )
    after = (
        "import torch\nfrom torch.testing._internal.common_distributed import skip_if_lt_x_gpu\n\n\n"
        "# TODO(tpu-migrate TPU217): `skip_if_lt_x_gpu` runs this test only with CUDA GPUs: left as written; "
        "give the TPU path its own test with a guard that counts TPU chips\n"
        "@skip_if_lt_x_gpu(2)\ndef test_sharded():\n    x = torch.ones(2).cuda()\n"
    )
    node_types = (cst.FunctionDef, cst.ClassDef)  # (a class decorator gates each of its tests)

    def visit_node(self, ctx, node):
        for d in node.decorators:
            name = _decorator_name(d)
            if name is not None and _GPU_ONLY_TEST.match(name):
                ctx.skip_inside(node)
                ctx.flag(
                    node,
                    f"`{name}` runs this test only with CUDA GPUs: left as written; give the TPU path its own "
                    "test with a guard that counts TPU chips",
                    code=self.code,
                )
                return
        if (
            type(node) is cst.FunctionDef
            and node.name.value.startswith("test")
            and (probe := _probe_skip(ctx, node))
        ):
            ctx.skip_inside(node)
            ctx.flag(
                node,
                f"this test skips itself unless `{probe}()` finds a CUDA-only stack: left as written; give the "
                "TPU path its own test",
                code=self.code,
            )


def _own_device(call: cst.Call) -> bool:
    """``torch.cuda.device(t.device)`` / ``(t.get_device())``: the device a tensor already lives on."""
    first = call.args[0].value if call.args else None
    if type(first) is cst.Call and type(first.func) is cst.Attribute:
        return first.func.attr.value == "get_device"
    return type(first) is cst.Attribute and first.attr.value == "device"


@register
class CudaDeviceContext(Rule):
    code = "TPU219"
    name = "cuda-device-context"
    family = "cuda_api"
    outcome = "warned"
    summary = (
        "Unwrap `with torch.cuda.device(i):` (the block stays, dedented): TorchTPU binds one device per process; "
        "flag torch.cuda.device(...) anywhere else."
    )
    rationale = (
        "torch.cuda.device(i) is set_device for one block, which TPU201 deletes for the same reason: a process "
        "has one TPU, and without CUDA the context raises ('compiled without CUDA support') even for device 0 "
        "(SimCLR's `with torch.cuda.device(args.gpu_index):` around the whole training)."
    )
    before = "import torch\n\nwith torch.cuda.device(args.gpu_index):\n    train(model)\n"
    after = "import torch\n\ntrain(model)\n"
    calls = frozenset({"torch.cuda.device"})
    node_types = (cst.With,)

    def visit_node(self, ctx, node):
        item = node.items[0].item if len(node.items) == 1 and node.items[0].asname is None else None
        if (
            type(item) is cst.Call
            and ctx.qname(item.func) == "torch.cuda.device"
            and type(node.body) is cst.IndentedBlock
            and not node.asynchronous
            # `for i in gpu_ids: with torch.cuda.device(i):` visits devices: flagged; a tensor's own device
            # (`with torch.cuda.device(v.device)` for each tensor saved, sd-scripts) is the process's one TPU
            and (not ctx.in_loop() or _own_device(item))
        ):
            ctx.scratch.setdefault("cuda-device-with", set()).update((id(item), id(node)))  # type: ignore[union-attr]

    def call(self, ctx, orig, node, qname):
        if id(orig) in ctx.scratch.get("cuda-device-with", ()):  # type: ignore[operator]
            return None  # (the with statement is unwrapped as it is left)
        ctx.flag(
            orig,
            "`torch.cuda.device(...)` selects a CUDA device for a block; TorchTPU binds one device per process: "
            "run the block without it",
            code=self.code,
        )
        return None

    def leave_node(self, ctx, orig, node):
        if type(orig) is not cst.With or id(orig) not in ctx.scratch.get("cuda-device-with", ()):  # type: ignore[operator]
            return None
        ctx.report(
            orig,
            "unwrapped `with torch.cuda.device(...)`: TorchTPU binds one device per process (the block runs on it)",
            code=self.code,
            outcome="warned",
        )
        return unwrap_block(orig, node.body)


@register
class CudaApiPatch(Rule):
    code = "TPU218"
    name = "cuda-api-patch"
    family = "cuda_api"
    outcome = "flagged"
    summary = (
        "Leave a file that assigns into torch.cuda (`torch.cuda.is_available = torch.xpu.is_available`: a shim "
        "for another device, or a test forcing the CPU) as written, flagged once."
    )
    rationale = (
        "Such a file patches CUDA's API on purpose; renaming the targets would patch torch.accelerator (every "
        "device's API) instead, and renaming the values would hand another backend TPU's functions. Port the "
        "shim by hand if TPU needs one."
    )
    before = "import torch\n\ntorch.cuda.is_available = torch.xpu.is_available\n"
    after = (
        "import torch\n\n"
        "# TODO(tpu-migrate TPU218): this file assigns into `torch.cuda.is_available` (it patches CUDA's API for "
        "another backend or a test): left as written; port the patch by hand if TPU needs one\n"
        "torch.cuda.is_available = torch.xpu.is_available\n"
    )
    node_types = (cst.Assign,)

    def visit_node(self, ctx, node):
        if ctx.scratch.get("cuda-patch-said"):
            return
        for t in node.targets:
            q = ctx.qname(t.target) if isinstance(t.target, cst.Attribute) else None
            if q and q.startswith("torch.cuda."):
                ctx.scratch["cuda-patch-said"] = True
                ctx.flag(
                    node,
                    f"this file assigns into `{q}` (it patches CUDA's API for another backend or a test): left "
                    "as written; port the patch by hand if TPU needs one",
                    code=self.code,
                )
                return


@register
class CudaKernelRegistration(Rule):
    code = "TPU216"
    name = "cuda-kernel-registration"
    family = "cuda_api"
    outcome = "flagged"
    summary = (
        "Flag custom-op kernels registered for CUDA (torch.library.custom_op(device_types='cuda'), "
        "register_kernel('cuda'), impl(..., 'CUDA')); their device names are kept."
    )
    rationale = (
        "The registered function is CUDA code (Triton, a CUDA extension): registering it for 'tpu' would "
        "route TPU tensors into a CUDA kernel. Register a TPU implementation (torch ops or a Pallas kernel) "
        "beside it instead."
    )
    before = (
        'import torch\n\n@torch.library.custom_op("mylib::fused", mutates_args=(), device_types="cuda")\n'
        "def fused(x):\n    return kernel(x)\n"
    )
    after = (
        "import torch\n\n# TODO(tpu-migrate TPU216): a kernel registered for CUDA ('cuda') is CUDA code; "
        "register a separate 'tpu' implementation (torch ops or a Pallas kernel) instead of renaming it\n"
        '@torch.library.custom_op("mylib::fused", mutates_args=(), device_types="cuda")\n'
        "def fused(x):\n    return kernel(x)\n"
    )
    node_types = (cst.Call,)

    def visit_node(self, ctx, node):
        f = node.func
        last = f.attr.value if isinstance(f, cst.Attribute) else f.value if isinstance(f, cst.Name) else None
        if last not in ("custom_op", "register_kernel", "impl"):
            return
        if ctx.qname(f) not in _KERNEL_REGISTRATIONS and not (
            isinstance(f, cst.Attribute) and ctx.qname(f) is None
        ):
            return
        keys = [
            s
            for a in node.args
            if a.keyword is None or a.keyword.value in ("device_types", "dispatch_key", "types")
            for s in literals(a.value)
            if string_body(s) in _CUDA_KEYS
        ]
        if not keys:
            return
        for s in keys:
            ctx.claim_string(s, "", "rewritten", "", value=None)
        ctx.flag(
            node,
            f"a kernel registered for CUDA ('{string_body(keys[0])}') is CUDA code; register a separate "
            "'tpu' implementation (torch ops or a Pallas kernel) instead of renaming it",
            code=self.code,
        )


@register
class FusedOptimizer(Rule):
    code = "TPU212"
    name = "fused-optimizer"
    family = "cuda_api"
    outcome = "flagged"
    summary = "Flag `fused=`/`foreach=` on torch.optim optimizers (often gated on device_type == 'cuda')."
    rationale = (
        "TorchTPU ships fused Adam/AdamW kernels but other backends may not implement the fused "
        "path; check that the option is supported on the target device."
    )
    before = (
        'import torch\n\nuse_fused = device_type == "cuda"\n'
        "opt = torch.optim.AdamW(params, lr=1e-3, fused=use_fused)\n"
    )
    after = (
        'import torch\n\nuse_fused = device_type == "cuda"\n'
        "# TODO(tpu-migrate TPU212): check that `fused=` is supported for 'tpu' (the condition "
        "was probably written for CUDA)\nopt = torch.optim.AdamW(params, lr=1e-3, fused=use_fused)\n"
    )
    calls = frozenset(
        f"torch.optim.{o}"
        for o in ("Adam", "AdamW", "SGD", "Adagrad", "Adamax", "NAdam", "RAdam", "RMSprop", "Rprop", "ASGD")
    )

    def call(self, ctx, orig, node, qname):
        fused = kwarg(orig, "fused")
        if fused is not None and not (
            isinstance(fused.value, cst.Name) and fused.value.value in ("False", "None")
        ):
            ctx.flag(
                orig,
                "check that `fused=` is supported for 'tpu' (the condition was probably written for CUDA)",
                code=self.code,
            )
        return None


@register
class CudnnFlags(Rule):
    code = "TPU213"
    name = "cudnn-flags"
    family = "cuda_api"
    summary = (
        "Delete assignments to torch.backends.cudnn.benchmark/deterministic/enabled; drop "
        "torch.backends.cudnn.is_available() beside a rewritten CUDA check (False on TPU)."
    )
    rationale = (
        "They are no-ops off CUDA. For determinism use torch.use_deterministic_algorithms, which "
        "is device-agnostic (a warning says so when `deterministic` is removed)."
    )
    before = "import torch\n\ntorch.backends.cudnn.benchmark = True\nx = 1\n"
    after = "import torch\n\nx = 1\n"
    statements = frozenset(f"torch.backends.cudnn.{n}" for n in ("benchmark", "deterministic", "enabled"))
    node_types = (cst.BooleanOperation,)

    def statement(self, ctx, orig, node, qname, call, target):
        if target is None:
            return None
        small = orig.body[0]
        if isinstance(small, cst.Assign) and not pure(small.value):
            ctx.flag(
                orig,
                f"`{qname} = <a call>` is a no-op on TPU, but its value has a call in it: remove the "
                "line by hand if the call is not needed",
                code=self.code,
            )
            return None
        if qname.endswith("deterministic"):
            ctx.report(
                orig,
                "removed `torch.backends.cudnn.deterministic` (no-op on TPU); consider "
                "torch.use_deterministic_algorithms",
                code=self.code,
                outcome="warned",
            )
        else:
            ctx.report(orig, f"removed `{qname}` assignment (no-op on TPU)", code=self.code)
        return cst.RemovalSentinel.REMOVE

    def call(self, ctx, orig, node, qname):
        return None

    def leave_node(self, ctx, orig, node):
        """``torch.cuda.is_available() and torch.backends.cudnn.is_available()`` (CodeFormer's get_device): cuDNN is
        CUDA's library, absent on a TPU host, so where the run rewrites the CUDA check the cuDNN test goes with
        it (kept, it would pick the CPU silently); where the CUDA check is kept, so is it."""
        if type(node) is not cst.BooleanOperation or type(orig.operator) is not cst.And:
            return None
        for mine, theirs, new in ((orig.right, orig.left, node.left), (orig.left, orig.right, node.right)):
            if (
                type(mine) is cst.Call
                and not mine.args
                and ctx.qname(mine.func) == "torch.backends.cudnn.is_available"
                and type(theirs) is cst.Call
                and ctx.qname(theirs.func) == "torch.cuda.is_available"
                and code(new) != code(theirs)
            ):
                ctx.report(
                    orig,
                    "`torch.backends.cudnn.is_available()` dropped beside the rewritten CUDA check (cuDNN is CUDA's "
                    "library: False on a TPU host)",
                    code=self.code,
                )
                return new.with_changes(lpar=node.lpar, rpar=node.rpar) if node.lpar else new
        return None


_SETS_PRECISION = re.compile(r"set_float32_matmul_precision\s*\(")


@register
class Tf32Flags(Rule):
    code = "TPU214"
    name = "tf32-to-matmul-precision"
    family = "cuda_api"
    summary = (
        "Rewrite allow_tf32 assignments to torch.set_float32_matmul_precision('high'|'highest'); remove them "
        "where the file sets the precision itself."
    )
    rationale = (
        "TF32 intent maps to matmul precision; TorchTPU maps set_float32_matmul_precision onto its "
        "DEFAULT/HIGH/HIGHEST precision (f32 matmuls default to bf16 passes)."
    )
    before = "import torch\n\ntorch.backends.cuda.matmul.allow_tf32 = True\n"
    after = 'import torch\n\ntorch.set_float32_matmul_precision("high")\n'
    statements = frozenset({"torch.backends.cuda.matmul.allow_tf32", "torch.backends.cudnn.allow_tf32"})
    emits = ("torch.set_float32_matmul_precision",)

    def statement(self, ctx, orig, node, qname, call, target):
        small = node.body[0]
        if not isinstance(small, cst.Assign):  # (its value may be a call: `= cfg.tf32()`)
            return None
        v = small.value
        if isinstance(v, cst.Name) and v.value in ("True", "False"):
            value = '"high"' if v.value == "True" else '"highest"'
        else:
            value = f'"high" if {code(v)} else "highest"'
        if _SETS_PRECISION.search(ctx.source_text):
            # the file chooses the precision itself: a second call would overwrite the caller's choice
            ctx.report(
                orig,
                f"`{qname} = ...` removed: the file sets torch.set_float32_matmul_precision itself "
                "(a second call would overwrite it)",
                code=self.code,
                outcome="warned",
            )
            return cst.RemovalSentinel.REMOVE
        prev = ctx.previous_statement(orig)
        literal = isinstance(v, cst.Name)  # (a name, not an expression that may have side effects)
        repeated = literal and prev is not None and ctx.scratch.get(self.code) == (id(prev), value)
        ctx.scratch[self.code] = (id(orig), value)
        if repeated:  # matmul and cudnn flags side by side: one precision line says it
            ctx.report(
                orig,
                f"`{qname} = ...` removed: the line above already sets the same "
                "torch.set_float32_matmul_precision",
                code=self.code,
            )
            return cst.RemovalSentinel.REMOVE
        ctx.report(orig, f"`{qname} = ...` -> torch.set_float32_matmul_precision(...)", code=self.code)
        ctx.need_import("torch")
        return [cst.SimpleStatementLine([cst.Expr(expr(f"torch.set_float32_matmul_precision({value})"))])]

    def call(self, ctx, orig, node, qname):
        return None


@register
class SdpKernel(Rule):
    code = "TPU215"
    name = "cuda-sdp-backends"
    family = "cuda_api"
    outcome = "flagged"
    summary = "Flag torch.backends.cuda SDPA backend switches (sdp_kernel, enable_flash_sdp, ...)."
    rationale = "They select CUDA attention kernels; on TPU use F.scaled_dot_product_attention or torch.tpu.ops.splash_sdpa."
    before = "import torch\n\ntorch.backends.cuda.enable_flash_sdp(True)\n"
    after = (
        "import torch\n\n# TODO(tpu-migrate TPU215): `torch.backends.cuda.enable_flash_sdp` selects CUDA "
        "attention kernels; remove it (TPU: torch.tpu.ops.splash_sdpa)\n"
        "torch.backends.cuda.enable_flash_sdp(True)\n"
    )
    refs = frozenset(
        {
            "torch.backends.cuda.sdp_kernel",
            "torch.backends.cuda.enable_flash_sdp",
            "torch.backends.cuda.enable_mem_efficient_sdp",
            "torch.backends.cuda.enable_math_sdp",
            "torch.backends.cuda.enable_cudnn_sdp",
        }
    )

    def ref(self, ctx, orig, node, qname):
        ctx.flag(
            orig,
            f"`{qname}` selects CUDA attention kernels; remove it (TPU: torch.tpu.ops.splash_sdpa)",
            code=self.code,
        )
        return None


#: What torch.accelerator offers of a device module's API (torch 2.13): a module looked up by device type
#: (``getattr(torch, device_type, torch.cuda)``) can be torch.accelerator when only these are used on it.
_ACCELERATOR_MODULE = frozenset(
    {
        "is_available",
        "device_count",
        "synchronize",
        "empty_cache",
        "current_stream",
        "set_stream",
        *_MEMORY_ACCELERATOR.values(),
    }
)


#: What torch.tpu (TorchTPU 0.2.0) offers that works from user code (contract §3-§4: its is_available,
#: device_count, synchronize, current_device, set_device and streams raise on torch >= 2.11).
_TPU_MODULE_WORKS = frozenset(
    {"get_device_name", "get_device_properties", "manual_seed", "manual_seed_all", "get_amp_supported_dtype"}
)


#: The uses of a device module returned to callers: unknown here.
_HANDED_OUT = frozenset({"<returned>"})
#: A variable naming a device type (``device_name``, ``device_type``, ``accelerator``), not a dtype.
_DEVICE_KIND = re.compile(r"(?i)device|accelerator|backend_name")


@register
class DeviceModuleLookup(Rule):
    code = "TPU220"
    name = "device-module-lookup"
    family = "cuda_api"
    outcome = (
        "flagged"  # (it also rewrites: "flagged" keeps it in a file left as written, where it only flags)
    )
    summary = (
        "Rewrite `getattr(torch, device_type, torch.cuda)` (a device module looked up by type) to torch.accelerator "
        "where only torch.accelerator's functions are used on it; flag it otherwise."
    )
    rationale = (
        "On a TPU host the device type is 'tpu' and the lookup gives torch.tpu, which has no memory statistics "
        "or empty_cache and whose is_available/device_count raise on torch >= 2.11: the torch.cuda default is "
        "never used. torch.accelerator has those functions for whatever accelerator is present."
    )
    before = (
        "import torch\n\n\ndef clear(device_type):\n    mod = getattr(torch, device_type, torch.cuda)\n"
        "    mod.empty_cache()\n\n\ndef bf16(device_type):\n    mod = getattr(torch, device_type, torch.cuda)\n"
        "    return mod.is_bf16_supported()\n"
    )
    after = (
        "import torch\n\n\ndef clear(device_type):\n    mod = torch.accelerator\n    mod.empty_cache()\n\n\n"
        "def bf16(device_type):\n    # TODO(tpu-migrate TPU220): `getattr(torch, device_type, torch.cuda)` is torch.tpu "
        "on a TPU host (its torch.cuda default is never used), which lacks or refuses `is_bf16_supported`: call those "
        "by hand\n    mod = getattr(torch, device_type, torch.cuda)\n    return mod.is_bf16_supported()\n"
    )
    node_types = (cst.Call,)
    emits = ("torch.accelerator",)
    words = frozenset({"getattr"})

    def visit_node(self, ctx: Context, node: cst.CSTNode) -> None:
        if self._lookup(ctx, node) is not None:
            ctx.skip_inside(node)  # (its torch.cuda default is not a use of torch.cuda)

    def leave_node(self, ctx, orig, node):
        used = self._lookup(ctx, orig)
        if used is None:
            return None
        if used == _HANDED_OUT:
            ctx.flag(
                orig,
                f"`{code(orig)[:60]}` hands its callers torch.tpu on a TPU host, whose is_available, device_count, "
                "synchronize and current_device raise on torch >= 2.11: give callers torch.accelerator for those "
                "(its module has them for any accelerator)",
                code=self.code,
            )
            return None
        if used <= _ACCELERATOR_MODULE and not self.flag_only:
            ctx.report(
                orig,
                f"`{code(orig)[:60]}` -> `torch.accelerator` (uses: {', '.join(sorted(used))})",
                code=self.code,
            )
            ctx.need_import("torch")
            return expr("torch.accelerator").with_changes(lpar=orig.lpar, rpar=orig.rpar)
        if used <= _TPU_MODULE_WORKS:
            return None  # torch.tpu has all of them (get_device_name, manual_seed ...): it runs as written
        fails = sorted(used - _TPU_MODULE_WORKS)
        has = [f for f in fails if f in _ACCELERATOR_MODULE]
        ctx.flag(
            orig,
            f"`{code(orig)[:60]}` is torch.tpu on a TPU host (its torch.cuda default is never used), which lacks or "
            f"refuses `{'`, `'.join(fails[:5])}`"
            + (f"; torch.accelerator has `{'`, `'.join(has[:5])}`" if has else "")
            + ": call those by hand",
            code=self.code,
        )
        return None

    @staticmethod
    def _lookup(ctx: Context, node: cst.CSTNode) -> set[str] | None:
        """The attributes used on the module the call looks up (``target.<name>`` in the function that binds a
        local name, or in the class for ``self.<name>``), or None when ``node`` is not ``getattr(torch, <a device
        type>, torch.cuda)`` bound to a name or attribute."""
        if type(node) is not cst.Call or type(node.func) is not cst.Name or node.func.value != "getattr":
            return None
        if len(node.args) not in (2, 3) or any(a.keyword is not None or a.star for a in node.args):
            return None
        base, kind, *default = (a.value for a in node.args)
        if type(base) is not cst.Name or base.value != "torch" or string_body(kind) is not None:
            return None  # (a literal name: the literal rules decide)
        if default and ctx.qname(default[0]) != "torch.cuda":
            return None
        if not default and not _DEVICE_KIND.search(code(kind)):
            return None  # `getattr(torch, dtype_name)`: a dtype, not a device module
        stmt = ctx.statement()
        small = stmt.body[0] if type(stmt) is cst.SimpleStatementLine and len(stmt.body) == 1 else None
        if type(small) is cst.Return and small.value is node:
            # LMFlow's get_torch_device() (after torchtune's _device.py): `return getattr(torch, device_name)`
            return set(_HANDED_OUT)
        if type(small) is not cst.Assign or small.value is not node or len(small.targets) != 1:
            return None
        target = code(small.targets[0].target)
        if not re.fullmatch(r"[A-Za-z_][\w.]*", target):
            return None
        defs = ctx.enclosing_definitions()
        if target.startswith(("self.", "cls.")):
            where = next((d for d in reversed(defs) if type(d) is cst.ClassDef), None)
        else:
            where = next((d for d in reversed(defs) if type(d) is cst.FunctionDef), None)
        text = code(where) if where is not None else ctx.source_text
        used = set(re.findall(rf"(?<![\w.]){re.escape(target)}\.(\w+)", text))
        return used or None


#: torch's private CUDA, cuDNN and NCCL bindings (``torch._C._cuda_getDevice``, ``torch._C._cudnn``).
_PRIVATE_CUDA = re.compile(r"torch\._C\._(?:cuda|cudnn|nccl|cudart)\w*$")


@register
class UnknownCuda(Rule):
    code = "TPU299"
    name = "unknown-torch-cuda"
    family = "cuda_api"
    outcome = "flagged"
    summary = "Flag any other torch.cuda.* API (never guessed)."
    rationale = (
        "An API with no known TorchTPU counterpart is left for a human instead of being mapped by analogy."
    )
    before = "import torch\n\ntorch.cuda.ipc_collect()\n"
    after = (
        "import torch\n\n# TODO(tpu-migrate TPU299): `torch.cuda.ipc_collect` has no known TorchTPU "
        "equivalent; port by hand\ntorch.cuda.ipc_collect()\n"
    )
    ref_prefixes = ("torch.cuda", "torch._C")

    def ref(self, ctx, orig, node, qname):
        if qname.startswith("torch._C"):
            # torch's private CUDA bindings (Megatron's `torch._C._cuda_clearCublasWorkspaces()`): absent from a
            # build without CUDA, so they raise AttributeError there; the rest of torch._C is not CUDA's
            if _PRIVATE_CUDA.match(qname):
                ctx.flag(orig, f"`{qname}` is a private CUDA binding of torch; port by hand", code=self.code)
            return None
        if ctx.is_known(qname, ctx.is_called(orig)):
            return None
        if ctx.is_known(qname, True):
            ctx.flag(orig, f"`{qname}` used as a value; rewrite its uses by hand", code=self.code)
            return None
        if (
            (m := _MOCK_USE.fullmatch(qname)) is not None
            and ctx.enabled(
                "TPU201"
            )  # (the rule that moves the patch; off where the file is left as written)
            and _patched_here(ctx, m.group(1))
        ):
            # mmengine's test: `@patch('torch.cuda.max_memory_allocated', MagicMock())` (moved to the renamed
            # function with the code under test) then `torch.cuda.max_memory_allocated.assert_called()`: the
            # assertion reads the same mock
            new = f"torch.accelerator.{_ALWAYS_RENAMED[m.group(1)]}{m.group(2)}"
            ctx.report(orig, f"`{qname}` -> `{new}` (the mock the test patched there)", code=self.code)
            ctx.need_import("torch")
            return expr(new)
        ctx.flag(orig, f"`{qname}` has no known TorchTPU equivalent; port by hand", code=self.code)
        return None
