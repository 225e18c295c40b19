"""Wrong rewrites found by reading every changed hunk of held-out check 3 (benchmarks/migrate_corpus_heldout3.txt),
each as a class in its own words, each asserting the rewrite it must not make (or the one it must not miss)."""

from __future__ import annotations

import pytest
from migrate_helpers import codes, run


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


# --- a GradScaler whose autocast lives in another module, or beside fp16 code (open_clip precision == "amp") ----
@pytest.mark.parametrize(
    "src",
    [
        # the scaler is made where the program decided it computes in fp16; the autocast is in another module
        "import torch\ndef setup(args, device):\n    scaler = None\n    if args.precision == 'amp':\n"
        "        scaler = torch.amp.GradScaler(device=device)\n    return scaler\n",
        "import torch\nneed = mp_dtype == torch.float16\nscaler = torch.cuda.amp.GradScaler() if need else None\n",
        # an autocast here, but the model itself is cast to fp16 too
        "import torch\nmodel = model.half()\nscaler = torch.cuda.amp.GradScaler()\n"
        "with torch.cuda.amp.autocast():\n    y = model(x)\n",
    ],
    ids=["autocast-elsewhere", "fp16-policy-elsewhere", "half-model"],
)
def test_a_scaler_whose_dtype_this_file_cannot_show_stays_on(src):
    res = run(src)
    out = _code(res.new_source)
    assert "enabled=False" not in out  # the wrong rewrite: fp16 training with loss scaling switched off
    if "GradScaler(device=device)" in src:
        # a scaler given the run's device already follows it (held-out 28, skrl's agents): left as written
        assert "torch.amp.GradScaler(device=device)" in out
        return
    assert 'torch.amp.GradScaler("tpu"' in out
    assert "TPU302" in codes(res)


def test_a_scaler_beside_an_autocast_that_becomes_bf16_is_still_disabled():
    src = (
        "import torch\nscaler = torch.cuda.amp.GradScaler()\nwith torch.cuda.amp.autocast():\n    y = m(x)\n"
    )
    assert 'torch.amp.GradScaler("tpu", enabled=False)' in run(src).new_source


@pytest.mark.parametrize(
    "call", ["torch.amp.GradScaler(device='cpu', init_scale=2048.)", "torch.amp.GradScaler('cpu')"]
)
def test_a_scaler_for_the_cpu_is_left_alone(call):
    src = f"import torch\nscaler = {call}\nwith torch.autocast('cpu', dtype=torch.bfloat16):\n    y = m(x)\n"
    assert run(src).new_source == src  # (a disabled scaler's state_dict() is empty: the test read ['scale'])


# --- a device check whose flag picks another library's CUDA build (yolov5 onnxruntime-gpu / CUDAExecutionProvider) --
@pytest.mark.parametrize(
    "use",
    [
        "    check_requirements('onnxruntime-gpu' if cuda else 'onnxruntime')\n",
        "    providers = ['CUDAExecutionProvider', 'CPUExecutionProvider'] if cuda else ['CPUExecutionProvider']\n",
        "    if cuda:\n        pip_install('paddlepaddle-gpu')\n",
    ],
    ids=["requirement", "ort-provider", "branch"],
)
def test_a_check_choosing_a_cuda_build_of_another_library_stays(use):
    src = f"import torch\ndef backend(device):\n    cuda = torch.cuda.is_available() and device.type != 'cpu'\n{use}"
    res = run(src)
    out = _code(res.new_source)
    assert (
        "torch.cuda.is_available()" in out
    )  # the wrong rewrite: a TPU host told to install / use CUDA's build
    assert "torch.accelerator" not in out
    assert res.new_source.count("TODO(tpu-migrate") == 1  # one TODO: on the kept check


def test_a_check_beside_only_cpu_builds_is_still_migrated():
    src = "import torch\ndef backend():\n    cuda = torch.cuda.is_available()\n    print('onnxruntime' if cuda else 'cpu')\n"
    assert "torch.accelerator.is_available()" in run(src).new_source


def test_a_cuda_provider_named_outside_any_check_is_flagged():
    res = run(
        "import torch\nimport onnxruntime as ort\nx = torch.zeros(2).cuda()\n"
        "sess = ort.InferenceSession(f, providers=['CUDAExecutionProvider'])\n"
    )
    assert "TPU211" in codes(res)


# --- the helper behind a CUDA test gate (lightning-hydra-template RunIf: torch.cuda.device_count() < min_gpus) -----
@pytest.mark.parametrize(
    "helper",
    [
        "class RunIf:\n    def __new__(self, min_gpus=0, **kw):\n        conditions = []\n        if min_gpus:\n"
        "            conditions.append(torch.cuda.device_count() < min_gpus)\n"
        "        return pytest.mark.skipif(condition=any(conditions), reason='GPUs', **kw)\n",
        "def requires_gpu(fn):\n    return pytest.mark.skipif(torch.cuda.device_count() == 0, reason='x')(fn)\n",
    ],
    ids=["RunIf", "requires_gpu"],
)
def test_a_test_gate_helper_keeps_its_cuda_check(helper):
    res = run(f"import pytest, torch\n{helper}")
    out = _code(res.new_source)
    assert "torch.cuda.device_count()" in out  # the wrong rewrite: RunIf(min_gpus=1) now true on TPU, so the
    assert "torch.accelerator" not in out  # CUDA tests it guards (flagged as CUDA's) run there and fail
    assert "TPU201" in codes(res)


