"""Where a device check's effect lives: the code a rewrite of the check would switch on.

Rewriting ``torch.cuda.is_available()`` to ``torch.accelerator.is_available()`` (or ``t.is_cuda`` to a
device-type test) makes the check true on TPU, so everything it controls starts to run there: the if-body,
the ``else`` of a negated test, the rest of a block after ``if not cuda: return ...``, every branch that
reads a flag stored from it (``self.use_cuda = torch.cuda.is_available()`` read in other methods, a module
or local name). A call-site rule cannot see that code; this module finds it with libcst's metadata
(scopes, qualified names, parents; load/store from the parents) so that :mod:`tpu_workbench.migrate.source` can check,
after a first pass, that the switched-on code was fully migrated, and keep (flag) the check when not.

A check whose value leaves what can be followed (returned, passed to a function that is not torch's, stored
in a container) is never rewritten: its effect is out of sight.
"""

from __future__ import annotations

import builtins
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import GlobalScope, QualifiedNameSource

from ._foreign import third_party
from ._frameworks import FRAMEWORK_ENTRIES
from ._host import HOST_LIBRARIES, HostHelpers
from ._scopes import scopes as _scopes
from ._walk import child_nodes as _children
from .names import TRIVIA, canonical, node_types
from .project import current as _project_facts

#: Calls whose truth means "CUDA is here" (device_count also as `> 0`).
CHECK_CALLS = frozenset({"torch.cuda.is_available", "torch.cuda.device_count"})
#: How a kept device count's finding starts (the rule words it as a count, not as a test).
PER_HOST = "it counts devices per host"
#: (not ``rank % device_count``: pytorch/examples' imagenet computes `args.gpu` so, and that ordinal is dropped
#: wherever it is used; a kept count would divide by zero there)
_DIVIDE = (cst.Divide, cst.FloorDivide)
_DIVIDE_ASSIGN = (cst.DivideAssign, cst.FloorDivideAssign)
#: Text that must be in a file for any check to be there (the analysis is skipped otherwise).
_WORTH = re.compile(
    r"""\bis_available\b|\bdevice_count\b|\bis_cuda\b|\bis_torch_cuda_available\b|['"](?:cuda|xla)(?::\d+)?['"]"""
)
#: A device literal that still names CUDA after the pass.
_CUDA_LITERAL = re.compile(r"""^[rRbBuU]?(['"])cuda(:\d+)?\1$""")
#: A device literal a comparison can test (torch_xla's 'xla' becomes 'tpu' too: its branch then runs on TPU).
_TESTED_LITERAL = re.compile(r"""^[rRbBuU]?(['"])(?:cuda|xla)(:\d+)?\1$""")
#: Consumers that only show a value (printing or logging it has no effect on the device).
_SHOWS = frozenset(
    {"print", "master_print", "info", "debug", "warning", "warn", "log", "format", "str", "repr", "bool"}
)
#: Test decorators whose argument only decides whether a test runs (TPU201 keeps those that need CUDA).
_SKIPS = frozenset({"skipIf", "skipUnless", "skipif"})
_MAX_HOPS = 3
#: A name that holds CUDA-only state (a test of `is_cuda` choosing it keeps CUDA's meaning).
_CUDA_STATE = re.compile(r"(?i)cuda|cudnn|nccl|triton|gpu|device_ids")
#: ... except a count of devices (nnUNet's `-num_gpus`, `n_gpu`, `gpus_per_node`): how many processes or devices a
#: run asks for, which any accelerator has, not a CUDA path.
_DEVICE_COUNT = re.compile(r"(?i)(?:num_?|n_?)gpus?(?:_per_node)?|gpus(?:_per_node)?|gpus?_?(?:count|num)")


def cuda_state(name: str) -> bool:
    """``name`` holds CUDA-only state (``self.cuda_kernel``, ``use_cuda_graph``), not a count of devices."""
    return name != "cuda" and _CUDA_STATE.search(name) is not None and _DEVICE_COUNT.fullmatch(name) is None


#: torch calls that spread work over several CUDA devices of one process (TorchTPU has one per process).
_MULTI_DEVICE = frozenset(
    {
        "torch.nn.parallel.data_parallel",
        "torch.nn.DataParallel",
        "torch.nn.parallel.DataParallel",
        "torch.nn.parallel.data_parallel.DataParallel",
        "torch.nn.parallel.data_parallel.data_parallel",
    }
)
#: torch's own switches of CUDA kernels (a function reading them picks a CUDA path).
_CUDA_SWITCHES = ("torch.backends.cudnn", "torch.backends.cuda")
#: Switches whose assignments the rules delete or rewrite (rules/cuda_api.py TPU213, TPU214).
_SET_SWITCHES = frozenset(
    (
        *(f"torch.backends.cudnn.{n}" for n in ("benchmark", "deterministic", "enabled", "allow_tf32")),
        "torch.backends.cuda.matmul.allow_tf32",
    )
)
#: Punctuation and whitespace: the parent map and the binding walk do not enter them.
_TRIVIA = node_types(*TRIVIA)
#: Standard modules whose calls carry no device state.
_HARMLESS = HOST_LIBRARIES


#: A Lightning Trainer built in the file, and the classes Lightning places on its own device.
_LIGHTNING_TRAINER = re.compile(r"\bTrainer\s*\(")
_LIGHTNING_CLASS = re.compile(r"\b(?:LightningModule|LightningDataModule|Callback)\b")


#: What names a GPU *resource* rather than a device besides a 'gpu' literal (_GPU_LITERAL below): a keyword such
#: as num_gpus= / gpus_per_trial=.
_GPU_KEYWORD = re.compile(r"(?:^|_)gpus?(?:_|$)")


def worth_analysing(source: str) -> bool:
    """Whether ``source`` can hold a device check at all (a cheap text test)."""
    return _WORTH.search(source) is not None


@dataclass
class Check:
    """One device check: the node, what it tests, and the code it switches on when made true on TPU."""

    node: cst.CSTNode
    predicate: str
    line_hint: str
    #: The node a rule rewrites for this check (the call, the attribute, or the 'cuda' literal of a comparison).
    key: cst.CSTNode | None = None
    #: Nodes that run on TPU once the check is rewritten (if-bodies, else-branches, rest of a block).
    regions: list[cst.CSTNode] = field(default_factory=list)
    #: Why the effect cannot be followed (the check must not be rewritten), or None.
    unseen: str | None = None
    #: A flag other modules can read (a module-level name, ``args.cuda``) that holds the check, or None.
    exported: str | None = None
    #: For a device count that divides work (``batch_size / ngpus_per_node``): that division, else None.
    divides: str | None = None
    #: The third-party callee the check's value reaches (faiss's ``gpu=``), else None: kept even for a
    #: comparison, whose other unseen uses do not decide (the compared value is migrated with it).
    foreign: str | None = None
    #: What an ``and``/``or`` evaluates after the check (``ok and torch.cuda.get_device_capability() >= (7, 5)``):
    #: it decides like a region (a finding there keeps the check) but is not frozen with the check's regions,
    #: so its own rules still run on it, the same on a second pass.
    operands: list[cst.CSTNode] = field(default_factory=list)


