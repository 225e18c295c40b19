"""Meanings set in another file of the project (migrate.project), from held-out check 8: nanotron's timer enum
and Megatron-DeepSpeed's test gates. Each test states the wrong rewrite it must not make."""

from __future__ import annotations

import keyword
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tpu_workbench.migrate import migrate_paths
from tpu_workbench.migrate.project import scan_texts, with_project

_TIMERS = (
    "from enum import Enum\n"
    "from typing import Union\n\n"
    "class TimerType(Enum):\n"
    '    CPU = "cpu"\n'
    '    CUDA = "cuda"\n\n'
    "class Timers:\n"
    "    def __call__(self, name, timer_type: Union[TimerType, str] = TimerType.CUDA, sync=True):\n"
    "        return TimerType(timer_type)\n\n"
    "timer = Timers()\n\n"
    "def timed(name, kind=TimerType.CUDA):\n"
    "    return TimerType(kind)\n"
)
_TRAINER = (
    "import torch\n"
    "from pkg.timers import timer, timed\n\n"
    "def step(model):\n"
    '    timer("iteration", "cuda", sync=False).start()\n'
    '    timer("x", timer_type="cuda")\n'
    '    timed("y", "cuda")\n'
    '    model.to("cuda")\n'
    '    return torch.zeros(2, device="cuda")\n'
)


def _tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def _diff(root: Path, *paths: str) -> str:
    res = migrate_paths([str(root / p) for p in paths] or [str(root)], jobs=1)
    return "".join(f.diff for f in res.files)


def test_enum_value_passed_to_a_project_function_is_kept(tmp_path: Path) -> None:
    """Renamed, ``TimerType("tpu")`` raised ValueError on nanotron's first training step (7 hunks)."""
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/timers.py": _TIMERS, "trainer.py": _TRAINER})
    diff = _diff(tmp_path)
    assert '-    timer("iteration", "cuda"' not in diff
    assert '-    timer("x", timer_type="cuda")' not in diff
    assert '-    timed("y", "cuda")' not in diff
    assert "passed as `timer_type` of `timer`" in diff and "passed as `kind` of `timed`" in diff
    assert '+    model.to("tpu")' in diff and '+    return torch.zeros(2, device="tpu")' in diff


def test_one_file_alone_reads_its_project(tmp_path: Path) -> None:
    """``tpu-migrate trainer.py`` (pre-commit hands over single files) must answer as for the whole tree."""
    _tree(
        tmp_path,
        {"pyproject.toml": "", "pkg/__init__.py": "", "pkg/timers.py": _TIMERS, "trainer.py": _TRAINER},
    )
    assert '-    timed("y", "cuda")' not in _diff(tmp_path, "trainer.py")
    assert str(tmp_path / "pkg" / "timers.py") in with_project([str(tmp_path / "trainer.py")])


def test_without_the_enum_the_string_is_a_device(tmp_path: Path) -> None:
    """The same call with a parameter that takes no enum: the device string is migrated."""
    plain = _TIMERS.replace("timer_type: Union[TimerType, str] = TimerType.CUDA", "timer_type='cpu'")
    plain = plain.replace("kind=TimerType.CUDA", "kind=None")
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/timers.py": plain, "trainer.py": _TRAINER})
    diff = _diff(tmp_path)
    assert '+    timed("y", "tpu")' in diff and '+    timer("x", timer_type="tpu")' in diff


def test_method_calls_on_other_objects_are_not_matched(tmp_path: Path) -> None:
    """A project method ``to(self, kind: Backend)`` must not freeze every ``model.to("cuda")``."""
    backend = (
        "from enum import Enum\n\nclass Backend(Enum):\n    CUDA = 'cuda'\n\n"
        "class Box:\n    def to(self, kind: Backend):\n        return kind\n"
    )
    _tree(tmp_path, {"box.py": backend, "train.py": "import torch\n\ndef f(m):\n    m.to('cuda')\n"})
    assert "+    m.to('tpu')" in _diff(tmp_path)


