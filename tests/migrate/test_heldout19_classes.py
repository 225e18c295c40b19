"""Wrong rewrites found by the first reading of held-out check 19 (benchmarks/migrate_corpus_heldout19.txt), each
as a class in its own words, each asserting the rewrite it must not make."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from migrate_helpers import run, run_without_torchtpu


# --- pytorch-deep-learning: a lone `torch.cuda.manual_seed(42)` became `torch.tpu.manual_seed(42)`, which raises
# AttributeError wherever TorchTPU is not loaded (CUDA's call is a no-op there) ---
@pytest.mark.parametrize("call", ["manual_seed", "manual_seed_all"])
def test_a_lone_device_seed_runs_where_torchtpu_is_not_loaded(tmp_path, call):
    src = f"import torch\n\ntorch.manual_seed(0)\nx = torch.rand(1)\ntorch.cuda.{call}(42)\nprint(torch.rand(1).item())\n"
    out = run(src).new_source
    assert f"_tpu_random().{call}(42)" in out and "torch.tpu" not in out.split("def _tpu_random")[0]
    proc = run_without_torchtpu(tmp_path, out)
    assert proc.returncode == 0, proc.stderr[-1500:]
    # the CPU stream is not reseeded: the same draw as the original's
    assert proc.stdout == run_without_torchtpu(tmp_path, src).stdout


def test_the_seed_helper_seeds_the_tpu_where_torchtpu_is_loaded():
    out = run("import torch\n\ntorch.cuda.manual_seed(7)\n").new_source
    scope: dict = {}
    exec(compile(out, "m.py", "exec"), scope)
    a = torch.rand(3, device="tpu").cpu()
    scope["_tpu_random"]().manual_seed(7)
    assert torch.equal(torch.rand(3, device="tpu").cpu(), a)


# --- LTSF-Linear's Pyraformer: `import tvm` inside the function that compiles a kernel for `target=device`, after
# `assert device in ['cpu', 'cuda']`: 'cuda' there is TVM's target, never torch's device ---
def test_device_strings_in_a_function_importing_a_cpu_or_cuda_only_library_are_kept():
    src = (
        "import torch\n\n\ndef compile_kernel(device):\n    import tvm\n    from tvm.contrib import nvcc\n\n"
        "    assert device in ['cpu', 'cuda']\n    return tvm.build(None, target=device)\n\n\n"
        "def f(x):\n    return x.to('cuda')\n"
    )
    res = run(src)
    assert "assert device in ['cpu', 'cuda']" in res.new_source
    # rl_games' warp env (held-out 14, re-read): f"cuda:{local_rank}" in the function that imports warp
    per_rank = (
        "import os\n\n\ndef make(rank):\n    import warp\n\n    return warp.Env(device=f'cuda:{rank}')\n"
    )
    assert "f'cuda:{rank}'" in run(per_rank).new_source
    assert "x.to('tpu')" in res.new_source  # (the rest of the file is migrated)
    assert res.new_source.count("TPU211") == 1  # (one TODO for the package in the file)
    twice = src + "\n\ndef load(path):\n    import tvm\n    return tvm.runtime.load_module(path)\n"
    assert run(twice).new_source.count("TPU211") == 1


# --- rainbow-is-all-you-need (marimo notebooks): `torch` is a cell function's parameter, so its check was not
# recognised and stayed CUDA's while the 'cuda' it chooses was renamed: 'tpu' on a CUDA host, the CPU on a TPU ---
def test_a_device_chosen_by_a_check_on_an_unimported_torch_is_kept_with_it():
    src = (
        "import marimo\n\napp = marimo.App()\n\n\n@app.cell\ndef _():\n    import torch\n    return (torch,)\n\n\n"
        "@app.cell\ndef _(torch):\n    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
        "    return (device,)\n"
    )
    out = run(src).new_source
    assert "torch.device('cuda' if torch.cuda.is_available() else 'cpu')" in out
    assert out.count("TODO(tpu-migrate") == 1 and "whose name this file does not import" in out


def test_a_check_on_the_imported_torch_still_migrates_its_choice():
    out = run(
        "import torch\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
    ).new_source
    assert "torch.device('tpu' if torch.accelerator.is_available() else 'cpu')" in out


# --- LTSF-Linear: CUDA's float16 autocast became bfloat16 and `outputs.detach().cpu().numpy()` after it raised
# TypeError (NumPy has no bfloat16) where the fp16 run worked ---
_AMP_TEST = (
    "import torch\n\n\ndef predict(model, x):\n    with torch.cuda.amp.autocast():\n        outputs = model(x)\n"
    "        idx = outputs.argmax(-1)\n    pred = outputs.detach().cpu().numpy()\n    return pred, idx.cpu().numpy()\n"
)


def test_numpy_of_an_autocast_output_made_bfloat16_is_cast_to_float_first():
    out = run(_AMP_TEST).new_source
    assert "pred = outputs.detach().cpu().float().numpy()" in out
    assert "idx.cpu().numpy()" in out  # (indices keep their dtype)
    assert run(out).new_source == out  # (a fixed point)
    scope: dict = {}
    exec(compile(out, "m.py", "exec"), scope)
    model = torch.nn.Linear(4, 3).to("tpu")
    pred, idx = scope["predict"](model, torch.randn(2, 4, device="tpu"))
    assert pred.dtype.name == "float32" and idx.dtype.name == "int64"


def test_numpy_outside_an_autocast_block_is_left_alone():
    src = "import torch\n\n\ndef f(model, x):\n    y = model(x)\n    return y.detach().cpu().numpy()\n"
    assert run(src).new_source == src


# --- ECCV2022-RIFE: `if torch.cuda.is_available(): ... torch.set_default_tensor_type(torch.cuda.HalfTensor)` was a
# finding, so the check and its twin device choice were kept on CUDA while the model modules moved to 'tpu' ---
def test_a_half_default_tensor_type_becomes_the_default_device_and_dtype():
    src = (
        "import torch\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
        "if torch.cuda.is_available():\n    if fp16:\n        torch.set_default_tensor_type(torch.cuda.HalfTensor)\n"
    )
    out = run(src).new_source
    assert "torch.device('tpu' if torch.accelerator.is_available() else 'cpu')" in out
    assert "        torch.set_default_device('tpu')\n        torch.set_default_dtype(torch.float16)\n" in out
    assert "TODO" not in out and run(out).new_source == out


# --- pygcn: `adj, features, ... = load_data()` (load_data builds adj with torch.sparse.FloatTensor in utils.py),
# then `adj = adj.cuda()` became `adj.to("tpu")`: TorchTPU has no sparse tensors ---
def test_a_sparse_tensor_from_a_project_loader_is_not_moved_silently(tmp_path):
    from test_heldout9_classes import _migrate_tree

    (tmp_path / "utils.py").write_text(
        "import torch\n\n\ndef to_sparse(m):\n    return torch.sparse.FloatTensor(m.i, m.v, m.shape)\n\n\n"
        "def load_data():\n    adj = to_sparse(raw())\n    features = torch.ones(3, 2)\n    return adj, features\n"
    )
    (tmp_path / "train.py").write_text(
        "import torch\nfrom utils import load_data\n\nadj, features = load_data()\n"
        "adj = adj.cuda()\nfeatures = features.cuda()\n"
    )
    out = _migrate_tree(tmp_path)["train.py"]
    assert "TODO(tpu-migrate TPU110): `adj` is a sparse tensor (from `load_data(...)`)" in out
    assert 'features = features.to("tpu")' in out and out.count("TPU110") == 1


# --- pytorch-deep-learning's 08 notebook (cells written with CRLF): every line of a changed cell came back with LF,
# so unchanged lines showed in the diff and the file mixed line endings ---
def test_a_notebook_cell_written_with_crlf_keeps_crlf(tmp_path):
    import json

    cell = [
        "import torch\r\n",
        "x = 1\r\n",
        "device = 'cuda' if torch.cuda.is_available() else 'cpu'\r\n",
        "y = 2",
    ]
    nb = {
        "cells": [
            {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": cell}
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path = tmp_path / "n.ipynb"
    path.write_text(json.dumps(nb, indent=1))
    proc = subprocess.run(
        [sys.executable, "-m", "tpu_workbench.migrate.cli", "--write", str(path)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode in (0, 1), proc.stderr[-1500:]
    source = json.loads(path.read_text())["cells"][0]["source"]
    assert source[:2] == cell[:2] and source[3] == cell[3]
    assert source[2] == "device = 'tpu' if torch.accelerator.is_available() else 'cpu'\r\n"


# --- pytorch-deep-learning's TF32 cell: `if GPU_SCORE >= (8, 0):` with GPU_SCORE from get_device_capability() in an
# earlier cell (kept as CUDA's): its branches were rewritten and the gate said nothing ---
def test_a_gate_on_a_saved_compute_capability_is_flagged():
    src = (
        "import torch\nif torch.cuda.is_available():\n    GPU_SCORE = torch.cuda.get_device_capability()\n"
        "if GPU_SCORE >= (8, 0):\n    torch.backends.cuda.matmul.allow_tf32 = True\n"
    )
    out = run(src).new_source
    assert "TODO(tpu-migrate TPU205): `GPU_SCORE` is CUDA's compute capability" in out
    assert run(out).new_source == out
    unrelated = "import torch\nscore = (9, 0)\nif score >= (8, 0):\n    x = 1\n"
    assert run(unrelated).new_source == unrelated


# --- peft (held-out 15, re-read): `get_delta_weight` is sparse in one tuner and dense in the others, and TPU110
# flagged every `delta_weight.to(orig_dtype)`: only a function defined once, at module level, tells, and a cast
# that names no device moves nothing ---
def test_a_method_name_shared_by_dense_and_sparse_definitions_taints_nothing(tmp_path):
    from test_heldout9_classes import _migrate_tree

    (tmp_path / "shira.py").write_text(
        "import torch\n\n\nclass Shira:\n    def get_delta_weight(self):\n"
        "        return torch.sparse_coo_tensor(self.i, self.v, self.shape)\n"
    )
    (tmp_path / "lora.py").write_text(
        "import torch\n\n\nclass Lora:\n    def get_delta_weight(self):\n        return self.b @ self.a\n\n"
        "    def merge(self, w):\n        delta_weight = self.get_delta_weight()\n"
        "        return w + delta_weight.to(w.dtype).cuda()\n"
    )
    out = _migrate_tree(tmp_path)["lora.py"]
    assert "TPU110" not in out


def test_a_dtype_cast_of_a_sparse_tensor_is_not_a_move():
    src = "import torch\n\nadj = torch.sparse_coo_tensor(i, v, (n, n))\nadj = adj.to(torch.float16)\nadj = adj.cuda()\n"
    out = run(src).new_source
    assert out.count("TPU110") == 1 and "adj = adj.to(torch.float16)" in out
