"""Wrong rewrites found by reading every changed hunk of held-out check 16 (benchmarks/migrate_corpus_heldout16.txt),
each as a class in its own words, each asserting the rewrite it must not make (or the one it must not miss)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from migrate_helpers import run
from test_heldout9_classes import _code, _migrate_tree

from tpu_workbench.migrate.one_file import unified_diff

_SETUP_CUDA = (
    "from setuptools import setup\nfrom torch.utils.cpp_extension import BuildExtension, CUDAExtension\n"
    "setup(name='lib', ext_modules=[CUDAExtension('lib._C', ['csrc/k.cu'])], cmdclass={'build_ext': BuildExtension})\n"
)


def _write(root, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


# --- a copy of a CUDA library carried inside the repository is that library, not the project's code ------------
def test_a_vendored_detectron2_is_left_as_written_and_its_importers_are_flagged(tmp_path):
    # hustvl/Vim carries detectron2 as det/ (det/setup.py builds detectron2._C with CUDAExtension): its default
    # MODEL.DEVICE and CPU fallbacks were moved to 'tpu', its tests sent TPU tensors into the _C ops (nms,
    # ROIAlign, box_iou_rotated): 25 wrong hunks. A tree named like the library with its own CUDA build is a copy.
    _write(
        tmp_path,
        {
            "det/setup.py": _SETUP_CUDA,
            "det/detectron2/__init__.py": "",
            "det/detectron2/config/__init__.py": "",
            "det/detectron2/config/defaults.py": "import torch\nDEVICE = 'cuda'\nx = torch.zeros(1).cuda()\n",
            "det/tests/test_boxes.py": (
                "import torch\nfrom detectron2.config.defaults import DEVICE\n"
                "devices = ['cuda'] if torch.cuda.is_available() else []\n"
            ),
            "vim/detect.py": (  # (detectron2's predictor: its detector; its config alone is plain code)
                "import torch\nfrom detectron2.engine import DefaultPredictor\n"
                "devices = ['cuda'] if torch.cuda.is_available() else []\n"
            ),
        },
    )
    out = _migrate_tree(tmp_path)
    assert (
        out["det/detectron2/config/defaults.py"]
        == "import torch\nDEVICE = 'cuda'\nx = torch.zeros(1).cuda()\n"
    )
    assert "TODO" not in out["det/tests/test_boxes.py"]  # the library's own tests: its code, as written
    user = out["vim/detect.py"]  # the project's code that uses it: flagged, its CUDA check kept
    assert "TPU211" in user and "torch.cuda.is_available()" in _code(user) and "'tpu'" not in _code(user)


def test_a_vendored_apex_repository_folder_is_left_as_written(tmp_path):
    # openai/jukebox carries NVIDIA apex as apex/ (its setup.py builds the CUDA kernels): its tests' SyncBatchNorm
    # (.cuda() -> .to("tpu")) and import of the compiled syncbn were migrated as if they were the project's own.
    test = (
        "import torch\nimport syncbn\nfrom apex.parallel import SyncBatchNorm\nm = SyncBatchNorm(4).cuda()\n"
    )
    _write(
        tmp_path,
        {
            "apex/setup.py": _SETUP_CUDA,
            "apex/apex/__init__.py": "",
            "apex/apex/parallel/__init__.py": "class SyncBatchNorm:\n    pass\n",
            "apex/tests/test_syncbn.py": test,
            "train.py": "import torch\nmodel = torch.nn.Linear(2, 2).cuda()\n",
        },
    )
    out = _migrate_tree(tmp_path)
    assert out["apex/tests/test_syncbn.py"] == test
    assert 'to("tpu")' in out["train.py"]  # the project's own code still migrates


def test_a_project_package_named_like_a_stack_without_a_cuda_build_is_still_its_own(tmp_path):
    # the opposite case (BingBertGlue's nvidia/, a repository's own triton/ helpers): no CUDA build, own code
    _write(tmp_path, {"apex/__init__.py": "", "apex/ops.py": "X = 1\n"})
    (tmp_path / "train.py").write_text(
        "import torch\nfrom apex.ops import X\nmodel = torch.nn.Linear(2, 2).cuda()\n"
    )
    out = _migrate_tree(tmp_path)["train.py"]
    assert 'to("tpu")' in out and "TPU211" not in out


@pytest.mark.parametrize("module", ["nvidia_smi", "py3nvml.py3nvml"])
def test_nvml_wrappers_are_cuda_stacks(module):
    # tensorboardX's demo_nvidia_smi: the tensor it allocates to read GPU memory back through NVML went to 'tpu',
    # "100% converted". (GPUtil and gpustat return no GPUs without one: not listed, SLM-Lab's second reading.)
    res = run(f"import torch\nimport {module}\nx = torch.zeros(4).cuda()\n")
    assert "TPU211" in {d.code for d in res.diagnostics} and ".cuda()" in res.new_source


# --- --diff output applies as a patch when a file ends without a newline ------------------------------------------
def test_a_diff_of_a_file_without_a_final_newline_applies(tmp_path):
    # VoiceCraft's main.py: the last '+' line ran into the next file's '--- a/...' header
    old, new = "import torch\nx = torch.zeros(2).cuda()", 'import torch\nx = torch.zeros(2).to("tpu")'
    (tmp_path / "f.py").write_text(old)
    diff = unified_diff(old, new, "f.py") + unified_diff("a\n", "b\n", "g.py")
    (tmp_path / "g.py").write_text("a\n")
    assert diff.count("\\ No newline at end of file") == 2
    (tmp_path / "p.diff").write_text(diff)
    proc = subprocess.run(["git", "apply", "-p1", "p.diff"], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "f.py").read_text() == new and (tmp_path / "g.py").read_text() == "b\n"


# --- autocast code that also runs without a TPU: every autocast form, not just torch.cuda.amp.autocast() ----------
def _import_without_tpu(tmp_path, src: str):
    """Run migrated code where TorchTPU set up no device (a CPU-only machine: tests, CPU inference)."""
    f = tmp_path / "m.py"
    f.write_text(src + "\nprint('ran', run_it())\n")
    env = {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0", "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-W", "ignore", str(f)], capture_output=True, text=True, env=env)


@pytest.mark.parametrize(
    "body",
    [
        # stable-audio-tools' pretransforms, mosaic diffusion's encode_images: the autocast's own 'cuda' made the
        # file look CUDA-only, so the plain torch.autocast("tpu") raised on the CPU
        "def run_it():\n    with torch.amp.autocast('cuda', enabled=False):\n        return torch.ones(2).sum()\n",
        "def run_it():\n    with torch.autocast(device_type='cuda', enabled=False):\n        return 1\n",
        # CogVideo's checkpoint helpers: the queries and an autocast built from a dict
        "def run_it(kw={'enabled': True}):\n    with torch.cuda.amp.autocast(**kw):\n"
        "        return torch.is_autocast_enabled(), torch.get_autocast_gpu_dtype()\n",
        # VoiceCraft's autograd Functions: a custom_fwd decorator naming "tpu" failed at import
        "class F(torch.autograd.Function):\n    @staticmethod\n    @torch.cuda.amp.custom_fwd\n"
        "    def forward(ctx, x):\n        return x * 2\n    @staticmethod\n    @torch.cuda.amp.custom_bwd\n"
        "    def backward(ctx, g):\n        return g * 2\n"
        "def run_it():\n    x = torch.ones(2, requires_grad=True)\n    F.apply(x).sum().backward()\n"
        "    return x.grad.tolist()\n",
    ],
)
def test_migrated_autocast_code_still_runs_where_there_is_no_tpu(tmp_path, body):
    src = "import torch\n\n" + body
    original = _import_without_tpu(tmp_path, src)
    assert original.returncode == 0, original.stderr[-800:]
    out = run(src).new_source
    assert "torch.cuda.amp" not in _code(out) and "get_autocast_gpu_dtype" not in out
    migrated = _import_without_tpu(tmp_path, out)
    assert migrated.returncode == 0, migrated.stderr[-800:]
    assert migrated.stdout == original.stdout  # the same answers as CUDA's autocast gave without a GPU


def test_a_second_run_leaves_the_added_autocast_helpers_alone():
    src = (
        "import torch\n\ndef f(x):\n    with torch.amp.autocast('cuda', enabled=False):\n        return x\n"
        "def g():\n    return torch.is_autocast_enabled()\n"
    )
    once = run(src).new_source
    assert "def _tpu_autocast" in once and "def _tpu_amp_device" in once
    twice = run(once)
    assert twice.new_source == once and not twice.diagnostics


def test_a_float32_autocast_region_is_flagged():
    # lerobot's fastwam head: TPU autocast takes bf16/fp16 only; asked for fp32 it switches off and casts nothing
    out = run(
        "import torch\ndef head(x, w):\n    with torch.amp.autocast('cuda', dtype=torch.float32):\n"
        "        return x @ w\n"
    ).new_source
    assert "TODO(tpu-migrate TPU301): autocast to float32 has no TPU form" in out


# --- a CUDA test that heads a ladder with an mps/xpu branch asks for a TPU by name ------------------------------
@pytest.mark.parametrize(
    "ladder",
    [
        "if torch.cuda.is_available():\n    d = 'cuda'\nelif torch.backends.mps.is_available():\n    d = 'mps'\n"
        "else:\n    d = 'cpu'\n",
        "d = 'cuda' if torch.cuda.is_available() else 'mps' if torch.backends.mps.is_available() else 'cpu'\n",
    ],
    ids=["elif", "ternary"],
)
def test_a_ladder_with_an_mps_branch_keeps_it_reachable(ladder):
    # lerobot's auto-detected devices: torch.accelerator.is_available() is true on a Mac too, which then took the
    # 'tpu' branch and never its own mps one
    out = run("import torch\n" + ladder).new_source
    test = 'getattr(torch.accelerator.current_accelerator(check_available=True), "type", None) == "tpu"'
    assert test in out and "'mps'" in out and "torch.cuda" not in _code(out)
    scope: dict = {}
    exec(compile(out, "<migrated>", "exec"), scope)
    import torch

    assert scope["d"] == ("tpu" if torch.accelerator.is_available() else "cpu")


# --- an integer device handed to another library is CUDA's ordinal there -----------------------------------------
def test_a_check_choosing_an_integer_device_for_a_pipeline_is_kept():
    # trlx's examples: `device = int(LOCAL_RANK)` if CUDA else -1, then transformers.pipeline(device=device): an
    # int is tried as mlu/musa/cuda/npu/hpu/xpu and else the CPU, never 'tpu'; renamed, the reward model
    # silently ran on the CPU of a TPU host while the hunk looked migrated
    src = (
        "import os, torch\nfrom transformers import pipeline\n"
        "if torch.cuda.is_available():\n    device = int(os.environ.get('LOCAL_RANK', 0))\nelse:\n    device = -1\n"
        "fn = pipeline('sentiment-analysis', 'm', device=device)\n"
    )
    out = run(src).new_source
    assert "torch.cuda.is_available()" in _code(out)
    assert "integer device handed to `transformers.pipeline`" in out


# --- a test's device strings that are its data, not placements ------------------------------------------------
def test_a_block_that_patches_cuda_keeps_its_device_names():
    # lerobot's test_device_utils: with torch.cuda.is_available patched to False, get_safe_torch_device("cuda")
    # must raise; renamed to "tpu" it returned a device and the test failed everywhere
    src = (
        "import torch, pytest\nfrom unittest.mock import patch\nfrom mylib import get_device\n\n"
        "def test_missing_cuda_raises():\n"
        "    with patch('torch.cuda.is_available', return_value=False), pytest.raises(ValueError):\n"
        "        get_device('cuda')\n"
    )
    out = run(src).new_source
    assert "get_device('cuda')" in out and "'tpu'" not in out


def test_a_device_string_handed_on_and_read_back_is_kept_on_both_sides():
    # lerobot's pipeline overrides: {"device": "cuda"} stored by a mock step, then `comp_data["device"] == "cuda"`
    src = (
        "def test_overrides(load):\n"
        "    result = load(overrides={'step': {'device': 'cuda', 'value': 2}})\n"
        "    assert result['device'] == 'cuda'\n"
    )
    out = run("import torch\n" + src).new_source
    assert "'device': 'cuda'" in out and "== 'cuda'" in out and "'tpu'" not in _code(out)


# --- smaller classes of held-out 16 -----------------------------------------------------------------------------
def test_diffusers_cpu_offload_is_flagged():
    # CogVideo's replicate predictors: .to("tpu") then enable_model_cpu_offload(), whose device is CUDA's
    res = run(
        "import torch\nfrom diffusers import CogVideoXPipeline\npipe = CogVideoXPipeline.from_pretrained('m')\n"
        "pipe.to('cuda')\npipe.enable_model_cpu_offload()\n"
    )
    assert any(d.code == "TPU915" and "enable_model_cpu_offload" in d.message for d in res.diagnostics)


def test_a_backend_handed_to_another_library_gets_backend_advice():
    # CogVideo: InitProcessGroupKwargs(backend="nccl"): the TODO told the user to give it 'cpu', no backend
    out = run(
        "import torch\nfrom accelerate.utils import InitProcessGroupKwargs\n"
        "k = InitProcessGroupKwargs(backend='nccl')\n"
    ).new_source
    assert "'gloo' where it is the CPU" in out and "often 'cpu'" not in out


def test_a_factory_given_the_rank_as_its_device_follows_the_moves():
    # VoiceCraft's trainer: .to(self.rank) became .to("tpu") while torch.tensor(..., device=self.rank) stayed an
    # ordinal (tpu:<global rank>, absent in a one-chip process) and was all-reduced with the 'tpu' tensors
    out = run(
        "import torch\ntorch.cuda.manual_seed(0)\ndef step(self, x):\n    x = x.to(self.rank)\n"
        "    return x, torch.tensor(0.0, device=self.rank)\n"
    ).new_source
    assert 'x.to("tpu")' in out and 'torch.tensor(0.0, device="tpu")' in out


def test_the_rest_of_a_vendored_library_repository_is_its_own_too(tmp_path):
    # Vim's det/ is detectron2's repository renamed: det/configs/common/train.py set train.device = "cuda" for
    # detectron2's trainer, moved to 'tpu' (nms/ROIAlign on TPU tensors)
    _write(
        tmp_path,
        {
            "det/setup.py": _SETUP_CUDA,
            "det/detectron2/__init__.py": "",
            "det/configs/common/train.py": "import torch\ntrain = dict(device='cuda')\n",
        },
    )
    assert (
        _migrate_tree(tmp_path)["det/configs/common/train.py"]
        == "import torch\ntrain = dict(device='cuda')\n"
    )


def test_a_device_for_a_models_own_to_is_torchs_even_when_another_library_built_the_model():
    # CogVideo's video_caption: DEVICE kept as CUDA's ("handed to a library that is not torch") for
    # AutoModelForCausalLM.from_pretrained(...).to(DEVICE), while the inputs went to 'tpu': a device mismatch
    out = run(
        "import torch\nfrom transformers import AutoModelForCausalLM\n"
        "DEVICE = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
        "model = AutoModelForCausalLM.from_pretrained('m').eval().to(DEVICE)\nx = torch.ones(1).to('cuda')\n"
    ).new_source
    assert "DEVICE = 'tpu' if torch.accelerator.is_available() else 'cpu'" in out


def test_a_check_switching_on_xformers_through_diffusers_is_kept():
    # AnimateDiff's app: `if is_xformers_available() and torch.cuda.is_available():
    # unet.enable_xformers_memory_efficient_attention()`: renamed, a TPU host with xformers installed raises
    out = run(
        "import torch\nfrom diffusers.utils.import_utils import is_xformers_available\n"
        "def build(unet):\n    if is_xformers_available() and torch.cuda.is_available():\n"
        "        unet.enable_xformers_memory_efficient_attention()\n    return unet.to('cuda')\n"
    ).new_source
    assert "and torch.cuda.is_available():" in out and "CUDA-only `xformers`" in out


# --- a device-support table that raises for names it does not know gets 'tpu' ------------------------------------
_SUPPORT = (
    "import torch\n\n"
    "def is_device_available(d: str) -> bool:\n"
    "    if d.startswith('cuda'):\n        return torch.cuda.is_available()\n"
    "    elif d == 'mps':\n        return torch.backends.mps.is_available()\n"
    "    elif d == 'cpu':\n        return True\n"
    "    else:\n        raise ValueError(f'Unknown device {d}')\n\n"
    "def is_amp_available(d: str):\n"
    "    if d in ['cuda', 'xpu', 'cpu']:\n        return True\n"
    "    elif d == 'mps':\n        return False\n"
    "    else:\n        raise ValueError(f'Unknown device {d}')\n\n"
    "def pick():\n    return 'cuda' if torch.cuda.is_available() else 'cpu'\n"
)


def test_a_device_support_table_answers_for_the_tpu_the_migration_now_picks():
    # lerobot's device_utils: the picker (and the configs' defaults) now hand these 'tpu', which raised
    # "Unknown device tpu" in every config's __post_init__ and in every VLA-JEPA forward
    out = run(_SUPPORT).new_source
    scope: dict = {}
    exec(compile(out, "<migrated>", "exec"), scope)
    import torch

    tpu = torch.accelerator.is_available()
    assert scope["is_device_available"]("tpu") is tpu and scope["is_amp_available"]("tpu") is True
    assert scope["is_device_available"]("cpu") is True  # the rest as before
    with pytest.raises(ValueError):
        scope["is_device_available"]("npu")
    assert "add the 'tpu' path by hand" not in out
    assert run(out).new_source == out  # a second run keeps it


def test_a_parameter_default_read_only_by_another_library_keeps_its_name():
    # VoiceCraft's WhisperxModel(..., device="cuda"): the default reaches only whisperx.load_model (faster-whisper:
    # cpu/cuda/auto), so 'tpu' made setup() raise; its sibling literals written in those calls were already kept
    out = run(
        "import torch\nclass W:\n    def __init__(self, name, device='cuda'):\n"
        "        from whisperx import load_model\n        self.model = load_model(name, device)\n"
    ).new_source
    assert "device='cuda'" in out and "read only by `whisperx.load_model`" in out
    # a torch-device library's parameter still migrates (transformers' pipeline takes torch devices)
    out = run(
        "import torch\nfrom transformers import pipeline\n"
        "def make(name, device='cuda'):\n    return pipeline('x', name, device=device)\n"
    ).new_source
    assert "device='tpu'" in out


def test_autocast_calls_that_name_cuda_already_run_without_a_tpu():
    # kohya's anima_models (held-out 14, re-read): `@torch.amp.custom_fwd(device_type="cuda")` renamed to "tpu"
    # made the decorated Function raise when called on a CPU-only machine
    src = (
        "import torch\nclass F(torch.autograd.Function):\n    @staticmethod\n"
        "    @torch.amp.custom_fwd(device_type='cuda')\n    def forward(ctx, x):\n        return x * 2\n"
        "def run_it():\n    return F.apply(torch.ones(2)).tolist(), torch.is_autocast_enabled('cuda')\n"
    )
    out = run(src).new_source
    assert "custom_fwd(device_type=_tpu_amp_device())" in out
    assert "torch.is_autocast_enabled(_tpu_amp_device())" in out


def test_an_optional_offload_does_not_keep_the_check_around_a_pipeline_load():
    # PixArt's apps (held-out 13, re-read): the diffusers offload flag inside `if ENABLE_CPU_OFFLOAD:` kept CUDA's
    # check on the whole pipeline load while the device line was migrated: `pipe` was never made on TPU
    out = run(
        "import os, torch\nfrom diffusers import PixArtAlphaPipeline\n"
        "device = torch.device('cuda:0' if torch.cuda.is_available() else 'cpu')\n"
        "if torch.cuda.is_available():\n    pipe = PixArtAlphaPipeline.from_pretrained('m')\n"
        "    if os.getenv('ENABLE_CPU_OFFLOAD'):\n        pipe.enable_model_cpu_offload()\n"
        "    else:\n        pipe.to(device)\n"
    ).new_source
    assert "if torch.accelerator.is_available():\n    pipe" in out and "TPU915" in out


def test_a_run_on_the_librarys_own_repository_migrates_it(tmp_path):
    # the copy rule is for a library carried inside the project: run on detectron2's (or mamba's) own repository,
    # its package is the project's code again (before: every file of the run left as written, silently)
    _write(
        tmp_path,
        {
            "det/setup.py": _SETUP_CUDA,
            "det/detectron2/__init__.py": "",
            "det/detectron2/m.py": "import torch\nx = torch.zeros(1).cuda()\n",
        },
    )
    (tmp_path / "det" / "pyproject.toml").write_text("")
    proc = subprocess.run(
        [sys.executable, "-m", "tpu_workbench.migrate.cli", "--write", str(tmp_path / "det")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    assert 'to("tpu")' in (tmp_path / "det" / "detectron2" / "m.py").read_text()
