"""Wrong rewrites found by reading every changed hunk of held-out check 6 (benchmarks/migrate_corpus_heldout6.txt).

Each test states the rewrite the tool must not make (or the idiom it must not miss); all failed before this
change: an f-string without placeholders was not a device literal, DataParallel was never flagged, a device test
handed to a switch named for the GPU turned that switch on for TPU, an implementation selector named 'cuda' lost
its membership test, and a tensor's device-type test gating a CUDA kernel was switched on for TPU."""

from __future__ import annotations

import ast

import pytest
from migrate_helpers import run


def _code(out: str) -> str:
    """The program without comments (a TODO may quote the rewrite it did not make)."""
    return "\n".join(line for line in out.splitlines() if not line.lstrip().startswith("#"))


# --- guided-diffusion dist_util.dev(): the check was renamed while its body kept returning f"cuda" ---
@pytest.mark.parametrize("literal", ['f"cuda"', "f'cuda'", 'F"cuda"', 'rf"cuda"'])
def test_an_fstring_without_placeholders_is_the_device_literal_it_spells(literal):
    src = (
        "import torch as th\n\n"
        "def dev():\n"
        "    if th.cuda.is_available():\n"
        f"        return th.device({literal})\n"
        '    return th.device("cpu")\n'
    )
    out = _code(run(src).new_source)
    ast.parse(out)
    assert "th.accelerator.is_available()" in out
    assert "cuda" not in out  # the wrong rewrite: the check says TPU, the body still returns a CUDA device


def test_an_fstring_with_braces_or_placeholders_is_not_taken_for_a_plain_literal():
    src = 'import torch\n\nname = f"cuda{{x}}"\nmsg = f"cuda {torch.__version__}"\n'
    out = run(src).new_source
    assert 'f"cuda{{x}}"' in out and 'f"cuda {torch.__version__}"' in out


# --- pytorch-cifar: `if device == 'cuda': net = torch.nn.DataParallel(net)` ---
def test_a_device_test_that_switches_on_data_parallel_is_kept():
    src = (
        "import torch\n\n"
        "device = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
        "net = torch.nn.Linear(2, 2).to(device)\n"
        "if device == 'cuda':\n"
        "    net = torch.nn.DataParallel(net)\n"
    )
    out = run(src).new_source
    ast.parse(out)
    assert "if device == 'cuda':" in out  # the wrong rewrite: DataParallel's CUDA scatter on 'tpu' raises


@pytest.mark.parametrize(
    "imports, call",
    [
        ("import torch.nn as nn", "nn.DataParallel(model)"),
        ("from torch.nn import DataParallel", "DataParallel(model, device_ids=[0])"),
        ("from torch.nn.parallel import data_parallel", "data_parallel(model, x)"),
    ],
)
def test_data_parallel_is_flagged_even_in_a_file_that_never_says_cuda(imports, call):
    res = run(f"{imports}\n\nmodel = {call}\n")
    assert res.new_source.count("TODO(tpu-migrate TPU407)") == 1
    assert (
        call in res.new_source
    )  # flagged, never rewritten (dropping it changes .module and checkpoint keys)


def test_data_parallel_under_a_multi_device_count_keeps_cudas_count():
    # until held-out 21 the count was renamed (1 per TPU process: false either way); readers of held-out 15 and 21
    # judged that wrong where a process sees more than one chip (DataParallel's forward raises on "tpu"): the gate
    # of code that reaches DataParallel stays CUDA's, with one TODO
    src = "import torch\n\nif torch.cuda.device_count() > 1:\n    model = torch.nn.DataParallel(model)\n"
    out = run(src).new_source
    assert "torch.cuda.device_count() > 1" in out
    assert out.count("TODO(tpu-migrate") == 1


