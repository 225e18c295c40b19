"""The wrong-rewrite and missed-idiom classes of issue 31 beyond device checks (tests/migrate/test_flow.py):
each class with several shapes, each asserting the rewrite it must not make."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from migrate_helpers import codes, run

from tpu_workbench.migrate.rules import _helpers


def _code_lines(src: str) -> str:
    return "\n".join(line for line in src.splitlines() if not line.lstrip().startswith("#"))


# --- a run-time ordinal: one rule for every form ------------------------------------------------------------
# The ordinal chose this process's GPU. Measured under torchrun, a deepspeed-style env (LOCAL_RANK + --local_rank)
# and mp.spawn (no LOCAL_RANK) with 2 processes: "tpu" works on every rank; a kept tpu:<rank> raises "invalid
# device ordinal" on rank 1 of mp.spawn. So every form loses the ordinal alike (it used to survive only in
# torch.device("cuda", i)), and code that hands the ordinal back (barrier device_ids) loses that too.
RUN_TIME_FORMS = [
    "torch.device({q}cuda{q}, {i})",
    "torch.device(f{q}cuda:{{{i}}}{q})",
    "torch.device({q}cuda:{{}}{q}.format({i}))",
    "torch.device({q}cuda:%d{q} % {i})",
]


@pytest.mark.parametrize("index", ["rank", "args.local_rank", "self.gpu", "int(os.environ['LOCAL_RANK'])"])
@pytest.mark.parametrize("quote", ["'", '"'])
@pytest.mark.parametrize("form", RUN_TIME_FORMS, ids=["two-args", "f-string", "format", "percent"])
def test_a_run_time_ordinal_becomes_the_process_device(index, quote, form):
    src = "import os\nimport torch\nd = " + form.format(q=quote, i=index) + "\n"
    out = run(src).new_source
    assert f"d = torch.device({quote}tpu{quote})" in out, out
    assert "cuda" not in out


@pytest.mark.parametrize("index", ["0", "1"])
def test_a_literal_index_is_not_a_run_time_ordinal(index):
    out = run(f"import torch\nd = torch.device('cuda', {index})\n")
    assert f"torch.device('tpu', {index})" in out.new_source or "TPU101" in codes(out)


@pytest.mark.parametrize("module", ["torch.distributed", "dist"])
def test_barrier_loses_its_cuda_ordinal(module):
    imp = "import torch.distributed as dist\n" if module == "dist" else ""
    src = f"import torch\n{imp}d = torch.device('cuda', rank)\n{module}.barrier(device_ids=[d.index])\n"
    out = run(src).new_source
    assert f"{module}.barrier()" in out and "device_ids" not in out


# --- device ladders: every branch of the ladder agrees after the migration ----------------------------------
LADDERS = [
    "if torch.cuda.is_available():\n    dev = 'cuda'\nelif torch.backends.mps.is_available():\n    dev = 'mps'\n"
    "else:\n    dev = 'cpu'\n",
    "def pick():\n    if torch.cuda.is_available():\n        return torch.device('cuda', rank)\n"
    "    if torch.backends.mps.is_available():\n        return torch.device('mps')\n    return torch.device('cpu')\n"
    "dev = pick()\n",
    "dev = 'cuda' if torch.cuda.is_available() else 'mps' if torch.backends.mps.is_available() else 'cpu'\n",
]


@pytest.mark.parametrize("ladder", LADDERS, ids=["if-elif", "returns", "ternary"])
@pytest.mark.parametrize(
    "use",
    [
        "if dev == 'cuda':\n    torch.cuda.manual_seed(0)\n",
        "amp = torch.float16 if str(dev).startswith('cuda') else torch.float32\n",
        "x = torch.zeros(2, device=dev)\n",
    ],
)
def test_a_device_ladder_is_migrated_whole(ladder, use):
    out = _code_lines(run("import torch\nrank = 0\n" + ladder + use).new_source)
    # (the seed helper's fallback names CUDA's module where TorchTPU is not loaded)
    out = re.sub(r"def _tpu_random\(\):.*?or torch\.cuda", "", out, flags=re.S)
    assert "cuda" not in out and "'mps'" in out and "'cpu'" in out
    # every ladder asks for a TPU by name: any accelerator would also be a Mac's mps (held-out 16; the form of
    # early returns, or a choice followed by an mps test, since held-out 28's tortoise decoder)
    assert "torch.accelerator.current_accelerator(check_available=True)" in out
    assert "torch.accelerator.is_available()" not in out
    assert "torch.backends.mps.is_available()" in out


def _run_migrated(src: str) -> subprocess.CompletedProcess:
    """Migrate ``src`` and run the result in a fresh interpreter (the "tpu" device registered there)."""
    out = run(src).new_source
    return subprocess.run([sys.executable, "-c", out], capture_output=True, text=True, timeout=120)


# --- torch.load without map_location ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "call, expected",
    [
        ("torch.load(path)", "torch.load(path, map_location=_tpu_restore_location)"),
        (
            "torch.load(path, weights_only=True)",
            "torch.load(path, map_location=_tpu_restore_location, weights_only=True)",
        ),
        ("torch.load(open(p, 'rb'))", "torch.load(open(p, 'rb'), map_location=_tpu_restore_location)"),
        ("torch.load(path, map_location='cpu')", "torch.load(path, map_location='cpu')"),
        ("torch.load(path, 'cpu')", "torch.load(path, 'cpu')"),
        ("torch.load(*a, **k)", "torch.load(*a, **k)"),
    ],
)
def test_torch_load_without_map_location_gets_one(call, expected):
    out = run(f"import torch\nmodel.cuda()\nck = {call}\n").new_source
    assert f"ck = {expected}" in out


@pytest.mark.parametrize("stack", ["import xformers.ops", "from apex import amp"])
def test_a_file_left_as_written_keeps_its_torch_load(stack):
    """A file that stays CUDA's must not load onto "tpu" (the placement helper would fail on the CUDA machine)."""
    out = run(f"import torch\n{stack}\nmodel.cuda()\nck = torch.load(path)\n").new_source
    assert "ck = torch.load(path)\n" in out and "_tpu_restore_location" not in out, out


