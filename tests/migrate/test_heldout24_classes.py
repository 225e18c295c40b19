"""Wrong rewrites found on held-out check 24 (benchmarks/migrate_corpus_heldout24.txt), each as a class in its own
words, each asserting what the tool must (not) do."""

from __future__ import annotations

import pytest
import torch
from migrate_helpers import run, write_tree

from tpu_workbench.migrate.rules import _helpers

# --- a CUDA extension the project builds itself (Deformable-DETR's and DINO's MultiScaleDeformableAttention,
# named in setup.py through `extension = CUDAExtension`; torch-ngp's raymarching, built at run time by
# `load(name=...)` when the prebuilt module is missing): its wrappers' `.cuda()` fed TPU tensors to CUDA kernels
# with no TODO, and the kernel's check script was migrated ---
SETUP = (
    "import torch\nfrom torch.utils.cpp_extension import CUDAExtension, CppExtension\n\n"
    "extension = CppExtension\nif torch.cuda.is_available():\n    extension = CUDAExtension\n"
    'ext_modules = [extension("MsdaKernels", ["src/vision.cpp"])]\n'
)
FUNC = (
    "import torch\nimport MsdaKernels as MSDA\n\n\ndef attn(value, loc):\n"
    "    return MSDA.forward(value.cuda(), loc.cuda())\n"
)
CHECK = "import torch\nfrom functions.func import attn\n\nvalue = torch.rand(2, 3).cuda()\nprint(attn(value, value))\n"


def test_an_extension_the_project_builds_is_a_cuda_kernel_and_its_check_script_is_left(tmp_path):
    root = tmp_path / "ops"
    (root / "functions").mkdir(parents=True)
    (root / "setup.py").write_text(SETUP)
    (root / "functions" / "__init__.py").write_text("")
    (root / "functions" / "func.py").write_text(FUNC)
    (root / "test.py").write_text(CHECK)
    out = write_tree(root)
    func = out["functions/func.py"]
    assert "TPU211" in func and "`MsdaKernels` is CUDA-only" in func
    assert ".cuda()" in func and '"tpu"' not in func  # left as written
    assert "left as written" in out["test.py"] and ".cuda()" in out["test.py"]


BACKEND = (
    "import os\nfrom torch.utils.cpp_extension import load\n\n_src = os.path.dirname(__file__)\n"
    "_backend = load(name='_rays', sources=[os.path.join(_src, f) for f in ['rays.cu', 'bindings.cpp']])\n"
)
WRAPPER = (
    "import torch\n\n\ndef get_backend():\n    try:\n        import _rays as _backend\n    except ImportError:\n"
    "        {fallback}\n    return _backend\n\n\ndef march(x):\n    if not x.is_cuda:\n        x = x.cuda()\n"
    "    return get_backend().march(x)\n"
)


@pytest.mark.parametrize(
    ("fallback", "kept"),
    [("from .backend import _backend", True), ("_backend = None", False)],
)
def test_a_kernel_whose_only_fallback_is_another_build_is_left_as_written(tmp_path, fallback, kept):
    root = tmp_path / "proj"
    (root / "rays").mkdir(parents=True)
    (root / "setup.py").write_text("")
    (root / "rays" / "__init__.py").write_text("")
    (root / "rays" / "backend.py").write_text(BACKEND)
    (root / "rays" / "rays.py").write_text(WRAPPER.format(fallback=fallback))
    text = write_tree(root)["rays/rays.py"]
    assert ("x = x.cuda()" in text) is kept and "`_rays` is CUDA-only" in text  # (flagged either way)


# --- strings that are not devices: a folder in a path, another runtime's execution provider ---
@pytest.mark.parametrize(
    "line",
    [
        'sources = glob.glob(os.path.join(extensions_dir, "cuda", "*.cu"))',
        'found = os.path.exists(os.path.join("kernels", "cuda"))',
        'run_session(model, provider="cuda")',
    ],
)
def test_a_folder_or_a_provider_named_cuda_is_kept(line):
    src = f"import glob\nimport os\n\nimport torch\n\n{line}\nx = torch.zeros(1).cuda()\n"
    out = run(src).new_source
    assert line in out and '.to("tpu")' in out


