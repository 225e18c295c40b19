"""Wrong rewrites found by reading every changed hunk of held-out check 9 (benchmarks/migrate_corpus_heldout9.txt),
each as a class in its own words, each asserting the rewrite it must not make (or the one it must not miss)."""

from __future__ import annotations

import pytest
from migrate_helpers import run


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