@pytest.mark.slow
def test_a_resumed_checkpoint_lands_where_it_was_on_cuda(tmp_path):
    """ddim's resume: `states = torch.load(ckpt)` hands one entry to an EMA helper that keeps it as its shadow and
    mixes it with the model's parameters. A checkpoint saved on CUDA must come back on the device (with "cpu"
    the shadow stays on the CPU beside "tpu" parameters); data saved from the CPU stays on the CPU."""
    import torch
    import torch.serialization as serialization

    tag = serialization.location_tag
    serialization.location_tag = lambda storage: "cuda:0"  # what a CUDA machine writes
    try:
        torch.save([{"w": torch.ones(3)}, {"w": torch.zeros(3)}], tmp_path / "ckpt.pth")
    finally:
        serialization.location_tag = tag
    torch.save({"stats": torch.arange(3.0)}, tmp_path / "stats.pt")
    src = (
        "import os, torch\nimport tpu_workbench.backend\n"
        "class EMA:\n    def load_state_dict(self, sd):\n        self.shadow = sd\n"
        "    def update(self, model):\n        self.shadow['w'].mul_(0.5).add_(model.w.data)\n"
        f"log_path = {str(tmp_path)!r}\n"
        "model = torch.nn.Module()\nmodel.w = torch.nn.Parameter(torch.ones(3))\nmodel.cuda()\n"
        "states = torch.load(os.path.join(log_path, 'ckpt.pth'))\nmodel.load_state_dict(states[0])\n"
        "ema = EMA()\nema.load_state_dict(states[1])\nema.update(model)\n"
        "stats = torch.load(os.path.join(log_path, 'stats.pt'))\n"
        "print('ok', ema.shadow['w'].device.type, stats['stats'].numpy().tolist())\n"
    )
    proc = _run_migrated(src)
    assert proc.returncode == 0 and "ok tpu [0.0, 1.0, 2.0]" in proc.stdout, proc.stderr[-2000:]