def test_a_check_in_an_ordinary_helper_is_still_migrated():
    src = "import torch\ndef pick_device():\n    return 'cuda' if torch.cuda.device_count() > 0 else 'cpu'\n"
    assert "torch.accelerator.device_count()" in run(src).new_source


# --- torch.cuda.manual_seed(x) seeds the GPU only (job 2; Rainbow seeds the GPU with a second random draw) ----------
def test_a_gpu_seed_of_another_value_seeds_the_tpu_only():
    src = (
        "import torch, numpy as np\ntorch.manual_seed(np.random.randint(1, 10000))\n"
        "torch.cuda.manual_seed(np.random.randint(1, 10000))\ntorch.cuda.manual_seed_all(base + rank)\n"
    )
    out = _code(run(src).new_source)
    # the wrong rewrite: torch.manual_seed(<second draw>) reseeds the CPU generator, changing every later CPU draw
    assert out.count("torch.manual_seed(") == 1
    assert "_tpu_random().manual_seed(np.random.randint(1, 10000))" in out
    assert "_tpu_random().manual_seed_all(base + rank)" in out


def test_a_gpu_seed_equal_to_the_cpu_seed_folds_into_it():
    src = "import torch\ndef seed_all(s):\n    torch.manual_seed(s)\n    torch.cuda.manual_seed_all(s)\n"
    out = _code(run(src).new_source)
    assert out.count("manual_seed") == 1 and "torch.manual_seed(s)" in out


# --- `if <other accelerator>: ... else: <CUDA>`: the else is the default path a TPU host takes (job 2) -------------
@pytest.mark.parametrize(
    "test", ["is_xpu_available()", "torch.xpu.is_available()", "torch.backends.mps.is_available()"]
)
def test_the_default_branch_after_another_accelerator_is_migrated(test):
    other = "mps" if "mps" in test else "xpu"
    src = (
        f"import torch\nimport torch.distributed as dist\ndef setup(model):\n    if {test}:\n"
        f"        dist.init_process_group('ccl')\n        model.to('{other}')\n    else:\n"
        "        dist.init_process_group('nccl')\n        model.to('cuda:0')\n"
    )
    out = _code(run(src).new_source)
    # the ugly rewrite: 'cuda'/'nccl' kept as 'one branch of a dispatch' though a TPU host runs exactly this branch
    assert "'tpu_dist'" in out and "'tpu:0'" in out and "cuda" not in out and "nccl" not in out
    assert f"'{other}'" in out and "'ccl'" in out


def test_a_dispatch_comparing_device_names_still_keeps_its_cuda_branch():
    src = "def pick(d):\n    if d == 'cuda':\n        return 1\n    elif d == 'xpu':\n        return 2\n"
    assert "d == 'cuda'" in run(src).new_source


def test_the_branch_of_a_migrated_cuda_check_follows_it_beside_another_accelerator():
    src = (
        "import torch\ndef place(model):\n    if is_xpu_available():\n        model.to('xpu:0')\n"
        "    elif torch.cuda.is_available():\n        model.to('cuda')\n    return model\n"
    )
    out = _code(run(src).new_source)
    # the ugly rewrite: the check and 'cuda' both kept (dispatch), so the model stayed on the CPU on TPU
    assert "torch.accelerator.is_available()" in out and "model.to('tpu')" in out and "'xpu:0'" in out


# --- an and-chain that tests CUDA's toolkit version stays CUDA's test whole (job 2; llama-recipes fsdp_utils) -------
def test_a_conjunction_reading_the_cuda_version_is_not_half_migrated():
    src = (
        "import torch\nimport torch.distributed as dist\ndef ok():\n    return (\n        torch.version.cuda\n"
        "        and torch.cuda.is_bf16_supported()\n        and dist.is_nccl_available()\n    )\n"
    )
    out = _code(run(src).new_source)
    # the ugly rewrite: is_bf16_supported() folded away and is_nccl_available() renamed beside a kept CUDA version
    assert "torch.cuda.is_bf16_supported()" in out and "dist.is_nccl_available()" in out


def test_is_bf16_supported_alone_asks_for_a_tpu_and_after_a_check_folds():
    # (held-out 17: folded to True alone, LLaMA-Factory's export turned a CPU run's float32 into bf16)
    out = run("import torch\ndtype = 'bf16' if torch.cuda.is_bf16_supported() else 'fp16'\n").new_source
    assert "dtype = 'bf16' if getattr(torch.accelerator.current_accelerator(" in out
    out = run("import torch\nok = torch.cuda.is_available() and torch.cuda.is_bf16_supported()\n").new_source
    assert "ok = torch.accelerator.is_available()\n" in out


