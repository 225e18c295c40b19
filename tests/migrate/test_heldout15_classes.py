"""Wrong rewrites found by reading every changed hunk of held-out check 15 (benchmarks/migrate_corpus_heldout15.txt),
each as a class in its own words, each asserting the rewrite it must not make (or the one it must not miss)."""

from __future__ import annotations

import pytest
import torch
from migrate_helpers import run
from test_heldout9_classes import _code, _migrate_tree


# --- a flag that reads its own old value: `args.use_gpu = True if torch.cuda.is_available() and args.use_gpu ...` --
def test_a_flag_reading_its_own_old_value_is_followed_by_its_later_uses():
    # Informer2020's main script: the read of args.use_gpu on its own right side is the option's old value, not a use
    # of the new one; followed as a use it looped back to the same statement, kept the check ("out of sight") with a
    # garbled TODO, and the whole script stayed on the CPU of a TPU host.
    src = (
        "import argparse, torch\np = argparse.ArgumentParser()\n"
        "p.add_argument('--use_gpu', type=bool, default=True)\nargs = p.parse_args()\n"
        "args.use_gpu = True if torch.cuda.is_available() and args.use_gpu else False\n"
        "if args.use_gpu:\n    device = torch.device('cuda:0')\nelse:\n    device = torch.device('cpu')\n"
    )
    res = run(src)
    assert "torch.accelerator.is_available() and args.use_gpu" in res.new_source
    assert "device = torch.device('tpu:0')" in res.new_source
    assert "args.use_gpu` `args.use_gpu" not in res.new_source


# --- memory statistics are torch.accelerator's on TorchTPU 0.2.0 (contract §15) --------------------------------
def test_memory_statistics_move_to_torch_accelerator_with_their_check():
    # Open-Sora's log_cuda_max_memory, yolov9's AutoBatch: left as torch.cuda they log 0 GB on TPU (AutoBatch then
    # divides by a zero slope), reset_peak_memory_stats raises; the TODO said TorchTPU has none, which is false.
    src = (
        "import torch\n\ndef log():\n    if torch.cuda.is_available():\n"
        "        torch.cuda.reset_peak_memory_stats(device=0)\n"
        "        print(torch.cuda.max_memory_allocated(0) / 1e9, torch.cuda.memory_reserved())\n"
    )
    out = run(src).new_source
    assert "torch.cuda" not in _code(out) and "TODO" not in out
    assert "torch.accelerator.reset_peak_memory_stats(0)" in out
    assert "torch.accelerator.max_memory_allocated(0)" in out and "torch.accelerator.memory_reserved()" in out


def test_a_memory_summary_is_the_accelerators_on_tpu_and_cudas_elsewhere():
    out = run("import torch\nprint(torch.cuda.memory_summary())\n").new_source
    assert "print(_tpu_memory_summary())" in out and "TODO" not in out
    assert 'getattr(torch, "cuda").memory_summary(device=device, abbreviated=abbreviated)' in out


# --- autocast in code that also runs without a GPU -------------------------------------------------------------
@pytest.mark.parametrize(
    ("before", "after"),
    [
        (
            "with torch.cuda.amp.autocast(enabled=amp):",
            "with _tpu_autocast(enabled=amp, tpu_dtype=torch.bfloat16):",
        ),
        ("with torch.cuda.amp.autocast(amp):", "with _tpu_autocast(enabled=amp, tpu_dtype=torch.bfloat16):"),
        ("with torch.autocast('cuda', enabled=False):", "with _tpu_autocast(enabled=False):"),
        ("with torch.amp.autocast(device_type='cuda'):", "with _tpu_autocast():"),
    ],
)
def test_autocast_in_a_file_with_a_cpu_path_stays_runnable_without_a_tpu(before, after):
    # yolov9's trainers (amp off on the CPU), TTS's loss blocks: torch.cuda.amp.autocast ran on a CPU-only machine
    # (switched off); torch.autocast("tpu", ...) raises there, as "tpu" is a device type only where TorchTPU is set up
    src = (
        f"import torch\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n{before}\n    y = model(x)\n"
    )
    out = run(src).new_source
    assert after in out and 'torch.autocast("tpu"' in out  # (the helper's own body)
    assert "def _tpu_autocast(tpu_dtype=None, **kwargs):" in out
    assert run(out).new_source == out


def test_an_autocast_decorator_is_made_at_import_and_gets_the_helper():
    # efficientvit's ops: `@torch.autocast(device_type="cuda", enabled=False)` runs when the class is defined; as
    # "tpu" it made every model module fail to import on a CPU-only machine
    src = (
        "import torch\n\nclass Op(torch.nn.Module):\n    @torch.autocast(device_type='cuda', enabled=False)\n"
    )
    src += "    def forward(self, x):\n        return x\n"
    out = run(src).new_source
    assert "@_tpu_autocast(enabled=False)" in out


