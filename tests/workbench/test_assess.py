"""tpu-bench assess: bad input refused (exit 2), candidates, error parsing; end to end on a small synthetic
repository: the user's tree stays byte-identical, verdicts and exit codes, a hang is killed."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tpu_workbench.bench.assess.candidates import propose
from tpu_workbench.bench.assess.execute import first_error
from tpu_workbench.bench.assess.workspace import check_input, tree_digest
from tpu_workbench.bench.cli import main
from tpu_workbench.bench.errors import WorkbenchError

TRAIN = textwrap.dedent("""\
    import sys
    import torch
    import torch.nn as nn

    device = "cuda" if torch.cuda.is_available() else "cpu"


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(50, 16)
            self.out = nn.Linear(16, 50)

        def forward(self, x):
            return self.out(self.emb(x))


    if __name__ == "__main__":
        model = Net().to(device)
        for step in range(2):
            x = torch.randint(0, 50, (2, 4 + step), device=device)
            model(x).sum().backward()
        open("../escaped.txt", "w").write("outside its folder")  # lands in the copy's parent, never the user's
        open("out.txt", "w").write("inside")
        print("done", file=sys.stderr)
""")


def make_repo(root: Path) -> Path:
    (root / "repo").mkdir(parents=True)
    (root / "repo" / "train.py").write_text(TRAIN)
    (root / "repo" / "broken.py").write_text(
        "if __name__ == '__main__':\n    raise SystemExit('broken: ' + 1)\n"
    )
    (root / "repo" / "hang.py").write_text("import time\nif __name__ == '__main__':\n    time.sleep(600)\n")
    (root / "repo" / "tests").mkdir()
    (root / "repo" / "tests" / "test_x.py").write_text("def test_x():\n    assert 1\n")
    return root / "repo"


def test_bad_input_is_refused_with_exit_2(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "README").write_text("no python")
    (tmp_path / "file.py").write_text("x = 1\n")
    for path in (tmp_path / "missing", tmp_path / "file.py", tmp_path / "empty"):
        with pytest.raises(WorkbenchError):
            check_input(path)
        assert main(["assess", str(path), "--out", str(tmp_path / "o")]) == 2
    assert "holds no Python" in capsys.readouterr().err
    assert main(["assess", str(tmp_path), "--tpu", "TPU v99", "--out", str(tmp_path / "o")]) == 2


def test_candidates_are_scripts_with_a_main_guard_and_the_tests_folder(tmp_path):
    repo = make_repo(tmp_path)
    (repo / "lib.py").write_text("def f():\n    return 1\n")
    cmds = [c["command"] for c in propose(repo)]
    assert cmds[0].endswith("pytest -x -q tests")
    assert {"python train.py", "python broken.py", "python hang.py"} <= set(cmds)
    assert "python lib.py" not in cmds


def test_pytest_counts_with_and_without_a_summary():
    from tpu_workbench.bench.assess.execute import test_summary

    assert (
        test_summary("..F\n==== 1 failed, 2 passed, 3 warnings in 2.1s ====\n")
        == "1 failed, 2 passed, 3 warnings"
    )
    assert test_summary("tests/test_a.py ..F.  [ 40%]\n..") == "before it stopped: 5 passed, 1 failed"
    assert test_summary("hello\n") is None


def test_html_escapes_and_keeps_code_blocks():
    from tpu_workbench.bench.assess.report import to_html

    page = to_html("# T\n\n- a <b>\n\n```\nx = '<y>'\n```\n| a | b |\n|---|---|\n| 1 | 2 |\n")
    assert "<h1>T</h1>" in page and "<li>a &lt;b&gt;</li>" in page
    assert "<pre>x = &#x27;&lt;y&gt;&#x27;\n</pre>" in page and "<td>1</td><td>2</td>" in page
    assert "<b>" not in page.replace("<body>", "")


def test_first_error_is_the_exception_that_ended_the_run():
    log = "noise\nTraceback (most recent call last):\n  File \"x\", line 1\n    y()\nKeyError: 'k'\n"
    assert first_error(log) == "KeyError: 'k'"
    assert first_error("E   assert 1 == 2\nFAILED t.py::x") == "assert 1 == 2"
    assert first_error("all good") is None


@settings(max_examples=30, deadline=None)
@given(st.text(max_size=400))
def test_first_error_never_raises(text):
    out = first_error(text)
    assert out is None or len(out) <= 500


@pytest.mark.slow
def test_assess_end_to_end_leaves_the_tree_byte_identical(tmp_path):
    repo = make_repo(tmp_path)
    before = tree_digest(repo)
    out = tmp_path / "out"
    code = main(
        [
            "assess", str(repo), "--out", str(out), "--timeout", "120", "--jobs", "2", "--no-progress",
            "--run", "python train.py", "--run", "python broken.py",
        ]
    )  # fmt: skip
    assert tree_digest(repo) == before
    assert not (tmp_path / "escaped.txt").exists() and not (repo / "out.txt").exists()
    import json

    data = json.loads((out / "assessment.json").read_text())
    by = {c["command"]: c for c in data["commands"]}
    assert by["python train.py"]["outcome"] == "runs on tpu"
    assert by["python train.py"]["on_tpu"] is True
    assert "aten::embedding" in by["python train.py"]["cpu"]["probe"]["aten_ops"]
    assert by["python train.py"]["torchtpu_020_gaps"] == []
    # the TorchTPU 0.2.0 check reads what reached the device, by overload
    assert by["python train.py"]["torchtpu_gaps_from"] == "tpu device"
    assert "aten::embedding" in by["python train.py"]["tpu"]["probe"]["device_ops"]
    assert by["python broken.py"]["outcome"] == "fails on cpu too"
    assert "TypeError" in by["python broken.py"]["cpu"]["first_error"]
    assert data["migration"]["rewritten"] >= 2
    assert data["model"]["parameters"] == 50 * 16 + 16 * 50 + 50 and data["model"]["unit"] == "token"
    assert data["model"]["forward_flops_per_token"] == 2 * 16 * 50  # the Linear; the embedding is a lookup
    shapes = by["python train.py"]["tpu_recompiles"]["shapes"]
    assert shapes and shapes[0]["distinct_shapes"] == 2
    assert code == 0 and data["verdict"]["exit_status"] == 0
    stored = (out / "tasks.jsonl").read_text().splitlines()
    assert len(stored) == 4  # two commands x (cpu, tpu), appended as each finished
    again = main(["assess", str(repo), "--out", str(out), "--no-progress", "--timeout", "120",
                  "--run", "python train.py", "--run", "python broken.py"])  # fmt: skip
    assert (
        again == code and (out / "tasks.jsonl").read_text().splitlines() == stored
    )  # resumed: nothing rerun
    md = (out / "assessment.md").read_text()
    assert md.index("Verdict") < md.index("## Commands") < md.index("## Cost") < md.index("## Migration")
    assert "<table>" in (out / "assessment.html").read_text()


@pytest.mark.slow
def test_a_hanging_command_is_killed_and_reported(tmp_path):
    repo = make_repo(tmp_path)
    code = main(
        [
            "assess",
            str(repo),
            "--out",
            str(tmp_path / "o"),
            "--timeout",
            "4",
            "--no-progress",
            "--run",
            "python hang.py",
        ]
    )
    import json

    data = json.loads((tmp_path / "o" / "assessment.json").read_text())
    (cmd,) = data["commands"]
    assert cmd["cpu"]["status"] == "timeout" and "killed" in cmd["cpu"]["first_error"]
    assert code == 2  # every command fails before the migration: nothing to compare


def test_findings_quote_the_original_line_and_effort_ranks_files(tmp_path):
    import shutil

    from tpu_workbench.bench.assess.migration import migrate_copy

    src = tmp_path / "orig"
    src.mkdir()
    (src / "a.py").write_text(
        "import torch\ntorch.cuda.set_device(0)\ntorch.cuda.manual_seed(1)\nx = torch.zeros(2, device='cuda')\n"
    )
    (src / "b.py").write_text("import torch\ny = torch.ones(1, device='cuda')\n")
    copy = tmp_path / "copy"
    shutil.copytree(src, copy)
    m = migrate_copy(copy, src)
    assert (src / "a.py").read_text().count("cuda") == 3  # the original is untouched
    lines = (src / "a.py").read_text().splitlines()
    assert any(f["findings"] for f in m["files"] if f["path"] == "a.py")
    for f in m["files"]:
        for x in f["findings"]:
            assert x["source"] == lines[x["line"] - 1].strip()
    assert [f["path"] for f in m["files"]][0] == "a.py"  # more work first
    assert m["rewritten"] >= 2 and m["effort_min"] > 0


def test_torchtpu_020_gaps_name_only_known_absent_ops():
    from tpu_workbench.bench.assess.torchtpu_gaps import gaps

    found = gaps(
        ["aten::mm", "aten::median.dim", "aten::linalg_cholesky_ex", "aten::add.Tensor", "aten::_ctc_loss"]
    )
    assert [g["op"] for g in found] == ["aten::median.dim", "aten::linalg_cholesky_ex", "aten::_ctc_loss"]
    # the full table, not a short list: an op no list named, and composites that run there
    assert [g["op"] for g in gaps(["aten::kthvalue", "aten::logsumexp", "aten::einsum"])] == [
        "aten::kthvalue"
    ]
    assert gaps([]) == []


@settings(max_examples=25, deadline=None)
@given(
    st.sampled_from(["--timeout", "--chips", "--tokens", "--jobs"]),
    st.one_of(st.integers(max_value=0).map(str), st.sampled_from(["abc", "", "nan", "-1e9", "1e999x"])),
)
def test_bad_numbers_are_refused_before_anything_runs(tmp_path_factory, flag, value):
    out = tmp_path_factory.mktemp("o")
    with pytest.raises(SystemExit) as exc:
        main(["assess", str(out), flag, value, "--out", str(out / "x")])
    assert exc.value.code == 2


def test_out_inside_the_tree_and_candidates_on_request(tmp_path):
    from tpu_workbench.bench.assess import AssessOptions, assess
    from tpu_workbench.bench.assess.pipeline import _commands

    repo = make_repo(tmp_path)
    with pytest.raises(WorkbenchError, match="inside the assessed tree"):
        assess(AssessOptions(path=repo, out=repo / "report"))
    assert not (repo / "report").exists()
    cands = propose(repo)
    assert _commands(AssessOptions(path=repo, run=["python x.py"]), cands) == [
        {"kind": "run", "command": "python x.py", "source": "user"}
    ]
    confirmed = _commands(AssessOptions(path=repo, candidates=True), cands)
    assert [c["command"] for c in confirmed] == [c["command"] for c in cands]


def test_a_transformers_decoder_gets_the_full_projection_and_others_the_compute_term():
    from tpu_workbench.bench.assess.cost import project_cost

    hf = {"model_type": "gpt2", "vocab_size": 500, "n_embd": 32, "n_layer": 2, "n_head": 2,
          "activation_function": "gelu_new", "tie_word_embeddings": True}  # fmt: skip
    counts = {"forward_flops_per_token": 1e5, "unit": "token", "hf_config": hf, "seq": 64}
    full = project_cost(counts, ["H100 SXM", "TPU v7"], 8, 1e9)
    assert full["full_projection"] and "plain MLP" in full["model"]
    assert all(0 < r["mfu"] < 1 and r["tokens_per_s_per_chip"] > 0 for r in full["rows"])
    plain = project_cost({**counts, "hf_config": None}, ["H100 SXM", "TPU v7"], 8, 1e9)
    assert not plain["full_projection"] and "compute term" in plain["model"]
    # the compute term ignores memory and overheads: never slower than the full projection
    assert all(
        p["tokens_per_s_per_chip"] >= f["tokens_per_s_per_chip"]
        for p, f in zip(plain["rows"], full["rows"], strict=True)
    )
