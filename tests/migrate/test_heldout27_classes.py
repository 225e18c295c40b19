"""Wrong rewrites and fixed-point failures found on held-out check 27 (benchmarks/migrate_corpus_heldout27.txt),
each as a class in its own words, each asserting what the tool must (not) do."""

from __future__ import annotations

import pytest
from migrate_helpers import run, write_tree

# --- a worker that reaches the device through a function of its own module (nnUNet's run_ddp calls setup_ddp, which
# opens the process group): the first run saw CUDA in run_ddp's `torch.cuda.set_device(torch.device('cuda', r))` and
# kept the device test around mp.spawn; the second run, that call gone, no longer saw the device and rewrote the
# test: not a fixed point ---

SPAWNED = (
    "import torch\nimport torch.distributed as dist\nimport torch.multiprocessing as mp\n\n\n"
    "def setup(rank, world):\n    dist.init_process_group('nccl', rank=rank, world_size=world)\n\n\n"
    "def work(rank, world):\n    setup(rank, world)\n"
    "    torch.cuda.set_device(torch.device('cuda', dist.get_rank()))\n\n\n"
    "def main(device, n):\n    if n > 1:\n        assert device.type == 'cuda'\n"
    "        mp.spawn(work, args=(n,), nprocs=n)\n"
)


def test_a_worker_opening_the_device_through_its_modules_function_is_seen_on_every_run():
    first = run(SPAWNED).new_source
    assert "assert device.type == 'cuda'" in first  # kept (flagged): the spawned workers need binding first
    assert run(first).new_source == first  # one run is the fixed point


# --- an option's value tested against "cuda" where the test is kept (nnUNet's run_training: `-device` defaults to
# 'cuda', `assert args.device in ['cpu', 'cuda', 'mps']`, then `if args.device == 'cuda': ... else:
# torch.device('mps')` kept because its function reads num_gpus): the default and the list were renamed alone, so a
# TPU host passed the assert and fell through to 'mps' ---

OPTION = (
    "import argparse\nimport torch\n\n\ndef main():\n    parser = argparse.ArgumentParser()\n"
    "    parser.add_argument('-device', type=str, default='cuda', choices=['cpu', 'cuda', 'mps'])\n"
    "    parser.add_argument('-num_gpus', type=int, default=1)\n    args = parser.parse_args()\n"
    "    assert args.device in ['cpu', 'cuda', 'mps'], args.device\n"
    "    if args.device == 'cuda':\n        torch.cuda.set_per_process_memory_fraction(0.5)\n"
    "        device = torch.device('cuda')\n"
    "    elif args.device == 'cpu':\n        device = torch.device('cpu')\n    else:\n"
    "        device = torch.device('mps')\n    return device, args.num_gpus\n"
)


def test_an_options_default_and_lists_stay_with_a_kept_test_of_its_value():
    out = run(OPTION).new_source
    kept = "if args.device == 'cuda':" in out
    lists = "default='cuda', choices=['cpu', 'cuda', 'mps']" in out and "in ['cpu', 'cuda', 'mps']" in out
    assert kept == lists  # the option, its list and its test agree: all renamed or none
    assert run(out).new_source == out


# --- torch.device('cuda', 0) as a parameter default (nnUNet's compute_gaussian): built at import, so
# torch.device('tpu', 0) failed every import where TorchTPU is not loaded; the import-safe helper takes the ordinal ---


def test_an_import_time_device_with_the_literal_ordinal_0_takes_the_import_safe_helper():
    src = (
        "import torch\n\n\ndef gaussian(size, device=torch.device('cuda', 0)):\n    return torch.ones(size, device=device)\n"
        "\n\ndef other(x, device=torch.device('cuda', index=0)):\n    return x.to(device)\n"
    )
    out = run(src).new_source
    assert out.count("_tpu_device(0)") == 2 and "torch.device('tpu', 0)" not in out


# --- a map_location dict whose key is built from a device literal (EasyOCR's `{"cuda:%d" % 0: "cuda:%d" % gpu}`):
# the key names where the checkpoint was saved; renamed, nothing matched and the tensors went back to cuda:0 ---


def test_a_built_map_location_key_stays_and_only_its_value_moves():
    src = (
        "import torch\n\n\ndef load(path, gpu):\n    map_location = {'cuda:%d' % 0: 'cuda:%d' % gpu}\n"
        "    return torch.load(path, map_location=map_location)\n"
    )
    out = run(src).new_source
    assert "{'cuda:%d' % 0: 'tpu'}" in out


# --- mmcv's compiled operators loaded through its ext_loader, in mmcv or a copy carried in the tree (LAVIS's
# uniformer/mmcv/ops, InternImage): `assert grad_output.is_cuda` became a "tpu" test and torch.cuda.FloatTensor
# outputs "tpu" tensors, all handed to CPU/CUDA-only kernels with no TODO ---

OPS = (
    "import torch\nfrom torch.autograd import Function\n\nfrom ..utils import ext_loader\n\n"
    "ext_module = ext_loader.load_ext('_ext', ['three_nn_forward'])\n\n\n"
    "class ThreeNN(Function):\n    @staticmethod\n    def forward(ctx, target, source):\n"
    "        assert target.is_cuda\n        dist2 = torch.cuda.FloatTensor(1, 3, 3)\n"
    "        ext_module.three_nn_forward(target, source, dist2)\n        return dist2\n"
)


def test_a_file_loading_mmcvs_compiled_operators_is_left_as_written_and_flagged():
    res = run(OPS)
    assert "assert target.is_cuda" in res.new_source and "torch.cuda.FloatTensor(1, 3, 3)" in res.new_source
    assert [d.code for d in res.diagnostics] == ["TPU211"] and "compiled operators" in res.new_source


