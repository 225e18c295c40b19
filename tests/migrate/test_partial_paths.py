"""The partial-parse path (migrate.partial) must give byte-identical results to the whole-file path: the new text,
the status, the diff and every finding. Checked on every source the migrate tests hold (test strings, rule
examples, golden inputs) and on generated files mixing device code with code no rule touches; the size
thresholds are lowered so the partial path is taken on small sources too."""

from __future__ import annotations

import ast
import pathlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tpu_workbench.migrate import partial
from tpu_workbench.migrate.one_file import migrate_text
from tpu_workbench.migrate.rules.base import all_rules
from tpu_workbench.migrate.source import needs_parse, python_tree

HERE = pathlib.Path(__file__).parent


def _both(monkeypatch: pytest.MonkeyPatch, text: str, path: str = "m.py") -> tuple[tuple, tuple]:
    out = []
    for whole in ("0", "1"):
        monkeypatch.setenv(partial.WHOLE_FILE_ENV, whole)
        r, new = migrate_text(text, path)
        out.append(
            (
                r.status,
                new,
                r.diff,
                r.error,
                [(d.line, d.col, d.code, d.message, d.outcome) for d in r.diagnostics],
            )
        )
    return out[0], out[1]


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """Take the partial path whenever anything can be hidden, however little."""
    monkeypatch.setattr(partial, "MIN_BYTES", 0)
    monkeypatch.setattr(partial, "MIN_HIDDEN_SHARE", 0.0)
    return monkeypatch


def _test_sources() -> list[str]:
    found: dict[str, None] = {}
    for f in sorted(HERE.glob("*.py")):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "\n" in node.value:
                found[node.value] = None
    for f in sorted([*HERE.glob("golden/**/*.py"), *HERE.glob("fixtures/**/*.py")]):
        found[f.read_text(encoding="utf-8")] = None
    for r in all_rules():
        found[r.before] = None
    out = []
    for s in found:
        if needs_parse(s) and python_tree(s)[0] is not None:
            out.append(s)
    return out


@pytest.mark.slow
def test_every_test_source_gives_the_same_result_on_both_paths(small):
    sources = _test_sources()
    assert len(sources) > 200
    took = 0
    for s in sources:
        tree = python_tree(s)[0]
        took += partial.reduce(s, tree) is not None
        a, b = _both(small, s)
        assert a == b, s
    assert took > 20  # (the partial path was really exercised)


