"""Wrong rewrites found by reading every changed hunk of held-out check 13 (benchmarks/migrate_corpus_heldout13.txt),
each as a class in its own words, each asserting the rewrite it must not make (or the one it must not miss)."""

from __future__ import annotations

import pytest
from migrate_helpers import run
from test_heldout9_classes import _code, _migrate_tree


# --- a folder of tests named like a CUDA stack is not the project's package (mamba's tests/ops/triton/) ----------
def test_a_folder_of_tests_named_like_a_cuda_stack_does_not_hide_the_stack(tmp_path):
    tests = tmp_path / "tests" / "ops" / "triton"
    tests.mkdir(parents=True)
    (tests / "test_kernel.py").write_text(
        "import torch\nimport triton\nfrom mylib.kernels import step\n"
        "def test_step():\n    device = 'cuda'\n    x = torch.randn(4, device=device)\n    step(x)\n"
    )
    out = _migrate_tree(tmp_path)["tests/ops/triton/test_kernel.py"]
    # the wrong rewrite: device = 'tpu' feeding a triton kernel, no TODO (triton taken for tests/ops/triton/)
    assert "device = 'cuda'" in out and "TPU211" in out


@pytest.mark.parametrize(
    "layout",
    [
        {"nvidia/modeling.py": "X = 1\n"},  # DeepSpeedExamples' BingBertGlue: its own nvidia/ package
        {"triton/__init__.py": "", "triton/ops.py": "X = 1\n"},
    ],
)
def test_the_projects_own_package_named_like_a_cuda_stack_is_still_its_own(tmp_path, layout):
    for rel, text in layout.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    root = next(iter(layout)).split("/")[0]
    sub = "modeling" if root == "nvidia" else "ops"
    (tmp_path / "train.py").write_text(
        f"import torch\nfrom {root}.{sub} import X\nmodel = torch.nn.Linear(2, 2).cuda()\n"
    )
    out = _migrate_tree(tmp_path)["train.py"]
    assert 'to("tpu")' in out and "TPU211" not in out


def test_a_folder_named_like_a_stack_without_the_submodule_imported_is_not_the_stack(tmp_path):
    (tmp_path / "triton").mkdir()
    (tmp_path / "triton" / "notes.py").write_text("X = 1\n")
    (tmp_path / "k.py").write_text(
        "import torch\nimport triton.language as tl\ndef f():\n    return torch.empty(2, device='cuda')\n"
    )
    out = _migrate_tree(tmp_path)["k.py"]
    assert "device='cuda'" in out and "TPU211" in out


# --- kernel stacks beyond triton: a file that compiles kernels with tilelang or runs megablocks is left as written
@pytest.mark.parametrize(
    "imp",
    ["import tilelang", "import tilelang.language as T", "from megablocks.layers.arguments import Arguments"],
)
def test_a_file_built_on_a_cuda_only_kernel_library_is_left_as_written(imp):
    src = f"import torch\n{imp}\ndef fwd(q):\n    o = torch.empty(q.shape, device='cuda')\n    return o\n"
    res = run(src)
    assert "device='cuda'" in _code(res.new_source) and "TPU211" in res.new_source


# --- a check that switches on a method of a project class reaching CUDA-only calls (sam2's trainer + MemMeter) ---
_METER = """import torch


class MemMeter:
    def __init__(self, name):
        self.name, self.val = name, 0

    def update(self, reset_peak_usage=True):
        self.val = torch.cuda.mem_get_info() // 1e9
        if reset_peak_usage:
            torch.cuda.mem_get_info()
"""
_TRAINER = """import torch
from utils.meters import MemMeter


def val_epoch(model, loader):
    mem = MemMeter("Mem (GB)")
    for batch in loader:
        model(batch)
        if torch.cuda.is_available():
            mem.update(reset_peak_usage=True)
"""


