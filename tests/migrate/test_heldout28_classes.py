"""Wrong rewrites found on held-out check 28 (benchmarks/migrate_corpus_heldout28.txt), each as a class in its own
words, each asserting what the tool must (not) do."""

from __future__ import annotations

from migrate_helpers import run, write_quant_project, write_tree

# --- a backend tested where the run chose it (torchdrug's `def init_process_group(backend, ...)` testing
# `backend == "nccl"` after creating the group with the translated name; Pointcept's `get_backend() == "nccl"` in a
# file that creates a gloo side group, its WORLD group made by a launcher that keeps NCCL): renamed to 'tpu_dist',
# a caller still passing 'nccl' (or a CUDA run) lost its gloo group for CPU collectives ---


def test_a_backend_parameter_compared_with_nccl_accepts_both_names():
    src = (
        "import torch.distributed as dist\n\n\ndef init(backend, init_method=None):\n"
        "    dist.init_process_group(backend, init_method)\n"
        "    if backend == 'nccl':\n        side = dist.new_group(backend='gloo')\n    else:\n"
        "        side = dist.group.WORLD\n    return side\n"
    )
    out = run(src).new_source
    assert "if backend in ('nccl', 'tpu_dist'):" in out
    assert "_tpu_backend(backend)" in out and "new_group(backend='gloo')" in out


def test_a_rebound_backend_parameter_is_renamed_with_its_literal():
    src = (
        "import torch.distributed as dist\n\n\ndef init(backend=None):\n    backend = 'nccl'\n"
        "    dist.init_process_group(backend)\n    if backend == 'nccl':\n        print('gpu')\n"
    )
    out = run(src).new_source
    assert "backend = 'tpu_dist'" in out and "in ('nccl', 'tpu_dist')" not in out


def test_the_asked_backend_accepts_both_names_in_a_file_that_makes_a_side_group():
    src = (
        "import torch.distributed as dist\n\n\ndef gloo_group():\n    if dist.get_backend() == 'nccl':\n"
        "        return dist.new_group(backend='gloo')\n    return dist.group.WORLD\n"
    )
    out = run(src).new_source
    assert "dist.get_backend() in ('nccl', 'tpu_dist')" in out


# --- a kernel imported from its package (d2go's detr: `from detr import _C as MSDA`, the `detr._C` its setup.py
# builds with CUDAExtension): the function file was migrated with no flag and its op test moved the op's inputs
# to 'tpu', where the kernel has no build ---


def test_a_kernel_imported_from_its_package_is_flagged_and_its_test_stays_cudas(tmp_path):
    proj = tmp_path / "proj"
    (proj / "detr" / "functions").mkdir(parents=True)
    (proj / "setup.py").write_text(
        "from setuptools import setup\nfrom torch.utils.cpp_extension import CppExtension, CUDAExtension\n\n"
        "extension = CppExtension\nif True:\n    extension = CUDAExtension\n"
        'setup(name="detr", ext_modules=[extension(\n    "detr._C", ["a.cu"])])\n'
    )
    (proj / "detr" / "__init__.py").write_text("")
    (proj / "detr" / "functions" / "__init__.py").write_text("")
    (proj / "detr" / "functions" / "msda.py").write_text(
        "import torch\nfrom detr import _C as MSDA\nfrom torch.cuda.amp import custom_fwd\n\n\n"
        "@custom_fwd(cast_inputs=torch.float32)\ndef run(v):\n    return MSDA.forward(v)\n"
    )
    (proj / "test_op.py").write_text(
        "import torch\nfrom detr.functions.msda import run\n\nUSE_CUDA = torch.cuda.device_count() > 0\n\n\n"
        "def test_op():\n    if USE_CUDA:\n        run(torch.rand(2, 3).cuda())\n"
    )
    out = write_tree(tmp_path)
    assert "TODO(tpu-migrate TPU211): `detr._C` is CUDA-only" in out["proj/detr/functions/msda.py"]
    test = out["proj/test_op.py"]
    assert "torch.cuda.device_count() > 0" in test and ".cuda()" in test and "TPU211" in test


# --- a module of CUDA tests (axolotl's MX kernel tests): `DEVICE = "cuda"` above `pytestmark = skipif(not
# torch.cuda.is_available())` was renamed while the gate kept the module CUDA's; with `torch =
# pytest.importorskip("torch")` the gate was not even seen, and the test moved the kernel's inputs to 'tpu' ---


