import argparse
import json
import re
import shlex

import pytest

from tpu_workbench.bench.cli import build_parser, main
from tpu_workbench.bench.results import read_records


@pytest.fixture(scope="module")
def runfile(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "r.jsonl"
    assert (
        main(
            [
                "run",
                "-w",
                "tiny",
                "-p",
                "train",
                "-d",
                "cpu",
                "-b",
                "1",
                "2",
                "-s",
                "8",
                "--budget",
                "0.05",
                "-o",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    return out


def test_run_writes_records(runfile):
    recs = read_records(runfile)
    assert [(r.workload, r.phase, r.device, r.batch, r.seq) for r in recs] == [
        ("tiny", "train", "cpu", 1, 8),
        ("tiny", "train", "cpu", 2, 8),
    ]
    for r in recs:
        assert r.provenance == "measured" and r.tokens_kind == "total" and r.step_samples_s
        assert r.tokens_per_s == pytest.approx(r.batch * r.seq / r.step_median_s)
        assert r.step_median_s == pytest.approx(sorted(r.step_samples_s)[len(r.step_samples_s) // 2], rel=0.5)
        assert 0 < r.mfu < 1 and r.peak_basis.startswith("measured host-CPU matmul peak")
        assert r.source["versions"]["torch"] and r.source["host"]["hostname"] and r.source["date"]
        assert r.peak_memory_bytes > 10e6 and "resident set" in r.peak_memory_basis


@pytest.mark.parametrize(
    "argv, valid",
    [
        (["run", "-b", "0"], "-b/--batch: must be an integer >= 1, got 0"),
        (["run", "-s", "0"], "-s/--seq: must be an integer >= 1, got 0"),
        (["run", "-s", "x"], "-s/--seq: must be an integer >= 1, got 'x'"),
        (["run", "--budget", "0"], "--budget: must be a number in (0, 3600], got 0"),
        (["run", "--budget", "nan"], "--budget: must be a number in (0, 3600], got nan"),
        (["project", "--batch", "-4"], "--batch: must be an integer >= 1, got -4"),
        (["project", "--batch", "0"], "--batch: must be an integer >= 1, got 0"),
        (["project", "--seq", "0"], "--seq: must be an integer >= 1, got 0"),
        (["project", "--chips", "8", "0"], "--chips: must be an integer from 1 to 1000000, got 0"),
        (["project", "--scaleout-gbps", "0"], "--scaleout-gbps: must be a number > 0, got 0"),
        (
            ["project", "--scaleup-domain", "0"],
            "--scaleup-domain: must be an integer from 1 to 1000000, got 0",
        ),
        (
            ["project", "--compute-efficiency", "1.5"],
            "--compute-efficiency: must be a number in (0, 1], got 1.5",
        ),
        (["project", "--overlap", "-0.1"], "--overlap: must be a number in [0, 1], got -0.1"),
    ],
)
def test_numeric_options_are_checked_at_the_command_line(argv, valid, tmp_path, capsys):
    out = tmp_path / "never.jsonl"
    with pytest.raises(SystemExit) as exc:
        main([*argv, "-o", str(out)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert valid in err and "Traceback" not in err
    assert not out.exists()  # an invalid run writes no record


def test_library_refuses_sizes_no_run_can_have():
    from tpu_workbench.bench.errors import WorkbenchError
    from tpu_workbench.bench.run import run_benchmark, run_matrix

    with pytest.raises(WorkbenchError, match="batch must be an integer >= 1, got 0"):
        run_benchmark("tiny", "train", "cpu", batch=0, seq=8)
    with pytest.raises(WorkbenchError, match="seq must be an integer >= 1"):
        run_matrix(["tiny"], ["train"], ["cpu"], batches=[1], seqs=[8, 0], progress=False)


@pytest.mark.parametrize(
    "text, says",
    [
        ('{"foo": 1}\n', "line 1 of 1 (last line): not a valid record: record missing schema_version"),
        ("[1, 2, 3]\n", "line 1 of 1 (last line): a JSON array, not a record object"),
        ('"hello"\n', "line 1 of 1 (last line): a JSON string, not a record object"),
        ('{"provenance": "meas', "line 1 of 1 (last line): torn/corrupt JSON"),
    ],
)
def test_a_file_without_records_is_one_line_naming_file_and_line(text, says, tmp_path, capsys):
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    assert main(["compare", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{path}: no result record; {says}" in err


def test_bad_lines_among_records_are_skipped_with_a_warning_naming_the_line(runfile, tmp_path, capsys):
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(runfile.read_text() + "[1, 2, 3]\n" + '{"foo": 1}\n')
    assert main(["compare", str(mixed)]) == 0
    captured = capsys.readouterr()
    assert f"warning: {mixed}: skipping line 3 of 4: a JSON array" in captured.err
    assert "skipping line 4 of 4 (last line): not a valid record" in captured.err
    assert "Traceback" not in captured.err and "1.000x" in captured.out


def test_compare_lists_projected_records_instead_of_dropping_them(runfile, tmp_path, capsys):
    proj = tmp_path / "proj.jsonl"
    assert main(["project", "--chip", "H100", "-w", "llama3-8b", "--chips", "8", "-o", str(proj)]) == 0
    both = tmp_path / "both.jsonl"
    both.write_text(runfile.read_text() + proj.read_text())
    capsys.readouterr()
    assert main(["compare", str(both)]) == 0
    out = capsys.readouterr().out
    assert "ratio_vs_cpu" in out and "not compared with the measured runs (1 projected" in out
    assert "H100 SXM" in out and "workbench-roofline-comm" in out
    assert main(["compare", str(proj)]) == 0
    assert "no measured records; 1 projected record(s)" in capsys.readouterr().out


def test_bad_catalog_file_is_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("[[chip]\nname = 'x'\n")
    assert main(["catalog", "list", "--file", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: " in err and "line 1" in err and "Traceback" not in err and err.count("\n") == 1
    neg = tmp_path / "neg.toml"
    neg.write_text(
        '[[price]]\nchip = "H100"\ntier = "custom"\nusd_per_chip_hour = -1\nsource = "x"\ndate = "2026-01"\n'
    )
    assert main(["catalog", "list", "--file", str(neg)]) == 2
    err = capsys.readouterr().err
    assert "positive" in err and err.count("\n") == 1


def test_compare_prints_ratio(runfile, capsys):
    assert main(["compare", str(runfile)]) == 0
    out = capsys.readouterr().out
    assert "ratio_vs_cpu" in out and "1.000x" in out


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["run", "-w", "nope", "--no-progress"], "tiny"),
        (["run", "-d", "quantum", "--no-progress"], "present: cpu"),
        (["catalog", "show", "TPU v9"], "TPU v7"),
        (["project", "--chip", "H900"], "H100 SXM"),
        (["project", "--layout", "weird"], "fsdp+tp"),
        (["compare", "/nonexistent.jsonl"], "not found"),
    ],
)
def test_bad_input_exits_2_naming_choices(argv, needle, capsys):
    assert main(argv) == 2
    assert needle in capsys.readouterr().err


def test_catalog_and_project_print(capsys):
    assert main(["catalog", "list"]) == 0
    assert "Trainium2" in capsys.readouterr().out
    assert main(["project", "--chip", "TPU v7", "-w", "llama3-8b", "--chips", "1", "64"]) == 0
    out = capsys.readouterr().out
    assert "MFU%" in out and "gemm_efficiency=" in out
    assert main(["project", "--vs-published"]) == 0
    out = capsys.readouterr().out
    assert "CALIBRATION" in out and "VALIDATION" in out and "unanchored" in out


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_example_in_the_help_parses_and_every_option_is_explained():
    parser = build_parser()
    subs = _subparsers(parser)
    texts = [parser.format_help(), *(p.format_help() for p in subs.values())]
    examples = [
        line.strip() for t in texts for line in t.splitlines() if line.strip().startswith("tpu-bench ")
    ]
    assert len(examples) >= 15 and {e.split()[1] for e in examples} >= set(subs) - {"validate"}
    for example in examples:
        argv = shlex.split(re.split(r"\s{2,}\(", example)[0])[1:]  # drop a trailing "  (comment)"
        if argv[0] == "demo":
            continue  # the demo parses its own options
        args = parser.parse_args(argv)  # a broken example would exit 2 here
        assert args.command == argv[0]
    for name, sub in subs.items():
        for action in sub._actions:
            if not isinstance(action, argparse._HelpAction):
                assert action.help, (
                    f"tpu-bench {name} {action.option_strings or action.dest} has no help text"
                )
    phase_help = next(a.help for a in subs["run"]._actions if a.dest == "phase")
    listed = phase_help.split(": ", 1)[1].split(" (")[0].split(", ")
    assert sorted(listed) == sorted(set(listed)) == ["decode", "infer", "prefill", "train"]


def test_json_catalog_prints_every_chip(capsys):
    assert main(["catalog", "list", "--json"]) == 0
    chips = json.loads(capsys.readouterr().out)
    assert {"TPU v7", "H100 SXM", "B200"} <= {c["name"] for c in chips}


def test_plot_command_writes_pngs(runfile, tmp_path):
    assert main(["plot", str(runfile), "--kind", "throughput", "mfu", "--outdir", str(tmp_path)]) == 0
    for name in ("throughput.png", "mfu.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"
