"""Real code nobody here wrote: a sample of installed packages' .py files through --check.

Zero crashes; every rewritten output parses; a second pass changes nothing. (The full run over every
file lives in benchmarks/bench_migrate.py.)
"""

from __future__ import annotations

import os
import random
import shutil
import sysconfig

import libcst as cst
import pytest

from tpu_workbench.migrate import migrate_source
from tpu_workbench.migrate.cli import EXIT_FINDINGS, EXIT_OK, EXIT_UNPARSABLE, main
from tpu_workbench.migrate.engine import run_files
from tpu_workbench.migrate.source import UnparsableError, needs_parse

PACKAGES = ("torch", "jax", "libcst", "numpy", "hypothesis", "pandas")
PARSED = 40  # files the prefilter lets through: parsed, rewritten, re-checked
SKIPPED = 210  # files the prefilter skips: must come back untouched without a parse
MAX_BYTES = 30_000


def corpus_files() -> list[str]:
    site = sysconfig.get_paths()["purelib"]
    files = []
    for pkg in PACKAGES:
        for folder, _dirs, names in os.walk(os.path.join(site, pkg)):
            files.extend(os.path.join(folder, n) for n in names if n.endswith(".py"))
    return sorted(files)


@pytest.fixture(scope="module")
def sample() -> list[str]:
    files = [f for f in corpus_files() if os.path.getsize(f) <= MAX_BYTES]
    if len(files) < 100:
        pytest.skip("installed packages not found")
    rng = random.Random(1234)
    hits = []
    for f in files:
        with open(f, "rb") as fh:
            if needs_parse(fh.read().decode("utf-8", "replace")):
                hits.append(f)
    chosen = rng.sample(hits, min(len(hits), PARSED))
    rest = sorted(set(files) - set(hits))
    return sorted(chosen + rng.sample(rest, min(len(rest), SKIPPED)))


@pytest.mark.slow
def test_sample_runs_without_crash_and_rewrites_are_stable(sample):
    result = run_files(sample, jobs=2)
    assert len(result.files) == len(sample)
    changed = [f for f in result.files if f.status == "changed"]
    assert changed, "the sample should contain files with CUDA/XLA code"
    for f in changed:
        with open(f.path, encoding="utf-8") as fh:
            src = fh.read()
        once = migrate_source(src, f.path)
        cst.parse_module(once.new_source)
        assert migrate_source(once.new_source, f.path).new_source == once.new_source, f.path
    for f in result.files:
        if f.status == "unparsable":  # only genuinely unparsable (or non-round-trippable) files
            with open(f.path, encoding="utf-8", errors="replace") as fh:
                with pytest.raises(UnparsableError):
                    migrate_source(fh.read())


@pytest.mark.slow
def test_check_on_a_copy_of_the_sample(sample, tmp_path):
    parsed = [f for f in sample if needs_parse(open(f, encoding="utf-8", errors="replace").read())]
    for i, f in enumerate(parsed[:10]):
        shutil.copy(f, tmp_path / f"f{i}_{os.path.basename(f)}")
    assert main(["--check", "-q", "--output-format", "json", "--jobs", "2", str(tmp_path)]) in (
        EXIT_OK,
        EXIT_FINDINGS,
        EXIT_UNPARSABLE,
    )
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert main(["--write", "-q", "--output-format", "json", str(tmp_path)]) in (EXIT_OK, EXIT_UNPARSABLE)
    assert main(["--write", "-q", "--output-format", "json", str(tmp_path)]) in (EXIT_OK, EXIT_UNPARSABLE)
    after = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert set(before) == set(after)  # no temp files left, nothing created or lost
