"""The answers notebooks 03, 04 and 05 show first: ranked by $/M output, no number for what cannot run, the
committed examples kept apart from the user's runs."""

from __future__ import annotations

import math

import pandas as pd

from tpu_workbench.bench import serving_answers as sa
from tpu_workbench.bench.projection import serving_views as sv


def test_cost_answer_ranks_by_output_price_and_names_why_not():
    costs = sv.cost_table(["H100 SXM", "TPU v7", "TPU v6e"], "llama3-70b", target=20.0)
    sentence, short = sa.cost_answer(costs, target=20.0)
    priced = costs[costs["why not"] == ""].sort_values("$/M output")
    assert list(short["chip"])[: len(priced)] == list(priced["chip"])
    assert sentence.startswith(f"Cheapest at >= 20 output tok/s/user (projected): {priced.iloc[0]['chip']}")
    # TPU v6e has no owner-tco price: last, with the reason and no dollar figure
    last = short.iloc[-1]
    assert last["chip"] == "TPU v6e" and last["answer"].startswith("no price:") and "$" not in last["answer"]


def test_cost_answer_when_nothing_meets_the_target():
    costs = sv.cost_table(["H100 SXM"], "llama3-70b", target=5000.0)
    sentence, short = sa.cost_answer(costs, target=5000.0)
    assert sentence.startswith("No chip serves this") and short.iloc[0]["answer"].startswith(
        "no price: misses"
    )


def test_replica_answer_gives_no_number_where_the_replica_does_not_fit():
    t = sa.replica_answer("H100 SXM", "llama3-70b", [1, 8])
    one, eight = t.to_dict("records")
    assert one["why not"].startswith("does not fit") and math.isnan(one.get("$/M output", math.nan))
    assert eight["why not"] == "" and eight["$/M output"] > 0 and eight["output tok/s/chip"] > 0


def test_mfu_answer_decode_is_bandwidth_bound():
    sentence, short = sa.mfu_answer("TPU v7", "llama3-70b", seq=8192)
    d = short[short["phase"] == "decode"].iloc[0]
    assert d["MBU % (decode)"] > d["MFU % (causal)"] and "bandwidth-bound" in sentence
    t = short[short["phase"] == "train"].iloc[0]
    assert t["MFU % (causal)"] < t["MFU % (palm)"]


def test_scaling_answer_names_series_that_never_fit():
    sentence, short = sa.scaling_answer(["H100 SXM"], [("llama3-70b", ["dp", "fsdp"])], [1, 8, 64])
    rows = {r["layout"]: r["H100 SXM"] for r in short.to_dict("records")}
    assert rows["dp"] == "does not fit at any count" and "% (64 vs" in rows["fsdp"]
    assert "fsdp" in sentence


def test_source_tables_keep_committed_examples_apart():
    table = pd.DataFrame(
        [
            {"provenance": "measured", "source": "this run"},
            {"provenance": "measured", "source": "tiny-phases.jsonl"},
            {"provenance": "measured", "source": "gpu.jsonl"},
            {"provenance": "projected", "source": ""},
        ]
    )
    groups = sa.source_tables(table, ["results/tiny-phases.jsonl"])
    assert list(groups) == ["run here", "your file", sa.EXAMPLES, "projected"]
    assert list(groups[sa.EXAMPLES]["source"]) == [f"{sa.EXAMPLES}: tiny-phases.jsonl"]
    assert list(groups["your file"]["source"]) == ["your file: gpu.jsonl"]
    assert sa.source_tables(pd.DataFrame(), []) == {}
