"""Wrong rewrites found by the first reading of held-out check 20 (benchmarks/migrate_corpus_heldout20.txt), each
as a class in its own words, each asserting the rewrite it must not make."""

from __future__ import annotations

import pytest
from migrate_helpers import run, run_without_torchtpu


# --- lightly's examples: `"cuda" if torch.cuda.is_available() else "mps"` became
# `"tpu" if torch.accelerator.is_available() else "mps"`; a Mac's accelerator is MPS, so the test turned true there
# and sent the model to "tpu", which such a machine does not have ---
@pytest.mark.parametrize(
    "src",
    [
        'device = "cuda" if torch.cuda.is_available() else "mps"\n',
        'device = torch.device("cuda" if torch.cuda.is_available() else "xpu")\n',
        'if torch.cuda.is_available():\n    device = "cuda"\nelse:\n    device = "mps"\n',
    ],
)
def test_a_last_branch_naming_another_accelerator_makes_the_cuda_test_ask_for_a_tpu(src):
    out = run("import torch\n" + src).new_source
    assert "torch.accelerator.is_available()" not in out
    assert 'current_accelerator(check_available=True), "type", None) == "tpu"' in out
    assert '"mps"' in out or '"xpu"' in out


def test_a_cpu_fallback_still_asks_for_any_accelerator():
    out = run('import torch\ndevice = "cuda" if torch.cuda.is_available() else "cpu"\n').new_source
    assert 'device = "tpu" if torch.accelerator.is_available() else "cpu"' in out


# --- lightly's tests: `@pytest.mark.parametrize("device", ["cpu", "cuda"])` was flagged as a device handed to "a
# library that is not torch" whose "device names are its own" (advice: hand it 'cpu'); pytest passes each case to
# the test, which uses it as a torch device and skips the CUDA case itself ---
@pytest.mark.parametrize(
    "maker",
    [
        '@pytest.mark.parametrize("device", ["cpu", "cuda"])',
        '@pytest.mark.parametrize("device", [pytest.param("cuda", id="gpu"), "cpu"])',
    ],
)
def test_a_parametrized_device_is_a_test_case_not_a_foreign_library(maker):
    src = (
        "import pytest\nimport torch\n\n\n"
        f"{maker}\n"
        "def test_it(device):\n"
        '    if device == "cuda" and not torch.cuda.is_available():\n'
        '        pytest.skip("no cuda")\n'
        "    assert torch.ones(1, device=device).sum() == 1\n"
    )
    result = run(src)
    out = result.new_source
    assert '"cuda"' in out.split("def test_it")[0]  # the case is kept, as its skip is
    assert "a library that is not torch" not in out and "often 'cpu'" not in out
    assert "is a test case of `pytest." in out


# --- rasbt's notebooks: `print('... %d'` / `      %(epoch, cost))` -- a line inside open brackets that begins
# with `%` was masked as an IPython magic, the cell no longer parsed, and the whole notebook was left untouched ---
@pytest.mark.parametrize(
    "cell",
    [
        "print('Epoch: %03d | Cost: %.4f'\n      %(epoch, cost))\n",
        'text = """\n%not a magic\n"""\n',
        "x = 1 + \\\n    %2\n",
    ],
)
def test_a_line_inside_a_python_statement_is_never_a_magic(cell):
    from tpu_workbench.migrate.notebook import _mask

    masked: list[str] = []
    assert _mask(cell, masked) == cell and masked == []


def test_magics_between_statements_are_still_masked():
    from tpu_workbench.migrate.notebook import _mask

    masked: list[str] = []
    out = _mask("d = {\n  'a': 1,\n}\n%matplotlib inline\n!ls\n", masked)
    assert masked == ["%matplotlib inline", "!ls"] and "d = {\n  'a': 1,\n}\n" in out


# --- rasbt's notebooks: `torch.device("cuda:3" if torch.cuda.is_available() else "cpu")`, the one GPU ordinal of
# a one-GPU notebook (the author's free GPU), was kept and flagged as "another device of this process": the
# notebook trained on the CPU on a TPU host ---
def test_a_files_only_gpu_ordinal_becomes_the_process_device():
    src = 'import torch\ndevice = torch.device("cuda:3" if torch.cuda.is_available() else "cpu")\n'
    out = run(src).new_source
    assert 'torch.device("tpu" if torch.accelerator.is_available() else "cpu")' in out


