"""Wrong rewrites found by the first reading of held-out check 22 (benchmarks/migrate_corpus_heldout22.txt), each
as a class in its own words, each asserting the rewrite it must not make."""

from __future__ import annotations

import pytest
from migrate_helpers import run, run_on_tpu, run_without_torchtpu

from tpu_workbench.migrate._foreign import search_folders, third_party
from tpu_workbench.migrate.rules.cuda_api import cuda_only_module


# --- Megatron: `megatron/core/transformer/moe/moe_utils.py` imports the project's own
# `megatron.core.transformer.cuda_graphs`; the project's modules were looked for only 4 folders up, so from 5 down
# the module was a third party's named like a compiled CUDA extension and the file was left as written ---
@pytest.mark.parametrize("marker", ["setup.py", "pyproject.toml", ".git"])
@pytest.mark.parametrize("depth", [1, 5, 9])
def test_a_project_module_deep_below_the_root_is_the_projects_own(tmp_path, marker, depth):
    root = tmp_path / "repo"
    (root / "proj" / "core").mkdir(parents=True)
    (root / "proj" / "core" / "cuda_graphs.py").write_text("def capturing():\n    return False\n")
    (root / marker).mkdir() if marker == ".git" else (root / marker).write_text("")
    deep = root.joinpath(*["proj"] + [f"d{i}" for i in range(depth)])
    deep.mkdir(parents=True, exist_ok=True)
    user = deep / "user.py"
    user.write_text("from proj.core.cuda_graphs import capturing\n")
    assert not third_party("proj.core.cuda_graphs", str(user))
    assert not cuda_only_module("proj.core.cuda_graphs", str(user))


def test_the_search_stops_at_the_repository_root_and_without_markers_at_a_fixed_depth(tmp_path):
    outside = tmp_path / "proj_outside.py"
    outside.write_text("")
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    deep = root / "a" / "b"
    deep.mkdir(parents=True)
    assert search_folders(str(deep))[-1] == str(root)
    (deep / "x.py").write_text("")
    assert third_party("proj_outside", str(deep / "x.py"))  # (a module beside the repository is not its own)
    bare = tmp_path / "bare" / "1" / "2" / "3" / "4" / "5"
    bare.mkdir(parents=True)
    assert len(search_folders(str(bare))) == 4


# --- TorchServe's base handler: `try: import torch_xla...; XLA_AVAILABLE = True / except ImportError:
# XLA_AVAILABLE = False`; the import was removed as unused, the flag became always True and a CPU-only machine
# took `elif XLA_AVAILABLE: torch.device("tpu")` ---
PROBES = {
    "flag-in-both": "try:\n    import torch_xla.core.xla_model as xm\n    XLA_AVAILABLE = True\n"
    "except ImportError:\n    XLA_AVAILABLE = False\n",
    "flag-before": "XLA_AVAILABLE = True\ntry:\n    import torch_xla.core.xla_model as xm\n"
    "except (ImportError, RuntimeError):\n    XLA_AVAILABLE = False\n",
    "flag-in-else": "XLA_AVAILABLE = False\ntry:\n    import torch_xla.core.xla_model as xm\n"
    "except Exception:\n    pass\nelse:\n    XLA_AVAILABLE = True\n",
}
LADDER = (
    "if torch.cuda.is_available():\n    device = torch.device('cuda')\nelif XLA_AVAILABLE:\n"
    "    device = xm.xla_device()\nelse:\n    device = torch.device('cpu')\nprint('device', device.type)\n"
)


@pytest.mark.parametrize("probe", sorted(PROBES))
def test_an_import_probe_keeps_its_import_and_a_cpu_only_run_stays_on_the_cpu(tmp_path, probe):
    out = run("import torch\n" + PROBES[probe] + LADDER).new_source
    assert "import torch_xla.core.xla_model as xm" in out
    proc = run_without_torchtpu(tmp_path, out)
    assert proc.returncode == 0 and "device cpu" in proc.stdout, proc.stderr[-1500:]


def test_a_try_whose_body_uses_the_import_is_not_a_probe():
    src = (
        "import torch\ndef dev():\n    try:\n        import torch_xla.core.xla_model as xm\n"
        "        return xm.xla_device()\n    except ImportError:\n        return torch.device('cpu')\n"
    )
    assert "torch_xla" not in run(src).new_source