# --- a device ladder whose CUDA branch reads device properties TPU has (yolov5 select_device; held-out 3 ugly) ------
def test_a_ladder_reading_name_and_memory_is_migrated_whole():
    src = (
        "import torch\ndef select(s=''):\n    if torch.cuda.is_available():\n        p = torch.cuda.get_device_properties(0)\n"
        "        s += f'{p.name} {p.total_memory}'\n        arg = 'cuda:0'\n    else:\n        arg = 'cpu'\n"
        "    return torch.device(arg)\n"
        "def info(m):\n    return sum(p.numel() for p in m.parameters())\n"  # another `p`, elsewhere
    )
    out = _code(run(src).new_source)
    # the ugly rewrite: the check kept (p.numel() read elsewhere taken for a CUDA capability) -> CPU on TPU
    assert "torch.accelerator.is_available()" in out and "torch.tpu.get_device_properties(0)" in out
    assert "'tpu:0'" in out


def test_a_capability_read_of_the_properties_still_keeps_the_check():
    src = (
        "import torch\ndef tf32_ok():\n    if torch.cuda.is_available():\n"
        "        p = torch.cuda.get_device_properties(0)\n        return p.major >= 8\n    return False\n"
    )
    out = _code(run(src).new_source)
    assert "torch.cuda.is_available()" in out and "p.major" in out


# --- device_map="auto": accelerate never places on TorchTPU (llama-recipes load_model; missed in held-out 2) --------
@pytest.mark.parametrize(
    "line",
    [
        "m = AutoModelForCausalLM.from_pretrained(name, device_map='auto')\n",
        "kwargs['device_map'] = 'auto'\n",
    ],
)
def test_an_automatic_device_map_is_flagged(line):
    src = f"import torch\nfrom transformers import AutoModelForCausalLM\n{line}x = torch.zeros(2).cuda()\n"
    res = run(src)
    assert "TPU915" in codes(res) and "device_map" in res.new_source  # flagged, never rewritten


def test_an_explicit_cpu_device_map_is_not_flagged():
    src = "import torch\nfrom transformers import AutoModel\nm = AutoModel.from_pretrained(n, device_map='cpu')\n"
    assert "TPU915" not in codes(run(src))


def test_an_automatic_device_map_is_flagged_in_a_large_file_too():
    # (a large file takes the partial-parse path: a statement without a prefilter trigger is hidden from the rules)
    filler = "".join(f"def helper_{i}(a, b):\n    return a * {i} + b\n\n\n" for i in range(200))
    src = (
        "import torch\nfrom transformers import AutoModelForCausalLM\n\n"
        + filler
        + "model = AutoModelForCausalLM.from_pretrained(name, device_map='auto')\nx = torch.zeros(2).cuda()\n"
    )
    assert len(src) > 8_000
    assert "TPU915" in codes(run(src))


# --- a device check choosing torch.load's map_location (DeepSpeedExamples BingBert from_pretrained) ----------------
def test_a_check_choosing_map_location_stays_cudas():
    src = "import torch\ndef load(p):\n    return torch.load(p, map_location='cpu' if not torch.cuda.is_available() else None)\n"
    out = _code(run(src).new_source)
    # the wrong rewrite: on TPU the accelerator check made map_location None, and a CUDA-saved checkpoint fails
    assert "torch.cuda.is_available()" in out and "torch.accelerator" not in out


def test_a_plain_map_location_check_elsewhere_is_still_migrated():
    src = "import torch\ndef load(p):\n    dev = 'cuda' if torch.cuda.is_available() else 'cpu'\n    return torch.load(p, map_location=dev)\n"
    assert "torch.accelerator.is_available()" in run(src).new_source


# --- a repository package named like a CUDA stack is the project's own code (DeepSpeedExamples BingBert nvidia/) -----
def test_a_project_package_named_nvidia_is_not_cuda_only(tmp_path):
    (tmp_path / "nvidia").mkdir()
    (tmp_path / "nvidia" / "modeling.py").write_text("class BertModel:\n    pass\n")
    f = tmp_path / "run.py"
    src = "import torch\nfrom nvidia.modeling import BertModel\nx = torch.zeros(2).cuda()\n"
    f.write_text(src)
    res = run(src, path=str(f))
    # the wrong flag: the file's own BERT code called CUDA-only (a top-level one also stops the whole file migrating)
    assert "TPU211" not in codes(res) and '.to("tpu")' in res.new_source


def test_a_module_file_wrapping_a_cuda_stack_is_still_cuda_only(tmp_path):
    f = tmp_path / "triton.py"  # lion_pytorch/triton.py wraps the real triton
    src = "import torch\nimport triton\nx = torch.zeros(2).cuda()\n"
    f.write_text(src)
    assert "TPU211" in codes(run(src, path=str(f)))
