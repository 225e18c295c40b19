"""Wrong rewrites found by reading every changed hunk of held-out check 14 (benchmarks/migrate_corpus_heldout14.txt),
each as a class in its own words, each asserting the rewrite it must not make (or the one it must not miss)."""

from __future__ import annotations

import pytest
from migrate_helpers import codes, run
from test_heldout9_classes import _code, _migrate_tree


# --- argparse's dest= names an attribute (asteroid's `--cuda`, dest="cuda", read as args.cuda) ----------------------
def test_an_argparse_dest_is_an_attribute_name_not_a_device():
    src = (
        "import argparse, torch\np = argparse.ArgumentParser()\n"
        'p.add_argument("--cuda", dest="cuda", action="store_true")\nargs = p.parse_args()\n'
        "if args.cuda:\n    x = torch.ones(2).cuda()\n"
    )
    out = run(src).new_source
    assert 'dest="cuda"' in out and "args.cuda" in out


# --- a check in an and/or chain whose later operand is a kept CUDA-only call (torchtune's import guard) -----------
@pytest.mark.parametrize(
    "expr",
    [
        "torch.cuda.is_available() and torch.cuda.get_device_capability() >= (7, 5)",
        "torch.cuda.is_available() and torch.cuda.is_bf16_supported() and torch.cuda.nccl.version() >= (2, 10)",
    ],
)
def test_a_check_whose_chain_goes_on_to_a_cuda_only_call_stays_cudas(expr):
    res = run(f"import torch\n\nSUPPORTED = {expr}\n")
    # the wrong rewrite: `torch.accelerator.is_available() and torch.cuda.get_device_capability()`, which raises
    # at import on a TPU host ("Torch not compiled with CUDA enabled")
    assert "torch.accelerator.is_available()" not in res.new_source
    assert "torch.cuda.is_available()" in _code(res.new_source)


# --- an error that asks only for CUDA, with all the code after it migrated (fairseq's speech_recognition infer) ---
def test_an_error_that_asks_only_for_cuda_follows_the_code_after_it():
    src = (
        "import torch\n\ndef main(cfg):\n    if not cfg.cpu and not torch.cuda.is_available():\n"
        '        raise ValueError("CUDA not found; set cpu=True to run without CUDA")\n'
        "    model = torch.nn.Linear(2, 2)\n    if not cfg.cpu:\n        model = model.cuda()\n    return model\n"
    )
    out = run(src).new_source
    # the wrong output: the check kept as CUDA's, so the migrated program raises "CUDA not found" on every TPU run
    assert "not torch.accelerator.is_available()" in out and '.to("tpu")' in out


def test_an_error_that_names_a_cuda_only_part_keeps_its_check():
    src = (
        "import torch\n\ndef main():\n    if not torch.cuda.is_available():\n"
        '        raise RuntimeError("the fused CUDA kernels need a GPU")\n'
        "    return torch.ones(2).cuda()\n"
    )
    assert "torch.cuda.is_available()" in _code(run(src).new_source)


# --- a function-local torch_xla import whose function no longer uses it (fairseq's trainer.begin_epoch) -----------
def test_a_local_torch_xla_import_goes_with_its_last_use_in_that_function():
    src = (
        "import torch\n\ndef begin_epoch():\n    import torch_xla.core.xla_model as xm\n    xm.mark_step()\n\n"
        "def send_cpu(data):\n    import torch_xla.core.xla_model as xm\n    return xm._maybe_convert_to_cpu(data)\n"
    )
    out = run(src).new_source
    begin, send = out.split("def send_cpu")
    # the wrong output: begin_epoch keeps `import torch_xla...` (ModuleNotFoundError on TorchTPU) because
    # send_cpu still uses its own `xm`
    assert "torch_xla" not in begin.split("def begin_epoch")[1]
    assert "import torch_xla.core.xla_model as xm" in send


def test_a_local_import_declared_global_is_kept():
    src = (
        "import torch\n\ndef setup():\n    global xm\n    import torch_xla.core.xla_model as xm\n\n"
        "def step():\n    return xm._maybe_convert_to_cpu(1)\n"
    )
    assert "import torch_xla.core.xla_model as xm" in run(src).new_source