def test_an_early_return_guard_with_a_bare_torch_load_is_migrated_consistently():
    src = (
        "import torch\ndef load(p):\n    if not torch.cuda.is_available():\n"
        "        return torch.load(p, map_location='cpu')\n    return torch.load(p)\n"
    )
    out = run(src).new_source
    assert "torch.accelerator.is_available()" in out
    assert "return torch.load(p, map_location=_tpu_restore_location)" in out


# --- torch_xla imports inside functions and try blocks ------------------------------------------------------
@pytest.mark.parametrize(
    "src",
    [
        "import torch\ndef dev():\n    import torch_xla.core.xla_model as xm\n    return xm.xla_device()\n",
        "import torch\ntry:\n    import torch_xla.core.xla_model as xm\nexcept ImportError:\n    xm = None\n"
        "d = xm.xla_device()\n",
        "import torch\ndef dev():\n    try:\n        import torch_xla\n        import torch_xla.core.xla_model as xm\n"
        "        return xm.xla_device()\n    except ImportError:\n        return torch.device('cpu')\n",
        "import torch\nclass T:\n    def setup(self):\n        import torch_xla.core.xla_model as xm\n"
        "        self.device = xm.xla_device()\n        xm.mark_step()\n",
    ],
    ids=["function", "try-module", "try-function", "method"],
)
def test_torch_xla_imports_in_functions_and_try_blocks_do_not_stay_behind(src):
    out = run(src).new_source
    assert "torch_xla" not in _code_lines(out), out


# --- TorchScript graph patching: its strings are left alone, flagged ----------------------------------------
@pytest.mark.parametrize(
    "body",
    [
        "for node in graph.findAllNodes('prim::Constant'):\n    if 'cuda' in node.output().type().str():\n"
        "        node.s_('value', 'cpu')\n",
        "for n in traced.graph.nodes():\n    if n.kind() == 'prim::Constant' and str(n).startswith('cuda'):\n"
        "        patch(n)\n",
        "devs = [n for n in m.inlined_graph.findAllNodes('prim::device') if n.output().toIValue() == 'cuda']\n",
    ],
)
def test_torchscript_graph_strings_are_not_touched(body):
    src = "import torch\ndef patch_device(m, graph, traced):\n" + "\n".join(
        "    " + line for line in body.splitlines()
    )
    res = run(src + "\n")
    assert "'cuda'" in res.new_source and "'tpu'" not in _code_lines(res.new_source)
    assert len(res.diagnostics) == 1 and res.diagnostics[0].outcome == "flagged"
    assert "TorchScript graph" in res.diagnostics[0].message


# --- custom_fwd / custom_bwd and autocast queries -----------------------------------------------------------
@pytest.mark.parametrize(
    "deco, expected",
    [
        # (a decorator runs at import: its device type must exist where there is no TPU, held-out 16)
        ("@torch.cuda.amp.custom_fwd", "@torch.amp.custom_fwd(device_type=_tpu_amp_device())"),
        ("@torch.cuda.amp.custom_bwd", "@torch.amp.custom_bwd(device_type=_tpu_amp_device())"),
        (
            "@torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)",
            "@torch.amp.custom_fwd(device_type=_tpu_amp_device(), cast_inputs=torch.float32)",
        ),
        ("@custom_fwd", "@torch.amp.custom_fwd(device_type=_tpu_amp_device())"),
    ],
)
def test_custom_fwd_and_bwd_name_their_device(deco, expected):
    src = (
        "import torch\nfrom torch.cuda.amp import custom_fwd\nclass F(torch.autograd.Function):\n"
        f"    @staticmethod\n    {deco}\n    def forward(ctx, x):\n        return x\n"
    )
    out = run(src).new_source
    assert expected in out and "torch.cuda" not in _code_lines(out)