class Flow:
    """The device checks of one module, with their uses and the branches they control."""

    def __init__(
        self,
        module: cst.Module,
        texts: list[str] | None = None,
        path: str | None = None,
        source: str | None = None,
        cuda_only: Callable[[str, str], bool] | None = None,
    ):
        """``texts``: the source of each statement of ``module.body`` (see migrate._spans); with them only the
        statements a check can reach are analysed (:func:`reachable`), the rest of a large file is skipped."""
        self.module = module
        self.path = path
        self._text = source
        self._cuda_only = cuda_only
        self._host = HostHelpers(source, path, cuda_only) if source is not None else None  # (whole text)
        part, self._shadowing = reachable(module, texts)
        self.parents = _parents(part)
        for stmt in part.body:  # (a top-level statement's block is the whole module's body)
            self.parents[stmt] = module
        self.scopes = _scopes(part)  # (libcst's ScopeProvider, same answers, without its traversal cost)
        self.part = part
        self.checks: list[Check] = []
        self._divisor_names: dict[str, str] | None = None
        self._dividend_names: dict[str, str] | None = None
        self._order: dict[cst.CSTNode, int] | None = None
        own = {  # `self.is_cuda = ...`: the program's own attribute, not the tensor property
            _code(n.value)
            for n in self.parents
            if type(n) is cst.Attribute and n.attr.value == "is_cuda" and self._stored(n)
        }
        for node in list(self.parents):  # (a check may read a helper function in: see _own_parameter)
            if type(node) is cst.Comparison:
                lit = _compared_cuda_literal(node)
                if lit is not None:  # `device == "cuda"`: true on TPU once the literal is renamed
                    check = self._check(node, "compare", positive=_positive(node))
                    check.key = lit  # (only what it switches on decides, or a library that is not torch)
                    if check.foreign is None:
                        check.unseen = None
                    self.checks.append(check)
                continue
            if type(node) is cst.Call and self._qname(node.func) in CHECK_CALLS:
                name = self._qname(node.func) or ""
                if name.endswith("device_count") and not self._truth_use(node):
                    # a count (`rank % device_count()`), not a test that CUDA is here; but a count that
                    # divides work is CUDA's devices per host, which TorchTPU's one device per process is not
                    if (
                        share := self._divides_work(node)
                        or self._ranks_within_host(node)
                        or self._exported_count(node)
                        or self._enumerated_devices(node)
                        or self._named_host_size(node)
                        or self._gpus_argument(node)
                        or self._launch_text(node)
                    ) is not None:
                        count = Check(node, "device-count-share", _code(node), key=node, divides=share)
                        self.checks.append(count)
                    continue
                self.checks.append(self._check(node, name))
            elif (
                type(node) is cst.Attribute
                and node.attr.value == "is_cuda"
                and not self._stored(node)
                and not self._qname(node)
                and _code(node.value) not in own
            ):
                self.checks.append(self._check(node, "is_cuda"))
        reaches = _project_facts().reaches_device_limited.get(os.path.abspath(path)) if path else None
        for check in self.checks if reaches else ():
            # a check that picks a device (a 'cuda' literal in what it switches on) stays with its branches: the
            # device stays 'cpu'/'cuda'; one that only guards other code (Vim's `if not torch.cuda.is_available():
            # assert mmcv_version >= ...`) is not a device choice
            chooses = any(is_cuda_literal(n) for n in walk_regions(check.regions))
            if chooses and check.unseen is None and check.divides is None:
                check.unseen = reaches

    # ------------------------------------------------------------------ questions rules ask
    def twins(self, check: Check) -> list[Check]:
        """Other checks of the same predicate in the module (they must be migrated alike)."""
        return [c for c in self.checks if c is not check and c.predicate == check.predicate]

    def uses(self, target: cst.BaseExpression) -> list[cst.CSTNode]:
        """Where the value bound to ``target`` is read: a local or module name (through its scope), an
        attribute ``self.x`` (in its class) or ``obj.x`` (in the module). None when not a name or attribute."""
        if type(target) is cst.Name:
            scope = self.scopes.get(target)
            if scope is None:
                return []
            found: list[cst.CSTNode] = []
            binder = self.parents.get(target)  # (a def's or class's assignment is the whole statement)
            for assignment in scope.assignments[target.value]:
                bound = getattr(assignment, "node", None)
                if bound is target or bound is binder:
                    found.extend(a.node for a in assignment.references)
            if len(found) > 1:  # (references are a set: source order keeps the output the same run to run)
                found.sort(key=self._source_order().__getitem__)
            return found
        if type(target) is cst.Attribute and type(target.value) is cst.Name:
            base, attr = target.value.value, target.attr.value
            where: cst.CSTNode = self.part  # (every statement naming `.attr` is in it: see reachable)
            if base in ("self", "cls"):
                where = self._enclosing(target, cst.ClassDef) or self.module
            return [
                n
                for n in _walk(where)
                if type(n) is cst.Attribute
                and n is not target
                and n.attr.value == attr
                and type(n.value) is cst.Name
                and n.value.value == base
                and not self._stored(n)
            ]
        return []

    # ------------------------------------------------------------------ internals
    def _check(self, node: cst.CSTNode, predicate: str, positive: bool = True) -> Check:
        check = Check(node, predicate, _code(node))
        check.key = node
        self._exported: list[str] = []
        self._foreign: str | None = None
        self._seen_regions: list[cst.CSTNode] = []
        self._operands: list[cst.CSTNode] = []
        found = self._follow(node, positive, 0)
        check.operands = self._operands
        check.exported = self._exported[0] if self._exported else None
        check.foreign = self._foreign
        if isinstance(found, str):
            check.unseen = found
            # (a comparison's unseen uses are dropped: what it switches on in sight decides, audiocraft's flag
            # passed to a method then `if flag:`; a value chosen for another library keeps its literals with it;
            # a kept check keeps what it switches on in sight too: glide's `has_cuda` stored in its options and
            # also choosing `th.device('cpu' if not has_cuda else 'cuda')`, whose 'cuda' renamed alone picks
            # the CPU on a TPU host and 'tpu' on a CUDA one)
            check.regions = self._seen_regions
        else:
            check.regions = found
            resource = self._gpu_resource(found) or self._gpu_resource_of_name(node)
            if resource is not None and predicate != "compare":
                # SLM-Lab's {'gpu': n} for Ray Tune, LLaMA-Factory's get_device_name() -> "gpu" read by its Ray
                # launcher: the name of a GPU resource, which a TPU host has none of (trials stay pending)
                check.unseen = (
                    f"it picks {resource}, a GPU resource name (Ray's 'GPU'), which a TPU host has none of"
                )
        return check

    def _follow(self, node: cst.CSTNode, positive: bool, hops: int) -> list[cst.CSTNode] | str:
        """What the check at ``node`` switches on, walking up its expression; the operands an ``and``/``or``
        evaluates after it (``cuda_ok() and torch.cuda.get_device_capability() >= (7, 5)``) go to
        ``self._operands``: they run or not by the check too."""
        child, parent = node, self.parents.get(node)
        while True:
            t = type(parent)
            if t is cst.UnaryOperation and type(parent.operator) is cst.Not:
                positive = not positive
            elif t is cst.IfExp and parent.test is child and (negates := _bool_ifexp(parent)) is not None:
                positive = positive != negates  # `True if check else False` is the check itself
            elif t is cst.BooleanOperation:
                if parent.left is child:
                    self._operands.append(parent.right)
            elif t is cst.Comparison and child is parent.left and _counts(parent):
                pass
            elif t in (cst.GeneratorExp, cst.ListComp, cst.SetComp) and parent.elt is child:
                pass  # `all(t.is_cuda for t in tensors)`: each item's test, combined below
            elif t is cst.Arg and _reduces(self.parents.get(parent)):
                pass
            elif t is cst.Call and _reduces(parent):
                pass
            elif t is cst.Comparison and all(
                type(c.operator) in (cst.Is, cst.Equal) for c in parent.comparisons
            ):
                return "its value is compared with another value"
            else:
                break
            child, parent = parent, self.parents.get(parent)
        t = type(parent)
        if t is cst.IfExp and parent.test is child and (sink := self._foreign_sink(parent)):
            self._foreign = sink
            # through a name: its literals stay with the check
            if type(self.parents.get(parent)) is cst.Assign:
                self._seen_regions.extend([parent.body, parent.orelse])
            if sink.startswith(
                ("pytest.", "parameterized.", "parametrize.", "absl.testing.parameterized.")
            ):  # (a test-case maker: the cases go to the test)
                return f"it chooses the test cases of `{sink}`, kept with them"
            return f"it chooses a value handed to `{sink}`, a library that is not torch"
        if t is cst.IfExp and parent.test is child and (entry := self._framework_sink(parent)):
            if type(self.parents.get(parent)) is cst.Assign:  # (its choices stay with it, as for a library)
                self._seen_regions.extend([parent.body, parent.orelse])
            return (
                f"it chooses a value handed to `{entry}`, which picks its own device (Lightning's default "
                "'auto' is CUDA or the CPU, never the native TPU)"
            )
        if t is cst.IfExp and parent.test is child and self._picks_map_location(parent):
            return (
                "it picks torch.load's map_location: made true on TPU, its None would load a CUDA-saved "
                "checkpoint onto CUDA"
            )
        if t in (cst.If, cst.While, cst.IfExp) and parent.test is child:
            return self._branches(parent, positive)
        if t is cst.Assert and parent.test is child:
            return self._rest_of_block(parent)
        if t is cst.Assign and parent.value is child and hops < _MAX_HOPS:
            regions: list[cst.CSTNode] = []
            unseen: str | None = None
            for target in parent.targets:
                if self._visible_elsewhere(target.target):
                    self._exported.append(_code(target.target))
                uses = self.uses(target.target)
                if type(target.target) not in (cst.Name, cst.Attribute) or (
                    type(target.target) is cst.Attribute and type(target.target.value) is not cst.Name
                ):
                    return f"it is stored in `{_code(target.target)}`"
                for use in uses:
                    if self._under(use, parent.value):
                        continue  # (`x = check and x`: the read on its own right side is the old value)
                    found = self._follow(use, positive, hops + 1)
                    if isinstance(found, str):
                        unseen = unseen or f"`{_code(target.target)}` {found}"
                    else:
                        regions.extend(found)
            if unseen:  # the uses in sight still count where the unseen one is dropped (a comparison's)
                self._seen_regions.extend(regions)
                return unseen
            return regions
        if t is cst.Arg and (loop := self._counted_loop(parent)) is not None:
            return [loop.body]  # `for i in range(device_count()): ...`: the body runs for each device counted
        if t is cst.Arg:
            call = self.parents.get(parent)
            if (
                type(call) is cst.Call
                and _last_name(call.func) in _ASSERT_TRUE
                and call.args
                and call.args[0] is parent
                and type(expr_stmt := self.parents.get(call)) is cst.Expr
            ):
                # `self.assertTrue(torch.cuda.is_available())` (pfrl's GPU tests): an assertion, like `assert check`
                return self._rest_of_block(expr_stmt)
            if type(call) is cst.Call and hops < _MAX_HOPS and (param := self._own_parameter(call, parent)):
                # `id_to_torch(x, cuda=is_cuda)` with `def id_to_torch(aux_id, cuda=False)` in this module (coqui
                # TTS): what the check switches on is what the parameter switches on in that function
                regions: list[cst.CSTNode] = []
                for use in param:
                    found = self._follow(use, positive, hops + 1)
                    if isinstance(found, str):
                        return f"it is passed to `{_code(call.func)}`, where {found}"
                    regions.extend(found)
                return regions
            name = self._qname(call.func) if type(call) is cst.Call else None
            if name and name.split(".")[0] in ("torch", "torch_xla"):
                return []  # a torch argument (pin_memory=, enabled=): torch handles every device alike
            last = _last_name(call.func) if type(call) is cst.Call else None
            if last in _SHOWS or last in _SKIPS:
                return []
            if third_party(name, self.path) or (name is None and self._unbound_root(call.func)):
                self._foreign = name or _code(call.func)
                return f"it is passed to `{self._foreign}`, a library that is not torch"
            return f"it is passed to `{_code(call.func) if type(call) is cst.Call else '?'}`"
        if t in (cst.FormattedStringExpression,):
            return []
        if t is cst.Return and hops < _MAX_HOPS:
            return self._callers(parent, positive, hops)
        if t is cst.Expr:
            return []
        if t is cst.BinaryOperation and type(parent.operator) is cst.Multiply:
            other = parent.left if parent.right is child else parent.right
            if type(other) in (cst.List, cst.Tuple):  # `(torch.device("cuda"),) * torch.cuda.is_available()`
                return [other] if positive else []  # the items exist only where the check holds
        return f"it is used as `{_code(parent)[:40]}`"

    def _divides_work(self, call: cst.CSTNode) -> str | None:
        """The division that ``call`` (a device count) ends up in: ``x / device_count()``, or the count bound to
        a name or attribute that some division in the module takes as its divisor (``args.batch_size /
        ngpus_per_node``, the same name handed on as a parameter, as pytorch/examples' imagenet does). Matched by
        name across the module: over-inclusive on purpose, as the answer only decides rewrite vs flag."""
        parent = self.parents.get(call)
        value = call
        while type(parent) in (cst.IfExp, cst.BooleanOperation) and value is not getattr(
            parent, "test", None
        ):
            value, parent = parent, self.parents.get(parent)  # `device_count() if is_available() else 1`
        if type(parent) is cst.BinaryOperation and type(parent.operator) in _DIVIDE and parent.right is value:
            return _code(parent)  # (torchtune: `os.cpu_count() // (device_count() if is_available() else 1)`)
        while type(parent) is cst.BinaryOperation and parent.left is value:
            # EasyOCR's `ngpus_per_node = torch.cuda.device_count() // 2` (half the host's GPUs train): still a
            # count of the host's devices, bound to the name that divides work and sizes the spawn
            value, parent = parent, self.parents.get(parent)
        if type(parent) is not cst.Assign or parent.value is not value:
            return None
        divisors = self._divisors()
        names = [n for t in parent.targets if (n := _last_name(t.target))]
        return (
            next((divisors[n] for n in names if n in divisors), None)
            or next((self._dividends()[n] for n in names if n in self._dividends()), None)
            or self._launch_count(set(names))
        )

    def _launch_count(self, names: set[str]) -> str | None:
        """A launcher's command line written with the count (MiniCPM-V's ``os.system(f"torchrun
        --nproc-per-node={NGPU} ...")``): one process per GPU of the host; the command's text, else None. (A
        spawn's ``nprocs=`` of the count alone is not one: renamed, it starts one worker on its chip,
        tests/migrate/test_heldout4_classes.py.)"""
        for n in _walk(self.module):
            if type(n) is cst.FormattedString and any(
                type(p) is cst.FormattedStringExpression and _last_name(p.expression) in names
                for p in n.parts
            ):
                text = _code(n)
                if _LAUNCH_WORDS.search(text):
                    return text
        return None

    def _dividends(self) -> dict[str, str]:
        """Names the module divides (``gpus_per_node // cp_degree``: open-instruct's FSDP shard degree from the
        devices of one host), each with its first division; one walk per file."""
        if self._dividend_names is None:
            found: dict[str, str] = {}
            for n in _walk(self.module):
                if type(n) is cst.BinaryOperation and type(n.operator) in _DIVIDE:
                    if (name := _last_name(n.left)) is not None:
                        found.setdefault(name, _code(n))
            self._dividend_names = found
        return self._dividend_names

    def _count_names(self, call: cst.CSTNode) -> set[str]:
        """Names the count is bound to: ``n = device_count()``, ``rank, n = int(...), device_count()``."""
        parent = self.parents.get(call)
        if type(parent) is cst.Assign and parent.value is call:
            return {n for t in parent.targets if (n := _last_name(t.target))}
        element, tup = parent, self.parents.get(parent) if parent is not None else None
        assign = self.parents.get(tup) if tup is not None else None
        if type(element) is cst.Element and type(tup) is cst.Tuple and type(assign) is cst.Assign:
            i = next(k for k, e in enumerate(tup.elements) if e is element)
            out = set()
            for t in assign.targets:
                if type(t.target) in (cst.Tuple, cst.List) and len(t.target.elements) == len(tup.elements):
                    if (n := _last_name(t.target.elements[i].value)) is not None:
                        out.add(n)
            return out
        return set()

    def _ranks_within_host(self, call: cst.CSTNode) -> str | None:
        """``local_rank = rank % device_count()`` whose result is compared by value (``== 0``: the host's first
        process does the host's work; Megatron's ``assert args.local_rank == device``), directly or through one more name (VAR's dist.py keeps it as
        ``__local_rank`` for ``is_local_master()``). TorchTPU counts one device per process, so every process
        would be its host's first. A result only used as a device ordinal (pytorch/examples' imagenet) is not
        matched: that ordinal is dropped wherever it is used."""
        names = self._count_names(call)
        for found in _walk(self.module):
            if not (type(found) is cst.BinaryOperation and type(found.operator) is cst.Modulo):
                continue
            if not (found.right is call or _last_name(found.right) in names):
                continue
            if self._env_written(found):
                # InternVL's SLURM setup: `os.environ['LOCAL_RANK'] = str(proc_id % num_gpus)`, read by DeepSpeed
                # and the Trainer as the process's rank within its host
                return _code(found)
            parent = self.parents.get(found)
            if type(parent) is not cst.Assign or parent.value is not found:
                continue
            if self._text is not None and any(
                type(t.target) is cst.Attribute
                and re.search(rf"{re.escape(_code(t.target))}\s*=[^\n]*\bLOCAL_RANK\b", self._text)
                for t in parent.targets
            ):
                # DETR's init_distributed_mode: `args.gpu = int(os.environ["LOCAL_RANK"])` in one branch, `args.gpu =
                # args.rank % torch.cuda.device_count()` under SLURM: the host-local rank its callers compare
                return _code(found)
            ranks = {n for t in parent.targets if (n := _last_name(t.target))}
            compared, copies = self._compared_and_copied()
            ranks |= {m for r in ranks for m in copies.get(r, ())}
            if ranks & (compared | self._exported_names()):
                return _code(found)
        return None

    def _exported_names(self) -> set[str]:
        """Names assigned into ``os.environ[...]`` (``os.environ['LOCAL_RANK'] = str(gpu)``)."""
        out: set[str] = set()
        for n in _walk(self.module):
            if type(n) is cst.Assign and self._env_written(n.value):
                value = n.value
                if type(value) is cst.Call and type(value.func) is cst.Name and value.func.value == "str":
                    value = value.args[0].value if len(value.args) == 1 else value
                if (name := _last_name(value)) is not None:
                    out.add(name)
        return out

    def _enumerated_devices(self, call: cst.CSTNode) -> str | None:
        """``[f"cuda:{i}" for i in range(device_count())]`` (sentence-transformers' multi-process pool): one device
        name per GPU of the host, each for a worker process of its own. TorchTPU counts one device per process."""
        arg = self.parents.get(call)
        rng = self.parents.get(arg) if type(arg) is cst.Arg else None
        if type(rng) is cst.Call and type(rng.func) is cst.Name and rng.func.value in ("max", "min"):
            arg = self.parents.get(rng)  # `range(max(1, device_count()))`
            rng = self.parents.get(arg) if type(arg) is cst.Arg else None
        if not (type(rng) is cst.Call and type(rng.func) is cst.Name and rng.func.value == "range"):
            return None
        handed = self.parents.get(self.parents.get(rng))
        if type(self.parents.get(rng)) is cst.Arg and type(handed) is cst.Call:
            # tortoise-tts: `parallelize(get_device_map(n_layers, range(max(1, device_count()))))`: a layer map
            # over CUDA ordinals (transformers' GPT-2 model parallelism)
            return f"maps: {_code(handed)}"
        comp_for = self.parents.get(rng)
        comp = self.parents.get(comp_for) if type(comp_for) is cst.CompFor else None
        if type(comp) not in (cst.ListComp, cst.GeneratorExp, cst.SetComp):
            return None
        elt = comp.elt  # type: ignore[union-attr]
        names = any(
            is_cuda_literal(n)
            or (type(n) is cst.FormattedString and _code(n).strip("fF'\"").startswith("cuda"))
            for n in _walk(elt)
        )
        return f"enumerates: {_code(comp)}" if names else None

    def _named_host_size(self, call: cst.CSTNode) -> str | None:
        """``local_size = torch.cuda.device_count()`` (InternVL's SLURM setup beside ``local_rank = rank %
        device_count()``): the count named as the host's number of processes."""
        names = self._count_names(call)
        if any(_HOST_SIZE_NAME.fullmatch(n) for n in names):
            parent = self.parents.get(call)
            return f"names: {_code(parent)}" if type(parent) is cst.Assign else None
        return None

    def _launch_text(self, call: cst.CSTNode) -> str | None:
        """``f"--num_processes {torch.cuda.device_count()}"`` (LMFlow's accelerate test): the count written into
        a launcher's command line, one process per GPU of the host; the text, else None."""
        parent = self.parents.get(call)
        fstring = self.parents.get(parent) if type(parent) is cst.FormattedStringExpression else None
        if type(fstring) is not cst.FormattedString or not _LAUNCH_WORDS.search(_code(fstring)):
            return None
        at = next(i for i, part in enumerate(fstring.parts) if part is parent)
        before = fstring.parts[at - 1] if at else None
        lead = before.value.rsplit("\n", 1)[-1].lstrip() if type(before) is cst.FormattedStringText else ""
        text = f"{lead}{{{_code(call)}}}"  # (the option and its value: `--num_processes {...}`)
        return text if _LAUNCH_WORDS.search(text) else _code(fstring)

    def _gpus_argument(self, call: cst.CSTNode) -> str | None:
        """``def setup_gpus(gpus): ... return n if n != -1 else torch.cuda.device_count()`` (LoFTR's fix for
        Lightning 1.3): the count answers a ``gpus`` argument (-1: every GPU) and goes where that argument went,
        Lightning's ``Trainer(gpus=...)`` and a world size: a number of CUDA GPUs, which a TPU host has none of."""
        parent = self.parents.get(call)
        while type(parent) in (cst.IfExp, cst.BooleanOperation):
            parent = self.parents.get(parent)
        if type(parent) is not cst.Return:
            return None
        fn = parent
        while fn is not None and type(fn) is not cst.FunctionDef:
            fn = self.parents.get(fn)
        if fn is None:
            return None
        params = (*fn.params.params, *fn.params.kwonly_params)  # type: ignore[attr-defined]
        if any(_GPUS_PARAM.fullmatch(p.name.value) for p in params):
            return f"answers: {fn.name.value}({', '.join(p.name.value for p in params)})"  # type: ignore[attr-defined]
        return None

    def _exported_count(self, call: cst.CSTNode) -> str | None:
        """``os.environ['LOCAL_SIZE'] = str(device_count())`` (InternVL's SLURM setup): the host's process count
        handed to DeepSpeed / the Trainer. TorchTPU counts one device per process, so it would say one."""
        if not self._env_written(call):
            return None
        stmt = self.parents.get(call)
        while stmt is not None and type(stmt) is not cst.Assign:
            stmt = self.parents.get(stmt)
        return f"exported: {_code(stmt)}" if stmt is not None else None

    def _env_written(self, value: cst.CSTNode) -> bool:
        """``value`` (or ``str(value)``) is assigned into ``os.environ[...]``: handed to other programs."""
        parent = self.parents.get(value)
        if type(parent) is cst.Arg:
            call = self.parents.get(parent)
            if type(call) is cst.Call and type(call.func) is cst.Name and call.func.value == "str":
                value, parent = call, self.parents.get(call)
        if type(parent) is not cst.Assign or parent.value is not value:
            return False
        return any(
            type(t.target) is cst.Subscript and _code(t.target.value).endswith("environ")
            for t in parent.targets
        )

    def _compared_and_copied(self) -> tuple[set[str], dict[str, set[str]]]:
        """Names compared by value anywhere in the module (``== 0``, ``args.local_rank == device``; not ``is
        None``), and ``a = b`` copies (b -> {a})."""
        compared: set[str] = set()
        copies: dict[str, set[str]] = {}
        for n in _walk(self.module):
            if type(n) is cst.Comparison and all(type(c.operator) in _ORDER_OPS for c in n.comparisons):
                sides = [n.left, *(c.comparator for c in n.comparisons)]
                compared |= {m for x in sides if (m := _last_name(x))}
            elif type(n) is cst.Assign and (src := _last_name(n.value)) is not None:
                copies.setdefault(src, set()).update(m for t in n.targets if (m := _last_name(t.target)))
        return compared, copies

    def _source_order(self) -> dict[cst.CSTNode, int]:
        """Each node's place in a pre-order walk of the analysed part (source order); one walk per file."""
        if self._order is None:
            order: dict[cst.CSTNode, int] = {}
            todo: list[cst.CSTNode] = [self.part]
            while todo:
                n = todo.pop()
                order[n] = len(order)
                todo.extend(reversed(_children(n)))
            self._order = order
        return self._order

    def _divisors(self) -> dict[str, str]:
        """Names (or attribute names) the module divides by, each with its first division; one walk per file."""
        if self._divisor_names is None:
            found: dict[str, str] = {}
            for n in _walk(self.module):
                t = type(n)
                if t is cst.BinaryOperation and type(n.operator) in _DIVIDE:
                    right = n.right
                    while type(right) is cst.BinaryOperation and type(right.operator) in (
                        cst.Subtract,
                        cst.Add,
                    ):
                        right = right.left  # InternVL's split_model: `num_layers / (world_size - vit_alpha)`
                    divisor = _last_name(right)
                elif t is cst.AugAssign and type(n.operator) in _DIVIDE_ASSIGN:
                    divisor = _last_name(n.value)
                else:
                    continue
                if divisor is not None:
                    found.setdefault(divisor, _code(n))
            self._divisor_names = found
        return self._divisor_names

    def _visible_elsewhere(self, target: cst.BaseExpression) -> bool:
        """A public module-level name or an attribute of something other than self/cls: other modules can
        read it (``from config import USE_CUDA``, ``train(args)`` reading ``args.cuda``), out of this file's sight."""
        if type(target) is cst.Name:
            scope = self.scopes.get(target)
            return isinstance(scope, GlobalScope) and not target.value.startswith("_")
        return (
            type(target) is cst.Attribute
            and type(target.value) is cst.Name
            and target.value.value not in ("self", "cls")
        )

    def _foreign_sink(self, value: cst.CSTNode) -> str | None:
        """The third-party callee (see migrate._foreign) that ``value`` is passed to, through and/or and
        conditional expressions, else None."""
        child, parent = value, self.parents.get(value)
        while type(parent) in (cst.IfExp, cst.BooleanOperation) and child is not getattr(
            parent, "test", None
        ):
            child, parent = parent, self.parents.get(parent)
        if (
            type(parent) is cst.Assign
            and parent.value is child
            and len(parent.targets) == 1
            and type(parent.targets[0].target) is cst.Name
        ):
            # `device = "cuda" if torch.cuda.is_available() else "cpu"` read only by another library's call
            # (coqui's XTTS demo: faster_whisper's WhisperModel(device=device), which takes "cpu"/"cuda"/"auto")
            names = [self._sink_of(use) for use in self.uses(parent.targets[0].target)]
            return names[0] if names and all(names) else None
        return self._sink_of(child)

    def _sink_of(self, value: cst.CSTNode) -> str | None:
        """The third-party callee ``value`` is an argument of, else None."""
        parent = self.parents.get(value)
        if type(parent) is not cst.Arg:
            return None
        call = self.parents.get(parent)
        if (
            type(call) is cst.Call
            and type(call.func) is cst.Attribute
            and call.func.attr.value in _TORCH_MOVES
        ):
            return (
                None  # `AutoModel.from_pretrained(...).to(DEVICE)`: a module's own .to(), torch's (CogVideo)
            )
        name = self._qname(call.func) if type(call) is cst.Call else None
        return name if third_party(name, self.path) else None

    def _unbound_root(self, func: cst.BaseExpression) -> bool:
        """``faiss.Kmeans`` where nothing in the file binds ``faiss`` where it is called (imported inside
        another function, or by the caller): not code this file shows, so treated as another library's."""
        root = func
        while type(root) is cst.Attribute:
            root = root.value
        if type(root) is not cst.Name or root is func:
            return False
        scope = self.scopes.get(root)
        return scope is not None and root.value not in scope

    def _framework_sink(self, value: cst.CSTNode) -> str | None:
        """The framework entry point (Lightning Trainer/Fabric, composer's Trainer, transformers'
        TrainingArguments) that ``value`` reaches as an argument, directly or through one local name
        (`precision = "bf16-true" if torch.cuda.is_available() else "32-true"; Fabric(precision=precision)`).
        Such a framework chooses the device itself, so a check made true by the migration changes its
        settings for a device it does not use. (Module-wide context: the name's uses, through its scope.)"""
        child, parent = value, self.parents.get(value)
        while type(parent) in (cst.IfExp, cst.BooleanOperation) and child is not getattr(
            parent, "test", None
        ):
            child, parent = parent, self.parents.get(parent)
        args: list[cst.CSTNode] = []
        if type(parent) is cst.Arg:
            args.append(parent)
        elif type(parent) is cst.Assign and parent.value is child and len(parent.targets) == 1:
            if type(parent.targets[0].target) is cst.Name:
                args.extend(self.parents.get(use) for use in self.uses(parent.targets[0].target))
        for arg in args:
            call = self.parents.get(arg) if type(arg) is cst.Arg else None
            name = self._qname(call.func) if type(call) is cst.Call else None
            if name in FRAMEWORK_ENTRIES:
                return name.rsplit(".", 1)[1]
        if type(parent) is cst.Assign and parent.value is child and len(parent.targets) == 1:
            if type(parent.targets[0].target) is cst.Name and _LIGHTNING_TRAINER.search(self._source_text()):
                # `device = ... if cuda else cpu` read inside a LightningModule or Callback (Lightning's UvA
                # energy-model notebook: fake images made on it meet the real ones Lightning put on the CPU)
                for use in self.uses(parent.targets[0].target):
                    cls = self._enclosing(use, cst.ClassDef)
                    if cls is not None and any(_LIGHTNING_CLASS.search(_code(b.value)) for b in cls.bases):
                        return "Trainer"  # (through the LightningModule that reads it)
        return None

    def _gpu_resource(self, regions: list[cst.CSTNode]) -> str | None:
        """The first GPU resource name in ``regions``: a 'gpu' key of a dict, a 'gpu' the function returns
        (directly or through the name it is assigned to), a ``num_gpus=``-like keyword; else None. A 'gpu' label
        only compared or printed in its function (sam2's ``orig_device``) is no resource."""
        for region in regions:
            for n in _walk(region):
                if type(n) is cst.Arg and n.keyword is not None and _GPU_KEYWORD.search(n.keyword.value):
                    return f"`{n.keyword.value}=`"
                if type(n) is not cst.SimpleString or not _GPU_LITERAL.match(n.value):
                    continue
                parent = self.parents.get(n)
                if type(parent) is cst.DictElement and parent.key is n or type(parent) is cst.Return:
                    return n.value
                if (
                    type(parent) is cst.Assign
                    and len(parent.targets) == 1
                    and type(parent.targets[0].target) is cst.Name
                ):
                    name = parent.targets[0].target.value
                    fn = self._enclosing(parent, cst.FunctionDef)
                    if fn is not None and any(
                        type(r) is cst.Return and type(r.value) is cst.Name and r.value.value == name
                        for r in _walk(fn)
                    ):
                        return n.value
        return None

    def _gpu_resource_of_name(self, node: cst.CSTNode) -> str | None:
        """``gpus = 1 if torch.cuda.is_available() else 0`` whose name then goes into ``{"gpu": gpus}`` or
        ``num_gpus=gpus`` (a resource request), else None."""
        parent = self.parents.get(node)
        while (
            parent is not None
            and type(parent) is not cst.Assign
            and not isinstance(parent, cst.BaseStatement)
        ):
            parent = self.parents.get(parent)
        if (
            type(parent) is not cst.Assign
            or len(parent.targets) != 1
            or type(parent.targets[0].target) is not cst.Name
        ):
            return None
        for use in self.uses(parent.targets[0].target):
            holder = self.parents.get(use)
            if (
                type(holder) is cst.DictElement
                and holder.value is use
                and type(holder.key) is cst.SimpleString
            ):
                if _GPU_LITERAL.match(holder.key.value):
                    return holder.key.value
            if (
                type(holder) is cst.Arg
                and holder.keyword is not None
                and _GPU_KEYWORD.search(holder.keyword.value)
            ):
                return f"`{holder.keyword.value}=`"
        return None

    def _source_text(self) -> str:
        text = getattr(self, "_text", None)
        if text is None:
            text = self._text = _code(self.module)
        return text

    def _callers(self, ret: cst.Return, positive: bool, hops: int) -> list[cst.CSTNode] | str:
        """A check returned by a function: what its calls in this module control."""
        fn = self._enclosing(ret, cst.FunctionDef)
        if fn is None or type(self.parents.get(self.parents.get(fn))) is cst.ClassDef:
            return "it is returned to callers"
        calls = self.uses(fn.name) if fn.name.value else []
        if not calls:
            return f"it is returned by `{fn.name.value}()` to callers outside this file"
        regions: list[cst.CSTNode] = []
        for use in calls:
            call = self.parents.get(use)
            if type(call) is not cst.Call or call.func is not use:
                return f"`{fn.name.value}` is used as a value"
            found = self._follow(call, positive, hops + 1)
            if isinstance(found, str):
                return f"`{fn.name.value}()` {found}"
            regions.extend(found)
        return regions

    def _branches(self, stmt: cst.CSTNode, positive: bool) -> list[cst.CSTNode]:
        if positive:
            return [stmt.body]
        regions: list[cst.CSTNode] = []
        orelse = stmt.orelse
        if orelse is not None:
            regions.append(orelse.body if type(orelse) is cst.Else else orelse)
        if type(stmt) is cst.If and _ends(stmt.body):
            regions.extend(self._rest_of_block(stmt))
        return regions

    def _rest_of_block(self, stmt: cst.CSTNode) -> list[cst.CSTNode]:
        block = self.parents.get(stmt)
        if type(block) is cst.SimpleStatementLine:  # `assert check`: the rest of its line, then of its block
            small = list(block.body)
            at = next((i for i, x in enumerate(small) if x is stmt), len(small))
            after = small[at + 1 :]
            return [*after, *self._rest_of_block(block)]
        if type(block) is cst.If:  # an elif: its own block is the outer if's
            return []
        if type(block) is cst.Module:
            # a script's top-level assert guards the whole script: the functions defined above it run after it
            # (modded-nanogpt's loaders and optimizers, defined before `assert torch.cuda.is_available()`)
            return [s for s in block.body if s is not stmt]
        body = getattr(block, "body", None)
        if not isinstance(body, (list, tuple)):
            return []
        for i, s in enumerate(body):
            if s is stmt:
                return list(body[i + 1 :])
        return []

    def _own_parameter(self, call: cst.Call, arg: cst.Arg) -> list[cst.CSTNode] | None:
        """The reads, in its body, of the parameter that ``arg`` binds when ``call`` calls a function defined at this
        module's top level (not redefined, no ``*args``/``**kwargs`` binding it), else None."""
        if type(call.func) is not cst.Name:
            return None
        defs = [s for s in self.module.body if type(s) is cst.FunctionDef and s.name.value == call.func.value]
        if len(defs) != 1 or any(a.star for a in call.args):
            return None
        fn = defs[0]
        if fn not in self.parents:  # (a helper the part calls but that holds no check: read it now)
            self.parents.update(_parents(cst.Module(body=[fn])))
            self.parents[fn] = self.module
        params = [*fn.params.posonly_params, *fn.params.params]
        if arg.keyword is not None:
            names = [p.name.value for p in (*params, *fn.params.kwonly_params)]
            name = arg.keyword.value if arg.keyword.value in names else None
        else:
            i = [a for a in call.args if a.keyword is None].index(arg)
            name = params[i].name.value if i < len(params) else None
        if name is None:
            return None
        reads = []
        for n in _walk(fn.body):
            if type(n) is not cst.Name or n.value != name:
                continue
            up = self.parents.get(n)
            if up is None:
                return None  # (outside what the flow layer has read: no answer)
            if not (type(up) is cst.Attribute and up.attr is n) and not self._stored(n):
                reads.append(n)
        return reads

    def _picks_map_location(self, value: cst.IfExp) -> bool:
        """``value`` is a ``map_location=`` argument with a None branch (no mapping: a CUDA-saved checkpoint loads
        onto CUDA), directly or through the one name it is assigned to (pfrl's agent: ``map_location =
        torch.device("cpu") if not torch.cuda.is_available() else None``)."""
        if not any(type(b) is cst.Name and b.value == "None" for b in (value.body, value.orelse)):
            return False  # (`'cuda' if ok else 'cpu'`: both name a device, and the migrated one loads onto 'tpu')
        parent = self.parents.get(value)
        uses: list[cst.CSTNode] = [value]
        if (
            type(parent) is cst.Assign
            and len(parent.targets) == 1
            and type(parent.targets[0].target) is cst.Name
        ):
            uses = self.uses(parent.targets[0].target)
        for use in uses:
            a = self.parents.get(use)
            if type(a) is not cst.Arg:
                continue
            if a.keyword is not None and a.keyword.value == "map_location":
                return True
            call = self.parents.get(a)  # torch.load(f, map_location): its second positional argument
            if a.keyword is None and type(call) is cst.Call and self._qname(call.func) == "torch.load":
                if [x for x in call.args if x.keyword is None].index(a) == 1:
                    return True
        return False

    def _under(self, node: cst.CSTNode, ancestor: cst.CSTNode) -> bool:
        p: cst.CSTNode | None = node
        while p is not None and p is not ancestor:
            p = self.parents.get(p)
        return p is ancestor

    def _enclosing(self, node: cst.CSTNode, kind: type) -> cst.CSTNode | None:
        p = self.parents.get(node)
        while p is not None and type(p) is not kind:
            p = self.parents.get(p)
        return p

    def _stored(self, node: cst.CSTNode) -> bool:
        """Whether ``node`` is assigned to (an assignment, augmented or annotated, or a loop target): the load /
        store half of libcst's ExpressionContextProvider, from the parents already computed."""
        parent = self.parents.get(node)
        t = type(parent)
        if t in (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For):
            return parent.target is node
        return t in (cst.Tuple, cst.List, cst.Element) and self._stored(parent)

    def _counted_loop(self, arg: cst.CSTNode) -> cst.For | None:
        """The ``for`` loop whose iterable is ``range(<arg>)`` (stable-dreamfusion's ``for i in
        range(torch.cuda.device_count()): torch.cuda.mem_get_info(i)``), else None."""
        call = self.parents.get(arg)
        if type(call) is not cst.Call or _last_name(call.func) != "range" or len(call.args) != 1:
            return None
        loop = self.parents.get(call)
        return loop if type(loop) is cst.For and loop.iter is call else None

    def _truth_use(self, node: cst.CSTNode) -> bool:
        """Whether ``node``'s value is used as a truth value (a test, `not`, and/or, `> 0`, a loop over
        ``range(count)``, which runs only where it is above 0)."""
        parent = self.parents.get(node)
        t = type(parent)
        if t is cst.Arg and self._counted_loop(parent) is not None:
            return True
        if t is cst.Assign and parent.value is node and len(parent.targets) == 1:
            target = parent.targets[0].target  # `num = device_count()` ... `for i in range(num):`
            if type(target) is cst.Name:
                return any(
                    type(arg := self.parents.get(use)) is cst.Arg and self._counted_loop(arg) is not None
                    for use in self.uses(target)
                )
        if t in (cst.If, cst.While, cst.IfExp, cst.Assert):
            return parent.test is node
        if t is cst.Comparison:
            return parent.left is node and _counts(parent)
        return (t is cst.UnaryOperation and type(parent.operator) is cst.Not) or t is cst.BooleanOperation

    def kept_test(self, node: cst.CSTNode) -> bool:
        """A flagged literal inside a comparison: its test stays false on TPU, so it switches nothing on."""
        parent = self.parents.get(node)
        return type(node) is cst.SimpleString and type(parent) in (cst.Comparison, cst.ComparisonTarget)

    def _names(self, node: cst.CSTNode) -> set:
        """libcst's QualifiedNameProvider answer, computed for this node only."""
        scope = self.scopes.get(node)
        return set(scope.get_qualified_names_for(node)) if scope is not None else set()

    def _qname(self, node: cst.CSTNode) -> str | None:
        """The imported name ``node`` stands for (``torch.cuda.is_available``), else None."""
        found = sorted(q.name for q in self._names(node) if q.source is QualifiedNameSource.IMPORT)
        return canonical(found[0]) if found else None

    def collective(self, region: cst.CSTNode) -> str | None:
        """The first torch.distributed call in ``region`` (a collective a multi-process job runs), else None."""
        for n in _walk(region):
            if type(n) is cst.Call and (q := self._qname(n.func)) and q.startswith("torch.distributed."):
                return _code(n.func)
        return None

    def fed_literals(self, c: Check) -> list[cst.CSTNode]:
        """The device literals that reach the value a kept comparison tests: within its function, the parameter's
        default, an assignment to it, the list a ``for`` over it walks, and the lists it is tested against
        (``args.device in ['cpu', 'cuda', 'mps']``); for an option's value (``args.device``), the option's default
        and choices in the module's parser. They stay with the comparison, or the two disagree on TPU (mmcv's
        profiler hook: ``activities=['cpu', 'cuda']`` walked by ``for activity in activities`` and tested
        ``activity == 'cuda'``: renamed alone, the default raises "activity should be 'cpu' or 'cuda'" on every
        call; nnUNet's ``-device`` default and its assert list renamed while ``args.device == 'cuda'`` stays: a
        TPU host falls through to ``torch.device('mps')``)."""
        if c.predicate != "compare" or type(c.node) is not cst.Comparison:
            return []
        sides = (c.node.left, *(x.comparator for x in c.node.comparisons))
        names = {side.value for side in sides if type(side) is cst.Name}
        options = {
            side.attr.value for side in sides if type(side) is cst.Attribute and type(side.value) is cst.Name
        }
        fn = self._enclosing(c.node, cst.FunctionDef) if names or options else None
        if fn is None and not options:
            return []
        nodes = list(_walk(fn)) if fn is not None else list(_walk(self.part))
        for n in nodes:
            if type(n) is cst.For and type(n.target) is cst.Name and n.target.value in names:
                if type(n.iter) is cst.Name:
                    names.add(n.iter.value)
        out: list[cst.CSTNode] = []
        for n in nodes:
            if type(n) is cst.Param and n.name.value in names and n.default is not None:
                value = n.default
            elif type(n) is cst.Assign and any(
                type(t.target) is cst.Name and t.target.value in names for t in n.targets
            ):
                value = n.value
            elif type(n) is cst.Comparison and n is not c.node and _tests_subject(n, names, options):
                value = n  # (the lists and literals the same value is tested against)
            else:
                continue
            out += [s for s in _walk(value) if type(s) is cst.SimpleString and _TESTED_LITERAL.match(s.value)]
        if options:
            out += _option_literals(self.part, options)
        return out

    def cuda_state_around(self, node: cst.CSTNode) -> str | None:
        """A name of CUDA-only state (``torch.backends.cudnn.enabled``, ``self.cuda_kernel``) anywhere in the
        function around ``node``: ``if x.device.type != "cuda": return False`` there decides whether a CUDA path
        may run (stylegan's conv2d_gradfix), whatever the rest of the block does."""
        fn = self._enclosing(node, cst.FunctionDef)
        # (its body and parameters: not its name, MiniGPT-4's `def cuda_enabled(self): return dev.type == "cuda"`,
        # nor its decorators, llm-foundry's `@pytest.mark.gpu`, a test mark and no state)
        for n in (*_walk(fn.params), *_walk(fn.body)) if fn is not None else ():
            if type(n) is cst.Name and cuda_state(n.value):
                # torch's switches of CUDA kernels count; its device-neutral API (get_autocast_gpu_dtype) does not
                api = self._torch_api(n)
                if (not api.startswith("torch.") or api.startswith(_CUDA_SWITCHES)) and not self._set_switch(
                    n
                ):
                    return n.value
        return None

    def _set_switch(self, name: cst.Name) -> bool:
        """``name`` is in the target of ``torch.backends.cudnn.benchmark = False`` (or another switch the rules
        delete or rewrite, TPU213/TPU214): once the run has removed it, it no longer marks a CUDA path, and a
        check judged by it on the first run would be renamed on the second (habitat-lab's inference worker)."""
        node: cst.CSTNode | None = name
        while node is not None and type(node) is not cst.AssignTarget:
            if isinstance(node, cst.BaseSmallStatement | cst.BaseCompoundStatement):
                return False
            node = self.parents.get(node)
        if node is None or type(node.target) is not cst.Attribute:
            return False
        return (self._qname(node.target) or "") in _SET_SWITCHES

    def _torch_api(self, name: cst.Name) -> str:
        """The qualified name of the attribute ``name`` ends (``torch.get_autocast_gpu_dtype``), else ''."""
        p = self.parents.get(name)
        if type(p) is cst.Attribute and p.attr is name:
            q = self._qname(p)
            # an unbound `torch.` chain: the rules resolve it by its text
            if q is None and not self._names(p):
                full = cst.helpers.get_full_name_for_node(p) or ""
                q = full if full.split(".")[0] in ("torch", "torch_xla") else None
            return q or ""
        return ""

    def foreign_call(self, region: cst.CSTNode) -> str | None:
        """A call in ``region`` to code that is neither torch's, a builtin nor a method of a value: kernels,
        fused paths and local helpers that an `is_cuda` test may be selecting."""
        portable: set[int] = set()  # called names of portable project functions (`dataclass_to_cuda_`)
        for n in _walk(region):  # (pre-order: a call comes before the name it calls)
            if type(n) is cst.Call and type(n.func) is cst.Name and self._host_helper(n.func.value):
                portable.add(id(n.func))
                continue
            if type(n) is cst.Name and id(n) in portable:
                continue
            if type(n) is cst.Name and cuda_state(n.value):
                if self._torch_api(n).startswith("torch."):
                    continue  # torch.get_autocast_gpu_dtype, torch.backends.cudnn: torch's API (the rules' job)
                return n.value  # CUDA-only state of the program (self.cuda_config, use_cuda_graph ...)
            if type(n) is not cst.Call:
                continue
            f = n.func
            names = self._names(f)
            if any(q.source is QualifiedNameSource.BUILTIN for q in names) and not (
                type(f) is cst.Name and f.value in self._shadowing
            ):
                continue
            imported = [q.name for q in names if q.source is QualifiedNameSource.IMPORT]
            if imported and all(q.split(".")[0] in _HARMLESS for q in imported):
                continue  # warnings.warn, logging.info ...: no device state
            if imported:
                if not all(q.split(".")[0] == "torch" for q in imported) or any(
                    q in _MULTI_DEVICE for q in imported
                ):
                    return _code(f)
            elif type(f) is cst.Name:
                return _code(f)  # a function or class of this program
            elif type(f) is cst.Attribute and type(f.value) is cst.Name and f.value.value in ("self", "cls"):
                return _code(f)  # a method of this program
            elif type(f) is cst.Attribute and (
                f.attr.value == "apply" or (type(f.value) is cst.Name and f.value.value[:1].isupper())
            ):
                return _code(f)  # an autograd Function or another class of the program
        return None

    def reaches_cuda(self, call: cst.Call) -> str | None:
        """A call of a project function or class, or of a method of a local bound to one (``mem =
        MemMeter(...)`` ... ``mem.update()``), whose code calls torch.cuda that the run leaves as written
        (migrate._host): a check switching it on must stay CUDA's (sam2's trainer guards ``mem.update`` with
        ``torch.cuda.is_available()``; the method resets CUDA's peak memory statistics). -> the CUDA call."""
        f = call.func
        if type(f) is cst.Name:
            name = f.value
        elif type(f) is cst.Attribute and type(f.value) is cst.Name and f.value.value not in ("self", "cls"):
            name = self._bound_class(f.value)
        else:
            return None
        if name is None or not name[:1].isalpha() or name in _BUILTIN_NAMES:
            return None
        return self._hosts().cuda_call_in(name)

    def cuda_only_import(self, node: cst.Import | cst.ImportFrom) -> str | None:
        """The project module ``node`` (an import in a check's branch) loads, when it is CUDA-only (migrate._host)."""
        if type(node) is cst.ImportFrom:
            if isinstance(node.names, cst.ImportStar):
                return None
            level = len(node.relative)
            module = (
                (cst.helpers.get_full_name_for_node(node.module) or "") if node.module is not None else ""
            )
            names = [cst.helpers.get_full_name_for_node(a.name) or "" for a in node.names]
        else:
            level, names = 0, []
            module = cst.helpers.get_full_name_for_node(node.names[0].name) or ""
        return self._hosts().cuda_only_import(level, module, names)

    def cuda_only_call(self, call: cst.Call) -> str | None:
        """The CUDA-only module a call goes to (``ngram_repeat_block_cuda.forward(...)``), else None."""
        q = self._qname(call.func)
        last = call.func.attr.value if type(call.func) is cst.Attribute else q.rsplit(".", 1)[-1] if q else ""
        if (m := _STACK_SWITCH.fullmatch(last)) is not None:
            # diffusers' is_xformers_available() / unet.enable_xformers_memory_efficient_attention() (AnimateDiff's
            # app): a probe or a switch of a CUDA-only stack, whatever module it lives in
            return m.group(1)
        if not q or self._cuda_only is None or q.startswith("torch"):
            return None
        module = q.rsplit(".", 1)[0] if "." in q else q
        return module if self._cuda_only(module, self.path or "") else None

    def _bound_class(self, var: cst.Name) -> str | None:
        """The class a local is built from in its function (``mem = MemMeter(...)``), when it is bound once."""
        scope = self._enclosing(var, cst.FunctionDef) or self.module
        built = [
            n.value.func.value
            for n in _walk(scope)
            if type(n) is cst.Assign
            and len(n.targets) == 1
            and type(n.targets[0].target) is cst.Name
            and n.targets[0].target.value == var.value
            and type(n.value) is cst.Call
            and type(n.value.func) is cst.Name
        ]
        return built[0] if len(built) == 1 and built[0][:1].isupper() else None

    def _host_helper(self, name: str) -> bool:
        """``name`` is a function of this file or of a project file it imports that is host code
        (migrate._host): it selects no CUDA-only path."""
        return self._hosts().is_host(name)

    def _hosts(self) -> HostHelpers:
        """The cross-file answers for this file, made on first use (a module given alone: its own text is the
        whole file)."""
        if self._host is None:
            self._host = HostHelpers(self.module.code, self.path, self._cuda_only)
        return self._host


