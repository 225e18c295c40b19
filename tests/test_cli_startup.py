"""``--help`` is what a new user types first: it must answer fast, so it imports neither torch, jax nor
matplotlib (torch alone is 2.5 s on an idle machine and 17 s under load). Every subcommand's help is checked,
including subcommands added later (read from the parser itself)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

HEAVY = ("torch", "jax", "matplotlib", "pandas", "transformers")

PROBE = """
    import contextlib, io, sys
    from {module} import main
    with contextlib.redirect_stdout(io.StringIO()) as out:
        try:
            main({argv!r})
        except SystemExit as exc:
            code = exc.code
        else:
            code = 0
    loaded = [m for m in {heavy!r} if m in sys.modules]
    print(repr((code, len(out.getvalue()), loaded)))
"""


def _subcommands(module: str) -> list[str]:
    code = textwrap.dedent(f"""
        import argparse, contextlib, io
        from {module} import build_parser
        p = build_parser()
        subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        print(" ".join(name for s in subs for name in s.choices))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split()


CLIS = {"tpu-bench": "tpu_workbench.bench.cli", "tpu-migrate": "tpu_workbench.migrate.cli"}


def _cases() -> list[tuple[str, list[str]]]:
    cases = [(cli, ["--help"]) for cli in CLIS]
    cases += [("tpu-bench", [sub, "--help"]) for sub in _subcommands(CLIS["tpu-bench"])]
    return cases


@pytest.mark.parametrize(("cli", "argv"), _cases(), ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_help_imports_no_heavy_library(cli: str, argv: list[str]) -> None:
    code = textwrap.dedent(PROBE.format(module=CLIS[cli], argv=argv, heavy=HEAVY))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    exit_code, help_chars, loaded = eval(out.stdout.strip().splitlines()[-1])  # noqa: S307 - our own repr
    assert exit_code == 0 and help_chars > 200, (exit_code, help_chars)
    assert loaded == [], f"{cli} {' '.join(argv)} imported {loaded}"