# --- mmcv's MMDataParallel / MMDistributedDataParallel (mmseg's train.py in LAVIS and InternVL): the model moved
# to 'tpu' and device_ids kept, so mmcv's CUDA-only scatter raised at the first batch, with no TODO ---


def test_mmcvs_data_parallel_wrappers_are_flagged():
    src = (
        "import torch\nfrom mmcv.parallel import MMDataParallel, MMDistributedDataParallel\n\n\n"
        "def wrap(model, cfg, distributed):\n    if distributed:\n"
        "        return MMDistributedDataParallel(model.cuda(), device_ids=[torch.cuda.current_device()])\n"
        "    return MMDataParallel(model.cuda(cfg.gpu_ids[0]), device_ids=cfg.gpu_ids)\n"
    )
    res = run(src)
    found = [d for d in res.diagnostics if d.code == "TPU407"]
    assert len(found) == 2 and all("mmcv" in d.message for d in found)


# --- a host's device count that derives each process's LOCAL_RANK for other programs (InternVL's SLURM setup:
# `os.environ['LOCAL_RANK'] = str(proc_id % num_gpus)`), or that is halved before it divides work and sizes the
# spawn (EasyOCR's `ngpus_per_node = torch.cuda.device_count() // 2`): renamed, TorchTPU's one device per process
# made every process its host's first and spawned none; kept, like its twin, with a TODO ---


def test_a_count_exporting_a_local_rank_stays_cudas():
    src = (
        "import os\nimport torch\n\n\ndef init_slurm():\n    proc_id = int(os.environ['SLURM_PROCID'])\n"
        "    num_gpus = torch.cuda.device_count()\n    os.environ['LOCAL_RANK'] = str(proc_id % num_gpus)\n"
    )
    res = run(src)
    assert "num_gpus = torch.cuda.device_count()" in res.new_source and "TPU201" in res.new_source


def test_a_halved_count_that_divides_work_stays_with_its_twin():
    src = (
        "import torch\n\n\ndef main(config):\n    if config['mode'] == 'weak':\n"
        "        ngpus = torch.cuda.device_count() // 2\n    else:\n        ngpus = torch.cuda.device_count()\n"
        "    return config['batch_size'] / ngpus\n"
    )
    out = run(src).new_source
    assert "torch.cuda.device_count() // 2" in out and "ngpus = torch.cuda.device_count()\n" in out


# --- a project whose device is DeepSpeed's accelerator (Megatron-DeepSpeed: `get_accelerator()` in 46 modules
# places the model, its buffers and groups): DeepSpeed has no TPU accelerator, so the CUDA left in its scripts,
# moved to 'tpu', met a model on the CPU (19 hunks); such a project's CUDA modules are left as written, flagged ---


def test_a_project_placed_by_deepspeeds_accelerator_is_left_as_written(tmp_path):
    for i in range(5):
        (tmp_path / f"m{i}.py").write_text(
            "import torch\nfrom deepspeed.accelerator import get_accelerator\n\n\n"
            f"def place{i}(model):\n    return model.to(get_accelerator().current_device_name())\n"
        )
    script = "import torch\n\n\ndef step(model, data):\n    return model(data.cuda())\n"
    (tmp_path / "pretrain.py").write_text(script)
    out = write_tree(tmp_path)
    assert "data.cuda()" in out["pretrain.py"] and "DeepSpeed's accelerator" in out["pretrain.py"]


def test_one_deepspeed_module_among_plain_scripts_does_not_stop_their_migration(tmp_path):
    (tmp_path / "ds.py").write_text(
        "from deepspeed.accelerator import get_accelerator\n\n\ndef dev():\n"
        "    return get_accelerator().current_device_name()\n"
    )
    for i in range(5):
        (tmp_path / f"s{i}.py").write_text("import torch\n\n\ndef f(x):\n    return x.cuda()\n")
    out = write_tree(tmp_path)
    assert all('x.to("tpu")' in out[f"s{i}.py"] for i in range(5))


# --- a record of arguments holding a non-device word (EasyOCR's test inputs `[polys, 64, '', 'greedy', 5, 'cuda']`)
# was read as a list of names and kept, while the same file's other input lists were migrated: the recognizer's
# cases sent their inputs to 'cuda' and the detector's to 'tpu' ---


def test_a_record_of_arguments_is_no_list_of_names():
    src = (
        "import torch\n\n\ndef cases(polys, model):\n    a = [polys, 64, False, 'cuda']\n"
        "    b = [polys, 64, '', 'greedy', 5, 'cuda']\n    return model(*a), model(*b)\n"
    )
    out = run(src).new_source
    assert out.count("'tpu'") == 2 and "'cuda'" not in out
    names = (
        "import torch\n\n\ndef f(x):\n    return [getattr(x, n) for n in ('contiguous', 'cuda', 'half')]\n"
    )
    assert "'cuda'" in run(names).new_source  # (a display of names stays as it is)


# --- a check that guards the import of the project's own compiled CUDA extension by a relative import (EasyOCR's
# dcn: `if torch.cuda.is_available(): from .. import deform_pool_cuda`, built by its setup.py's CUDAExtension): a
# TPU host tried to import or build the CUDA kernel; kept as CUDA's, like its twin in setup.py ---


def test_a_check_guarding_a_relative_import_of_the_projects_cuda_extension_stays_cudas(tmp_path):
    (tmp_path / "setup.py").write_text(
        "from setuptools import setup\nfrom torch.utils.cpp_extension import CUDAExtension\n\n"
        "setup(ext_modules=[CUDAExtension('pool_cuda', ['src/pool_cuda.cpp', 'src/pool_kernel.cu'])])\n"
    )
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "__init__.py").write_text("")
    (tmp_path / "ops" / "functions").mkdir()
    (tmp_path / "ops" / "functions" / "__init__.py").write_text("")
    (tmp_path / "ops" / "functions" / "pool.py").write_text(
        "import torch\n\nif torch.cuda.is_available():\n    from .. import pool_cuda\n    ready = True\n"
    )
    out = write_tree(tmp_path)["ops/functions/pool.py"]
    assert "if torch.cuda.is_available():" in out and "TPU201" in out


