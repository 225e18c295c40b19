"""Wrong rewrites and broken fixed points found on held-out check 23 (benchmarks/migrate_corpus_heldout23.txt), each
as a class in its own words, each asserting what the tool must (not) do."""

from __future__ import annotations

import subprocess
import sys

import pytest
from migrate_helpers import run


def _write_twice(root) -> tuple[dict[str, str], dict[str, str]]:
    """Each .py file of ``root`` after one ``--write`` and after a second one."""
    cli = [sys.executable, "-m", "tpu_workbench.migrate.cli", "--write", "-q", str(root)]
    texts = []
    for _ in range(2):
        subprocess.run(cli, capture_output=True, text=True, timeout=300, check=False)
        texts.append({str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*.py"))})
    return texts[0], texts[1]


# --- gpytorch's tests: `if not torch.cuda.is_available(): return` then `with least_used_cuda_device():`, a project
# helper whose only CUDA call is `with torch.cuda.device(i): yield`. The first run kept the check (the helper
# "calls CUDA-only code") and unwrapped the helper's `with`; the second run saw a portable helper and renamed the
# check: one run was not a fixed point ---
HELPER = {
    "unwrapped": "    with torch.cuda.device(i):\n        yield\n",
    "tensor-device-in-a-loop": "    for t in ts:\n        with torch.cuda.device(t.device):\n            yield\n",
}


@pytest.mark.parametrize("body", sorted(HELPER))
def test_a_helper_whose_device_block_the_run_unwraps_is_not_cuda_only(tmp_path, body):
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "setup.py").write_text("")
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "utils.py").write_text(
        "import contextlib\nimport torch\n\n\n@contextlib.contextmanager\ndef pick(i=0, ts=()):\n"
        + HELPER[body]
    )
    (root / "pkg" / "test_x.py").write_text(
        "import torch\nfrom pkg.utils import pick\n\n\ndef test_x():\n    if not torch.cuda.is_available():\n"
        "        return\n    with pick():\n        x = torch.ones(2).cuda()\n"
    )
    first, second = _write_twice(root)
    assert first == second
    assert "torch.accelerator.is_available()" in first["pkg/test_x.py"]


def test_a_helper_visiting_devices_in_a_loop_stays_cuda_only_on_both_runs(tmp_path):
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "setup.py").write_text("")
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "utils.py").write_text(
        "import torch\n\n\ndef each():\n    for i in range(4):\n        with torch.cuda.device(i):\n"
        "            torch.ones(1)\n"
    )
    (root / "pkg" / "run.py").write_text(
        "import torch\nfrom pkg.utils import each\n\nif torch.cuda.is_available():\n    each()\n"
    )
    first, second = _write_twice(root)
    assert first == second
    assert "torch.cuda.is_available()" in first["pkg/run.py"]


# --- habitat-lab's inference worker: `if self.device.type == "cuda": torch.cuda.set_device(...)` in a function that
# also sets `torch.backends.cudnn.enabled = True`. The first run kept the test ("reads CUDA-only state `cudnn`") and
# deleted the cudnn lines; the second found no CUDA state and deleted the test: not a fixed point ---
@pytest.mark.parametrize(
    "switch",
    [
        "torch.backends.cudnn.enabled = True",
        "torch.backends.cudnn.benchmark = False",
        "torch.backends.cuda.matmul.allow_tf32 = True",
    ],
)
def test_a_cuda_switch_the_run_removes_does_not_keep_a_device_test(switch):
    src = (
        "import torch\n\n\nclass W:\n    def setup(self):\n        if self.device.type == 'cuda':\n"
        f"            torch.cuda.synchronize(self.device)\n        {switch}\n"
    )
    once = run(src).new_source
    assert "self.device.type == 'tpu'" in once
    assert run(once).new_source == once


def test_a_cuda_switch_the_code_reads_still_marks_a_cuda_path():
    src = (
        "import torch\n\n\ndef f(x):\n    if x.device.type != 'cuda':\n        return False\n"
        "    return torch.backends.cudnn.enabled\n"
    )
    assert "!= 'cuda'" in run(src).new_source