@pytest.mark.parametrize(
    "expr, expected",
    [
        ("torch.is_autocast_enabled()", 'torch.is_autocast_enabled("tpu")'),
        ("torch.get_autocast_gpu_dtype()", 'torch.get_autocast_dtype("tpu")'),
        ("torch.is_autocast_enabled('cpu')", "torch.is_autocast_enabled('cpu')"),
        ("dist.is_nccl_available()", "torch.distributed.is_backend_available('tpu_dist')"),
    ],
)
def test_autocast_and_backend_queries(expr, expected):
    out = run(f"import torch\nimport torch.distributed as dist\nx = x.cuda()\nv = {expr}\n").new_source
    assert f"v = {expected}" in out


@pytest.mark.slow
def test_migrated_autocast_queries_run_on_tpu():
    src = (
        "import torch\nimport tpu_workbench.backend\n"
        "class F(torch.autograd.Function):\n    @staticmethod\n    @torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)\n"
        "    def forward(ctx, x):\n        return x * 2\n    @staticmethod\n    @torch.cuda.amp.custom_bwd\n"
        "    def backward(ctx, g):\n        return g * 2\n"
        "x = torch.ones(2, device='cuda', requires_grad=True)\n"
        "with torch.cuda.amp.autocast():\n    assert torch.is_autocast_enabled()\n"
        "    assert torch.get_autocast_gpu_dtype() == torch.bfloat16\n    y = F.apply(x)\n"
        "y.sum().backward()\nprint('ok', y.dtype, x.grad.tolist())\n"
    )
    proc = _run_migrated(src)
    assert proc.returncode == 0 and "ok torch.float32 [2.0, 2.0]" in proc.stdout, proc.stderr[-2000:]


# --- backend names as data ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "setup, value",
    [
        ("p.add_argument('--dist-backend', default='nccl')\nargs = p.parse_args()\n", "args.dist_backend"),
        ("BACKENDS = {'gpu': 'nccl', 'cpu': 'gloo'}\n", "BACKENDS[kind]"),
        ("cfg = yaml.safe_load(open('c.yaml'))\n", "cfg['dist']['backend']"),
        ("", "os.environ.get('DIST_BACKEND', 'nccl')"),
        ("", "backend"),
    ],
)
@pytest.mark.parametrize("call", ["dist.init_process_group(backend={v})", "dist.init_process_group({v})"])
def test_a_backend_from_data_is_translated_where_it_reaches_the_process_group(setup, value, call):
    src = (
        f"import argparse, os, yaml\nimport torch.distributed as dist\np = argparse.ArgumentParser()\n{setup}"
    )
    src += call.format(v=value) + "\n"
    res = run(src)
    assert f"_tpu_backend({value.replace('nccl', 'tpu_dist')})" in res.new_source, res.new_source
    assert "TPU405" in codes(res)


@pytest.mark.parametrize(
    "value, expected",
    [
        ("nccl", "tpu_dist"),
        ("NCCL", "tpu_dist"),
        ("gloo", "gloo"),
        ("cuda:nccl", "tpu:tpu_dist"),
        # torchtune's get_distributed_backend(offload_ops_to_cpu=True): the CPU's backend stays (held-out 14)
        ("cuda:nccl,cpu:gloo", "tpu:tpu_dist,cpu:gloo"),
        ("tpu:tpu_dist,cpu:gloo", "tpu:tpu_dist,cpu:gloo"),
    ],
)
def test_the_backend_helper_translates_gpu_names_only(value, expected):
    scope: dict = {}
    exec(_helpers.helper(_helpers.BACKEND).source, scope)
    assert scope["_tpu_backend"](value) == expected and scope["_tpu_backend"](None) is None


# --- xm.save in sharded code ----------------------------------------------------------------------------------
@pytest.mark.parametrize("flag", ["is_fsdp", "not args.fsdp", "cfg.master_only", "rank == 0"])
def test_xm_save_with_a_run_time_master_only_is_flagged(flag):
    src = (
        "import torch_xla.core.xla_model as xm\n"
        f"def save(model, path):\n    xm.save(model.state_dict(), path, master_only={flag})\n"
    )
    res = run(src)
    assert codes(res) == ["TPU512"] and res.diagnostics[0].outcome == "flagged"
    assert f"master_only={flag}" in res.new_source


