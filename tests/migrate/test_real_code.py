"""Classes of wrong or untidy rewrites found on public repositories (torch_xla's tests and examples, accelerate,
Lightning, pytorch/examples, nanoGPT, DeepSpeed, ...), each as a fixture written here in the style of the code
where it was seen. Every case also goes through `run`: the output parses and a second pass changes nothing.
"""

from __future__ import annotations

import pytest
from migrate_helpers import codes, run

XM = "import torch\nimport torch_xla\nimport torch_xla.core.xla_model as xm\nimport torch_xla.runtime as xr\n"


def _code(src: str) -> str:
    """The source without comment lines (TODO comments quote the literals they are about)."""
    return "\n".join(ln for ln in src.splitlines() if not ln.lstrip().startswith("#"))


# --- emitted calls bind to the target's signature (full check: test_signatures.py) -------------------------
def test_keyword_arguments_are_rebound_not_copied():
    out = run(
        "import torch\ntorch.cuda.synchronize(device=dev)\ns = torch.cuda.current_stream(device=dev)\n"
        "e = torch.cuda.Event(True)\n"
    ).new_source
    assert "torch.accelerator.synchronize(device_index=dev)" in out
    assert "torch.accelerator.current_stream(dev)" in out  # positional-only
    assert "torch.Event(enable_timing=True)" in out  # keyword-only


# --- the gradient all-reduce is never lost -------------------------------------------------------------------
def test_optimizer_step_in_the_branch_without_ddp_keeps_its_all_reduce():
    src = XM + (
        "from torch.nn.parallel import DistributedDataParallel as DDP\n"
        "def step(flags, model, optimizer):\n    if flags.ddp:\n        optimizer.step()\n    else:\n"
        "        xm.optimizer_step(optimizer)\n"
    )
    out = run(src).new_source
    assert "        _tpu_all_reduce_gradients(optimizer)\n        optimizer.step()" in out
    assert "def _tpu_all_reduce_gradients(optimizer):" in out and "import torch_xla" not in out


# --- capability checks --------------------------------------------------------------------------------------
def test_capability_attributes_are_flagged_never_emitted_on_tpu():
    src = (
        "import torch\nprops = torch.cuda.get_device_properties(0)\nok = props.major >= 8\n"
        "sms = torch.cuda.get_device_properties(0).multi_processor_count\n"
        "mem = torch.cuda.get_device_properties(0).total_memory\n"
    )
    res = run(src)
    assert "torch.tpu.get_device_properties(0).major" not in res.new_source
    assert "sms = torch.cuda.get_device_properties(0).multi_processor_count" in res.new_source
    assert "mem = torch.tpu.get_device_properties(0).total_memory" in res.new_source
    assert [d.outcome for d in res.diagnostics if d.code == "TPU205"].count("flagged") == 2


# --- precision the file sets itself ----------------------------------------------------------------------------
def test_tf32_flag_after_an_explicit_precision_does_not_override_it():
    src = (
        "import torch\ntorch.set_float32_matmul_precision(args.precision)\n"
        "torch.backends.cuda.matmul.allow_tf32 = True\n"
    )
    out = run(src).new_source
    assert out.count("set_float32_matmul_precision") == 1 and "args.precision" in out


# --- framework internals and knobs ---------------------------------------------------------------------------
def test_accelerator_registry_keys_and_device_dispatch_keep_cuda():
    src = (
        "class CUDAAccelerator(Accelerator):\n    @staticmethod\n    def name():\n        return 'cuda'\n\n"
        "def choose_auto():\n    if XLAAccelerator.is_available():\n        return 'tpu'\n"
        "    if CUDAAccelerator.is_available():\n        return 'cuda'\n    return 'cpu'\n"
    )
    res = run(src)
    assert res.new_source.count("return 'cuda'") == 2
    assert [d.outcome for d in res.diagnostics if d.code == "TPU101"] == ["flagged", "flagged"]


def test_lightning_knob_inside_a_conditional_expression_is_flagged_not_rewritten():
    src = "import lightning as L\nt = L.Trainer(accelerator='cuda' if gpu else 'cpu', devices=1)\n"
    res = run(src)
    assert "accelerator='cuda' if gpu else 'cpu'" in res.new_source and "TPU911" in codes(res)


