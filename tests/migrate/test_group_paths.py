"""Group parsing (migrate.groups) must give byte-identical results to the whole-file path: the new text, the
status, the diff and every finding. The thresholds are lowered so every movable statement can be a group of its
own on small sources; a pass whose assembly is in doubt falls back to one parse (also checked to be taken)."""

from __future__ import annotations

import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_partial_paths import _DEVICE, _HEADERS, _PLAIN, _both, _test_sources

from tpu_workbench.migrate import groups, partial, source
from tpu_workbench.migrate.source import python_tree

sys.path.insert(0, "benchmarks")


@pytest.fixture
def grouped(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Groups whenever two can form; returns, per file, whether the group path answered."""
    monkeypatch.setattr(partial, "MIN_BYTES", 0)
    monkeypatch.setattr(partial, "MIN_HIDDEN_SHARE", 0.0)
    monkeypatch.setattr(groups, "GROUP_BYTES", 1)
    monkeypatch.setattr(groups, "MIN_MOVABLE", 0)
    monkeypatch.setattr(groups, "MAX_CONTEXT", 10**9)
    answered: list[bool] = []
    real = source._migrate_groups

    def spy(*a, **k):
        r = real(*a, **k)
        answered.append(r is not None)
        return r

    monkeypatch.setattr(source, "_migrate_groups", spy)
    return answered


@pytest.mark.slow
def test_every_test_source_gives_the_same_result_grouped(grouped, monkeypatch):
    for s in _test_sources():
        a, b = _both(monkeypatch, s)
        assert a == b, s
    assert sum(grouped) >= 2  # (the group path really answered; test sources are small: few have two groups)


@pytest.mark.slow  # (quick loop: several seconds; runs in the full suite)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.sampled_from(_HEADERS),
    st.lists(st.sampled_from(_DEVICE + _PLAIN + _PLAIN), min_size=1, max_size=14),
    st.lists(st.sampled_from(["\n", "\n\n", "\n# note\n", ""]), min_size=14, max_size=14),
)
def test_generated_files_give_the_same_result_grouped(grouped, monkeypatch, header, parts, gaps):
    text = header + "".join(g + p for g, p in zip(gaps, parts, strict=False))
    a, b = _both(monkeypatch, text)
    assert a == b


@pytest.mark.slow  # (4-16 s: the 60-function benchmark file twice; generated files cover the path quickly)
def test_the_benchmark_file_is_migrated_in_groups(grouped, monkeypatch):
    from bench_migrate_scaling import generate

    text = generate(60)
    red = partial.reduce(text, python_tree(text)[0])
    assert red is not None
    plan = groups.plan(red)
    assert (
        plan is not None and len(plan) == 29
    )  # (every rewritten function but the first, after the imports, a group)
    a, b = _both(monkeypatch, text)
    assert a == b and a[0] == "changed"
    assert grouped[0] is True  # (answered by the group path, not the fallback)
    monkeypatch.setenv(groups.NO_GROUPS_ENV, "1")
    assert not groups.enabled()


def test_an_indented_blank_line_after_a_block_falls_back(grouped, monkeypatch):
    # libcst gives the "    " line to the class's block in its own pass and to the next statement where the class
    # is a placeholder: the statements' lines differ between passes, so the file is parsed in one piece.
    text = (
        "import torch\n\n\ndef first(x):\n    return x\n\n\n"
        "class Meter:\n    def show(self, x):\n        return x.cuda()\n    \n\n"
        "class Other:\n    def go(self, x):\n        return x.cuda()\n"
    )
    a, b = _both(monkeypatch, text)
    assert a == b and a[0] == "changed"
    assert grouped == [False]


def test_a_big_file_parsed_by_ast_in_chunks_gives_the_same_tree(monkeypatch):
    import ast

    monkeypatch.setattr(source, "CHUNK_CHARS", 40)
    sources = _test_sources() + [
        "x = '''\ndef f():\n    pass\n'''\n" * 5,  # a cut inside a string: parsed whole
        "@dec\ndef f():\n    pass\n\n\nif a:\n    pass\nelse:\n    pass\n" * 5,
        "y = (1,\nfoo(2))\nz = 1 + \\\n  2\n" * 8,
    ]
    for s in sources:
        want = ast.dump(ast.parse(s), include_attributes=True)
        assert ast.dump(python_tree(s)[0], include_attributes=True) == want, s


def test_the_output_check_in_chunks_says_what_python_says(monkeypatch):
    """The check that an output parses reads a big text a chunk at a time: it must accept exactly what Python
    accepts, and name the line Python names (a cut inside a string or a bracket falls back to one parse)."""
    import ast

    from tpu_workbench.migrate import one_file

    monkeypatch.setattr(source, "CHUNK_CHARS", 40)
    monkeypatch.setattr(one_file, "CHUNK_CHARS", 40)
    good = _test_sources() + [
        "x = '''\ndef f():\n    pass\n'''\n" * 5,
        "y = (1,\nfoo(2))\nz = 1 + \\\n  2\n" * 8,
        "@dec\ndef f():\n    pass\n\n\nif a:\n    pass\nelse:\n    pass\n" * 5,
    ]
    breaks = ["def g(:\n    pass\n", "else:\n    pass\n", "x = (\n", "  indented = 1\n", "'''\n"]
    checked = 0
    for text in good:
        lines = text.splitlines(keepends=True)
        for k, bad in enumerate(breaks):
            at = len(lines) * (k + 1) // (len(breaks) + 1)
            for candidate in (text, "".join(lines[:at]) + bad + "".join(lines[at:])):
                try:
                    compile(candidate, "<migrated>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
                    want = None
                except SyntaxError as exc:
                    want = f"line {exc.lineno}: {exc.msg}"
                except ValueError:
                    continue
                assert one_file._syntax_error(candidate) == want, candidate
                checked += len(candidate) > 40
    assert checked > 100  # the chunked path was taken
