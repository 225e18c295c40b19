"""The private-PyTorch edge: every touchpoint resolves on the pinned torch, nothing else reaches past it, and the
global patches are listed and switchable where correctness allows."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest
import torch

from tpu_workbench.backend import _torch_private as private

ROOT = Path(__file__).resolve().parents[2]
BACKEND = ROOT / "backend"

# torch.<name>._<private> or torch._<private>, and the OpOverload internals; dunders (torch.__version__) are public.
_PRIVATE = re.compile(
    r"\btorch(?:\.[A-Za-z]\w*)*\._(?!_)\w+|\._schema\b|\._overloadname\b|\._op_dk\b|_make_wrapper_subclass"
)


@pytest.mark.parametrize("path", sorted(private.TOUCHPOINTS))
def test_every_touchpoint_resolves_on_this_torch(path: str) -> None:
    """Fails with the hook's name when a torch upgrade moves one."""
    private.resolve(path)
    for user in private.TOUCHPOINTS[path].users:
        assert (ROOT / user).exists(), f"{path}: listed user {user} does not exist"


def test_a_missing_touchpoint_names_itself_and_the_pin() -> None:
    with pytest.raises(private.TorchPrivateAPIError, match=r"torch\._C:_no_such_hook.*torch>=2\.13,<2\.14"):
        private.resolve("torch._C:_no_such_hook")


def _code_lines(path: Path) -> list[tuple[int, str]]:
    """Source lines without comments and docstrings/strings (so prose may name private APIs)."""
    keep: dict[int, list[str]] = {}
    with path.open("rb") as f:
        for tok in tokenize.tokenize(f.readline):
            if tok.type in (tokenize.NAME, tokenize.OP, tokenize.NUMBER):
                keep.setdefault(tok.start[0], []).append(tok.string)
    return [(n, "".join(parts)) for n, parts in sorted(keep.items())]


def test_no_backend_module_reaches_private_torch_directly() -> None:
    offenders = []
    for path in sorted(BACKEND.rglob("*.py")):
        if path.name == "_torch_private.py":
            continue
        for n, line in _code_lines(path):
            if _PRIVATE.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{n}: {line[:100]}")
    assert not offenders, "go through backend/_torch_private.py:\n" + "\n".join(offenders)


def test_the_scanner_sees_a_private_access() -> None:
    assert _PRIVATE.search("x=torch._C._get_privateuse1_backend_name()")
    assert _PRIVATE.search("s=func._schema")
    assert not _PRIVATE.search("v=torch.__version__")


def test_patches_are_listed_applied_and_documented() -> None:
    from tpu_workbench import backend
    from tpu_workbench.backend import patches

    assert backend.register()
    rows = {r["name"]: r for r in patches.table()}
    for name in (
        "accelerator-synchronize",
        "pin-memory",
        "module-to-swaps-params",
        "storage-on-tpu",
        "load-to-tpu",
        "accelerator-device-index",
        "accelerator-memory",
        "generator-tpu",
        "optimizer-foreach-types",
        "compile-defaults",
        "backward-errors",
    ):
        assert rows[name]["applied"], name
    doc = (ROOT / "docs" / "backend.md").read_text()
    for name in rows:
        assert f"`{name}`" in doc, f"patch {name} is not documented in docs/backend.md"


def _run(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
        cwd=ROOT,
    )


@pytest.mark.slow
def test_an_optional_patch_can_be_switched_off() -> None:
    out = _run(
        "import torch; print(getattr(torch.compile, '_tpu_patched', False))",
        TORCH_TPU_DISABLE_PATCHES="compile-defaults",
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


@pytest.mark.slow
def test_a_required_patch_cannot_be_switched_off() -> None:
    out = _run(
        "import backend, torch; backend.register()",
        TORCH_TPU_WORKBENCH_AUTOLOAD="0",
        TORCH_TPU_DISABLE_PATCHES="module-to-swaps-params",
    )
    assert out.returncode != 0
    assert "module-to-swaps-params" in out.stderr and "required" in out.stderr


def test_replace_attr_records_the_original() -> None:
    class Box:
        x = 1

    p = private.Patch("t", "Box.x", "test", False, lambda: None)
    private._CURRENT.append(p)
    try:
        assert private.replace_attr(Box, "x", 2) == 1
    finally:
        private._CURRENT.pop()
    assert Box.x == 2 and p.originals == [(Box, "x", 1)]
    assert torch.__version__.startswith("2.13.")