def test_argparse_choices_keep_the_values_launch_scripts_pass():
    src = (
        "import argparse\np = argparse.ArgumentParser()\n"
        "p.add_argument('--device', default='cuda', choices=['cpu', 'cuda'])\n"
    )
    assert "default='tpu', choices=['cpu', 'cuda', 'tpu']" in run(src).new_source


def test_values_compared_with_the_environment_or_a_config_mapping_are_flagged():
    src = "import os\nif os.environ.get('DEVICE') == 'cuda' or cfg['device'] == 'cuda':\n    pass\n"
    res = run(src)
    assert _code(res.new_source).count("'cuda'") == 2 and "TODO(tpu-migrate TPU102)" in res.new_source


def test_keys_into_data_are_not_devices():
    out = run(
        "import torch\nx = row['experiment']['xla']\nd = {'xla': 1}\nt = torch.ones(1, device='xla')\n"
    ).new_source
    assert "['xla']" in out and "{'xla': 1}" in out and "device='tpu'" in out


# --- CUDA kernels and CUDA-only stacks ----------------------------------------------------------------------
def test_cuda_kernel_registrations_are_flagged_and_kept():
    src = (
        "import torch\n@torch.library.custom_op('lib::fused_rms', mutates_args=(), device_types='cuda')\n"
        "def fused_rms(x):\n    return launch(x)\nlib.impl('fused_rms', fused_rms, 'CUDA')\n"
    )
    res = run(src)
    assert "device_types='cuda'" in res.new_source and "'CUDA')" in res.new_source
    assert codes(res).count("TPU216") == 2


def test_a_file_that_imports_a_cuda_only_stack_is_flagged_not_half_rewritten():
    src = (
        "import torch\nimport triton\nimport triton.language as tl\n\n@triton.jit\ndef kernel(x_ptr):\n    pass\n\n"
        "def launch(x):\n    y = torch.empty_like(x, device='cuda')\n    kernel[(1,)](y)\n    return y.cuda()\n"
    )
    res = run(src)
    assert "device='cuda'" in res.new_source and "y.cuda()" in res.new_source
    assert all(not d.fixed for d in res.diagnostics) and "TPU211" in codes(res)


def test_cuda_only_tooling_is_flagged():
    src = (
        "import torch\nm = AutoModel.from_pretrained(p, attn_implementation='flash_attention_2')\n"
        "gpus = subprocess.check_output(['nvidia-smi', '-L'])\nok = torch.cuda.is_available()\n"
    )
    assert codes(run(src)).count("TPU211") == 2


def test_an_availability_guard_around_cuda_only_code_stays_cuda():
    src = (
        "import torch\nif torch.cuda.is_available() and not has_cuda_fp8_support():\n    fp8 = False\n"
        "if args.cuda and torch.cuda.is_available():\n    device = 'cuda'\n"
    )
    out = run(src).new_source
    assert "if torch.cuda.is_available() and not has_cuda_fp8_support():" in out
    assert "if args.cuda and torch.accelerator.is_available():\n    device = 'tpu'" in out


# --- process-group state before the group exists ---------------------------------------------------------------
def test_world_size_and_rank_before_init_come_from_the_launcher(monkeypatch):
    src = XM + (
        "import torch.distributed as dist\n"
        "dist.init_process_group('xla', world_size=xr.world_size(), rank=xr.global_ordinal())\n"
    )
    out = run(src).new_source
    assert "world_size=_tpu_world_size(), rank=_tpu_rank()" in out
    ns: dict = {}
    exec(
        out[out.index("def _tpu_rank") : out.index("\n\n\n", out.index("def _tpu_world_size"))],  # noqa: S102
        {"os": __import__("os"), "torch": _FakeTorch},
        ns,
    )
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert (ns["_tpu_rank"](), ns["_tpu_world_size"]()) == (3, 4)  # torchrun's values, not 0 and 1


class _FakeTorch:
    class distributed:  # noqa: N801 - stands in for the module
        @staticmethod
        def is_initialized() -> bool:
            return False


# --- SPMD by qualified name -------------------------------------------------------------------------------------
def test_a_function_named_like_spmd_does_not_make_an_spmd_program():
    src = XM + "def use_spmd_backend():\n    return False\nuse_spmd_backend()\nd = xm.xla_device()\n"
    out = run(src).new_source
    assert 'd = torch.device("tpu")' in out


