"""Build configuration that pyproject.toml cannot express: the folder → package mapping, and the sample projects.

1. The repository keeps one folder per part (``backend/``, ``migrate/``, ``workbench/``); the distribution
   installs them under one distinctive root, ``tpu_workbench`` (see tpu_workbench/__init__.py). ``PACKAGE_DIRS``
   is the whole mapping; every sub-package found under a mapped folder is listed under the mapped name, so a new
   sub-folder needs no edit here. Editable and wheel installs read the same mapping.
2. ``tpu-bench demo`` and the notebooks migrate and run the sample projects in ``examples/``; a wheel has no
   repository root, so the build copies them into the package as ``tpu_workbench/bench/examples/``.
"""

import shutil
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE / "examples"
ROOT = "tpu_workbench"
PACKAGE_DIRS = {
    ROOT: "tpu_workbench",
    f"{ROOT}.backend": "backend",
    f"{ROOT}.migrate": "migrate",
    f"{ROOT}.bench": "workbench",
}


def packages() -> list[str]:
    """Every package of the distribution, named under the root."""
    out = [ROOT]
    for name, folder in PACKAGE_DIRS.items():
        if name != ROOT:
            out += [name] + [f"{name}.{sub}" for sub in find_packages(str(HERE / folder))]
    return out


class build_py_with_examples(build_py):  # noqa: N801 - setuptools command naming
    def run(self) -> None:
        super().run()
        if EXAMPLES.is_dir():
            target = Path(self.build_lib, *f"{ROOT}.bench".split("."), "examples")
            shutil.copytree(
                EXAMPLES,
                target,
                dirs_exist_ok=True,
                ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints"),
            )


setup(packages=packages(), package_dir=PACKAGE_DIRS, cmdclass={"build_py": build_py_with_examples})