# --- one boolean test with a kept `.is_cuda` and an availability check (flair's language-model trainer: `if not
# data.is_cuda and cuda.is_available(): raise Exception("data isnt on cuda")`): renamed alone, the availability half
# made every batch on 'tpu' raise; both halves stay CUDA's ---


def test_a_kept_is_cuda_keeps_the_availability_check_of_its_test():
    src = (
        "import torch\nfrom torch import cuda\n\n\nclass T:\n    def step(self, data, targets):\n"
        "        if not data.is_cuda and cuda.is_available():\n            raise Exception('data isnt on cuda')\n"
        "        return self.loss_function(data, targets)\n"
    )
    out = run(src).new_source
    kept_is_cuda = "not data.is_cuda" in out
    assert kept_is_cuda == ("cuda.is_available()" in out and "accelerator.is_available" not in out)


# --- a test for "more than one GPU" (`device_count() != 1`) guarding counts kept as CUDA's (EasyOCR's eval): renamed,
# a TPU host took the branch its counts do not ---


def test_a_multi_gpu_guard_of_counts_kept_as_cudas_stays_cudas():
    guard = (
        "import torch\n\n\ndef shards(mode, items):\n    if mode == 'weak' and torch.cuda.device_count() != 1:\n"
        "        n = torch.cuda.device_count() // 2\n    else:\n        n = torch.cuda.device_count()\n"
        "    return len(items) // n\n"
    )
    code_lines = "\n".join(
        line for line in run(guard).new_source.splitlines() if not line.lstrip().startswith("#")
    )
    assert "torch.accelerator" not in code_lines and code_lines.count("torch.cuda.device_count()") == 3


# --- a count of devices is not CUDA-only state (nnUNet's run_training_from_pretrained: `main` passes `args.num_gpus`
# on, and its `elif args.device == 'cuda':` was kept with a TODO saying the function "reads CUDA-only state
# (`num_gpus`)"; a count of GPUs asks for processes or devices, which the TPU has too) ---

COUNTED = (
    "import argparse\nimport torch\n\n\ndef train(n, device):\n    return n, device\n\n\n"
    "def main():\n    p = argparse.ArgumentParser()\n    p.add_argument('-device', default='cuda')\n"
    "    p.add_argument('-{count}', type=int, default=1)\n    args = p.parse_args()\n"
    "    if args.device == 'cpu':\n        device = torch.device('cpu')\n"
    "    elif args.device == 'cuda':\n        torch.set_num_threads(1)\n        device = torch.device('cuda')\n"
    "    else:\n        device = torch.device('mps')\n    train(args.{count}, device)\n"
)


def test_a_count_of_gpus_does_not_keep_a_device_test_as_cudas():
    for count in ("num_gpus", "n_gpu", "ngpus", "gpus", "gpus_per_node"):
        out = run(COUNTED.format(count=count)).new_source
        assert "elif args.device == 'tpu':" in out and "torch.device('tpu')" in out, count
        assert "TODO" not in out, count
    # what does hold CUDA-only state still keeps it: a GPU's index or ids, a CUDA switch
    for state in ("gpu_ids", "use_cuda_graph"):
        out = run(COUNTED.format(count=state)).new_source
        assert "elif args.device == 'cuda':" in out and "TODO(tpu-migrate" in out, state


# --- a device string stored in an OpenMMLab config (InternVL's segmentation/train.py: `cfg = Config.fromfile(...)`,
# `cfg.device = 'cuda'`, then mmseg's train_segmentor -> build_dp/build_ddp, whose tables know cuda, cpu, mlu, npu,
# ipu): renamed to 'tpu', the framework fails on it ---

MM_CONFIG = (
    "import torch\n{imports}\n\n\ndef main(args):\n    {binding}\n    {target} = 'cuda'\n"
    "    train_segmentor(cfg)\n"
)


def test_a_device_stored_in_an_openmmlab_config_is_kept_and_flagged():
    cases = [
        ("from mmcv.utils import Config", "cfg = Config.fromfile(args.config)", "cfg.device"),
        ("from mmengine.config import Config", "cfg = Config.fromfile(args.config)", "cfg['device']"),
        ("from annotator.uniformer.mmcv import Config", "conf = Config(dict())", "conf.device"),
        ("from mmcv import Config, DictAction", "cfg = args.cfg", "cfg.device"),
    ]
    for imports, binding, target in cases:
        out = run(MM_CONFIG.format(imports=imports, binding=binding, target=target)).new_source
        assert f"{target} = 'cuda'" in out and "OpenMMLab config" in out, (imports, target)
    # not an OpenMMLab config: a plain settings object's device is the program's own, migrated
    for imports, binding, target in [
        ("from omegaconf import OmegaConf", "cfg = OmegaConf.load(args.config)", "cfg.device"),
        ("from mmcv.utils import Config", "cfg = Config.fromfile(args.config)", "cfg.model_device"),
    ]:
        out = run(MM_CONFIG.format(imports=imports, binding=binding, target=target)).new_source
        assert f"{target} = 'tpu'" in out and "OpenMMLab" not in out, (imports, target)


# --- the process's CUDA ordinal used as its share of the data (EasyOCR's trainer/craft/eval.py: `gpu_idx =
# torch.cuda.current_device()`, then `paths[gpu_idx * n:(gpu_idx + 1) * n]`): on TorchTPU the ordinal is 0 in every
# process, so every process evaluated the first share, unflagged ---