def test_a_real_spmd_program_is_still_flagged_only():
    src = XM + "xr.use_spmd()\nd = xm.xla_device()\n"
    res = run(src)
    assert "xm.xla_device()" in res.new_source and all(not d.fixed for d in res.diagnostics)


# --- one pass, one fixed point ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "src",
    [
        "import torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\nm = DDP(m, **ddp_kwargs)\n",
        XM
        + "import torch_xla.debug.metrics as met\nxm.master_print(met.metrics_report(), flush=True)\nx = 1\n",
        XM + "xm.master_print('done', flush=True)\n",
        XM + "torch_xla.launch(xm.xla_device)\n",  # (the launched function is an API another rule rewrites)
        XM + "with torch_xla.amp.autocast(dev, dtype=torch.float16):\n    y = f()\n",
        "import torch\ns = torch.cuda.amp.GradScaler()\nwith torch.autocast(device_type=kind, dtype=torch.float16):\n    y = f()\n",
    ],
)
def test_one_run_reaches_the_fixed_point(src):
    res = run(src)  # (run asserts that a second pass changes nothing)
    assert "DDP with positional" not in res.new_source
    assert "float16" not in res.new_source.replace("bfloat16", "")


def test_master_print_keeps_flush_and_all_its_arguments():
    out = run(XM + "xm.master_print('a', b, flush=True)\n").new_source
    assert "print('a', b, flush=True)" in out


# --- tidy output ----------------------------------------------------------------------------------------------------
def test_no_duplicate_lines_or_entries():
    out = run(
        "import torch\ntorch.manual_seed(s)\ntorch.cuda.manual_seed_all(s)\n"
        "DEVICES = ['cpu', 'cuda', 'xla']\n"
    ).new_source
    assert out.count("torch.manual_seed(s)") == 1 and _code(out).count("'tpu'") == 1


def test_an_entry_added_to_a_multi_line_dict_gets_its_own_line():
    out = run("B = {\n    'cuda': 'nccl',\n    'npu': 'hccl',\n}\n").new_source
    assert "    'npu': 'hccl',\n    'tpu': 'tpu_dist',\n}" in out


def test_an_if_emptied_by_the_migration_goes():
    src = (
        "from transformers.utils import is_torch_xla_available\nif is_torch_xla_available():\n"
        "    import torch_xla.core.xla_model as xm\n    import torch_xla.debug.metrics as met\n"
        "def f(flags):\n    if flags.debug:\n        xm.master_print(met.metrics_report())\n    return 1\n"
    )
    out = run(src).new_source
    assert "pass" not in out and "if " not in out


def test_dropped_keywords_keep_the_calls_layout():
    src = (
        "from torch.nn.parallel import DistributedDataParallel\nimport torch\n"
        "m = DistributedDataParallel(\n    agent.cuda(),\n    device_ids=[rank],\n)\n"
    )
    assert 'DistributedDataParallel(\n    agent.to("tpu"),\n)' in run(src).new_source


def test_no_nested_device_and_no_import_left_unused():
    out = run(
        XM + "import torch.cuda.amp\nd = torch.device(xm.xla_device())\n"
        "with torch.cuda.amp.autocast():\n    y = f()\n"
    ).new_source
    assert 'd = torch.device("tpu")' in out and "import torch.cuda.amp" not in out and "torch_xla" not in out


def test_fp16_option_help_follows_its_new_default_and_compile_keeps_fullgraph():
    src = (
        "import argparse, torch, torch_xla\np = argparse.ArgumentParser()\n"
        "p.add_argument('--dtype', default='float16', help='AMP dtype (default: float16)')\n"
        "step = torch_xla.compile(step, full_graph=True)\nok = torch.cuda.is_available()\n"
        "dt = getattr(torch, p.parse_args().dtype)\n"  # (a consumer that takes 'bfloat16': see test_reading_classes)
        "with torch.autocast(device_type, dtype=dt):\n    pass\n"
    )
    out = run(src).new_source
    assert "default='bfloat16', help='AMP dtype (default: bfloat16)'" in out
    assert "torch.compile(step, fullgraph=True)" in out


