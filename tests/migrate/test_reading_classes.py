"""Wrong rewrites found by reading hunks of a fresh corpus (issue 31, corpus notes WRONG-1..5, MISSED-1), each
as a class in its own words, each asserting the rewrite it must not make."""

from __future__ import annotations

import pytest
from migrate_helpers import codes, run


def _code(out: str) -> str:
    """The program without comments (a TODO may quote the rewrite it did not make)."""
    return "\n".join(line for line in out.splitlines() if not line.lstrip().startswith("#"))


# --- an is_cuda test guarding a compiled CUDA extension (WRONG-1) ---------------------------------------------
@pytest.mark.parametrize(
    "src",
    [
        "import torch, fused_norm_cuda\ndef norm(x, w):\n    assert x.is_cuda and w.is_cuda\n"
        "    return fused_norm_cuda.forward(x, w)\n",
        "import torch\ndef norm(x, w):\n    import fused_norm_cuda\n    assert x.is_cuda, 'needs a GPU'\n"
        "    return fused_norm_cuda.forward(x, w)\n",
        "import torch\nclass F(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
        "        from my_kernels import cuda_ops\n        assert x.is_cuda\n        return cuda_ops.run(x)\n",
    ],
    ids=["top-import", "local-import", "from-import"],
)
def test_an_is_cuda_assert_before_a_cuda_extension_stays(src):
    res = run(src)
    assert "device.type" not in _code(
        res.new_source
    )  # the wrong rewrite: a TPU tensor let through to a CUDA kernel
    assert ".is_cuda" in res.new_source
    assert "TPU211" in codes(res) or "TPU106" in codes(res)


def test_a_project_module_named_like_an_extension_is_not_cuda_only(tmp_path):
    (tmp_path / "cuda_utils.py").write_text("def pick():\n    return 'cpu'\n")
    f = tmp_path / "train.py"
    src = "import torch\nimport cuda_utils\nx = torch.zeros(2).cuda()\n"
    f.write_text(src)
    res = run(src, path=str(f))
    assert ".to(" in res.new_source and "TPU211" not in codes(res)


# --- a device-type test for 'xla' whose branch is torch_xla-only (WRONG-2) -----------------------------------
@pytest.mark.parametrize(
    "body",
    [
        "        from torch_xla.experimental import tpu\n        return tpu.get_tpu_env()['TYPE']\n",
        "        import torch_xla.debug.metrics as met\n        return met.metrics_report()\n",
    ],
)
def test_an_xla_device_test_whose_branch_cannot_migrate_stays(body):
    src = f"def info(device):\n    if device.type == 'xla':\n{body}    return None\n"
    out = run(src).new_source
    assert "device.type == 'xla'" in out  # not 'tpu': the branch would now run, and fail, on TPU
    assert out.count("TODO(tpu-migrate") >= 1


def test_an_xla_device_test_whose_branch_migrates_is_rewritten():
    src = "import torch_xla.core.xla_model as xm\ndef step(device, x):\n    if device.type == 'xla':\n"
    src += "        x = x + 1\n    return x\n"
    assert "device.type == 'tpu'" in run(src).new_source


# --- an fp16 option default nothing accepts as bf16 (WRONG-3) ------------------------------------------------
BASE = "import argparse\nimport torch\np = argparse.ArgumentParser()\np.add_argument('--dtype', default='fp16'{extra})\n"
BASE += "a = p.parse_args()\n{use}\nm = model.cuda()\nscaler = torch.cuda.amp.GradScaler()\n"


@pytest.mark.parametrize(
    "use",
    [
        "dt = torch.float16 if a.dtype == 'fp16' else torch.float32",
        "dt = {'fp16': torch.float16, 'fp32': torch.float32}[a.dtype]",
    ],
)
def test_an_fp16_default_is_kept_when_nothing_accepts_bf16(use):
    res = run(BASE.format(extra="", use=use))
    assert "default='fp16'" in res.new_source  # 'bf16' would silently select the fp32 branch
    assert "TPU304" in codes(res)


@pytest.mark.parametrize(
    "extra, use",
    [
        (", choices=['fp16', 'bf16', 'fp32']", "dt = a.dtype"),
        ("", "dt = torch.bfloat16 if a.dtype == 'bf16' else torch.float16"),
    ],
)
def test_an_fp16_default_becomes_bf16_where_bf16_is_accepted(extra, use):
    assert "default='bf16'" in run(BASE.format(extra=extra, use=use)).new_source