# --- timing events ----------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize(
    "kw", ["enable_timing=True", "enable_timing=timing", "enable_timing=True, blocking=True"]
)
def test_a_timing_event_becomes_one_whose_elapsed_time_works(kw):
    src = (
        "import torch\nimport tpu_workbench.backend\n"
        f"timing = True\nstart = torch.cuda.Event({kw})\nend = torch.cuda.Event({kw})\n"
        "start.record()\nx = torch.ones(64, 64, device='cuda') @ torch.ones(64, 64, device='cuda')\nend.record()\n"
        "torch.cuda.synchronize()\nms = start.elapsed_time(end)\nassert ms >= 0\nprint('ms', ms)\n"
    )
    out = run(src).new_source
    assert "_TpuTimingEvent()" in out
    proc = subprocess.run([sys.executable, "-c", out], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "ms " in proc.stdout, proc.stderr[-2000:]


# --- autocast dtype chosen at run time: the GradScaler follows it -------------------------------------------------
@pytest.mark.parametrize(
    "dtype_setup, dtype",
    [
        ("self.amp_dtype = torch.float16 if fp16 else torch.bfloat16", "self.amp_dtype"),
        ("self.amp_dtype = {'fp16': torch.float16, 'bf16': torch.bfloat16}[mode]", "self.amp_dtype"),
        ("self.amp_dtype = getattr(torch, cfg.dtype)", "self.amp_dtype"),
    ],
)
@pytest.mark.parametrize(
    "autocast",
    [
        "torch.autocast('cuda', dtype={d})",
        "torch.cuda.amp.autocast(dtype={d})",
        "torch.amp.autocast(device_type='cuda', dtype={d})",
    ],
)
def test_a_scaler_stays_on_when_the_autocast_dtype_is_chosen_at_run_time(dtype_setup, dtype, autocast):
    src = (
        "import torch\nclass T:\n    def __init__(self, fp16, mode, cfg):\n"
        f"        {dtype_setup}\n        self.scaler = torch.cuda.amp.GradScaler()\n"
        f"    def step(self, m, x):\n        with {autocast.format(d=dtype)}:\n            y = m(x)\n"
        "        self.scaler.scale(y).backward()\n"
    )
    out = run(src).new_source
    assert 'torch.amp.GradScaler("tpu")' in out and 'GradScaler("tpu", enabled=False)' not in out
    assert f"dtype={dtype}" in out


@pytest.mark.parametrize(
    "autocast",
    [
        "torch.cuda.amp.autocast()",
        "torch.autocast('cuda', dtype=torch.float16)",
        "torch.cuda.amp.autocast(enabled=True)",
    ],
)
def test_a_scaler_is_disabled_when_every_autocast_becomes_bf16(autocast):
    src = f"import torch\nscaler = torch.cuda.amp.GradScaler()\nwith {autocast}:\n    y = m(x)\n"
    out = run(src).new_source
    assert 'torch.amp.GradScaler("tpu", enabled=False)' in out and "torch.bfloat16" in out


@pytest.mark.parametrize(
    "use",
    [
        "with idist.Parallel(backend=args.backend) as p:\n    p.run(main)\n",
        "accelerator = Accelerator(backend=args.backend)\n",
        "launch(main, backend=args.backend)\n",
    ],
)
def test_a_backend_name_for_a_framework_is_kept_and_flagged(use):
    src = (
        "import argparse\nimport ignite.distributed as idist\np = argparse.ArgumentParser()\n"
        "p.add_argument('--backend', default='nccl', choices=['nccl', 'gloo'])\nargs = p.parse_args()\n" + use
    )
    res = run(src)
    assert "default='nccl'" in res.new_source and "tpu_dist" not in _code_lines(res.new_source)
    assert "TPU401" in codes(res) and all(
        d.outcome == "flagged" for d in res.diagnostics if d.code == "TPU401"
    )