# --- kernels defined under a guarded import (rl_games' `if TRITON_AVAILABLE: import triton` + @triton.jit) --------
_GAE = """import torch
from pkg.config import TRITON_AVAILABLE

if TRITON_AVAILABLE:
    import triton
    import triton.language as tl

    @triton.jit
    def _gae_kernel(x_ptr, n: tl.constexpr):
        pass


def compute(x):
    if TRITON_AVAILABLE and x.is_cuda:
        return _gae_kernel[(1,)](x, 1)
    return x
"""


def test_a_file_that_defines_kernels_under_a_guarded_import_is_left_as_written(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "config.py").write_text("TRITON_AVAILABLE = False\n")
    (tmp_path / "pkg" / "gae.py").write_text(_GAE)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_gae.py").write_text(
        "import torch\nfrom pkg.gae import compute\n\ndef test_kernel():\n"
        "    assert compute(torch.ones(4, device='cuda')).shape == (4,)\n"
    )
    out = _migrate_tree(tmp_path)
    # the wrong rewrite: `x.is_cuda` -> a 'tpu' test that launches the triton kernel on TPU tensors
    assert "x.is_cuda" in out["pkg/gae.py"] and "TPU211" in out["pkg/gae.py"]
    # ... and its test handing the kernel 'tpu' tensors
    assert "device='cuda'" in out["tests/test_gae.py"] and "TPU211" in out["tests/test_gae.py"]


# --- a count of GPUs per host compared with the device count (SlowFast's cfg.NUM_GPUS, YOLOX's launcher) ---------
@pytest.mark.parametrize("count", ["cfg.NUM_GPUS", "num_gpus_per_machine", "args.ngpus_per_node"])
def test_a_gpu_count_compared_with_the_device_count_keeps_cudas_count(count):
    src = f"import torch\n\ndef worker(cfg, args, num_gpus_per_machine):\n    assert {count} <= torch.cuda.device_count()\n"
    out = run(src).new_source
    # the wrong rewrite: torch.accelerator.device_count() is 1 per process, so every multi-chip launch asserts
    assert "torch.cuda.device_count()" in _code(out) and "TPU201" in out


# --- a count divided into work under its own availability test (torchtune's threads per process) -----------------
def test_a_divided_count_under_its_own_test_keeps_both_and_says_why():
    src = (
        "import os, torch\n\ndef threads():\n"
        "    return os.cpu_count() // (torch.cuda.device_count() if torch.cuda.is_available() else 1)\n"
    )
    out = run(src).new_source
    # the wrong rewrite: the test renamed while the count stays CUDA's: 0 on a TPU host, ZeroDivisionError
    assert "torch.accelerator" not in out and "LOCAL_WORLD_SIZE" in out


# --- more libraries with CUDA-only or CPU-and-CUDA-only kernels -------------------------------------------------
@pytest.mark.parametrize(
    "src",
    [
        # YOLOX: a TensorRT engine built by torch2trt, fed 'tpu' tensors
        "import torch\nfrom torch2trt import TRTModule\nx = torch.ones(1, 3, 64, 64).cuda()\n",
        # pytorchvideo: detectron2's predictor (CPU/CUDA ops), its import optional
        "import torch\ntry:\n    from detectron2.engine import DefaultPredictor\nexcept ImportError:\n    pass\n"
        "DEVICE = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n",
        # fairseq's MMS alignment: torchaudio's forced_align has CPU and CUDA kernels only
        "import torch\nimport torchaudio.functional as F\n"
        "DEVICE = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
        "def align(e, t):\n    return F.forced_align(e.to(DEVICE), t.to(DEVICE), blank=0)\n",
    ],
)
def test_a_file_on_a_library_without_tpu_kernels_is_left_as_written(src):
    res = run(src)
    assert "tpu" not in _code(res.new_source) and "TPU211" in codes(res)


