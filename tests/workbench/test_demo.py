"""tpu-bench demo: the reduced (--quick) chain end to end in a child process, plus the fast pieces."""

from __future__ import annotations

import hashlib
import math
import subprocess
import sys
from pathlib import Path

import pytest

from tpu_workbench.bench import demo, demo_chain

ROOT = Path(__file__).resolve().parents[2]


def _tree_hash(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(folder)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


@pytest.mark.slow
def test_quick_demo_end_to_end(tmp_path):
    before = _tree_hash(ROOT / "examples")
    out = tmp_path / "report"
    proc = subprocess.run(
        [sys.executable, "-m", "tpu_workbench.bench.cli", "demo", "--", "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"report: {out / 'README.md'}" in proc.stdout
    for step in ("[1/5]", "[2/5]", "[3/5]", "[4/5]", "[5/5]"):
        assert step in proc.stdout  # progress is printed as it goes
    for device in ("cpu", "tpu"):  # and each training step of the long cpu/tpu runs as it arrives
        assert [f"cuda_ddp   {device} step {i} loss" in proc.stdout for i in range(3)] == [True] * 3
    text = (out / "README.md").read_text(encoding="utf-8")
    assert "## Checks: ALL PASSED" in text
    assert "losses agree: cuda_ddp | PASS" in text
    assert "not a TPU" in text  # the emulated "tpu" is labelled as such
    assert "Cheapest training $ per million tokens, compared only within one kind of price" in text
    assert "- owner-tco — " in text and "- list — " in text and "$/M tok (owner-tco)" in text
    assert "does not fit in HBM (needs" in text  # rows that cannot run carry no cost
    for name in ("losses", "throughput", "mfu", "cost", "pareto", "scaling", "roofline"):
        png = out / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
        assert f"]({name}.png)" in text
    for name in ("measured.jsonl", "projected.jsonl", "migration.diff", "migration-report.md", "losses.csv"):
        assert (out / name).stat().st_size > 0, name
    migrated = (out / "migrated" / "cuda_ddp" / "train.py").read_text(encoding="utf-8")
    assert migrated != (ROOT / "examples" / "cuda_ddp" / "train.py").read_text(encoding="utf-8")
    assert "tpu_dist" in migrated and "torch.cuda" not in migrated
    assert _tree_hash(ROOT / "examples") == before, "the demo modified examples/ in place"


def test_failed_check_gives_exit_status_1(tmp_path, capsys):
    empty = tmp_path / "no-examples"
    empty.mkdir()
    rc = demo.main(
        ["--out", str(tmp_path / "r"), "--examples", str(empty), "--skip", "benchmark", "projection"]
    )
    out = capsys.readouterr().out
    assert rc == 1
    assert "FAIL  migrate samples" in out and "FAIL  losses agree" in out
    assert "FAILED" in (tmp_path / "r" / "README.md").read_text()


def test_help_and_bad_arguments(capsys):
    with pytest.raises(SystemExit) as exc:
        demo.main(["--help"])
    assert exc.value.code == 0
    assert "--quick" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        demo.main(["--samples", "nope"])
    assert exc.value.code == 2


def test_parse_losses_orders_steps():
    text = "hello\nstep 1 loss 2.5\nstep 0 loss 3.25\n[rank0] step 9 loss 1\nstep 2 loss nan\n"
    losses = demo_chain.parse_losses(text)
    assert losses[:2] == [3.25, 2.5] and math.isnan(losses[2])


def _run(device, losses, rc=0):
    return demo_chain.TrainingRun("cuda_ddp", device, ["python"], rc, 1.0, list(losses))


def test_loss_check_tolerance():
    ok = demo_chain.LossCheck("cuda_ddp", _run("cpu", [4.0, 3.0]), _run("tpu", [4.0 + 3e-3, 3.0]), rtol=1e-3)
    assert ok.ok and ok.problem() == ""
    bad = demo_chain.LossCheck("cuda_ddp", _run("cpu", [4.0, 3.0]), _run("tpu", [4.0, 3.1]), rtol=1e-3)
    assert not bad.ok and "step 1" in bad.problem()
    short = demo_chain.LossCheck("cuda_ddp", _run("cpu", [4.0, 3.0]), _run("tpu", [4.0]))
    assert "step counts differ" in short.problem()
    failed = demo_chain.LossCheck("cuda_ddp", _run("cpu", [4.0]), _run("tpu", [], rc=1))
    assert "tpu run failed" in failed.problem()
    nan = demo_chain.LossCheck("cuda_ddp", _run("cpu", [4.0]), _run("tpu", [float("nan")]))
    assert not nan.ok


def test_samples_cover_the_bundled_examples():
    for s in demo_chain.SAMPLES:
        assert (demo_chain.examples_dir() / s.path).exists(), s.path
    assert [s.name for s in demo_chain.SAMPLES if not s.runnable] == ["xla_spmd"]


def test_one_number_format_for_every_table():
    import pandas as pd

    from tpu_workbench.bench import tables

    df = pd.DataFrame([{"a": "x|y", "b": 23812.4, "c": float("nan"), "d": 0.5, "e": 1234567.0, "f": 3.5e-7}])
    text = tables.markdown(df)
    assert "x\\|y" in text and "| 23,812 |" in text and "| - |" in text and "| 0.500 |" in text
    assert "1,234,567" in text and "3.5e-07" in text and "e+" not in text
    assert tables.text(df).splitlines()[1].split()[1:3] == ["23,812", "-"]
    assert tables.fmt(35.4813, 3) == "35.5" and tables.fmt(7) == "7" and tables.fmt(None) == "-"
