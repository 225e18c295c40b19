"""The rule pass skips compound statements whose lines hold nothing a rule reacts to (migrate._quiet), and rules
walk children through migrate._walk.child_nodes: neither may change any output. Differential tests: the same
sources through the skipping pass and through the pass that visits every node (TPU_MIGRATE_VISIT_ALL=1)."""

from __future__ import annotations

import os
import pathlib
from contextlib import contextmanager

import libcst as cst
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tpu_workbench.migrate import _quiet
from tpu_workbench.migrate._walk import child_nodes
from tpu_workbench.migrate.source import UnparsableError, migrate_source

HERE = pathlib.Path(__file__).parent


@contextmanager
def _visit_all():
    old = os.environ.get(_quiet.VISIT_ALL_ENV)
    os.environ[_quiet.VISIT_ALL_ENV] = "1"
    try:
        yield
    finally:
        if old is None:
            del os.environ[_quiet.VISIT_ALL_ENV]
        else:
            os.environ[_quiet.VISIT_ALL_ENV] = old


def _run(source: str):
    try:
        res = migrate_source(source, "gen.py")
    except UnparsableError as exc:
        return ("error", str(exc))
    return (
        res.new_source,
        res.changed,
        [(d.line, d.col, d.code, d.message, d.fixed, d.outcome) for d in res.diagnostics],
    )


def assert_same(source: str) -> None:
    fast = _run(source)
    with _visit_all():
        ref = _run(source)
    assert fast == ref


_QUIET_LINES = [
    "x = compute(a, b)",
    "total += x / n",
    "print('done', i)",
    "return x",
    "y = [v * 2 for v in xs]",
    "self.value = other.value",
    "log.info('step %d', i)",
    "items = {'a': 1}",
]
_DEVICE_LINES = [
    "x = x.cuda()",
    "x = x.to('cuda')",
    "dev = torch.device('cuda:0' if torch.cuda.is_available() else 'cpu')",
    "use_cuda = torch.cuda.is_available()",
    "torch.cuda.synchronize()",
    "tc.manual_seed(seed)",
    "torch.manual_seed(seed)",
    "torch.cuda.manual_seed_all(seed)",
    "n = torch.cuda.device_count()",
    "dist.init_process_group('nccl')",
    "parser.add_argument('--device', default='cuda')",
    "scaler = torch.cuda.amp.GradScaler()",
    "ok_ = avail()",
    "model.to(device)",
    "import torch_xla.core.xla_model as xm",
    "from torch.cuda import is_available as avail",
    "backend = 'nccl'",
    "t = torch.load(path)",
    "if flag: x = x.cuda()",
]
_HEADS = [
    "def f{n}(a, b=None):",
    "@decorate\ndef g{n}(self):",
    "async def h{n}():",
    "class K{n}(Base):",
    "if cond{n}:",
    "for i in range({n}):",
    "while running{n}:",
    "with open(p{n}) as fh:",
    "try:",
]


@st.composite
def programs(draw) -> str:
    """Nested compound statements (with elif/else/except/finally tails) over quiet and device lines."""
    lines = ["import torch", "import torch.cuda as tc", "import torch.distributed as dist"]
    counter = [0]

    def body(depth: int, indent: str) -> None:
        for _ in range(draw(st.integers(1, 3))):
            kind = draw(st.integers(0, 3 if depth < 3 else 1))
            if kind == 0:
                lines.append(indent + draw(st.sampled_from(_QUIET_LINES)))
            elif kind == 1:
                lines.append(indent + draw(st.sampled_from(_DEVICE_LINES)))
            else:
                counter[0] += 1
                head = draw(st.sampled_from(_HEADS)).format(n=counter[0])
                lines.extend(indent + h for h in head.split("\n"))
                body(depth + 1, indent + "    ")
                if head.startswith("try"):
                    lines.append(indent + "except ValueError:")
                    body(depth + 1, indent + "    ")
                    if draw(st.booleans()):
                        lines.append(indent + "finally:")
                        body(depth + 1, indent + "    ")
                elif head.startswith(("if", "for", "while")) and draw(st.booleans()):
                    tail = "elif other:" if head.startswith("if") and draw(st.booleans()) else "else:"
                    lines.append(indent + tail)
                    body(depth + 1, indent + "    ")

    body(0, "")
    return "\n".join(lines) + "\n"


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_skipping_pass_equals_full_pass_on_generated_programs(source: str) -> None:
    try:
        compile(source, "<gen>", "exec")
    except SyntaxError:
        return  # (return outside a function, await ...: fine for libcst, but keep to valid Python)
    assert_same(source)


