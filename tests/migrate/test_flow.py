"""Device checks whose effect lives outside the call site (issue 31): twins, stored flags, early returns,
``is_cuda`` selecting CUDA-only code. A check is rewritten only when all the code it switches on was migrated;
otherwise it is kept as CUDA's check (one TODO) and that code is left exactly as written."""

from __future__ import annotations

import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from migrate_helpers import codes, run

# Statements a check may switch on: those the pass migrates fully, and those it cannot (a finding, or a
# "cuda" literal kept as data that other code reads).
SAFE = [
    "x = x.cuda()",
    "torch.cuda.synchronize()",
    'y = y.to("cuda")',
    "z = torch.zeros(2, device='cuda')",
    "s = torch.cuda.Stream()\nwith torch.cuda.stream(s):\n    pass",  # (a stream the file made: `with s:`)
]
UNSAFE = [
    "m = torch.cuda.mem_get_info()",
    'table["cuda"] = x',
    'torch.cuda.nvtx.range_push("step")',
    "with torch.cuda.stream(z):\n    pass",  # (a stream from elsewhere: flagged)
]


def _indent(body: str, n: int) -> str:
    return textwrap.indent(body, " " * n)


# Each shape puts BODY where the check (made true on TPU) would switch it on; kept -> no TPU201 rewrite.
SHAPES = {
    "if": "if torch.cuda.is_available():\n{b4}\n",
    "if-and": "if args.gpu and torch.cuda.is_available():\n{b4}\n",
    "not-else": "if not torch.cuda.is_available():\n    pass\nelse:\n{b4}\n",
    "early-return": "def f(x, y, z, table):\n    if not torch.cuda.is_available():\n        return None\n{b4}\n",
    "early-raise-loop": "for x in xs:\n    if not torch.cuda.is_available():\n        continue\n{b4}\n",
    "local-flag": "def f(x, y, z, table):\n    use = torch.cuda.is_available()\n    if use:\n{b8}\n",
    "module-flag": "USE = torch.cuda.is_available()\ndef f(x, y, z, table):\n    if USE:\n{b8}\n",
    "self-flag": (
        "class T:\n    def __init__(self):\n        self.use_cuda = torch.cuda.is_available()\n"
        "    def step(self, x, y, z, table):\n        if not self.use_cuda:\n            return x\n{b8}\n"
    ),
    "args-flag": (
        "args.cuda = not args.no_cuda and torch.cuda.is_available()\n"
        "def f(x, y, z, table):\n    if args.cuda:\n{b8}\n"
    ),
    "returned": "def gpu():\n    return torch.cuda.is_available()\ndef f(x, y, z, table):\n    if gpu():\n{b8}\n",
    "device-count": "if torch.cuda.device_count() > 0:\n{b4}\n",
    "ternary-flag": "use = torch.cuda.is_available()\nif use:\n{b4}\nelse:\n    x = x.cpu()\n",
}


def _program(shape: str, body: list[str]) -> str:
    text = "\n".join(body)
    return "import torch\n" + SHAPES[shape].format(b4=_indent(text, 4), b8=_indent(text, 8))


def _kept(out: str) -> bool:
    return "torch.accelerator.is_available" not in out and "torch.accelerator.device_count" not in out


@settings(max_examples=60, deadline=None)
@given(
    shape=st.sampled_from(sorted(SHAPES)),
    body=st.lists(st.sampled_from(SAFE + UNSAFE), min_size=1, max_size=3),
)
def test_a_check_is_rewritten_only_when_everything_it_switches_on_is_migrated(shape, body):
    src = _program(shape, body)
    res = run(src)
    unsafe = any(s in UNSAFE for s in body)
    assert _kept(res.new_source) == unsafe, res.new_source
    if unsafe:  # the switched-on code is CUDA's, left exactly as written, and said once
        for stmt in body:
            for line in stmt.splitlines():
                assert line.strip() in res.new_source
        assert codes(res).count("TPU201") == 1
        assert res.new_source.count("TODO(tpu-migrate TPU201)") == 1