# --- Megatron's distributed optimizer: `param.type() in ['torch.cuda.HalfTensor', 'torch.cuda.BFloat16Tensor']`
# was flagged while its sibling arm `== 'torch.cuda.FloatTensor'` was renamed: bf16 params fell through to the
# dispatch's `raise TypeError` ---
def test_every_arm_of_a_tensor_type_dispatch_is_renamed_alike():
    src = (
        "import torch\ndef kind(p):\n    if p.type() in ['torch.cuda.HalfTensor', 'torch.cuda.BFloat16Tensor']:\n"
        "        return 'half'\n    elif p.type() == 'torch.cuda.FloatTensor':\n        return 'float'\n"
        "    raise TypeError(p.type())\n"
        "print(kind(torch.ones(2, device='cuda', dtype=torch.bfloat16)), kind(torch.ones(2, device='cuda')))\n"
    )
    out = run(src).new_source
    assert "['torch.tpu.HalfTensor', 'torch.tpu.BFloat16Tensor']" in out and "'torch.tpu.FloatTensor'" in out
    proc = run_on_tpu(out)
    assert proc.returncode == 0 and "half float" in proc.stdout, proc.stderr[-1500:]


# --- Megatron's tests: `monkeypatch.setattr(torch.version, "cuda", "13.2")` became `"tpu"`, an attribute
# torch.version does not have: monkeypatch raised AttributeError ---
@pytest.mark.parametrize(
    "call",
    [
        'monkeypatch.setattr(torch.version, "cuda", "13.2")',
        'setattr(torch.version, "cuda", None)',
        'hasattr(torch.backends, "cudnn")',
        'mock.patch.object(torch, "cuda", fake)',
        'monkeypatch.delattr(torch.version, name="cuda")',
    ],
)
def test_an_attribute_name_is_not_a_device(call):
    out = run(f"import torch\nx = torch.ones(2, device='cuda')\n{call}\n").new_source
    assert call in out and "device='tpu'" in out


# --- `torch._C._cuda_clearCublasWorkspaces()` left unflagged next to migrated code: absent without CUDA ---
def test_a_private_cuda_binding_is_flagged_and_the_rest_of_torch_c_is_not():
    res = run("import torch\ntorch._C._cuda_clearCublasWorkspaces()\nstate = torch._C._get_tracing_state()\n")
    assert [d.code for d in res.diagnostics] == ["TPU299"]
    assert "private CUDA binding" in res.diagnostics[0].message


# --- torchrec / Megatron: `@unittest.skipIf(torch.cuda.device_count() < 1, "This test requires CUDA device")` and a
# module-level `pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), ...)` were kept as CUDA's guards
# while the tests they gate were rewritten to "tpu": skipped on a TPU host, broken on a CUDA one ---
@pytest.mark.parametrize(
    "gate",
    [
        '@unittest.skipIf(torch.cuda.device_count() < 1, "This test requires CUDA device")',
        '@unittest.skipIf(\n    torch.cuda.device_count() == 0,\n    "requires CUDA",\n)',
        '@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA required")',
    ],
)
def test_a_test_its_skip_keeps_on_cuda_is_left_whole(gate):
    src = f"import unittest\nimport pytest\nimport torch\n\n\n{gate}\ndef test_x():\n    t = torch.ones(2, device='cuda')\n"
    res = run(src)
    assert "device='cuda'" in res.new_source and "'tpu'" not in res.new_source
    todos = [d for d in res.diagnostics if d.code == "TPU201"]
    assert len(todos) == 1 and "\n" not in todos[0].message


def test_a_module_gated_on_cuda_by_pytestmark_is_left_whole():
    src = (
        "import pytest\nimport torch\n\npytestmark = [\n    pytest.mark.skipif(not torch.cuda.is_available(), "
        'reason="CUDA required"),\n    pytest.mark.internal,\n]\n\n\ndef test_x():\n'
        "    t = torch.ones(2, device='cuda')\n    torch.cuda.synchronize()\n"
    )
    res = run(src)
    assert res.new_source.count("TODO(tpu-migrate") == 1
    assert "device='cuda'" in res.new_source and "torch.cuda.synchronize()" in res.new_source