_GATES = (
    "import unittest\nimport torch\n\n"
    'torch_device = "cuda" if torch.cuda.is_available() else "cpu"\n\n\n'
    "def require_torch_gpu(test_case):\n"
    '    if torch_device != "cuda":\n'
    '        return unittest.skip("test requires CUDA")(test_case)\n'
    "    return test_case\n\n\n"
    "def require_torch_bf16(test_case):\n"
    "    if not is_bf16_ok():\n"
    '        return unittest.skip("test requires CUDA hardware supporting bf16")(test_case)\n'
    "    return test_case\n\n\n"
    "def require_datasets(test_case):\n"
    "    if not has_datasets():\n"
    '        return unittest.skip("test requires datasets")(test_case)\n'
    "    return test_case\n"
)
_TEST = (
    "import unittest\nimport torch\n"
    "from pkg.testing_utils import require_torch_bf16, require_datasets\n\n"
    "class T(unittest.TestCase):\n"
    "    @require_torch_bf16\n"
    "    def test_fused(self):\n"
    "        x = torch.zeros(2).cuda()\n\n"
    "    @require_datasets\n"
    "    def test_plain(self):\n"
    "        y = torch.zeros(2).cuda()\n"
)


def test_a_project_gate_keeps_its_tests_cuda_tests(tmp_path: Path) -> None:
    """Megatron's ``@require_torch_bf16`` (another file; it skips unless CUDA bf16 hardware is there) gated
    fused-kernel tests whose tensors were moved to 'tpu': skipped on TPU, wrong device on CUDA."""
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/testing_utils.py": _GATES, "tests/test_m.py": _TEST})
    diff = _diff(tmp_path)
    assert "-        x = torch.zeros(2).cuda()" not in diff
    assert "`@require_torch_bf16` runs this test only where CUDA is" in diff
    assert '+        y = torch.zeros(2).to("tpu")' in diff  # a gate on something else changes nothing


def test_a_gate_helper_keeps_its_own_cuda_test(tmp_path: Path) -> None:
    """``if torch_device != "cuda": return unittest.skip("test requires CUDA")(t)``: renamed to 'tpu', the
    CUDA-only tests it gates would run on TPU."""
    _tree(tmp_path, {"testing_utils.py": _GATES})
    diff = _diff(tmp_path)
    assert '-    if torch_device != "cuda":' not in diff
    assert "'cuda' is tested by code that works only on CUDA" in diff


def test_conditional_device_tuple_follows_its_check(tmp_path: Path) -> None:
    """``(torch.device("cuda"),) * torch.cuda.is_available()``: the device was renamed while the check stayed
    CUDA's (shampoo's tests): TPU never tested, a CUDA host handed 'tpu' devices."""
    src = (
        "import torch\n\n"
        'devices = (torch.device("cpu"),) + (torch.device("cuda"),) * torch.cuda.is_available()\n'
    )
    _tree(tmp_path, {"t.py": src})
    diff = _diff(tmp_path)
    # (built at import: torch.device("tpu") would fail every import where TorchTPU is not loaded)
    assert '+devices = (torch.device("cpu"),) + (_tpu_device(),) * torch.accelerator.is_available()' in diff


_NAME = st.from_regex(r"[a-z][a-z_]{0,10}", fullmatch=True).filter(
    lambda s: s not in ("self", "cls") and not keyword.iskeyword(s)  # (`def a(or: E = E.A)` is no Python)
)


@settings(max_examples=40, deadline=None)
@given(
    enum=st.from_regex(r"[A-Z][A-Za-z]{0,8}", fullmatch=True),
    func=_NAME,
    param=_NAME,
    position=st.integers(0, 3),
    value=st.sampled_from(["cuda", "gpu", "nccl", "xla", "cuda:0"]),
)
def test_scan_finds_the_parameter_at_its_position(enum, func, param, position, value) -> None:
    """Whatever the names and the position, the scan records the parameter that takes the enum."""
    before = [f"p{i}" for i in range(position)]
    if param in before:
        return
    text = (
        f"import enum\n\nclass {enum}(enum.Enum):\n    A = {value!r}\n\n"
        f"def {func}({', '.join([*before, f'{param}: {enum} = {enum}.A'])}):\n    return {param}\n"
    )
    facts = scan_texts([text])
    (p,) = facts.enum_params[func]
    assert (p.position, p.name, p.enum, value in p.values) == (position, param, enum, True)