SHARDED = (
    "import torch\n\n\ndef evaluate(paths, n_procs):\n    gpu_idx = torch.cuda.current_device()\n"
    "    size = len(paths) // n_procs\n    mine = {use}\n    return [p for p in mine]\n"
)


def test_a_cuda_ordinal_that_picks_the_datas_share_is_flagged():
    for use in (
        "paths[gpu_idx * size:(gpu_idx + 1) * size]",
        "paths[gpu_idx::n_procs]",
        "paths[size % 3 + gpu_idx]",
    ):
        out = run(SHARDED.format(use=use)).new_source
        assert "gpu_idx = torch.accelerator.current_device_index()" in out, use
        assert out.count("use the process's rank") == 1, use
        assert run(out).new_source == out  # a fixed point
    # an ordinal that only names the device is the process's own device: no TODO
    out = run(SHARDED.format(use="torch.zeros(1, device=gpu_idx)")).new_source
    assert "rank" not in out and "current_device_index()" in out


# --- a GradScaler built from a spread mapping beside its twins (mmcv's Fp16OptimizerHook: `GradScaler()`,
# `GradScaler(init_scale=s)`, `GradScaler(**loss_scale)`): the spread one was left on torch.cuda.amp silently, so
# one configuration of the same hook scaled on CUDA's scaler (disabled on a TPU host) ---

SPREAD = (
    "import torch\nfrom torch.cuda.amp import GradScaler\n\n\ndef build(loss_scale, args):\n"
    "    if loss_scale == 'dynamic':\n        return GradScaler()\n"
    "    if isinstance(loss_scale, float):\n        return GradScaler(init_scale=loss_scale)\n"
    "    if isinstance(loss_scale, dict):\n        return GradScaler(**loss_scale)\n"
    "    return {other}\n"
)


def test_a_gradscaler_from_a_spread_mapping_moves_with_its_twins():
    out = run(SPREAD.format(other="None")).new_source
    assert 'GradScaler("tpu", **loss_scale)' in out and "torch.cuda.amp" not in out
    assert run(out).new_source == out
    # a positional spread, or one into a scaler that takes a device, may carry CUDA's device: flagged, kept
    for other in ("GradScaler(*args)", "torch.amp.GradScaler(**args)"):
        out = run(SPREAD.format(other=other)).new_source
        assert f"return {other}" in out and out.count("spread of arguments") == 1, other
        assert run(out).new_source == out


# --- `mp.spawn` where the file imports both `multiprocessing as mp` and `torch.multiprocessing as mp` (nnUNet's
# run_training_from_pretrained): name resolution picked the standard library's name, which has no spawn(), so the
# spawn was not seen and the device test around it was renamed, unlike its twin in run_training.py ---


def test_spawn_through_a_doubly_imported_mp_is_torchs():
    both = SPAWNED.replace(
        "import torch.multiprocessing as mp\n",
        "import multiprocessing as mp\nimport torch.multiprocessing as mp\n",
    )
    out = run(both).new_source
    assert (
        "assert device.type == 'cuda'" in out and "mp.spawn(work" in out.split("TODO(tpu-migrate TPU102)")[1]
    )
    assert out.replace("import multiprocessing as mp\n", "") == run(SPAWNED).new_source  # as with one import
    assert run(out).new_source == out


# --- a device test and-ed with CUDA-only state (GPT-SoVITS' inference_webui: `if use_cuda_graph and device ==
# "cuda":` builds a CUDA graph runner): renamed, a TPU host took CUDA's own path ---

GATED = "def f(x, device, {flag}):\n    if {flag} and device == 'cuda':\n        return run_graph(x)\n    return x.to(device)\n"


def test_a_device_test_beside_cuda_only_state_stays_cudas():
    for flag in ("use_cuda_graph", "self_cudnn_ok", "triton_enabled"):
        out = run(GATED.format(flag=flag)).new_source
        assert f"if {flag} and device == 'cuda':" in out and "CUDA-only state" in out, flag
        assert run(out).new_source == out
    # a flag meaning "use the accelerator" is not such state: the test moves with the device
    for flag in ("use_cuda", "use_gpu", "gpu"):
        out = run(GATED.format(flag=flag)).new_source
        assert f"if {flag} and device == 'tpu':" in out, flag


# --- a device count that divides work through an offset (InternVL's split_model: `world_size =
# torch.cuda.device_count()`, `math.ceil(num_layers / (world_size - vit_alpha))` layers per GPU in a device_map):
# renamed, TorchTPU's one device per process put every layer on one chip, unflagged ---

SPLIT = (
    "import math\nimport torch\n\n\ndef split_model(num_layers, vit_alpha=0.5):\n    device_map = {}\n"
    "    world_size = torch.cuda.device_count()\n"
    "    per_gpu = math.ceil(num_layers / (world_size - vit_alpha))\n"
    "    for i, n in enumerate([per_gpu] * world_size):\n        device_map[i] = n\n    return device_map\n"
)


def test_a_count_that_divides_work_through_an_offset_stays_cudas():
    out = run(SPLIT).new_source
    assert "world_size = torch.cuda.device_count()" in out and "divides work" in out
    assert run(out).new_source == out


# --- CUDA's autocast query guarding a cast to float16 (GPT-SoVITS' DoubleSwish: `if x.dtype == torch.float16 or
# torch.is_autocast_enabled(): y = y.to(torch.float16)`): asking the TPU's autocast (bfloat16) instead forced float16
# outputs into a bfloat16 model; kept as CUDA's and flagged ---

FP16_UNDER_AUTOCAST = (
    "import torch\n\n\ndef swish(x):\n    y = x * torch.sigmoid(x)\n"
    "    if x.dtype == torch.float16 or torch.is_autocast_enabled():\n        y = y.to(torch.float16)\n"
    "    return y\n\n\ndef scale(x):\n    if torch.is_autocast_enabled():\n        x = x.float()\n    return x\n"
)