#: A framework's device name for CUDA (Lightning's accelerator="gpu", catboost's task_type="GPU").
_GPU_LITERAL = re.compile(r"""^[rRuU]?(['"])(?i:gpu)\1$""")
#: Builtins are never the program's own code.
_BUILTIN_NAMES = frozenset(dir(builtins))


def _compared_cuda_literal(cmp: cst.Comparison) -> cst.SimpleString | None:
    """The 'cuda' literal a one-operator equality or membership test compares with, else None."""
    if len(cmp.comparisons) != 1:
        return None
    op = type(cmp.comparisons[0].operator)
    if op not in (cst.Equal, cst.NotEqual, cst.In, cst.NotIn):
        return None
    for side in (cmp.left, cmp.comparisons[0].comparator):
        if type(side) is cst.SimpleString and _TESTED_LITERAL.match(side.value):
            return side
    return None


def _positive(cmp: cst.Comparison) -> bool:
    return type(cmp.comparisons[0].operator) in (cst.Equal, cst.In)


def _bool_ifexp(node: cst.IfExp) -> bool | None:
    """``True if x else False`` -> False (x itself), ``False if x else True`` -> True (not x); None for any
    other conditional expression (it chooses between values, and the flow follows what it chooses)."""
    body, orelse = node.body, node.orelse
    if (
        type(body) is cst.Name
        and type(orelse) is cst.Name
        and {body.value, orelse.value} == {"True", "False"}
    ):
        return body.value == "False"
    return None