# --- a file that patches torch.cuda (sd-scripts' IPEX hijack) --------------------------------------------------
def test_a_file_that_assigns_into_torch_cuda_is_left_as_written():
    src = (
        "import torch\n\ndef ipex_init():\n    torch.cuda.is_available = torch.xpu.is_available\n"
        "    torch.cuda.synchronize = torch.xpu.synchronize\n"
        "    torch.xpu.amp.custom_fwd = torch.cuda.amp.custom_fwd\n"
    )
    res = run(src)
    # the wrong rewrite: `torch.accelerator.is_available = torch.xpu.is_available` (patches every device's API)
    assert "torch.accelerator" not in res.new_source and "torch.amp.custom_fwd" not in res.new_source
    assert codes(res) == ["TPU218"]


def test_reading_torch_cuda_is_not_a_patch():
    res = run("import torch\nok = torch.cuda.is_available()\nx = torch.ones(2).cuda() if ok else None\n")
    assert "TPU218" not in codes(res)


# --- a compared device string with an ordinal above 0 (asteroid's CLI test: "cuda:42" passed and compared) --------
def test_a_compared_ordinal_above_zero_is_kept_like_a_placed_one():
    src = (
        'def test_device(cli, m):\n    cli.infer(["--device", "cuda:42"])\n    assert m.device == "cuda:42"\n'
    )
    out = run(src).new_source
    # the wrong rewrite: the assertion says "tpu:42" while the argument two lines above still says "cuda:42"
    assert '"tpu:42"' not in out and out.count('"cuda:42"') == 2


# --- a subclass of DataParallel (StyleTTS2's MyDataParallel) ---------------------------------------------------
def test_a_data_parallel_subclass_is_flagged_where_it_is_built():
    src = (
        "import torch\n\nclass MyDataParallel(torch.nn.DataParallel):\n    pass\n\n"
        "device = 'cuda'\nmodel = torch.nn.Linear(2, 2).to(device)\nmodel = MyDataParallel(model)\n"
    )
    res = run(src)
    # the missing flag: DataParallel's forward scatters with torch._C._scatter, absent without CUDA
    assert codes(res).count("TPU407") == 1 and "MyDataParallel" in res.diagnostics[-1].message


# --- tests that skip themselves unless a CUDA-only stack imports (llm-foundry's is_flash_v2_installed) ----------
_ATTENTION = """def is_flash_v2_installed(v2_version='2.0.0'):
    try:
        import flash_attn
    except ImportError:
        return False
    return True


def check_alibi_support(impl):
    return impl != 'flash' or is_flash_v2_installed('v2.4.2')
"""


@pytest.mark.parametrize(
    "test",
    [
        "@pytest.mark.skipif(not is_flash_v2_installed(), reason='needs flash attention 2')\n"
        "def test_gqa():\n    x = torch.ones(2, device='cuda')\n",
        "@pytest.mark.skipif(not check_alibi_support('flash'), reason='alibi')\n"
        "def test_alibi():\n    x = torch.ones(2).cuda()\n",
        "def test_rope(device: str = 'cuda'):\n    if not is_flash_v2_installed():\n"
        "        pytest.skip('dail rope requires flash attention 2.')\n    x = torch.ones(2, device=device)\n",
    ],
)
def test_a_test_of_a_cuda_only_stack_probed_by_a_project_function_is_left_as_written(tmp_path, test):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "attention.py").write_text(_ATTENTION)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_attn.py").write_text(
        f"import pytest\nimport torch\nfrom pkg.attention import check_alibi_support, is_flash_v2_installed\n\n\n{test}"
    )
    out = _migrate_tree(tmp_path)["tests/test_attn.py"]
    # the wrong rewrite: the flash-attention test's tensors on 'tpu', no flag
    assert "tpu" not in _code(out) and "TODO(tpu-migrate" in out


