"""Wrong rewrites found by reading every changed hunk of held-out check 4 (benchmarks/migrate_corpus_heldout4.txt),
each as a class in its own words, each asserting the rewrite it must not make (or the one it must not miss)."""

from __future__ import annotations

import ast

import pytest
from migrate_helpers import run


def _code(out: str) -> str:
    """The program without comments (a TODO may quote the rewrite it did not make)."""
    return "\n".join(line for line in out.splitlines() if not line.lstrip().startswith("#"))


# --- a rank-0 print whose printed values hold a call left for a human (vit_10b_fsdp_example xm.get_memory_info) ---
@pytest.mark.parametrize(
    "printed",
    [
        'f"step {step}, memory: {xm.get_memory_info(device)}"',
        "'mem', xm.get_memory_info(device)",
        '"loss", loss,\n        f"mem {xm.get_memory_info(device)}"',
    ],
    ids=["f-string", "positional", "multi-line"],
)
def test_a_rank_zero_print_holding_a_flagged_call_settles_in_one_pass(printed):
    src = (
        "import torch_xla.core.xla_model as xm\n\n"
        f"def log(step, loss, device):\n    xm.master_print(\n        {printed}\n    )\n"
    )
    first = run(src).new_source
    ast.parse(first)
    assert "xm.master_print" not in _code(first)  # still printed on rank 0 only
    assert first.count("TPU519") == 1
    # the wrong output: a second run put the same TODO again above the print inside the new `if`
    assert run(first).new_source == first


def test_a_rank_zero_print_of_plain_values_keeps_its_indented_body():
    src = "import torch_xla.core.xla_model as xm\n\ndef log(step):\n    xm.master_print(f'step {step}')\n"
    out = run(src).new_source
    assert "== 0:\n        print(f'step {step}')" in out
    assert run(out).new_source == out


# --- a device check whose device feeds a CPU/CUDA-only library (dlrm torchrec_dlrm/dlrm_main.py) ----------------
_RECSYS = (
    "import os\nimport torch\n{imports}\n\n"
    "def main():\n"
    "    rank = int(os.environ['LOCAL_RANK'])\n"
    "    if torch.cuda.is_available():\n"
    "        device = torch.device(f'cuda:{{rank}}')\n"
    "        backend = 'nccl'\n"
    "    else:\n"
    "        device = torch.device('cpu')\n"
    "        backend = 'gloo'\n"
    "    torch.distributed.init_process_group(backend=backend)\n"
    "    return DistributedModelParallel(module=model, device=device)\n"
)


@pytest.mark.parametrize(
    "imports",
    [
        "from torchrec.distributed.model_parallel import DistributedModelParallel\n"
        "from torchrec.distributed.planner import Topology",
        "import fbgemm_gpu\nfrom mylib import DistributedModelParallel",
    ],
    ids=["torchrec", "fbgemm_gpu"],
)
def test_a_program_built_on_a_cpu_or_cuda_only_library_is_flagged_not_handed_tpu(imports):
    src = _RECSYS.format(imports=imports)
    res = run(src)
    out = _code(res.new_source)
    # the wrong rewrite: torch.accelerator.is_available() -> device "tpu" handed to torchrec (cpu/cuda/mtia only),
    # where the original program ran on the CPU with gloo on a host without CUDA
    assert "torch.cuda.is_available()" in out and "'tpu'" not in out and '"tpu"' not in out
    assert res.new_source.count("TODO(tpu-migrate TPU211)") == 1  # once per file, not once per import


def test_torchrec_data_utilities_are_plain_torch():
    src = (
        "import torch\nfrom torchrec.sparse.jagged_tensor import KeyedJaggedTensor\n"
        "from torchrec.datasets.utils import Batch\nx = torch.ones(2).cuda()\n"
    )
    res = run(src)
    assert "TPU211" not in res.new_source and 'torch.ones(2).to("tpu")' in res.new_source


def test_a_package_of_the_repository_named_torchrec_is_its_own_code(tmp_path):
    (tmp_path / "torchrec").mkdir()
    (tmp_path / "torchrec" / "distributed.py").write_text("DistributedModelParallel = object\n")
    f = tmp_path / "train.py"
    f.write_text(_RECSYS.format(imports="from torchrec.distributed import DistributedModelParallel"))
    res = run(f.read_text(), path=str(f))
    assert "TPU211" not in res.new_source
    assert "torch.cuda.is_available()" not in _code(res.new_source)  # the project's own code migrates


# --- twin checks in one function sharing a local, one kept for a CUDA-only call (detr MetricLogger.log_every) -------
_TEMPLATE_TWINS = (
    "import torch\n\n"
    "def report(steps):\n"
    "    if torch.cuda.is_available():\n"
    "        line = 'step {n} loss {loss:.3f} reserved {reserved}'\n"
    "    else:\n"
    "        line = 'step {n} loss {loss:.3f}'\n"
    "    for n, loss in steps:\n"
    "        if torch.cuda.is_available():\n"
    "            print(line.format(n=n, loss=loss, reserved=torch.cuda.mem_get_info()))\n"
    "        else:\n"
    "            print(line.format(n=n, loss=loss))\n"
)
_VALUE_TWINS = (
    "import torch\n\n"
    "def peak(model, x):\n"
    "    if torch.cuda.is_available():\n"
    "        torch.cuda.mem_get_info()\n"
    "        before = torch.cuda.mem_get_info()\n"
    "    y = model(x)\n"
    "    if torch.cuda.is_available():\n"
    "        print('peak before the step', before)\n"
    "    return y\n"
)