def _counts(cmp: cst.Comparison) -> bool:
    """``device_count() > 0`` / ``>= 1`` / ``> 1`` / ``!= 1`` (EasyOCR's eval: more than one GPU, or none): still a
    test of the devices CUDA has, not a count put to use."""
    return all(
        type(c.operator) in (cst.GreaterThan, cst.GreaterThanEqual)
        or (
            type(c.operator) is cst.NotEqual
            and type(c.comparator) is cst.Integer
            and c.comparator.value == "1"
        )
        for c in cmp.comparisons
    )


def _ends(block: cst.BaseSuite) -> bool:
    """Whether a block always leaves (return, raise, continue, break, sys.exit) at its end."""
    body = getattr(block, "body", ())
    if not body:
        return False
    last = body[-1]
    if type(last) is cst.SimpleStatementLine:
        small = last.body[-1]
        if type(small) in (cst.Return, cst.Raise, cst.Continue, cst.Break):
            return True
        if type(small) is cst.Expr and type(small.value) is cst.Call:
            return _last_name(small.value.func) in ("exit", "_exit")
    return False


#: Names of settings that choose a device in frameworks (accelerator=, device=, task_type=, backend=): keywords.
_DEVICE_SETTING = re.compile(r"(?i)accel|device|task_type|backend|platform")
#: ... and names that hold one for a framework (a variable `orig_device = "gpu"` compared later is only a label).
_DEVICE_SETTING_NAME = re.compile(r"(?i)accelerator|task_type")