def test_a_cuda_pytestmark_keeps_the_lines_above_it():
    src = (
        "import pytest\nimport torch\n\nDEVICE = 'cuda'\n\n"
        "pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason='CUDA required')\n\n\n"
        "def test_k():\n    x = torch.ones(2, device=DEVICE)\n    assert x.is_cuda\n"
    )
    out = run(src).new_source
    assert "DEVICE = 'cuda'" in out and "TODO(tpu-migrate TPU201)" in out and "'tpu'" not in out


def test_torch_imported_by_importorskip_is_torch():
    src = (
        "import pytest\n\ntorch = pytest.importorskip('torch')\n"
        "pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason='CUDA required')\n\n\n"
        "def test_k():\n    dev = 'cuda'\n    assert torch.ones(2, device=dev).is_cuda\n"
    )
    out = run(src).new_source
    assert "dev = 'cuda'" in out and "TODO(tpu-migrate TPU201)" in out
    plain = run("import pytest\n\ntorch = pytest.importorskip('torch')\nok = torch.cuda.is_available()\n")
    assert "torch.accelerator.is_available()" in plain.new_source


# --- a device module handed to callers (LMFlow's get_torch_device(), after torchtune's _device.py: `return
# getattr(torch, device_name)` where get_device_name() now answers 'tpu'): callers' `.is_available()` reached
# torch.tpu's legacy API, which raises on torch >= 2.11 ---


def test_a_device_module_returned_by_name_is_flagged_and_a_dtype_lookup_is_not():
    src = (
        "import torch\n\n\ndef get_device_name():\n    return 'cuda' if torch.cuda.is_available() else 'cpu'\n\n\n"
        "def get_torch_device():\n    device_name = get_device_name()\n    return getattr(torch, device_name)\n\n\n"
        "def dtype_of(name):\n    return getattr(torch, name)\n"
    )
    out = run(src).new_source
    assert out.count("TODO(tpu-migrate TPU220)") == 1
    assert "hands its callers torch.tpu" in out


def test_a_two_argument_device_module_lookup_used_for_accelerator_calls_becomes_torch_accelerator():
    src = (
        "import torch\n\n\ndef clear(device_type):\n    mod = getattr(torch, device_type)\n"
        "    mod.empty_cache()\n    x = torch.ones(2).cuda()\n"
    )
    out = run(src).new_source
    assert "mod = torch.accelerator" in out


# --- a count answering a `gpus` argument (LoFTR's setup_gpus for Lightning 1.3: `-1` means every GPU, and the
# answer goes to `Trainer(gpus=...)`): renamed, a TPU host asked Lightning for one CUDA GPU ---


def test_a_count_answering_a_gpus_argument_stays_cudas():
    src = (
        "import torch\n\n\ndef setup_gpus(gpus):\n    n = int(gpus)\n"
        "    return n if n != -1 else torch.cuda.device_count()\n\n\n"
        "def world():\n    return torch.cuda.device_count()\n"
    )
    out = run(src).new_source
    assert "return n if n != -1 else torch.cuda.device_count()" in out and "TODO(tpu-migrate TPU201)" in out
    assert "return torch.accelerator.device_count()" in out


# --- FSDP's scaler beside CUDA's (d2go: `ShardedGradScaler() if fsdp else GradScaler()`): one branch moved to
# 'tpu', the other kept CUDA's default device ---


def test_fsdps_scaler_moves_with_its_twin():
    src = (
        "import torch\nfrom torch.cuda.amp import GradScaler\n"
        "from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler\n\n\n"
        "def scaler(fsdp):\n    return ShardedGradScaler() if fsdp else GradScaler()\n\n\n"
        "def step(m, x):\n    with torch.cuda.amp.autocast():\n        return m(x)\n"
    )
    out = run(src).new_source
    assert (
        'ShardedGradScaler(device="tpu", enabled=False) if fsdp else torch.amp.GradScaler("tpu", enabled=False)'
        in out
    )


# --- a project class with its own `cuda()` (torchdrug's Graph, whose `to(device)` sends every non-CPU device back
# to `cuda`): `graph.cuda()` became `graph.to("tpu")`, which raises inside Graph.cuda; the tensors it meets moved
# to 'tpu' without it ---