_DEVICE = [
    "x = x.cuda()\n",
    "use_cuda = torch.cuda.is_available()\n",
    "device = torch.device('cuda' if use_cuda else 'cpu')\n",
    "def setup(rank):\n    torch.cuda.set_device(rank)\n    dist.init_process_group('nccl')\n",
    "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.on_gpu = torch.cuda.is_available()\n\n"
    "    def forward(self, x):\n        if self.on_gpu:\n            x = x.cuda()\n        return x\n",
    "if use_cuda:\n    model = model.cuda()\n",
    "ngpus = torch.cuda.device_count()\n",
    "model = model.to(local_rank)\n",
    "def train(args):\n    if args.cuda:\n        torch.cuda.synchronize()\n    return args.lr\n",
    "args.cuda = torch.cuda.is_available()\n",
    "torch.backends.cudnn.benchmark = True\n",
    "scaler = torch.cuda.amp.GradScaler()\n",
    "xm.mark_step()\n",
    "state = torch.load(path)\n",
    "if not torch.cuda.is_available():\n    raise SystemExit('needs a GPU')\n",
    "assert torch.cuda.is_available()\n",
    "class Runner:\n    'Docs.'\n\n    def __init__(self):\n        self.use_cuda = torch.cuda.is_available()\n"
    "        self.buf = None\n\n    def plain(self, a):\n        return a * 2\n\n    def reads(self):\n"
    "        return self.use_cuda\n\n    @property\n    def size(self):\n        # a comment\n        return 3\n\n"
    "    def gpu(self, x):\n        return x.cuda()\n",
    "class Twin:\n    def a(self):\n        if torch.cuda.is_available():\n            self.peak = 1\n\n"
    "    def b(self):\n        return self.peak\n\n    def c(self):\n        if torch.cuda.is_available():\n"
    "            print(self.peak)\n\n    def d(self, n):\n        return n / 2\n        # trailing\n",
]
_PLAIN = [
    "def helper(a, b):\n    return a + b\n",
    "def step(batch):\n    # a comment\n    return batch * 2\n",
    "def uses_flag():\n    return use_cuda\n",
    "def per_gpu(bs):\n    return bs // ngpus\n",
    "def reads_args(args):\n    return args.cuda\n",
    "class Plain:\n    '''Docs.'''\n\n    def f(self):\n        return 1\n",
    "@decorator\ndef decorated():\n    pass\n",
    "CONSTANT = 3\n",
    "a = 1; b = 2\n",
    "def ends_with_comment():\n    return 1\n    # trailing comment in the block\n",
    "# a comment line\n",
    "\n",
    "def device():\n    return 'cpu'\n",
    "def print(*a):\n    pass\n",
    "def _tpu_device():\n    return None\n",
    "def shadows(torch):\n    return torch\n",
    "torch.manual_seed(0)\n",
    "if __name__ == '__main__':\n    main()\n",
    "def main():\n    setup(0)\n    train(None)\n",
    "LIST = [\n    1,\n\n    2,\n]\n",
    "def per_gpu2(bs, n):\n    return bs / n\n",
    "class Helper:\n    x = 1\n\n    def f(self):\n        return self.x\n\n    def g(self, args):\n        args.flag = 1\n",
    "def exits():\n    if args.help:\n        return\n    run()\n",
    "if args.quit:\n    sys.exit()\n",
]
_HEADERS = [
    "import torch\n",
    "import torch\nimport torch.nn as nn\nimport torch.distributed as dist\n",
    "import torch\nimport torch_xla.core.xla_model as xm\n",
    '"""Module docs."""\nimport torch\n',
    "import torch\nfrom torch.cuda import amp\n",
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.sampled_from(_HEADERS),
    st.lists(st.sampled_from(_DEVICE + _PLAIN + _PLAIN), min_size=1, max_size=12),
    st.lists(st.sampled_from(["\n", "\n\n", "\n# note\n", ""]), min_size=12, max_size=12),
)
def test_generated_files_give_the_same_result_on_both_paths(small, header, parts, gaps):
    text = header + "".join(g + p for g, p in zip(gaps, parts, strict=False))
    a, b = _both(small, text)
    assert a == b


def test_the_partial_path_hides_what_no_rule_touches_and_restores_it(small):
    text = (
        "import torch\n\n\ndef plain(a):\n    # nothing to do\n    return a + 1\n\n\n"
        "def gpu(x):\n    return x.cuda()\n\n\nclass Other:\n    pass\n"
    )
    tree = python_tree(text)[0]
    red = partial.reduce(text, tree)
    assert red is not None
    assert "def plain" not in red.text and "class Other" not in red.text and "x.cuda()" in red.text
    assert red.text.count("\n") == text.count("\n")  # (line numbers kept)
    assert red.restore(red.text) == text
    assert red.restore(red.text.replace('"@@0@@', '"')) is None  # a placeholder lost: whole-file path
    a, b = _both(small, text)
    assert a == b and a[0] == "changed"


def test_the_whole_file_switch_and_the_refusals(small, monkeypatch):
    text = "import torch\n\n\ndef plain(a):\n    return a\n\n\ndef gpu(x):\n    return x.cuda()\n"
    tree = python_tree(text)[0]
    assert partial.reduce(text, tree) is not None
    assert partial.reduce(text.replace("\n", "\r\n"), tree) is None  # \r line ends
    assert partial.reduce(text + 's = "@@"\n', tree) is None  # the placeholder's mark already there
    star = "from torch import *\n" + text
    assert partial.reduce(star, python_tree(star)[0]) is None  # names unknown
    monkeypatch.setenv(partial.WHOLE_FILE_ENV, "1")
    assert not partial.enabled()