def test_torch_xla_imports_stay_together_while_one_is_still_used():
    src = XM + "import torch_xla.experimental.xla_marker\nd = xm.xla_device()\ny = xm.all_gather(d)\n"
    out = run(src).new_source
    assert "import torch_xla.experimental.xla_marker" in out  # registers ops: kept while torch_xla is needed


def test_runtime_ordinals_mean_this_process_and_literal_ones_are_flagged():
    out = run(
        "import torch\na = f'cuda:{local_rank}'\nb = 'cuda:{}'.format(gpu)\nc = 'cuda:%d' % gpu\n"
        "d = ('cuda:1',)\n"
    ).new_source
    assert "a = 'tpu'" in out and "b = 'tpu'" in out and "c = 'tpu'" in out and "('cuda:1',)" in out


# --- found on Lightning ----------------------------------------------------------------------------------------
def test_a_branch_kept_for_cuda_is_left_whole():
    src = (
        "import torch\ndef flops(device):\n    if device.type == 'cuda':\n"
        "        name = torch.cuda.get_device_name(device)\n        x = x.cuda()\n"
        "    elif device.type == 'xla':\n        name = 'tpu'\n"
    )
    out = run(src).new_source
    assert "        name = torch.cuda.get_device_name(device)\n        x = x.cuda()\n" in out


def test_attribute_names_are_not_devices():
    src = (
        "import torch\nif name in {'contiguous', 'cuda', 'half', 'to'}:\n    pass\nok = hasattr(t, 'cuda')\n"
        "def f():\n    return torch.device('cuda')\n"
    )
    out = run(src).new_source
    assert "{'contiguous', 'cuda', 'half', 'to'}" in out and "hasattr(t, 'cuda')" in out and "'tpu'" in out


def test_a_backend_test_for_nccl_is_kept_and_its_definition_rewritten():
    src = (
        "import torch.distributed as dist\nif dist.get_backend() == 'nccl':\n    dist.barrier(device_ids=[0])\n"
        "dist.init_process_group('nccl')\n"
    )
    res = run(src)
    assert "get_backend() == 'nccl'" in res.new_source and "init_process_group('tpu_dist')" in res.new_source


def test_device_with_an_index():
    out = run(
        "import torch\na = torch.device('cuda', fabric.local_rank)\nb = torch.device('cuda', 1)\n"
        "c = torch.device('cuda', 0)\n"
    ).new_source
    # run-time ordinal: dropped (every form alike, test_wrong_rewrite_classes); the literal ordinal 0 built at import
    # (module level) takes the import-safe helper, as "cuda:0" does
    assert "a = torch.device('tpu')\n" in out and "b = torch.device('cuda', 1)" in out
    assert "c = _tpu_device(0)" in out
    inside = run(
        "import torch\n\n\ndef f(rank):\n    return torch.device('cuda', rank), torch.device('cuda', 0)\n"
    )
    assert "torch.device('tpu'), torch.device('tpu', 0)" in inside.new_source  # (at run time: plain)


def test_a_file_built_on_a_cuda_only_package_is_flagged_only():
    src = (
        "import torch\ndef _import_bnb():\n    import bitsandbytes as bnb\n\n"
        "    class _Linear8bit(bnb.nn.Linear8bitLt):\n        def quantize_(self, w):\n"
        "            if self.weight.device.type == 'cuda':\n                w = w.cuda()\n    return _Linear8bit\n"
    )
    res = run(src)
    assert (
        "== 'cuda'" in res.new_source
        and "w.cuda()" in res.new_source
        and not any(d.fixed for d in res.diagnostics)
    )


# --- found on torchtitan -------------------------------------------------------------------------------------------
def test_a_flagged_call_is_kept_whole():
    src = "import torch\nn = torch.cuda.get_device_properties('cuda').multi_processor_count\n"
    assert "get_device_properties('cuda')" in run(src).new_source


def test_a_test_skipped_without_cuda_stays_skipped_without_cuda():
    src = (
        "import torch, unittest\n@unittest.skipUnless(torch.cuda.is_available(), 'symmetric memory needs CUDA')\n"
        "class T(unittest.TestCase):\n    pass\n"
        "@unittest.skipUnless(torch.cuda.is_available(), 'needs an accelerator')\nclass U(unittest.TestCase):\n"
        "    pass\n"
    )
    out = run(src).new_source
    assert "skipUnless(torch.cuda.is_available(), 'symmetric memory needs CUDA')" in out
    assert "skipUnless(torch.accelerator.is_available(), 'needs an accelerator')" in out


