"""No dead definitions in the packages: vulture over the packages, the tests, the benchmarks and the notebooks'
code must find no function, class or method of ours that nothing uses.

What vulture cannot see is named here once, with why: lowerings and patches are registered by their decorator;
libcst visitors and PyTorch's device-module protocol are called by name from outside; the device API mirrors
``torch.cuda`` for users (TorchTPU 0.2.0's contract), whether or not our own code calls it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

vulture = pytest.importorskip("vulture", reason="vulture is a dev dependency: pip install -e '.[dev]'")

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("backend", "migrate", "workbench", "tpu_workbench")
USERS = ("tests", "benchmarks", "notebooks/_build.py", "setup.py")

REGISTERED_BY_DECORATOR = [
    "@lower", "@register", "@_register", "@builder", "@_sparse", "@private.patch", "@_legacy", "@_checks_indices_on_host",
    "@_inverts", "@functools.partial", "@property", "@*.setter",
]  # fmt: skip

CALLED_BY_NAME = [
    # libcst's visitor protocol and its position provider
    "visit_*", "leave_*", "add_indent_tokens", "add_token", "before_codegen", "after_codegen",
    "record_syntactic_position",
    # Python protocols
    "__instancecheck__", "__subclasscheck__", "_ipython_display_", "__getattr__",
    # torch.backends entry point (pyproject.toml)
    "_autoload",
    # PyTorch's device-module protocol (torch.multiprocessing, torch.random.fork_rng, torch.utils.data)
    "_is_in_bad_fork",
    # torch.tpu mirrors torch.cuda (TorchTPU 0.2.0's public API): users call these
    "wait_event", "record_event", "elapsed_time", "get_rng_state_all", "set_rng_state_all", "has_primary_context",
    "is_built", "memory_reserved", "reset_accumulated_memory_stats", "share_memory_", "is_shared",
]  # fmt: skip

KINDS = {"function", "class", "method"}


def _notebook_code(tmp: Path) -> Path:
    """The committed notebooks' code cells, as one file vulture can read."""
    cells = []
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in json.loads(nb.read_text())["cells"]:
            if cell["cell_type"] == "code":
                src = "".join(cell["source"])
                cells.append(
                    "\n".join(line for line in src.splitlines() if not line.lstrip().startswith(("%", "!")))
                )
    out = tmp / "notebook_cells.py"
    out.write_text("\n\n".join(cells) + "\n")
    return out


@pytest.mark.slow  # (quick loop: several seconds; runs in the full suite)
def test_no_unused_function_class_or_method(tmp_path: Path) -> None:
    v = vulture.Vulture(ignore_names=CALLED_BY_NAME, ignore_decorators=REGISTERED_BY_DECORATOR)
    paths = [str(ROOT / p) for p in (*PACKAGES, *USERS)] + [str(_notebook_code(tmp_path))]
    v.scavenge(paths, exclude=["*/fixtures/*", "*/golden/*", "*/examples/*"])
    ours = tuple(str(ROOT / p) + "/" for p in PACKAGES)
    dead = [
        f"{Path(item.filename).relative_to(ROOT)}:{item.first_lineno}: unused {item.typ} {item.name!r}"
        for item in v.get_unused_code(min_confidence=60)
        if item.typ in KINDS and str(item.filename).startswith(ours)
    ]
    assert not dead, "remove them, or name them in this test with why:\n" + "\n".join(dead)
