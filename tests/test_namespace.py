"""Installing tpu-workbench must never break anyone's `import torch`, nor take their package names.

Each check runs a fresh interpreter in a temporary folder against the installed package (the editable install
here; ``tests/workbench/test_wheel_install.py`` repeats them against a built wheel). A user project that holds
its own ``backend/``, ``migrate/`` and ``workbench/`` packages, as many services do, must import torch, get the
"tpu" device, and still import *its own* packages; our modules, imported before or after torch, must give a
working device.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

BARE = ("backend", "migrate", "workbench")

# what a user's project looks like: three packages with our folders' names, one of them with a `state` module
USER_PACKAGE = 'WHO = "user"\n'


def make_user_project(root: Path) -> Path:
    for name in BARE:
        pkg = root / name
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text(USER_PACKAGE)
        (pkg / "state.py").write_text(f'NAME = "{name}.state of the user"\n')
    return root


def run_python(code: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **(env or {})}
    env.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)
    env.pop("TORCH_TPU_WORKBENCH_AUTOLOAD", None)
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    return proc


USER_PROJECT_IMPORTS_TORCH = """
    import torch
    import backend, migrate, workbench
    from backend import state
    assert (backend.WHO, migrate.WHO, workbench.WHO) == ("user",) * 3, "the user's packages were replaced"
    assert state.NAME == "backend.state of the user", state.NAME
    x = torch.arange(4.0, device="tpu") * 2
    assert x.device.type == "tpu" and x.cpu().tolist() == [0.0, 2.0, 4.0, 6.0]
    print("ok")
"""


@pytest.mark.parametrize("where", ["cwd", pytest.param("pythonpath", marks=pytest.mark.slow)])
def test_a_user_project_with_our_folder_names_imports_torch_and_its_own_packages(
    tmp_path: Path, where: str
) -> None:
    project = make_user_project(tmp_path / "service")
    if where == "cwd":  # `python -c` puts the current folder first on sys.path
        out = run_python(USER_PROJECT_IMPORTS_TORCH, cwd=project)
    else:  # the project on PYTHONPATH, run from elsewhere
        (tmp_path / "elsewhere").mkdir()
        out = run_python(
            USER_PROJECT_IMPORTS_TORCH, cwd=tmp_path / "elsewhere", env={"PYTHONPATH": str(project)}
        )
    assert out.stdout.strip() == "ok"


@pytest.mark.slow  # each check is a fresh interpreter importing torch (~5 s); the quick loop keeps two
def test_the_bare_folder_names_are_not_importable(tmp_path: Path) -> None:
    code = f"""
        import importlib.util
        found = {{name: importlib.util.find_spec(name) for name in {BARE!r}}}
        assert all(spec is None for spec in found.values()), found
        import tpu_workbench.backend, tpu_workbench.migrate, tpu_workbench.bench
        print("ok")
    """
    assert run_python(code, cwd=tmp_path).stdout.strip() == "ok"


ORDERS = {
    "torch first": "import torch\nfrom tpu_workbench.backend import state\n",
    "backend submodule first": "from tpu_workbench.backend import state\nimport torch\n",
    "backend package first": "import tpu_workbench.backend\nimport torch\n",
    "bench module first": "from tpu_workbench.bench import timing\nimport torch\n",
    "migrate first": "import tpu_workbench.migrate\nimport torch\n",
    "root first": "import tpu_workbench\nimport torch\n",
}


@pytest.mark.parametrize(
    "order",
    [o if o == "backend submodule first" else pytest.param(o, marks=pytest.mark.slow) for o in ORDERS],
)
def test_import_order_is_free(tmp_path: Path, order: str) -> None:
    code = ORDERS[order] + textwrap.dedent("""
        y = torch.ones(3, device="tpu") + 1
        assert y.device.type == "tpu" and y.cpu().tolist() == [2.0, 2.0, 2.0]
        from tpu_workbench import backend
        assert backend.is_registered()
        print("ok")
    """)
    assert run_python(code, cwd=tmp_path).stdout.strip() == "ok"


@pytest.mark.slow
def test_our_modules_first_inside_a_user_project(tmp_path: Path) -> None:
    project = make_user_project(tmp_path / "service")
    code = """
        from tpu_workbench.backend import state as ours
        import torch
        from backend import state as theirs
        assert theirs.NAME == "backend.state of the user" and ours.__name__ == "tpu_workbench.backend.state"
        assert torch.zeros(2, device="tpu").device.type == "tpu"
        print("ok")
    """
    assert run_python(code, cwd=project).stdout.strip() == "ok"


@pytest.mark.slow
def test_every_module_has_one_name(tmp_path: Path) -> None:
    """Nothing of ours is imported twice under two names: after using all three parts, every loaded module
    whose file lies in one of our folders is named under ``tpu_workbench``."""
    code = """
        import sys
        import torch
        import tpu_workbench.migrate.cli, tpu_workbench.bench.cli, tpu_workbench.backend.dispatch
        torch.ones(2, device="tpu").sum().item()
        import tpu_workbench.backend as b
        from pathlib import Path
        roots = {Path(b.__file__).parent.parent.resolve()}
        folders = {"backend", "migrate", "workbench", "tpu_workbench"}
        bad = [
            name for name, mod in list(sys.modules.items())
            # torch.tpu: PyTorch's own alias of the device module (torch._register_device_module), as torch.cuda
            if getattr(mod, "__file__", None) and not name.startswith("tpu_workbench") and name != "torch.tpu"
            and Path(mod.__file__).resolve().parent.parent in roots
            and Path(mod.__file__).resolve().parent.name in folders
        ]
        assert not bad, bad
        print("ok")
    """
    assert run_python(code, cwd=tmp_path).stdout.strip() == "ok"