# --- found on timm ---------------------------------------------------------------------------------------------------
def test_a_programs_own_is_cuda_attribute_is_not_a_tensor_property():
    src = (
        "import torch\nclass Prefetcher:\n    def __init__(self, device):\n"
        "        self.is_cuda = torch.cuda.is_available() and device.type == 'cuda'\n"
        "    def step(self, x):\n        if self.is_cuda:\n            x = x.cuda()\n"
        "        return x.cpu() if x.is_cuda else x\n"
    )
    out = run(src).new_source
    assert "if self.is_cuda:" in out and 'return x.cpu() if (x.device.type == "tpu") else x' in out


def test_an_assertion_that_cuda_is_there_keeps_its_guard():
    src = "import torch\nassert torch.cuda.is_available(), 'CUDA required for APEX optimizers'\n"
    assert "assert torch.cuda.is_available()" in run(src).new_source


# --- found on composer --------------------------------------------------------------------------------------------
def test_the_text_of_an_exception_is_not_a_device():
    src = (
        "import torch\ntry:\n    step()\nexcept RuntimeError as e:\n    if 'cuda' in str(e).lower():\n"
        "        raise\nkey = ('rng', '0', 'cuda')\n"
    )
    out = run(src).new_source
    assert "'cuda' in str(e).lower()" in out and "('rng', '0', 'cuda')" in out


def test_a_flagged_backend_test_beside_a_rewritten_device_test_settles_in_one_pass():
    # pytorch/examples' ImageNet script: the device-type test becomes 'tpu' in the first run; the second run
    # must not read that new 'tpu' as a sign that the function dispatches on several devices
    src = (
        "import torch, warnings\n"
        "def main_worker(args, device):\n"
        "    if device.type == 'cuda':\n"
        "        n = torch.accelerator.device_count()\n"
        '        if n == 1 and args.dist_backend == "nccl":\n'
        "            warnings.warn('nccl wants more than one GPU')\n"
    )
    res = run(src)  # (run also checks that a second pass changes nothing)
    assert "device.type == 'tpu'" in res.new_source
    assert 'args.dist_backend == "nccl"' in res.new_source
    flagged = [d.code for d in res.diagnostics if d.outcome == "flagged"]
    assert flagged == ["TPU102"] and "TPU401" not in codes(res)


def test_enum_values_are_keys_not_devices():
    # accelerate's RNGType: CUDA = "cuda" and XLA = "xla" both renamed to "tpu" would make XLA an alias of CUDA
    src = (
        "import torch\nfrom enum import Enum\n"
        "class RNGType(str, Enum):\n    TORCH = 'torch'\n    CUDA = 'cuda'\n    XLA = 'xla'\n"
        "def pick(kind):\n    return torch.device('cuda') if kind == RNGType.CUDA else None\n"
    )
    res = run(src)
    assert "CUDA = 'cuda'" in res.new_source and "XLA = 'xla'" in res.new_source
    assert "torch.device('tpu')" in res.new_source
    assert "Enum member" in " ".join(d.message for d in res.diagnostics)


# --- found on Lightning's tests ---------------------------------------------------------------------------------------
def test_a_test_gated_on_cuda_stays_cudas_test():
    src = (
        "import torch, pytest, unittest\nfrom tests.helpers import RunIf\n"
        "@RunIf(min_cuda_gpus=1)\n@pytest.mark.parametrize('loc', ['cuda', {'cpu': 'cuda'}])\n"
        "def test_load_on_gpu(loc):\n    assert load(loc).device.type == 'cuda'\n"
        "@pytest.mark.parametrize('dev', ['cpu', pytest.param('cuda:0', marks=RunIf(min_cuda_gpus=1))])\n"
        "def test_move(dev):\n    x = torch.ones(1).cuda()\n"
        "@unittest.skipUnless(torch.cuda.is_available(), 'needs CUDA')\ndef test_streams():\n"
        "    torch.cuda.synchronize()\n"
        "@RunIf(min_cuda_gpus=0)\ndef test_anywhere():\n    return torch.device('cuda')\n"
    )
    out = run(src).new_source
    assert "['cuda', {'cpu': 'cuda'}]" in out and "device.type == 'cuda'" in out
    assert "pytest.param('cuda:0', marks=RunIf(min_cuda_gpus=1))" in out
    assert 'x = torch.ones(1).to("tpu")' in out  # the ungated body is migrated
    assert "    torch.cuda.synchronize()" in out
    assert "torch.device('tpu')" in out  # min_cuda_gpus=0 gates nothing


