"""The CLI contract, by a generator rather than a list (issue 34): hypothesis draws arguments for every
subcommand and option of ``tpu-bench`` and ``tpu-migrate`` (types, signs, zero, NaN/inf, huge values, unicode
and odd paths, missing, unwritable and special files, malformed notebooks, records and catalogs) and checks
every answer:

- exit 0 (tpu-migrate: 0, 1 or 3, its documented statuses) with sane output, or exit 2 with one line on
  stderr naming the argument;
- never a traceback (in process: any exception but SystemExit fails the example), never a hang (an alarm
  stops an example after ``LIMIT_S``);
- never a partial or bogus output file: an output named in a refused command is not created, one written
  by a successful command parses (JSONL records, CSV rows, PNGs, Markdown).

Everything runs in this process (the entry points' ``main``), so an example costs milliseconds. The quick
tier draws a few examples per subcommand; the wide tier (``-m slow``) many more, and measured runs and
figures. ``--hypothesis-show-statistics`` prints the examples drawn per subcommand.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import string
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tpu_workbench.bench.cli import main as bench_main
from tpu_workbench.migrate.cli import main as migrate_main

#: Seconds one command may take in process before it counts as a hang.
LIMIT_S = 20
QUICK, WIDE = 4, 60  # examples per subcommand in the quick loop and in the slow tier
TIERS = [pytest.param(QUICK, id="quick"), pytest.param(WIDE, id="wide", marks=pytest.mark.slow)]
RESULTS = Path(__file__).resolve().parents[1] / "results"

# -- drawing values ----------------------------------------------------------------------------------------

NUMBER_TEXT = st.one_of(
    st.sampled_from(
        ["0", "-0", "-1", "1", "nan", "inf", "-inf", "1e300", "1e-300", "99999999999999", "", " ", "x"]
    ),
    st.sampled_from(["0.5", "1.0", "2", "8", "64", "1e3", "4096", "0x10", "1_000", "٣"]),
    st.integers(-(10**20), 10**20).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)
ODD_TEXT = st.one_of(
    st.sampled_from(
        ["", " ", "-", "--", "é", "名前", "a b", "a\nb", "../x", "\\", "'", '"', "%s", "{}", "TPU v7", "h100"]
    ),
    st.text(alphabet=string.ascii_letters + string.digits + "-_.:/ é名", max_size=12),
)
# Paths relative to the example's own folder (see _World): fresh, nested, under a file, a folder, special
# files, unwritable places, unicode.
OUT_PATH = st.sampled_from(
    [
        "out.x",
        "new/dir/out.x",
        "afile/out.x",
        "afile",
        "adir",
        "/dev/null",
        "/proc/out.x",
        "ro/out.x",
        "é名/out.x",
        "sp ace.x",
        "",
        "-",
    ]
)
IN_PATH = st.sampled_from(
    ["missing.x", "adir", "afile", "/dev/null", "empty.x", "binary.x", "records.jsonl", "garbage.jsonl", "ro"]
)


@dataclass
class Outcome:
    code: int
    out: str
    err: str


@dataclass
class _World:
    """A fresh folder per example: a file, a folder, a read-only folder, empty, binary and garbage files,
    and a real record file; outputs named by the example are checked after it."""

    root: Path
    outputs: list[str] = field(default_factory=list)

    @classmethod
    def make(cls, root: Path) -> _World:
        (root / "afile").write_text("x")
        (root / "adir").mkdir()
        (root / "ro").mkdir()
        (root / "empty.x").write_bytes(b"")
        (root / "binary.x").write_bytes(bytes(range(256)))
        (root / "garbage.jsonl").write_text('{"not": "a record"}\n[1,2]\nnope\n')
        src = RESULTS / "tiny-train.jsonl"
        (root / "records.jsonl").write_text(src.read_text() if src.exists() else "")
        os.chmod(root / "ro", 0o555)
        return cls(root)

    def output(self, path: str) -> str:
        self.outputs.append(path)
        return path

    def existing(self) -> set[str]:
        return {p for p in self.outputs if p and p != "-" and os.path.lexists(self.root / p)}


class Hang(Exception):
    pass


def _alarm(_sig, _frame):
    raise Hang("no answer within the time limit")


#: Examples drawn per subcommand in this session (written to reports/cli_generator_examples.json).
EXAMPLES: Counter[str] = Counter()
#: The slowest example per subcommand [s] (written beside the counts).
SLOWEST: dict[str, float] = {}


@pytest.fixture(scope="module", autouse=True)
def _count_examples():
    yield
    if EXAMPLES:
        out = Path(__file__).resolve().parents[1] / "reports" / "cli_generator_examples.json"
        out.parent.mkdir(exist_ok=True)
        out.write_text(
            json.dumps({"examples": dict(sorted(EXAMPLES.items())), "slowest_s": SLOWEST}, indent=1) + "\n"
        )
        print("\nexamples drawn per subcommand:", dict(sorted(EXAMPLES.items())), "slowest [s]:", SLOWEST)


def _name(main: Callable[[list[str]], int], argv: list[str]) -> str:
    if main is migrate_main:
        return "tpu-migrate rules" if argv[:1] == ["rules"] else "tpu-migrate"
    return f"tpu-bench {argv[0]}"


def invoke(
    main: Callable[[list[str]], int], argv: list[str], stdin: bytes = b"", limit_s: int = LIMIT_S
) -> Outcome:
    """Run an entry point in this process: its exit status, stdout and stderr; a hang raises Hang."""
    EXAMPLES[_name(main, argv)] += 1
    out, err = io.StringIO(), io.StringIO()
    old_stdin = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(limit_s)
    started = time.monotonic()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        sys.stdin = old_stdin
    took = time.monotonic() - started
    name = _name(main, argv)
    SLOWEST[name] = max(SLOWEST.get(name, 0.0), round(took, 2))
    if (
        took > limit_s
    ):  # the alarm can land in code that swallows exceptions (a weakref callback): check anyway
        raise Hang(f"{argv}: answered after {took:.0f} s (limit {limit_s} s)")
    return Outcome(int(code or 0), out.getvalue(), err.getvalue())


@contextlib.contextmanager
def world():
    with tempfile.TemporaryDirectory(prefix="tpu-cli-gen-") as d:
        here = os.getcwd()
        os.chdir(d)
        try:
            yield _World.make(Path(d))
        finally:
            os.chdir(here)
            os.chmod(Path(d) / "ro", 0o755)


def check_usage_error(o: Outcome, argv: list[str]) -> None:
    """Exit 2: one line on stderr that says error and names what was wrong (an option or a value given)."""
    lines = [x for x in o.err.splitlines() if x.strip()]
    assert len(lines) == 1, f"{argv}: exit 2 with {len(lines)} stderr lines:\n{o.err}"
    line = lines[0]
    assert "error" in line, line
    assert "Traceback" not in o.err
    named = [a for a in argv if a.startswith("-") and a in line] or [
        a for a in argv if a and (repr(a) in line or a in line or os.path.basename(a) in line)
    ]
    assert named, f"{argv}: the error names no argument: {line}"


def check_bench(o: Outcome, argv: list[str], w: _World, before: set[str]) -> None:
    assert "Traceback" not in o.err, o.err
    assert o.code in (0, 2), f"{argv}: exit {o.code}\n{o.err[-2000:]}"
    if o.code == 2:
        check_usage_error(o, argv)
        assert w.existing() <= before, f"{argv}: refused but wrote {w.existing() - before}"
        return
    for p in w.existing() - before:
        full = w.root / p
        if full.is_file():
            assert full.stat().st_size > 0, f"{argv}: empty output {p}"
            if p.endswith("jsonl") or "-o" in argv:
                for line in full.read_text().splitlines():
                    json.loads(line)


# -- tpu-bench catalog ---------------------------------------------------------------------------------

JSON_VALUE = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(10**30), 10**30),
        st.floats(allow_nan=True, allow_infinity=True),
        ODD_TEXT,
    ),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(ODD_TEXT, inner, max_size=3),
    max_leaves=6,
)
CHIP_FIELD = st.sampled_from(
    [
        "name",
        "peak_tflops",
        "hbm_gb",
        "hbm_bw_gbps",
        "scaleup_bw_gbps",
        "scaleup_domain",
        "prices",
        "aliases",
        "bogus_key",
        "chip",
    ]
)


@st.composite
def catalog_files(draw) -> tuple[str, str]:
    """(file name, text): a valid chip with one field replaced by anything, or any JSON at all."""
    chip = {
        "name": draw(st.sampled_from(["My Chip", "TPU v7", "é名"])),
        "peak_tflops": {"bf16": 100.0},
        "hbm_gb": 16,
        "hbm_bw_gbps": 800,
        "scaleup_bw_gbps": 100,
        "scaleup_domain": 8,
        "prices": [{"tier": "custom", "usd_per_chip_hour": 1.0, "source": "me", "date": "2026-01"}],
    }
    if draw(st.booleans()):
        chip[draw(CHIP_FIELD)] = draw(JSON_VALUE)
    doc = {"chip": [chip]} if draw(st.integers(0, 4)) else draw(JSON_VALUE)
    if draw(st.booleans()):
        return "cat.json", json.dumps(doc, allow_nan=True)
    lines = [
        "[[chip]]",
        *(
            f"{k} = {json.dumps(v, allow_nan=True)}"
            for k, v in chip.items()
            if not isinstance(v, dict | list)
        ),
        "peak_tflops = { bf16 = "
        + draw(st.sampled_from(["100.0", "nan", "inf", "-1", "true", '"x"', "1e400"]))
        + " }",
    ]
    if draw(st.booleans()):
        lines.insert(0, draw(st.sampled_from(["chip = 5", "bogus = 1", "price = 'x'", "[chip]", "x = ["])))
    return "cat.toml", "\n".join(lines) + "\n"


@pytest.mark.parametrize("n", TIERS)
def test_catalog(n):
    @settings(max_examples=n, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(
        action=st.sampled_from(["list", "show"]),
        name=st.one_of(st.none(), ODD_TEXT),
        file=st.one_of(st.none(), catalog_files(), IN_PATH.map(lambda p: (p, None))),
        as_json=st.booleans(),
    )
    def run(action, name, file, as_json):
        with world() as w:
            argv = ["catalog", action]
            if name is not None and name != "--":
                argv.append(name)
            if file is not None:
                path, text = file
                if text is not None:
                    (w.root / path).write_text(text)
                argv += ["--file", path]
            if as_json:
                argv.append("--json")
            if name == "--":  # last: "--" ends the options, so an option after it would be a name
                argv.append(name)
            o = invoke(bench_main, argv)
            check_bench(o, argv, w, set())
            if o.code == 0 and as_json:
                json.loads(o.out)

    run()


# -- tpu-bench project ---------------------------------------------------------------------------------

PROJECT_OPTIONS = {
    "--chip": st.lists(
        st.one_of(st.sampled_from(["TPU v7", "H100 SXM", "B200", "h100"]), ODD_TEXT), min_size=1, max_size=2
    ),
    "-w": st.one_of(st.sampled_from(["llama3-70b", "tiny", "qwen3-235b-a22b", "small-cnn"]), ODD_TEXT),
    "-p": st.sampled_from(["train", "prefill", "decode", "infer", "x"]),
    "--chips": st.lists(NUMBER_TEXT, min_size=1, max_size=3),
    "--layout": st.one_of(
        st.sampled_from(["fsdp", "tp", "fsdp+ep", "dp=2,fsdp=4", "dp=0", "tp=-1", "x=1"]), ODD_TEXT
    ),
    "--batch": st.lists(NUMBER_TEXT, min_size=1, max_size=2),
    "--seq": NUMBER_TEXT,
    "--precision": st.sampled_from(["bf16", "fp8", "fp32", "int4", "x"]),
    "--compute-efficiency": NUMBER_TEXT,
    "--memory-efficiency": NUMBER_TEXT,
    "--overlap": NUMBER_TEXT,
    "--scaleout-gbytes-per-s": NUMBER_TEXT,
    "--scaleup-domain": NUMBER_TEXT,
    "--run-tokens": NUMBER_TEXT,
    "--slices": NUMBER_TEXT,
    "--straggler-cv": NUMBER_TEXT,
    "--price-kind": st.sampled_from(["list", "spot", "committed", "owner-tco", "custom", "x"]),
    "--remat": st.sampled_from(["auto", "none", "full", "x"]),
    "-o": OUT_PATH,
    "--catalog-file": IN_PATH,
}


def _argv(draw, options: dict, outputs: tuple[str, ...], w_outputs: list[str], k: int = 4) -> list[str]:
    argv: list[str] = []
    for opt in draw(st.lists(st.sampled_from(sorted(options)), max_size=k, unique=True)):
        value = draw(options[opt])
        if opt in outputs:
            w_outputs.append(value)
        argv += [opt, *(value if isinstance(value, list) else [value])]
    return argv


@pytest.mark.parametrize("n", TIERS)
def test_project(n):
    @settings(max_examples=n, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(data=st.data(), vs=st.booleans())
    def run(data, vs):
        with world() as w:
            argv = ["project", *_argv(data.draw, PROJECT_OPTIONS, ("-o",), w.outputs)]
            if vs and data.draw(st.integers(0, 3)) == 0:
                argv.append("--vs-published")
            before = w.existing()
            o = invoke(bench_main, argv)
            check_bench(o, argv, w, before)
            if o.code == 0:
                assert not any(len(tok) > 40 and tok.replace(",", "").isdigit() for tok in o.out.split()), (
                    o.out
                )

    run()


# -- tpu-bench compare ---------------------------------------------------------------------------------


@pytest.mark.parametrize("n", TIERS)
def test_compare(n):
    @settings(max_examples=n, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(
        files=st.lists(IN_PATH, min_size=1, max_size=3),
        baseline=st.one_of(st.none(), st.sampled_from(["cpu", "tpu", "cuda", "x", ""])),
        csv=st.one_of(st.none(), OUT_PATH),
    )
    def run(files, baseline, csv):
        with world() as w:
            argv = ["compare", *files]
            if baseline is not None:
                argv += ["--baseline", baseline]
            if csv is not None:
                argv += ["--csv", w.output(csv)]
            before = w.existing()
            o = invoke(bench_main, argv)
            check_bench(o, argv, w, before)
            if o.code == 0 and csv and csv not in before:
                assert (w.root / csv).read_text().count("\n") >= 2  # a header and at least one row

    run()


# -- tpu-bench run / plot / validate / demo: the arguments (measured runs and figures in the wide tier) ------

RUN_OPTIONS = {
    "-w": st.lists(
        st.one_of(st.sampled_from(["tiny", "small-cnn", "llama3-70b"]), ODD_TEXT), min_size=1, max_size=2
    ),
    "-p": st.lists(st.sampled_from(["train", "prefill", "decode", "infer", "x"]), min_size=1, max_size=2),
    "-d": st.lists(
        st.sampled_from(["cpu", "tpu", "cuda", "tpu:7", "cpu:0", "cpu:x", "tpu:-1", "mps", ""]),
        min_size=1,
        max_size=2,
    ),
    "-b": st.lists(NUMBER_TEXT, min_size=1, max_size=2),
    "-s": st.lists(NUMBER_TEXT, min_size=1, max_size=2),
    "--budget": NUMBER_TEXT,
    "--compiled": st.sampled_from(["no", "yes", "both", "x"]),
    "--eager": st.sampled_from(["strict", "fused", "both", "x"]),
    "--precision": st.sampled_from(["fp32", "bf16", "x"]),
    "-o": OUT_PATH,
}
#: One of these makes a run refuse before it measures (so the quick tier never measures).
RUN_REFUSED = st.sampled_from(
    [
        ["-b", "0"],
        ["-w", "tiny", "-s", "100000"],  # -w appends: a vision workload drawn before ignores seq
        ["-d", "tpu:7"],
        ["-d", "nope"],
        ["-o", "afile/r.jsonl"],
        ["--budget", "nan"],
        ["-w", "nope"],
        ["-b", "99999999"],
        ["-s", "-1"],
        ["-p", "x"],
    ]
)


@pytest.mark.parametrize("n", TIERS)
def test_run(n):
    measure = n == WIDE

    @settings(
        phases=[Phase.generate],  # shrinking a measured run takes minutes
        max_examples=n if not measure else 25,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    @given(data=st.data())
    def run(data):
        with world() as w:
            argv = ["run", "--no-progress", *_argv(data.draw, RUN_OPTIONS, ("-o",), w.outputs, k=3)]
            if not measure or "-o" not in argv:
                argv += data.draw(RUN_REFUSED) if not measure else ["-o", w.output("out.jsonl")]
            if measure:
                argv += ["--budget", "0.05", "-s", data.draw(st.sampled_from(["1", "8", "600"]))]
            before = w.existing()
            # a measured run compiles and times on a shared 2-core host: 20 s was seen with -s 8 under load
            o = invoke(bench_main, argv, limit_s=60 if measure else LIMIT_S)
            if o.code == 1:  # a combination failed at run time: said on stderr, no traceback
                assert "FAILED" in o.err and "Traceback" not in o.err
                return
            check_bench(o, argv, w, before)
            if not measure:
                assert o.code == 2

    run()


PLOT_OPTIONS = {
    "--kind": st.lists(
        st.sampled_from(["throughput", "mfu", "cost", "pareto", "scaling", "roofline", "all", "x"]),
        min_size=1,
        max_size=2,
    ),
    "--outdir": OUT_PATH,
    "--chip": st.lists(st.one_of(st.sampled_from(["TPU v7", "H100 SXM"]), ODD_TEXT), min_size=1, max_size=2),
    "-w": st.one_of(st.sampled_from(["llama3-70b", "tiny"]), ODD_TEXT),
}


@pytest.mark.parametrize("n", TIERS)
def test_plot(n):
    draw_figures = n == WIDE

    @settings(
        phases=[Phase.generate],  # shrinking a figure-drawing example takes minutes
        max_examples=n if not draw_figures else 20,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    @given(data=st.data(), files=st.lists(IN_PATH, max_size=2))
    def run(data, files):
        with world() as w:
            argv = ["plot", *files, *_argv(data.draw, PLOT_OPTIONS, ("--outdir",), w.outputs, k=3)]
            if not draw_figures:
                argv += [
                    "--outdir",
                    w.output(
                        data.draw(st.sampled_from(["afile", "afile/p", "/proc/p", "/proc", "afile/x/y", ""]))
                    ),
                ]
            before = w.existing()
            o = invoke(bench_main, argv, limit_s=120)  # six figures on a busy 2-core host: ~20-40 s
            check_bench(o, argv, w, before)
            if not draw_figures:
                assert o.code == 2
            for line in o.out.splitlines() if o.code == 0 else []:
                assert Path(line).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    run()


VALIDATE_REFUSED = st.sampled_from(
    [
        ["--jobs", "0"],
        ["--jobs", "99999999999"],
        ["--timeout", "nan"],
        ["--timeout", "-1"],
        ["--out", "afile/v"],
        ["--out", "afile"],
        ["--compile", "x"],
        ["--device", "nope"],
        ["--arch", "no-such-architecture-x"],
    ]
)


@pytest.mark.parametrize("n", TIERS)
def test_validate_arguments(n):
    wide = n == WIDE  # the quick tier keeps to refusals at the command line (no transformers import)
    refusals = (
        VALIDATE_REFUSED if wide else VALIDATE_REFUSED.filter(lambda r: r[0] not in ("--arch", "--device"))
    )

    @settings(max_examples=n, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(refused=refusals, listing=st.booleans() if wide else st.just(False), as_json=st.booleans())
    def run(refused, listing, as_json):
        with world() as w:
            argv = (
                ["validate", *refused]
                if not listing
                else ["validate", "--list", *(["--json"] if as_json else [])]
            )
            o = invoke(bench_main, argv)
            check_bench(o, argv, w, set())
            if listing:
                assert o.code == 0 and (json.loads(o.out) if as_json else "architectures" in o.out)
            else:
                assert o.code == 2 and not (w.root / "validation").exists()

    run()


DEMO_REFUSED = st.sampled_from(
    [
        ["--examples", "nope"],
        ["--examples", "afile"],
        ["--out", "afile"],
        ["--out", "afile/r"],
        ["--steps", "0"],
        ["--steps", "99999999999"],
        ["--steps", "nan"],
        ["--budget", "inf"],
        ["--budget", "-1"],
        ["--samples", "x"],
        ["--skip", "x"],
        ["--bogus"],
    ]
)


@pytest.mark.parametrize("n", TIERS)
def test_demo_arguments(n):
    @settings(max_examples=n, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(refused=DEMO_REFUSED, quick=st.booleans())
    def run(refused, quick):
        with world() as w:
            argv = ["demo", *(["--quick"] if quick else []), *refused]
            o = invoke(bench_main, argv)
            check_bench(o, argv, w, set())
            assert o.code == 2 and not (w.root / "demo-report").exists()

    run()


# -- tpu-migrate -----------------------------------------------------------------------------------------

CUDA = "import torch\nx = torch.zeros(3).cuda()\n"
SOURCES = st.one_of(
    st.sampled_from(
        [
            CUDA,
            "",
            "import torch\n" + "x = " + " + ".join(["1"] * 1000) + "\n",
            "import torch\nx = torch.zeros(1).cuda() + " + " + ".join(["1"] * 1000) + "\n",
            "import torch\nx = torch.zeros(1).cuda() + "
            + " + ".join(["1"] * 10_000)
            + "\n",  # refused: too deep
            "import torch\n" + "x = " + "(" * 300 + "1" + ")" * 300 + "\n",
            "import torch\ndef f(:\n",
            "# -*- coding: latin-1 -*-\nimport torch\ns = 'é'\nx = torch.zeros(1).cuda()\n",
            "\ufeffimport torch\r\nx = torch.zeros(1).cuda()\r\n",
            "import torch_xla.core.xla_model as xm\nd = xm.xla_device()\n",
        ]
    ),
    st.text(max_size=60).map(lambda t: "import torch\n" + t),
)
NOTEBOOKS = st.one_of(
    st.sampled_from(
        [
            "[1, 2]",
            '"x"',
            "{}",
            '{"cells": "x"}',
            '{"cells": ["x"]}',
            '{"cells": [{"cell_type": "code", "source": 5}]}',
            "{nope",
            "",
        ]
    ),
    SOURCES.map(
        lambda s: json.dumps(
            {
                "cells": [{"cell_type": "code", "source": s, "metadata": {}, "outputs": []}],
                "metadata": {},
                "nbformat": 4,
                "nbformat_minor": 5,
            }
        )
    ),
    JSON_VALUE.map(lambda v: json.dumps({"cells": [v], "nbformat": 4})),
)
FILE_NAMES = st.sampled_from(["a.py", "é名.py", "sp ace.py", "-x.py", "nb.ipynb", "d/b.py", ".hidden.py"])
MIGRATE_OPTIONS = {
    "--select": st.one_of(st.sampled_from(["TPU1", "TPU5,TPU6", "ALL", "TPU999", "", ","]), ODD_TEXT),
    "--ignore": st.one_of(st.sampled_from(["TPU102", "ALL", "X"]), ODD_TEXT),
    "--exclude": st.one_of(st.sampled_from(["*.py", "d/", "!x", "[", "**"]), ODD_TEXT),
    "--output-format": st.sampled_from(["text", "json", "sarif", "github", "x"]),
    "--report": OUT_PATH,
    "--jobs": NUMBER_TEXT,
    "--progress": st.sampled_from(["auto", "always", "never", "x"]),
    "--max-file-seconds": st.one_of(NUMBER_TEXT, st.sampled_from(["90s", "10m", "1ms", "1h", "-1s", "s"])),
    "--max-file-memory": st.one_of(
        NUMBER_TEXT, st.sampled_from(["4G", "512M", "1K", "0", "-1G", "G", "1e30G"])
    ),
    "--stdin-filename": st.one_of(st.sampled_from(["x.py", "x.ipynb"]), ODD_TEXT),
}
MIGRATE_FLAGS = st.lists(
    st.sampled_from(["--write", "--check", "--diff", "--no-diff", "-q", "--follow-symlinks"]),
    max_size=2,
    unique=True,
)


@st.composite
def migrate_case(draw):
    files = {
        name: draw(NOTEBOOKS if name.endswith(".ipynb") else SOURCES)
        for name in draw(st.lists(FILE_NAMES, min_size=1, max_size=3, unique=True))
    }
    named = draw(
        st.lists(
            st.one_of(
                st.sampled_from(sorted(files)),
                st.sampled_from([".", "d", "missing.py", "-", "/dev/null", "afile", "adir"]),
            ),
            max_size=3,
        )
    )
    return files, named, draw(st.binary(max_size=40) | SOURCES.map(str.encode))


def _compiles(text: str) -> bool:
    try:
        compile(text, "x", "exec")
        return True
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False


@pytest.mark.parametrize("n", TIERS)
def test_migrate(n):
    @settings(max_examples=n * 3, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(case=migrate_case(), data=st.data())
    def run(case, data):
        files, named, stdin = case
        with world() as w:
            for name, text in files.items():
                (w.root / name).parent.mkdir(exist_ok=True)
                (w.root / name).write_text(text, encoding="utf-8", errors="surrogatepass")
            argv = [
                *data.draw(MIGRATE_FLAGS),
                *_argv(data.draw, MIGRATE_OPTIONS, ("--report",), w.outputs, k=3),
                "--",
                *named,
            ]
            before = {name: (w.root / name).read_bytes() for name in files}
            existing = w.existing()
            o = invoke(migrate_main, argv, stdin)
            assert "Traceback" not in o.err, o.err
            assert o.code in (0, 1, 2, 3), f"{argv}: exit {o.code}\n{o.err}"
            if o.code == 2:
                check_usage_error(o, argv)
                assert {name: (w.root / name).read_bytes() for name in files} == before, "refused, yet wrote"
                assert w.existing() <= existing
            for name, old in before.items():  # every file old or migrated, never half-written
                new = (w.root / name).read_bytes()
                if new != old and name.endswith(".py"):
                    assert "--write" in argv
                    assert _compiles(new.decode("utf-8", "replace")) or not _compiles(
                        old.decode("utf-8", "replace")
                    )
            assert not [p for p in os.listdir(w.root) if p.startswith(".tpu-migrate-")]

    run()


@pytest.mark.parametrize("n", TIERS)
def test_migrate_rules(n):
    @settings(max_examples=n, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(codes=st.lists(st.one_of(st.sampled_from(["TPU101", "tpu105", "TPU999"]), ODD_TEXT), max_size=2))
    def run(codes):
        with world():
            o = invoke(migrate_main, ["rules", *codes])
            assert o.code in (0, 2) and "Traceback" not in o.err
            assert o.out or o.code == 2

    run()
