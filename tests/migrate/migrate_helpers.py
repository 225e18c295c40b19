"""Shared helpers for the tpu-migrate tests."""

from __future__ import annotations

from tpu_workbench.migrate import migrate_source


def run(src: str, **kw):
    """Migrate and check the two invariants every test relies on: output parses, second pass is a no-op."""
    import libcst as cst

    res = migrate_source(src, **kw)
    cst.parse_module(res.new_source)
    again = migrate_source(res.new_source, **kw)
    assert again.new_source == res.new_source, "second pass changed the output"
    return res


def codes(res) -> list[str]:
    return [d.code for d in res.diagnostics]


def run_without_torchtpu(tmp_path, source: str):
    """Run ``source`` as a script where no TorchTPU device exists (a CPU-only user's run)."""
    import os
    import subprocess
    import sys

    (tmp_path / "m.py").write_text(source)
    env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    return subprocess.run(
        [sys.executable, str(tmp_path / "m.py")], capture_output=True, text=True, env=env, timeout=120
    )


def run_on_tpu(source: str):
    """Run ``source`` in a fresh interpreter where the "tpu" device is registered (a TPU user's run)."""
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=120)


def write_tree(root) -> dict[str, str]:
    """Each .py file of ``root`` after one ``--write`` of the whole tree (the project scan sees every file)."""
    import subprocess
    import sys

    cli = [sys.executable, "-m", "tpu_workbench.migrate.cli", "--write", "-q", str(root)]
    subprocess.run(cli, capture_output=True, text=True, timeout=300, check=False)
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*.py"))}


def write_files(root, files: dict[str, str]) -> None:
    """Write ``{relative path: text}`` under ``root``, making the folders."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def write_quant_project(tmp_path, demo: str):
    """A project whose ``pkg/util/quant.py`` is built on bitsandbytes (a CUDA-only stack), with ``demo`` as its
    ``demo.py`` (LLaMA2-Accessory's demos importing ``accessory.util.quant``)."""
    proj = tmp_path / "proj"
    (proj / "pkg" / "util").mkdir(parents=True)
    (proj / "setup.py").write_text("from setuptools import setup\nsetup(name='pkg')\n")
    for init in ("pkg/__init__.py", "pkg/util/__init__.py"):
        (proj / init).write_text("")
    (proj / "pkg" / "util" / "quant.py").write_text(
        "import bitsandbytes as bnb\n\n\ndef quantize(model):\n    return bnb.nn.Linear4bit\n"
    )
    (proj / "demo.py").write_text(demo)