@pytest.mark.parametrize(
    "src",
    [
        # a dict filled under one check, read under its twin
        "import torch\nclass M:\n    def __init__(self):\n        self.bufs = {}\n"
        "        if torch.cuda.is_available():\n            self.bufs['cuda'] = torch.zeros(3)\n"
        "    def get(self):\n        return self.bufs['cuda' if torch.cuda.is_available() else 'cpu']\n",
        # a module cache and a function reading it
        "import torch\nCACHE = {}\nif torch.cuda.is_available():\n    CACHE['cuda'] = 1\n"
        "def get():\n    key = 'cuda' if torch.cuda.is_available() else 'cpu'\n    return CACHE[key]\n",
        # the twin is a device_count check
        "import torch\nSTREAMS = {}\nif torch.cuda.device_count() > 0:\n    STREAMS['cuda:0'] = 0\n"
        "def pick():\n    return STREAMS['cuda:0'] if torch.cuda.device_count() > 0 else None\n",
        # the twin stores its key in an attribute
        "import torch\nclass P:\n    def setup(self):\n        if torch.cuda.is_available():\n"
        "            self.handles = {'cuda': 1}\n    def use(self):\n"
        "        self.key = 'cuda' if torch.cuda.is_available() else 'cpu'\n        return self.handles[self.key]\n",
    ],
    ids=["attr-dict", "module-cache", "device-count", "attr-key"],
)
def test_twin_checks_are_kept_together(src):
    res = run(src)
    assert _kept(res.new_source), res.new_source
    assert "'tpu'" not in res.new_source  # no side of the data was renamed
    assert codes(res).count("TPU201") == src.count("torch.cuda.is_available") + src.count(
        "torch.cuda.device_count"
    )


@pytest.mark.parametrize(
    "src, why",
    [
        ("import torch\ndef has_gpu():\n    return torch.cuda.is_available()\n", "callers outside this file"),
        ("import torch\nrun_model(model, torch.cuda.is_available())\n", "passed to `run_model`"),
        ("import torch\ncfg['cuda'] = torch.cuda.is_available()\n", "stored in"),
        ("import torch\nclass A:\n    def on(self):\n        return torch.cuda.is_available()\n", "returned"),
        ("import torch\nuse = torch.cuda.is_available()\nlaunch(use)\n", "passed to `launch`"),
    ],
)
def test_a_check_whose_value_leaves_sight_is_kept(src, why):
    res = run(src)
    assert _kept(res.new_source)
    assert any(why in d.message for d in res.diagnostics if d.code == "TPU201"), res.diagnostics


@pytest.mark.parametrize(
    "src, expected",
    [
        ("import torch\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n", "device = 'tpu'"),
        (
            "import torch\nloader = torch.utils.data.DataLoader(ds, pin_memory=torch.cuda.is_available())\n",
            "pin_memory=torch.accelerator.is_available()",
        ),
        ("import torch\nprint('gpu:', torch.cuda.is_available())\n", "print('gpu:', torch.accelerator"),
        (
            "import torch\ndef gpu():\n    return torch.cuda.is_available()\ndev = 'cuda' if gpu() else 'cpu'\n",
            "dev = 'tpu' if gpu()",
        ),
        (
            "import torch\nclass T:\n    def __init__(self):\n        self.use_cuda = torch.cuda.is_available()\n"
            "    def step(self, x):\n        if self.use_cuda:\n            x = x.cuda()\n        return x\n",
            'x = x.to("tpu")',
        ),
    ],
)
def test_a_check_whose_effect_is_all_migrated_is_rewritten(src, expected):
    out = run(src).new_source
    assert expected in out and "TODO" not in out


@pytest.mark.parametrize(
    "body",
    [
        "return fused_kernel(x)",
        "return self._cuda_forward(x)",
        "out = fused_ops.multi_tensor_scale(x)",
        "y = MyCudaFn.apply(x)",
        "config = self.cuda_config",
        "return self._fwd(x, use_triton=True)",
    ],
)
@pytest.mark.parametrize("form", ["if x.is_cuda:\n    {b}\n", "if not x.is_cuda:\n    return x\n{b}\n"])
def test_is_cuda_that_selects_program_code_is_kept(body, form):
    src = "import torch\nimport fused_ops\ndef f(self, x):\n" + textwrap.indent(form.format(b=body), "    ")
    res = run(src)
    assert "x.is_cuda" in res.new_source and 'x.device.type == "tpu"' not in res.new_source
    assert codes(res).count("TPU106") == 1


@pytest.mark.parametrize(
    "body",
    ["x = x.cpu()", "torch.cuda.synchronize()", "x = torch.nn.functional.relu(x)", "x = x.pin_memory()"],
)
def test_is_cuda_meaning_on_an_accelerator_becomes_a_device_type_test(body):
    src = f"import torch\nimport warnings\ndef f(x):\n    if x.is_cuda:\n        {body}\n    return x\n"
    out = run(src).new_source
    assert 'x.device.type == "tpu"' in out and "TODO" not in out


