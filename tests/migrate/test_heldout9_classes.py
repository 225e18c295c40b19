"""Wrong rewrites found by reading every changed hunk of held-out check 9 (benchmarks/migrate_corpus_heldout9.txt),
each as a class in its own words, each asserting the rewrite it must not make (or the one it must not miss)."""

from __future__ import annotations

import pytest
from migrate_helpers import codes, run


def _code(out: str) -> str:
    """The program without comments (a TODO may quote the rewrite it did not make)."""
    return "\n".join(line for line in out.splitlines() if not line.lstrip().startswith("#"))


# --- a device count used as a number inside map_location is not a check (swav's restart_from_checkpoint) ------
@pytest.mark.parametrize(
    "location",
    [
        '"cuda:" + str(rank % torch.cuda.device_count())',
        'f"cuda:{rank % torch.cuda.device_count()}"',
        "torch.device('cuda', rank % torch.cuda.device_count())",
    ],
)
def test_a_count_used_as_a_number_in_map_location_is_migrated_with_the_device(location):
    src = f"import torch\ndef load(p, rank):\n    return torch.load(p, map_location={location})\n"
    out = _code(run(src).new_source)
    # the wrong rewrite: 'tpu:' + str(rank % torch.cuda.device_count()) divides by CUDA's count, 0 on TPU
    assert "torch.cuda.device_count" not in out


@pytest.mark.parametrize(
    "location",
    [
        "'cpu' if not torch.cuda.is_available() else None",
        "None if torch.cuda.device_count() > 0 else 'cpu'",
        "torch.cuda.is_available() and None or 'cpu'",
    ],
)
def test_a_check_that_decides_map_location_is_still_kept(location):
    src = f"import torch\ndef load(p):\n    return torch.load(p, map_location={location})\n"
    out = _code(run(src).new_source)
    assert "torch.cuda." in out and "torch.accelerator" not in out


# --- a tensor-device test whose CUDA branch runs torch and host code (glow-tts stft.inverse) ---------------------
_STFT = """import numpy as np
import torch
import torch.nn.functional as F


def window_sum(n):
    w = np.hanning(n) ** 2
    return np.where(w > 1e-6, w, 1.0)


def inverse(x, basis):
    if x.device.type == "cuda":
        y = F.conv_transpose1d(x, basis)
        y = y / torch.from_numpy(window_sum(y.shape[-1])).to(y.device)
    else:
        y = torch.from_numpy(host_istft(x.detach().numpy()))
    return y
"""


def test_a_cuda_branch_of_torch_numpy_and_host_helpers_is_migrated():
    out = _code(run(_STFT).new_source)
    # the kept test sent a TPU tensor to the numpy branch (`.numpy()` raises on a device tensor)
    assert 'x.device.type == "tpu"' in out


def test_a_helper_that_reaches_cuda_state_still_keeps_the_test():
    src = _STFT.replace("w = np.hanning(n) ** 2", "w = fused_cuda_window(n)")
    out = run(src).new_source
    assert 'x.device.type == "cuda"' in _code(out) and "TODO(tpu-migrate" in out


_HELPER = """import numpy as np
from scipy.signal import get_window


def window_sumsquare(window, n_frames, hop_length=200, n_fft=800):
    x = np.zeros(n_fft + hop_length * (n_frames - 1), dtype=np.float32)
    win_sq = get_window(window, n_fft) ** 2
    for i in range(n_frames):
        x[i * hop_length : i * hop_length + n_fft] += win_sq
    return x
"""


def _with_helper_file(tmp_path, helper: str) -> str:
    (tmp_path / "audio_processing.py").write_text(helper)
    src = _STFT.replace("window_sum(y.shape[-1])", "window_sumsquare('hann', y.shape[-1])").replace(
        "import torch.nn.functional as F\n",
        "import torch.nn.functional as F\nfrom audio_processing import window_sumsquare\n",
    )
    f = tmp_path / "stft.py"
    f.write_text(src)
    return str(f)


def test_a_host_helper_imported_from_another_project_file_is_not_foreign(tmp_path):
    path = _with_helper_file(tmp_path, _HELPER)
    out = _code(run(open(path).read(), path=path).new_source)
    assert 'x.device.type == "tpu"' in out  # (glow-tts stft.inverse: the twin of transform()'s migrated test)


