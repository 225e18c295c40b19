"""Every idiom of both tables in migration-idioms.md gets its outcome (R = rewritten, R! = warned, F = flagged)."""

from __future__ import annotations

import pytest
from migrate_helpers import run

XM = "import torch\nimport torch_xla\nimport torch_xla.core.xla_model as xm\nimport torch_xla.runtime as xr\n"
CU = "import os\nimport torch\nimport torch.distributed as dist\n"

# (snippet, code, outcome, text that must be in the output or None)
XLA_TABLE = [
    ("d = xm.xla_device()", "TPU501", "rewritten", 'torch.device("tpu")'),
    ("d = xm.xla_device(1)", "TPU501", "rewritten", 'torch.device("tpu", 1)'),
    ("d = torch_xla.device()", "TPU501", "rewritten", 'torch.device("tpu")'),
    ("d = torch.device('xla')", "TPU502", "rewritten", "torch.device('tpu')"),
    ("t = torch.ones(1, device='xla:1')", "TPU502", "flagged", "'xla:1'"),
    ("t = torch.ones(1, device='xla:0')", "TPU502", "rewritten", "'tpu:0'"),
    ("ok = t.device.type == 'xla'", "TPU102", "warned", "== 'tpu'"),
    ("ok = xm.is_xla_tensor(t)", "TPU503", "rewritten", 't.device.type == "tpu"'),
    ("hw = xm.xla_device_hw(d)", "TPU504", "warned", "torch.device(d).type.upper()"),
    ("ds = xm.get_xla_supported_devices()", "TPU505", "warned", "torch.accelerator.device_count()"),
    ("xm.mark_step()", "TPU506", "warned", None),
    ("torch_xla.sync()", "TPU506", "warned", None),
    ("xm.mark_step(wait=True)", "TPU506", "warned", "torch.accelerator.synchronize()"),
    ("with torch_xla.step():\n    f()", "TPU506", "warned", "\nf()"),
    ("xm.wait_device_ops()", "TPU507", "rewritten", "torch.accelerator.synchronize()"),
    ("xm.optimizer_step(opt, barrier=True)", "TPU508", "warned", "opt.step()"),
    ("xm.reduce_gradients(opt)", "TPU508", "warned", "_tpu_all_reduce_gradients(opt)"),
    ("gs = xm._fetch_gradients(opt)", "TPU508", "warned", "gs = _tpu_fetch_gradients(opt)"),
    ("n = xm.xrt_world_size()", "TPU509", "rewritten", "n = _tpu_world_size()"),
    ("r = xm.get_ordinal()", "TPU509", "rewritten", "r = _tpu_rank()"),
    ("n = xr.world_size()", "TPU509", "rewritten", "n = _tpu_world_size()"),
    ("r = xr.global_ordinal()", "TPU509", "rewritten", "r = _tpu_rank()"),
    ("r = xr.local_ordinal()", "TPU509", "rewritten", 'os.environ.get("LOCAL_RANK", 0)'),
    ("r = xm.get_local_ordinal()", "TPU509", "rewritten", 'os.environ.get("LOCAL_RANK", 0)'),
    ("n = xr.global_runtime_device_count()", "TPU601", "warned", "n = _tpu_world_size()"),
    ("n = xr.addressable_device_count()", "TPU601", "warned", "torch.accelerator.device_count()"),
    ("i = xr.process_index()", "TPU601", "warned", "i = _tpu_rank()"),
    ("m = xm.is_master_ordinal()", "TPU510", "rewritten", 'LOCAL_RANK", 0)) == 0'),
    ("m = xm.is_master_ordinal(local=False)", "TPU510", "rewritten", "m = (_tpu_rank() == 0)"),
    ("xm.master_print('hi')", "TPU511", "rewritten", "print('hi')"),
    ("xm.save(sd, 'm.pt')", "TPU512", "warned", "torch.save("),
    ("xm.rendezvous('x')", "TPU513", "rewritten", "_tpu_rendezvous('x')"),
    ("xm.rendezvous('x', b'payload')", "TPU513", "rewritten", "_tpu_rendezvous('x', b'payload')"),
    ("xm.rendezvous('x', b'', [0, 1])", "TPU513", "flagged", None),
    ("v = xm.mesh_reduce('a', v, sum)", "TPU514", "warned", "v = _tpu_mesh_reduce('a', v, sum)"),
    (
        "y = xm.all_reduce(xm.REDUCE_SUM, x, scale=0.5)",
        "TPU515",
        "warned",
        'y = _tpu_all_reduce("sum", x, scale=0.5)',
    ),
    ("xm.all_reduce('sum', [a, b])", "TPU515", "warned", "_tpu_all_reduce('sum', [a, b])"),
    ("xm.all_reduce('sum', [a, b], groups=[[0, 1]])", "TPU515", "flagged", None),
    ("y = xm.all_gather(x)", "TPU516", "flagged", None),
    ("y = xm.reduce_scatter(xm.REDUCE_SUM, x, 1.0, 0, 2)", "TPU516", "flagged", None),
    ("y = xm.all_to_all(x, 0, 0, 2)", "TPU516", "flagged", None),
    ("y = xm.collective_permute(x, [(0, 1)])", "TPU516", "flagged", None),
    ("xm.send(x, 1)", "TPU516", "flagged", None),
    ("y = xm.collective_broadcast([x])", "TPU516", "flagged", None),
    ("xm.add_step_closure(f, args=(1,))", "TPU517", "rewritten", "f(1)"),
    (
        "import torch_xla.distributed.parallel_loader as pl\nl = pl.MpDeviceLoader(loader, d)",
        "TPU701",
        "warned",
        "_TpuDeviceLoader(loader, d)",
    ),
    (
        "import torch_xla.distributed.parallel_loader as pl\nl = pl.ParallelLoader(loader, [d]).per_device_loader(d)",
        "TPU702",
        "warned",
        "_TpuDeviceLoader(loader, d)",
    ),
    (
        "import torch_xla.distributed.xla_multiprocessing as xmp\nxmp.spawn(fn, args=(a,), nprocs=8)",
        "TPU801",
        "warned",
        'fn(int(os.environ.get("LOCAL_RANK", 0)), a)',
    ),
    ("torch_xla.launch(fn, args=(a,))", "TPU802", "warned", 'fn(int(os.environ.get("LOCAL_RANK", 0)), a)'),
    (
        "import torch_xla.distributed.xla_backend\nimport torch.distributed as dist\n"
        "dist.init_process_group('xla', init_method='xla://')",
        "TPU403",
        "rewritten",
        "'tpu_dist', init_method='env://'",
    ),
    (
        "import torch.distributed as dist\ndist.init_process_group('xla', init_method='pjrt://')",
        "TPU403",
        "rewritten",
        "'env://'",
    ),
    ("import torch_xla.distributed.xla_backend", "TPU404", "rewritten", None),
    (
        "with torch_xla.amp.autocast(d, dtype=torch.bfloat16):\n    f()",
        "TPU301",
        "rewritten",
        'torch.autocast("tpu", dtype=torch.bfloat16)',
    ),
    ("with torch.autocast('xla'):\n    f()", "TPU502", "rewritten", "torch.autocast('tpu')"),
    (
        "s = torch_xla.amp.GradScaler()\nwith torch_xla.amp.autocast(d):\n    f()",
        "TPU302",
        "warned",
        'torch.amp.GradScaler("tpu", enabled=False)',
    ),
    ("from torch_xla.amp import syncfree\no = syncfree.AdamW(p)", "TPU303", "warned", "torch.optim.AdamW(p)"),
    ("xr.use_spmd()", "TPU901", "flagged", None),
    ("import torch_xla.distributed.spmd as xs\nxs.mark_sharding(t, m, (0, 1))", "TPU901", "flagged", None),
    (
        "from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as F\nm = F(m)",
        "TPU902",
        "flagged",
        None,
    ),
    ("f = torch_xla.compile(f)", "TPU605", "warned", "torch.compile(f)"),
    ("m = torch.compile(m, backend='openxla')", "TPU606", "rewritten", "backend='tpu'"),
    ("m = torch.compile(m, backend='openxla_eval')", "TPU606", "rewritten", "backend='tpu'"),
    ("torch_xla.experimental.eager_mode(True)", "TPU604", "rewritten", None),
    ("import torch_xla.debug.metrics as met\nprint(met.metrics_report())", "TPU903", "warned", None),
    ("import torch_xla.debug.metrics as met\nassert met.counter_value('x') == 0", "TPU903", "flagged", None),
    (
        "import torch_xla.debug.profiler as xp\nwith xp.Trace('f'):\n    f()",
        "TPU607",
        "warned",
        "torch.profiler.record_function('f')",
    ),
    (
        "import torch_xla.debug.profiler as xp\nserver = xp.start_server(9012)",
        "TPU607",
        "warned",
        "server = None",
    ),
    (
        "import torch_xla.debug.profiler as xp\nxp.trace('localhost:9012', '/tmp/t')",
        "TPU607",
        "flagged",
        None,
    ),
    ("xm.set_rng_state(1)", "TPU518", "warned", "torch.manual_seed(1)"),
    ("torch_xla.manual_seed(1)", "TPU518", "warned", "torch.manual_seed(1)"),
    ("s = xm.get_rng_state()", "TPU518", "flagged", None),
    ("xm.set_rng_state(state['xla'])", "TPU518", "flagged", None),
    ("info = xm.get_memory_info(d)", "TPU519", "flagged", None),
    ("xm.broadcast_master_param(model)", "TPU520", "warned", "_tpu_broadcast_master_param(model)"),
    ("r = xm.RateTracker()", "TPU520", "warned", "r = _TpuRateTracker()"),
    ("t = xr.device_type()", "TPU504", "warned", 't = "TPU"'),
    (
        "import torch_xla.distributed.xla_multiprocessing as xmp\nW = xmp.MpModelWrapper(m)",
        "TPU803",
        "warned",
        "W = m",
    ),
    ("h = torch_xla._XLAC._get_xla_tensors_hlo([t])", "TPU904", "flagged", None),
    ("import os\nos.environ['PJRT_DEVICE'] = 'TPU'", "TPU602", "rewritten", None),
    ("import os\nos.environ['XLA_USE_BF16'] = '1'", "TPU603", "flagged", None),
    ("import os\nos.environ['XLA_FLAGS'] = '--xla_dump_to=/tmp'", "TPU603", "flagged", None),
    ("n = xm.xla_device_world_size()", "TPU599", "flagged", None),
    # framework knobs (the last row of the table)
    (
        "import lightning as L\nt = L.Trainer(accelerator='tpu', devices=8)",
        "TPU911",
        "flagged",
        "accelerator='tpu'",
    ),
    ("import lightning as L\nt = L.Trainer(strategy='xla')", "TPU911", "flagged", None),
    ("from lightning.pytorch.strategies import XLAStrategy\ns = XLAStrategy()", "TPU911", "flagged", None),
    (
        "from transformers import TrainingArguments\na = TrainingArguments('o', tpu_num_cores=8)",
        "TPU912",
        "flagged",
        None,
    ),
    (
        "from transformers import TrainingArguments\na = TrainingArguments('o', debug='tpu_metrics_debug')",
        "TPU912",
        "flagged",
        None,
    ),
    ("from composer import Trainer\nt = Trainer(model=m, device='tpu')", "TPU913", "flagged", "device='tpu'"),
    ("cmd = 'accelerate launch --tpu train.py'", "TPU914", "flagged", None),
]