def test_autocast_in_a_cuda_only_script_stays_plain():
    out = run("import torch\nx = x.cuda()\nwith torch.cuda.amp.autocast():\n    y = m(x)\n").new_source
    assert 'with torch.autocast("tpu", dtype=torch.bfloat16):' in out and "_tpu_autocast" not in out


def test_the_autocast_helper_autocasts_on_the_tpu_where_there_is_one():
    src = run("import torch\ndevice = 'cpu'\nwith torch.cuda.amp.autocast():\n    pass\n").new_source
    scope: dict = {}
    exec(compile(src.split("device = ")[0], "<migrated>", "exec"), scope)
    ctx = scope["_tpu_autocast"](dtype=torch.bfloat16)
    # where there is no TPU: CUDA's autocast as the original wrote it, which switches itself off without a GPU
    assert ctx.device == ("tpu" if torch.accelerator.is_available() else "cuda")
    where = "tpu" if ctx.device == "tpu" else "cpu"
    with ctx:
        y = torch.ones(2, 2, device=where) @ torch.ones(2, 2, device=where)
    assert y.dtype == (torch.bfloat16 if ctx.device == "tpu" else torch.float32)


# --- a device module looked up by type: getattr(torch, device_type, torch.cuda) ----------------------------------
def test_a_device_module_lookup_becomes_torch_accelerator_when_it_has_every_function_used():
    # peft's TorchTracemalloc: on a TPU host the lookup gives torch.tpu, which has no empty_cache / memory
    # statistics; the TODO blamed the torch.cuda default, which is never used
    src = (
        "import torch\n\nclass T:\n    def __enter__(self):\n"
        "        self.device_type = torch.accelerator.current_accelerator().type\n"
        "        self.device_module = getattr(torch, self.device_type, torch.cuda)\n"
        "        self.device_module.empty_cache()\n        self.begin = self.device_module.memory_allocated()\n"
        "        return self\n"
    )
    res = run(src)
    assert "self.device_module = torch.accelerator" in res.new_source and "TODO" not in res.new_source
    assert run(res.new_source).new_source == res.new_source


def test_a_device_module_lookup_using_what_torch_accelerator_lacks_is_flagged_with_the_missing_names():
    src = (
        "import torch\n\ndef bf16(device_type):\n    mod = getattr(torch, device_type, torch.cuda)\n"
        "    return mod.is_available() and mod.is_bf16_supported()\n"
    )
    out = run(src).new_source
    assert "getattr(torch, device_type, torch.cuda)" in out
    assert "TPU220" in out and "is_bf16_supported" in out.split("\n")[3]


# --- an fp16 dtype option in a file that never autocasts is the weights' dtype ----------------------------------
def test_a_weight_dtype_option_keeps_its_fp16_default():
    # peft's glora/hira/olora/shira examples: --dtype feeds from_pretrained(dtype=getattr(torch, dtype)); made
    # bf16, every run (CPU ones too) loads other weights, and the function's own default still says float16
    src = (
        "import argparse, torch\np = argparse.ArgumentParser()\np.add_argument('--dtype', default='float16')\n"
        "args = p.parse_args()\nmodel = AutoModel.from_pretrained(name, dtype=getattr(torch, args.dtype))\n"
        "model = model.cuda()\n"
    )
    out = run(src).new_source
    assert "default='float16'" in out and "TPU304" not in out


# --- a CUDA kernel built lazily inside try/except with a plain-torch fallback is optional -----------------------
_LAZY_BUILD = """import warnings
import torch

_EXT = None


def get_ext():
    global _EXT
    from torch.utils.cpp_extension import load

    try:
        _EXT = load(name="fbd", sources=["fbd.cpp", f"{DIR}/fbd_kernel.cu"])
    except Exception as e:
        warnings.warn(f"no CUDA extension: {e}")
        _EXT = None
    return _EXT


def butterfly(x):
    ext = get_ext()
    return ext.forward(x) if ext is not None else x.flip(-1)
"""


@pytest.mark.parametrize("guarded", [True, False])
def test_an_optional_cuda_build_does_not_make_its_importers_cuda_only(tmp_path, guarded):
    # peft's BOFT: get_fbd_cuda() builds the kernel inside try/except and falls back to plain torch; its importers
    # (peft_model.py, mapping_func.py ... and every LoRA example) were told they run on TPU "once boft/layer.py's
    # cpp_extension is ported", which is false
    layer = (
        _LAZY_BUILD
        if guarded
        else _LAZY_BUILD.replace("    try:\n        _EXT", "    if True:\n        _EXT")
    )
    if not guarded:
        layer = layer.replace(
            '    except Exception as e:\n        warnings.warn(f"no CUDA extension: {e}")\n', ""
        )
        layer = layer.replace("        _EXT = None\n    return", "    return")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "layer.py").write_text(layer)
    (tmp_path / "train.py").write_text(
        "import torch\nfrom pkg.layer import butterfly\nx = torch.ones(2).cuda()\n"
    )
    out = _migrate_tree(tmp_path)
    assert ("TPU211" in out["train.py"]) is not guarded
    assert ('x = torch.ones(2).to("tpu")' in out["train.py"]) is guarded or "TPU211" in out["train.py"]