# --- is_cuda selecting multi-GPU data parallelism (WRONG-5) --------------------------------------------------
@pytest.mark.parametrize(
    "branch",
    [
        "out = nn.parallel.data_parallel(self.main, x, range(self.ngpu))",
        "out = nn.DataParallel(self.main)(x)",
        "out = self.main(x.to(self.device_ids[0]))",
    ],
)
def test_is_cuda_choosing_multi_gpu_work_stays(branch):
    src = "import torch\nimport torch.nn as nn\nclass G(nn.Module):\n    def forward(self, x):\n"
    src += f"        if x.is_cuda and self.ngpu > 1:\n            {branch}\n        else:\n            out = self.main(x)\n"
    src += "        return out\n"
    out = run(src).new_source
    assert "x.is_cuda and self.ngpu > 1" in out and "device.type" not in _code(out)


# --- a CUDA kernel compiled at import (MISSED-1) -------------------------------------------------------------
@pytest.mark.parametrize(
    "call",
    [
        "load(name='wkv', sources=['cuda/wkv_op.cpp', 'cuda/wkv_cuda.cu'])",
        "load_inline(name='k', cpp_sources=[cpp], cuda_sources=[cu])",
    ],
)
def test_a_cuda_kernel_built_by_cpp_extension_is_flagged(call):
    src = f"import torch\nfrom torch.utils.cpp_extension import load, load_inline\next = {call}\n"
    res = run(src)
    assert "TPU211" in codes(res)
    assert res.new_source.count("TODO(tpu-migrate TPU211)") == 1


def test_a_cpp_only_extension_is_not_flagged():
    src = (
        "import torch\nfrom torch.utils.cpp_extension import load\next = load(name='k', sources=['k.cpp'])\n"
    )
    assert "TPU211" not in codes(run(src))


def test_a_todo_quoting_device_names_does_not_make_a_dispatch_on_the_second_run():
    """A TODO tpu-migrate wrote quotes 'tpu' / 'xla': on a second run that text must not read as the function
    naming other accelerators (TinyLlama speed_monitor.py was not a fixed point)."""
    src = (
        "import torch\ndef flops(device):\n    if device.type == 'cuda':\n        return torch.cuda.get_device_name(device)\n"
        "    elif device.type == 'xla':\n        from torch_xla.experimental import tpu\n"
        "        return tpu.get_tpu_env()['TYPE']\n    return None\n"
    )
    run(src)  # (run() asserts the second pass changes nothing)


# --- a 'cuda' option in a config dict is not a device-keyed table (UGLY-1/2) ---------------------------------
@pytest.mark.parametrize(
    "src",
    [
        "args = dotdict({'lr': 0.001, 'cuda': True, 'num_channels': 512})\nx = y.cuda()\n",
        "import torch\nargs = dotdict({'lr': 0.001, 'cuda': torch.cuda.is_available()})\nx = y.cuda()\n",
        "args = {'cuda': not no_cuda, 'epochs': 10}\nx = y.cuda()\n",
    ],
)
def test_a_use_cuda_option_in_a_config_dict_gains_no_tpu_entry(src):
    assert "'tpu'" not in run(src).new_source  # (nothing reads args.tpu)


def test_a_table_keyed_by_device_type_still_gains_a_tpu_entry():
    out = run("BACKENDS = {'cuda': True, 'cpu': False}\nx = y.cuda()\n").new_source
    assert "'tpu': True" in out


# --- held-out check 2 (lit-llama): a check whose value reaches a framework that picks its own device ---------
# `precision = "bf16-true" if <cuda check> else "32-true"; Fabric(precision=precision)`: Fabric's accelerator is
# 'auto' (CUDA or the CPU, never the native TPU), so a check made true by the migration would run bf16 on the CPU.
FRAMEWORK_SINKS = [
    "import torch\nimport lightning as L\n"
    "prec = '16-mixed' if torch.cuda.is_available() else '32'\nfab = L.Fabric(precision=prec)\n",
    "import torch\nfrom lightning.fabric import Fabric\n"
    "def make():\n    p = 'bf16-true' if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else '32-true'\n"
    "    return Fabric(devices=1, precision=p)\n",
    "import torch\nimport pytorch_lightning as pl\n"
    "t = pl.Trainer(precision=16 if torch.cuda.is_available() else 32, max_epochs=1)\n",
]


@pytest.mark.parametrize("src", FRAMEWORK_SINKS, ids=["fabric-name", "fabric-and-bf16", "trainer-direct"])
def test_a_check_feeding_a_framework_setting_stays(src):
    res = run(src)
    code = _code(res.new_source)
    assert "torch.cuda.is_available()" in code and "torch.accelerator" not in code
    if "is_bf16_supported" in src:
        assert (
            "torch.cuda.is_bf16_supported()" in code
        )  # the pair stays CUDA's test, not `... and True` folded
    assert "TPU201" in codes(res)