CUDA_TABLE = [
    ("device = 'cuda'", "TPU101", "rewritten", "'tpu'"),
    ("d = torch.device('cuda:0')", "TPU101", "rewritten", "d = _tpu_device(0)"),  # (built at import)
    ("loc = f'cuda:{i}'", "TPU101", "warned", "loc = 'tpu'"),
    ("loc = 'cuda:{}'.format(gpu)", "TPU101", "warned", "loc = 'tpu'"),
    ("p = ('cuda:1', 'cuda:0')", "TPU101", "flagged", "('cuda:1', 'tpu:0')"),
    ("x = torch.zeros(2, device='cuda')", "TPU101", "rewritten", "device='tpu'"),
    ("x = x.to('cuda')", "TPU101", "rewritten", "x.to('tpu')"),
    ("x = x.cuda()", "TPU105", "rewritten", 'x.to("tpu")'),
    ("x = x.cuda(3)", "TPU105", "warned", 'x.to("tpu")'),
    # (a public module-level flag: other modules may read it, so the rewrite is warned — tests/migrate/test_flow.py)
    ("ok = torch.cuda.is_available()", "TPU201", "warned", "torch.accelerator.is_available()"),
    ("n = torch.cuda.device_count()", "TPU201", "rewritten", "torch.accelerator.device_count()"),
    ("torch.cuda.set_device(i)", "TPU201", "warned", None),
    ("i = torch.cuda.current_device()", "TPU201", "rewritten", "torch.accelerator.current_device_index()"),
    ("torch.cuda.synchronize()", "TPU201", "rewritten", "torch.accelerator.synchronize()"),
    ("torch.cuda.empty_cache()", "TPU202", "rewritten", None),
    ("torch.cuda.manual_seed(1)", "TPU203", "warned", "_tpu_random().manual_seed(1)"),
    ("torch.cuda.manual_seed_all(1)", "TPU203", "warned", "_tpu_random().manual_seed_all(1)"),
    # (TorchTPU 0.2.0 answers memory statistics through torch.accelerator: contract §15)
    # (a query outside a device check: _tpu_memory_stat answers 0 where no accelerator is, as CUDA's did)
    ("m = torch.cuda.memory_allocated()", "TPU204", "rewritten", '_tpu_memory_stat("memory_allocated")'),
    (
        "m = torch.cuda.max_memory_reserved(0)",
        "TPU204",
        "rewritten",
        '_tpu_memory_stat("max_memory_reserved", 0)',
    ),
    ("m = torch.cuda.max_memory_allocated(device=d)", "TPU204", "rewritten", '"max_memory_allocated", d)'),
    ("m = torch.cuda.memory_cached()", "TPU204", "rewritten", '_tpu_memory_stat("memory_reserved")'),
    (
        "if torch.cuda.is_available():\n    m = torch.cuda.memory_allocated()",
        "TPU204",
        "rewritten",
        "    m = torch.accelerator.memory_allocated()",
    ),
    (
        "torch.cuda.reset_peak_memory_stats()",
        "TPU204",
        "rewritten",
        "torch.accelerator.reset_peak_memory_stats()",
    ),
    ("s = torch.cuda.memory_stats()", "TPU204", "rewritten", '_tpu_memory_stat("memory_stats")'),
    ("f = torch.cuda.max_memory_allocated", "TPU204", "flagged", None),
    ("f, t = torch.cuda.mem_get_info()", "TPU204", "flagged", None),
    ("s = torch.cuda.mem_get_info()", "TPU204", "flagged", None),
    ("n = torch.cuda.get_device_name(0)", "TPU205", "warned", "torch.tpu.get_device_name(0)"),
    ("p = torch.cuda.get_device_properties(0)", "TPU205", "warned", "torch.tpu.get_device_properties(0)"),
    ("ok = torch.cuda.get_device_capability() >= (8, 0)", "TPU205", "flagged", None),
    ("v = torch.version.cuda", "TPU205", "flagged", None),
    (
        "ok = torch.cuda.is_bf16_supported()",
        "TPU206",
        "rewritten",
        "ok = getattr(torch.accelerator",
    ),  # (a TPU test)
    ("e = torch.cuda.Event(enable_timing=True)", "TPU207", "warned", "_TpuTimingEvent()"),
    ("e = torch.cuda.Event()", "TPU207", "warned", "torch.Event()"),
    ("s = torch.cuda.Stream()", "TPU207", "warned", "torch.Stream()"),
    ("s = torch.cuda.current_stream()", "TPU201", "rewritten", "torch.accelerator.current_stream()"),
    (
        "with torch.cuda.amp.autocast():\n    f()",
        "TPU301",
        "warned",
        'torch.autocast("tpu", dtype=torch.bfloat16)',
    ),
    ("with torch.autocast('cuda'):\n    f()", "TPU101", "rewritten", "torch.autocast('tpu')"),
    (
        "with torch.autocast(device_type='cuda', dtype=torch.float16):\n    f()",
        "TPU301",
        "warned",
        "dtype=torch.bfloat16",
    ),
    (
        "s = torch.cuda.amp.GradScaler()\nwith torch.cuda.amp.autocast():\n    f()",
        "TPU302",
        "warned",
        'torch.amp.GradScaler("tpu", enabled=False)',
    ),
    (
        "s = torch.amp.GradScaler('cuda')\nwith torch.autocast('cuda'):\n    f()",
        "TPU302",
        "warned",
        'torch.amp.GradScaler("tpu", enabled=False)',
    ),
    ("torch.backends.cudnn.benchmark = True", "TPU213", "rewritten", None),
    ("torch.backends.cudnn.deterministic = True", "TPU213", "warned", None),
    (
        "torch.backends.cuda.matmul.allow_tf32 = True",
        "TPU214",
        "rewritten",
        'set_float32_matmul_precision("high")',
    ),
    ("torch.backends.cudnn.allow_tf32 = False", "TPU214", "rewritten", '"highest"'),
    ("torch.backends.cuda.enable_flash_sdp(False)", "TPU215", "flagged", None),
    ("with torch.backends.cuda.sdp_kernel(enable_flash=True):\n    f()", "TPU215", "flagged", None),
    ("dist.init_process_group(backend='nccl')", "TPU401", "rewritten", "backend='tpu_dist'"),
    ("torch.cuda.set_device(int(os.environ['LOCAL_RANK']))", "TPU201", "warned", None),
    (
        "loader = DataLoader(ds, pin_memory=True)\nx = x.to('cuda', non_blocking=True)",
        "TPU101",
        "rewritten",
        "pin_memory=True",
    ),
    ("os.environ['CUDA_VISIBLE_DEVICES'] = '0'", "TPU209", "flagged", None),
    ("os.environ['CUDA_LAUNCH_BLOCKING'] = '1'", "TPU209", "flagged", None),
    ("torch.cuda.nvtx.range_push('x')", "TPU210", "flagged", None),
    ("g = torch.cuda.CUDAGraph()", "TPU210", "flagged", None),
    ("from torch.profiler import ProfilerActivity\na = [ProfilerActivity.CUDA]", "TPU210", "flagged", None),
    ("x = torch.cuda.FloatTensor(3)", "TPU208", "warned", "x = _tpu_tensor_type(torch.FloatTensor)(3)"),
    (
        "torch.set_default_tensor_type('torch.cuda.FloatTensor')",
        "TPU208",
        "warned",
        "set_default_device('tpu')",
    ),
    (
        "torch.set_default_tensor_type(torch.cuda.FloatTensor)",
        "TPU208",
        "warned",
        "set_default_device('tpu')",
    ),
    (
        "from torch.utils.cpp_extension import CUDAExtension\next = CUDAExtension('k', ['k.cu'])",
        "TPU211",
        "flagged",
        None,
    ),
    ("import triton", "TPU211", "flagged", None),
    ("from flash_attn import flash_attn_func", "TPU211", "flagged", None),
    ("import bitsandbytes as bnb", "TPU211", "flagged", None),
    ("from apex import amp", "TPU211", "flagged", None),
    (
        "use_fused = device_type == 'cuda'\no = torch.optim.AdamW(p, fused=use_fused)",
        "TPU212",
        "flagged",
        None,
    ),
    ("torch.cuda.ipc_collect()", "TPU299", "flagged", None),
]


