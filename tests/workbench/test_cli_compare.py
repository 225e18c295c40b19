"""tpu-bench compare keeps runs from different files apart unless --pool, and flags noisy cells (issue 34)."""

from __future__ import annotations

import shutil
from pathlib import Path

from tpu_workbench.bench.cli import main
from tpu_workbench.bench.compare import NOISY_IQR_PCT, compare_table
from tpu_workbench.bench.results import load_results

RESULTS = Path(__file__).resolve().parents[2] / "results"


def test_runs_from_two_files_are_not_merged_unless_pooled(tmp_path, capsys):
    a, b = tmp_path / "mine.jsonl", tmp_path / "committed.jsonl"
    shutil.copy(RESULTS / "tiny-train.jsonl", a)
    shutil.copy(RESULTS / "tiny-train.jsonl", b)
    df = load_results(str(a), str(b))
    apart = compare_table(df)
    assert set(apart["source"]) == {"mine.jsonl", "committed.jsonl"} and (apart["runs"] == 1).all()
    assert (apart.loc[apart["variant"] == "cpu", "ratio_vs_cpu"] == 1.0).all()  # each file's own baseline
    pooled = compare_table(df, pool=True)
    assert "source" not in pooled and (pooled["runs"] == 2).all() and len(pooled) == len(apart) // 2
    assert main(["compare", str(a), str(b)]) == 0
    assert "kept apart (--pool merges them)" in capsys.readouterr().out
    assert main(["compare", str(a), str(b), "--pool"]) == 0
    assert "kept apart" not in capsys.readouterr().out


def test_a_baseline_in_another_file_still_gives_a_ratio(tmp_path):
    lines = (RESULTS / "tiny-train.jsonl").read_text().splitlines()
    cpu = [x for x in lines if '"device": "cpu"' in x and '"compiled": false' in x]
    others = [x for x in lines if x not in cpu]
    (tmp_path / "cpu.jsonl").write_text("\n".join(cpu) + "\n")
    (tmp_path / "tpu.jsonl").write_text("\n".join(others) + "\n")
    table = compare_table(load_results(str(tmp_path / "cpu.jsonl"), str(tmp_path / "tpu.jsonl")))
    assert table["ratio_vs_cpu"].notna().all()


def test_noisy_cells_are_flagged(capsys):
    table = compare_table(load_results(str(RESULTS / "tiny-phases.jsonl")))
    assert (table["noisy"] == (table["iqr_pct"] > NOISY_IQR_PCT)).all() and table["noisy"].any()
    assert main(["compare", str(RESULTS / "tiny-phases.jsonl")]) == 0
    out = capsys.readouterr().out
    assert "NOISY" in out and f"IQR above {NOISY_IQR_PCT:g}% of the median" in out


def test_the_per_record_table_flags_noisy_runs_too():
    """The notebooks' per-record table (analysis.measured_table) flags a record whose IQR is above the
    threshold, as compare does for a cell: the committed tiny-phases runs hold both kinds."""
    from tpu_workbench.bench import analysis

    table = analysis.measured_table(analysis.load_frames(files=[str(RESULTS / "tiny-phases.jsonl")]))
    noisy = table["IQR %"] > NOISY_IQR_PCT
    assert noisy.any() and not noisy.all()
    assert (table.loc[noisy, "noisy"] == "NOISY").all() and (table.loc[~noisy, "noisy"] == "").all()