# --- a CUDA stream handed to a library's communicator (OpenRLHF's and torchtune's vLLM PyNccl weight sync) -------
def test_a_stream_handed_to_an_unknown_object_stays_cudas():
    src = (
        "import torch\n\nclass Actor:\n    def sync(self, p):\n"
        "        self._model_update_group.broadcast(p, src=0, stream=torch.cuda.current_stream())\n"
    )
    res = run(src)
    # the wrong rewrite: torch.accelerator.current_stream() has no .cuda_stream, which PyNccl reads
    assert "torch.cuda.current_stream()" in _code(res.new_source) and "TPU201" in codes(res)


def test_a_stream_handed_to_torchs_own_stream_methods_is_migrated():
    src = "import torch\n\ndef f(s, t):\n    s.wait_stream(torch.cuda.current_stream())\n    t.record_stream(torch.cuda.current_stream())\n"
    assert "torch.cuda" not in run(src).new_source


# --- `with torch.cuda.device(i):` around the program (SimCLR: RuntimeError without CUDA, even for device 0) -------
def test_a_cuda_device_block_is_unwrapped():
    src = (
        "import torch\n\ndef main(args):\n    # train\n    with torch.cuda.device(args.gpu_index):\n"
        "        run = Trainer()\n        run.train()\n    return run\n"
    )
    out = run(src).new_source
    assert "torch.cuda.device" not in out
    assert "    # train\n    run = Trainer()\n    run.train()\n    return run\n" in out


def test_a_cuda_device_context_held_in_a_name_is_flagged():
    res = run("import torch\nctx = torch.cuda.device(0)\n")
    assert "TPU219" in codes(res) and "torch.cuda.device(0)" in res.new_source


# --- checks that switch on a compiled CUDA extension of the project (fairseq's DynamicConv, ngram blocking) -------
def test_a_check_around_an_import_of_a_project_module_built_on_a_cuda_extension_stays_cudas(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "dynamicconv_layer").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "dynamicconv_layer" / "__init__.py").write_text(
        "from .dynamicconv_layer import DynamicconvLayer\n"
    )
    (pkg / "dynamicconv_layer" / "dynamicconv_layer.py").write_text(
        "import torch\nimport dynamicconv_cuda\n\nclass DynamicconvLayer(torch.nn.Module):\n    pass\n"
    )
    (pkg / "conv.py").write_text(
        "import torch\n\ndef DynamicConv(*args):\n    if torch.cuda.is_available():\n        try:\n"
        "            from pkg.dynamicconv_layer import DynamicconvLayer\n            return DynamicconvLayer(*args)\n"
        "        except ImportError as e:\n            print(e)\n    return torch.nn.Identity()\n"
    )
    out = _migrate_tree(tmp_path)["pkg/conv.py"]
    # the wrong rewrite: torch.accelerator.is_available(), so TPU hosts try to build the CUDA kernel's layer
    assert "torch.cuda.is_available()" in _code(out) and "`pkg.dynamicconv_layer`, built on" in out


def test_a_check_before_a_compiled_extension_of_the_package_stays_cudas(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "block.py").write_text(
        "import torch\ntry:\n    from pkg import ngram_repeat_block_cuda\n    BUILT = True\nexcept ImportError:\n"
        "    BUILT = False\n\ndef usable():\n    if not BUILT or not torch.cuda.is_available():\n        return False\n"
        "    t = torch.zeros(2, device='cuda')\n    ngram_repeat_block_cuda.forward(t)\n    return True\n"
    )
    out = _migrate_tree(tmp_path)["pkg/block.py"]
    # the wrong rewrite: the probe made true on TPU, its tensors 'tpu', handed to the compiled CUDA kernel
    assert "torch.cuda.is_available()" in _code(out) and "device='cuda'" in out


# --- keys and accepted values that are data (anomalib) ------------------------------------------------------------
def test_a_key_read_with_get_is_data_like_a_subscript():
    src = "import json\n\ndef version(p):\n    data = json.load(open(p))\n    return data.get('cuda', {}).get('version')\n"
    assert "'cuda'" in run(src).new_source