def test_a_project_objects_own_cuda_is_kept_with_the_tensors_it_meets(tmp_path):
    proj = tmp_path / "proj"
    (proj / "lib").mkdir(parents=True)
    (proj / "setup.py").write_text("from setuptools import setup\nsetup(name='lib')\n")
    (proj / "lib" / "__init__.py").write_text("")
    (proj / "lib" / "graph.py").write_text(
        "class Graph:\n    def __init__(self, edges):\n        self.edges = edges\n\n"
        "    def cuda(self, *args, **kwargs):\n        return Graph(self.edges.cuda(*args, **kwargs))\n\n"
        "    def to(self, device):\n        return self if device == 'cpu' else self.cuda(device)\n\n\n"
        "class Molecule(Graph):\n    pass\n"
    )
    (proj / "test_graph.py").write_text(
        "import unittest\n\nimport torch\nfrom lib.graph import Graph, Molecule\n\n\n"
        "class GraphTest(unittest.TestCase):\n    def setUp(self):\n        self.graph = Graph(torch.ones(3)).cuda()\n"
        "        self.x = torch.rand(3).cuda()\n\n    def test_device(self):\n"
        "        self.assertEqual(self.graph.edges.device.type, 'cuda')\n\n\n"
        "def test_molecule():\n    mol = Molecule(torch.ones(2))\n    assert mol.cuda().edges.is_cuda\n\n\n"
        "def test_tensor():\n    assert torch.ones(2).cuda().sum() == 2\n"
    )
    out = write_tree(tmp_path)["proj/test_graph.py"]
    assert "Graph(torch.ones(3)).cuda()" in out and "torch.rand(3).cuda()" in out and "type, 'cuda')" in out
    assert "mol.cuda()" in out and out.count("calls the project's") == 2
    assert 'torch.ones(2).to("tpu")' in out


# --- a CUDA-only project module imported inside a function (LLaMA2-Accessory's demos: `if args.quant: from
# accessory.util.quant import quantize`, quant.py built on bitsandbytes, then `model.cuda()` -> 'tpu'): the file
# carried no note that this path is CUDA's ---


def test_a_function_importing_a_project_module_built_on_a_cuda_only_stack_is_flagged(tmp_path):
    write_quant_project(
        tmp_path,
        "import torch\n\n\ndef main(model, quant):\n    if quant:\n        from pkg.util.quant import quantize\n\n"
        "        quantize(model)\n    model.cuda()\n",
    )
    out = write_tree(tmp_path)["proj/demo.py"]
    assert "this function imports the project's `pkg/util/quant.py`, built on `bitsandbytes`" in out


def test_an_nccl_test_around_a_barrier_with_device_ids_settles_in_one_run():
    src = (
        "import torch\nimport torch.distributed as dist\n\n\ndef synchronize():\n"
        "    if dist.get_backend() == dist.Backend.NCCL:\n"
        "        dist.barrier(device_ids=[torch.cuda.current_device()])\n    else:\n        dist.barrier()\n"
    )
    once = run(src).new_source
    # the NCCL branch is NCCL's own (its device_ids): kept whole, so the next run finds the same
    assert "dist.get_backend() == dist.Backend.NCCL" in once and "device_ids=" in once
    assert run(once).new_source == once


# --- third reading of held-out 28 (tool 2da4912) ---
# a device count written into a launcher's command line (LMFlow's accelerate test: `--num_processes
# {torch.cuda.device_count()}`): renamed, a TPU host launched one process


def test_a_count_written_into_a_launch_command_stays_cudas():
    src = (
        "import torch\n\nARGS = f'''\n    --num_processes {torch.cuda.device_count()}\n    --same_network\n'''.split()\n"
        "DS = f'--num_gpus {torch.cuda.device_count()}'\n"
    )
    out = run(src).new_source
    assert "torch.accelerator" not in out and "starts that many processes (`--num_processes {" in out


# a helper added to a file that imports torch only inside its functions (axolotl's activation-offloading tests):
# the module-level helper raised NameError


def test_a_helper_in_a_file_importing_torch_lazily_imports_it_itself():
    src = (
        "import pytest\n\n\ndef test_mem():\n    import torch\n\n    torch.cuda.synchronize()\n"
        "    return torch.cuda.memory_allocated()\n"
    )
    out = run(src).new_source
    helper = out.split("def _tpu_memory_stat", 1)[1].split("\ndef ", 1)[0]
    assert "    import torch\n" in helper
    assert "\nimport torch" not in out.split("def _tpu_memory_stat", 1)[0]
    compile(out, "<migrated>", "exec")


# a test that skips itself without CUDA (`if not torch.cuda.is_available(): pytest.skip("... requires CUDA")`,
# kept): what follows in the test is CUDA's; renamed, a CUDA host got 'tpu' tensors and a TPU host skipped