def test_a_module_gated_on_any_accelerator_is_still_migrated():
    src = (
        "import pytest\nimport torch\n\npytestmark = pytest.mark.skipif(not torch.cuda.is_available(), "
        'reason="needs an accelerator")\n\n\ndef test_x():\n    t = torch.ones(2, device="cuda")\n'
    )
    assert 'device="tpu"' in run(src).new_source


# --- TorchServe's DeepSpeed-MII handlers and Megatron's nvshmem copy service: CUDA-only stacks not known as such,
# so the device strings around them were renamed and the files looked migrated ---
@pytest.mark.parametrize("stack", ["mii", "nvshmem.core"])
def test_a_cuda_only_stack_leaves_its_file_as_written(stack):
    res = run(f"import torch\nimport {stack}\nx = torch.ones(2, device='cuda')\n")
    assert "device='cuda'" in res.new_source
    assert any(d.code == "TPU211" and stack.split(".")[0] in d.message for d in res.diagnostics)


@pytest.mark.parametrize(
    "body",
    [
        "    if flag:\n        import torch_xla.core.xla_model as xm\n    HAVE_XLA = True\n",
        "    with ctx:\n        import torch_xla\n",
        "    for m in mods:\n        importlib.import_module(m)\n    import torch_xla\n",
    ],
)
def test_a_try_with_compound_statements_is_read_without_failing(body):
    """(Megatron's unified_memory.py: a try body holding an ``if`` made the probe test raise on its block.)"""
    run(
        "import torch\ntry:\n"
        + body
        + "except ImportError:\n    HAVE_XLA = False\nx = torch.ones(1).cuda()\n"
    )


# --- pytorch-cifar100: `print(torch.cuda.memory_summary())` in the blocks its --gpu flag now sends to 'tpu' was
# only flagged; without CUDA it raises (KeyError), so the run died after its first evaluation ---
def test_memory_summary_prints_the_accelerators_statistics_on_tpu():
    src = (
        "import torch\nnet = torch.nn.Linear(2, 2)\nif gpu:\n    net = net.cuda()\n"
        "    print(torch.cuda.memory_summary(device=None, abbreviated=True))\n"
    )
    out = run("gpu = True\n" + src).new_source
    assert "_tpu_memory_summary(device=None, abbreviated=True)" in out
    proc = run_on_tpu(out)
    assert proc.returncode == 0 and "allocated_bytes.all.current" in proc.stdout, proc.stderr[-1500:]


# --- TorchServe's AOTInductor export scripts: the model and inputs went to 'tpu' before
# torch._export.aot_compile, which builds for the CPU or CUDA only (on a TPU host the original exported for the CPU)
@pytest.mark.parametrize(
    "call",
    ["torch._export.aot_compile(model, inputs)", "torch._inductor.aoti_compile_and_package(ep)"],
)
def test_an_aot_inductor_export_is_left_as_written(call):
    src = (
        "import torch\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
        f"model = torch.nn.Linear(2, 2).to(device)\ninputs = (torch.ones(1, 2, device=device),)\nso = {call}\n"
    )
    res = run(src)
    assert "'cuda' if torch.cuda.is_available()" in res.new_source
    assert any(d.code == "TPU211" and "AOTInductor" in d.message for d in res.diagnostics)


# --- torchrec's golden training: inside a function, `backend = "nccl"` was kept because a branch later compares
# `backend == "nccl"` (to build NCCL-only codecs), while the same name went to init_process_group: on TPU it
# asked for NCCL and raised. A comparison that only picks a branch keeps nothing; an assertion still does ---
def test_a_backend_compared_only_to_pick_a_branch_is_still_renamed_where_it_is_bound():
    body = (
        "    if torch.cuda.is_available():\n        device = torch.device('cuda')\n        backend = 'nccl'\n"
        "    else:\n        device = torch.device('cpu')\n        backend = 'gloo'\n"
        "    dist.init_process_group(backend=backend)\n    codecs = make() if backend == 'nccl' else None\n"
    )
    out = run("import torch\nimport torch.distributed as dist\ndef main():\n" + body).new_source
    assert "backend = 'tpu_dist'" in out and "if backend == 'nccl' else None" in out


def test_a_backend_default_an_assertion_compares_is_kept_with_it():
    src = (
        "import torch.distributed as dist\ndef setup(backend='nccl'):\n    assert backend == 'nccl'\n"
        "    dist.init_process_group(backend)\n"
    )
    out = run(src).new_source
    assert "backend='nccl'" in out and "assert backend in ('nccl', 'tpu_dist')" in out