def test_a_check_switching_on_a_method_that_reaches_cuda_state_is_kept(tmp_path):
    (tmp_path / "utils").mkdir()
    (tmp_path / "utils" / "__init__.py").write_text("")
    (tmp_path / "utils" / "meters.py").write_text(_METER)
    (tmp_path / "trainer.py").write_text(_TRAINER)
    out = _migrate_tree(tmp_path)["trainer.py"]
    # the wrong rewrite: torch.accelerator.is_available() is true on TPU, and update() resets CUDA's statistics
    assert "if torch.cuda.is_available():" in out and "TPU201" in out


def test_a_check_switching_on_a_portable_project_class_is_still_migrated(tmp_path):
    (tmp_path / "utils").mkdir()
    (tmp_path / "utils" / "__init__.py").write_text("")
    (tmp_path / "utils" / "meters.py").write_text(
        "import torch\n\n\nclass MemMeter:\n    def update(self):\n        torch.cuda.synchronize()\n"
    )
    (tmp_path / "trainer.py").write_text(_TRAINER)
    assert "torch.accelerator.is_available()" in _migrate_tree(tmp_path)["trainer.py"]


def test_a_check_calling_a_function_of_this_file_that_reaches_cuda_state_is_kept():
    src = (
        "import torch\n\n\ndef reset():\n    torch.cuda.mem_get_info()\n\n\n"
        "def step():\n    if torch.cuda.is_available():\n        reset()\n"
    )
    out = run(src).new_source
    assert "if torch.cuda.is_available():" in out


# --- a device template completed by concatenation is the same run-time ordinal (ogb's pcqm4m multi-GPU) ---------
@pytest.mark.parametrize("form", ['"cuda:" + str(rank)', "'cuda:' + rank_str", '"cuda:" + str(args.device)'])
def test_a_concatenated_run_time_ordinal_is_the_processs_own_device(form):
    src = f"import torch\ndef run(rank, args, rank_str):\n    return torch.device({form})\n"
    res = run(src)
    # the wrong rewrite: torch.device("tpu:" + str(rank)) names another process's chip under mp.spawn
    assert 'torch.device("tpu")' in res.new_source or "torch.device('tpu')" in res.new_source
    assert len([d for d in res.diagnostics if d.code == "TPU101"]) == 1  # one report, not one per literal


def test_a_concatenation_with_a_literal_keeps_its_ordinal():
    assert '"tpu:" + "0"' in run('import torch\nd = torch.device("cuda:" + "0")\n').new_source


# --- a check whose branch picks a framework's name for CUDA (lightning-bolts' tests) -------------------------------
def test_a_check_choosing_the_gpu_accelerator_is_kept():
    src = (
        "import torch\nfrom lightning import Trainer\n\n\ndef test_fit():\n"
        "    if torch.cuda.device_count() >= 1:\n        devices = torch.cuda.device_count()\n"
        '        accelerator = "gpu"\n    else:\n        devices, accelerator = 1, "cpu"\n'
        "    Trainer(accelerator=accelerator, devices=devices)\n"
    )
    out = _code(run(src).new_source)
    # the wrong rewrite: a TPU host counts one device and asks Lightning for its CUDA accelerator
    assert "torch.accelerator" not in out


# --- a check deciding which test files pytest collects (open-instruct's conftest) -----------------------------
def test_a_check_that_decides_collection_of_gpu_tests_is_kept():
    src = 'import torch\ncollect_ignore = []\nif not torch.cuda.is_available():\n    collect_ignore += ["test_vllm_gpu.py"]\n'
    assert "torch.cuda.is_available()" in _code(run(src).new_source)


# --- a DeepSpeed engine built in a file whose import sits in a block (open-instruct's grpo_fast) ------------------
def test_a_deepspeed_engine_under_a_guarded_import_leaves_the_file_as_written():
    src = (
        "import contextlib\nimport torch\nwith contextlib.suppress(Exception):\n    import deepspeed\n\n\n"
        "def setup(model, cfg):\n    engine, *_ = deepspeed.initialize(model=model, config=cfg)\n"
        "    batch = torch.zeros(2).cuda()\n    return engine(batch)\n"
    )
    res = run(src)
    assert ".cuda()" in _code(res.new_source) and "TPU916" in res.new_source


