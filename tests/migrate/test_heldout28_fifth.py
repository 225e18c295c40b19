"""Wrong rewrites the fifth reading of held-out check 28 found (benchmarks/migrate_corpus_heldout28.txt, tool
94d42f5), each as a class in its own words, each asserting what the tool must (not) do."""

from __future__ import annotations

from migrate_helpers import run, write_quant_project, write_tree

# --- `is_cuda` choosing shared memory (skrl's parallel trainer: `if not obs.is_cuda: obs.share_memory_()` before a
# multiprocessing queue): CUDA tensors cross processes through CUDA's IPC, CPU ones through shared memory; renamed,
# TPU tensors skipped share_memory_ and went onto the queue as if TorchTPU had IPC ---


def test_an_is_cuda_test_choosing_shared_memory_is_kept_and_flagged():
    src = (
        "import torch\n\n\ndef worker(queue, actions):\n    if not actions.is_cuda:\n"
        "        actions.share_memory_()\n    queue.put(actions)\n"
    )
    res = run(src)
    assert "if not actions.is_cuda:" in res.new_source
    assert any("TorchTPU tensors cannot cross processes" in d.message for d in res.diagnostics)


def test_an_is_cuda_test_without_shared_memory_is_still_rewritten():
    src = "import torch\n\n\ndef f(x):\n    if x.is_cuda:\n        x = x * 2\n    return x\n"
    assert 'x.device.type == "tpu"' in run(src).new_source


# --- tensors handed to spawned workers (torchdrug's comm test: the parent builds `.cuda()` objects and passes them
# to `mp.spawn(worker, (fn, objs, queue, event))`): TPU tensors cannot be handed to other processes ---


def test_a_spawn_handing_values_to_device_workers_says_they_must_be_on_the_cpu():
    src = (
        "import torch\nfrom torch import multiprocessing as mp\n\n\n"
        "def worker(rank, objs):\n    x = objs[rank].cuda()\n    return x\n\n\n"
        "def main():\n    objs = [torch.zeros(2).cuda() for _ in range(4)]\n    mp.spawn(worker, (objs,), nprocs=4)\n"
    )
    msgs = [d.message for d in run(src).diagnostics if d.code == "TPU409"]
    assert msgs and "tensors the parent hands them" in msgs[0]


def test_a_spawn_with_only_constants_does_not_speak_of_handed_tensors():
    src = (
        "import torch\nfrom torch import multiprocessing as mp\n\n\n"
        "def worker(rank, n):\n    x = torch.zeros(n).cuda()\n    return x\n\n\n"
        "def main():\n    mp.spawn(worker, (4,), nprocs=4)\n"
    )
    msgs = [d.message for d in run(src).diagnostics if d.code == "TPU409"]
    assert msgs and "tensors the parent hands them" not in msgs[0]


# --- a class defined in a function is its own program part (skrl's config builds a PyTorch, a JAX and a Warp class
# in one __init__; only the Warp class imports warp): the PyTorch class's device and backend were kept as written
# while its set_device was removed, and its test asserting the migrated device failed ---


def test_a_limited_import_in_one_nested_class_does_not_keep_a_sibling_class_devices():
    src = (
        "import os\n\n\nclass _Config:\n    def __init__(self):\n        class PyTorch:\n"
        "            def __init__(self):\n                rank = int(os.getenv('LOCAL_RANK', '0'))\n"
        "                self._device = f'cuda:{rank}'\n\n"
        "        class Warp:\n            def __init__(self):\n                self._device = 'cuda:0'\n"
        "                import warp as wp\n\n                wp.init()\n\n"
        "        self.torch = PyTorch()\n        self.warp = Warp()\n"
    )
    out = run(src).new_source
    assert "self._device = 'tpu'" in out  # the PyTorch class's own device
    assert "self._device = 'cuda:0'" in out  # Warp's, a warp device name


def test_a_class_importing_jax_keeps_its_device_names():
    src = (
        "import torch\n\n\nclass Config:\n    def __init__(self):\n        class JAX:\n"
        "            def __init__(self):\n                self._device = 'cuda:0'\n"
        "                import jax\n\n                self.devices = jax.devices()\n\n"
        "        self.jax = JAX()\n        self.device = torch.device('cuda')\n"
    )
    out = run(src).new_source
    assert "self._device = 'cuda:0'" in out and "torch.device('tpu')" in out


# --- a prefix cut off by its length (axolotl's NVML helper: `if d.startswith("cuda:"): d = int(d[5:])`): renamed
# to 'tpu:', the slice left ':0' for int() and raised ValueError ---


