import subprocess
import sys

import pytest

from workbench.cli import main
from workbench.plots import (
    plot_cost_per_tier,
    plot_mfu_bars,
    plot_pareto,
    plot_roofline,
    plot_scaling,
    plot_throughput_bars,
)
from workbench.projection import decode_sweep, project, scaling_curve
from workbench.published import published_records


@pytest.fixture(scope="module")
def runfile(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "r.jsonl"
    assert main(["run", "-w", "tiny", "-p", "train", "-d", "cpu", "-b", "1", "2", "-s", "8", "--budget", "0.05",
                 "-o", str(out), "--no-progress"]) == 0
    return out


def test_run_writes_records(runfile, capsys):
    assert len(runfile.read_text().splitlines()) == 2


def test_compare_prints_ratio(runfile, capsys):
    assert main(["compare", str(runfile)]) == 0
    out = capsys.readouterr().out
    assert "ratio_vs_cpu" in out and "1.000x" in out


@pytest.mark.parametrize("argv, needle", [
    (["run", "-w", "nope", "--no-progress"], "tiny"),
    (["run", "-d", "quantum", "--no-progress"], "present: cpu"),
    (["catalog", "show", "TPU v9"], "TPU v7"),
    (["project", "--chip", "H900"], "H100 SXM"),
    (["project", "--layout", "weird"], "fsdp+tp"),
    (["compare", "/nonexistent.jsonl"], "not found"),
])
def test_bad_input_exits_2_naming_choices(argv, needle, capsys):
    assert main(argv) == 2
    assert needle in capsys.readouterr().err


def test_catalog_and_project_print(capsys):
    assert main(["catalog", "list"]) == 0
    assert "Trainium2" in capsys.readouterr().out
    assert main(["project", "--chip", "TPU v7", "-w", "llama3-8b", "--chips", "1", "64"]) == 0
    out = capsys.readouterr().out
    assert "MFU%" in out and "compute_efficiency=" in out
    assert main(["project", "--vs-published"]) == 0
    out = capsys.readouterr().out
    assert "rel.err" in out and "not modelled" in out


def test_help_teaches_with_examples():
    out = subprocess.run([sys.executable, "-m", "workbench.cli", "--help"], capture_output=True, text=True).stdout
    assert "examples:" in out and "tpu-bench run" in out


def test_plot_command_writes_pngs(runfile, tmp_path):
    assert main(["plot", str(runfile), "--kind", "throughput", "mfu", "--outdir", str(tmp_path)]) == 0
    for name in ("throughput.png", "mfu.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"


def test_plot_functions_return_figures_and_mark_provenance(runfile, tmp_path):
    from workbench.catalog import load_catalog
    from workbench.results import load_results

    df = load_results(runfile)
    fig = plot_throughput_bars(df, path=tmp_path / "t.png")
    assert fig.axes[0].get_ylabel().startswith("throughput")
    plot_mfu_bars(df, path=tmp_path / "m.png")
    fig = plot_cost_per_tier([project("H100", "llama3-8b", "decode", 8, "tp", batch=32)], path=tmp_path / "c.png")
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "projected" in labels and "own-hyperscaler" in labels
    plot_pareto(decode_sweep("H100", "llama3-8b", batches=(1, 8)), path=tmp_path / "p.png")
    recs = scaling_curve("TPU v7", "qwen3-235b-a22b", layout="fsdp+ep", chips=(1024, 8192))
    fig = plot_scaling(recs + [r for r in published_records() if r.source["row"] == 5], path=tmp_path / "s.png")
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any("published" in x for x in labels) and any("projected" in x for x in labels)
    plot_roofline([load_catalog().chip("H100")], [project("H100", "llama3-8b", "decode", 1)], path=tmp_path / "r.png")
    assert len(list(tmp_path.glob("*.png"))) == 6