# --- libraries with CPU and CUDA kernels only: graph learning (ogb's examples) -------------------------------------
@pytest.mark.parametrize(
    "imp",
    [
        "from torch_sparse import SparseTensor",
        "import torch_scatter",
        "import dgl",
        "from torch_cluster import knn",
    ],
)
def test_a_program_on_a_cpu_or_cuda_only_library_keeps_its_device_choice(imp):
    src = f"import torch\n{imp}\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
    res = run(src)
    assert "'cuda'" in _code(res.new_source) and "runs on the CPU or CUDA only" in res.new_source


def test_a_pyg_sparse_tensor_adjacency_keeps_the_device_choice():
    src = (
        "import torch\nimport torch_geometric.transforms as T\n\n\ndef main(args):\n"
        "    device = f'cuda:{args.device}' if torch.cuda.is_available() else 'cpu'\n"
        "    transform = T.ToSparseTensor()\n    return device, transform\n"
    )
    res = run(src)
    # the wrong rewrite: SparseTensor's torch_sparse kernels on "tpu" (the original ran on the CPU of a TPU host)
    assert "torch.cuda.is_available()" in _code(res.new_source) and "torch_sparse" in res.new_source


# --- set_default_tensor_type(cuda) beside legacy constructors (nerf-pytorch) ------------------------------------------
def test_a_cuda_default_tensor_type_with_legacy_constructors_is_flagged(tmp_path):
    (tmp_path / "helpers.py").write_text("import torch\ndef pose(p):\n    return torch.Tensor(p)\n")
    main = tmp_path / "run.py"
    main.write_text(
        "import torch\nif __name__ == '__main__':\n    torch.set_default_tensor_type('torch.cuda.FloatTensor')\n"
    )
    res = run(main.read_text(), path=str(main))
    # the wrong rewrite: set_default_device('tpu') leaves torch.Tensor(...) on the CPU beside 'tpu' tensors
    assert "set_default_device" not in _code(res.new_source) and "legacy constructors" in res.new_source


def test_a_cuda_default_tensor_type_alone_becomes_the_default_device(tmp_path):
    main = tmp_path / "run.py"
    main.write_text(
        "import torch\ntorch.set_default_tensor_type('torch.cuda.FloatTensor')\nx = torch.zeros(2)\n"
    )
    assert "torch.set_default_device('tpu')" in run(main.read_text(), path=str(main)).new_source


# --- a storage moved inside map_location takes the device by keyword (d3rlpy) --------------------------------------
def test_a_storage_moved_in_map_location_loads_on_the_device(tmp_path):
    import torch

    import tpu_workbench.backend  # noqa: F401

    src = "import torch\ndef load(f, index):\n    return torch.load(f, map_location=lambda storage, loc: storage.cuda(int(index)))\n"
    out = run(src).new_source
    ns: dict = {}
    exec(compile(out, "<migrated>", "exec"), ns)
    torch.save({"a": torch.arange(3.0)}, tmp_path / "ck.pt")
    assert ns["load"](tmp_path / "ck.pt", "0")["a"].device.type == "tpu"


# --- CUDA's device name handed to the program's own lookup (open-instruct's ModelDims) -----------------------------
def test_a_device_name_handed_to_the_programs_lookup_keeps_the_check():
    src = (
        'import torch\nGPU_SPECS = {"h100": 1}\n\n\ndef get_device_name(n):\n    return GPU_SPECS[n.lower()]\n\n\n'
        "def dims():\n    return get_device_name(torch.cuda.get_device_name(0)) if torch.cuda.is_available() else None\n"
    )
    out = _code(run(src).new_source)
    # the wrong rewrite: torch.tpu.get_device_name(0) on TPU is no key of the NVIDIA table: ValueError / KeyError
    assert "torch.cuda.get_device_name(0)) if torch.cuda.is_available()" in out