def test_a_device_among_accepted_values_gains_tpu_beside_it():
    src = (
        "import torch\n\ndef pick(device):\n    if device not in {'auto', 'cpu', 'cuda', 'gpu'}:\n"
        "        raise ValueError(device)\n    return torch.device(device)\n"
    )
    res = run(src)
    # the wrong rewrites: {'auto', 'cpu', 'tpu', 'gpu'} ('cuda' refused while another file still passes it), or
    # the set kept while the command line feeding it gains 'tpu' in its choices (then 'tpu' refused here)
    assert "{'auto', 'cpu', 'cuda', 'gpu', 'tpu'}" in res.new_source and "TPU103" in codes(res)


# --- a method named init_process_group creates no torch group (OpenRLHF's vLLM WorkerWrap, ray collectives) ------
def test_a_method_named_like_init_process_group_is_not_a_group_creation():
    src = (
        "class WorkerWrap:\n    def init_process_group(self, world_size, rank, backend='nccl'):\n"
        "        import ray.util.collective as collective\n"
        "        collective.init_collective_group(world_size=world_size, rank=rank, backend=backend)\n"
    )
    res = run(src)
    # the wrong rewrite: backend='tpu_dist', which ray's collective refuses ("Only NCCL is supported")
    assert "backend='nccl'" in res.new_source and "TPU401" in codes(res)


# --- tests half-migrated: the placement renamed, the assertion about it kept (llm-foundry, anomalib, torchtune) ---
def test_a_pytest_mark_named_gpu_is_no_cuda_state():
    src = (
        "import pytest\n\n@pytest.mark.gpu\ndef test_emb(model, x):\n    model = model.to('cuda')\n"
        "    out = model(x.to('cuda'))\n    assert out.device.type == 'cuda'\n"
    )
    # the wrong output: the assertion kept as CUDA's ("reads CUDA-only state `gpu`") beside the moved model
    assert "'cuda'" not in _code(run(src).new_source)


def test_is_cuda_inside_all_is_a_test_in_sight():
    src = "def test_cuda(module):\n    module.cuda()\n    assert all(t.is_cuda for t in module.tensor_list)\n"
    out = run(src).new_source
    assert ".is_cuda" not in out and '.device.type == "tpu"' in out


def test_a_device_mapped_to_a_kept_backend_in_an_assertion_is_kept():
    src = 'from pkg import training\n\ndef test_backend():\n    assert training.get_distributed_backend("cuda") == "nccl"\n'
    # the wrong rewrite: get_distributed_backend("tpu") == "nccl", false on every host
    assert 'get_distributed_backend("cuda")' in run(src).new_source


# --- a CUDA skip with an empty reason (fairseq's `@unittest.skipUnless(torch.cuda.is_available(), "")`) ------------
def test_a_cuda_skip_without_a_reason_still_gates_its_tests():
    src = (
        "import unittest\nimport torch\n\n\n@unittest.skipUnless(torch.cuda.is_available(), '')\n"
        "class TestExtension(unittest.TestCase):\n    def test_ext(self):\n"
        "        x = torch.zeros(2, device='cuda')\n        self.assertTrue(x.is_cuda)\n"
    )
    out = run(src).new_source
    # the wrong rewrite: the skip made true on TPU and the extension's test moved to 'tpu', where it fails
    assert "torch.cuda.is_available()" in _code(out) and "device='cuda'" in out


def test_a_cuda_device_block_inside_a_loop_over_devices_is_flagged_not_unwrapped():
    src = "import torch\n\ndef f(ids):\n    for i in ids:\n        with torch.cuda.device(i):\n            work(i)\n"
    res = run(src)
    # unwrapped, the loop would run every device's work on the one TPU of the process
    assert "with torch.cuda.device(i):" in res.new_source and "TPU219" in codes(res)


def test_a_cuda_device_block_on_a_tensors_own_device_in_a_loop_is_unwrapped():
    src = (
        "import torch\n\ndef save(tensors, f):\n    for k, v in tensors.items():\n"
        "        with torch.cuda.device(v.device):\n            v.cpu().numpy().tofile(f)\n"
    )
    assert "torch.cuda.device" not in run(src).new_source