@pytest.mark.parametrize(
    ("src", "kept"),
    [
        (
            'import torch\na = torch.zeros(1).to("cuda:0")\nb = torch.zeros(1).to("cuda:1")\n',
            1,
        ),  # two devices
        (
            'import torch\nnet = torch.nn.DataParallel(torch.nn.Linear(1, 1), device_ids=[0, 1]).to("cuda:1")\n',
            1,
        ),
        (
            'import torch\nx = torch.zeros(1, device="cuda:2")\nassert str(x.device) == "cuda:2"\n',
            2,
        ),  # read back
    ],
)
def test_an_ordinal_among_several_devices_is_still_kept(src, kept):
    out = run(src).new_source
    ordinal = max(src.count(f"cuda:{i}") and i for i in range(3))
    assert out.count(f'"cuda:{ordinal}"') == kept


# --- BasicSR's CUDAPrefetcher: `self.stream = torch.cuda.Stream()` became torch.Stream() while
# `with torch.cuda.stream(self.stream):` was kept (flagged): a CUDA context around a TPU stream raises ---
def test_a_stream_context_on_a_stream_the_file_made_uses_the_stream_itself():
    src = (
        "import torch\n\n\nclass P:\n    def __init__(self):\n        self.stream = torch.cuda.Stream()\n\n"
        "    def load(self, x):\n        with torch.cuda.stream(self.stream):\n            return x + 1\n"
    )
    out = run(src).new_source
    assert "with self.stream:" in out and "torch.cuda" not in out
    scope: dict = {}
    exec(compile(out, "m.py", "exec"), scope)
    import torch

    assert scope["P"]().load(torch.ones(1, device="tpu")).cpu().item() == 2


def test_a_stream_context_on_a_stream_from_elsewhere_is_flagged():
    src = "import torch\n\n\ndef f(s, x):\n    with torch.cuda.stream(s):\n        return x + 1\n"
    result = run(src)
    assert "torch.cuda.stream(s)" in result.new_source and "TPU207" in result.new_source


# --- SPADE: `self.FloatTensor = torch.cuda.FloatTensor if self.use_gpu() else torch.FloatTensor`, called as
# `self.FloatTensor(1)` and handed on as `GANLoss(tensor=self.FloatTensor)`, was kept as "used as a type" while its
# twin ByteTensor (only called) was rewritten: preprocess_input raised on TPU ---
def test_a_tensor_type_called_and_handed_on_is_a_constructor():
    src = (
        "import torch\n\n\nclass M:\n    def __init__(self, gpu):\n"
        "        self.FloatTensor = torch.cuda.FloatTensor if gpu else torch.FloatTensor\n"
        "        self.loss = Loss(tensor=self.FloatTensor)\n\n"
        "    def f(self):\n        return self.FloatTensor(2).fill_(1)\n"
    )
    out = run(src).new_source
    assert "_tpu_tensor_type(torch.FloatTensor) if gpu" in out


def test_a_tensor_type_also_used_as_a_type_stays_flagged():
    src = "import torch\n\nT = torch.cuda.FloatTensor\nx = T(2)\nprint(isinstance(x, T))\n"
    out = run(src).new_source
    assert "_tpu_tensor_type" not in out and "torch.cuda.FloatTensor" in out


# --- rasbt's GAN notebooks: the model moved to 'tpu:0' and then `summary(model, input_size=(100,))` from
# torchsummary, which builds its input on "cpu" or "cuda" only (and asserts the name is one of them): the forward
# met a CPU input, or the renamed device='tpu' failed its assertion. (A first fix, 2026-12-06, listed torchsummary
# as CPU-or-CUDA-only and so left whole files unmigrated: PyTorch-VAE's tests kept `.cuda()`, wrong again.) ---
SUMMARY_PROGRAM = (
    "import torch\nfrom torchsummary import summary\n\n"
    "model = torch.nn.Linear(100, 10).to('cuda:0')\nsummary(model, input_size=(100,), device='cuda')\n"
)


def test_torchsummary_gets_a_cpu_copy_and_keeps_its_own_device_name():
    out = run(SUMMARY_PROGRAM).new_source
    assert "model = torch.nn.Linear(100, 10).to('tpu:0')" in out
    assert "summary(_tpu_cpu_copy(model), input_size=(100,), device='cuda')" in out
    assert "TODO" not in out


def test_the_cpu_copy_leaves_the_model_on_the_tpu():
    import torch

    out = run(SUMMARY_PROGRAM).new_source
    scope: dict = {}
    helper = out[out.index("def _tpu_cpu_copy") : out.index("\nmodel = ")]
    exec(compile(helper, "m.py", "exec"), scope)
    model = torch.nn.Linear(3, 2).to("tpu")
    copy = scope["_tpu_cpu_copy"](model)
    assert copy is not model and copy.weight.device.type == "cpu" and model.weight.device.type == "tpu"
    assert torch.equal(copy.weight, model.weight.cpu())
    cpu_model = torch.nn.Linear(3, 2)
    assert scope["_tpu_cpu_copy"](cpu_model) is cpu_model