@pytest.mark.parametrize(
    "body",
    [
        "x = fused_window_cuda(n_fft)",  # a CUDA word
        "x = torch.cuda.mem_get_info()",  # a torch.cuda API the rules do not migrate
        "x = kernels.window(n_fft)",  # a call into a library that is not host code
    ],
)
def test_a_helper_in_another_file_that_may_touch_a_device_keeps_the_test(tmp_path, body):
    helper = _HELPER.replace(
        "    x = np.zeros(n_fft + hop_length * (n_frames - 1), dtype=np.float32)", f"    {body}"
    )
    helper = "import torch\nimport kernels\n" + helper
    path = _with_helper_file(tmp_path, helper)
    out = run(open(path).read(), path=path).new_source
    assert 'x.device.type == "cuda"' in _code(out) and "TODO(tpu-migrate" in out


# --- one TODO per CUDA-only package at the top of a file (swav's `import apex` / `from apex.parallel.LARC ...`) ---
def test_one_todo_per_cuda_only_package_at_the_top_of_a_file():
    src = (
        "import apex\nfrom apex.parallel.LARC import LARC\nimport xformers.profiler\n"
        "from xformers.profiler import MemSnapshotsProfiler\n\n\ndef f():\n    from apex import amp\n"
    )
    out = run(src).new_source
    todos = [line for line in out.splitlines() if "TPU211" in line]
    assert len(todos) == 3, out  # apex and xformers once each at the top; the import inside f() is its own


# --- held-out 10: a project helper named for CUDA whose CUDA code the run migrates (co-tracker's evaluator) ---
_MOVES = '''import dataclasses


def try_to_cuda(t):
    """Move `t` to a cuda device if supported."""
    try:
        t = t.float().cuda()
    except AttributeError:
        pass
    return t


def dataclass_to_cuda_(obj):
    """Move all contents of a dataclass to cuda in place."""
    for f in dataclasses.fields(obj):
        setattr(obj, f.name, try_to_cuda(getattr(obj, f.name)))
    return obj
'''
_EVAL = """import torch
from utils_data import dataclass_to_cuda_


def evaluate(model, sample):
    if torch.cuda.is_available():
        dataclass_to_cuda_(sample)
        device = torch.device("cuda")
    else:
        device = torch.device("cpu")
    return model(sample.video.to(device))
"""


def _project(tmp_path, helper: str) -> str:
    (tmp_path / "utils_data.py").write_text(helper)
    f = tmp_path / "evaluator.py"
    f.write_text(_EVAL)
    return str(f)


def test_a_check_calling_a_helper_that_the_run_migrates_is_migrated_with_it(tmp_path):
    path = _project(tmp_path, _MOVES)
    out = _code(run(_EVAL, path=path).new_source)
    # the wrong pair: the check kept CUDA's (batch on the CPU) while the helper and the model moved to "tpu"
    assert "torch.accelerator.is_available()" in out and 'torch.device("tpu")' in out


def test_a_helper_with_cuda_only_code_still_keeps_the_check(tmp_path):
    helper = _MOVES.replace("t = t.float().cuda()", "t = t.float().cuda(); torch.cuda.mem_get_info()")
    path = _project(tmp_path, "import torch\n" + helper)
    out = run(_EVAL, path=path).new_source
    assert "torch.cuda.is_available()" in _code(out) and "TODO(tpu-migrate" in out


# --- held-out 10: LightningLite subclassed (co-tracker's training scripts) ----------------------------------------
def test_a_lightning_lite_subclass_built_for_gpus_is_flagged():
    src = (
        "import torch\nfrom pytorch_lightning.lite import LightningLite\n\n\nclass Lite(LightningLite):\n"
        "    def run(self, args):\n        model = torch.nn.Linear(2, 2).cuda()\n\n\n"
        'Lite(strategy="ddp", devices=1, accelerator="gpu", precision=32).run(None)\n'
    )
    res = run(src)
    assert "TPU911" in codes(res) and 'accelerator="gpu"' in res.new_source


# --- held-out 11: a device test in a function named for CUDA (MiniGPT-4's `cuda_enabled` property) -------------
def test_a_device_test_is_not_kept_for_its_own_functions_name():
    src = (
        "import torch\n\n\nclass Runner:\n    @property\n    def cuda_enabled(self):\n"
        '        return self.device.type == "cuda"\n'
    )
    out = _code(run(src).new_source)
    # the kept test left batches on the CPU (its callers move them with a helper the run sends to "tpu")
    assert 'self.device.type == "tpu"' in out