def _device_setting(flow: Flow, literal: cst.SimpleString) -> bool:
    """The literal is the value of a device setting: ``accelerator = "gpu"``, ``Trainer(accelerator="gpu")``,
    ``cfg["accelerator"] = "gpu"`` (a label such as ``orig_device = "gpu"``, compared later, is not)."""
    child, p = literal, flow.parents.get(literal)
    while p is not None and not isinstance(p, cst.BaseStatement):
        if type(p) is cst.Arg and p.keyword is not None:
            return _DEVICE_SETTING.search(p.keyword.value) is not None
        if type(p) in (cst.Assign, cst.AnnAssign, cst.AugAssign) and getattr(p, "value", None) is child:
            targets = [t.target for t in p.targets] if type(p) is cst.Assign else [p.target]
            return any(_DEVICE_SETTING_NAME.search(_code(t)) for t in targets)
        if type(p) is cst.DictElement and p.value is child:
            return _DEVICE_SETTING_NAME.search(_code(p.key)) is not None
        child, p = p, flow.parents.get(p)
    return False


#: What names the device itself: renamed for TPU, its value no longer matches a program's tables of NVIDIA GPUs.
_DEVICE_IDENTITY = frozenset(
    f"torch.cuda.{k}" for k in ("get_device_name", "get_device_properties", "get_device_capability")
)


def _device_identity_handed_on(flow: Flow, call: cst.Call) -> str | None:
    """A call of the program's own function (a bare name, not a builtin) given CUDA's device name or properties."""
    if type(call.func) is cst.Name:
        if call.func.value in _BUILTIN_NAMES:
            return None
    elif type(call.func) is cst.Attribute and type(call.func.value) is cst.Name:
        q = flow._qname(call.func)  # `utils.get_device_name(...)`: a function of one of the project's modules
        if q is None or q.startswith("torch") or third_party(q, flow.path):
            return None
    else:
        return None
    for a in call.args:
        for x in _walk(a.value):
            if type(x) is cst.Call and (q := flow._qname(x.func)) in _DEVICE_IDENTITY:
                return q
    return None


def _collection_list(flow: Flow, check: cst.CSTNode) -> str | None:
    """``collect_ignore`` / ``collect_ignore_glob`` written in either branch of the ``if`` the check tests."""
    stmt = flow.parents.get(check)
    while stmt is not None and not isinstance(stmt, cst.BaseStatement):
        stmt = flow.parents.get(stmt)
    if type(stmt) is not cst.If:
        return None
    for n in _walk(stmt):
        if type(n) is cst.Name and n.value in ("collect_ignore", "collect_ignore_glob"):
            return n.value
    return None


def _env_write(flow: Flow, node: cst.CSTNode) -> bool:
    """``os.environ["CUDA_VISIBLE_DEVICES"] = ...``: the variable's name is flagged (TPU uses other variables),
    but setting it changes nothing on a TPU host; the branch that sets it may still run there (Time-Series-
    Library's _acquire_device picks the device in the same branch)."""
    seen = node
    for _ in range(4):
        parent = flow.parents.get(seen)
        if parent is None:
            return False
        if type(parent) is cst.AssignTarget:
            return type(seen) is cst.Subscript and _code(seen.value) in ("os.environ", "environ")
        seen = parent
    return False