# --- TorchServe's handlers: `self.map_location = "cuda"` renamed, but `self.map_location + ":" + str(gpu_id)`
# kept: 'tpu:None' (no gpu_id on a TPU host) or 'tpu:<rank>' (tensor parallel), both refused by TorchTPU ---
@pytest.mark.parametrize(
    "setup",
    [
        'self.map_location = "cuda"',
        'self.map_location = "cuda" if torch.cuda.is_available() else "cpu"',
    ],
)
def test_a_name_holding_a_renamed_device_loses_its_joined_ordinal(setup):
    src = (
        "import torch\n\n\nclass Handler:\n    def initialize(self, gpu_id):\n"
        f"        {setup}\n        self.device = torch.device(self.map_location + ':' + str(gpu_id))\n\n\n"
        "h = Handler()\nh.initialize(None)\nprint(h.device.type)\n"
    )
    out = run(src).new_source
    assert "torch.device(self.map_location)" in out
    proc = run_on_tpu(out)
    assert proc.returncode == 0 and proc.stdout.strip() == "tpu", proc.stderr[-1500:]


def test_a_name_with_a_value_from_elsewhere_keeps_its_ordinal():
    src = (
        "import torch\ndef make(kind, rank):\n    if kind is None:\n        kind = 'cuda'\n"
        "    return torch.device(kind + ':' + str(rank))\n"
    )
    assert "kind + ':' + str(rank)" in run(src).new_source


# --- simple-faster-rcnn: the inputs of torchvision.ops.nms went from .cuda() to .to("tpu"); its kernels are the
# CPU's, CUDA's and MPS's only, and TorchTPU has no CPU fallback by default: a silent move into a raise ---
@pytest.mark.parametrize(
    "use",
    [
        "from torchvision.ops import nms\nkeep = nms(boxes, scores, 0.7)\n",
        "import torchvision\nkeep = torchvision.ops.boxes.batched_nms(boxes, scores, idx, 0.7)\n",
        "from torchvision.ops import RoIPool\npool = RoIPool((7, 7), 1 / 16)\n",
    ],
)
def test_torchvisions_compiled_detection_ops_are_flagged(use):
    res = run("import torch\nboxes = torch.rand(4, 4).cuda()\n" + use)
    assert any(d.code == "TPU211" and "CPU and CUDA kernels only" in d.message for d in res.diagnostics)


def test_torchvisions_other_ops_are_not_flagged():
    res = run(
        "import torch\nimport torchvision\nb = torch.rand(4, 4).cuda()\nx = torchvision.ops.box_area(b)\n"
    )
    assert not any(d.code == "TPU211" for d in res.diagnostics)


# --- Megatron's tests: a test reaching a triton kernel only through the package's chain of imports was left as
# written ("a test of it") while the module it tests was migrated: they no longer agreed on the device ---
def test_only_a_test_that_imports_a_cuda_only_project_file_itself_is_left_as_written(tmp_path):
    import subprocess
    import sys

    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "setup.py").write_text("")
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "kern.py").write_text("import triton\n\n\ndef k():\n    return 1\n")
    (root / "pkg" / "helpers.py").write_text("from pkg.kern import k\n")
    (root / "pkg" / "util.py").write_text(
        "import torch\nfrom pkg.helpers import k\n\n\ndef f():\n    return torch.ones(2, device='cuda')\n"
    )
    test_body = "import torch\n\n\ndef test_x():\n    assert torch.ones(1, device='cuda').sum() == 1\n"
    (root / "tests" / "test_direct.py").write_text("from pkg.kern import k\n" + test_body)
    (root / "tests" / "test_chain.py").write_text("from pkg.util import f\n" + test_body)
    cli = [sys.executable, "-m", "tpu_workbench.migrate.cli", "--write", "-q", str(root)]
    subprocess.run(cli, capture_output=True, text=True, timeout=300, check=False)
    assert "device='cuda'" in (root / "tests" / "test_direct.py").read_text()
    assert "device='tpu'" in (root / "tests" / "test_chain.py").read_text()
    assert "device='tpu'" in (root / "pkg" / "util.py").read_text()


