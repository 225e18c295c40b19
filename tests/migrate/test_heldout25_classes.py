"""Wrong rewrites found on held-out check 25 (benchmarks/migrate_corpus_heldout25.txt), each as a class in its own
words, each asserting what the tool must (not) do."""

from __future__ import annotations

import ast

import pytest
from migrate_helpers import run

from tpu_workbench.migrate import one_file

# --- a rewrite inside an f-string's replacement field (pytext's `f"Model on GPU? {p.is_cuda}"` became
# `{(p.device.type == "tpu")}` inside a "-quoted f-string: a syntax error before Python 3.12) ---


@pytest.mark.parametrize(
    "line",
    [
        'print(f"on GPU? {next(m.parameters()).is_cuda}")',
        "print(f'{torch.device(\"cuda\")} {x.is_cuda}')",
        'print(f"{x.is_cuda!r:>8} and {y.cuda()}")',
        'print(f"""{x.is_cuda}""")',
        'print(rf"{x.is_cuda}\\d")',
    ],
)
def test_a_string_written_into_an_f_string_field_takes_the_other_quote(line):
    out = run(f"import torch\n\n\ndef f(m, x, y):\n    {line}\n").new_source
    assert "tpu" in out
    ast.parse(out, feature_version=(3, 8))  # (Python 3.11 and older reject a field quoted like its f-string)


def test_output_that_would_not_parse_is_never_written(monkeypatch):
    class Broken:
        changed = True
        new_source = "import torch\nx = (\n"
        diagnostics: list = []

    monkeypatch.setattr(one_file, "migrate_source", lambda *a, **k: Broken())
    result, text = one_file.migrate_text("import torch\nx = torch.zeros(1).cuda()\n", "a.py")
    assert result.status == "unparsable" and "tool bug" in result.error
    assert text == "import torch\nx = torch.zeros(1).cuda()\n"  # left untouched