def _reduces(node: cst.CSTNode | None) -> bool:
    """``all(...)`` / ``any(...)``: the truth of its items, combined (a test of a test)."""
    return type(node) is cst.Call and type(node.func) is cst.Name and node.func.value in ("all", "any")


def _last_name(f: cst.BaseExpression) -> str | None:
    return f.attr.value if type(f) is cst.Attribute else f.value if type(f) is cst.Name else None


def _tests_subject(cmp: cst.Comparison, names: set[str], options: set[str]) -> bool:
    """``cmp`` tests one of ``names`` or an option value ``x.<option>`` (``args.device in [...]``)."""
    for side in (cmp.left, *(x.comparator for x in cmp.comparisons)):
        if type(side) is cst.Name and side.value in names:
            return True
        if type(side) is cst.Attribute and type(side.value) is cst.Name and side.attr.value in options:
            return True
    return False


def _option_literals(module: cst.CSTNode, options: set[str]) -> list[cst.SimpleString]:
    """Device literals in the ``default=`` and ``choices=`` of the parser options whose value is one of
    ``options`` (``parser.add_argument('-device', default='cuda')`` -> ``args.device``)."""
    out: list[cst.SimpleString] = []
    for n in _walk(module):
        if not (
            type(n) is cst.Call and type(n.func) is cst.Attribute and n.func.attr.value == "add_argument"
        ):
            continue
        flags = [a.value for a in n.args if a.keyword is None and type(a.value) is cst.SimpleString]
        dest = next((a.value for a in n.args if a.keyword is not None and a.keyword.value == "dest"), None)
        if type(dest) is cst.SimpleString:
            names = {dest.evaluated_value}
        else:
            names = {str(f.evaluated_value).lstrip("-").replace("-", "_") for f in flags}
        if not names & options:
            continue
        for a in n.args:
            if a.keyword is not None and a.keyword.value in ("default", "choices"):
                out += [
                    s
                    for s in _walk(a.value)
                    if type(s) is cst.SimpleString and _TESTED_LITERAL.match(s.value)
                ]
    return out


def _walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    todo = [node]
    while todo:
        n = todo.pop()
        yield n
        todo.extend(_children(n))


def _parents(module: cst.Module) -> dict[cst.CSTNode, cst.CSTNode]:
    """child -> parent for every node under ``module`` but punctuation and whitespace (names.TRIVIA: no name,
    string or statement inside; no question is asked of them), in ParentNodeProvider's order (each node's
    children are entered when it is left, post-order)."""
    parents: dict[cst.CSTNode, cst.CSTNode] = {}
    stack: list[tuple[cst.CSTNode, list[cst.CSTNode] | None]] = [(module, None)]
    while stack:
        node, kids = stack.pop()
        if kids is None:
            kids = _children(node, _TRIVIA)
            stack.append((node, kids))
            stack.extend((k, None) for k in reversed(kids))
        else:
            for k in kids:
                parents[k] = node
    return parents


#: Text that makes a top-level statement worth including: an import, or a check (see _WORTH).
_IMPORT = re.compile(r"\bimport\b")
_ALIAS = re.compile(r"\b(?:is_available|device_count|is_torch_cuda_available)\s+as\s+(\w+)")


def reachable(module: cst.Module, texts: list[str] | None) -> tuple[cst.Module, frozenset[str]]:
    """The part of ``module`` a check's effect can reach, and the module-level names bound outside it.

    The part holds the same statement objects: every top-level statement that imports something or holds a
    check, then, to a fixed point, every one that names something a part statement binds at module level
    (a name, a function) or an attribute it stores on anything but ``self``/``cls`` (those stay in their
    class). What is left out cannot read a flag, call a function or see an attribute of the part, so the
    answers are those of the whole module. Without ``texts`` the whole module is analysed.
    """
    if texts is None or len(texts) != len(module.body):
        return module, frozenset()
    worth = [_WORTH.search(t) is not None or _IMPORT.search(t) is not None for t in texts]
    aliases = {m.group(1) for t in texts for m in _ALIAS.finditer(t)}
    words: set[str] = set(aliases)
    seen: set[str] = set()
    bound: dict[int, set[str]] = {}  # statement index -> what it binds (computed once)
    while True:
        new = words - seen
        if new:
            rx = re.compile(r"\b(?:" + "|".join(sorted(map(re.escape, new))) + r")\b")
            worth = [w or rx.search(t) is not None for w, t in zip(worth, texts, strict=True)]
            seen |= new
        for i, (stmt, w) in enumerate(zip(module.body, worth, strict=True)):
            if w and i not in bound:
                bound[i] = _module_bindings(stmt)
                words |= bound[i]
        if words <= seen:
            break
    part = [s for s, w in zip(module.body, worth, strict=True) if w]
    if len(part) == len(module.body):
        return module, frozenset()
    shadowing: set[str] = set()
    for stmt, w in zip(module.body, worth, strict=True):
        if not w:
            shadowing |= _module_bindings(stmt)
    return module.with_changes(body=part), frozenset(shadowing)


def _module_bindings(stmt: cst.CSTNode) -> set[str]:
    """Names ``stmt`` binds at module level (outside functions and classes, or declared global) and
    attributes it stores on objects other than self/cls, anywhere in it."""
    out: set[str] = set()
    todo: list[tuple[cst.CSTNode, bool]] = [(stmt, True)]
    while todo:
        n, top = todo.pop()
        t = type(n)
        if t in (cst.Import, cst.ImportFrom):
            continue  # (every import is in the part already)
        if t in (cst.FunctionDef, cst.ClassDef):
            if top:
                out.add(n.name.value)
            top = False
        elif t is cst.Global:
            out.update(g.name.value for g in n.names)
        elif t in (
            cst.AssignTarget,
            cst.AnnAssign,
            cst.AugAssign,
            cst.For,
            cst.NamedExpr,
            cst.WithItem,
            cst.AsName,
        ):
            target = getattr(n, "target", None) or getattr(n, "asname", None) or getattr(n, "name", None)
            for x in _walk(target) if isinstance(target, cst.CSTNode) else ():
                if type(x) is cst.Name and top:
                    out.add(x.value)
                elif type(x) is cst.Attribute and not (
                    type(x.value) is cst.Name and x.value.value in ("self", "cls")
                ):
                    out.add(x.attr.value)
        todo.extend((c, top) for c in _children(n, _TRIVIA))
    return out


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node).strip()


def walk_regions(regions: list[cst.CSTNode]) -> Iterator[cst.CSTNode]:
    """Every node inside the given regions."""
    for r in regions:
        yield from _walk(r)


def is_cuda_literal(node: cst.CSTNode) -> bool:
    """A string literal that names CUDA as a device (``"cuda"``, ``'cuda:0'``)."""
    return type(node) is cst.SimpleString and _CUDA_LITERAL.match(node.value) is not None


#: A parameter naming a number of GPUs the caller asks for (``gpus``, ``n_gpus``, ``num_gpus``).
_GPUS_PARAM = re.compile(r"(?:n_?|num_?)?gpus")

#: How a count of the host's devices is used, by the tag flow.Flow gives it (see Flow.__init__), and why that keeps
#: it CUDA's; ``{}`` is the code that uses it.
_PER_HOST_USES = {
    "enumerates: ": (
        "names one device per GPU (`{}`), each for a worker process of its own: TorchTPU binds one chip per "
        "process, so every worker would ask for the chip this process holds; bind each worker first "
        "(torch.tpu.distributed.set_tpu_launch_env) or keep the workers on 'cpu'"
    ),
    "names: ": (
        "names it the host's process count (`{}`): TorchTPU counts one device per process, so every host would "
        "count one; under torchrun use int(os.environ['LOCAL_WORLD_SIZE'])"
    ),
    "maps: ": (
        "spreads a model over that many GPUs (`{}`): TorchTPU counts one device per process; keep the model whole "
        "on 'tpu', or shard it with DTensor"
    ),
    "answers: ": (
        "answers a `gpus` argument with every GPU of the host (`{}`), a count for a framework's `gpus=` (Lightning "
        "1.x) or a launcher: TorchTPU counts one device per process, and Lightning's `gpus=` means CUDA; give the "
        "TPU run its own `accelerator=`/`devices=` setting"
    ),
    "exported: ": (
        "hands it to other programs (`{}`): TorchTPU counts one device per process, so every host would say it "
        "runs one; under torchrun use int(os.environ['LOCAL_WORLD_SIZE'])"
    ),
}


def _per_host_use(divides: str) -> str | None:
    """Why a count tagged with one of _PER_HOST_USES stays CUDA's, else None (a plain division or a rank)."""
    for tag, why in _PER_HOST_USES.items():
        if divides.startswith(tag):
            return f"{PER_HOST} and " + why.format(divides[len(tag) : len(tag) + 60])
    return None


#: Names of a CUDA-only path (a CUDA graph, Triton, a CUDA extension or kernel); not ``use_cuda`` / ``use_gpu``, which
#: mostly mean "use the accelerator", nor torch's cuDNN probe, which goes with the CUDA check
#: (tests/migrate/test_heldout24_classes.py, CodeFormer's get_device).
_CUDA_ONLY_PATH = re.compile(r"(?i)cuda_?graph|cudagraph|triton|cuda_?(?:ext|kernel)")


def _and_cuda_only_state(flow: Flow, node: cst.CSTNode) -> str | None:
    """An operand and-ed with the check that names a CUDA-only path (``use_cuda_graph``): its code, else None."""
    root = node
    while type(parent := flow.parents.get(root)) is cst.BooleanOperation and type(parent.operator) is cst.And:
        root = parent
    if root is node:
        return None
    for n in _walk(root):
        if type(n) in (cst.Name, cst.Attribute) and n is not node:
            last = n.value if type(n) is cst.Name else n.attr.value
            if _CUDA_ONLY_PATH.search(last):
                return _code(n)
    return None


def _kept_half(flow: Flow, node: cst.CSTNode, flagged: set[int]) -> str | None:
    """A ``.is_cuda`` the pass flagged and kept in the same boolean test as ``node`` (``not x.is_cuda and
    cuda.is_available()``): its code, else None."""
    root = node
    while type(parent := flow.parents.get(root)) in (cst.BooleanOperation, cst.UnaryOperation):
        root = parent
    if root is node:
        return None
    for n in _walk(root):
        if type(n) is cst.Attribute and n.attr.value == "is_cuda" and id(n) in flagged:
            return _code(n)
    return None


