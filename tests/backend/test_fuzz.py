"""The differential fuzz against the CPU (backend/fuzz.py): the same value or both raise — never a silent wrong
answer, never an internal error. A seeded quick subset in the quick loop; the wide run (20,000 calls) in the
slow tier."""

from __future__ import annotations

import platform

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


def test_replay_judges_the_calls_of_given_seeds_again():
    rep = fuzz.replay([28, 11966])  # two float -> int32 copies of 1e30 in the seed-0 run
    assert sum(rep.counts.values()) == 2
    assert rep.counts["undefined"] == 2
    assert {e["seed"] for e in rep.examples} == {28, 11966}


def test_a_float_to_int_overflow_is_undefined_not_same_and_a_wrong_defined_element_stays_wrong():
    def copy_into_int(src: torch.Tensor, tpu_fix: bool) -> fuzz.Call:
        def run(dev: str) -> torch.Tensor:
            out = torch.zeros(3, dtype=torch.int32, device=dev).copy_(src.to(dev))
            if dev == "tpu" and tpu_fix:  # a lowering that also got a defined element wrong
                out[0] += 1
            return out

        return fuzz.Call("copy_", "copy_", run, lambda c, t: fuzz._float_to_int_undefined(src, c, t))

    src = torch.tensor([1.5, 1e30, float("nan")])
    assert fuzz.judge(copy_into_int(src, False))[0] == "undefined"
    assert fuzz.judge(copy_into_int(src, True))[0] == "wrong"
    assert fuzz.judge(copy_into_int(torch.tensor([1.5, 2.0, -3.0]), False))[0] == "same"


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="x86's conversion result")
def test_pytorch_defines_no_value_for_a_float_to_int_overflow():
    """The evidence behind ``undefined``: this (x86) CPU converts +inf, -inf and NaN all to INT_MIN (the
    "integer indefinite"), arm64 CPUs and CUDA give INT_MAX for +inf (pytorch/pytorch#154311) and 0 for NaN
    (#87556); the device saturates as XLA does. PyTorch's maintainers call it undefined (#180159)."""
    x = torch.tensor([float("inf"), float("-inf"), float("nan"), 1e30])
    lo, hi = torch.iinfo(torch.int32).min, torch.iinfo(torch.int32).max
    assert x.to(torch.int32).tolist() == [lo, lo, lo, lo]
    assert x.to("tpu").to(torch.int32).cpu().tolist() == [hi, lo, 0, hi]


@pytest.mark.slow
def test_twenty_thousand_seeded_calls_have_no_crash_and_no_silent_wrong_answer():
    rep = fuzz.fuzz(20_000, seed=0, keep=20_000)
    print(
        f"\n20000 calls, seed 0, {rep.seconds:.0f} s: "
        + ", ".join(f"{k} {rep.counts.get(k, 0)}" for k in (*fuzz.VERDICTS, "skipped"))
    )
    assert rep.counts["crash"] == 0, [e for e in rep.examples if e["verdict"] == "crash"][:20]
    wrong = [e for e in rep.examples if e["verdict"] == "wrong"]
    assert not wrong, wrong[:20]
