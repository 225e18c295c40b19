"""Rewrites that were right but ugly (issue 31 reading): a second ``import torch`` beside ``import torch as th``,
and ``autocast(enabled=False)`` gaining a compute dtype it never uses."""

from __future__ import annotations

import pytest
from migrate_helpers import run


@pytest.mark.parametrize(
    "src",
    [
        "import torch as th\nfrom torch.cuda.amp import autocast\nwith autocast():\n    y = 1\n",
        'import torch as th\n\ndef dev():\n    """Pick the torch device."""\n    if th.cuda.is_available():\n'
        '        return th.device("cuda")\n    return th.device("cpu")\n',
        "import torch as th\nimport torch.distributed as dist\nbackend = 'gloo' if not th.cuda.is_available() "
        "else 'nccl'\ndist.init_process_group(backend)\n",
    ],
    ids=["amp-import", "docstring-says-torch", "distributed"],
)
def test_a_file_that_aliases_torch_keeps_its_alias(src):
    out = run(src).new_source
    assert "import torch\n" not in out  # the wrong-looking rewrite: a second import under the full name
    assert "torch." not in out.replace("import torch", "").replace("torch device", "").replace("th.", "")
    assert "th." in out


def test_an_unaliased_torch_name_in_the_file_keeps_the_import():
    src = "import torch as th\nimport torch.nn\nwith th.cuda.amp.autocast():\n    m = torch.nn.Linear(2, 2)\n"
    out = run(src).new_source
    assert "torch.nn.Linear" in out  # (the file already names torch itself: nothing renamed)


@pytest.mark.parametrize(
    "call",
    [
        "torch.cuda.amp.autocast(enabled=False)",
        "torch.cuda.amp.autocast(False)",
        "torch.cuda.amp.autocast(enabled=False, cache_enabled=True)",
    ],
)
def test_a_disabled_autocast_gains_no_dtype(call):
    out = run(f"import torch\nwith {call}:\n    y = f(x)\n").new_source
    assert 'torch.autocast("tpu"' in out and "enabled=False" in out or 'torch.autocast("tpu", False' in out
    assert "dtype" not in out


def test_an_enabled_fp16_autocast_still_becomes_bf16():
    out = run("import torch\nwith torch.cuda.amp.autocast(enabled=use_amp):\n    y = 1\n").new_source
    assert "dtype=torch.bfloat16" in out