def test_what_follows_a_kept_cuda_skip_stays_cudas():
    src = (
        "import pytest\nimport torch\n\n\ndef test_offload(model):\n    if not torch.cuda.is_available():\n"
        "        pytest.skip('offload requires CUDA')\n    model = model.to('cuda')\n"
        "    x = torch.ones(2, device='cuda')\n    return model(x)\n\n\n"
        "def test_other(model):\n    return model.to('cuda')\n"
    )
    out = run(src).new_source
    assert "model.to('cuda')" in out and "device='cuda'" in out and "return model.to('tpu')" in out


# a function running a CUDA-only stack (axolotl's cutlass wrappers: `_helpers()` imports cutlass; marlin's
# `ext = load_ext()`, the package building .cu sources): its tensors went to 'tpu' and on into that stack


def test_a_function_running_a_cuda_only_stack_keeps_its_devices():
    src = (
        "import torch\n\n\ndef _helpers():\n    import cutlass.torch as cutlass_torch\n\n    return cutlass_torch\n\n\n"
        "def build(x):\n    ct = _helpers()\n    return ct.convert(x.cuda(), device='cuda')\n\n\n"
        "def plain(x):\n    return x.cuda()\n"
    )
    out = run(src).new_source
    assert "ct.convert(x.cuda(), device='cuda')" in out and 'return x.to("tpu")' in out


def test_a_function_calling_a_projects_cuda_extension_loader_keeps_its_devices(tmp_path):
    pkg = tmp_path / "proj" / "marlin"
    pkg.mkdir(parents=True)
    (tmp_path / "proj" / "setup.py").write_text("from setuptools import setup\nsetup(name='marlin')\n")
    (pkg / "__init__.py").write_text(
        "from torch.utils.cpp_extension import load\n\n\ndef load_ext():\n"
        "    return load(name='marlin_ext', sources=['k.cu'])\n"
    )
    (pkg / "linear.py").write_text(
        "import torch\n\nfrom . import load_ext\n\n\nclass Linear:\n    def __init__(self, w):\n"
        "        if w.device.type != 'cuda':\n            w = w.to('cuda')\n        self.w = load_ext().repack(w)\n\n"
        "    def other(self, x):\n        return x.to('cuda')\n"
    )
    out = write_tree(tmp_path)["proj/marlin/linear.py"]
    assert "w = w.to('cuda')" in out and "return x.to('tpu')" in out


# a function named for CUDA kernels (transformers' Mamba `cuda_kernels_forward`, patched by axolotl): its
# `with torch.cuda.device(x.device)` was unwrapped although only CUDA runs it


def test_a_function_named_for_cuda_kernels_is_left_as_written():
    src = (
        "import torch\n\n\ndef patched_cuda_kernels_forward(self, x):\n    with torch.cuda.device(x.device):\n"
        "        return self.scan(x)\n\n\ndef to_cuda(x):\n    return x.cuda()\n"
    )
    out = run(src).new_source
    assert "with torch.cuda.device(x.device):" in out and "TODO(tpu-migrate TPU201)" in out
    assert 'return x.to("tpu")' in out


def test_a_project_module_imported_by_several_functions_is_flagged_once(tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "setup.py").write_text("from setuptools import setup\nsetup(name='k')\n")
    (proj / "kern.py").write_text("import triton\n\n\n@triton.jit\ndef k(x):\n    pass\n")
    (proj / "use.py").write_text(
        "import torch\n\n\ndef a(x):\n    from kern import k\n\n    return k(x)\n\n\n"
        "def b(x):\n    from kern import k\n\n    return k(x.cuda())\n"
    )
    out = write_tree(tmp_path)["proj/use.py"]
    assert out.count("this function imports the project's `kern.py`") == 1


# a CUDA check choosing what a JIT build compiles (torchdrug's load_extension: `if torch.cuda.is_available():
# extra_cuda_cflags = ["-O3"] else: <drop the .cu sources>`): made true on TPU, nvcc ran on a TPU host


def test_a_check_choosing_a_cuda_build_stays_cudas():
    src = (
        "import torch\n\n\ndef load_extension(sources, extra_cuda_cflags=None):\n    if extra_cuda_cflags is None:\n"
        "        if torch.cuda.is_available():\n            extra_cuda_cflags = ['-O3']\n        else:\n"
        "            sources = [s for s in sources if not s.endswith('.cu')]\n    return sources\n"
    )
    out = run(src).new_source
    assert "if torch.cuda.is_available():" in out and "it chooses whether to build CUDA sources" in out


# the test of a module that imports the project's compiled `_C` under a guard (detrex's multi-scale deformable
# attention: `try: from detrex import _C except ImportError: <a stand-in>`): its `.cuda()` tensors went to 'tpu'