def test_cuda_state_read_in_the_function_still_keeps_the_test():
    src = (
        'import torch\n\n\ndef use_fused(x):\n    if x.device.type != "cuda":\n        return False\n'
        "    return torch.backends.cudnn.enabled\n"
    )
    out = _code(run(src).new_source)
    assert 'x.device.type != "cuda"' in out


# --- held-out 11: a device comparison stored in a flag that is also passed on (audiocraft's run_step) ------------
def test_a_flag_passed_to_a_method_still_follows_its_in_sight_uses():
    src = (
        "import torch\n\n\nclass Solver:\n    def run_step(self, idx, batch):\n"
        "        check = idx == 1 and self.device == 'cuda'\n        out = self.prepare(batch, check)\n"
        "        if check:\n            torch.cuda.set_sync_debug_mode('warn')\n        return out\n"
    )
    out = _code(run(src).new_source)
    # the wrong rewrite: the flag became true on TPU and step 1 called torch.cuda.set_sync_debug_mode (no CUDA)
    assert "self.device == 'cuda'" in out


def test_a_helper_in_a_file_left_as_written_is_not_portable(tmp_path):
    """A project file that imports a CUDA-only stack is left as written (its `.cuda()` stays CUDA's): a check
    calling its helper must stay CUDA's too, or on TPU the check sends the batch to a helper that calls CUDA."""
    path = _project(tmp_path, "import triton\n" + _MOVES)
    out = run(_EVAL, path=path).new_source
    assert "torch.cuda.is_available()" in _code(out) and "TODO(tpu-migrate" in out