# --- Megatron's test_cache_refresh / test_mimo_model: the test patched torch.cuda.synchronize (current_device)
# while the code under test now calls torch.accelerator's: the patch missed, and a CPU-only run raised ---
@pytest.mark.parametrize(
    "patch, expected",
    [
        (
            'monkeypatch.setattr(torch.cuda, "synchronize", fake)',
            'monkeypatch.setattr(torch.accelerator, "synchronize", fake)',
        ),
        (
            'mock.patch.object(torch.cuda, "memory_allocated", fake)',
            'mock.patch.object(torch.accelerator, "memory_allocated", fake)',
        ),
        (
            'mock.patch("torch.cuda.current_device", return_value=0)',
            'mock.patch("torch.accelerator.current_device_index", return_value=0)',
        ),
        (
            'mock.patch("pkg.mod.torch.cuda.synchronize")',
            'mock.patch("pkg.mod.torch.accelerator.synchronize")',
        ),
    ],
)
def test_a_patch_of_a_renamed_cuda_function_follows_the_rename(patch, expected):
    src = f"import torch\nfrom unittest import mock\n\n\ndef test_x(monkeypatch):\n    p = {patch}\n"
    out = run(src).new_source
    assert expected in out and "TODO" not in out


def test_the_migrated_code_sees_the_patch(tmp_path):
    src = (
        "import torch\n\n\ndef work():\n    torch.cuda.synchronize()\n    return torch.cuda.current_device()\n\n\n"
        "class MP:\n    def setattr(self, obj, name, value):\n        setattr(obj, name, value)\n\n\n"
        "calls = []\nmonkeypatch = MP()\nmonkeypatch.setattr(torch.cuda, 'synchronize', lambda: calls.append(1))\n"
        "monkeypatch.setattr(torch.cuda, 'current_device', lambda: 7)\nprint(work(), calls)\n"
    )
    proc = run_without_torchtpu(tmp_path, run(src).new_source)
    assert proc.returncode == 0 and proc.stdout.strip() == "7 [1]", proc.stderr[-1500:]


# --- Megatron's test_hyper_comm_grid: `HyperCommGrid(..., backend="nccl")` renamed while the test asserts
# `kwargs["backend"] == "nccl"` on the mocked call: failed on every machine ---
def test_a_keyword_a_test_reads_back_by_its_name_is_kept_with_the_assertion():
    src = (
        "import torch\n\n\ndef test_create(mock_new):\n"
        '    grid = HyperCommGrid([2, 2], ["tp", "dp"], backend="nccl", device="cuda")\n'
        "    args, kwargs = mock_new.call_args\n"
        '    assert kwargs["backend"] == "nccl"\n'
    )
    out = run(src).new_source
    assert 'backend="nccl"' in out and 'kwargs["backend"] == "nccl"' in out
    assert 'device="tpu"' in out  # (a keyword not read back is a placement as before)


# --- Megatron's moe layers import vllm_fused_moe.py (triton kernels under a guarded import, MagicMock fallback) and
# ops/paged_stash.py (an unguarded `import triton`): the chain TODO named the first in sorted order, whose import
# works without triton, and said the module runs on TPU once that one is ported ---
def test_a_chain_todo_names_the_file_whose_cuda_import_is_unguarded(tmp_path):
    import subprocess
    import sys

    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "setup.py").write_text("")
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "a_fused.py").write_text(
        "try:\n    import triton\nexcept ImportError:\n    from unittest.mock import MagicMock\n"
        "    triton = MagicMock()\n\n\n@triton.jit\ndef kernel(x):\n    pass\n"
    )
    (root / "pkg" / "b_stash.py").write_text("import triton\n\n\ndef stash():\n    return 1\n")
    (root / "pkg" / "layer.py").write_text(
        "import torch\nfrom pkg.a_fused import kernel\nfrom pkg.b_stash import stash\n\n\n"
        "def f():\n    return torch.ones(2, device='cuda')\n"
    )
    cli = [sys.executable, "-m", "tpu_workbench.migrate.cli", "--write", "-q", str(root)]
    subprocess.run(cli, capture_output=True, text=True, timeout=300, check=False)
    out = (root / "pkg" / "layer.py").read_text()
    assert "TPU211" in out and "b_stash.py" in out and "a_fused.py" not in out, out