def test_device_hw_of_the_default_device_is_not_wrapped_twice():
    # torch_xla's test_autocast: xm.xla_device_hw(torch_xla.device()) != 'TPU'
    out = run(XM + "hw = xm.xla_device_hw(torch_xla.device())\nother = xm.xla_device_hw(dev)\n").new_source
    assert 'hw = torch.device("tpu").type.upper()' in out
    assert "other = torch.device(dev).type.upper()" in out


def test_an_attribute_of_the_same_name_does_not_keep_a_torch_xla_import():
    # torch_xla's test_train_mp_mnist_amp: `from torch_xla.amp import autocast` became torch.autocast("tpu");
    # the attribute `torch.autocast` must not count as a use of the imported name
    src = (
        XM
        + "from torch_xla.amp import autocast\ndef step(x):\n    with autocast(torch_xla.device()):\n        return x\n"
    )
    out = run(src).new_source
    assert "torch.autocast(" in out and "torch_xla" not in out


# --- found on composer ----------------------------------------------------------------------------------------------
def test_a_device_test_that_keeps_a_cuda_only_feature_off_is_kept():
    src = (
        "import torch, warnings\n"
        "def init(model):\n"
        "    dev = next(model.parameters()).device\n"
        "    if dev.type not in ('cuda', 'meta'):\n"
        "        warnings.warn(f'the observer only works on CUDA devices, not {dev.type}')\n"
        "        return False\n"
        "    return True\n"
        "def place(model):\n"
        "    if next(model.parameters()).device.type == 'cuda':\n"
        "        model.half()\n"
    )
    res = run(src)
    assert "dev.type not in ('cuda', 'meta')" in res.new_source
    assert "device.type == 'tpu'" in res.new_source  # an ordinary device test is still migrated
    assert any(d.outcome == "flagged" and "works only on CUDA" in d.message for d in res.diagnostics)


# --- found on DeepSpeed ---------------------------------------------------------------------------------------------
def test_an_optional_torch_import_is_not_made_unconditional():
    src = (
        "torch_available = True\ntry:\n    import torch\nexcept ImportError:\n    torch_available = False\n"
        "if torch_available and torch.cuda.is_available():\n    n = torch.cuda.device_count()\n"
    )
    out = run(src).new_source
    assert "torch.accelerator.device_count()" in out
    assert not out.startswith("import torch") and out.count("import torch") == 1


def test_a_device_test_that_installs_nvidia_packages_is_kept():
    src = (
        "import torch\nreqs = []\n"
        "if torch.accelerator.current_accelerator().type == 'cuda':\n    reqs.append('nvidia-ml-py')\n"
        "if torch.accelerator.current_accelerator().type == 'cuda':\n    x = torch.ones(1).cuda()\n"
    )
    out = run(src).new_source
    assert out.count("== 'cuda'") == 1 and out.count("== 'tpu'") == 1


def test_a_lazy_torch_import_is_not_hoisted():
    # DeepSpeed's accelerator modules import torch inside functions or as `import torch.cuda` in a try
    src = (
        "import os\ntry:\n    import torch.cuda\nexcept ImportError:\n    pass\n"
        "def name():\n    import torch.mps\n    if torch.cuda.device_count() > 0:\n        return 'cuda'\n"
    )
    out = run(src).new_source
    assert "torch.accelerator.device_count()" in out and out.count("import torch") == 2
    aliased = run("import torch as th\nn = th.cuda.device_count()\n").new_source
    assert "th.accelerator.device_count()" in aliased or "import torch\n" in aliased


def test_a_warning_that_only_names_cuda_does_not_keep_the_branch():
    src = (
        "import torch, warnings\n"
        "def pick(dev):\n"
        "    if dev.type != 'cuda':\n"
        "        warnings.warn('CUDA not available, falling back to the CPU')\n"
    )
    assert "dev.type != 'tpu'" in run(src).new_source