def test_the_test_of_a_module_guarding_its_compiled_kernel_is_left_as_written(tmp_path):
    proj = tmp_path / "proj"
    (proj / "pkg" / "layers").mkdir(parents=True)
    (proj / "tests").mkdir()
    (proj / "setup.py").write_text(
        "from setuptools import setup\nfrom torch.utils.cpp_extension import CUDAExtension\n\n"
        "setup(name='pkg', ext_modules=[CUDAExtension('pkg._C', ['a.cu'])])\n"
    )
    (proj / "pkg" / "__init__.py").write_text("")
    (proj / "pkg" / "layers" / "__init__.py").write_text("")
    (proj / "pkg" / "layers" / "msda.py").write_text(
        "import torch\n\n\nclass Fn(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, v):\n"
        "        return _C.forward(v)\n\n\ndef reference(v):\n    return v * 2\n\n\n"
        "try:\n    from pkg import _C\nexcept ImportError:\n    _C = None\n"
    )
    (proj / "tests" / "test_msda.py").write_text(
        "import unittest\n\nimport torch\nfrom pkg.layers.msda import Fn, reference\n\n\n"
        "class T(unittest.TestCase):\n    def test_equal(self):\n        v = torch.rand(2).cuda()\n"
        "        self.assertTrue(torch.allclose(Fn.apply(v), reference(v)))\n"
    )
    out = write_tree(tmp_path)["proj/tests/test_msda.py"]
    assert "torch.rand(2).cuda()" in out and "a test of it, left as written" in out


# an integer device given by keyword (LMFlow's evaluator: `.to(device=self.local_rank)` beside `torch.tensor(...,
# device=self.local_rank)`, which was rewritten): the batch stayed on CUDA ordinal while its twin moved


def test_an_integer_device_keyword_of_to_moves_with_its_factory_twin():
    src = (
        "import torch\n\n\nclass E:\n    def run(self, model, x):\n        torch.cuda.set_device(self.local_rank)\n"
        "        x = x.to(device=self.local_rank)\n"
        "        flag = torch.tensor([1.0], device=self.local_rank)\n        return model(x), flag\n"
    )
    out = run(src).new_source
    assert 'x.to(device="tpu")' in out and 'torch.tensor([1.0], device="tpu")' in out


# a kernel package whose extension has its own name (Pointcept's libs/pointgroup_ops: `packages=["pointgroup_ops"]`
# beside `CUDAExtension(name="pointgroup_ops_cuda")`): its users were migrated and fed 'tpu' tensors to it


def test_a_kernel_package_beside_a_differently_named_extension_makes_its_users_cuda_only(tmp_path):
    proj = tmp_path / "proj"
    (proj / "libs" / "pgops" / "functions").mkdir(parents=True)
    (proj / "model").mkdir()
    (proj / "setup.py").write_text("from setuptools import setup\nsetup(name='proj')\n")
    (proj / "libs" / "pgops" / "setup.py").write_text(
        "from setuptools import setup\nfrom torch.utils.cpp_extension import CUDAExtension\n\n"
        "setup(name='pgops', packages=['pgops'], package_dir={'pgops': 'functions'},\n"
        "      ext_modules=[CUDAExtension(name='pgops_cuda', sources=['k.cu'])])\n"
    )
    (proj / "libs" / "pgops" / "functions" / "__init__.py").write_text("")
    (proj / "model" / "utils.py").write_text(
        "import torch\nimport pgops\n\n\ndef cluster(x):\n    offsets = torch.zeros(2).int().cuda()\n"
        "    return pgops.ballquery(x, offsets)\n"
    )
    out = write_tree(tmp_path)["proj/model/utils.py"]
    assert "torch.zeros(2).int().cuda()" in out and "`pgops` is CUDA-only" in out


def test_a_cuda_only_stack_on_an_optional_path_does_not_keep_the_functions_devices(tmp_path):
    write_quant_project(
        tmp_path,
        "import torch\nfrom pkg.util.quant import quantize\n\n\ndef load(model, quant):\n    if quant:\n"
        "        quantize(model)\n    return model.cuda()\n\n\ndef main(model, quant):\n    if quant:\n"
        "        from pkg.util.quant import quantize as q\n\n        q(model)\n    x = torch.ones(2, device='cuda')\n"
        "    return model.cuda(), x\n",
    )
    out = write_tree(tmp_path)["proj/demo.py"]
    assert "return model.cuda()" not in out and "device='tpu'" in out
