"""The command line: modes, exit codes, formats, stdin, config, report, jobs."""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import subprocess
import sys

import pytest

from tpu_workbench.migrate.cli import EXIT_FINDINGS, EXIT_OK, EXIT_UNPARSABLE, EXIT_USAGE, main

XLA = "import torch_xla.core.xla_model as xm\n\ndevice = xm.xla_device()\n"
FLAG = "import torch\n\nm = torch.cuda.mem_get_info()\n"


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "a.py").write_text(XLA)
    (tmp_path / "clean.py").write_text("x = 1\n")
    return tmp_path


def test_default_prints_diff_and_changes_nothing(tree, capsys):
    assert main([str(tree)]) == EXIT_OK
    out = capsys.readouterr().out
    assert '+device = torch.device("tpu")' in out and "TPU501 [*]" in out
    assert (tree / "a.py").read_text() == XLA


def test_write_applies_and_check_then_passes(tree, capsys):
    assert main(["--check", str(tree)]) == EXIT_FINDINGS
    assert main(["--write", str(tree)]) == EXIT_OK
    assert 'torch.device("tpu")' in (tree / "a.py").read_text()
    assert main(["--check", str(tree)]) == EXIT_OK


def test_check_fails_on_flagged_only(tmp_path):
    (tmp_path / "f.py").write_text(FLAG)
    assert main(["--write", str(tmp_path)]) == EXIT_OK
    assert main(["--check", str(tmp_path)]) == EXIT_FINDINGS  # the TODO is there, the finding remains


def test_unparsable_file_is_reported_untouched_and_others_migrated(tree, capsys):
    bad = "def f(:\n    x = 'cuda'\n"
    (tree / "bad.py").write_text(bad)
    assert main(["--write", str(tree)]) == EXIT_UNPARSABLE
    assert (tree / "bad.py").read_text() == bad
    assert 'torch.device("tpu")' in (tree / "a.py").read_text()
    assert "E999" in capsys.readouterr().out


def test_empty_set_is_fine(tmp_path, capsys):
    assert main([str(tmp_path)]) == EXIT_OK
    assert "nothing to do" in capsys.readouterr().err
    assert main(["--check", str(tmp_path)]) == EXIT_OK


def test_usage_errors(tmp_path, capsys):
    assert main([]) == EXIT_USAGE
    assert main(["--select", "TPU000", str(tmp_path)]) == EXIT_USAGE
    assert main([str(tmp_path / "missing.py")]) == EXIT_USAGE
    with pytest.raises(SystemExit) as e:
        main(["--output-format", "xml", str(tmp_path)])
    assert e.value.code == 2


def test_select_ignore(tree, capsys):
    main(["--select", "TPU2", str(tree)])
    assert "TPU501" not in capsys.readouterr().out
    main(["--ignore", "TPU5", str(tree)])
    assert "TPU501" not in capsys.readouterr().out


@pytest.mark.parametrize("fmt", ["json", "sarif", "github"])
def test_output_formats(tree, capsys, fmt):
    (tree / "f.py").write_text(FLAG)
    main(["--output-format", fmt, str(tree)])
    out = capsys.readouterr().out
    if fmt == "json":
        data = json.loads(out)
        diags = [d for f in data["files"] for d in f["diagnostics"]]
        assert {"TPU501", "TPU204"} <= {d["code"] for d in diags}
        assert {"path", "line", "col", "code", "message", "fixed", "outcome"} <= set(diags[0])
    elif fmt == "sarif":
        data = json.loads(out)
        assert data["version"] == "2.1.0"
        results = data["runs"][0]["results"]
        assert {"TPU501", "TPU204"} <= {r["ruleId"] for r in results}
    else:
        assert "::error file=" in out and "title=TPU204" in out and "::notice file=" in out


def test_report_markdown(tree, tmp_path):
    (tree / "f.py").write_text(FLAG)
    report = tmp_path / "r.md"
    main(["--report", str(report), str(tree)])
    text = report.read_text()
    assert "| TPU501 |" in text and "| TPU204 |" in text and "Converted:" in text
    assert "a.py | changed" in text


def test_stdin_diff_and_write(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.StringIO(XLA))
    assert main(["-"]) == EXIT_OK
    assert '+device = torch.device("tpu")' in capsys.readouterr().out
    monkeypatch.setattr(sys, "stdin", io.StringIO(XLA))
    assert main(["--write", "-"]) == EXIT_OK
    captured = capsys.readouterr()
    assert captured.out == 'import torch\n\ndevice = torch.device("tpu")\n'
    assert "-:3:10: TPU501" in captured.err


def test_pyproject_config(tmp_path, capsys, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[tool.tpu-migrate]\nignore = ["TPU5"]\nexclude = ["skip/"]\n')
    (tmp_path / "a.py").write_text(XLA + "x = torch.zeros(1, device='cuda')\n")
    (tmp_path / "skip").mkdir()
    (tmp_path / "skip" / "b.py").write_text(XLA)
    monkeypatch.chdir(tmp_path)
    main(["."])
    out = capsys.readouterr().out
    assert "TPU101" in out and "TPU501" not in out and "b.py" not in out
    (tmp_path / "pyproject.toml").write_text("[tool.tpu-migrate]\nbogus = 1\n")
    assert main(["."]) == EXIT_USAGE


def test_jobs_pool_gives_the_same_result(tmp_path, capsys):
    for i in range(20):
        (tmp_path / f"m{i}.py").write_text(XLA if i % 2 else FLAG)
    main(["--jobs", "1", "--output-format", "json", str(tmp_path)])
    one = json.loads(capsys.readouterr().out)
    main(["--jobs", "2", "--output-format", "json", str(tmp_path)])
    two = json.loads(capsys.readouterr().out)
    assert one == two


def test_every_help_example_is_a_valid_command_line_and_the_exit_codes_are_the_real_ones():
    from tpu_workbench.migrate import cli

    examples = [ln.strip() for ln in cli.EPILOG.split("exit codes:")[0].splitlines() if ln.startswith("  ")]
    assert len(examples) >= 8
    parser = cli.build_parser()
    for line in examples:
        cmd = line.split("   ")[0].split("| ")[-1].split(" > ")[0]  # the command, without comment or pipes
        argv = shlex.split(cmd)
        assert argv[0] == "tpu-migrate", line
        if argv[1:2] != ["rules"]:
            parser.parse_args(argv[1:])  # raises SystemExit on an option that no longer exists
    listed = {int(m) for m in re.findall(r"^  (\d+) ", cli.EPILOG.split("exit codes:")[1], re.M)}
    assert listed == {EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_UNPARSABLE, cli.EXIT_INTERRUPTED}


def test_console_script_runs():
    out = subprocess.run(
        [sys.executable, "-m", "tpu_workbench.migrate.cli", "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "100"},
    )
    assert out.returncode == 0 and "exit codes:" in out.stdout