# --- an unbound `torch.` chain (the import is added by the pass) decides as the bound one does ---------------------
def test_an_unbound_torch_chain_is_torch_for_the_flow_layer_too():
    # property test (hypothesis): `if t.is_cuda: torch.backends.cudnn.benchmark = True` without `import torch`
    # kept the test (cudnn read as another library), the pass then added the import, and a second pass rewrote it
    src = (
        "v = torch.cuda.is_available()\nif t.is_cuda:\n    torch.backends.cudnn.benchmark = True\n"
        "else:\n    torch.backends.cudnn.benchmark = True\n"
    )
    once = run(src).new_source
    assert run(once).new_source == once


def test_a_device_module_lookup_is_judged_by_the_uses_in_its_own_function():
    # peft's method_comparison utils: one function seeds through the module (torch.tpu has manual_seed_all), another
    # only empties the cache; a file-wide scan blocked the second's rewrite, and named the wrong attributes
    src = (
        "import torch\n\ndef init(device):\n    mod = getattr(torch, device, torch.cuda)\n"
        "    mod.reset_peak_memory_stats()\n    mod.manual_seed_all(0)\n\n"
        "def clear(device):\n    mod = getattr(torch, device, torch.cuda)\n    mod.empty_cache()\n\n"
        "def info(device):\n    mod = getattr(torch, device, torch.cuda)\n    return mod.get_device_name(0)\n"
    )
    out = run(src).new_source
    init, clear, info = out.split("\ndef ")[1:]
    assert "TPU220" in init and "reset_peak_memory_stats" in init and "lacks or refuses `reset_peak" in init
    assert "mod = torch.accelerator" in clear and "TODO" not in clear
    assert (
        "getattr(torch, device, torch.cuda)" in info and "TODO" not in info
    )  # torch.tpu.get_device_name works


def test_autocast_in_a_layer_of_a_file_that_names_no_device_gets_the_helper():
    # yolov9's VarifocalLoss, TTS's LSTM encoder: `with torch.cuda.amp.autocast(enabled=False):` in a module that
    # runs wherever its caller does, CPU-only runs included
    src = (
        "import torch\n\nclass VarifocalLoss(torch.nn.Module):\n    def forward(self, pred, gt):\n"
        "        with torch.cuda.amp.autocast(enabled=False):\n            return (pred.float() - gt) ** 2\n"
    )
    out = run(src).new_source
    assert "with _tpu_autocast(enabled=False):" in out


def test_the_cross_file_list_of_migrated_cuda_calls_follows_the_memory_rule():
    # sam2's trainer: `if torch.cuda.is_available(): mem.update(...)`, whose MemMeter (another file) reads
    # torch.cuda.max_memory_allocated: judged CUDA-only from the original there and portable once that file was
    # migrated, a second --write changed the check (not a fixed point)
    from tpu_workbench.migrate._host import MIGRATED_CUDA_CALLS
    from tpu_workbench.migrate.rules.cuda_api import _MEMORY_ACCELERATOR

    assert {f"torch.cuda.{k}" for k in _MEMORY_ACCELERATOR} <= MIGRATED_CUDA_CALLS


# --- a unittest assertion of CUDA before code that was migrated (pfrl's GPU tests) -------------------------------
def test_an_assert_true_of_cuda_follows_the_rest_of_its_block():
    src = (
        "import unittest\nimport torch\n\nclass T(unittest.TestCase):\n    def test_gpu(self):\n"
        "        self.assertTrue(torch.cuda.is_available())\n        x = torch.ones(2, device='cuda:0')\n"
    )
    out = run(src).new_source
    # the wrong output: the assertion kept as CUDA's ("out of sight") while the tensor moved to 'tpu': always fails
    assert "self.assertTrue(torch.accelerator.is_available())" in out and "device='tpu:0'" in out


# --- a map_location with no mapping on one side, through a name (pfrl's agent snapshots) -------------------------
@pytest.mark.parametrize("passed", ["map_location=map_location", "map_location"])
def test_a_map_location_name_that_is_none_under_the_check_keeps_cudas_check(passed):
    src = (
        "import torch\n\ndef load(self, path):\n"
        "    map_location = torch.device('cpu') if not torch.cuda.is_available() else None\n"
        f"    self.model.load_state_dict(torch.load(path, {passed}))\n"
    )
    out = run(src).new_source
    # the wrong rewrite: on a TPU host the map becomes None and a CUDA-saved snapshot cannot be deserialized
    assert "if not torch.cuda.is_available() else None" in out and "TPU201" in out