# --- xtuner's Ray worker: `backend = "hccl"` for Ascend NPUs beside "nccl"; the helper turned both into tpu_dist ---
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("hccl", "hccl"),
        ("npu:hccl,cpu:gloo", "npu:hccl,cpu:gloo"),
        ("nccl", "tpu_dist"),
        ("cuda:nccl,cpu:gloo", "tpu:tpu_dist,cpu:gloo"),
        ("xccl", "xccl"),
    ],
)
def test_the_backend_helper_renames_nccl_alone(value, expected):
    scope: dict = {}
    exec(_helpers.helper(_helpers.BACKEND).source, scope)
    assert scope["_tpu_backend"](value) == expected


# --- SadTalker's arcface backbones, DINO: `torch.cuda.amp.autocast(self.fp16)` became `_tpu_autocast(enabled=...,
# dtype=torch.bfloat16)`, and the helper's CUDA branch ran bf16 autocast on a CUDA box (a V100 refuses it) ---
@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("torch.cuda.amp.autocast(self.fp16)", "_tpu_autocast(enabled=self.fp16, tpu_dtype=torch.bfloat16)"),
        (
            "torch.cuda.amp.autocast(dtype=torch.float16)",
            "_tpu_autocast(tpu_dtype=torch.bfloat16, dtype=torch.float16)",
        ),
        ("torch.autocast('cuda', dtype=torch.bfloat16)", "_tpu_autocast(dtype=torch.bfloat16)"),
    ],
)
def test_the_tpu_dtype_is_the_tpu_branchs_only(before, after):
    src = (
        "import torch\n\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n"
        f"        with {before}:\n            return x\n\n\nif torch.cuda.is_available():\n    pass\n"
    )
    out = run(src).new_source
    assert f"with {after}:" in out
    scope: dict = {"torch": torch}
    exec(_helpers.helper(_helpers.AUTOCAST).source, scope)
    on_tpu = scope["_tpu_autocast"](tpu_dtype=torch.bfloat16, dtype=torch.float16)
    assert on_tpu.device == "tpu" and on_tpu.fast_dtype == torch.bfloat16


def test_an_autocast_naming_its_device_after_other_keywords_gets_the_helper():
    # Fooocus's sub-quadratic attention, the CPU path's default: `torch.autocast(enabled=False, device_type='cuda')`
    src = (
        "import torch\n\n\ndef chunk(q, upcast):\n    if upcast:\n"
        "        with torch.autocast(enabled=False, device_type = 'cuda'):\n            return q.float()\n"
        "    return q\n"
    )
    out = run(src).new_source
    assert "_tpu_autocast(enabled=False)" in out and "device_type = 'tpu'" not in out


# --- NVIDIA serving stacks: Triton Inference Server's Python backend (KIND_GPU is CUDA, never a TPU),
# TensorRT-LLM, Polygraphy ---
@pytest.mark.parametrize(
    "stack",
    ["import triton_python_backend_utils as pb_utils", "import tensorrt_llm", "from polygraphy import cuda"],
)
def test_a_file_built_on_an_nvidia_serving_stack_is_left_as_written(stack):
    src = (
        f"{stack}\nimport torch\n\n\nclass TritonPythonModel:\n    def initialize(self, args):\n"
        '        self.device = "cuda" if args["model_instance_kind"] == "GPU" else "cpu"\n'
        "        self.x = torch.zeros(1).cuda()\n"
    )
    out = run(src).new_source
    code = "\n".join(line for line in out.splitlines() if "TODO" not in line)
    assert "TPU211" in out and '"cuda"' in code and ".cuda()" in code and "tpu" not in code