def test_a_check_feeding_torch_is_still_migrated_beside_a_framework():
    src = (
        "import torch\nimport lightning as L\n"
        "dev = 'cuda' if torch.cuda.is_available() else 'cpu'\nx = torch.ones(2, device=dev)\n"
        "fab = L.Fabric(accelerator='cpu')\n"
    )
    code = _code(run(src).new_source)
    assert "torch.accelerator.is_available()" in code and "'tpu'" in code


@pytest.mark.parametrize(
    "call, flagged",
    [
        ("L.Fabric(devices=1)", True),
        ("L.Trainer(max_epochs=3)", True),
        ("L.Trainer()", True),
        ("L.Trainer(accelerator='cpu')", False),
        ("L.Trainer(**cfg)", False),
        ("L.Fabric('cpu')", False),
    ],
)
def test_lightning_without_an_accelerator_is_flagged_as_auto(call, flagged):
    """(In a file the migration touches: a file naming no CUDA/XLA API is not read at all.)"""
    res = run(f"import torch\nimport lightning as L\nx = {call}\ny = torch.ones(1).cuda()\n")
    assert ("TPU911" in codes(res)) is flagged
    assert res.new_source.count("TPU911") == int(flagged)


# --- held-out check 2 (llama-recipes MemoryTrace): twin checks sharing state across methods --------------------
# One method fills `self.x` under a CUDA check that must stay (its branch is CUDA-only); another method has its
# own copy of the check and then reads `self.x`. Rewriting only the second reads state never set on TPU.
_GAUGE = (
    "import torch\nclass Gauge:\n    def start(self):\n        if torch.cuda.is_available():\n"
    "            self.base = torch.cuda.mem_get_info()\n            self.top = torch.cuda.mem_get_info()\n"
    "    def report(self):\n        label = None\n        if torch.cuda.is_available():\n            label = 'gpu'\n"
    "        if label:\n            print(label, self.top - self.base)\n"
)


def test_a_twin_check_whose_function_reads_the_kept_branch_state_stays():
    res = run(_GAUGE)
    code = _code(res.new_source)
    assert code.count("torch.cuda.is_available()") == 2 and "torch.accelerator" not in code
    assert "twin check" in res.new_source


def test_a_twin_check_that_reads_none_of_that_state_is_migrated():
    src = (
        _GAUGE
        + "def pick():\n    return 'cuda' if torch.cuda.is_available() else 'cpu'\nx = torch.ones(1, device=pick())\n"
    )
    code = _code(run(src).new_source)
    assert (
        code.count("torch.cuda.is_available()") == 2 and code.count("torch.accelerator.is_available()") == 1
    )


# --- held-out check 2 (llama-recipes train_utils): device_count() > 1 meaning "a multi-process job" -------------
# TorchTPU counts one device per process, so `device_count() > 1` turns false: a branch that sums the loss over
# ranks silently stops running while the code after it still divides by the world size.
@pytest.mark.parametrize("test", ["torch.cuda.device_count() > 1", "torch.cuda.device_count() >= 2 and fsdp"])
@pytest.mark.parametrize("collective", ["dist.all_reduce(x)", "dist.barrier()"])
def test_a_multi_device_count_guarding_a_collective_stays(test, collective):
    src = f"import torch\nimport torch.distributed as dist\ndef f(x, fsdp):\n    if {test}:\n        {collective}\n    return x\n"
    res = run(src)
    assert "torch.cuda.device_count()" in _code(res.new_source) and "world size" in res.new_source


def test_a_device_count_test_without_a_collective_is_migrated():
    src = (
        "import torch\ndef f(m):\n    if torch.cuda.device_count() > 1:\n        m = m.half()\n    return m\n"
    )
    assert "torch.accelerator.device_count()" in run(src).new_source


def test_a_device_count_test_around_data_parallel_stays_cudas():
    # (since held-out 21: DataParallel's forward raises on "tpu", so the code that reaches it keeps its gate)
    src = "import torch\ndef f(m):\n    if torch.cuda.device_count() > 1:\n        m = torch.nn.DataParallel(m)\n    return m\n"
    assert "torch.cuda.device_count() > 1" in run(src).new_source


