"""A torch_xla training template (fixtures/xla_mnist_template.py, in the style of torch_xla's MNIST/ImageNet
test scripts) migrates to a script that imports no torch_xla and trains on the "tpu" device with its
fake-data flag: in one process, and under ``torchrun --nproc_per_node=2`` (gradients all-reduced: both
ranks see the same losses).

torchvision does not import beside this machine's CPU torch build; the template imports it only for the
real-data path, so the runs put a stand-in package on the path that fails if anything from it is used.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tpu_workbench.migrate import migrate_source

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "xla_mnist_template.py"
TRAIN_LINE = re.compile(
    r"Training Device=tpu/(\d+) Epoch=1 Step=(\d+) Loss=(\d+\.\d+)"
)  # (two processes may interleave lines)
STAND_IN = '''"""Stand-in for torchvision in the tpu-migrate tests: the fake-data path never uses it."""


def __getattr__(name):
    raise ImportError(f"torchvision stand-in: {name} is not available")
'''


def _imported_modules(src: str) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
    return out


@pytest.fixture(scope="module")
def migrated() -> str:
    return migrate_source(FIXTURE.read_text(), str(FIXTURE)).new_source


def test_migrated_template_imports_no_torch_xla(migrated):
    assert not {m for m in _imported_modules(migrated) if m.split(".")[0] == "torch_xla"}
    assert "TODO(tpu-migrate" not in migrated  # nothing left for a human
    assert migrate_source(migrated).new_source == migrated  # the fixed point in one run
    undefined = {
        n.id for n in ast.walk(ast.parse(migrated)) if isinstance(n, ast.Name) and n.id.startswith("_tpu")
    }
    defined = {n.name for n in ast.parse(migrated).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assert undefined <= defined


def _run(tmp_path: Path, migrated: str, launcher: list[str]) -> str:
    script = tmp_path / "train_mnist.py"
    script.write_text(migrated)
    stand_in = tmp_path / "stand_in" / "torchvision"
    stand_in.mkdir(parents=True)
    (stand_in / "__init__.py").write_text('"""Stand-in for torchvision (tpu-migrate tests)."""\n')
    for name in ("datasets", "transforms"):
        (stand_in / f"{name}.py").write_text(STAND_IN)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
    }
    env.update(PYTHONPATH=str(stand_in.parent), PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1")
    out = subprocess.run(
        [*launcher, str(script), "--fake_data", "--num_steps", "3", "--batch_size", "8"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=900,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    return out.stdout


@pytest.mark.slow
def test_migrated_template_trains_on_tpu(tmp_path, migrated):
    out = _run(tmp_path, migrated, [sys.executable])
    steps = TRAIN_LINE.findall(out)
    assert [(d, s) for d, s, _loss in steps] == [("0", "0"), ("0", "1"), ("0", "2")], out
    assert "on 1 process(es), ordinal 0" in out


@pytest.mark.slow
def test_migrated_template_trains_under_torchrun(tmp_path, migrated):
    launcher = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=2",
        "--standalone",  # the launcher's own store on a free port it binds: no port picked here to race for
    ]
    out = _run(tmp_path, migrated, launcher)
    steps = TRAIN_LINE.findall(out)
    by_rank = {r: [(s, loss) for rr, s, loss in steps if rr == r] for r in ("0", "1")}
    assert [s for s, _ in by_rank["0"]] == ["0", "1", "2"], out
    assert by_rank["0"] == by_rank["1"], out  # averaged gradients: the replicas stay identical
    assert "on 2 process(es), ordinal 0" in out