def test_an_autocast_query_that_guards_a_float16_cast_stays_cudas():
    result = run(FP16_UNDER_AUTOCAST)
    out = result.new_source
    assert "torch.float16 or torch.is_autocast_enabled():" in out  # kept, flagged
    assert "TODO(tpu-migrate TPU305)" in out
    assert (
        out.count('is_autocast_enabled("tpu")') == 1
    )  # the guard of a float32 cast still follows TPU autocast
    assert run(out).new_source == out


# --- a count of the host's GPUs exported for other programs (InternVL's SLURM setup: `os.environ['LOCAL_SIZE'] =
# str(torch.cuda.device_count())` beside `gpu = rank % torch.cuda.device_count()` kept as CUDA's): renamed, every
# host said it runs one process, and the two counts disagreed ---

EXPORTED = (
    "import os\nimport torch\n\n\ndef setup():\n    rank = int(os.environ['SLURM_PROCID'])\n"
    "    gpu = rank % torch.cuda.device_count()\n    os.environ['LOCAL_RANK'] = str(gpu)\n"
    "    os.environ['LOCAL_SIZE'] = str(torch.cuda.device_count())\n"
)


def test_a_device_count_exported_to_the_environment_stays_cudas():
    out = run(EXPORTED).new_source
    assert "os.environ['LOCAL_SIZE'] = str(torch.cuda.device_count())" in out
    assert "torch.accelerator.device_count" not in out  # both counts alike
    assert run(out).new_source == out


# --- `.cuda()` under Lightning's `on_gpu` (ReAgent: `was_on_gpu = self.on_gpu; self.cpu(); ...; if was_on_gpu:
# self.cuda()`): `on_gpu` is device.type == 'cuda', false on 'tpu'; renamed, the move back looked migrated and a
# module that was on 'tpu' stayed on the CPU ---


def test_a_move_back_under_lightnings_on_gpu_is_flagged_not_renamed():
    src = (
        "import pytorch_lightning as pl\n\n\nclass T(pl.LightningModule):\n    def gather(self, outs):\n"
        "        was_on_gpu = self.on_gpu\n        self.cpu()\n        data = list(outs)\n"
        "        if was_on_gpu:\n            self.cuda()\n        return data\n\n"
        "    def to_gpu(self, x):\n        return x.cuda()\n"
    )
    out = run(src).new_source
    assert "            self.cuda()" in out and "TODO(tpu-migrate TPU105)" in out
    assert 'return x.to("tpu")' in out
    assert run(out).new_source == out


# --- one device name per GPU of the host for a pool of worker processes (sentence-transformers'
# start_multi_process_pool: `[f"cuda:{i}" for i in range(torch.cuda.device_count())]`): renamed, the pool's workers
# all asked for the chip the parent holds ---


def test_device_names_enumerated_from_the_count_stay_cudas():
    src = (
        "import torch\n\n\ndef pool(target_devices=None):\n    if target_devices is None:\n"
        "        if torch.cuda.is_available():\n"
        '            target_devices = [f"cuda:{i}" for i in range(torch.cuda.device_count())]\n'
        '        else:\n            target_devices = ["cpu"] * 4\n    return target_devices\n'
    )
    out = run(src).new_source
    assert 'f"cuda:{i}" for i in range(torch.cuda.device_count())' in out
    assert "if torch.cuda.is_available():" in out and "TODO(tpu-migrate TPU201)" in out
    assert run(out).new_source == out


# --- `device_map="auto"` as a parameter's default, handed on through kwargs (InternVL's LLaVA builder:
# `def load_pretrained_model(..., device_map="auto", device="cuda")`): the device became 'tpu' with no word that
# accelerate still places the LLM ---


def test_a_device_map_auto_default_is_flagged_where_the_device_is_renamed():
    src = (
        "import torch\nfrom transformers import AutoModelForCausalLM\n\n\n"
        'def load(path, device_map="auto", device="cuda"):\n    kwargs = {"device_map": device_map}\n'
        "    model = AutoModelForCausalLM.from_pretrained(path, **kwargs)\n"
        "    tower = torch.nn.Linear(2, 2).to(device=device)\n    return model, tower\n"
    )
    out = run(src).new_source
    assert "TODO(tpu-migrate TPU915)" in out
    assert run(out).new_source == out


# --- a device test whose branch sets a library's CUDA ordinal (flair's ELMo: `if device.type == "cuda": cuda_device =
# device.index`, then allennlp's `ElmoEmbedder(cuda_device=cuda_device)`): renamed, a TPU host handed allennlp an
# ordinal it takes for a CUDA GPU ---


def test_a_device_test_that_sets_a_libraries_cuda_ordinal_stays_cudas():
    src = (
        "import torch\nfrom allennlp.commands.elmo import ElmoEmbedder\n\n\ndef build(device):\n"
        '    if device.type == "cuda":\n        cuda_device = device.index\n    else:\n        cuda_device = -1\n'
        "    return ElmoEmbedder(cuda_device=cuda_device)\n"
    )
    out = run(src).new_source
    assert 'if device.type == "cuda":' in out and "TODO(tpu-migrate TPU102)" in out
    assert run(out).new_source == out


# --- a test function that patches a torch.cuda function (doctr: `monkeypatch.setattr(torch.cuda, "is_available",
# lambda: flag)`, then `assert resolve("auto") == torch.device("cuda:0" if flag else "cpu")`): its expected 'cuda:0'
# was renamed while the patch still drives CUDA's answer ---


