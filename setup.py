"""Build hook: ship the repository's sample projects (``examples/``) inside the wheel as ``workbench/examples/``.

``tpu-bench demo`` and the notebooks migrate and run these samples. They stay at the repository root (the
tests, the migrate corpus and the docs use ``examples/`` there); an installed wheel has no repository root,
so the build copies them into the package. Everything else is configured in pyproject.toml.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

EXAMPLES = Path(__file__).resolve().parent / "examples"


class build_py_with_examples(build_py):  # noqa: N801 - setuptools command naming
    def run(self) -> None:
        super().run()
        if EXAMPLES.is_dir():
            target = Path(self.build_lib) / "workbench" / "examples"
            shutil.copytree(EXAMPLES, target, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints"))


setup(cmdclass={"build_py": build_py_with_examples})
