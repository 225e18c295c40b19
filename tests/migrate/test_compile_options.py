"""A migrated program compiles for the 'tpu' device, whose torch.compile refuses ``mode=`` and ``dynamic=True``
(TorchTPU 0.2.0, torchtpu-contract.md section 15): no rewrite may leave a torch.compile call with either."""

from __future__ import annotations

import ast

import pytest
from migrate_helpers import codes, run


def _compile_kwargs(src: str) -> list[dict[str, str]]:
    """The keyword arguments (as source text) of every torch.compile call."""
    found = []
    for n in ast.walk(ast.parse(src)):
        if isinstance(n, ast.Call) and ast.unparse(n.func) == "torch.compile":
            found.append({k.arg: ast.unparse(k.value) for k in n.keywords})
    return found


@pytest.mark.parametrize(
    "call",
    [
        'torch.compile(m, backend="openxla", mode="max-autotune", dynamic=True)',
        'torch.compile(m, mode="reduce-overhead")',
        "torch.compile(m, dynamic=True, fullgraph=True)",
        'torch.compile(m, backend="openxla_eval", dynamic=True)',
        "torch.compile(\n    m,\n    mode='max-autotune-no-cudagraphs',\n)",
    ],
)
def test_no_compile_call_keeps_mode_or_dynamic_true(call):
    res = run(f"import torch\nm = {call}\nx = x.cuda()\n")
    for kw in _compile_kwargs(res.new_source):
        assert "mode" not in kw and kw.get("dynamic") != "True"  # the wrong output: refused on 'tpu'
    assert "TPU608" in codes(res)
    assert "fullgraph=True" in res.new_source or "fullgraph" not in call  # other options stay


@pytest.mark.parametrize(
    "call", ["torch.compile(m, mode=args.mode)", "torch.compile(m, dynamic=use_dynamic)"]
)
def test_a_run_time_mode_or_dynamic_is_flagged_once(call):
    res = run(f"import torch\nm = {call}\nx = x.cuda()\n")
    assert call in res.new_source
    assert res.new_source.count("TODO(tpu-migrate TPU608)") == 1


@pytest.mark.parametrize(
    "call", ["torch.compile(m)", "torch.compile(m, dynamic=False)", 'torch.compile(m, backend="tpu")']
)
def test_an_accepted_compile_call_is_left_alone(call):
    res = run(f"import torch\nm = {call}\nx = x.cuda()\n")
    assert call in res.new_source and "TPU608" not in codes(res)


def test_torch_xla_compile_becomes_an_accepted_torch_compile():
    out = run("import torch_xla\nstep = torch_xla.compile(step, full_graph=True)\n").new_source
    assert _compile_kwargs(out) == [{"fullgraph": "True"}]