def checks_to_keep(
    flow: Flow, rewritten: set[int], flagged: set[int], kept: dict[int, str]
) -> dict[int, str]:
    """Checks rewritten by a pass that must be kept (and flagged) instead: id(check) -> why.

    A check is kept when its effect is out of sight, when the code it switches on still holds a finding
    or a CUDA device literal the pass left alone (a dict key, an attribute: data the rest of the program
    reads), or, for ``is_cuda``, when that code calls something that is not torch's. A check kept for data
    keeps its twins (same predicate, same module) too, so that both sides of the data agree.
    """
    checks = {id(c.key) for c in flow.checks}
    new: dict[int, str] = {}
    shares = {id(c.key) for c in flow.checks if c.predicate == "device-count-share"}
    # (counts first: a test that guards a count kept as CUDA's stays with it)
    for c in sorted(flow.checks, key=lambda c: id(c.key) not in shares):
        if id(c.key) in kept or id(c.key) not in rewritten:
            continue
        why = None
        cuda_test = False
        if c.divides is not None and _LAUNCH_WORDS.search(c.divides):
            why = (
                f"{PER_HOST} and starts that many processes (`{c.divides[:60]}`): TorchTPU counts one device "
                "per process, so a TPU host would start one; give the launcher the host's chip count"
            )
        elif c.divides is not None and (per_host := _per_host_use(c.divides)) is not None:
            why = per_host
        elif c.divides is not None:
            derives = "%" in c.divides and "/" not in c.divides
            why = (
                (
                    f"{PER_HOST} and derives a rank within the host (`{c.divides[:60]}`, then compared or exported): "
                    "TorchTPU counts one device per process, so every process would be its host's first; under "
                    "torchrun use int(os.environ['LOCAL_RANK'])"
                )
                if derives
                else (
                    f"{PER_HOST} and divides work (`{c.divides[:60]}`): TorchTPU counts one device "
                    "per process, so every process would keep the whole share; under torchrun use "
                    "int(os.environ['LOCAL_WORLD_SIZE'])"
                )
            )
        elif c.unseen is not None:
            why = f"its effect is out of sight: {c.unseen}"
        elif (
            c.predicate.endswith("is_available") and (state := _and_cuda_only_state(flow, c.node)) is not None
        ):
            # GPT-SoVITS' t2s_model_cudagraph: `request.use_cuda_graph and self.graph is None and
            # torch.cuda.is_available()`: renamed, a TPU host would capture a torch.cuda.CUDAGraph
            why = f"it is and-ed with `{state}`, which asks for a CUDA-only path"
        elif (half := _kept_half(flow, c.node, flagged)) is not None:
            # flair: `if not data.is_cuda and cuda.is_available(): raise` with `.is_cuda` kept (TPU106): renamed
            # alone, the availability half made every batch on 'tpu' raise "data isnt on cuda"
            why = f"the same test asks `{half}`, kept as written: both halves stay CUDA's"
        elif (
            c.predicate.endswith("device_count")
            and _above_one(flow, c.node)
            and (f := _first(flow.collective(r) for r in c.regions))
        ):
            why = (
                f"it tests for a multi-device job and its branch runs `{f}`; TorchTPU counts one device per "
                "process, so the test turns false: test the world size (dist.get_world_size() > 1) instead"
            )
        elif (c.predicate == "is_cuda" or _tensor_cuda_test(c)) and _shares_memory(flow, c.node):
            # skrl's parallel trainer: `if not obs.is_cuda: obs.share_memory_()` before a multiprocessing queue
            why = (
                "it chooses between CUDA's IPC and `share_memory_()` for tensors sent to other processes: "
                "TorchTPU tensors cannot cross processes, so keep the tensors these processes exchange on the CPU"
            )
        elif (c.predicate == "is_cuda" or (cuda_test := _tensor_cuda_test(c))) and (
            f := _first(flow.foreign_call(r) for r in c.regions)
        ):
            why = f"it selects `{f}`, which may be CUDA-only"
        elif cuda_test and (f := flow.cuda_state_around(c.node)):
            why = f"its function reads CUDA-only state (`{f}`): it selects a CUDA path"
        elif (state := _saved_state_test(flow, c)) is not None:
            # chemprop's checkpoints: `not torch.cuda.is_available() and metric.device.type != "cpu"` rebuilds a
            # metric stored on a GPU; renamed, a TPU host kept the stale CUDA metric and failed at model.to()
            why = (
                f"with `{state}` it asks whether an object placed on a GPU can be used without CUDA (it was "
                "saved on a GPU): on a TPU host the answer is still no"
            )
        elif (suffix := _ordinal_appended(c)) is not None:
            # nerfstudio's trainer: `if self.device == "cuda": self.device += f":{local_rank}"`; renamed, every
            # process of a multi-process run named 'tpu:<local rank>', a device only rank 0 has
            why = (
                f"its branch appends the process's ordinal to the device name (`{suffix[:50]}`): TorchTPU binds "
                "one device per process, so 'tpu' takes no ordinal"
            )
        elif (listed := _collection_list(flow, c.node)) is not None:
            # open-instruct's conftest: `if not torch.cuda.is_available(): collect_ignore += [*_gpu.py]`; renamed,
            # a TPU host collects the GPU test files, whose imports need the CUDA stack
            why = f"it decides which test files pytest collects (`{listed}`)"
        else:
            many = c.predicate.endswith("device_count") and _above_one(flow, c.node)
            for n in walk_regions([*c.operands, *c.regions]):
                if many and type(n) is cst.Call and flow._qname(n.func) in _MULTI_DEVICE:
                    continue  # `if device_count() > 1: DataParallel(m)`: false on TPU either way (TPU407 flags it)
                if (placed := _placement_map_write(n)) is not None:
                    why = (
                        f"it switches on code that fills accelerate's `{placed}`, whose integer keys are CUDA "
                        "ordinals (accelerate never places on 'tpu')"
                    )
                    break
                if type(n) is cst.Assign and (handed := _int_device_handed(flow, n)) is not None:
                    # trlx's examples: `if torch.cuda.is_available(): device = int(LOCAL_RANK) else: device = -1`,
                    # then pipeline(device=device): an int is a CUDA ordinal to transformers' pipeline (no TPU
                    # branch: the CPU); renamed, a TPU host looks migrated and runs the model on the CPU
                    why = (
                        f"it sets `{handed[0]}` to an integer device handed to `{handed[1]}`, where an int is "
                        "a CUDA ordinal (never 'tpu'): give that call the device 'tpu' instead"
                    )
                    break
                if type(n) is cst.Call and (wrapper := _data_parallel_wrapper(flow, n)) is not None:
                    if many:
                        continue  # (as above)
                    why = (
                        f"it switches on `{wrapper}`, a DataParallel wrapper: it splits a batch over the CUDA "
                        "devices of one process, which TorchTPU does not have (one device per process)"
                    )
                    break
                if id(n) in shares and (id(n) in new or id(n) in kept):
                    # torchtune: `os.cpu_count() // (torch.cuda.device_count() if torch.cuda.is_available() else
                    # 1)`: renamed, the test would hand TPU hosts CUDA's count of 0
                    why = (
                        f"it guards `{_code(n)[:50]}`, kept as CUDA's count: {new.get(id(n)) or kept[id(n)]}"
                    )
                    break
                if (
                    id(n) in flagged
                    and id(n) not in checks
                    and not flow.kept_test(n)
                    and not _env_write(flow, n)
                ):
                    why = f"it switches on code with a finding (`{_code(n)[:50]}`)"
                    break
                if type(n) is cst.SimpleString and _GPU_LITERAL.match(n.value) and _device_setting(flow, n):
                    # `accelerator = "gpu"` (lightning-bolts' tests, then Trainer(accelerator=accelerator)): a
                    # framework's name for CUDA, chosen by this check; renamed, a TPU host would ask for CUDA
                    why = f"it switches on code that chooses {n.value}, a framework's name for CUDA"
                    break
                if type(n) is cst.Call and (named := _device_identity_handed_on(flow, n)) is not None:
                    # open-instruct: `get_device_name(torch.cuda.get_device_name(0)) if torch.cuda.is_available()
                    # else None` looks the name up in a table of NVIDIA GPUs; a TPU's name raises there
                    why = f"it hands CUDA's `{named}` to `{_code(n.func)[:40]}` (a key into the program's own data)"
                    break
                if (
                    type(n) in (cst.Import, cst.ImportFrom)
                    and (loads := flow.cuda_only_import(n)) is not None
                ):
                    # fairseq's DynamicConv: `if torch.cuda.is_available(): from ...dynamicconv_layer import
                    # DynamicconvLayer` (a compiled CUDA kernel); renamed, TPU hosts would build the CUDA layer
                    why = f"it switches on an import of the project's `{loads}`, built on a CUDA-only module"
                    break
                if type(n) is cst.Call and (stack := flow.cuda_only_call(n)) is not None:
                    why = f"it switches on `{_code(n.func)[:40]}`, of the CUDA-only `{stack}`"
                    break
                if type(n) is cst.Call and (reach := flow.reaches_cuda(n)) is not None:
                    why = f"it switches on `{_code(n.func)[:40]}`, whose code calls `{reach}` (CUDA-only)"
                    break
                if is_cuda_literal(n) and id(n) not in rewritten and id(n) not in kept:
                    why = f"it switches on code that keeps {n.value} as data"
                    for twin in flow.twins(c) if c.predicate != "compare" else ():
                        if id(twin.key) not in kept:
                            new.setdefault(id(twin.key), f"a twin check of the same predicate ({why})")
                    break
        if why is not None:
            new[id(c.key)] = why + _unset_without_else(flow, c)
    new.update(_state_twins(flow, rewritten, {**kept, **new}, flagged))
    new.update(_reported_twins(flow, rewritten, {**kept, **new}))
    new.update(_placement_twins(flow, rewritten, {**kept, **new}))
    return {k: v for k, v in new.items() if k not in kept}


