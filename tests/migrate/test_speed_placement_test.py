"""Issue 31: the literal rule's placement test (``if device != 'cuda': kwargs['device_map'] = ...``) now looks at
the test's device strings before walking the branches. Differential: generated sources migrate to the same text
and findings as with the former order (branches walked first), kept here as the reference."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tpu_workbench.migrate.one_file import migrate_text
from tpu_workbench.migrate.rules import _literal
from tpu_workbench.migrate.rules._util import string_body


def _former_placement_test(self, ctx, node) -> None:
    """The order before issue 31: branches walked for a device_map write first, then the test's strings."""
    if type(node.test) is not _literal.cst.Comparison or not any(
        _literal._sets_device_map(b) for b in _literal._branches_of(node)
    ):
        return
    for s in (
        p
        for part in (node.test.left, *(c.comparator for c in node.test.comparisons))
        for p in _literal._walk_strings(part)
    ):
        if self.new_body(string_body(s)) is not None:
            ctx.claim_string(
                s,
                _literal.COMPARISON_CODE,
                "flagged",
                f"'{string_body(s)}' here picks accelerate's automatic placement (device_map='auto'), which "
                "fills CUDA or the CPU, never 'tpu': kept, so that 'tpu' takes the explicit placement",
                value=None,
            )


_TESTS = st.sampled_from(
    [
        "device != 'cuda'",
        "device == 'cuda'",
        "'cuda' != device",
        "device in ('cuda', 'cpu')",
        "device != 'cpu'",
        "n > 1",
        "device",
        "device != 'cuda:0'",
    ]
)
_LINES = st.sampled_from(
    [
        "kwargs['device_map'] = {'': device}",
        "device_map = {'': device}",
        "m = AutoModel.from_pretrained(path, device_map={'': device})",
        "x = x.to('cuda')",
        "y = 1",
        "def inner():\n    device_map = 'auto'",
    ]
)


@st.composite
def _sources(draw) -> str:
    def block(depth: int, indent: str) -> list[str]:
        out: list[str] = []
        for _ in range(draw(st.integers(1, 3))):
            if depth < 2 and draw(st.booleans()):
                out.append(f"{indent}if {draw(_TESTS)}:")
                out += block(depth + 1, indent + "    ")
                if draw(st.booleans()):
                    out.append(f"{indent}else:")
                    out += block(depth + 1, indent + "    ")
            else:
                out += [indent + ln for ln in draw(_LINES).split("\n")]
        return out

    body = block(0, "    ")
    return (
        "import torch\nfrom transformers import AutoModel\n\n"
        "def load(path, device='cuda', **kwargs):\n" + "\n".join(body) + "\n    return kwargs\n"
    )


def _result(src: str) -> tuple[str, str, list]:
    res, new = migrate_text(src, "gen.py")
    return new, str(res.status), [repr(d) for d in res.diagnostics]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_sources())
def test_placement_test_order_changes_no_output(src: str) -> None:
    now = _result(src)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_literal.LiteralRule, "_placement_test", _former_placement_test)
        before = _result(src)
    assert now == before
