"""The literal-rewriting machinery shared by the device-string rules (TPU101, TPU401, TPU502).

String rewrites are not local: a script may set ``device = "cuda"`` and later test ``"cuda" in
device``. A literal rule therefore rewrites matching literals everywhere, and the contextual rules
(comparisons, command-line options, device-keyed dicts) only decide how each one is reported.
"""

from __future__ import annotations

import re
from typing import ClassVar

import libcst as cst

from ._util import string_body, with_body
from .base import Context, Rule
from .frameworks import framework_knob_strings

_ARGPARSE_METHODS = frozenset({"add_argument", "set_defaults"})
_COMPARE_METHODS = frozenset({"startswith", "endswith"})
COMPARISON_CODE = "TPU102"
ARGPARSE_CODE = "TPU103"
DICT_KEY_CODE = "TPU104"


def _walk_strings(node: cst.CSTNode):
    """Literal strings directly in ``node`` or in list/tuple/set displays inside it."""
    if isinstance(node, cst.SimpleString):
        yield node
    elif isinstance(node, (cst.List, cst.Tuple, cst.Set)):
        for el in node.elements:
            yield from _walk_strings(el.value)


class LiteralRule(Rule):
    """Shared machinery: a regex on string bodies, a replacement, and the contextual claims."""

    pattern: ClassVar[re.Pattern[str]]
    replacement: ClassVar[str]
    what: ClassVar[str] = "device string"
    node_types = (cst.SimpleString, cst.FormattedString, cst.Comparison, cst.Call, cst.DictElement)

    def new_body(self, body: str | None) -> str | None:
        if body is None:
            return None
        m = self.pattern.fullmatch(body)
        return None if m is None else self.replacement + (m.group("suffix") or "")

    def visit_node(self, ctx: Context, node: cst.CSTNode) -> None:
        if isinstance(node, cst.Comparison):
            if not ctx.enabled(COMPARISON_CODE):
                return
            for part in (node.left, *(c.comparator for c in node.comparisons)):
                for s in _walk_strings(part):
                    self._claim(ctx, s, COMPARISON_CODE, "compared")
        elif isinstance(node, cst.Call) and (knobs := framework_knob_strings(ctx, node)):
            for s in knobs:  # a framework's own device switch: flagged by its rule, never rewritten
                ctx.claim_string(s, "", "rewritten", "", value=None)
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            method = node.func.attr.value
            if method in _COMPARE_METHODS and node.args and ctx.enabled(COMPARISON_CODE):
                for s in _walk_strings(node.args[0].value):
                    self._claim(ctx, s, COMPARISON_CODE, f"tested with .{method}()")
            elif method in _ARGPARSE_METHODS and ctx.enabled(ARGPARSE_CODE):
                for a in node.args:
                    if a.keyword is not None and a.keyword.value in ("default", "choices", "const") or (
                            method == "set_defaults" and a.keyword is not None):
                        for s in _walk_strings(a.value):
                            self._claim(ctx, s, ARGPARSE_CODE, "used as a command-line default")
        elif isinstance(node, cst.DictElement):
            if self.new_body(string_body(node.key)) is not None and "cuda" in (string_body(node.key) or ""):
                # {"cuda": "nccl"} maps device types: keep the entry, TPU104 adds a "tpu" one.
                ctx.claim_string(node.key, "", "rewritten", "", value=None)  # type: ignore[arg-type]
                for s in _walk_strings(node.value):
                    ctx.claim_string(s, "", "rewritten", "", value=None)

    def _claim(self, ctx: Context, s: cst.SimpleString, claim_code: str, how: str) -> None:
        new = self.new_body(string_body(s))
        if new is None:
            return
        if claim_code == ARGPARSE_CODE:
            msg = (f"{self.what} '{string_body(s)}' -> '{new}' in a command-line option; flag names are kept, "
                   "but launch scripts and configs may still pass the old value")
        else:
            msg = (f"{self.what} '{string_body(s)}' -> '{new}' {how}; make sure the value it is compared "
                   "with is migrated too (config files, CLI)")
        ctx.claim_string(s, claim_code, "warned", msg)

    def leave_node(self, ctx: Context, orig: cst.CSTNode, node: cst.CSTNode) -> cst.CSTNode | None:
        if isinstance(orig, cst.SimpleString) and isinstance(node, cst.SimpleString):
            new = self.new_body(string_body(node))
            if new is None:
                return None
            claim = ctx.string_claims.get(id(orig))
            if claim is not None:
                claim_code, outcome, message, value = claim
                if value is not None:  # another rule (e.g. TPU403) owns this literal
                    return None
                if not claim_code:  # kept on purpose (dict keys)
                    return None
                ctx.report(orig, message, code=claim_code, outcome=outcome)
            else:
                ctx.report(orig, f"{self.what} '{string_body(node)}' -> '{new}'", code=self.code)
            return with_body(node, new)
        if isinstance(node, cst.FormattedString) and len(node.parts) >= 2:
            first = node.parts[0]
            if isinstance(first, cst.FormattedStringText):
                m = re.fullmatch(r"(cuda|xla):", first.value)
                if m and self.new_body(m.group(1)) is not None:
                    ctx.report(orig, f"{self.what} f'{first.value}...' -> f'{self.replacement}:...'", code=self.code)
                    return node.with_changes(parts=[first.with_changes(value=f"{self.replacement}:"),
                                                    *node.parts[1:]])
        return None


