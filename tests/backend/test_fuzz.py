"""The differential fuzz against the CPU (backend/fuzz.py): the same value or both raise — never a silent wrong
answer, never an internal error. A seeded quick subset in the quick loop; the wide run (20,000 calls) in the
slow tier."""

from __future__ import annotations

import pytest
import torch

from tpu_workbench.backend import fuzz


def _assert_honest(rep: fuzz.Report) -> None:
    bad = [e for e in rep.examples if e["verdict"] in ("wrong", "crash", "tpu_accepts")]
    assert not bad, "\n".join(
        f"[{e['verdict']}] seed {e['seed']}: {e['call']} {e['detail']}" for e in bad[:20]
    )


def test_a_quick_seeded_subset_agrees_with_the_cpu():
    rep = fuzz.fuzz(80, seed=11)
    assert rep.counts["same"] + rep.counts["both_raise"] > 40  # the generator makes mostly valid calls
    _assert_honest(rep)


def test_the_index_taking_ops_are_drawn_and_judged():
    ops = ["embedding", "index_add_", "one_hot", "where", "fill_", "mask"]
    rep = fuzz.fuzz(24, seed=3, ops=ops)
    assert set(rep.by_op) == set(ops)
    _assert_honest(rep)


def test_the_judge_tells_a_wrong_answer_from_an_agreement():
    same = fuzz.Call("t", "t", lambda dev: torch.ones(2, device=dev))
    wrong = fuzz.Call("t", "t", lambda dev: torch.ones(2, device=dev) * (2 if dev == "tpu" else 1))
    assert fuzz.judge(same)[0] == "same"
    assert fuzz.judge(wrong)[0] == "wrong"


# The silent wrong answers the 20,000-call run (seed 0) still finds, listed honestly (docs/backend.md, "Known
# differences"): float->int overflow in copy_ (undefined in C++), integer pow overflow, complex edge values at
# inf/NaN (exp2, sigmoid, pow, prod, div, sub, mul), float16 x complex64 typed complex64 (no complex32 here),
# sign/softmax/log_softmax of NaN, conv1d with inf inputs, bfloat16 exp2 of large values. A new one fails.
KNOWN_WRONG_SEEDS = {
    28,
    740,
    1511,
    1642,
    1817,
    2645,
    3711,
    4762,
    4975,
    5358,
    5444,
    6118,
    6268,
    6326,
    6369,
    6949,
    7036,
    7132,
    7168,
    7442,
    8111,
    8206,
    9101,
    9467,
    9539,
    9817,
    9890,
    10391,
    10528,
    10585,
    11681,
    11826,
    11966,
    13368,
    14344,
    14888,
    15308,
    15365,
    16239,
    16672,
    16801,
    16898,
    17959,
    18940,
    19299,
    19756,
}


@pytest.mark.slow
def test_twenty_thousand_seeded_calls_have_no_crash_and_no_new_silent_wrong_answer():
    rep = fuzz.fuzz(20_000, seed=0, keep=20_000)
    assert rep.counts["crash"] == 0, [e for e in rep.examples if e["verdict"] == "crash"][:20]
    new = [e for e in rep.examples if e["verdict"] == "wrong" and e["seed"] not in KNOWN_WRONG_SEEDS]
    assert not new, new[:20]
