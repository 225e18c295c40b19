"""A built wheel (not an editable install) carries what ``tpu-bench demo`` needs — the sample projects, the
catalog and the published points, found from any folder — and installs only the ``tpu_workbench`` root: a user
project with its own ``backend``/``migrate``/``workbench`` still imports torch, gets "tpu" and keeps its packages."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.test_namespace import ORDERS, USER_PROJECT_IMPORTS_TORCH, make_user_project, run_python

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the wheel, the folder it is installed into with ``pip install --target``)."""
    tmp = tmp_path_factory.mktemp("wheel")
    wheels = tmp / "wheels"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = wheels.glob("tpu_workbench-*.whl")
    site = tmp / "site"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    return wheel, site


@pytest.mark.slow
def test_the_wheel_installs_one_root_and_every_package_under_it(wheel_site: tuple[Path, Path]) -> None:
    wheel, site = wheel_site
    names = set(zipfile.ZipFile(wheel).namelist())
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"tpu_workbench"}, tops
    for folder, package in (("backend", "backend"), ("migrate", "migrate"), ("workbench", "bench")):
        sources = {p.relative_to(ROOT / folder).as_posix() for p in (ROOT / folder).rglob("*.py")}
        shipped = {
            n.removeprefix(f"tpu_workbench/{package}/")
            for n in names
            if n.startswith(f"tpu_workbench/{package}/") and n.endswith(".py")
        }
        assert sources - shipped == set(), f"{folder}/ files missing from the wheel"
    assert (site / "tpu_workbench" / "backend" / "opinfo_known_unsupported.json").is_file()


@pytest.mark.slow
def test_wheel_ships_the_examples_and_the_demo_runs_from_another_folder(tmp_path, wheel_site):
    wheel, site = wheel_site
    names = set(zipfile.ZipFile(wheel).namelist())
    for sample in ("cuda_ddp/train.py", "xla_legacy/train.py", "xla_modern/train.py", "notebook/train.ipynb"):
        assert f"tpu_workbench/bench/examples/{sample}" in names, sample
    assert {
        "tpu_workbench/bench/catalog/data/chips.toml",
        "tpu_workbench/bench/published/figures.json",
    } <= names

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}  # the installed copy, ahead of this checkout's editable one
    examples = site / "tpu_workbench" / "bench" / "examples"
    where = subprocess.run(
        [sys.executable, "-c", "import tpu_workbench.bench.paths as p; print(p.examples_dir())"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert where.stdout.strip() == str(examples), where.stderr[-2000:]
    demo = subprocess.run(
        [
            sys.executable,
            "-m",
            "tpu_workbench.bench.cli",
            "demo",
            "--",
            "--quick",
            "--out",
            "report",
            "--skip",
            "losses",
            "benchmark",
        ],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    report = (elsewhere / "report" / "README.md").read_text(encoding="utf-8")
    assert "## Checks: ALL PASSED" in report and str(examples) in report


@pytest.mark.slow
def test_a_user_project_beside_the_wheel_keeps_torch_and_its_own_packages(tmp_path, wheel_site):
    _, site = wheel_site
    project = make_user_project(tmp_path / "service")
    env = {"PYTHONPATH": str(site)}
    assert run_python(USER_PROJECT_IMPORTS_TORCH, cwd=project, env=env).stdout.strip() == "ok"
    where = run_python(
        "import tpu_workbench.backend as b; print(b.__file__)", cwd=project, env=env
    ).stdout.strip()
    assert Path(where).is_relative_to(site), where  # the wheel's copy, not the checkout's
    for order, code in ORDERS.items():
        out = run_python(
            code + "print((torch.ones(2, device='tpu') * 3).cpu().tolist())\n", cwd=tmp_path, env=env
        )
        assert out.stdout.strip() == "[3.0, 3.0]", order