def test_a_device_count_test_that_would_turn_data_parallel_on_is_kept():
    # `> 0` is true on TPU once renamed, and DataParallel's CUDA scatter raises there (TPU407, held-out check 6)
    src = "import torch\ndef f(m):\n    if torch.cuda.device_count() > 0:\n        m = torch.nn.DataParallel(m)\n    return m\n"
    out = run(src).new_source
    assert "torch.cuda.device_count() > 0" in out and out.count("TODO(tpu-migrate") == 1


# --- held-out check 2 (llama-recipes label_script): a run-time ordinal handed to a library's device_map ---------
# device_map="cuda" is kept and flagged (the library's own vocabulary); f"cuda:{rank}" there must be treated alike.
@pytest.mark.parametrize("value", ['f"cuda:{rank}"', '"cuda:{}".format(rank)', '"cuda:%d" % rank'])
def test_a_run_time_ordinal_for_a_library_device_map_is_kept(value):
    src = f"import torch\nfrom transformers import AutoModel\nm = AutoModel.from_pretrained('x', device_map={value})\n"
    res = run(src)
    assert f"device_map={value})" in res.new_source and res.new_source.count("TODO(tpu-migrate TPU101)") == 1


def test_a_run_time_ordinal_for_torch_beside_it_is_still_migrated():
    src = "import torch\nfrom transformers import AutoModel\nm = AutoModel.from_pretrained('x', device_map=f'cuda:{r}')\nt = torch.ones(1, device=f'cuda:{r}')\n"
    assert "t = torch.ones(1, device='tpu')" in run(src).new_source


# --- held-out check 2 (llama-recipes test_finetuning): a test that mocks torch.cuda asserts CUDA's names --------
# The test patches `pkg.train.torch.cuda.is_available` to True and checks that the code moved the model to "cuda";
# the code under test may keep that CUDA branch (it does when it is an xpu/cuda dispatch), so the expected name stays.
@pytest.mark.parametrize(
    "patch",
    ['@patch("pkg.train.torch.cuda.is_available")', "@mock.patch('torch.cuda.device_count')"],
)
def test_a_device_name_asserted_by_a_test_that_mocks_cuda_stays(patch):
    src = (
        "import torch\nfrom unittest import mock\nfrom unittest.mock import patch\n"
        f"{patch}\ndef test_moves(cuda):\n    cuda.return_value = True\n    run()\n"
        "    assert moved.call_args.args[0] == 'cuda'\n"
    )
    res = run(src)
    assert "== 'cuda'" in res.new_source and "TPU102" in codes(res)


def test_a_test_without_cuda_mocks_still_migrates_its_comparisons():
    src = "import torch\ndef test_dev():\n    d = 'cuda'\n    assert d == 'cuda'\n"
    assert "== 'tpu'" in run(src).new_source


# --- a device count that splits work per host (fresh corpus: DeepSpeedExamples imagenet, vit_finetuning) ---------
_SHARES = {
    "param-handed-on": "import torch\ndef worker(i, per_host, cfg):\n    cfg.bs = int(cfg.bs / per_host)\n"
    "def main(cfg):\n    per_host = torch.cuda.device_count()\n    worker(0, per_host, cfg)\n",
    "floor-division": "import torch\ndef share(n):\n    return n // torch.cuda.device_count()\n",
    "augmented": "import torch\nn_dev = torch.cuda.device_count()\nworkers = 8\nworkers //= n_dev\n",
    "attribute": "import torch\ndef setup(args):\n    args.n_gpu = torch.cuda.device_count()\n"
    "    args.batch = args.batch / args.n_gpu\n",
}


@pytest.mark.parametrize("src", list(_SHARES.values()), ids=list(_SHARES))
def test_a_device_count_that_divides_work_is_kept_and_flagged(src):
    """CUDA's count is the devices of the host; TorchTPU's is 1 per process, so a rewritten count would leave
    every process of a multi-process launch with the whole batch (the global batch N times larger, silently)."""
    res = run(src)
    assert "torch.accelerator.device_count" not in _code(res.new_source)
    assert "torch.cuda.device_count()" in _code(res.new_source)
    assert "TPU201" in codes(res) and "LOCAL_WORLD_SIZE" in res.new_source
    assert run(res.new_source).new_source == res.new_source  # one TODO, never twice


@pytest.mark.parametrize(
    "src",
    [
        "import torch\ndef dev(rank):\n    return rank % torch.cuda.device_count()\n",
        "import torch\nn = torch.cuda.device_count()\nprint(f'{n} devices')\n",
        "import torch\nn = torch.cuda.device_count()\ntotal = 8 * n\n",
    ],
    ids=["modulo", "printed", "multiplied"],
)
def test_a_device_count_that_divides_nothing_is_still_migrated(src):
    assert "torch.accelerator.device_count()" in run(src).new_source