def test_device_names_in_a_test_that_patches_torch_cuda_are_kept():
    src = (
        "import torch\nimport pytest\n\n\n@pytest.mark.parametrize('flag', [False, True])\n"
        "def test_auto(monkeypatch, flag):\n"
        '    monkeypatch.setattr(torch.cuda, "is_available", lambda: flag)\n'
        '    assert resolve("auto") == torch.device("cuda:0" if flag else "cpu")\n\n\n'
        "def test_move():\n    assert torch.ones(1).cuda().device.type == 'cuda'\n"
    )
    out = run(src).new_source
    assert 'torch.device("cuda:0" if flag else "cpu")' in out
    assert "torch.ones(1).cuda()" not in out  # the function without the patch still migrates
    assert run(out).new_source == out


# --- a kept device ladder with no else (so-vits-svc's ONNX encoders: `if device == 'cpu': providers = [...] elif
# device == 'cuda': providers = ['CUDAExecutionProvider', ...]`), whose callers were migrated to pass 'tpu': the
# finding says the name a 'tpu' device leaves unset ---


def test_a_kept_ladder_without_else_names_what_tpu_leaves_unset():
    src = (
        "import onnxruntime\nimport torch\n\n\ndef session(path, device=None):\n"
        "    if device == 'cpu' or device is None:\n        providers = ['CPUExecutionProvider']\n"
        "    elif device == 'cuda':\n        providers = ['CUDAExecutionProvider', 'CPUExecutionProvider']\n"
        "    return onnxruntime.InferenceSession(path, providers=providers)\n"
    )
    out = run(src).new_source
    assert "elif device == 'cuda':" in out
    assert "`providers` stays unset" in out
    assert run(out).new_source == out


# --- a value computed under CUDA's float16 autocast handed to a function of the module that calls .numpy() on it
# (instruct-pix2pix: `with torch.autocast("cuda"): ... x0 = samples[0]; to_pil(x0)`, to_pil defined above the block):
# bfloat16 on the TPU, which NumPy cannot hold ---

TO_PIL = (
    "import torch\n\n\ndef to_pil(image):\n    return (255.0 * image.cpu().numpy()).astype('uint8')\n\n\n"
    "def label(ids):\n    return ids.cpu().numpy()\n\n\n"
    "def main(model, z):\n    with torch.no_grad(), torch.autocast('cuda'):\n"
    "        samples = model.decode(z)\n        samples = torch.clamp((samples + 1.0) / 2.0, 0.0, 1.0)\n"
    "        x0 = samples[0]\n        ids = [1, 2]\n        return to_pil(x0), label(torch.tensor(ids))\n"
)


def test_numpy_in_a_function_handed_a_bf16_autocast_value_casts_first():
    out = run(TO_PIL).new_source
    assert "image.cpu().float().numpy()" in out
    assert "ids.cpu().numpy()" in out  # (handed a call's result, not a name computed in the block)
    assert run(out).new_source == out


# --- a project function returning `torch.sparse_coo_tensor(...).coalesce()` (sentence-transformers' similarity
# tests): the method hid the constructor, so its results moved to 'tpu' unflagged (TorchTPU has no sparse tensors) ---


def test_a_coalesced_sparse_tensor_moved_to_the_device_is_seen():
    src = (
        "import torch\n\n\ndef make(n):\n    i = torch.tensor([[0, 1], [1, 0]])\n"
        "    return torch.sparse_coo_tensor(i, torch.ones(2), (n, n)).coalesce()\n\n\n"
        "def pair():\n    a = make(2)\n    if torch.cuda.is_available():\n        return a.to('cuda')\n    return a\n"
    )
    out = run(src).new_source
    assert "a.to('tpu')" not in out  # kept with its check, or moved with a TPU110 flag: never silently
    assert "TODO(tpu-migrate" in out
    assert run(out).new_source == out


# --- held-out 28 ---
# a scaler whose device is already a variable (skrl's agents: `torch.amp.GradScaler(device=self._device_type,
# enabled=...)`, the same variable their autocast takes): hard-coded to "tpu", it disagreed with a CPU run ---


def test_a_scaler_that_follows_a_device_variable_is_left_alone():
    src = (
        "import torch\n\n\nclass Agent:\n    def __init__(self, device, amp):\n"
        "        self._device_type = torch.device(device).type\n"
        "        self.scaler = torch.amp.GradScaler(device=self._device_type, enabled=amp)\n"
        "        self.other = torch.amp.GradScaler('cuda')\n"
    )
    out = run(src).new_source
    assert "torch.amp.GradScaler(device=self._device_type, enabled=amp)" in out
    assert "torch.amp.GradScaler('cuda')" not in out  # a literal CUDA scaler still migrates


# --- a module's own function named cuda (torchdrug: `utils.cuda(data)` moves a nested container): taken for the
# tensor method, it became `utils.to("tpu")`, dropping the data and calling a function that does not exist ---


def test_a_modules_function_named_cuda_is_not_the_tensor_method():
    src = (
        "import torch\nfrom torchdrug import utils\n\n\ndef f(data, args, model):\n"
        "    a = utils.cuda(data)\n    b = model.cuda(args.gpu)\n    return a, b, torch.ones(1).cuda(0)\n"
    )
    out = run(src).new_source
    assert "utils.cuda(data)" in out and "TODO(tpu-migrate TPU105)" in out
    assert 'model.to("tpu")' in out and 'torch.ones(1).to("tpu")' in out


# --- a JAX file beside torch code (skrl's tests/test_jax_config.py: `jax.devices("cuda")`, no torch import): its
# device names are JAX's; `device.startswith("cuda")` became "tpu" while its cases stayed "cuda" ---


def test_a_file_of_another_framework_is_left_as_written():
    src = (
        "import jax\nimport pytest\n\n\n@pytest.mark.parametrize('device', ['cpu', 'cuda', 'cuda:0'])\n"
        "def test_parse(device):\n    if device.startswith('cuda'):\n        return jax.devices('cuda')\n"
    )
    assert run(src).new_source == src
    both = "import jax\nimport torch\n\nx = torch.ones(1).cuda()\n"
    assert 'to("tpu")' in run(both).new_source  # a file that also uses torch still migrates