@pytest.mark.parametrize(
    "lib", ["import k2", "from fairscale.nn.data_parallel import FullyShardedDataParallel"]
)
def test_a_cpu_or_cuda_library_keeps_the_program_off_tpu(lib):
    src = f"{lib}\nimport torch\n\ndevice = torch.device('cuda')\nx = torch.zeros(1, device=device)\n"
    out = run(src).new_source
    assert "runs on the CPU or CUDA only" in out and "'tpu'" not in out.split("TODO")[-1].split("\n", 1)[1]


# --- stable-dreamfusion's get_GPU_mem: `num = torch.cuda.device_count()` ... `for i in range(num):
# torch.cuda.mem_get_info(i)`: the count became 1 on a TPU host and the loop raised at every epoch's end ---
def test_a_count_whose_loop_keeps_cuda_only_calls_stays_cudas():
    src = (
        "import torch\n\n\ndef mem():\n    num = torch.cuda.device_count()\n    for i in range(num):\n"
        "        free, total = torch.cuda.mem_get_info(i)\n\n\ndef names():\n"
        "    for i in range(torch.cuda.device_count()):\n        print(i)\n"
    )
    out = run(src).new_source
    assert "num = torch.cuda.device_count()" in out and "kept as CUDA's check" in out
    assert "range(torch.accelerator.device_count())" in out
    assert run(out).new_source == out


# --- CodeFormer's get_device: `'cuda' if torch.cuda.is_available() and torch.backends.cudnn.is_available() else
# 'cpu'`: the first test renamed, the second stayed False on a TPU host: the CPU, silently (and kept whole, its
# callers moved to 'tpu' beside it). The cuDNN test goes with the CUDA check; where that is kept, so is it ---
def test_a_cudnn_test_beside_a_rewritten_cuda_check_goes_with_it():
    src = (
        "import torch\n\n\ndef get_device():\n"
        "    return torch.device('cuda' if torch.cuda.is_available() and torch.backends.cudnn.is_available() "
        "else 'cpu')\n\n\ndef kept():\n"
        "    if torch.cuda.is_available() and torch.backends.cudnn.is_available():\n"
        "        g = torch.cuda.CUDAGraph()\n"
    )
    out = run(src).new_source
    assert "torch.device('tpu' if torch.accelerator.is_available() else 'cpu')" in out
    assert "if torch.cuda.is_available() and torch.backends.cudnn.is_available():" in out
    assert run(out).new_source == out


# --- xtuner's tests: `@parametrize.parametrize("device,tol", [("cuda", 1e-2)])` (the `parametrize` package) was
# called "a library that is not torch" whose device names are its own; its cases are test cases (held-out 25: one
# that is CUDA's alone moves with its test's body, see test_heldout25_classes) ---
def test_the_parametrize_package_makes_test_cases():
    src = (
        "import parametrize\nimport torch\n\n\nclass T:\n"
        '    @parametrize.parametrize("device", [("cuda",), ("cpu",)])\n    def test_x(self, device):\n'
        "        torch.zeros(1).to(device)\n"
    )
    out = run(src).new_source
    assert "is a test case of `parametrize.parametrize`" in out and "a library that is not torch" not in out


def test_a_dtype_chosen_by_a_cuda_query_is_rewritten_once():
    # nanoVLM's measure_vram.py: `autocast(dtype=torch.bfloat16 if torch.cuda.is_bf16_supported() else
    # torch.float16)`: the TPU dtype is not the rule's own choice, and one run is a fixed point
    src = (
        "import torch\n\n\ndef f(model, x):\n    if torch.cuda.is_available():\n"
        "        with torch.autocast(device_type='cuda', dtype=torch.bfloat16 if torch.cuda.is_bf16_supported() "
        "else torch.float16):\n            return model(x)\n"
    )
    out = run(src).new_source
    line = next(line for line in out.splitlines() if "with " in line)
    assert "tpu_dtype" not in line and "is_bf16_supported" not in line
    assert run(out).new_source == out


