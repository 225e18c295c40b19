"""A built wheel (not an editable install) carries what ``tpu-bench demo`` needs: the sample projects, the
catalog and the published points, found from any folder."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_wheel_ships_the_examples_and_the_demo_runs_from_another_folder(tmp_path):
    wheels = tmp_path / "wheels"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(ROOT)],
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = wheels.glob("tpu_workbench-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for sample in ("cuda_ddp/train.py", "xla_legacy/train.py", "xla_modern/train.py", "notebook/train.ipynb"):
        assert f"workbench/examples/{sample}" in names, sample
    assert {"workbench/catalog/data/chips.toml", "workbench/published/figures.json"} <= names

    site = tmp_path / "site"
    install = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site),
                              str(wheel)], capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stderr[-3000:]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}  # the installed copy, ahead of this checkout's editable one
    where = subprocess.run([sys.executable, "-c", "import workbench.paths as p; print(p.examples_dir())"],
                           cwd=elsewhere, env=env, capture_output=True, text=True, timeout=120)
    assert where.stdout.strip() == str(site / "workbench" / "examples"), where.stderr[-2000:]
    demo = subprocess.run([sys.executable, "-m", "workbench.cli", "demo", "--", "--quick", "--out", "report",
                           "--skip", "losses", "benchmark"], cwd=elsewhere, env=env, capture_output=True, text=True,
                          timeout=600)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    report = (elsewhere / "report" / "README.md").read_text(encoding="utf-8")
    assert "## Checks: ALL PASSED" in report and str(site / "workbench" / "examples") in report