def test_a_device_name_printed_is_still_migrated():
    src = "import torch\nif torch.cuda.is_available():\n    print(torch.cuda.get_device_name(0))\n"
    assert "torch.accelerator.is_available()" in run(src).new_source


# --- the devices of one host divided into a shard degree (open-instruct's OLMo-core FSDP) -------------------------
def test_a_count_divided_into_a_shard_degree_keeps_the_count():
    src = (
        "import torch\ndef setup(cp_degree):\n"
        "    gpus_per_node = torch.cuda.device_count() if torch.cuda.is_available() else 1\n"
        "    return gpus_per_node // cp_degree\n"
    )
    res = run(src)
    # the wrong rewrite: 1 device per process on TPU, so every process would shard over itself (full replicas)
    assert "torch.cuda.device_count()" in res.new_source and "LOCAL_WORLD_SIZE" in res.new_source


# --- .cuda() on a project object that places itself with a framework engine (audiolm's SoundStreamTrainer) -------
_TRAINER_PKG = """import torch
from accelerate import Accelerator


class Trainer(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.accelerator = Accelerator()
        self.model = self.accelerator.prepare(model)
"""


def test_cuda_on_a_project_object_that_builds_an_accelerator_is_flagged(tmp_path):
    (tmp_path / "mylib").mkdir()
    (tmp_path / "mylib" / "__init__.py").write_text("from mylib.trainer import Trainer\n")
    (tmp_path / "mylib" / "trainer.py").write_text(_TRAINER_PKG)
    (tmp_path / "demo.py").write_text(
        "import torch\nfrom mylib import Trainer\nmodel = torch.nn.Linear(2, 2).cuda()\ntrainer = Trainer(model).cuda()\n"
    )
    out = _migrate_tree(tmp_path)["demo.py"]
    # the wrong rewrite: Trainer(...).to("tpu") while accelerate sends its batches to its own device (the CPU)
    assert "Trainer(model).cuda()" in out and "places its model itself" in out
    assert 'torch.nn.Linear(2, 2).to("tpu")' in out


def test_one_todo_per_cuda_only_package_inside_an_import_block():
    src = (
        "import torch\ntry:\n    import megablocks.ops as ops\n    from megablocks.layers.all_to_all import all_to_all\n"
        "except ImportError:\n    ops = None\nx = torch.zeros(1).cuda()\n"
    )
    assert run(src).new_source.count("TPU211") == 1


def test_a_gpu_label_compared_later_is_not_a_framework_setting():
    """sam2's distributed helpers: ``orig_device = "cpu" if not t.is_cuda else "gpu"`` is only a label, read back as
    ``orig_device == "cpu"`` beside a migrated ``t.is_cuda``; kept, a 'tpu' tensor would come back on the CPU."""
    src = (
        'import torch\ndef f(t):\n    orig_device = "cpu" if not t.is_cuda else "gpu"\n'
        "    if t.is_cuda and orig_device == 'cpu':\n        t = t.cpu()\n    return t\n"
    )
    assert "t.is_cuda" not in _code(run(src).new_source)


# --- another library's NCCL communicator is CUDA-only (open-instruct's vLLM weight transfer) ------------------------
def test_a_third_party_nccl_module_is_cuda_only():
    src = (
        "import torch\nimport vllm\nfrom vllm.distributed.weight_transfer.nccl_engine import NCCLWeightTransferEngine\n\n\n"
        "def init(info):\n    torch.cuda.set_device(0)\n    return NCCLWeightTransferEngine.trainer_init(info)\n"
    )
    res = run(src)
    # the missed flag: set_device dropped, and the NCCL engine then ran on the TPU path unflagged
    assert "torch.cuda.set_device(0)" in res.new_source and "tpu_dist" in res.new_source


def test_one_todo_per_package_across_one_line_import_blocks():
    src = (
        "import torch\ntry:\n    from flash_attn.ops.layer_norm import f\nexcept ImportError: pass\n"
        "try: from flash_attn import g\nexcept ImportError: pass\nx = torch.zeros(1).cuda()\n"
    )
    assert run(src).new_source.count("TPU211") == 1