# --- held-out 12 classes ----------------------------------------------------------------------------------------
def _migrate_tree(root) -> dict[str, str]:
    """Run the CLI over a whole project (as users do: the project's facts come from all its files)."""
    import subprocess
    import sys

    (root / "pyproject.toml").write_text("")
    proc = subprocess.run(
        [sys.executable, "-m", "tpu_workbench.migrate.cli", "--write", str(root)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    return {str(p.relative_to(root)): p.read_text() for p in root.rglob("*.py")}


def test_a_library_import_inside_a_subpackage_of_its_name_is_the_library(tmp_path):
    """PaLM-pytorch: ``import triton`` in palm_pytorch/triton/layernorm.py is the real triton (the folder is
    ``palm_pytorch.triton``); the file is left as written, and every file built on it says so (still migrated: it
    runs on TPU once the kernels are ported)."""
    pkg = tmp_path / "palm_pytorch" / "triton"
    pkg.mkdir(parents=True)
    (tmp_path / "palm_pytorch" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("from palm_pytorch.triton.palm import PaLM\n")
    (pkg / "palm.py").write_text("import torch\nfrom palm_pytorch.triton.layernorm import layernorm\n")
    (pkg / "layernorm.py").write_text(
        "import torch\nimport triton\ndef layernorm(x):\n    mean = torch.empty(3, device='cuda')\n    return mean\n"
    )
    (tmp_path / "train.py").write_text(
        "import torch\nfrom palm_pytorch.triton import PaLM\nmodel = PaLM()\nmodel.cuda()\n"
    )
    out = _migrate_tree(tmp_path)
    assert "device='cuda'" in out["palm_pytorch/triton/layernorm.py"]
    assert 'model.to("tpu")' in out["train.py"] and "built on `triton`" in out["train.py"]
    assert "TPU211" in out["palm_pytorch/triton/palm.py"]


def test_a_rank_within_the_host_from_the_device_count_keeps_the_count():
    """VAR's dist.py: ``local_rank = RANK % device_count()`` later decides the host's first process; with one
    device per process every process would be first (all write the same checkpoint)."""
    src = (
        "import os, torch\n__local_rank = 0\ndef init():\n    global __local_rank\n"
        "    global_rank, num_gpus = int(os.environ['RANK']), torch.cuda.device_count()\n"
        "    local_rank = global_rank % num_gpus\n    __local_rank = local_rank\n"
        "def is_local_master():\n    return __local_rank == 0\n"
    )
    res = run(src)
    assert "torch.cuda.device_count()" in res.new_source and "LOCAL_RANK" in res.new_source


def test_a_rank_used_only_as_a_device_ordinal_still_migrates():
    src = "import torch\ndef main(args):\n    args.gpu = args.rank % torch.cuda.device_count()\n    model.cuda(args.gpu)\n"
    assert "torch.accelerator.device_count()" in run(src).new_source


def test_setting_cuda_visible_devices_does_not_keep_the_branch_that_picks_the_device():
    """Time-Series-Library's _acquire_device: the branch that sets CUDA_VISIBLE_DEVICES also picks the device;
    kept as CUDA's, every model ran on the CPU while its --gpu_type default said 'tpu'."""
    src = (
        "import os, torch\nclass E:\n    def dev(self):\n"
        "        if self.args.use_gpu and self.args.gpu_type == 'cuda':\n"
        "            os.environ['CUDA_VISIBLE_DEVICES'] = str(self.args.gpu)\n"
        "            device = torch.device('cuda:{}'.format(self.args.gpu))\n"
        "        else:\n            device = torch.device('cpu')\n        return device\n"
    )
    out = run(src).new_source
    assert "gpu_type == 'tpu'" in out and "torch.device('tpu')" in out and "TPU209" in out


def test_a_tensor_move_agrees_with_a_kept_check_that_places_the_model():
    """moco-v3's main_lincls: the placement check stays CUDA's (its DataParallel branch), so on a TPU host the
    model stays on the CPU; its twin that moves the targets must not send them to 'tpu'."""
    src = (
        "import torch\ndef main_worker(gpu, args):\n    if not torch.cuda.is_available():\n"
        "        print('using CPU')\n    elif args.gpu is not None:\n        model = model.cuda(args.gpu)\n"
        "    else:\n        model = torch.nn.DataParallel(model).cuda()\n\n"
        "def train(loader, model, args):\n    for images, target in loader:\n"
        "        if torch.cuda.is_available():\n            target = target.cuda(args.gpu, non_blocking=True)\n"
    )
    out = run(src).new_source
    assert "torch.accelerator" not in out and "target.cuda(args.gpu" in out, out


def test_sync_batchnorm_is_flagged():
    src = "import torch.nn as nn\nmodel = nn.SyncBatchNorm.convert_sync_batchnorm(model)\n"
    res = run(src)
    assert codes(res) == ["TPU408"] and "convert_sync_batchnorm(model)" in res.new_source


_WAVELET = (
    "import torch\nimport torch.nn as nn\nimport numpy as np\nimport pywt\nfrom torch.autograd import Function\n\n"
    "class Decomposition(nn.Module):\n    def __init__(self, device):\n        super().__init__()\n"
    "        self.device = device\n"
    "        self.dwt = DWT(wave='db4').cuda() if self.device.type == 'cuda' else DWT(wave='db4')\n\n"
    "class DWT(nn.Module):\n    def __init__(self, wave):\n        super().__init__()\n"
    "        h0 = np.array(pywt.Wavelet(wave).dec_lo)\n        self.register_buffer('h0', torch.tensor(h0))\n"
    "    def forward(self, x):\n        return AFB.apply(x, self.h0)\n\n"
    "class AFB(Function):\n    @staticmethod\n    def forward(ctx, x, h0):\n"
    "        with torch.cuda.amp.autocast():\n            return torch.nn.functional.conv1d(x, h0)\n"
)


def test_a_check_choosing_between_two_builds_of_a_portable_project_class_is_migrated():
    """Time-Series-Library's DWT_Decomposition: `DWT1DForward(...).cuda() if device.type == 'cuda' else
    DWT1DForward(...)`; the class is the file's own plain-torch module. Kept as CUDA's, its buffers stayed on the
    CPU while the dummy input went to 'tpu'."""
    out = run(_WAVELET).new_source
    assert "self.device.type == 'tpu'" in out and "DWT(wave='db4').to(\"tpu\")" in out, out


@pytest.mark.parametrize(
    "body", ["torch.cuda.mem_get_info()", "fused_cuda_kernel(x)", "self.ext.cuda_fwd(x)"]
)
def test_a_project_class_that_may_run_cuda_code_keeps_the_check(body):
    src = _WAVELET.replace(
        "        return AFB.apply(x, self.h0)", f"        {body}\n        return AFB.apply(x, self.h0)"
    )
    out = run(src).new_source
    assert "self.device.type == 'cuda'" in out and "TODO(tpu-migrate" in out, out


def test_a_helper_comes_before_the_cell_that_calls_a_function_using_it():
    """stable-diffusion's latent_imagenet_diffusion.ipynb: cell 8 defines load_model_from_config (torch.load
    inside), cell 9 calls it, cell 11 imports numpy; the helper went after cell 11's imports: NameError in cell 9."""
    import json

    from tpu_workbench.migrate.notebook import migrate_notebook

    cells = [
        "import torch\ndef load(ckpt):\n    return torch.load(ckpt)\n",
        "sd = load('model.ckpt')\n",
        "import numpy as np\nx = np.zeros(3)\n",
    ]
    nb = {
        "cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "source": c} for c in cells],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    out = json.loads(migrate_notebook(json.dumps(nb)).new_source)
    first = "".join(out["cells"][0]["source"])
    assert "def _tpu_restore_location" in first and "map_location=_tpu_restore_location" in first, first


def test_the_restore_helper_works_in_a_file_that_imports_torch_only_inside_functions():
    """FastChat's fastchat/utils.py imports torch inside clean_flant5_ckpt only: the module-level helper must
    not need a module-level torch."""
    src = (
        "import os\n\ndef gpus():\n    import torch\n    return torch.cuda.device_count()\n\n"
        "def clean(p):\n    import torch\n    return torch.load(p)\n"
    )
    out = run(src).new_source
    assert "map_location=_tpu_restore_location" in out, out
    helper = out.split("def gpus")[0]
    scope: dict = {}
    exec(helper, scope)  # (no torch in scope: the helper imports it)
    assert "import torch" not in out.split("def _tpu_restore_location")[0]
    assert scope["_tpu_restore_location"](None, "cpu") is None


def test_a_helper_in_a_crlf_file_keeps_crlf():
    out = run("import torch\r\nmodel.cuda()\r\nck = torch.load(p)\r\n").new_source
    assert out.count("\n") == out.count("\r\n")


def test_a_device_choice_agrees_with_a_cuda_tensor_type():
    """PyTorch-GAN's esrgan: `Tensor = torch.cuda.FloatTensor if torch.cuda.is_available() else torch.Tensor` was
    kept (batches built with it stayed on the CPU of a TPU host) while `device = torch.device("cuda" if ...)` sent
    the models to 'tpu'. Since held-out 20 the cast `imgs.type(Tensor)` is migrated with its type (a cast to its
    dtype on 'tpu'), so both checks follow the TPU together."""
    src = (
        "import torch\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
        "generator = Generator().to(device)\n"
        "Tensor = torch.cuda.FloatTensor if torch.cuda.is_available() else torch.Tensor\n"
        "imgs_lr = imgs.type(Tensor)\nout = generator(imgs_lr)\n"
    )
    out = run(src).new_source
    assert "device = torch.device('tpu' if torch.accelerator.is_available() else 'cpu')" in out, out
    assert "Tensor = _tpu_tensor_type(torch.FloatTensor) if torch.accelerator.is_available()" in out
    assert "imgs_lr = _tpu_as_type(imgs, Tensor)" in out


def test_a_kept_check_whose_branches_follow_a_device_variable_does_not_keep_its_twin():
    """tianshou's test_ppo_discrete: `if torch.cuda.is_available(): DataParallelNet(...).to(args.device)` is kept
    (DataParallel), but both branches follow args.device: the `--device` default still migrates."""
    src = (
        "import argparse, torch\np = argparse.ArgumentParser()\n"
        "p.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')\nargs = p.parse_args()\n"
        "if torch.cuda.is_available():\n    actor = DataParallelNet(Actor()).to(args.device)\n"
        "else:\n    actor = Actor().to(args.device)\n"
    )
    out = run(src).new_source
    assert "'tpu' if torch.accelerator.is_available()" in out, out


def test_a_rank_from_the_device_count_checked_against_local_rank_keeps_the_count():
    """Megatron-DeepSpeed's initialize: `device = args.rank % device_count; assert args.local_rank == device`: with
    one device per process every rank but the host's first would fail the assertion."""
    src = (
        "import torch\ndef init(args):\n    device_count = torch.cuda.device_count()\n"
        "    if device_count > 0:\n        device = args.rank % device_count\n"
        "        assert args.local_rank == device\n"
    )
    assert "device_count = torch.cuda.device_count()" in run(src).new_source