@pytest.mark.slow
def test_facts_reach_worker_processes(tmp_path: Path) -> None:
    """The pooled path (workers, --jobs 2) reads the same facts as the in-process one."""
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/timers.py": _TIMERS, "trainer.py": _TRAINER})
    for i in range(12):  # enough files for the pool
        (tmp_path / f"m{i}.py").write_text("import torch\nx = torch.zeros(1).cuda()\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run(
        [sys.executable, "-m", "tpu_workbench.migrate.cli", "--diff", "--jobs", "2", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert "passed as `timer_type` of `timer`" in out.stdout, out.stderr[-2000:]


def test_a_gated_class_is_left_whole_with_one_todo(tmp_path: Path) -> None:
    """``@require_torch_multi_gpu class TestTP`` gates every test of the class (Megatron-DeepSpeed's tensor-parallel
    tests launch multi-GPU runs); one TODO, not one from each rule that knows the name."""
    src = (
        "import torch\nfrom transformers.testing_utils import require_torch_multi_gpu\n\n"
        "@require_torch_multi_gpu\nclass TestTP:\n    def test_a(self):\n        x = torch.zeros(2).cuda()\n"
    )
    _tree(tmp_path, {"test_tp.py": src})
    diff = _diff(tmp_path)
    assert ".cuda()" not in "".join(line for line in diff.splitlines() if line.startswith("-"))
    assert diff.count("TODO(tpu-migrate") == 1 and "TPU217" in diff


def test_a_skip_for_too_many_gpus_is_not_a_cuda_gate(tmp_path: Path) -> None:
    """``if torch.cuda.device_count() > 1: return unittest.skip("test requires 0 or 1 GPU")(t)`` holds on no TPU
    host either way: renamed, not kept with a TODO that says CUDA is needed."""
    src = (
        "import unittest\nimport torch\n\n"
        "def require_non_multi_gpu(t):\n"
        "    if torch.cuda.device_count() > 1:\n"
        '        return unittest.skip("test requires 0 or 1 GPU")(t)\n'
        "    return t\n\n"
        "def require_multi_gpu(t):\n"
        "    if torch.cuda.device_count() < 2:\n"
        '        return unittest.skip("test requires multiple GPUs")(t)\n'
        "    return t\n"
    )
    _tree(tmp_path, {"utils.py": src})
    diff = _diff(tmp_path)
    assert "+    if torch.accelerator.device_count() > 1:" in diff
    assert "-    if torch.cuda.device_count() < 2:" not in diff


def test_a_helper_of_cuda_only_code_stays_with_it(tmp_path: Path) -> None:
    """modded-nanogpt's evals/hellaswag.py is called only from train_gpt.py (it imports triton: left as
    written); migrated alone, its inputs went to 'tpu' beside a model left on 'cuda'."""
    _tree(
        tmp_path,
        {
            "train_gpt.py": "import torch\nimport triton\nfrom evals import hellaswag\n\nm = torch.nn.Linear(2, 2).cuda()\n",
            "evals/hellaswag.py": '"""Eval."""\nimport torch\n\ndef run(m):\n    return m(torch.zeros(2).cuda())\n',
            "evals/shared.py": "import torch\n\ndef f():\n    return torch.zeros(2).cuda()\n",
            "main.py": "import torch\nfrom evals import shared\n",
        },
    )
    diff = _diff(tmp_path)
    assert "-    return m(torch.zeros(2).cuda())" not in diff
    assert "only CUDA-only code imports this module (`../train_gpt.py`, which imports `triton`" in diff
    assert '+    return torch.zeros(2).to("tpu")' in diff  # also imported by a plain script: migrated


def test_submodule_of_a_package_whose_init_is_cuda_only(tmp_path: Path) -> None:
    """``from .grad_scaler import X`` in an ``__init__`` that imports apex: importing the submodule runs the
    ``__init__``, so it is CUDA-only code's helper too (Megatron-DeepSpeed's megatron/optimizer)."""
    _tree(
        tmp_path,
        {
            "opt/__init__.py": "from apex.optimizers import FusedAdam\nfrom .grad_scaler import Scaler\n",
            "opt/grad_scaler.py": "import torch\n\nclass Scaler:\n    def __init__(self):\n        self.s = torch.ones(1).cuda()\n",
        },
    )
    assert "-        self.s = torch.ones(1).cuda()" not in _diff(tmp_path)