@pytest.mark.parametrize(
    "test, branch",
    [
        ("if device == 'cuda':\n{b}", "body"),
        ("if 'cuda' in str(device):\n{b}", "body"),
        ("if device_type != 'cuda':\n    pass\nelse:\n{b}", "else"),
        ("def f(device):\n    if device != 'cuda':\n        return\n{b}", "rest"),
    ],
)
@pytest.mark.parametrize("body", SAFE + UNSAFE)
def test_a_device_comparison_is_renamed_only_when_its_branch_is_migrated(test, branch, body):
    indent = 4 if branch != "rest" else 4
    src = "import torch\ndevice = device_type = 'cuda'\n" + test.format(b=_indent(body, indent)) + "\n"
    res = run(src)
    kept_literal = (
        "'cuda' in str(device)" in res.new_source
        or "== 'cuda'" in res.new_source
        or "!= 'cuda'" in res.new_source
    )
    assert kept_literal == (body in UNSAFE), res.new_source
    if body in UNSAFE:
        for line in body.splitlines():
            assert line.strip() in res.new_source


@pytest.mark.parametrize(
    "line",
    [
        "args.gpu = args.rank % torch.cuda.device_count()",
        "n = torch.cuda.device_count()\nbatch = 8 * n",
        "world = torch.cuda.device_count() * nodes",
    ],
)
def test_device_count_used_as_a_number_is_rewritten_not_kept(line):
    out = run("import torch\n" + line + "\n").new_source
    assert "torch.accelerator.device_count()" in out and "TODO" not in out


_FILLER = "def filler_{i}(a):\n    return a + {i}\n"


def _flow_answers(src: str, with_texts: bool) -> list[tuple]:
    import libcst as cst

    from tpu_workbench.migrate import flow
    from tpu_workbench.migrate._spans import SourceMap

    module = cst.parse_module(src)
    facts = flow.Flow(module, SourceMap(src, module).texts() if with_texts else None)
    return [
        (
            c.predicate,
            c.line_hint,
            c.unseen,
            [module.code_for_node(r) for r in c.regions],
            facts.foreign_call(c.node),
        )
        for c in facts.checks
    ]


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize(
    "extra",
    [
        "",
        "def print(*a):\n    pass\n",  # a builtin shadowed by a statement the analysis may leave out
        "from torch.cuda import is_available as has_gpu\ndef g(x):\n    if has_gpu():\n        print(x)\n",
        "def later(x, y, z, table):\n    if USE:\n        table['cuda'] = x\n",  # a module flag read far below
        "def h(args):\n    if args.cuda:\n        kernel(args)\n",  # an attribute read in another function
    ],
    ids=["plain", "shadowed-builtin", "aliased-check", "module-flag-elsewhere", "attr-elsewhere"],
)
def test_the_part_analysed_answers_like_the_whole_module(shape, extra):
    """Flow analyses only the statements a check can reach (flow.reachable): the answers are the same as over
    the whole module, with unrelated functions around and uses far away."""
    fillers = "".join(_FILLER.format(i=i) for i in range(3))
    src = (
        fillers
        + _program(shape, ['table["cuda"] = x', "x = x.cuda()"])
        + fillers.replace("filler", "more")
        + extra
    )
    whole = _flow_answers(src, with_texts=False)
    assert whole
    assert _flow_answers(src, with_texts=True) == whole


def test_the_part_analysed_leaves_unrelated_statements_out():
    import libcst as cst

    from tpu_workbench.migrate import flow
    from tpu_workbench.migrate._spans import SourceMap

    src = (
        "import torch\n"
        + "".join(_FILLER.format(i=i) for i in range(5))
        + "if torch.cuda.is_available():\n    pass\n"
    )
    module = cst.parse_module(src)
    part, _ = flow.reachable(module, SourceMap(src, module).texts())
    assert len(part.body) == 2  # the import and the check


@pytest.mark.parametrize(
    "src, name",
    [
        (
            "import torch\nUSE_CUDA = torch.cuda.is_available()\ndef f(x):\n    if USE_CUDA:\n        x = x.cuda()\n",
            "USE_CUDA",
        ),
        (
            "import torch\nargs.cuda = not args.no_cuda and torch.cuda.is_available()\nif args.cuda:\n    m.cuda()\n",
            "args.cuda",
        ),
    ],
)
def test_a_flag_other_modules_can_read_is_said_on_its_rewrite(src, name):
    """Flags read in other modules are out of this file's sight: the rewrite says so (warned), once."""
    res = run(src)
    (d,) = [d for d in res.diagnostics if d.code == "TPU201"]
    assert d.outcome == "warned" and f"`{name}` can be read by other modules" in d.message


@pytest.mark.parametrize(
    "src",
    [
        "import torch\ndef f(x):\n    use = torch.cuda.is_available()\n    if use:\n        x = x.cuda()\n",
        "import torch\n_USE = torch.cuda.is_available()\nif _USE:\n    m.cuda()\n",
        "import torch\nclass A:\n    def __init__(self):\n        self.cuda = torch.cuda.is_available()\n",
    ],
    ids=["local", "private", "self"],
)
def test_a_flag_private_to_the_file_is_rewritten_quietly(src):
    res = run(src)
    assert all(d.outcome == "rewritten" for d in res.diagnostics if d.code == "TPU201")
