"""Bad or odd input, as a user meets it: a syntax error (reported where Python's parser stops), a run
with nothing to convert, unknown rule codes (named with the valid choices), --select/--ignore resolved
once and handed down."""

from __future__ import annotations

import json

import pytest

from tpu_workbench.migrate import UnparsableError, migrate_paths, migrate_source
from tpu_workbench.migrate import selection as selection_module
from tpu_workbench.migrate.cli import EXIT_NOT_MIGRATED, EXIT_OK, EXIT_USAGE, main
from tpu_workbench.migrate.engine import run_files
from tpu_workbench.migrate.selection import RuleSet, resolve

BAD_LINE_2 = "import torch\ndef f(:\n    return torch.zeros(1, device='cuda')\n"


@pytest.mark.parametrize(
    ("src", "line", "col", "words"),
    [
        (BAD_LINE_2, 2, 7, "invalid syntax"),
        ("import torch\nx = torch.zeros(1,\n        device='cuda'\ny = 2\n", 2, 16, "never closed"),
        ("import torch\nd = 'cuda'\n  e = 1\n", 3, 2, "unexpected indent"),
        ("import torch\nprint 'cuda'\n", 2, 1, "Missing parentheses"),
    ],
)
def test_syntax_error_is_reported_where_python_stops(src, line, col, words):
    with pytest.raises(UnparsableError) as e:
        migrate_source(src, "f.py")
    assert (e.value.line, e.value.col) == (line, col) and words in e.value.message
    with pytest.raises(SyntaxError) as py:
        compile(src, "f.py", "exec")
    assert (py.value.lineno, py.value.offset) == (line, col)  # what Python itself says


def test_syntax_error_position_in_every_output_format(tmp_path, capsys):
    f = tmp_path / "bad.py"
    f.write_text(BAD_LINE_2)
    assert main(["--write", str(f)]) == EXIT_NOT_MIGRATED
    assert f"{f}:2:7: E999 could not be parsed, left untouched: invalid syntax" in capsys.readouterr().out
    assert f.read_text() == BAD_LINE_2
    main(["--output-format", "json", str(f)])
    assert json.loads(capsys.readouterr().out)["files"][0]["error_position"] == [2, 7]
    main(["--output-format", "sarif", str(f)])
    region = json.loads(capsys.readouterr().out)["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
    assert region["region"] == {"startLine": 2, "startColumn": 7}
    main(["--output-format", "github", str(f)])
    assert f"::error file={f},line=2,col=7,title=E999::" in capsys.readouterr().out


def test_syntax_error_in_a_notebook_names_the_cell_and_line(tmp_path):
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": ["# t"]},
        {
            "cell_type": "code",
            "metadata": {},
            "execution_count": None,
            "outputs": [],
            "source": ["import torch\n", "d = 'cuda'"],
        },
        {
            "cell_type": "code",
            "metadata": {},
            "execution_count": None,
            "outputs": [],
            "source": ["x = 1\n", "def f(:\n", "    pass"],
        },
    ]
    nb = tmp_path / "nb.ipynb"
    nb.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    res = migrate_paths([str(nb)]).files[0]
    assert res.status == "unparsable" and res.error.startswith("cell 3, line 2, column 7: invalid syntax")


def test_messages_say_one_file_and_nothing_to_convert(tmp_path, capsys):
    (tmp_path / "clean.py").write_text("x = 1\n")
    assert main([str(tmp_path / "clean.py")]) == EXIT_OK
    err = capsys.readouterr().err
    assert err.startswith("1 file checked;") and "nothing to convert" in err and "%" not in err
    main(["--output-format", "json", str(tmp_path)])
    assert json.loads(capsys.readouterr().out)["converted_percent"] is None
    report = tmp_path / "r.md"
    main(["--report", str(report), str(tmp_path)])
    assert "Converted: nothing to convert" in report.read_text()
    capsys.readouterr()
    (tmp_path / "a.py").write_text("import torch\nd = 'cuda'\nm = torch.cuda.mem_get_info()\n")
    main([str(tmp_path)])
    err = capsys.readouterr().err
    assert err.startswith("2 files checked; 1 would be migrated;") and "50.0% converted" in err


@pytest.mark.parametrize(
    ("option", "value"), [("--select", "TPU000"), ("--ignore", "TPU1O1"), ("--select", "XYZ")]
)
def test_unknown_codes_are_named_with_the_valid_choices(tmp_path, capsys, option, value):
    assert main([option, value, str(tmp_path)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"unknown rule code or prefix in {option}: {value!r}" in err
    assert "TPU101" in err and "TPU5" in err and "ALL" in err and "`tpu-migrate rules`" in err
    if value == "TPU1O1":
        assert "did you mean TPU101" in err


def test_unknown_codes_in_the_config_name_the_file(tmp_path, capsys, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[tool.tpu-migrate]\nignore = ["TPU777"]\n')
    monkeypatch.chdir(tmp_path)
    assert main(["."]) == EXIT_USAGE
    assert "'TPU777'" in capsys.readouterr().err
    (tmp_path / "pyproject.toml").write_text('[tool.tpu-migrate]\nselec = ["TPU1"]\n')
    assert main(["."]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "unknown [tool.tpu-migrate] keys: selec" in err and "select (rule codes" in err


def test_select_and_ignore_are_resolved_once_per_run(tmp_path, monkeypatch, capsys):
    calls = []
    real = selection_module._resolve.__wrapped__

    def counting(select, ignore):
        calls.append((select, ignore))
        return real(select, ignore)

    monkeypatch.setattr(selection_module, "_resolve", counting)
    for i in range(20):  # enough for the worker pool
        (tmp_path / f"m{i}.py").write_text("import torch\nd = 'cuda'\nok = torch.cuda.is_available()\n")
    assert main(["--select", "TPU2", "--jobs", "2", "--output-format", "json", str(tmp_path)]) == EXIT_OK
    codes = {d["code"] for f in json.loads(capsys.readouterr().out)["files"] for d in f["diagnostics"]}
    assert codes == {"TPU201"} and calls == [(("TPU2",), None)]


def test_a_resolved_rule_set_is_used_as_given(tmp_path):
    (tmp_path / "a.py").write_text("import torch\nd = 'cuda'\nok = torch.cuda.is_available()\n")
    res = run_files([str(tmp_path / "a.py")], rules=RuleSet(("TPU101",)))
    assert [d.code for d in res.files[0].diagnostics] == ["TPU101"]
    assert resolve(["tpu1"], ["TPU102"]) == resolve(["TPU1"], ["TPU102"])
    assert "TPU102" not in resolve(["TPU1"], ["TPU102"]) and "TPU101" in resolve(["TPU1"], ["TPU102"])