# --- found by the re-reading of held-out 23 and 24 ---
def test_a_name_bound_to_its_own_lowered_value_is_migrated():
    # LitServe's connector: `accelerator = accelerator.lower()` beside `accelerator == "cuda"` sent the search for
    # an outside value round in circles; the recursion was reported as "nested too deeply" and the file skipped
    src = (
        "import torch\n\n\ndef pick(accelerator):\n    accelerator = accelerator.lower()\n"
        '    if accelerator == "cuda" and torch.cuda.is_available():\n        return torch.zeros(1).cuda()\n'
    )
    res = run(src)
    assert res.new_source != src and "'tpu'" not in res.new_source.split("lower()")[0]


def test_an_optional_kernel_that_raises_without_it_is_not_a_cuda_only_module(tmp_path):
    # ClassyVision's SGD: `if self._use_larc: try: from apex.parallel.LARC import LARC except ImportError: raise`,
    # off by default: its importers were told they were "built on apex" and ran on TPU once it was ported
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "setup.py").write_text("")
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "sgd.py").write_text(
        "import torch\n\n\ndef prepare(use_larc=False):\n    if use_larc:\n        try:\n"
        "            from apex.parallel.LARC import LARC\n        except ImportError:\n"
        '            raise RuntimeError("apex needed")\n'
    )
    (root / "pkg" / "task.py").write_text(
        "import torch\nfrom pkg.sgd import prepare\n\nx = torch.zeros(1).cuda()\n"
    )
    task = write_tree(root)["pkg/task.py"]
    assert '.to("tpu")' in task and "built on" not in task


def test_a_class_named_for_an_accelerator_worker_is_no_accelerator_registry():
    # xtuner's RayAcceleratorWorker.setup_distributed: `backend = "nccl"` was called "a device name inside an
    # accelerator class (a registry key)" while the same run wrapped it in _tpu_backend
    src = (
        "import torch.distributed as dist\n\n\nclass RayAcceleratorWorker:\n    def setup(self, kind):\n"
        '        backend = "nccl" if kind == "GPU" else "hccl"\n        dist.init_process_group(backend=backend)\n'
    )
    out = run(src).new_source
    assert "accelerator class" not in out


def test_a_spawned_worker_that_joins_an_nccl_group_is_a_device_worker():
    # verl's test_engine: `_worker` only set its GPU and created an NCCL group; mp.spawn of 8 of them went unflagged
    src = (
        "import torch\nimport torch.distributed as dist\nimport torch.multiprocessing as mp\n\n\n"
        "def _worker(rank, world_size):\n    torch.cuda.set_device(rank)\n"
        '    dist.init_process_group(backend="nccl", rank=rank, world_size=world_size)\n\n\n'
        "def test_x():\n    mp.spawn(fn=_worker, args=(8,), nprocs=8)\n"
    )
    assert "TPU409" in run(src).new_source


def test_a_bf16_test_beside_a_cuda_capability_test_stays_cudas():
    # Fooocus: `torch.cuda.is_bf16_supported() and torch.cuda.get_device_properties(...).major >= 8` became a TPU
    # test and-ed with a CUDA query that raises on TPU (swallowed by a bare except: the bf16 VAE never chosen)
    src = (
        "import torch\n\ntry:\n    if torch.cuda.is_bf16_supported() and "
        "torch.cuda.get_device_properties(torch.cuda.current_device()).major >= 8:\n        dtype = torch.bfloat16\n"
        "except Exception:\n    pass\n"
    )
    out = run(src).new_source
    assert "if torch.cuda.is_bf16_supported() and" in out and "TPU205" in out