def test_a_device_prefix_cut_off_by_its_length_is_kept_and_flagged():
    src = (
        "import torch\n\n\ndef usage(device=0):\n"
        "    if isinstance(device, str) and device.startswith('cuda:'):\n        device = int(device[5:])\n"
        "    return device\n"
    )
    res = run(src)
    assert "device.startswith('cuda:')" in res.new_source
    assert any("cut off by its length" in d.message for d in res.diagnostics)


def test_a_device_prefix_without_a_cut_is_still_renamed():
    src = "import torch\n\n\ndef usage(device):\n    return device.startswith('cuda:')\n"
    assert "startswith('tpu:')" in run(src).new_source


# --- twin comparisons of one device (torchdrug's engine: `if self.device.type == "cuda": batch = utils.cuda(batch,
# ...)` kept in train and evaluate, the model's own `if self.device.type == "cuda": task = task.cuda(self.device)`
# renamed: on 'tpu' the model moved and its batches stayed on the CPU) ---


def test_a_device_comparison_placing_the_model_stays_with_its_kept_twins():
    src = (
        "import torch\nfrom proj import utils\n\n\nclass Engine:\n    def __init__(self, task, gpus):\n"
        "        self.device = torch.device(gpus[0])\n        if self.device.type == 'cuda':\n"
        "            task = task.cuda(self.device)\n        self.model = task\n\n"
        "    def train(self, loader):\n        for batch in loader:\n"
        "            if self.device.type == 'cuda':\n                batch = utils.cuda(batch, device=self.device)\n"
        "            self.model(batch)\n"
    )
    out = run(src).new_source
    assert out.count("if self.device.type == 'cuda':") == 2
    assert "task.cuda(self.device)" in out


# --- a CUDA-only project module imported in a module-level branch (LLaMA2-Accessory's single_turn: `if args.quant:
# from accessory.util.quant import quantize`, bitsandbytes): flagged there as inside a function ---


def test_a_module_level_branch_importing_a_cuda_only_project_module_is_flagged(tmp_path):
    write_quant_project(
        tmp_path,
        "import sys\nimport torch\n\nmodel = torch.nn.Linear(2, 2)\nif '--quant' in sys.argv:\n"
        "    from pkg.util.quant import quantize\n\n    quantize(model)\nmodel.cuda()\n",
    )
    out = write_tree(tmp_path)["proj/demo.py"]
    assert (
        "this module imports, in a branch, the project's `pkg/util/quant.py`, built on `bitsandbytes`" in out
    )


def test_a_launcher_handing_its_workers_a_config_does_not_speak_of_tensors():
    src = (
        "import torch\nfrom torch import multiprocessing as mp\n\n\n"
        "def worker(rank, main_func, config):\n    torch.zeros(2).cuda()\n    main_func(config)\n\n\n"
        "def launch(main_func, config, device_type: str = 'cuda'):\n"
        "    mp.spawn(worker, nprocs=2, args=(main_func, config))\n"
    )
    msgs = [d.message for d in run(src).diagnostics if d.code == "TPU409"]
    assert msgs and "tensors the parent hands them" not in msgs[0]


# --- an explicit "use mixed precision" switch on the scaler (dreamerv3's `GradScaler(enabled=use_amp)`, nerfstudio's
# `enabled=use_grad_scaler`) while every autocast of the file runs bf16 on TPU: kept on, it scaled bf16 losses
# with ops TorchTPU does not promise ---


def test_an_enabled_switch_on_the_scaler_is_turned_off_when_every_autocast_is_bf16():
    src = (
        "import torch\n\n\ndef step(model, x, use_amp):\n"
        "    scaler = torch.cuda.amp.GradScaler(enabled=use_amp)\n"
        "    with torch.cuda.amp.autocast(enabled=use_amp):\n        loss = model(x)\n"
        "    scaler.scale(loss).backward()\n"
    )
    res = run(src)
    assert 'torch.amp.GradScaler("tpu", enabled=False)' in res.new_source
    assert any("was enabled=use_amp" in d.message for d in res.diagnostics)


def test_an_enabled_switch_stays_when_the_autocast_dtype_is_chosen_at_run_time():
    src = (
        "import torch\n\n\ndef step(model, x, dtype):\n"
        "    scaler = torch.cuda.amp.GradScaler(enabled=dtype == torch.float16)\n"
        "    with torch.autocast('cuda', dtype=dtype):\n        loss = model(x)\n"
        "    scaler.scale(loss).backward()\n"
    )
    assert "enabled=dtype == torch.float16" in run(src).new_source


