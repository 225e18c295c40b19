"""Every rule is documented, has a working before/after example, and plugs into the pass once."""

from __future__ import annotations

import re

import pytest
from migrate_helpers import run

from tpu_workbench.migrate.cli import main
from tpu_workbench.migrate.rules import all_rules
from tpu_workbench.migrate.rules.base import select_rules
from tpu_workbench.migrate.transform import _Index

RULES = all_rules()


def test_codes_are_unique_and_well_formed():
    codes = [r.code for r in RULES]
    assert len(codes) == len(set(codes))
    assert all(re.fullmatch(r"TPU\d{3}", c) for c in codes)
    assert len(RULES) >= 50


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_rule_is_documented(rule):
    for field in ("name", "family", "summary", "rationale", "before", "after"):
        assert getattr(rule, field).strip(), f"{rule.code} lacks {field}"
    assert rule.outcome in ("rewritten", "warned", "flagged")
    assert rule.family == rule.__module__.rsplit(".", 1)[1], "a rule lives in its family's module"
    assert rule.before != rule.after or rule.outcome == "flagged"


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_rule_example_is_its_fixture(rule):
    """The documented before/after pair is exactly what the tool produces (and a 2nd run is a no-op)."""
    res = run(rule.before, select=[rule.code, "TPU590", *rule.requires])
    assert res.new_source == rule.after
    assert rule.code in [d.code for d in res.diagnostics]
    if rule.outcome == "flagged":
        assert f"# TODO(tpu-migrate {rule.code})" in res.new_source
        assert any(not d.fixed for d in res.diagnostics if d.code == rule.code)


def test_each_qualified_name_has_one_owner():
    seen: dict[str, str] = {}
    for r in RULES:
        for q in (*r.calls, *r.statements, *r.refs):
            assert q not in seen or seen[q] == r.code, f"{q} claimed by {seen.get(q)} and {r.code}"
            seen[q] = r.code


def test_select_and_ignore_by_prefix():
    assert {r.code for r in select_rules(["TPU5"])} == {r.code for r in RULES if r.code.startswith("TPU5")}
    assert "TPU101" not in {r.code for r in select_rules(None, ["TPU1"])}
    with pytest.raises(ValueError):
        select_rules(["TPU999"])
    _Index(select_rules(["TPU9"]), RULES)


def test_rules_command_lists_and_explains(capsys):
    assert main(["rules"]) == 0
    out = capsys.readouterr().out
    assert all(r.code in out for r in RULES)
    assert main(["rules", "TPU508"]) == 0
    page = capsys.readouterr().out
    assert "optimizer_step" in page and "Before:" in page and "After:" in page
    assert main(["rules", "TPU000"]) == 2


def test_user_doc_lists_every_rule():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "migrate.md").read_text()
    missing = [r.code for r in RULES if f"| {r.code} | {r.name} |" not in doc]
    assert not missing, f"docs/migrate.md rules table lacks {missing}"
