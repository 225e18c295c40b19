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


@pytest.mark.slow
def test_twenty_thousand_seeded_calls_have_no_silent_wrong_answer_and_no_crash():
    rep = fuzz.fuzz(20_000, seed=0, keep=10_000)
    assert rep.counts["wrong"] == 0 and rep.counts["crash"] == 0, rep.examples[:20]