# --- a flag passed to a function of the same module (coqui TTS: id_to_torch(x, cuda=is_cuda)) ---------------------
def test_a_flag_passed_to_a_function_of_this_module_follows_that_parameter():
    src = (
        "import torch\n\ndef id_to_torch(aux_id, cuda=False):\n    aux_id = torch.as_tensor(aux_id)\n"
        "    if cuda:\n        return aux_id.cuda()\n    return aux_id\n\n"
        "class M(torch.nn.Module):\n    def synthesize(self, sid):\n"
        "        is_cuda = next(self.parameters()).is_cuda\n        return id_to_torch(sid, cuda=is_cuda)\n"
    )
    res = run(src)
    # the wrong output: `.is_cuda` kept (False for a model on 'tpu') while id_to_torch's branch now means 'tpu'
    assert 'is_cuda = (next(self.parameters()).device.type == "tpu")' in res.new_source
    assert 'return aux_id.to("tpu")' in res.new_source
    assert run(res.new_source).new_source == res.new_source


def test_a_flag_passed_to_a_function_whose_branch_stays_cudas_stays_too():
    src = (
        "import torch\nimport my_cuda_ext\n\ndef fused(x, cuda=False):\n    if cuda:\n"
        "        return my_cuda_ext.forward(x)\n    return x * 2\n\n"
        "def run(model, x):\n    on_gpu = next(model.parameters()).is_cuda\n    return fused(x, cuda=on_gpu)\n"
    )
    out = run(src).new_source
    assert "next(model.parameters()).is_cuda" in out


# --- a device chosen for another library, through a name (coqui's XTTS demo: faster_whisper) ---------------------
def test_a_device_name_read_only_by_another_library_stays_with_its_check():
    src = (
        "import torch\nfrom faster_whisper import WhisperModel\n\ndef load():\n"
        "    device = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
        "    return WhisperModel('large-v2', device=device, compute_type='float16')\n"
    )
    out = run(src).new_source
    # the wrong rewrite: device 'tpu' on a TPU host; CTranslate2 takes 'cpu', 'cuda' or 'auto' and raises
    # (since held-out 18 the whole file is left as written: faster_whisper is a CPU-or-CUDA engine, flagged TPU211)
    assert "device = 'cuda' if torch.cuda.is_available() else 'cpu'" in out and (
        "TPU201" in out or "TPU211" in out
    )


# --- the XLA generator's state saved and restored for a resume (ChatGLM-6B's P-tuning trainer) --------------------
def test_a_saved_xla_rng_state_is_flagged_not_mapped_to_a_seed():
    src = (
        "import torch\nimport torch_xla.core.xla_model as xm\n\ndef save(state):\n"
        "    state['xla'] = xm.get_rng_state()\n\ndef load(ckpt):\n"
        "    torch.random.set_rng_state(ckpt['cpu'])\n    xm.set_rng_state(ckpt['xla'])\n\ndef seed(s):\n"
        "    xm.set_rng_state(s)\n"
    )
    out = run(src).new_source
    # the wrong rewrites: torch.initial_seed() (a constant, the CPU's first seed) saved as the device's state, and
    # torch.manual_seed(ckpt['xla']) reseeding the CPU generator just restored on the line before
    assert "initial_seed" not in out and "torch.manual_seed(ckpt" not in out
    assert out.count("TODO(tpu-migrate TPU518)") == 2 and "torch.manual_seed(s)" in out


# --- a torch device handed to another library (efficientvit's gaze demo: l2cs.Pipeline(device=...)) ---------------
def test_a_torch_device_handed_to_another_library_keeps_its_name():
    src = (
        "import torch\n\ndef load():\n    from l2cs import Pipeline\n"
        "    return Pipeline(arch='ResNet50', device=torch.device('cuda'))\n"
    )
    out = run(src).new_source
    # the wrong rewrite: torch.device('tpu'), which l2cs reads as a CUDA ordinal (RetinaFace(gpu_id=0))
    assert "device=torch.device('cuda')" in out and "TPU101" in out


def test_a_torch_device_in_a_pytest_param_is_data_not_a_library_option():
    src = (
        "import pytest\nimport torch\n\n@pytest.mark.parametrize('device', [pytest.param(torch.device('cuda', 0), "
        "marks=pytest.mark.skipif(not torch.cuda.is_available(), reason='Test requires GPU'))])\n"
        "def test_it(device):\n    assert torch.zeros(1, device=device).device == device\n"
    )
    out = run(src).new_source
    assert "a library that is not torch: it may read" not in out