def test_skipping_pass_equals_full_pass_on_fixtures() -> None:
    files = sorted((HERE / "fixtures").rglob("*.py")) + sorted((HERE / "golden").rglob("*.py"))
    assert files
    for path in files:
        assert_same(path.read_text(encoding="utf-8"))


def test_quiet_statements_are_found_and_device_ones_are_not() -> None:
    source = (
        "import torch\n"
        "def quiet(a):\n    for i in a:\n        print(i)\n    return a\n"
        "def loud(x):\n    if x:\n        return x.cuda()\n    return x\n"
    )
    module = cst.parse_module(source)
    quiet = _quiet.quiet_statements(module, source, frozenset())
    defs = {s.name.value: s for s in module.body if isinstance(s, cst.FunctionDef)}
    assert id(defs["quiet"]) in quiet
    assert id(defs["quiet"].body.body[0]) in quiet  # the for loop inside it
    assert id(defs["loud"]) not in quiet
    assert id(defs["loud"].body.body[0]) not in quiet  # its if holds .cuda(
    assert id(defs["loud"].body.body[0]) not in quiet
    with _visit_all():
        assert _quiet.quiet_statements(module, source, frozenset()) == set()


def test_mismatched_statements_visit_everything() -> None:
    """When the text given is not the module's (a doubt), nothing is skipped."""
    module = cst.parse_module("def f():\n    pass\n")
    assert _quiet.quiet_statements(module, "x = 1\n", frozenset()) == set()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_child_nodes_are_libcsts_children(source: str) -> None:
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError:
        return
    todo: list[cst.CSTNode] = [module]
    while todo:
        node = todo.pop()
        kids = list(node.children)
        assert child_nodes(node) == kids
        assert all(a is b for a, b in zip(child_nodes(node), kids, strict=True))
        todo.extend(kids)


def test_restated_words_cover_partials() -> None:
    """migrate._quiet and migrate.partial read one word list (migrate.keep_words): every word
    partial keeps a statement for makes a line a hit here too."""
    from tpu_workbench.migrate import partial
    from tpu_workbench.migrate.transform import _IDEMPOTENT

    _keys, _prefixes, words, helpers = partial._rule_words()
    static = _quiet._static(_IDEMPOTENT)
    for w in sorted(words | helpers | partial._HOOK_WORDS):
        assert static.search(f"x = {w}\n") is not None, w
    for w in ("CUDA", "nccl", "Xla", "use_tpu", "device_map", "NVIDIA"):
        assert partial._DEVICE_TEXT.search(w) is not None
        assert static.search(w) is not None
    assert static.search("x.cuda(") is not None and static.search("x. to (") is not None


def test_files_that_may_take_the_partial_path_are_not_skipped() -> None:
    """Their module may be a reduced text or one group (migrate.partial, migrate.groups), not ``source``."""
    from tpu_workbench.migrate import partial

    assert _quiet._MAX_BYTES <= partial.MIN_BYTES
    source = "def quiet(a):\n    for i in a:\n        print(i)\n" * (partial.MIN_BYTES // 40 + 1)
    assert _quiet.quiet_statements(cst.parse_module(source), source, frozenset()) == set()


def test_a_whole_file_check_parses_with_ast_once(monkeypatch) -> None:
    """The tree migrate.source built (python_tree) is the one the quiet statements are found in."""
    import ast

    calls: list[int] = []
    real = ast.parse

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(ast, "parse", counting)
    source = "import torch\n\n\ndef quiet(a):\n    return a\n\n\ndef loud(x):\n    return x.cuda()\n"
    res = migrate_source(source, "a.py")
    assert res.changed and len(calls) == 1


_BREAKS = ["\v", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from(_BREAKS)), max_size=2))
def test_given_tree_only_where_lines_agree(source: str, breaks) -> None:
    """Line breaks Python does not count (``\\v``, ``\\u2028`` … in a comment) shift the transformer's
    ``source_text``: the tree of the file is not handed on there, and the output is the full pass's."""
    try:
        compile(source, "<gen>", "exec")
    except SyntaxError:
        return
    lines = source.split("\n")
    for at, ch in breaks:  # a comment holding a break, after some line
        k = at % len(lines)
        lines[k] = lines[k] + "  # a" + ch + "b" if lines[k].strip() else lines[k]
    assert_same("\n".join(lines))