# --- a test module gated at module level on a CUDA compute capability (axolotl's Blackwell FP4 tests:
# `pytestmark = pytest.mark.skipif(not _IS_BLACKWELL, ...)`, `DEV = "cuda"`): the gate stayed CUDA's while DEV became
# 'tpu', so the tests ran only on Blackwell and put their tensors on 'tpu' there ---


@pytest.mark.parametrize(
    "mark",
    [
        "pytest.mark.skipif(not _NEW, reason='Blackwell only')",
        "[\n    pytest.mark.slow,\n    pytest.mark.skipif(not _NEW, reason='Blackwell only'),\n]",
    ],
)
def test_a_module_gated_on_a_cuda_capability_is_left_as_written(mark):
    src = (
        "import pytest\nimport torch\n\n_IS_CUDA = torch.cuda.is_available()\n"
        "_NEW = _IS_CUDA and torch.cuda.get_device_capability()[0] >= 10\n"
        f"pytestmark = {mark}\n\nDEV = 'cuda'\n\n\n"
        "def test_x():\n    assert torch.ones(1, device=DEV).is_cuda\n"
    )
    out = run(src).new_source
    assert "DEV = 'cuda'" in out and "torch.cuda.is_available()" in out


# --- one ordinal per GPU handed to a model-parallel map (tortoise-tts: `get_device_map(n_layers,
# range(max(1, torch.cuda.device_count())))` for GPT-2's parallelize): the count changed meaning on 'tpu' ---


def test_a_count_that_spreads_a_model_over_gpus_stays_cudas():
    src = (
        "import torch\n\n\ndef parallelize(model, n_layers):\n"
        "    device_map = get_device_map(n_layers, range(max(1, torch.cuda.device_count())))\n"
        "    model.parallelize(device_map)\n"
    )
    out = run(src).new_source
    assert "range(max(1, torch.cuda.device_count()))" in out and "TODO(tpu-migrate TPU201)" in out


# --- a library guard named like a test gate (LMFlow's `require_cuda_for_gpu_mode()`, called by its evaluator and
# inferencers through set_cuda_device): kept as "a helper that gates tests", every pipeline stopped on 'tpu' ---


def test_a_library_guard_named_like_a_gate_is_migrated():
    src = (
        "import torch\n\n\ndef require_cuda_for_gpu_mode():\n    if not torch.cuda.is_available():\n"
        "        raise RuntimeError('CUDA is not available')\n\n\ndef set_cuda_device(rank):\n"
        "    require_cuda_for_gpu_mode()\n    torch.cuda.set_device(rank)\n\n\n"
        "def requires_gpu(fn):\n    import pytest\n"
        "    return pytest.mark.skipif(not torch.cuda.is_available(), reason='gpu')(fn)\n"
    )
    out = run(src).new_source
    assert "if not torch.accelerator.is_available():" in out
    assert "skipif(not torch.cuda.is_available()" in out  # a real test gate stays CUDA's


# --- a device default typed as a Literal of choices (nerfstudio's `device_type: Literal["cpu", "cuda", "mps"] =
# "cuda"`, read by tyro): the default became 'tpu', outside the type's own choices ---


def test_a_renamed_default_joins_its_literal_type():
    src = (
        "from dataclasses import dataclass\nfrom typing import Literal\n\nimport torch\n\n\n@dataclass\nclass M:\n"
        '    device_type: Literal["cpu", "cuda", "mps"] = "cuda"\n\n\n'
        'def launch(device_type: Literal["cpu", "cuda"] = "cuda"):\n    return torch.ones(1, device=device_type)\n'
    )
    out = run(src).new_source
    assert 'device_type: Literal["cpu", "cuda", "mps", "tpu"] = "tpu"' in out
    assert 'def launch(device_type: Literal["cpu", "cuda", "tpu"] = "tpu"):' in out
    assert run(out).new_source == out


# --- a backend named in capitals (Pointcept's `init_process_group(backend="NCCL")`, torch lower-cases it): left as
# NCCL while its comparison elsewhere (`get_backend() == "nccl"`) became "tpu_dist" ---


def test_an_nccl_backend_in_capitals_is_nccl():
    src = (
        "import torch.distributed as dist\n\n\ndef worker(url, world, rank):\n"
        '    dist.init_process_group(backend="NCCL", init_method=url, world_size=world, rank=rank)\n'
    )
    assert 'backend="tpu_dist"' in run(src).new_source


# --- a branch for an older torch (skrl's agents: `if version.parse(torch.__version__) >= version.parse("2.4"):
# GradScaler(device=...) else: torch.cuda.amp.GradScaler(...)`): it never runs with TorchTPU's torch, and rewritten it
# called torch.amp.GradScaler, which the older torch it serves lacks ---


def test_a_branch_for_an_older_torch_is_left_as_written():
    src = (
        "import torch\nfrom packaging import version\n\n"
        'if version.parse(torch.__version__) >= version.parse("2.4"):\n    a = torch.ones(1).cuda()\n'
        "else:\n    s = torch.cuda.amp.GradScaler()\n"
        'if torch.__version__ < "2.0":\n    b = torch.ones(1).cuda()\nelse:\n    c = torch.ones(1).cuda()\n'
    )
    out = run(src).new_source
    assert "s = torch.cuda.amp.GradScaler()" in out and "b = torch.ones(1).cuda()" in out
    assert 'a = torch.ones(1).to("tpu")' in out and 'c = torch.ones(1).to("tpu")' in out


# --- autocast's device chosen by an expression (tortoise-tts: `torch.autocast(device_type="cuda" if not mps else
# "mps", dtype=torch.float16, enabled=self.half)`): renamed alone, it kept float16 on 'tpu' and raised on a CPU-only
# host even when disabled ---


