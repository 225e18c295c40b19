"""Where the workbench's bundled files live, in a source checkout and in an installed wheel.

A wheel ships the sample projects as ``tpu_workbench/bench/examples/`` (the build copies the repository's
``examples/`` there); a checkout or an editable install reads ``examples/`` at the repository root.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def repo_root() -> Path:
    """The folder holding this package's folder: the checkout root (editable install), or
    ``site-packages/tpu_workbench`` when installed from a wheel."""
    return PACKAGE_DIR.parent


def examples_dir() -> Path:
    """The bundled sample projects: inside the installed package if the wheel shipped them, else the
    checkout's ``examples/``."""
    shipped = PACKAGE_DIR / "examples"
    return shipped if shipped.is_dir() else repo_root() / "examples"