def _check(prefix: str, snippet: str, code: str, outcome: str, expect: str | None) -> None:
    res = run(prefix + snippet + "\n")
    hits = [d for d in res.diagnostics if d.code == code]
    assert hits, f"no {code}: {[d.format() for d in res.diagnostics]}\n{res.new_source}"
    assert outcome in {d.outcome for d in hits}, [d.format() for d in hits]
    if expect is not None:
        assert expect in res.new_source, res.new_source
    if outcome == "flagged":
        assert f"# TODO(tpu-migrate {code})" in res.new_source
    else:
        assert res.changed


@pytest.mark.parametrize(
    ("snippet", "code", "outcome", "expect"), XLA_TABLE, ids=[r[0][:40] for r in XLA_TABLE]
)
def test_torch_xla_idiom(snippet, code, outcome, expect):
    _check(XM, snippet, code, outcome, expect)


@pytest.mark.parametrize(
    ("snippet", "code", "outcome", "expect"), CUDA_TABLE, ids=[r[0][:40] for r in CUDA_TABLE]
)
def test_cuda_idiom(snippet, code, outcome, expect):
    _check(CU, snippet, code, outcome, expect)


def test_flagged_code_keeps_running_references_and_todo_once():
    res = run(XM + "a = xm.all_gather(x)\nb = xm.all_gather(y)\n")
    assert res.new_source.count("TODO(tpu-migrate TPU516)") == 2  # one per statement
    res = run(XM + "a = xm.all_gather(x) + xm.all_gather(y)\n")
    assert res.new_source.count("TODO(tpu-migrate TPU516)") == 1  # one per statement and code
    assert len([d for d in res.diagnostics if d.code == "TPU516"]) == 2
    assert "import torch_xla.core.xla_model as xm" in res.new_source  # still used: kept