def test_an_autocast_device_chosen_by_an_expression_is_kept_and_flagged():
    src = (
        "import torch\n\n\ndef run(model, x, half, mps):\n"
        '    with torch.autocast(device_type="cuda" if not mps else "mps", dtype=torch.float16, enabled=half):\n'
        "        return model(x)\n"
    )
    out = run(src).new_source
    assert 'device_type="cuda" if not mps else "mps"' in out and "TODO(tpu-migrate TPU101)" in out


# --- re-read on held-out 27 after the fixes: a count named as the host's process count beside a kept rank within the
# host (InternVL's `local_rank = rank % device_count()` kept, `local_size = device_count()` renamed), and a kept
# ladder whose names were set before it (doctr's `model = model.to(device)`: not "unset") ---


def test_a_local_size_count_stays_with_its_kept_twin():
    src = (
        "import os\nimport torch\n\n\ndef init():\n    rank = int(os.environ['SLURM_PROCID'])\n"
        "    local_rank = rank % torch.cuda.device_count()\n    local_size = torch.cuda.device_count()\n"
        "    return local_rank == 0, local_size\n"
    )
    out = run(src).new_source
    assert "local_size = torch.cuda.device_count()" in out
    assert "torch.accelerator.device_count" not in out


def test_a_kept_ladder_does_not_call_a_name_set_before_it_unset():
    src = (
        "import torch\n\n\ndef load(model, device):\n    model = model.to(device)\n"
        "    if device.type == 'cuda' and torch.cuda.get_device_capability(device) >= (8, 0):\n"
        "        model = model.bfloat16()\n    return model\n"
    )
    assert "stays unset" not in run(src).new_source


# --- a kernel package of the project (Pointcept's libs/pointops: setup.py ships `packages=["pointops"]` from
# functions/ beside `CUDAExtension(name="pointops._C")`): importing it is importing the kernels, so the engines that
# hand it batches cannot move them to 'tpu' unflagged ---


def test_a_projects_kernel_package_is_cuda_only(tmp_path):
    kernel = tmp_path / "libs" / "kops"
    (kernel / "functions").mkdir(parents=True)
    (kernel / "setup.py").write_text(
        "from setuptools import setup\nfrom torch.utils.cpp_extension import BuildExtension, CUDAExtension\n\n"
        'setup(\n    name="kops",\n    packages=["kops"],\n    package_dir={"kops": "functions"},\n'
        '    ext_modules=[CUDAExtension(name="kops._C", sources=["src/k.cu"])],\n'
        '    cmdclass={"build_ext": BuildExtension},\n)\n'
    )
    (kernel / "functions" / "__init__.py").write_text("from kops._C import knn\n")
    (tmp_path / "engine.py").write_text(
        "import torch\nimport kops\n\n\ndef test(batch):\n    batch = batch.cuda()\n    return kops.knn(batch)\n"
    )
    out = write_tree(tmp_path)
    assert "batch = batch.cuda()" in out["engine.py"] and "TODO(tpu-migrate TPU211)" in out["engine.py"]


# --- a module whose top-level import of the project's kernel raises when it is missing (Deformable-DETR's MSDA, in
# Mask2Former and d2go: `try: import MultiScaleDeformableAttention as MSDA except ModuleNotFoundError: raise ...`):
# the kernel is the module's only path, so its op test cannot move the op's inputs to 'tpu' ---


def test_a_kernel_imported_or_raise_at_top_level_makes_its_users_cuda_only(tmp_path):
    ops = tmp_path / "ops"
    (ops / "functions").mkdir(parents=True)
    (ops / "setup.py").write_text(
        "from setuptools import setup\nfrom torch.utils.cpp_extension import CppExtension, CUDAExtension\n\n"
        "extension = CppExtension\nif True:\n    extension = CUDAExtension\n"
        'setup(name="MSDA", ext_modules=[extension("MultiScaleDeformableAttention", ["a.cu"])])\n'
    )
    (ops / "functions" / "__init__.py").write_text("")
    (ops / "functions" / "msda_func.py").write_text(
        "import torch\n\ntry:\n    import MultiScaleDeformableAttention as MSDA\nexcept ModuleNotFoundError:\n"
        "    info = 'compile it'\n    raise ModuleNotFoundError(info)\n\n\ndef run(v):\n    return MSDA.forward(v)\n"
    )
    (ops / "test.py").write_text(
        "import torch\nfrom functions.msda_func import run\n\nvalue = torch.rand(2, 3).cuda()\nprint(run(value))\n"
    )
    out = write_tree(tmp_path)
    assert (
        "torch.rand(2, 3).cuda()" in out["ops/test.py"] and "TODO(tpu-migrate TPU211)" in out["ops/test.py"]
    )


# --- an availability check and-ed with a CUDA-graph switch (GPT-SoVITS' t2s_model_cudagraph: `request.use_cuda_graph
# and self.graph is None and torch.cuda.is_available()`): renamed, a TPU host captured a torch.cuda.CUDAGraph ---


def test_an_availability_check_and_ed_with_a_cuda_graph_switch_stays_cudas():
    src = (
        "import torch\n\n\ndef step(request, decoder, graph):\n"
        "    if request.use_cuda_graph and graph is None and torch.cuda.is_available():\n"
        "        graph = decoder.capture()\n    return graph\n\n\n"
        "def pick(args):\n    return 'cuda' if args.use_gpu and torch.cuda.is_available() else 'cpu'\n"
    )
    out = run(src).new_source
    assert "graph is None and torch.cuda.is_available()" in out and "TODO(tpu-migrate TPU201)" in out
    assert "args.use_gpu and torch.accelerator.is_available()" in out  # "use the GPU" means the accelerator