def _unset_without_else(flow: Flow, c: Check) -> str:
    """For a kept device comparison in an ``if``/``elif`` ladder with no ``else`` (so-vits-svc's ONNX encoders:
    ``if device == 'cpu': providers = [...] elif device == 'cuda': providers = [...]``): the names only its
    branches set, which a device it does not name ('tpu', handed in by migrated callers) leaves unset."""
    if c.predicate != "compare":
        return ""
    node = c.node
    while (parent := flow.parents.get(node)) is not None and not (
        type(parent) is cst.If and parent.test is node
    ):
        if isinstance(parent, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
            return ""
        node = parent
    ladder = parent
    while type(ladder) is cst.If and type(flow.parents.get(ladder)) is cst.If:
        ladder = flow.parents.get(ladder)  # (up to the first `if` of the chain)
    first = ladder
    names: set[str] = set()
    while type(ladder) is cst.If:
        for stmt in _walk(ladder.body):
            if type(stmt) is cst.Assign:
                names |= {n for t in stmt.targets if type(t.target) is cst.Name and (n := t.target.value)}
        ladder = ladder.orelse
    if ladder is not None or not names:
        return ""
    scope = flow.parents.get(first)
    while scope is not None and type(scope) is not cst.FunctionDef:
        scope = flow.parents.get(scope)
    inside = {id(n) for n in _walk(first)}
    for n in _walk(scope if scope is not None else flow.module):
        # (doctr's `model = model.to(device)` before `if device.type == "cuda": model = model.bfloat16()`: set anyway)
        if type(n) is cst.Param:
            names.discard(n.name.value)
        elif type(n) in (cst.Assign, cst.AnnAssign, cst.AugAssign) and id(n) not in inside:
            targets = [t.target for t in n.targets] if type(n) is cst.Assign else [n.target]
            names -= {t.value for t in targets if type(t) is cst.Name}
    if not names:
        return ""
    shown = ", ".join(f"`{n}`" for n in sorted(names)[:3])
    return f"; the ladder has no else: on 'tpu' (which migrated callers may pass) {shown} stays unset"


#: A call that probes for or switches on a CUDA-only stack by name.
_STACK_SWITCH = re.compile(
    r"(?:is_|enable_|use_)(xformers|flash_attn|apex|triton|bitsandbytes|deepspeed_cuda)\w*"
)
#: Methods that place a torch module or tensor, whatever library built it.
_TORCH_MOVES = frozenset({"to", "cuda"})
_ORDINAL_NAME = re.compile(r"(?i)rank|gpu|device_id|ordinal|\.index$")


#: Names of a host's process count as other programs read it (``local_size``, ``local_world_size``). (Not a count
#: that sizes a spawn, ``ngpus_per_node``: renamed, it starts one worker on its chip, tests/migrate/test_heldout4_classes.py.)
_HOST_SIZE_NAME = re.compile(r"(?i)local_?(?:world_?)?size")


#: Keywords through which libraries take a CUDA ordinal (allennlp's ``ElmoEmbedder(cuda_device=...)``).
_INT_DEVICE_KEYWORDS = frozenset({"device", "cuda_device", "gpu_id", "gpu_device"})


def _int_device_handed(flow: Flow, assign: cst.Assign) -> tuple[str, str] | None:
    """``device = int(os.environ["LOCAL_RANK"])`` (an integer: ``int(...)``, a literal, a rank or GPU index)
    whose name reaches another library's ``device=`` argument: (the name, that callee)."""
    if len(assign.targets) != 1 or type(assign.targets[0].target) is not cst.Name:
        return None
    value = assign.value
    integer = (
        type(value) is cst.Integer
        or (type(value) is cst.Call and type(value.func) is cst.Name and value.func.value == "int")
        or (type(value) in (cst.Name, cst.Attribute) and _ORDINAL_NAME.search(_code(value)) is not None)
    )
    if not integer:
        return None
    target = assign.targets[0].target
    for use in flow.uses(target):
        arg = flow.parents.get(use)
        if type(arg) is cst.Arg and arg.keyword is not None and arg.keyword.value in _INT_DEVICE_KEYWORDS:
            callee = flow._sink_of(use)
            if callee is not None:
                return target.value, callee
    return None


#: Comparisons of values (a rank against 0 or against LOCAL_RANK), not of identity or membership.
_ORDER_OPS = (cst.Equal, cst.NotEqual, cst.LessThan, cst.LessThanEqual, cst.GreaterThan, cst.GreaterThanEqual)
#: Method calls that put a module or a tensor on a device.
_MOVES = frozenset({"cuda", "to"})


def _moves(regions: list[cst.CSTNode], *, choices: bool = False) -> str | None:
    """A placement on CUDA in ``regions``: a ``.cuda()`` call or a CUDA tensor type (``torch.cuda.FloatTensor``,
    which puts every tensor built with it on CUDA); with ``choices``, any ``.to()`` and a CUDA device literal too
    (``"cuda" if ...``): what a renamed twin would send to 'tpu'. (A kept check whose branches move tensors to a
    device variable, tianshou's ``.to(args.device)``, places nothing on CUDA itself.)"""
    for n in walk_regions(regions):
        if type(n) is cst.Call and type(n.func) is cst.Attribute and n.func.attr.value in _MOVES:
            if choices or n.func.attr.value == "cuda":
                return _code(n)
        if (
            type(n) is cst.Attribute
            and n.attr.value.endswith("Tensor")
            and type(n.value) is cst.Attribute
            and n.value.attr.value == "cuda"
        ):
            return _code(n)
        if choices and is_cuda_literal(n):
            return _code(n)
    return None


def _placement_twins(flow: Flow, rewritten: set[int], kept: dict[int, str]) -> dict[int, str]:
    """moco-v3's main_lincls: ``if not torch.cuda.is_available(): print('using CPU')`` ... ``else: model.cuda()``
    is kept as CUDA's (its DataParallel branch), so on a TPU host the model stays on the CPU; a twin
    ``if torch.cuda.is_available(): target = target.cuda()`` renamed would send the batch to 'tpu' beside it.
    PyTorch-GAN's esrgan keeps ``Tensor = torch.cuda.FloatTensor if torch.cuda.is_available() else torch.Tensor``
    (batches on the CPU of a TPU host) while ``device = torch.device("cuda" if ... else "cpu")`` moved the models.
    A check that places or picks a device keeps the CUDA test while a twin (same predicate, same module) that
    places data is kept. For a comparison, a twin compares the same thing (torchdrug's engine: `if
    self.device.type == "cuda": batch = utils.cuda(batch, ...)` kept in train and evaluate, so the model's own
    `if self.device.type == "cuda": task = task.cuda(self.device)` stays with them)."""
    placing = [
        c
        for c in flow.checks
        if id(c.key) in kept
        and (c.predicate == "torch.cuda.is_available" or c.predicate == "compare")
        and _moves(c.regions) is not None
    ]
    if not placing:
        return {}
    out: dict[int, str] = {}
    for c in flow.checks:
        if id(c.key) in kept or id(c.key) not in rewritten:
            continue
        twin = next(
            (
                p
                for p in placing
                if p is not c
                and p.predicate == c.predicate
                and (c.predicate != "compare" or _code(p.node) == _code(c.node))
            ),
            None,
        )
        if twin is not None and (moved := _moves(c.regions, choices=True)) is not None:
            out[id(c.key)] = (
                f"its twin `{_code(twin.node)[:40]}` places tensors (`{_moves(twin.regions)[:40]}`) and "
                f"stays CUDA's, so `{moved[:40]}` here must agree with it"
            )
    return out


def _reported_twins(flow: Flow, rewritten: set[int], kept: dict[int, str]) -> dict[int, str]:
    """``if torch.cuda.is_available(): ... else: raise Error(f"no CUDA: {torch.cuda.is_available()}")`` (nanotron):
    a check inside an ``if`` whose test holds a kept check of the same predicate reports that test; renamed, it
    says True on a TPU host in the very branch the kept test chose because it was False."""
    tests: dict[int, str] = {}  # id(if) -> predicate of a kept check in its test
    for c in flow.checks:
        if id(c.key) in rewritten and id(c.key) not in kept:
            continue  # (a check the pass left CUDA's, or one the flow layer keeps)
        child, p = c.node, flow.parents.get(c.node)
        while p is not None and not isinstance(p, cst.BaseStatement):
            child, p = p, flow.parents.get(p)
        if type(p) is cst.If and p.test is child:
            tests[id(p)] = c.predicate
    out: dict[int, str] = {}
    for c in flow.checks if tests else ():
        if id(c.key) in kept or id(c.key) not in rewritten:
            continue
        p = flow.parents.get(c.node)
        while p is not None:
            if tests.get(id(p)) == c.predicate:
                out[id(c.key)] = "it reports the kept test of the `if` around it"
                break
            p = flow.parents.get(p)
    return out


def _state_twins(flow: Flow, rewritten: set[int], kept: dict[int, str], flagged: set[int]) -> dict[int, str]:
    """Rewritten checks whose twin (same predicate, same module) is kept while the twin's branch sets
    ``self.x`` that this check's function reads: `__exit__` fills self.peak under a kept CUDA check and
    `print_stats` reads self.peak under its own check; rewriting only the second reads state never set on TPU.
    (Module-wide context: the twin may sit in another method of the class.)"""
    stored: dict[str, dict[str, str]] = {}  # predicate -> attribute -> the kept check's text
    rebound: dict[
        str, set[str]
    ] = {}  # predicate -> names a kept branch rebinds (`model = DataParallel(model)`)
    for c in flow.checks:
        if id(c.key) in kept or (id(c.key) in flagged and id(c.key) not in rewritten):
            for n in walk_regions(c.regions):
                if type(n) is cst.Attribute and _self_attr(n) and flow._stored(n):
                    stored.setdefault(c.predicate, {}).setdefault(n.attr.value, c.line_hint)
                if type(n) is cst.Assign:
                    rebound.setdefault(c.predicate, set()).update(
                        t.target.value for t in n.targets if type(t.target) is cst.Name
                    )
    out: dict[int, str] = {}
    for c in flow.checks:
        if id(c.key) in kept or id(c.key) not in rewritten:
            continue
        names = rebound.get(c.predicate, set())
        wrapped = next(
            (
                n
                for n in walk_regions(c.regions)
                if type(n) is cst.Attribute
                and n.attr.value == "module"
                and type(n.value) is cst.Name
                and n.value.value in names
            ),
            None,
        )
        if wrapped is not None:
            # ffjord: `model = DataParallel(model).cuda()` under a kept check, then `model.module.state_dict() if
            # torch.cuda.is_available() else model.state_dict()`: renamed alone, a TPU host reads `.module` of the
            # unwrapped model (AttributeError)
            out[id(c.key)] = (
                f"a twin check of the same predicate is kept and its branch rebinds `{wrapped.value.value}`, "  # type: ignore[attr-defined]
                f"whose wrapper's `.module` this branch reads"
            )
            continue
        attrs = stored.get(c.predicate)
        if not attrs:
            continue
        fn = flow._enclosing(c.node, cst.FunctionDef)
        for n in _walk(fn) if fn is not None else ():
            if type(n) is cst.Attribute and _self_attr(n) and n.attr.value in attrs and not flow._stored(n):
                out[id(c.key)] = (
                    f"a twin check of the same predicate is kept and its branch sets `self.{n.attr.value}`, "
                    "which this function reads"
                )
                break
    return out


#: A command line that starts one process per device (torchrun's, DeepSpeed's, accelerate's launchers).
_LAUNCH_WORDS = re.compile(
    r"nproc|--num_processes|--num_gpus|torchrun|torch\.distributed\.(?:run|launch)|deepspeed|accelerate launch|--gpus"
)


def _saved_state_test(flow: Flow, c: Check) -> str | None:
    """``not torch.cuda.is_available() and x.device.type != "cpu"``: "no CUDA here, yet ``x`` is on an
    accelerator", an object restored from a GPU machine; the text of that comparison, else None."""
    if not c.predicate.endswith("is_available") or not c.operands:
        return None
    negated = flow.parents.get(c.node)
    if type(negated) is not cst.UnaryOperation or type(negated.operator) is not cst.Not:
        return None
    for n in walk_regions(c.operands):
        if (
            type(n) is cst.Comparison
            and _tensor_device_test(n)
            and any(
                type(t.operator) is cst.NotEqual
                and type(t.comparator) is cst.SimpleString
                and t.comparator.value.strip("'\"") == "cpu"
                for t in n.comparisons
            )
        ):
            return _code(n)[:60]
    return None


def _tensor_cuda_test(c: Check) -> bool:
    """A comparison of a tensor's device with a 'cuda' literal (an 'xla' test is torch_xla's: its rules)."""
    return c.predicate == "compare" and is_cuda_literal(c.key) and _tensor_device_test(c.node)


def _tensor_device_test(node: cst.CSTNode) -> bool:
    """``x.device.type == "cuda"`` / ``x.device == "cuda"`` / ``str(x.device) == "cuda"``: a tensor's placement,
    the meaning of ``x.is_cuda`` (a configured device string such as ``args.device == "cuda"`` is not)."""
    if type(node) is not cst.Comparison:
        return False
    for side in (node.left, *(c.comparator for c in node.comparisons)):
        if type(side) is cst.Call and type(side.func) is cst.Name and side.func.value == "str" and side.args:
            side = side.args[0].value
        if type(side) is cst.Attribute and side.attr.value == "type":
            side = side.value
        if type(side) is cst.Attribute and side.attr.value == "device":
            return True
    return False


def _self_attr(node: cst.Attribute) -> bool:
    return type(node.value) is cst.Name and node.value.value == "self"


def _above_one(flow: Flow, call: cst.CSTNode) -> bool:
    """``device_count() > 1`` / ``>= 2``: a test for more than one device, not for one being there."""
    cmp = flow.parents.get(call)
    if type(cmp) is not cst.Comparison or cmp.left is not call or len(cmp.comparisons) != 1:
        return False
    c = cmp.comparisons[0]
    if type(c.comparator) is not cst.Integer:
        return False
    n = int(c.comparator.value, 0)
    return (type(c.operator) is cst.GreaterThan and n >= 1) or (
        type(c.operator) is cst.GreaterThanEqual and n >= 2
    )


#: unittest's assertion that a value is true (and its old alias): its argument is asserted like `assert x`.
_ASSERT_TRUE = frozenset({"assertTrue", "assert_"})


#: A callee named for DataParallel that is not torch's own (``DataParallelNet``, ``BalancedDataParallel``,
#: ``DataParallelWithCallback``): repositories wrap nn.DataParallel under such names in another module.
_DATA_PARALLEL_NAME = re.compile(r"(?<!Distributed)(?<!Sharded)DataParallel|^data_parallel")


def _data_parallel_wrapper(flow: Flow, call: cst.Call) -> str | None:
    """The name of ``call``'s callee when it is a DataParallel wrapper defined outside torch, else None."""
    name = _last_name(call.func)
    if name is None or _DATA_PARALLEL_NAME.search(name) is None or flow._qname(call.func) in _MULTI_DEVICE:
        return None
    q = flow._qname(call.func) or ""
    return None if q.startswith("torch.") else name


#: accelerate's placement maps: integer keys (or values) there are CUDA ordinals.
_PLACEMENT_MAPS = frozenset({"max_memory", "device_map"})


#: What a placement map is built from (a string is accelerate's "auto"/"balanced" device_map).
_MAP_VALUES = (cst.Dict, cst.DictComp, cst.Call, cst.SimpleString, cst.Name, cst.Subscript)


def _placement_map_write(n: cst.CSTNode) -> str | None:
    """``max_memory.update({i: ...})``, ``max_memory[i] = ...``, ``device_map = ...`` or ``f(max_memory=...)``:
    the map's name when ``n`` writes one, else None."""
    t = type(n)
    if t is cst.Call and type(n.func) is cst.Attribute and n.func.attr.value in ("update", "setdefault"):
        base = n.func.value
        return base.value if type(base) is cst.Name and base.value in _PLACEMENT_MAPS else None
    if t is cst.AssignTarget and type(n.target) is cst.Subscript:
        target = n.target.value
        return target.value if type(target) is cst.Name and target.value in _PLACEMENT_MAPS else None
    if t is cst.Assign and type(n.value) in _MAP_VALUES:
        # (a map: `max_memory = {0: "20GiB"}`; ElegantRL's `max_memory = torch.cuda.max_memory_allocated()` is a
        # number of its own, no placement)
        for target in n.targets:
            if type(target.target) is cst.Name and target.target.value in _PLACEMENT_MAPS:
                return target.target.value
    if t is cst.AnnAssign and n.value is not None and type(n.value) in _MAP_VALUES:
        return n.target.value if type(n.target) is cst.Name and n.target.value in _PLACEMENT_MAPS else None
    if t is cst.Arg and n.keyword is not None and n.keyword.value in _PLACEMENT_MAPS:
        return n.keyword.value
    return None


def _ordinal_appended(c: Check) -> str | None:
    """``if device == "cuda": device += f":{rank}"``: the branch of a device comparison that appends an ordinal to
    the compared name (the code of that statement), else None."""
    if c.predicate != "compare" or type(c.node) is not cst.Comparison:
        return None
    subject = _code(c.node.left)
    for n in walk_regions(c.regions):
        if (
            type(n) is cst.AugAssign
            and type(n.operator) is cst.AddAssign
            and _code(n.target) == subject
            and re.match(r"""f?['"]:""", _code(n.value))
        ):
            return _code(n)
    return None


def _shares_memory(flow: Flow, node: cst.CSTNode) -> bool:
    """The ``if`` testing ``node`` moves a tensor into shared memory on either side (``if not t.is_cuda:
    t.share_memory_()``): the CPU half of a choice whose CUDA half is CUDA's inter-process handles."""
    child, parent = node, flow.parents.get(node)
    while parent is not None and not (type(parent) is cst.If and parent.test is child):
        if isinstance(parent, (cst.BaseStatement, cst.BaseSmallStatement)):
            return False
        child, parent = parent, flow.parents.get(parent)
    if parent is None:
        return False
    branches = [parent.body] + ([parent.orelse] if parent.orelse is not None else [])
    return any(
        type(n) is cst.Call and type(n.func) is cst.Attribute and n.func.attr.value == "share_memory_"
        for n in walk_regions(branches)
    )


def _first(items: Iterator[str | None]) -> str | None:
    return next((i for i in items if i), None)
