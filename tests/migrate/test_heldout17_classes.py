"""Wrong rewrites found by reading every changed hunk of held-out check 17 (benchmarks/migrate_corpus_heldout17.txt),
each as a class in its own words, each asserting the rewrite it must not make (or the one it must not miss)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from migrate_helpers import run
from test_heldout9_classes import _code, _migrate_tree


def _write(root, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def _imports_without_torchtpu(folder, module: str) -> subprocess.CompletedProcess:
    """Import ``module`` from ``folder`` where no TorchTPU device exists (a CPU-only test run)."""
    env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0", "PYTHONPATH": str(folder)}
    code = f"import {module} as m; print(m.DEVICE, m.Enc().device, m.f.__defaults__[0])"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


# --- a device object built when a module is imported must not make the import fail off-TPU (glide's attr defaults) -
_LIBRARY = (
    "import torch\n\nDEVICE = torch.device('cuda')\n\n\nclass Enc:\n    device = torch.device('cuda')\n\n\n"
    "def f(x, device=torch.device('cuda:0')):\n    return x.to(device)\n\n\n"
    "def g(x):\n    return x.to(torch.device('cuda'))\n"
)


def test_an_import_time_device_object_is_built_lazily_and_imports_anywhere(tmp_path):
    out = run(_LIBRARY).new_source
    body = _code(out)
    assert "DEVICE = _tpu_device()" in body and "    device = _tpu_device()" in body
    assert "def f(x, device=_tpu_device(0)):" in body
    assert "x.to(torch.device('tpu'))" in body  # (built when called: a device is there then, as with CUDA)
    (tmp_path / "lib.py").write_text(out)
    proc = _imports_without_torchtpu(tmp_path, "lib")
    # CUDA's device object, as written, where no TPU is set up (torch.device('tpu') raised at import here)
    assert proc.returncode == 0, proc.stderr[-1500:]
    assert proc.stdout.split() == ["cuda", "cuda", "cuda:0"]


@pytest.mark.parametrize(
    "src",
    [
        # a script's top level runs as the program, which needed the device anyway
        "import argparse, torch\nargs = argparse.ArgumentParser().parse_args()\nDEVICE = torch.device('cuda')\n",
        "import torch\nif __name__ == '__main__':\n    DEVICE = torch.device('cuda')\n",
        # built only where a device is there
        "import torch\nDEVICE = torch.device('cuda') if torch.cuda.is_available() else torch.device('cpu')\n",
    ],
)
def test_a_device_object_built_by_a_script_or_behind_a_check_stays_plain(src):
    out = run(src).new_source
    assert "_tpu_device" not in out and "torch.device('tpu')" in out


# --- what a kept check switches on in sight stays with it (glide's notebooks: has_cuda kept, 'cuda' renamed) -----
def test_a_kept_check_keeps_the_device_choice_it_makes():
    src = (
        "import torch as th\n\nhas_cuda = th.cuda.is_available()\n"
        "device = th.device('cpu' if not has_cuda else 'cuda')\noptions = {}\noptions['use_fp16'] = has_cuda\n"
    )
    res = run(src)
    body = _code(res.new_source)
    # the wrong rewrite: 'tpu' behind a CUDA test (CPU on a TPU host, 'tpu' on a CUDA one)
    assert "else 'cuda')" in body and "has_cuda = th.cuda.is_available()" in body
    assert any(d.code == "TPU201" and not d.fixed for d in res.diagnostics)


# --- another library's name for torch.cuda.is_available() (LLaMA-Factory's transformers gate) -----------------
def test_transformers_is_torch_cuda_available_is_a_device_check():
    src = (
        "import torch\nfrom transformers.utils import is_torch_cuda_available, is_torch_npu_available\n\n\n"
        "def count():\n    if is_torch_npu_available():\n        return torch.npu.device_count()\n"
        "    elif is_torch_cuda_available():\n        return torch.cuda.device_count()\n    return 0\n"
    )
    out = run(src).new_source
    assert "elif torch.accelerator.is_available():" in out and "torch.accelerator.device_count()" in out
    assert "from transformers.utils import is_torch_npu_available\n" in out  # the unused name goes


# --- torch.cuda.memory.X is torch.cuda.X (fsdp_qlora's profiling: a false "no equivalent" beside a rewrite) -----
def test_torch_cuda_memory_submodule_names_are_the_same_functions():
    src = (
        "import torch\ntorch.cuda.reset_peak_memory_stats()\npeak = torch.cuda.memory.max_memory_allocated()\n"
        "torch.cuda.random.manual_seed(0)\n"
    )
    out = run(src).new_source
    assert 'peak = _tpu_memory_stat("max_memory_allocated")' in out and "TPU299" not in out


# --- a GPU seed is not a CPU re-seed unless the CPU was just seeded (Lightning's UvA notebook) ------------------
def test_a_gpu_seed_far_from_the_cpu_seed_stays_the_devices_own():
    src = (
        "import torch\ntorch.manual_seed(42)\nx = torch.rand(3)\n"
        "if torch.cuda.is_available():\n    torch.cuda.manual_seed(42)\n    torch.cuda.manual_seed_all(42)\n"
    )
    out = _code(run(src).new_source)
    # the wrong rewrite: torch.manual_seed(42) again, resetting the CPU stream after torch.rand drew from it
    assert out.count("torch.manual_seed(42)") == 1 and "_tpu_random().manual_seed(42)" in out


def test_a_gpu_seed_right_after_the_same_cpu_seed_is_one_seed():
    src = (
        "import random, torch\n\n\ndef seed(s):\n    random.seed(s)\n    torch.manual_seed(s)\n"
        "    if torch.cuda.is_available():\n        torch.cuda.manual_seed_all(s)\n"
    )
    out = _code(run(src).new_source)
    assert "torch.tpu" not in out and out.count("torch.manual_seed(s)") >= 1


# --- `backend == "nccl"` choosing the program's GPU path follows the backend (picotron, GroundingDINO) ---------
def test_a_backend_comparison_that_picks_the_gpu_path_follows_the_renamed_backend():
    src = (
        "import torch\nimport torch.distributed as dist\n\n\ndef main(use_cpu, local_rank):\n"
        "    backend = 'gloo' if use_cpu else 'nccl'\n    if backend == 'nccl':\n"
        "        torch.cuda.set_device(local_rank)\n        device = torch.device('cuda', local_rank)\n"
        "    else:\n        device = torch.device('cpu')\n    dist.init_process_group(backend=backend)\n\n\n"
        "def cpu_group():\n    if dist.get_backend() == 'nccl':\n        return dist.new_group(backend='gloo')\n"
        "    return dist.group.WORLD\n"
    )
    out = _code(run(src).new_source)
    # the wrong rewrite: 'nccl' kept in the test while the backend became 'tpu_dist': the CPU on a TPU host
    assert "if backend == 'tpu_dist':" in out and "device = torch.device('tpu')" in out
    assert "if dist.get_backend() in ('nccl', 'tpu_dist'):" in out  # (either name, held-out 28)


def test_a_backend_comparison_gating_nccls_own_code_is_still_kept():
    src = "import torch.distributed as dist\nif dist.get_backend() == 'nccl':\n    dist.barrier(device_ids=[0])\n"
    assert "== 'nccl'" in run(src).new_source


# --- workers the program starts itself all open the same chip (lerobot, F5-TTS, DRL-Pytorch) -----------------
@pytest.mark.parametrize(
    "start",
    [
        "mp.spawn(worker, nprocs=4)",
        "ps = [mp.Process(target=worker, args=(r,)) for r in range(4)]",
        "with ProcessPoolExecutor(4) as ex:\n    fs = [ex.submit(worker, r) for r in range(4)]",
        "pool = Pool(4)\nout = pool.map(worker, range(4))",
    ],
)
def test_workers_that_open_the_device_are_flagged_once(start):
    src = (
        "import torch\nimport torch.multiprocessing as mp\nfrom concurrent.futures import ProcessPoolExecutor\n"
        "from multiprocessing import Pool\n\n\ndef worker(rank):\n    return torch.ones(2, device=f'cuda:{rank}')\n\n\n"
        f"{start}\n"
    )
    res = run(src)
    assert [d.code for d in res.diagnostics].count("TPU409") == 1
    assert "set_tpu_launch_env" in res.new_source


@pytest.mark.parametrize(
    "src",
    [
        # a thread pool shares the process (and its chip)
        "import torch\nfrom concurrent.futures import ThreadPoolExecutor\n\n\ndef worker(r):\n"
        "    return torch.ones(2, device='cuda')\n\n\nwith ThreadPoolExecutor(4) as ex:\n    ex.map(worker, range(4))\n",
        # workers that never open the device
        "import torch\nimport torch.multiprocessing as mp\n\n\ndef worker(r):\n    return sum(range(r))\n\n\n"
        "x = torch.zeros(1).cuda()\nmp.spawn(worker, nprocs=2)\n",
        # already bound
        "import torch\nimport torch.multiprocessing as mp\n\n\ndef worker(r):\n    return torch.ones(1).cuda()\n\n\n"
        "torch.tpu.distributed.set_tpu_launch_env(nnodes=1, nproc_per_node=2)\nmp.spawn(worker, nprocs=2)\n",
    ],
)
def test_workers_that_share_the_process_or_need_no_device_are_not_flagged(src):
    assert "TPU409" not in {d.code for d in run(src).diagnostics}


# --- safetensors rejects 'tpu' (F5-TTS's load_checkpoint, lerobot's policies) ---------------------------------
def test_a_safetensors_device_from_a_variable_loads_on_the_cpu_where_it_is_tpu():
    src = (
        "from safetensors.torch import load_file\n\n\ndef load(model, path, device):\n"
        "    model.load_state_dict(load_file(path, device=device))\n"
    )
    out = run(src).new_source
    assert "load_file(path, device=_tpu_safetensors_device(device))" in out
    assert run(out).new_source == out  # one pass is the fixed point
    scope: dict = {}
    exec(out.split("\n\n\ndef load")[0].split("load_file\n", 1)[1], scope)  # the helper alone
    assert (
        scope["_tpu_safetensors_device"]("tpu") == "cpu"
        and scope["_tpu_safetensors_device"]("cuda:1") == "cuda:1"
    )


# --- a device name read as a GPU model name stays CUDA's (LLaMA-Factory's MFU table, F5-TTS's ZLUDA test) -------
def test_a_device_name_compared_with_gpu_names_is_kept_and_flagged():
    src = (
        "import torch\n\n\ndef flops():\n    name = torch.cuda.get_device_name()\n    if 'H100' in name:\n"
        "        return 989e12\n    raise NotImplementedError(name)\n\n\n"
        "def ok():\n    return not torch.cuda.get_device_name().endswith('[ZLUDA]')\n\n\n"
        "def show():\n    print(torch.cuda.get_device_name(0))\n"
    )
    res = run(src)
    body = _code(res.new_source)
    assert body.count("torch.cuda.get_device_name()") == 2 and "print(torch.tpu.get_device_name(0))" in body
    assert sum("read as a GPU model name" in d.message for d in res.diagnostics) == 2


# --- a backend picked by the program's own function is not wrapped (LLaMA-Factory v1's accelerator helper) ------
def test_a_backend_from_a_per_device_function_is_flagged_not_wrapped():
    src = (
        "import os\nimport torch.distributed as dist\nfrom . import helper\n\n\ndef init(cfg):\n"
        "    dist.init_process_group(backend=helper.get_process_group_backend())\n"
        "    dist.init_process_group(backend=os.environ.get('BACKEND', 'nccl'))\n"
    )
    res = run(src)
    assert "backend=helper.get_process_group_backend()" in res.new_source
    assert "_tpu_backend(os.environ.get(" in res.new_source
    assert any("picks it by device" in d.message and not d.fixed for d in res.diagnostics)


# --- is_bf16_supported() alone also answered False without CUDA (LLaMA-Factory's fp32 export on a CPU) ---------
def test_is_bf16_supported_alone_keeps_a_cpu_run_in_float32():
    out = run(
        "import torch\nif dtype == torch.float32 and torch.cuda.is_bf16_supported():\n    dtype = torch.bfloat16\n"
    ).new_source
    assert 'current_accelerator(check_available=True), "type", None) == "tpu"' in out


# --- CUDA-only quantization kernels and RAPIDS (fsdp_qlora's hqq notebooks, dinov2's cuml) --------------------
# (hqq itself and gptqmodel also have torch/CPU backends: the final reading of peft's imports called "CUDA-only" false)
@pytest.mark.parametrize("module", ["hqq_aten", "cuml.linear_model", "auto_gptq", "eetq"])
def test_cuda_only_libraries_are_flagged(module):
    res = run(f"import torch\nimport {module}\nx = torch.zeros(1).cuda()\n")
    assert any(d.code == "TPU211" and module in d.message for d in res.diagnostics)


# --- a config's backend name read by the project's own init_process_group (Depth-Anything's zoedepth) -----------
def test_a_config_backend_read_by_the_projects_own_group_says_where_it_is_translated(tmp_path):
    _write(
        tmp_path,
        {
            "misc.py": (
                "import torch.distributed as dist\n\n\ndef parallelize(config):\n"
                "    dist.init_process_group(backend=config.dist_backend)\n"
            ),
            "train.py": "import torch\n\n\ndef main(config):\n    config.dist_backend = 'nccl'\n",
        },
    )
    files = _migrate_tree(tmp_path)
    assert "_tpu_backend(config.dist_backend)" in files["misc.py"]
    # the false TODO: "goes to code that is not torch.distributed"
    assert (
        "translates it there at run time" in files["train.py"]
        and "not torch.distributed" not in files["train.py"]
    )
    assert (
        _migrate_tree(tmp_path) == files
    )  # the TODO's words are no process group of the file's (fixed point)


# --- a device read inside a LightningModule follows what Lightning picks (Lightning's UvA energy-model notebook) ---
def test_a_device_read_inside_a_lightning_module_stays_with_lightnings_choice():
    src = (
        "import torch\nimport pytorch_lightning as pl\n\n"
        "device = torch.device('cuda:0') if torch.cuda.is_available() else torch.device('cpu')\n\n\n"
        "class Model(pl.LightningModule):\n    def training_step(self, batch, idx):\n"
        "        return torch.cat([batch, torch.rand(4, 2).to(device)]).sum()\n\n\n"
        "trainer = pl.Trainer(accelerator='auto')\n"
    )
    body = _code(run(src).new_source)
    # the wrong rewrite: 'tpu:0' for the fake images while Lightning's 'auto' trains on the CPU on a TPU host
    assert "torch.device('cuda:0') if torch.cuda.is_available()" in body


# --- a check that picks a GPU *resource* name stays CUDA's (LLaMA-Factory's Ray launcher, SLM-Lab's Ray Tune) ------
@pytest.mark.parametrize(
    "src",
    [
        "import torch\n\n\ndef get_device_name():\n    if torch.cuda.is_available():\n        device = 'gpu'\n"
        "    else:\n        device = 'cpu'\n    return device\n",
        "import torch\n\n\ndef resources():\n    gpus = 1 if torch.cuda.is_available() else 0\n"
        "    return {'cpu': 1, 'gpu': gpus}\n",
    ],
)
def test_a_check_picking_a_gpu_resource_name_is_kept(src):
    res = run(src)
    assert "torch.cuda.is_available()" in _code(res.new_source)
    assert any("GPU resource name" in d.message for d in res.diagnostics)


def test_a_gpu_label_only_printed_is_no_resource():
    src = "import torch\n\n\ndef show():\n    label = 'gpu' if torch.cuda.is_available() else 'cpu'\n    print(label)\n"
    assert "GPU resource" not in run(src).new_source


# --- a worker imported from the project is read where it is defined (F5-TTS's two pools) ------------------------
def test_an_imported_worker_is_flagged_only_when_its_own_code_opens_the_device(tmp_path):
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/ev.py": (
                "import torch\n\n\ndef run_sim(rank):\n    return torch.ones(1, device=f'cuda:{rank}')\n\n\n"
                "def run_asr(rank):\n    return sum(range(rank))\n"
            ),
            "main.py": (
                "import torch\nfrom multiprocessing import Pool\nfrom pkg.ev import run_sim, run_asr\n\n\n"
                "def main():\n    x = torch.zeros(1).cuda()\n    pool = Pool(4)\n    pool.map(run_asr, range(4))\n"
                "    pool.map(run_sim, range(4))\n"
            ),
        },
    )
    main = _migrate_tree(tmp_path)["main.py"]
    flagged = [line for line in main.splitlines() if "TPU409" in line]
    assert len(flagged) == 1 and "run_sim" in flagged[0]


# --- a checkpoint function's autocast capture follows its restore (held-out 18: EasyContext's ring attention) ----
def test_a_saved_autocast_state_is_read_from_the_device_its_restore_uses():
    src = (
        "import torch\nfrom torch.utils.checkpoint import _get_autocast_kwargs\n\n\n"
        "class Fn(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
        "        ctx.gpu_kw, ctx.cpu_kw = _get_autocast_kwargs()\n        return x\n\n"
        "    @staticmethod\n    def backward(ctx, g):\n        with torch.cuda.amp.autocast(**ctx.gpu_kw):\n"
        "            return g\n"
    )
    out = run(src).new_source
    # the wrong rewrite: CUDA's state (off under TPU autocast) restored into a TPU autocast: recompute in fp32
    assert "_get_autocast_kwargs(_tpu_amp_device())" in out and "_tpu_autocast(**ctx.gpu_kw)" in out


def test_a_class_started_as_a_worker_is_read_where_it_is_defined():
    src = (
        "import torch\nimport torch.multiprocessing as mp\n\n\nclass Trainer:\n    def __init__(self, rank):\n"
        "        self.model = torch.nn.Linear(2, 2).to(f'cuda:{rank}')\n\n\nmp.spawn(Trainer, nprocs=2)\n"
    )
    res = run(src)
    flags = [d.message for d in res.diagnostics if d.code == "TPU409"]
    assert len(flags) == 1 and "another module" not in flags[0]


# --- held-out 18 -----------------------------------------------------------------------------------------------
def test_a_twin_reading_the_wrapper_a_kept_branch_built_is_kept_too():
    # ffjord's train_cnf.py: DataParallel wrap under a kept check, then `model.module...` under its renamed twin
    src = (
        "import torch\n\nif __name__ == '__main__':\n    model = torch.nn.Linear(2, 2)\n"
        "    if torch.cuda.is_available():\n        model = torch.nn.DataParallel(model).cuda()\n"
        "    sd = model.module.state_dict() if torch.cuda.is_available() else model.state_dict()\n"
    )
    body = _code(run(src).new_source)
    assert "torch.accelerator" not in body  # (renamed alone: AttributeError `.module` on a TPU host)


def test_a_cuda_tensor_type_alias_only_called_builds_tpu_tensors():
    # ffjord's VAE: `self.FloatTensor = torch.cuda.FloatTensor` then `self.FloatTensor(1).zero_()` under a flag the
    # migration turns on: "used as a type" was false advice, and the call raised without CUDA
    src = (
        "import torch\n\n\nclass VAE(torch.nn.Module):\n    def __init__(self, cuda):\n        super().__init__()\n"
        "        self.FloatTensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor\n"
        "        self.z = self.FloatTensor(3).zero_()\n"
    )
    out = run(src).new_source
    assert "_tpu_tensor_type(torch.FloatTensor) if cuda else torch.FloatTensor" in out
    scope: dict = {}
    exec(out, scope)
    assert scope["VAE"](True).z.device.type == "tpu" and scope["VAE"](False).z.device.type == "cpu"


def test_a_partial_cuda_autocast_in_a_library_stays_portable():
    # vector-quantize-pytorch's FSQ/LFQ: `partial(autocast, 'cuda', enabled=False)`: renamed to 'tpu', every forward
    # raised on a machine without TorchTPU
    src = (
        "import torch\nfrom functools import partial\nfrom torch.amp import autocast\n\n\n"
        "def f(x):\n    with partial(autocast, 'cuda', enabled=False)():\n        return x * 2\n"
    )
    out = run(src).new_source
    assert "partial(_tpu_autocast, enabled=False)" in out and "'tpu'" not in _code(out).split("def f")[1]


def test_ctranslate2_engines_are_cpu_or_cuda_only():
    res = run("import torch\nfrom faster_whisper import WhisperModel\nm = WhisperModel('x', device='cuda')\n")
    assert any(d.code == "TPU211" and "faster_whisper" in d.message for d in res.diagnostics)
    assert "device='cuda'" in res.new_source


def test_a_worker_reaching_the_device_through_a_project_function_is_flagged(tmp_path):
    # Depth-Anything: mp.spawn(main_worker) whose only device code is zoedepth's parallelize()
    _write(
        tmp_path,
        {
            "zoedepth/__init__.py": "",
            "zoedepth/misc.py": "import torch\n\n\ndef parallelize(config, model):\n    return model.cuda(config.gpu)\n",
            "train.py": (
                "import torch\nimport torch.multiprocessing as mp\nfrom zoedepth.misc import parallelize\n\n\n"
                "def main_worker(gpu, config):\n    return parallelize(config, torch.nn.Linear(2, 2))\n\n\n"
                "if __name__ == '__main__':\n    mp.spawn(main_worker, nprocs=torch.cuda.device_count(), args=(None,))\n"
            ),
        },
    )
    assert "TPU409" in _migrate_tree(tmp_path)["train.py"]


def test_transformers_bf16_gpu_probe_follows_its_fp16_twin():
    # LLaMA-Factory: `_is_fp16_available` became true on TPU while `_is_bf16_available` stayed transformers' CUDA probe
    out = run(
        "import torch\nfrom transformers.utils import is_torch_bf16_gpu_available\n"
        "_is_fp16_available = torch.cuda.is_available()\n_is_bf16_available = is_torch_bf16_gpu_available()\n"
    ).new_source
    # (the probe also answers for MPS/XPU/NPU and Ampere CUDA: the TPU is added beside it, not put in its place)
    assert "_is_bf16_available = (getattr(torch.accelerator.current_accelerator(" in out
    assert '== "tpu" or is_torch_bf16_gpu_available())' in out
    assert run(out).new_source == out  # one pass is the fixed point


def test_a_worker_whose_only_cuda_call_the_migration_deletes_is_not_flagged():
    # F5-TTS's run_asr_wer: torch.cuda.set_device(rank), then CTranslate2 / CPU funasr: nothing opens the chip
    src = (
        "import torch\nfrom multiprocessing import Pool\n\n\ndef asr(rank):\n    torch.cuda.set_device(rank)\n"
        "    return rank\n\n\ndef sim(rank):\n    return torch.ones(1, device=f'cuda:{rank}')\n\n\n"
        "pool = Pool(2)\npool.map(asr, range(2))\npool.map(sim, range(2))\n"
    )
    flagged = [line for line in run(src).new_source.splitlines() if "TPU409" in line]
    assert len(flagged) == 1 and "`sim`" in flagged[0]


# --- final reading: a device name only formatted is no name test; a config name read by no group of the project ---
def test_a_device_name_only_formatted_for_a_label_is_rewritten():
    # llm-foundry's benchmark: gpu_type = torch.cuda.get_device_name().replace(' ', '-') (a CSV label)
    out = run("import torch\nlabel = torch.cuda.get_device_name().replace(' ', '-')\n").new_source
    assert "torch.tpu.get_device_name().replace(' ', '-')" in out


def test_a_config_backend_under_another_name_does_not_claim_a_translation(tmp_path):
    # Vim: `dist_params = dict(backend='nccl')` (mmcv's init_dist) beside a group made from `args.dist_backend`
    _write(
        tmp_path,
        {
            "launch.py": "import torch.distributed as dist\n\n\ndef go(args):\n    dist.init_process_group(backend=args.dist_url)\n",
            "cfg.py": "dist_params = dict(backend='nccl')\nimport torch\nx = torch.zeros(1).cuda()\n",
        },
    )
    assert "translates it there at run time" not in _migrate_tree(tmp_path)["cfg.py"]


def test_a_cuda_tensor_type_called_in_a_module_that_imports_torch_under_an_alias_still_resolves():
    # fairseq's MMPT extractor: `import torch as th` only: `_tpu_tensor_type(torch.FloatTensor)` raised NameError
    src = "import torch as th\n\n\ndef f(n):\n    return th.cuda.FloatTensor(n)\n"
    out = run(src).new_source
    scope: dict = {}
    exec(out, scope)
    assert scope["f"](2).device.type == "tpu"


def test_a_type_string_compared_beside_rewritten_constructors_names_the_tpu_type():
    # fairseq's WaveGlow in .half(): `spect.type() == 'torch.cuda.HalfTensor'` kept while the constructors it
    # guards were rewritten: float32 tensors met the half convolution
    src = (
        "import torch\n\n\ndef infer(spect, n):\n    if spect.type() == 'torch.cuda.HalfTensor':\n"
        "        return torch.cuda.HalfTensor(n).normal_()\n    return torch.cuda.FloatTensor(n).normal_()\n"
    )
    out = run(src).new_source
    assert "spect.type() == 'torch.tpu.HalfTensor'" in out
    scope: dict = {}
    exec(out, scope)
    half = torch.zeros(1, dtype=torch.float16, device="tpu")
    assert half.type() == "torch.tpu.HalfTensor" and scope["infer"](half, 3).dtype == torch.float16
