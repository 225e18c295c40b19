"""Re-binding a call's arguments from the signature of the API it called to the one it now calls.

Replacing only the callee's name is wrong as soon as the two signatures differ: ``torch.cuda.synchronize
(device=d)`` -> ``torch.accelerator.synchronize(device=d)`` raises (the parameter is ``device_index``), and
``torch.cuda.current_stream(device=d)`` -> ``torch.accelerator.current_stream(device=d)`` raises (it is
positional-only). A rule states both signatures in Python's own syntax (``"device=None, /"``); the
arguments are bound to the old one by Python's rules and written for the new one: positional-only
parameters positionally, keyword-only ones by keyword, renamed ones under their new name. Anything that
cannot be mapped exactly (``*args``/``**kwargs``, an argument the new API does not take) gives None, and
the rule leaves the call for a human.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import lru_cache

import libcst as cst

_EQ = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))


@dataclass(frozen=True)
class Params:
    """Parameter names of a signature by kind (defaults are not needed to re-bind)."""

    positional_only: tuple[str, ...]
    positional: tuple[str, ...]  # positional-or-keyword
    keyword_only: tuple[str, ...]
    var_keyword: bool

    @property
    def ordered(self) -> tuple[str, ...]:
        return self.positional_only + self.positional

    @property
    def names(self) -> tuple[str, ...]:
        return self.positional_only + self.positional + self.keyword_only


@lru_cache(maxsize=256)
def params(signature: str) -> Params:
    """``"device=None, /"`` -> its parameters (parsed by Python, so the syntax is exactly a def's)."""
    fn = ast.parse(f"def f({signature}): pass").body[0]
    assert isinstance(fn, ast.FunctionDef)
    a = fn.args
    return Params(
        tuple(p.arg for p in a.posonlyargs),
        tuple(p.arg for p in a.args),
        tuple(p.arg for p in a.kwonlyargs),
        a.kwarg is not None,
    )


def bind(call: cst.Call, signature: str) -> dict[str, cst.Arg] | None:
    """The call's arguments by parameter name of ``signature``; None when they do not bind exactly."""
    p = params(signature)
    bound: dict[str, cst.Arg] = {}
    positional = [a for a in call.args if a.keyword is None]
    if any(a.star for a in call.args) or len(positional) > len(p.ordered):
        return None
    for name, a in zip(p.ordered, positional, strict=False):
        bound[name] = a
    for a in call.args:
        if a.keyword is None:
            continue
        name = a.keyword.value
        if name in bound or name in p.positional_only or (name not in p.names and not p.var_keyword):
            return None
        bound[name] = a
    return bound


def rebind(
    call: cst.Call,
    old: str,
    new: str,
    rename: dict[str, str] | None = None,
    drop: frozenset[str] = frozenset(),
    first: list[cst.Arg] | None = None,
) -> list[cst.Arg] | None:
    """Arguments for the new signature, or None when the call cannot be mapped exactly.

    ``rename`` maps old parameter names to new ones; parameters in ``drop`` are left out (the rule says so
    in its message); ``first`` are new leading positional arguments (``"tpu"`` for autocast).
    """
    bound = bind(call, old)
    if bound is None:
        return None
    rename = rename or {}
    q = params(new)
    values: dict[str, tuple[cst.BaseExpression, bool]] = {}  # new name -> (value, was positional)
    for name, a in bound.items():
        if name in drop:
            continue
        target = rename.get(name, name)
        if target not in q.names and not q.var_keyword:
            return None
        values[target] = (a.value, a.keyword is None)
    out = list(first or [])
    old_order = params(old).ordered
    # Positionally while the new signature's order allows it and the parameter keeps its place (positional-only
    # ones must be), then by keyword in the call's own order.
    for j, name in enumerate(q.ordered[len(out) :], start=len(out)):
        same_place = j < len(old_order) and rename.get(old_order[j], old_order[j]) == name
        if name not in values or not (name in q.positional_only or (values[name][1] and same_place)):
            break
        out.append(cst.Arg(values.pop(name)[0]))
    if any(n in values for n in q.positional_only):
        return None  # a positional-only parameter after a gap
    for name, (value, _positional) in values.items():
        out.append(cst.Arg(value, keyword=cst.Name(name), equal=_EQ))
    return _commas(out)


def _commas(args: list[cst.Arg]) -> list[cst.Arg]:
    sep = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    return [
        a.with_changes(comma=sep if i < len(args) - 1 else cst.MaybeSentinel.DEFAULT)
        for i, a in enumerate(args)
    ]


def same_args(call: cst.Call, args: list[cst.Arg]) -> bool:
    """True when ``args`` are the call's own arguments (keep its layout then)."""
    old = call.args
    if len(old) != len(args):
        return False
    return all(
        a.value is b.value
        and (a.keyword is None) == (b.keyword is None)
        and (a.keyword is None or a.keyword.value == b.keyword.value)
        for a, b in zip(old, args, strict=True)
    )