# --- from the sixth reading (tool 831c179) ---


def test_a_comparison_whose_branch_appends_the_rank_to_the_device_is_kept():
    # nerfstudio's trainer: renamed, every process named 'tpu:<local rank>', a device only rank 0 has
    src = (
        "import torch\n\n\nclass Trainer:\n    def __init__(self, config, local_rank=0):\n"
        "        self.device = config.device_type\n        if self.device == 'cuda':\n"
        "            self.device += f':{local_rank}'\n        self.x = torch.zeros(2, device=self.device)\n"
    )
    res = run(src)
    assert "if self.device == 'cuda':" in res.new_source
    assert any("'tpu' takes no ordinal" in d.message for d in res.diagnostics)


def test_set_device_from_the_users_gpu_list_is_kept_and_flagged():
    # LLaMA2-Accessory's model workers started by subprocess.Popen: removed, the user's list chose nothing
    src = "import torch\n\n\ndef worker(rank, gpu_ids):\n    torch.cuda.set_device(gpu_ids[rank - 1])\n"
    res = run(src)
    assert "torch.cuda.set_device(gpu_ids[rank - 1])" in res.new_source
    assert any("picks this process's GPU from the user's list" in d.message for d in res.diagnostics)


def test_set_device_of_the_local_rank_is_still_removed():
    src = "import torch\n\n\ndef setup(local_rank):\n    torch.cuda.set_device(local_rank)\n"
    assert "set_device" not in run(src).new_source


def test_a_cuda_choice_followed_by_an_mps_test_asks_for_a_tpu_by_name():
    # tortoise's HiFi-GAN decoder: torch.accelerator.is_available() is true on a Mac, where torch.device('tpu')
    # raised before the MPS test after it could run
    src = (
        "import torch\n\n\nclass Decoder:\n    def __init__(self):\n"
        "        self.device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
        "        if torch.backends.mps.is_available():\n            self.device = torch.device('mps')\n"
    )
    out = run(src).new_source
    assert "torch.accelerator.is_available()" not in out and '== "tpu"' in out


def test_the_device_of_an_object_another_library_built_is_kept():
    # skrl's Isaac Lab loader: the simulator takes 'cpu' or 'cuda:N'
    src = (
        "import torch\n\n\ndef load(args, rank):\n    from isaaclab_tasks.utils import parse_env_cfg\n\n"
        "    cfg = parse_env_cfg(args.task)\n    cfg.sim.device = f'cuda:{rank}'\n"
        "    x = torch.zeros(2, device='cuda')\n    return cfg, x\n"
    )
    res = run(src)
    assert "cfg.sim.device = f'cuda:{rank}'" in res.new_source and "device='tpu'" in res.new_source
    assert sum("another library" in d.message for d in res.diagnostics) == 1


def test_a_host_rank_stored_where_a_local_rank_branch_stores_it_is_kept():
    # DETR's init_distributed_mode: `args.gpu = rank % device_count()` under SLURM, LOCAL_RANK in the other branch
    src = (
        "import os\nimport torch\n\n\ndef init(args):\n    if 'RANK' in os.environ:\n"
        "        args.gpu = int(os.environ['LOCAL_RANK'])\n    elif 'SLURM_PROCID' in os.environ:\n"
        "        args.rank = int(os.environ['SLURM_PROCID'])\n        args.gpu = args.rank % torch.cuda.device_count()\n"
    )
    assert "args.rank % torch.cuda.device_count()" in run(src).new_source


def test_an_optional_module_level_import_with_its_fallback_is_not_flagged_as_a_branch(tmp_path):
    # InternVL: `try: from .flash_attention import FlashAttention; has_flash_attn = True except: ...`
    proj = tmp_path / "proj"
    (proj / "pkg").mkdir(parents=True)
    (proj / "setup.py").write_text("from setuptools import setup\nsetup(name='pkg')\n")
    (proj / "pkg" / "__init__.py").write_text("")
    (proj / "pkg" / "flash_attention.py").write_text("from flash_attn.bert_padding import unpad_input\n")
    (proj / "pkg" / "vit.py").write_text(
        "import torch\n\ntry:\n    from .flash_attention import FlashAttention\n    has_flash_attn = True\n"
        "except ImportError:\n    has_flash_attn = False\n\nx = torch.zeros(2).cuda()\n"
    )
    out = write_tree(tmp_path)["proj/pkg/vit.py"]
    assert "in a branch" not in out and '.to("tpu")' in out