@pytest.mark.parametrize(
    "src", [_TEMPLATE_TWINS, _VALUE_TWINS], ids=["template-then-fill", "value-then-read"]
)
def test_twin_checks_sharing_a_local_stay_cuda_together(src):
    res = run(src)
    out = _code(res.new_source)
    # the wrong rewrite: the first check made true on TPU (a '{reserved}' field no one fills -> KeyError; or a
    # value set under a kept check and read under a rewritten one -> NameError)
    assert out.count("torch.cuda.is_available()") == 2
    assert "torch.accelerator.is_available()" not in out


def test_twin_checks_that_share_nothing_are_each_decided_alone():
    src = (
        "import torch\n\n"
        "def run(x):\n"
        "    if torch.cuda.is_available():\n"
        "        x = x.cuda()\n"
        "    if torch.cuda.is_available():\n"
        "        print(torch.cuda.mem_get_info())\n"
        "    return x\n"
    )
    out = _code(run(src).new_source)
    assert "torch.accelerator.is_available()" in out  # the first one still migrates
    assert out.count("torch.cuda.is_available()") == 1


def test_a_twin_that_fills_a_shared_list_in_place_stays_cuda_with_its_kept_twin():
    # mae's MetricLogger: `if torch.cuda.is_available(): parts.append('mem {memory}')`, formatted under a kept twin
    src = (
        "import torch\n\n"
        "def report(steps):\n"
        "    parts = ['step {n}']\n"
        "    if torch.cuda.is_available():\n"
        "        parts.append('mem {memory:.0f}')\n"
        "    line = ' '.join(parts)\n"
        "    for n in steps:\n"
        "        if torch.cuda.is_available():\n"
        "            print(line.format(n=n, memory=torch.cuda.mem_get_info()))\n"
        "        else:\n"
        "            print(line.format(n=n))\n"
    )
    out = _code(run(src).new_source)
    assert "torch.accelerator.is_available()" not in out
    assert out.count("torch.cuda.is_available()") == 2


# --- a device test that picks accelerate's automatic placement (LLaVA load_pretrained_model) ----------------------
@pytest.mark.parametrize(
    "branch",
    [
        "        kwargs['device_map'] = {'': device}\n",
        "        device_map = {'': device}\n",
        "        return AutoModel.from_pretrained(path, device_map={'': device})\n",
    ],
    ids=["dict-key", "name", "keyword"],
)
def test_a_device_test_choosing_automatic_placement_keeps_cuda(branch):
    src = (
        "from transformers import AutoModel\n\n"
        "def load(path, device_map='auto', device='cuda', **kwargs):\n"
        "    kwargs = {'device_map': device_map, **kwargs}\n"
        f"    if device != 'cuda':\n{branch}"
        "    return AutoModel.from_pretrained(path, **kwargs)\n"
    )
    res = run(src)
    out = _code(res.new_source)
    # the wrong rewrite: `device != 'tpu'` sends the new default 'tpu' down the device_map='auto' path, which
    # accelerate fills with CUDA or the CPU, while the inputs go to 'tpu'
    assert "device != 'cuda'" in out
    assert "device='tpu'" in out  # the default itself is still the process's device
    assert "TPU102" in res.new_source


def test_a_device_test_that_does_not_place_a_model_is_still_renamed():
    src = "def pin(device='cuda'):\n    if device != 'cuda':\n        return False\n    return True\n"
    out = _code(run(src).new_source)
    assert "device != 'tpu'" in out


# --- engines that pick their own device (DeepSpeed, accelerate): flagged; a DeepSpeed file is left as written ------
@pytest.mark.parametrize(
    "src",
    [
        "import deepspeed\nimport torch\nds_config = {'fp16': {'enabled': True}}\n"
        "engine, opt, _, _ = deepspeed.initialize(model=model, config=ds_config)\nx = x.cuda()\n",
        "import deepspeed\nengine = deepspeed.init_inference(model, dtype=torch.half)\n",
        "from accelerate import Accelerator\nacc = Accelerator(mixed_precision='fp16')\nmodel = acc.prepare(model)\n",
    ],
    ids=["deepspeed-initialize", "deepspeed-inference", "accelerate"],
)
def test_an_engine_that_picks_its_own_device_is_flagged(src):
    res = run(src)
    # the wrong outcome: silence — the engine runs on the CPU of a TPU host (it knows no 'tpu'); and a DeepSpeed
    # file's batches sent to 'tpu' would meet its model on the CPU (lucidrains' PaLM enwik8_deepspeed): its tensors
    # stay with the engine, the file as written
    assert res.new_source.count("TODO(tpu-migrate TPU916)") == 1
    if "x.cuda()" in src:
        assert "'fp16': {'enabled': True}" in res.new_source  # DeepSpeed's own config is not rewritten
        assert "x = x.cuda()" in res.new_source