# --- stylegan2 (rosinality) ppl.py: `lpips.PerceptualLoss(..., use_gpu=device.startswith("cuda"))` ---
@pytest.mark.parametrize("test", ['device.startswith("cuda")', '(device == "cuda")', 'not device != "cuda"'])
@pytest.mark.parametrize("keyword", ["use_gpu", "cuda", "on_gpu"])
def test_a_device_test_handed_to_a_switch_named_for_the_gpu_is_kept(test, keyword):
    src = f'import lpips\n\ndevice = "cuda"\nloss = lpips.PerceptualLoss(net="vgg", {keyword}={test})\n'
    out = run(src).new_source
    ast.parse(out)
    assert test in out  # the wrong rewrite: use_gpu=True on TPU sends lpips to DataParallel(device_ids=[0])
    assert "TODO(tpu-migrate TPU102)" in out


# --- stylegan2-ada torch_utils/ops/bias_act.py: `impl='cuda'` with `assert impl in ['ref', 'cuda']` ---
_BIAS_ACT = (
    "import torch\n\n"
    "def bias_act(x, b=None, impl='cuda'):\n"
    "    assert impl in ['ref', 'cuda']\n"
    "    if impl == 'cuda' and x.device.type == 'cuda' and _init():\n"
    "        return _bias_act_cuda(x).apply(x, b)\n"
    "    return x + b\n"
)


def test_an_implementation_selector_named_cuda_keeps_its_default_and_its_tests():
    out = _code(run(_BIAS_ACT).new_source)
    ast.parse(out)
    assert "impl='cuda'" in out and "impl == 'cuda'" in out  # the wrong rewrite: every call fails the assert


def test_an_implementation_selector_handed_on_from_another_function_keeps_its_default():
    # stylegan2-ada upfirdn2d.py: filter2d(..., impl='cuda') passes impl on to upfirdn2d, which asserts it
    src = _BIAS_ACT + "\n\ndef filter2d(x, f, impl='cuda'):\n    return bias_act(x, f, impl=impl)\n"
    out = _code(run(src).new_source)
    assert "def filter2d(x, f, impl='cuda')" in out


def test_a_tensor_device_type_test_that_selects_a_cuda_kernel_is_kept():
    out = run(_BIAS_ACT).new_source
    assert "x.device.type == 'cuda'" in out and "TODO(tpu-migrate TPU102)" in out


def test_a_tensor_device_type_test_in_a_function_reading_cudnn_state_is_kept():
    src = (
        "import torch\n\n"
        "def could_use_op(input):\n"
        "    if not torch.backends.cudnn.enabled:\n"
        "        return False\n"
        "    if input.device.type != 'cuda':\n"
        "        return False\n"
        "    return True\n"
    )
    out = run(src).new_source
    assert "input.device.type != 'cuda'" in out


def test_a_device_list_membership_still_migrates_with_its_default():
    src = "def place(x, device='cuda'):\n    assert device in ('cpu', 'cuda')\n    return x.to(device)\n"
    out = run(src).new_source
    assert "device='tpu'" in out and "('cpu', 'tpu')" in out


def test_a_plain_tensor_device_test_is_still_rewritten():
    src = "import torch\n\ndef move(x):\n    if x.device.type == 'cuda':\n        return x\n    return x.cuda()\n"
    out = run(src).new_source
    assert "x.device.type == 'tpu'" in out


def test_a_tensor_device_test_choosing_torchs_autocast_dtype_is_still_rewritten():
    # gpt-neox megatron/model/moe.py: torch.get_autocast_gpu_dtype is torch's API (TPU305 rewrites it), not
    # CUDA-only state of the program; nor is an 'xla' test gating torch_xla code (lit-llama's generate.py)
    src = (
        "import torch\n\n"
        "def cast(tensor):\n"
        "    if tensor.device.type == 'cuda':\n"
        "        return tensor.to(torch.get_autocast_gpu_dtype())\n"
        "    return tensor\n\n"
        "def step(idx):\n"
        "    if idx.device.type == 'xla':\n"
        "        import torch_xla.core.xla_model as xm\n\n"
        "        xm.mark_step()\n"
    )
    out = run(src).new_source
    assert "tensor.device.type == 'tpu'" in out and "get_autocast_dtype" in out
    assert "TODO" not in out and "mark_step" not in out
