"""The sample projects under examples/: migrated output equals the checked-in golden files, and the
migrated scripts run on the CPU (`--device cpu` / TPU_WORKBENCH_DEVICE=cpu) printing `step i loss x`."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tpu_workbench.migrate import migrate_paths

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
GOLDEN = Path(__file__).resolve().parent / "golden"
NAMES = ["cuda_ddp", "xla_legacy", "xla_modern", "xla_spmd", "notebook"]
STEP = re.compile(r"^step (\d+) loss (-?\d+\.\d+)$", re.M)


def _file(name: str) -> str:
    return "train.ipynb" if name == "notebook" else "train.py"


@pytest.fixture(scope="module")
def migrated(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("examples")
    for name in NAMES:
        shutil.copytree(EXAMPLES / name, out / name)
    migrate_paths([str(out)], write=True, jobs=1)
    return out


@pytest.mark.parametrize("name", NAMES)
def test_migration_matches_golden(migrated, name):
    got = (migrated / name / _file(name)).read_text()
    assert got == (GOLDEN / name / _file(name)).read_text(), f"regenerate tests/migrate/golden/{name}"


@pytest.mark.parametrize("name", NAMES)
def test_golden_is_stable(name):
    res = migrate_paths([str(GOLDEN / name / _file(name))])
    assert res.files[0].status in ("unchanged", "skipped")


def test_spmd_example_is_flagged_not_rewritten():
    src = (EXAMPLES / "xla_spmd" / "train.py").read_text()
    res = migrate_paths([str(EXAMPLES / "xla_spmd")])
    diags = res.files[0].diagnostics
    assert diags and all(not d.fixed and d.outcome == "flagged" for d in diags)
    golden = (GOLDEN / "xla_spmd" / "train.py").read_text()
    assert [ln for ln in golden.splitlines() if "TODO(tpu-migrate" not in ln] == src.splitlines()


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env.update(
        TORCH_DEVICE_BACKEND_AUTOLOAD="0", TPU_WORKBENCH_DEVICE="cpu", STEPS="2", PYTHONWARNINGS="ignore"
    )
    return env


def _notebook_script(path: Path) -> str:
    nb = json.loads(path.read_text())
    lines = []
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            for line in "".join(cell["source"]).splitlines():
                if not line.lstrip().startswith(("%", "!")):
                    lines.append(line)
    return "\n".join(lines) + "\n"


_DRIVER = """
import contextlib, io, json, runpy, sys
results = {}
for name, path, argv in json.loads(sys.argv[1]):
    sys.argv = [path, *argv]
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            runpy.run_path(path, run_name="__main__")
        results[name] = buf.getvalue()
    except BaseException as exc:  # noqa: BLE001 - reported to the test
        results[name] = "FAILED: " + repr(exc) + "\\n" + buf.getvalue()
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, str]:
    """All example runs in one interpreter (torch is imported once)."""
    tmp = tmp_path_factory.mktemp("runs")
    script = tmp / "nb.py"
    script.write_text(_notebook_script(GOLDEN / "notebook" / "train.ipynb"))
    jobs = [
        [name, str(GOLDEN / name / "train.py"), ["--device", "cpu", "--steps", "2"]]
        for name in ("cuda_ddp", "xla_legacy", "xla_modern")
    ]
    jobs += [
        ["notebook", str(script), []],
        ["cuda_ddp_unmigrated", str(EXAMPLES / "cuda_ddp" / "train.py"), ["--no-cuda", "--steps", "2"]],
    ]
    out = subprocess.run(
        [sys.executable, "-c", _DRIVER, json.dumps(jobs)],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=300,
        cwd=tmp,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cuda_ddp", "xla_legacy", "xla_modern", "notebook", "cuda_ddp_unmigrated"])
def test_example_runs_on_cpu_and_prints_steps(runs, name):
    assert not runs[name].startswith("FAILED"), runs[name]
    assert [int(i) for i, _ in STEP.findall(runs[name])] == [0, 1], runs[name]


def test_examples_have_no_stored_notebook_outputs():
    nb = json.loads((EXAMPLES / "notebook" / "train.ipynb").read_text())
    assert all(
        not c.get("outputs") and c.get("execution_count") is None
        for c in nb["cells"]
        if c["cell_type"] == "code"
    )
