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
        "x = torch.cuda.memory_allocated()",  # a torch.cuda API the rules do not migrate
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
    helper = _MOVES.replace(
        "t = t.float().cuda()", "t = t.float().cuda(); torch.cuda.current_stream().synchronize()"
    )
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
