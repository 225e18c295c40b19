"""Wrong rewrites found by reading every changed hunk of held-out check 4 (benchmarks/migrate_corpus_heldout4.txt),
each as a class in its own words, each asserting the rewrite it must not make (or the one it must not miss)."""

from __future__ import annotations

import ast

import pytest
from migrate_helpers import run


def _code(out: str) -> str:
    """The program without comments (a TODO may quote the rewrite it did not make)."""
    return "\n".join(line for line in out.splitlines() if not line.lstrip().startswith("#"))


# --- a rank-0 print whose printed values hold a call left for a human (vit_10b_fsdp_example xm.get_memory_info) ---
@pytest.mark.parametrize(
    "printed",
    [
        'f"step {step}, memory: {xm.get_memory_info(device)}"',
        "'mem', xm.get_memory_info(device)",
        '"loss", loss,\n        f"mem {xm.get_memory_info(device)}"',
    ],
    ids=["f-string", "positional", "multi-line"],
)
def test_a_rank_zero_print_holding_a_flagged_call_settles_in_one_pass(printed):
    src = (
        "import torch_xla.core.xla_model as xm\n\n"
        f"def log(step, loss, device):\n    xm.master_print(\n        {printed}\n    )\n"
    )
    first = run(src).new_source
    ast.parse(first)
    assert "xm.master_print" not in _code(first)  # still printed on rank 0 only
    assert first.count("TPU519") == 1
    # the wrong output: a second run put the same TODO again above the print inside the new `if`
    assert run(first).new_source == first


def test_a_rank_zero_print_of_plain_values_keeps_its_indented_body():
    src = "import torch_xla.core.xla_model as xm\n\ndef log(step):\n    xm.master_print(f'step {step}')\n"
    out = run(src).new_source
    assert "== 0:\n        print(f'step {step}')" in out
    assert run(out).new_source == out
