"""Wrong rewrites found by reading every changed hunk of held-out check 5 (benchmarks/migrate_corpus_heldout5.txt).

Each test asserts the rewrite the tool must not make; both failed before migrate/flow.py followed a
``True if check else False`` flag and kept a comparison whose value reaches a library that is not torch."""

from __future__ import annotations

import ast

import pytest
from migrate_helpers import run


def _code(out: str) -> str:
    """The program without comments (a TODO may quote the rewrite it did not make)."""
    return "\n".join(line for line in out.splitlines() if not line.lstrip().startswith("#"))


# --- a flag variable `cuda = True if torch.cuda.is_available() else False` that also picks a CUDA tensor type
# (PyTorch-GAN: `Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor`): rewriting the check turns
# the flag on under TPU while the tensor type stays CUDA's (flagged only): a crash where the old code ran on CPU.
_FLAG_SRC = (
    "import torch\n\n"
    "cuda = {flag}\n"
    "model = torch.nn.Linear(2, 2)\n"
    "if cuda:\n    model.cuda()\n"
    "Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor\n"
    "x = Tensor(2, 2)\n"
)


@pytest.mark.parametrize(
    "flag", ["torch.cuda.is_available()", "True if torch.cuda.is_available() else False"]
)
def test_a_flag_that_also_picks_a_cuda_tensor_type_only_called_migrates_both(flag):
    """The type is only ever called (a constructor): since held-out 18 it builds the CPU type's tensor and moves
    it to 'tpu', so the flag, the model and the tensors all follow the same check."""
    out = _code(run(_FLAG_SRC.format(flag=flag)).new_source)
    ast.parse(out)
    assert "torch.accelerator.is_available" in out
    assert "Tensor = _tpu_tensor_type(torch.FloatTensor) if cuda else torch.FloatTensor" in out


@pytest.mark.parametrize(
    "flag", ["torch.cuda.is_available()", "True if torch.cuda.is_available() else False"]
)
def test_a_flag_that_also_picks_a_cuda_tensor_type_cast_to_migrates_both(flag):
    # PyTorch-GAN: `imgs.type(Tensor)` was a type use (the check stayed CUDA's); since held-out 20 a cast to the
    # type's dtype on 'tpu' (_tpu_as_type), so the flag and the type follow the TPU together
    out = _code(run(_FLAG_SRC.format(flag=flag) + "y = x.type(Tensor)\n").new_source)
    ast.parse(out)
    assert "torch.accelerator.is_available" in out
    assert "Tensor = _tpu_tensor_type(torch.FloatTensor) if cuda else torch.FloatTensor" in out
    assert "y = _tpu_as_type(x, Tensor)" in out


@pytest.mark.parametrize(
    "flag", ["torch.cuda.is_available()", "True if torch.cuda.is_available() else False"]
)
def test_a_flag_that_also_picks_a_cuda_tensor_type_used_as_a_type_keeps_the_cuda_check(flag):
    # `isinstance(x, Tensor)`: a type use, which no 'tpu' tensor type can stand for: the check stays
    out = run(_FLAG_SRC.format(flag=flag) + "y = isinstance(x, Tensor)\n").new_source
    ast.parse(out)
    assert "torch.accelerator.is_available" not in _code(out)  # the wrong rewrite: flag on, tensor type CUDA


# --- a device-string test whose bool is another library's GPU switch (simpletransformers: faiss.Kmeans(gpu=)) ---
def test_a_device_string_test_feeding_another_librarys_gpu_switch_is_kept():
    src = (
        "import faiss\nimport torch\n\n"
        "def cluster(x, device, d, k):\n"
        '    use_cuda = True if "cuda" in str(device) else False\n'
        "    kmeans = faiss.Kmeans(d, k, gpu=use_cuda)\n"
        "    kmeans.train(x.to(device).cpu().numpy())\n"
        "    return kmeans\n"
    )
    out = run(src).new_source
    ast.parse(out)
    assert '"tpu" in str(device)' not in _code(out)  # the wrong rewrite: faiss asked for a GPU on a TPU host


def test_a_device_string_test_feeding_a_library_imported_elsewhere_is_kept():
    """simpletransformers imports faiss inside another function: the callee's name is bound nowhere the call
    can see, so it is not code this file shows (as an imported library, the test stays and is flagged)."""
    src = (
        "import torch\n\n"
        "def index():\n    import faiss\n    return faiss\n\n"
        "def cluster(x, device, d, k):\n"
        '    use_cuda = True if "cuda" in str(device) else False\n'
        "    kmeans = faiss.Kmeans(d, k, gpu=use_cuda)\n"
        "    return kmeans\n"
    )
    res = run(src)
    assert '"tpu" in str(device)' not in _code(res.new_source)
    assert any(d.code == "TPU102" and "faiss.Kmeans" in d.message for d in res.diagnostics)


def test_a_device_string_test_feeding_a_local_helper_is_still_migrated():
    """The other side: a function of the same file is code the flow can see, so the comparison is renamed."""
    src = (
        "import torch\n\n"
        "def place(model, on_gpu):\n    return model.to('cuda' if on_gpu else 'cpu')\n\n"
        "def build(model, device):\n"
        '    on_gpu = "cuda" in str(device)\n'
        "    return place(model, on_gpu)\n"
    )
    assert '"tpu" in str(device)' in run(src).new_source


# --- waveglow: `spect.type() == 'torch.cuda.HalfTensor'` chooses the fp16 path; on "tpu" it is silently false ---
@pytest.mark.parametrize(
    "line",
    [
        'x = spect.type("torch.cuda.FloatTensor")',
        "kinds = {'torch.cuda.LongTensor': 'int64'}",
    ],
)
def test_a_cuda_tensor_type_named_as_text_is_flagged(line: str):
    res = run(f"import torch\n\n{line}\n")
    assert [d.code for d in res.diagnostics] == ["TPU208"]
    assert line in res.new_source  # flagged, never rewritten


def test_a_cuda_tensor_type_compared_with_x_type_names_the_tpu_type():
    # (since the held-out 13-17 re-read: flagged alone, it stayed false beside constructors rewritten to 'tpu')
    res = run("import torch\n\nhalf = spect.type() == 'torch.cuda.HalfTensor'\n")
    assert "half = spect.type() == 'torch.tpu.HalfTensor'" in res.new_source


def test_other_text_that_mentions_torch_cuda_is_not_a_type_name():
    res = run("import torch\n\nmsg = 'torch.cuda.is_available() is False'\n")
    assert not [d for d in res.diagnostics if d.code == "TPU208"]
