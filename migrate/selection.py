"""``--select`` / ``--ignore`` resolved once into the set of enabled rule codes.

Codes and prefixes are checked here, once, against the registered rules; everything downstream (the
engine, the worker processes, the rule index) receives the resolved :class:`RuleSet`, never raw strings.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from .rules.base import all_rules

ALL = "ALL"


@dataclass(frozen=True)
class RuleSet:
    """The enabled rule codes (sorted), and what they were chosen by (for messages)."""

    codes: tuple[str, ...]
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] | None = None

    def __contains__(self, code: object) -> bool:
        return code in self.codes


def _normal(patterns: Iterable[str] | None) -> tuple[str, ...] | None:
    if patterns is None:
        return None
    out = tuple(p.strip().upper() for p in patterns if p and p.strip())
    return out or None


def _matches(code: str, patterns: tuple[str, ...]) -> bool:
    return any(p == ALL or code.startswith(p) for p in patterns)


def _check(patterns: tuple[str, ...], option: str, codes: list[str]) -> None:
    unknown = [p for p in patterns if p != ALL and not any(c.startswith(p) for c in codes)]
    if not unknown:
        return
    prefixes = sorted({c[:4] for c in codes})
    hints = []
    for p in unknown:
        close = [c for c in codes if len(c) == len(p) and sum(a != b for a, b in zip(c, p, strict=True)) == 1]
        close = close[:3] or difflib.get_close_matches(p, codes, n=3, cutoff=0.8)
        hints.append(f"{p!r}" + (f" (did you mean {', '.join(close)}?)" if close else ""))
    raise ValueError(
        f"unknown rule code or prefix in {option}: {', '.join(hints)}; valid: a code "
        f"{codes[0]}…{codes[-1]} (`tpu-migrate rules` lists them), a prefix of one such as "
        f"{', '.join(prefixes)} or TPU, or ALL"
    )


@lru_cache(maxsize=64)
def _resolve(select: tuple[str, ...] | None, ignore: tuple[str, ...] | None) -> RuleSet:
    codes = [r.code for r in all_rules()]
    if select is not None:
        _check(select, "--select", codes)
    if ignore is not None:
        _check(ignore, "--ignore", codes)
    chosen = [
        c for c in codes if (select is None or _matches(c, select)) and not (ignore and _matches(c, ignore))
    ]
    return RuleSet(tuple(chosen), select, ignore)


def resolve(select: Iterable[str] | None = None, ignore: Iterable[str] | None = None) -> RuleSet:
    """The rules enabled by ``select`` (default: all) minus ``ignore``; raises ValueError naming any
    unknown code or prefix and the valid choices."""
    return _resolve(_normal(select), _normal(ignore))


def as_rule_set(rules: RuleSet | None, select: Iterable[str] | None, ignore: Iterable[str] | None) -> RuleSet:
    """``rules`` when given (already resolved), else ``select`` / ``ignore`` resolved now."""
    return rules if rules is not None else resolve(select, ignore)