# --- BasicSR's train.py: `prefetch_mode = opt['datasets']['train'].get('prefetch_mode')` then
# `elif prefetch_mode == 'cuda':` -- the name is a value of the user's YAML config; renamed alone, a config saying
# `cuda` would fall to `else: raise ValueError`. And its TODO claimed the CUDAPrefetcher it switches on was
# CUDA-only, though the same run migrates that class (`with torch.cuda.stream(self.stream)` -> `with self.stream`)
def test_a_local_read_from_a_config_mapping_keeps_its_comparison(tmp_path):
    (tmp_path / "prefetch.py").write_text(
        "import torch\n\n\nclass CUDAPrefetcher:\n    def __init__(self, loader):\n"
        "        self.stream = torch.cuda.Stream()\n        self.loader = loader\n\n"
        "    def preload(self, batch):\n        with torch.cuda.stream(self.stream):\n"
        "            return batch.to('cuda', non_blocking=True)\n"
    )
    (tmp_path / "train.py").write_text(
        "from prefetch import CUDAPrefetcher\n\n\ndef build(opt, loader):\n"
        "    mode = opt['datasets']['train'].get('prefetch_mode')\n"
        "    if mode is None or mode == 'cpu':\n        return loader\n"
        "    elif mode == 'cuda':\n        return CUDAPrefetcher(loader)\n"
        "    raise ValueError(mode)\n"
    )
    from tpu_workbench.migrate.cli import main

    assert main(["--write", "--quiet", str(tmp_path)]) in (0, 1)
    train = (tmp_path / "train.py").read_text()
    assert "mode == 'cuda'" in train and "value from outside the file" in train and "CUDA-only" not in train
    assert "with self.stream:" in (tmp_path / "prefetch.py").read_text()


# --- PyTorch-YOLOv3 (and PyTorch-GAN's idiom): `Tensor = torch.cuda.FloatTensor if torch.cuda.is_available() else
# torch.FloatTensor` then `imgs.type(Tensor)` was kept as "a type use", so its check stayed CUDA's: the inputs stayed
# on the CPU while models.py (another file) put the model on "tpu" -> "Expected all tensors to be on the same
# device". A cast to such a name is a cast to its dtype on the device: both are migrated together ---
CAST_PROGRAM = (
    "import torch\n\n\ndef run(imgs):\n"
    "    Tensor = torch.cuda.FloatTensor if torch.cuda.is_available() else torch.FloatTensor\n"
    "    x = imgs.type(Tensor)\n    ones = Tensor(2, 1).fill_(1.0)\n    return x, ones\n"
)


def test_a_cast_to_a_cuda_type_alias_moves_to_the_tpu_with_its_dtype():
    out = run(CAST_PROGRAM).new_source
    assert "_tpu_as_type(imgs, Tensor)" in out and "torch.cuda" not in out.split("def run")[1]
    scope: dict = {}
    exec(compile(out, "m.py", "exec"), scope)
    import torch

    x, ones = scope["run"](torch.arange(6, dtype=torch.int64).reshape(2, 3))
    assert x.device.type == "tpu" and x.dtype == torch.float32 and ones.device.type == "tpu"
    assert torch.equal(x.cpu(), torch.arange(6.0).reshape(2, 3))


def test_a_cast_alias_runs_unchanged_where_torchtpu_is_not_loaded(tmp_path):
    out = (
        run(CAST_PROGRAM).new_source
        + "\nx, ones = run(torch.ones(2, 3, dtype=torch.int64))\nprint(x.device, x.dtype)\n"
    )
    proc = run_without_torchtpu(tmp_path, out)
    assert proc.returncode == 0, proc.stderr[-1500:]
    assert proc.stdout.strip() == "cpu torch.float32"


def test_a_cuda_type_alias_also_used_as_a_type_is_not_cast():
    src = CAST_PROGRAM.replace(
        "    return x, ones\n", "    assert isinstance(x, Tensor)\n    return x, ones\n"
    )
    out = run(src).new_source
    assert "_tpu_as_type" not in out and "torch.cuda.FloatTensor" in out


def test_a_skip_on_a_device_list_is_not_read_as_a_pytest_case():
    # peft's test_stablediffusion: `config_cls` is the pytest case; 'cuda' is in a list of devices it needs
    src = (
        "import pytest\nimport torch\n\n\n"
        '@pytest.mark.parametrize("config_cls", [A, B])\n'
        "def test_it(self, config_cls):\n"
        '    if config_cls == B and self.torch_device not in ["cuda", "xpu"]:\n'
        '        pytest.skip("B needs CUDA")\n'
        "    assert torch.cuda.is_available()\n"
    )
    out = run(src).new_source
    assert "pytest case `config_cls`" not in out


