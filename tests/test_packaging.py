"""The install itself: right torch build, the three packages under one root, and the import direction."""

import subprocess
import sys
from importlib import metadata

import pytest


def test_torch_is_the_pinned_cpu_build():
    version = metadata.version("torch")
    assert version.startswith("2.13."), version
    assert version.endswith("+cpu"), f"a CUDA build of torch was installed: {version}"


@pytest.mark.parametrize("package", ["tpu_workbench.migrate", "tpu_workbench.backend", "tpu_workbench.bench"])
def test_package_imports(package):
    __import__(package)


def test_migrate_never_imports_torch_or_jax():
    code = (
        "import sys\n"
        "sys.modules['torch'] = None\n"
        "sys.modules['jax'] = None\n"
        "import tpu_workbench.migrate, tpu_workbench.migrate.cli\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_console_scripts_and_entry_points_are_declared():
    dist = metadata.distribution("tpu-workbench")
    eps = {(ep.group, ep.name): ep.value for ep in dist.entry_points}
    assert eps[("console_scripts", "tpu-migrate")] == "tpu_workbench.migrate.cli:main"
    assert eps[("console_scripts", "tpu-bench")] == "tpu_workbench.bench.cli:main"
    assert eps[("torch.backends", "tpu_workbench")] == "tpu_workbench.backend:_autoload"
    assert eps[("torch_dynamo_backends", "tpu")] == "tpu_workbench.backend.compile:tpu_backend"