@pytest.mark.parametrize(
    ("line", "after"),
    [
        (
            "device = torch.device(f'cuda{device_idx}' if use_cuda else 'cpu')",
            "device = torch.device('tpu' if use_cuda else 'cpu')",
        ),
        ("name = f'cuda{i}_results.txt'", "name = f'cuda{i}_results.txt'"),
        ("key = f'cuda{i}'", "key = f'cuda{i}'"),
    ],
)
def test_an_fstring_naming_cuda_without_a_colon_is_a_device_only_where_one_is_built(line, after):
    # esm's lm_design: `use_cuda = torch.cuda.is_available() and ...` renamed, `f'cuda{device_idx}'` (":0") kept
    src = f"import torch\n\n\ndef f(device_idx='', i=0):\n    use_cuda = torch.cuda.is_available()\n    {line}\n"
    assert f"    {after}\n" in run(src).new_source


# --- torchmetrics: `run_precision_test_gpu(..., device="cuda")` in the shared tester, called only by tests under
# `@pytest.mark.skipif(not torch.cuda.is_available())` (kept whole as CUDA's tests) and by an override that skips
# itself without CUDA: migrated alone, a CUDA box ran those tests with 'tpu' and a TPU host skipped them ---
TESTER = (
    "import torch\n\n\nclass Tester:\n    def run_precision_test_gpu(self, preds):\n"
    '        return preds.to(device="cuda").half()\n\n    def run_cpu(self, preds):\n'
    '        return preds.to(device="cuda")\n'
)
GATED = (
    "import pytest\nimport torch\nfrom helpers.tester import Tester\n\n\nclass TestAcc(Tester):\n"
    '    @pytest.mark.skipif(not torch.cuda.is_available(), reason="test requires cuda")\n'
    "    def test_half_gpu(self):\n        self.run_precision_test_gpu(torch.ones(2))\n\n"
    "    def test_plain(self):\n        self.run_cpu(torch.ones(2))\n"
)


def test_a_test_helper_only_cuda_gated_tests_call_stays_cudas(tmp_path):
    root = tmp_path / "proj"
    (root / "tests" / "helpers").mkdir(parents=True)
    (root / "setup.py").write_text("")
    (root / "tests" / "helpers" / "__init__.py").write_text("")
    (root / "tests" / "helpers" / "tester.py").write_text(TESTER)
    (root / "tests" / "test_acc.py").write_text(GATED)
    tester = write_tree(root)["tests/helpers/tester.py"]
    assert (
        'preds.to(device="cuda").half()' in tester and "called only by tests that run where CUDA is" in tester
    )
    assert 'return preds.to(device="tpu")' in tester  # (a helper an ungated test calls is migrated)


def test_a_cuda_extension_imported_through_importlib_is_flagged():
    # openfold's structure_module: `attn_core_inplace_cuda = importlib.import_module("attn_core_inplace_cuda")`,
    # called on the inference path: no TODO said so
    src = (
        "import importlib\nimport torch\n\n"
        'attn_core_inplace_cuda = importlib.import_module("attn_core_inplace_cuda")\n'
        "x = torch.zeros(1).cuda()\n"
    )
    out = run(src).new_source
    assert "`attn_core_inplace_cuda` is CUDA-only" in out


def test_a_setup_that_skips_itself_without_cuda_is_no_helper_and_one_run_is_a_fixed_point(tmp_path):
    # captum's stochastic-gate tests: `setUp` compares its device with "cuda" and raises SkipTest without CUDA; the
    # helper rule called it a helper of CUDA-gated tests on the second --write only
    root = tmp_path / "proj"
    (root / "tests").mkdir(parents=True)
    (root / "setup.py").write_text("")
    (root / "tests" / "test_gates.py").write_text(
        "import unittest\nimport torch\n\n\nclass T(unittest.TestCase):\n    testing_device = 'cpu'\n\n"
        "    def setUp(self):\n        super().setUp()\n"
        "        if self.testing_device == 'cuda' and not torch.cuda.is_available():\n"
        "            raise unittest.SkipTest('Skipping GPU test since CUDA not available.')\n\n"
        "    def test_x(self):\n        x = torch.zeros(1).cuda()\n"
    )
    first = write_tree(root)["tests/test_gates.py"]
    assert "called only by tests" not in first and write_tree(root)["tests/test_gates.py"] == first