# --- held-out 21: captum's `@parameterized_class(("device",), [("cpu",), ("cuda",)] if torch.cuda.is_available()
# else [("cpu",)])` was said to hand 'cuda' to "a library that is not torch"; and a gate whose code reaches
# DataParallel (its forward raises on "tpu") was made true on TPU (captum's tracin tests, yolov9's DP gates) ---
def test_parameterized_cases_are_test_cases_kept_with_their_check():
    src = (
        "import torch\nfrom parameterized import parameterized_class\n\n\n"
        '@parameterized_class(("device",), [("cpu",), ("cuda",)] if torch.cuda.is_available() else [("cpu",)])\n'
        "class T:\n    def test(self):\n        torch.ones(1).to(self.device)\n"
    )
    out = run(src).new_source
    assert "torch.cuda.is_available()" in out and '("cuda",)' in out
    assert "a library that is not torch" not in out and "test case of `parameterized_class`" in out


@pytest.mark.parametrize("gate", ["torch.cuda.device_count() > 1", "torch.cuda.is_available()"])
def test_a_gate_that_reaches_data_parallel_stays_cudas(tmp_path, gate):
    (tmp_path / "helpers.py").write_text(
        "import torch\n\n\ndef wrap(model):\n    return torch.nn.DataParallel(model)\n"
    )
    (tmp_path / "train.py").write_text(
        f"import torch\nfrom helpers import wrap\n\nmodel = torch.nn.Linear(2, 2)\nif {gate}:\n    model = wrap(model)\n"
    )
    from tpu_workbench.migrate.cli import main

    main(["--write", "--quiet", str(tmp_path)])
    assert gate in (tmp_path / "train.py").read_text()


# --- held-out 21: skorch's `map_location.type == 'cuda' and not torch.cuda.is_available()` (a CPU fallback for a
# net saved on CUDA) and its tests' `if device == 'cuda' and not torch.cuda.is_available(): pytest.skip()` beside a
# kept 'cuda' case: renamed, the fallback was lost and the 'cuda' case ran on TPU and CPU hosts ---
@pytest.mark.parametrize(
    "test",
    [
        "map_location.type == 'cuda' and not torch.cuda.is_available()",
        "device == 'cuda' and not torch.cuda.is_available()",
        "'cuda' in (a, b) and not torch.cuda.is_available()",
        "device.startswith('cuda') and torch.cuda.device_count() == 0",
    ],
)
def test_a_request_for_missing_cuda_keeps_both_sides(test):
    out = run(
        f"import torch\n\n\ndef f(map_location, device, a, b):\n    if {test}:\n        return 'cpu'\n"
    ).new_source
    assert test in out and "TPU201" in out


def test_torchsummary_with_a_device_variable_is_handed_on():
    src = "from torchsummary import summary\n\n\ndef show(model, dev):\n    summary(model, (1, 28, 28), device=dev)\n"
    assert "_tpu_cpu_copy" not in run(src).new_source


@pytest.mark.parametrize("op", ["==", "!=", "is", "is not", "in", "not in", "<=", ">"])
@pytest.mark.parametrize("gap", ["", " ", "\n    ", " \\\n  "])
def test_subscript_comparison_text_test_sees_every_layout(op: str, gap: str) -> None:
    """The cheap per-file text test in front of the data-round-trip walk must match every layout of a
    subscript compared with a literal, or the walk is skipped and the test's data is renamed on one side."""
    from tpu_workbench.migrate.rules._literal import _SUBSCRIPT_COMPARED

    for left in ('out["device"]', '(out["device"])', "x[0]"):
        for right in ('"cuda"', "'cuda'", '("cuda")', 'r"cuda"'):
            src = (
                f"assert ({left}{gap}{op} {right})\n" if "\n" in gap else f"assert {left}{gap}{op} {right}\n"
            )
            assert _SUBSCRIPT_COMPARED.search(src), src


def test_every_literal_rule_starts_with_a_word_the_text_test_knows():
    """_SUBSCRIPT_COMPARED skips files without a compared ``cuda``/``nccl``/``xla`` literal: a new literal rule
    with another word would have its round trips skipped."""
    import tpu_workbench.migrate.rules  # noqa: F401 (registers every family)
    from tpu_workbench.migrate.rules._literal import LiteralRule
    from tpu_workbench.migrate.rules.base import all_rules

    rules = [
        r
        for r in all_rules()
        if isinstance(r, type) and issubclass(r, LiteralRule) or isinstance(r, LiteralRule)
    ]
    assert rules
    for r in rules:
        assert r.pattern.pattern.startswith(("cuda", "nccl", "xla")), r.code
