"""argparse value types that check a number's range and name it when the value is outside.

``tpu-bench run -b 0`` must stop at the command line ("must be an integer >= 1, got 0") rather than write a
record of 0 tokens/s, and ``--scaleout-gbps 0`` rather than divide by zero deep inside the projection.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


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
