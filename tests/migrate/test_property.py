"""Property tests over generated snippets: output parses, a second pass changes nothing, and files
without any migratable word come back byte-identical."""

from __future__ import annotations

import libcst as cst
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tpu_workbench.migrate import migrate_source
from tpu_workbench.migrate.source import TRIGGERS, needs_parse

IMPORTS = [
    "import torch",
    "import torch_xla.core.xla_model as xm",
    "import torch_xla.runtime as xr",
    "from torch import cuda",
    "import torch.distributed as dist",
    "import torch_xla",
    "import torch_xla.distributed.parallel_loader as pl",
    "import os",
]
EXPRS = [
    "xm.xla_device()",
    "torch.cuda.is_available()",
    "'cuda'",
    "'cuda:0'",
    "'nccl'",
    "'xla'",
    "x.cuda()",
    "xr.world_size()",
    "xm.get_ordinal()",
    "cuda.device_count()",
    "torch.cuda.amp.GradScaler()",
    "pl.MpDeviceLoader(loader, d)",
    "xm.is_master_ordinal()",
    "torch_xla.device()",
    "t.is_cuda",
    "torch.cuda.memory_allocated()",
    "xm.all_gather(t)",
    "xm.unknown_thing(1)",
    "f'cuda:{i}'",
    "{'cuda': 'nccl'}",
    "x.to(local_rank)",
    "torch.load(p, map_location=lambda s, l: s)",
    "xm.all_reduce('sum', [a, b])",
    "xm.rendezvous('t', b'x')",
    "torch.cuda.current_stream(device=d)",
    "'cuda:{}'.format(r)",
    "xm.RateTracker()",
    "torch.cuda.is_bf16_supported() and ok",
    "['cuda', 'xla']",
    "torch.cuda.get_device_properties(0).major",
    "torch_xla.launch(xm.xla_device)",
    "cfg['xla']",
    "xm.mesh_reduce('a', v, max)",
]
STMTS = [
    "xm.mark_step()",
    "torch.cuda.empty_cache()",
    "xm.master_print(v)",
    "xm.rendezvous('t')",
    "torch.backends.cudnn.benchmark = True",
    "xm.optimizer_step(opt)",
    "v = xm.mesh_reduce('a', v, sum)",
    "torch.cuda.synchronize()",
    "xm.save(sd, 'p')",
    "dist.init_process_group('xla', init_method='xla://')",
    "torch.backends.cuda.matmul.allow_tf32 = flag",
    "pass",
    "torch.cuda.manual_seed(s)",
    "torch.manual_seed(s)",
    "torch.cuda.set_device(r)",
    "xm.master_print(v, flush=True)",
    "xm.reduce_gradients(opt)",
]


@st.composite
def programs(draw):
    lines = draw(st.lists(st.sampled_from(IMPORTS), max_size=4, unique=True))
    body = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["assign", "stmt", "if", "def", "cmp"]))
        e = draw(st.sampled_from(EXPRS))
        s = draw(st.sampled_from(STMTS))
        if kind == "assign":
            body.append(f"v = {e}")
        elif kind == "stmt":
            body.append(s)
        elif kind == "if":
            body.append(f"if {e}:\n    {s}\nelse:\n    {s}")
        elif kind == "cmp":
            body.append(f"ok = {e} == device or {e} in ['gloo', 'nccl']")
        else:
            body.append(f"def f(a=1):\n    # keep me\n    {s}\n    return {e}")
    return "\n".join(lines + body) + "\n"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_output_parses_and_second_pass_is_a_no_op(src):
    once = migrate_source(src)
    cst.parse_module(once.new_source)
    twice = migrate_source(once.new_source)
    assert twice.new_source == once.new_source
    assert not [d for d in twice.diagnostics if d.fixed], "a second pass found something left to rewrite"


@settings(max_examples=50, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200))
def test_text_without_trigger_words_is_returned_unchanged(text):
    """The prefilter: no parse at all (not even for text that is not Python), text returned as is."""
    if not needs_parse(text):
        res = migrate_source(text)
        assert res.new_source == text and not res.changed


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "x = 1",
                "# cuda comment",
                "",
                "   ",
                "s = 'cudaX'",
                "if a:\n    b = 'xla_ext'",
                "y = f(x)  # xla",
            ]
        ),
        min_size=1,
        max_size=8,
    ),
    st.sampled_from(["\n", "\r\n"]),
)
def test_byte_identical_when_no_rule_fires(lines, newline):
    src = newline.join(lines) + newline
    res = migrate_source(src)
    assert res.new_source == src


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(TRIGGERS).flatmap(lambda t: st.tuples(st.just(t[0]), st.from_regex(t[1]))))
def test_every_prefilter_match_contains_its_word(word_and_text):
    # needs_parse runs cheap substring tests before the regex: each regex's matches must contain its word.
    word, text = word_and_text
    assert word in text, (word, text)
    assert needs_parse(text)