# --- a device count kept as CUDA's, handed to mp.spawn (moco main_moco.py: nprocs=ngpus_per_node) ----------------
def test_spawn_of_a_kept_device_count_is_flagged():
    src = (
        "import torch\nimport torch.multiprocessing as mp\n\n"
        "def main(args):\n"
        "    per_host = torch.cuda.device_count()\n"
        "    args.world_size = per_host * args.nodes\n"
        "    mp.spawn(worker, nprocs=per_host, args=(per_host, args))\n\n"
        "def worker(gpu, per_host, args):\n"
        "    args.batch_size = int(args.batch_size / per_host)\n"
    )
    res = run(src)
    # the wrong outcome: an unflagged spawn(nprocs=0) on a TPU host, which starts nothing and exits 0
    assert "TODO(tpu-migrate TPU406)" in res.new_source
    assert "torch.cuda.device_count()" in _code(res.new_source)  # the count itself stays CUDA's (flagged)


def test_spawn_of_a_count_that_was_migrated_is_not_flagged():
    src = (
        "import torch\nimport torch.multiprocessing as mp\n\n"
        "def main(args):\n"
        "    n = torch.cuda.device_count()\n"
        "    mp.spawn(worker, nprocs=n, args=(args,))\n"
    )
    res = run(src)
    assert "TPU406" not in res.new_source
    assert "torch.accelerator.device_count()" in res.new_source


# --- torch.Generator on the device: rewritten (torchtpu-contract.md lists torch.tpu.default_generators; measured
# on this backend: torch.Generator(device="tpu") seeds randn(..., device="tpu") and repeats the stream) ----------
@pytest.mark.parametrize(
    ("line", "want"),
    [
        ('g = torch.Generator(device="cuda")', 'g = torch.Generator(device="tpu")'),
        ('g = torch.Generator("cuda:0").manual_seed(3)', 'g = torch.Generator("tpu:0").manual_seed(3)'),
        ('g = torch.Generator(device=f"cuda:{rank}")', 'g = torch.Generator(device="tpu")'),
    ],
)
def test_a_device_generator_follows_the_device(line, want):
    src = f"import torch\n{line}\nx = torch.randn(4, generator=g, device='cuda')\n"
    out = run(src).new_source
    assert want in out and "device='tpu'" in out  # generator and tensor on the same device


@pytest.mark.parametrize("line", ["g = torch.Generator()", 'g = torch.Generator(device="cpu")'])
def test_a_cpu_generator_is_left_alone(line):
    # the wrong rewrite: a CPU generator (a DataLoader's, a sampler's) moved to 'tpu' -> randperm on the CPU
    # refuses a generator of another device
    src = f"import torch\n{line}\nloader = DataLoader(ds, shuffle=True, generator=g)\nx = x.cuda()\n"
    assert line in run(src).new_source


# --- map_location=lambda storage, loc: storage is the load-to-CPU idiom (BingBert turing/models.py): no flag -----
def test_the_identity_map_location_is_not_flagged():
    src = "import torch\nsd = torch.load(p, map_location=lambda storage, loc: storage)\n"
    assert run(src).new_source == src
    moved = "import torch\nsd = torch.load(p, map_location=lambda storage, loc: storage.cuda(0))\n"
    assert "TPU108" in run(moved).new_source  # device logic in the callable stays flagged


# --- a legacy CUDA tensor type used as a type, not a constructor (Megatron _FLOAT_TYPES, tacotron2 buckets) --------
def test_a_cuda_tensor_type_used_as_a_type_is_flagged_as_such():
    src = "import torch\n_HALF = (torch.HalfTensor, torch.cuda.HalfTensor)\nt = torch.cuda.LongTensor([1])\n"
    out = run(src).new_source
    # the misleading advice: 'create the tensor with device=tpu' for a type that only feeds isinstance()
    assert "used as a type" in out and "t.dtype and t.device.type" in out
    # the constructor builds the CPU type's tensor and moves it (held-out 18: ffjord's VAE called its alias)
    assert "t = _tpu_tensor_type(torch.LongTensor)([1])" in out


# --- a device count compared with the processes of one host (dlrm extend_distributed) ------------------------------
def test_a_device_count_compared_with_the_local_size_stays_cuda():
    src = (
        "import sys\nimport torch\n\n"
        "def init(my_local_size, use_gpu):\n"
        "    if use_gpu:\n"
        "        if my_local_size > torch.cuda.device_count():\n"
        "            sys.exit('not enough GPUs')\n"
    )
    res = run(src)
    out = _code(res.new_source)
    # the wrong rewrite: torch.accelerator.device_count() is 1 per process on TorchTPU, so any host running more
    # than one process exits with "not enough GPUs"
    assert "torch.accelerator.device_count()" not in out
    assert "processes per host" in res.new_source


def test_a_device_count_compared_with_a_constant_still_migrates():
    src = "import torch\nif torch.cuda.device_count() > 0:\n    print('ok')\n"
    assert "torch.accelerator.device_count() > 0" in run(src).new_source
