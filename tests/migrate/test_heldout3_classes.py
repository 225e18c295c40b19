"""Wrong rewrites found by reading every changed hunk of held-out check 3 (benchmarks/migrate_corpus_heldout3.txt),
each as a class in its own words, each asserting the rewrite it must not make (or the one it must not miss)."""

from __future__ import annotations

import pytest
from migrate_helpers import run


def _code(out: str) -> str:
    """The program without comments (a TODO may quote the rewrite it did not make)."""
    return "\n".join(line for line in out.splitlines() if not line.lstrip().startswith("#"))


# --- a run-time ordinal template with a format spec or a named field (hifi-gan 'cuda:{:d}'.format(rank)) -------
@pytest.mark.parametrize(
    "expr",
    [
        "'cuda:{:d}'.format(rank)",
        "'cuda:{0:d}'.format(rank)",
        "'cuda:{0}'.format(rank)",
        "'cuda:{r}'.format(r=rank)",
        "'cuda:%i' % rank",
        '"cuda:{:d}".format(rank)',
    ],
)
def test_every_spelling_of_a_run_time_ordinal_becomes_the_process_device(expr):
    src = f"import torch\ndef train(rank, model):\n    device = torch.device({expr})\n    return model.to(device)\n"
    out = _code(run(src).new_source)
    assert "cuda" not in out  # the missed rewrite: the model went to 'cuda:0' on a TPU host
    assert "torch.device('tpu')" in out or 'torch.device("tpu")' in out


def test_a_format_template_for_another_word_is_not_a_device():
    src = "def label(i):\n    return 'cudagraph:{:d}'.format(i)\n"
    assert run(src).new_source == src
