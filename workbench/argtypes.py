"""argparse value types that check a number's range and name it when the value is outside.

``tpu-bench run -b 0`` must stop at the command line ("must be an integer >= 1, got 0") rather than write a
record of 0 tokens/s, and ``--scaleout-gbps 0`` rather than divide by zero deep inside the projection.
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line: the command, the argument and what is wrong, then where help is
    (the usage block is for --help, not for every typo)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def integer(low: int = 1, high: int | None = None) -> Callable[[str], int]:
    """An integer in [low, high] (``high`` None: no upper bound)."""
    valid = f"an integer >= {low}" if high is None else f"an integer from {low} to {high}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {valid}, got {text!r}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be {valid}, got {text}")
        return value

    parse.__name__ = "integer"  # argparse names the type in its own messages
    return parse


def number(
    low: float = 0.0, high: float | None = None, *, low_open: bool = True, high_open: bool = False
) -> Callable[[str], float]:
    """A finite number in the interval from ``low`` to ``high``; ``low_open`` excludes ``low`` itself."""
    lo = f"> {low:g}" if low_open else f">= {low:g}"
    if high is None:
        valid = f"a number {lo}"
    else:
        valid = f"a number in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {valid}, got {text!r}") from None
        too_low = value <= low if low_open else value < low
        too_high = high is not None and (value >= high if high_open else value > high)
        if not math.isfinite(value) or too_low or too_high:
            raise argparse.ArgumentTypeError(f"must be {valid}, got {text}")
        return value

    parse.__name__ = "number"
    return parse


POSITIVE_INT = integer(1)
POSITIVE = number(0.0)
FRACTION = number(0.0, 1.0)  # (0, 1]: efficiencies
SHARE = number(0.0, 1.0, low_open=False)  # [0, 1]: overlap
BUDGET_S = number(0.0, 3600.0)  # timing seconds per combination: an hour is already more than any run needs
#: Tokens of one training run: 1e17 is ~6,000 times the largest published pre-training runs (~15e12 tokens).
RUN_TOKENS = number(0.0, 1e17)
#: A step-time coefficient of variation above 1 (spread larger than the mean) is no longer a straggler model.
STRAGGLER_CV = SHARE

#: More chips than any cluster built (the largest are ~1e5 accelerators): beyond this the projection's
#: assumptions (one job, one network) mean nothing, and its per-chip-count searches would run for ages.
MAX_CHIPS = 1_000_000
CHIP_COUNT = integer(1, MAX_CHIPS)


def _first_existing(path: Path) -> Path:
    """The deepest ancestor of ``path`` (itself included) that exists."""
    path = Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _check_writable_place(path: Path, *, want_dir: bool) -> str | None:
    """Why ``path`` cannot be written as a file (``want_dir`` False) or used as a folder, or None.

    Checked before any work starts, so that a report, CSV or record file in a bad place is refused up front
    rather than after minutes of work (or after every source file was rewritten)."""
    if path.exists():
        if want_dir and not path.is_dir():
            return "exists and is not a folder"
        if not want_dir and path.is_dir():
            return "is a folder, not a file"
        if not want_dir and not path.is_file():
            return "is not a regular file"
        if not os.access(path, os.W_OK | (os.X_OK if want_dir else 0)):
            return "is not writable"
        return _probe(path) if want_dir else None
    base = _first_existing(path.parent if not want_dir else path)
    if not base.is_dir():
        return f"cannot be created: {str(base)!r} is a file, not a folder"
    why = _probe(base)
    return f"cannot be created: {why}" if why else None


def _probe(folder: Path) -> str | None:
    """The one sure test (root, read-only mounts, /proc): make and remove a folder in ``folder``."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".tpu-bench-probe-", dir=folder))
    except OSError as exc:
        return f"folder {str(folder)!r} is not writable ({exc.strerror or exc})"
    return None


def _place(want_dir: bool) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if "\0" in text:
            raise argparse.ArgumentTypeError("contains a NUL character")
        if not text.strip():  # Path("") is ".": an empty name would silently mean the current folder
            raise argparse.ArgumentTypeError(f"{text!r} is empty: name a {parse.__name__}")
        why = _check_writable_place(Path(text), want_dir=want_dir)
        if why:
            raise argparse.ArgumentTypeError(f"{text!r} {why}")
        return text

    parse.__name__ = "folder" if want_dir else "file"
    return parse


OUTPUT_FILE = _place(want_dir=False)
"""A file that can be written (it exists as a writable regular file, or its folder can be created)."""
OUTPUT_DIR = _place(want_dir=True)
"""A folder that can hold output (it exists and is writable, or it can be created)."""


def existing_dir(text: str) -> str:
    """A folder that exists (an input such as the demo's --examples)."""
    if not Path(text).is_dir():
        why = "is not a folder" if Path(text).exists() else "does not exist"
        raise argparse.ArgumentTypeError(f"{text!r} {why}")
    return text


existing_dir.__name__ = "folder"
