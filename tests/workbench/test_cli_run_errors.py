"""tpu-bench run: a combination failing at run time is reported once (issue 34: a warning line and a FAILED
line said the same thing twice), and nothing is appended for it."""

from __future__ import annotations

from tpu_workbench.bench import run as runmod
from tpu_workbench.bench.cli import main


def test_a_failing_combination_is_reported_once(tmp_path, monkeypatch, capsys):
    def broken(*_a, **_k):
        raise RuntimeError("the device fell over")

    monkeypatch.setattr(runmod, "run_benchmark", broken)
    out = tmp_path / "r.jsonl"
    assert main(["run", "-w", "tiny", "-d", "cpu", "-s", "8", "--no-progress", "-o", str(out)]) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and err[0].startswith("FAILED") and "the device fell over" in err[0]
    assert not out.exists()
