"""Wrong rewrites found on held-out check 25 (benchmarks/migrate_corpus_heldout25.txt), each as a class in its own
words, each asserting what the tool must (not) do."""

from __future__ import annotations

import ast

import pytest
from migrate_helpers import run, write_tree

from tpu_workbench.migrate import one_file

# --- a rewrite inside an f-string's replacement field (pytext's `f"Model on GPU? {p.is_cuda}"` became
# `{(p.device.type == "tpu")}` inside a "-quoted f-string: a syntax error before Python 3.12) ---


@pytest.mark.parametrize(
    "line",
    [
        'print(f"on GPU? {next(m.parameters()).is_cuda}")',
        "print(f'{torch.device(\"cuda\")} {x.is_cuda}')",
        'print(f"{x.is_cuda!r:>8} and {y.cuda()}")',
        'print(f"""{x.is_cuda}""")',
        'print(rf"{x.is_cuda}\\d")',
    ],
)
def test_a_string_written_into_an_f_string_field_takes_the_other_quote(line):
    out = run(f"import torch\n\n\ndef f(m, x, y):\n    {line}\n").new_source
    assert "tpu" in out
    ast.parse(out, feature_version=(3, 8))  # (Python 3.11 and older reject a field quoted like its f-string)


def test_output_that_would_not_parse_is_never_written(monkeypatch):
    class Broken:
        changed = True
        new_source = "import torch\nx = (\n"
        diagnostics: list = []

    monkeypatch.setattr(one_file, "migrate_source", lambda *a, **k: Broken())
    result, text = one_file.migrate_text("import torch\nx = torch.zeros(1).cuda()\n", "a.py")
    assert result.status == "unparsable" and "tool bug" in result.error
    assert text == "import torch\nx = torch.zeros(1).cuda()\n"  # left untouched


# --- a stream's raw CUDA handle (CosyVoice's TensorRT `execute_async_v3(torch.cuda.current_stream().cuda_stream)`):
# torch.accelerator's stream has no `.cuda_stream`, so the rewrite raised AttributeError on every host ---


def test_a_streams_raw_cuda_handle_keeps_the_cuda_stream():
    src = (
        "import torch\n\n\ndef infer(ctx):\n    ctx.execute_async_v3(torch.cuda.current_stream().cuda_stream)\n"
        "    handle = torch.cuda.current_stream().cuda_stream\n    torch.cuda.current_stream().synchronize()\n"
    )
    out = run(src).new_source
    assert out.count("    ctx.execute_async_v3(torch.cuda.current_stream().cuda_stream)") == 1
    assert out.count("    handle = torch.cuda.current_stream().cuda_stream") == 1
    assert out.count("TODO(tpu-migrate TPU201)") == 2 and "raw CUDA handle" in out
    assert "torch.accelerator.current_stream().synchronize()" in out  # a stream used as torch's is migrated


# --- a Lightning Trainer subclass from another package (torch-uncertainty's TUTrainer(accelerator="cuda")) was
# handed "tpu", Lightning's torch_xla accelerator ---


@pytest.mark.parametrize("value", ["cuda", "gpu"])
def test_an_accelerator_keyword_of_an_unknown_trainer_is_lightnings_knob(value):
    src = (
        "import torch\nfrom torch_uncertainty import TUTrainer\n\n"
        f'trainer = TUTrainer(accelerator="{value}", devices=1)\nx = torch.zeros(1).cuda()\n'
    )
    out = run(src).new_source
    assert f'accelerator="{value}"' in out and "TPU911" in out and "`TUTrainer(" in out
    assert 'x = torch.zeros(1).to("tpu")' in out


def test_torchs_own_accelerator_names_are_not_a_framework_knob():
    out = run('import torch\n\nx = torch.zeros(1, device="cuda")\n').new_source
    assert '"tpu"' in out and "TPU911" not in out


# --- a CUDA kernel built at run time whose .cu sources reach load() through a variable (BigVGAN's
# alias_free_activation/cuda/load.py passes nvcc flags): its importers and their tests were migrated unflagged ---

BUILD = (
    "import pathlib\nfrom torch.utils import cpp_extension\n\n\ndef load():\n"
    "    src = pathlib.Path(__file__).parent\n    sources = [src / 'act.cpp', src / 'act_cuda.cu']\n"
    "    return cpp_extension.load(name='act_cuda', sources=sources, extra_cuda_cflags=['-O3'])\n"
)
WRAP = "import torch\nfrom kernels import load\n\nact_cuda = load.load()\n\n\ndef act(x):\n    return act_cuda.fwd(x)\n"
TEST = (
    "import torch\nfrom kernels import wrap\n\n\ndef test_act():\n"
    '    x = torch.rand(4, device="cuda")\n    assert wrap.act(x).shape == x.shape\n'
)


def test_a_kernel_built_with_nvcc_flags_makes_its_importers_flagged(tmp_path):
    root = tmp_path / "proj"
    (root / "kernels").mkdir(parents=True)
    (root / "kernels" / "__init__.py").write_text("")
    (root / "kernels" / "load.py").write_text(BUILD)
    (root / "kernels" / "wrap.py").write_text(WRAP)
    (root / "tests").mkdir()
    (root / "tests" / "test_act.py").write_text(TEST)
    out = write_tree(root)
    assert "TPU211" in out["kernels/wrap.py"] and "load.py" in out["kernels/wrap.py"]
    assert "TPU211" in out["tests/test_act.py"]


# --- autocast reached through a variable (stable diffusion's `precision_scope = autocast if ... else
# nullcontext; with precision_scope("cuda"):`): 'tpu' there is bfloat16 (its images then hit .numpy()) and
# raises on a host without TorchTPU ---


@pytest.mark.parametrize("bound", ["autocast", "torch.autocast", "autocast if opt.amp else nullcontext"])
def test_a_device_handed_to_autocast_through_a_variable_is_kept(bound):
    src = (
        "import torch\nfrom torch import autocast\nfrom contextlib import nullcontext\n\n\ndef main(opt, model):\n"
        f"    scope = {bound}\n"
        '    with scope("cuda"):\n        x = model(torch.zeros(1).cuda())\n    return x.cpu().numpy()\n'
    )
    out = run(src).new_source
    assert 'scope("cuda")' in out and "is torch.autocast here" in out
    assert 'torch.zeros(1).to("tpu")' in out


def test_a_call_of_another_variable_keeps_its_device_rewritten():
    src = 'import torch\n\n\ndef main(place):\n    place("cuda")\n'
    assert 'place("tpu")' in run(src).new_source


# --- a simulator that runs on the CPU or CUDA only (Isaac Gym's sim_device='cuda:0'): handed 'tpu' ---


def test_isaac_gym_is_a_cpu_or_cuda_library():
    src = (
        "import isaacgym\nimport torch\n\n\ndef make(i):\n"
        '    sim_device = f"cuda:{i}" if i >= 0 else "cpu"\n    return sim_device\n'
    )
    out = run(src).new_source
    assert "TPU211" in out and "`isaacgym` runs on the CPU or CUDA only" in out
    assert 'f"cuda:{i}"' in out


# --- a command-line default naming a GPU above 0 (ElegantRL's `--device cuda:1`) became 'tpu:1', which does not
# exist in a process (TorchTPU binds one device each) ---


def test_a_command_line_default_naming_another_gpu_becomes_the_processs_device():
    src = (
        "import argparse\nimport torch\n\np = argparse.ArgumentParser()\n"
        'p.add_argument("--device", default="cuda:1")\np.add_argument("--first", default="cuda:0")\n'
    )
    out = run(src).new_source
    assert 'default="tpu")' in out and 'default="tpu:0")' in out and "tpu:1" not in out


# --- "no CUDA here, yet this object is on an accelerator" (chemprop's checkpoints: `not torch.cuda.is_available()
# and metric.device.type != "cpu"` rebuilds a metric saved on a GPU): renamed, a TPU host kept the stale CUDA
# metric ---


def test_a_check_for_state_saved_on_a_gpu_stays_cudas():
    src = (
        "import torch\n\n\ndef load(metric, rebuild):\n"
        '    if not torch.cuda.is_available() and metric.device.type != "cpu":\n        metric = rebuild(metric)\n'
        "    return metric, torch.zeros(1).cuda()\n"
    )
    out = run(src).new_source
    assert "not torch.cuda.is_available() and metric.device.type" in out and "saved on a GPU" in out
    assert 'torch.zeros(1).to("tpu")' in out


def test_a_plain_cpu_fallback_check_is_still_migrated():
    src = (
        "import torch\n\n\ndef place(x):\n"
        "    if not torch.cuda.is_available():\n        return x\n    return x.cuda()\n"
    )
    out = run(src).new_source
    assert "torch.accelerator.is_available()" in out


# --- a local number named like accelerate's map (ElegantRL's `max_memory = torch.cuda.max_memory_allocated()`)
# kept its function's CUDA check with a false TODO about accelerate ---


def test_a_number_named_max_memory_is_no_placement_map():
    src = (
        "import torch\n\n\ndef show(device):\n    if not torch.cuda.is_available():\n        return 'none'\n"
        "    max_memory = torch.cuda.max_memory_allocated(device) / 2**30\n    return max_memory\n\n\n"
        "def place():\n    if torch.cuda.is_available():\n"
        "        max_memory = {i: '20GiB' for i in range(torch.cuda.device_count())}\n        return max_memory\n"
    )
    out = run(src).new_source
    assert "if not torch.accelerator.is_available():" in out
    assert out.count("accelerate's `max_memory`") == 1  # the dict still keeps its check


# --- torch reached through `from <project module> import *` (ElegantRL: `th` from a module's `import torch as
# th`): the device string was rewritten and its check was not ---


def test_torch_brought_by_a_project_star_import_is_resolved(tmp_path):
    root = tmp_path / "proj"
    (root / "methods").mkdir(parents=True)
    (root / "methods" / "common.py").write_text("import torch as th\n\n\ndef f(x):\n    return x\n")
    (root / "methods" / "more.py").write_text("from methods.common import *\n")
    (root / "run.py").write_text(
        "from methods.more import *\n\n\ndef main(gpu_id):\n"
        '    device = th.device(f"cuda:{gpu_id}" if th.cuda.is_available() and gpu_id >= 0 else "cpu")\n'
        "    return device\n"
    )
    out = write_tree(root)["run.py"]
    assert "th.cuda.is_available()" not in out and "accelerator.is_available()" in out and '"tpu"' in out


# --- a device count written into a launcher's command (MiniCPM-V: `os.system(f"torchrun
# --nproc-per-node={NGPU} ...")`): TorchTPU's count is one per process, so a TPU host would start one ---


def test_a_device_count_in_a_launch_command_stays_cudas():
    src = (
        "import os\nimport torch\n\n\ndef run(data):\n    NGPU = torch.cuda.device_count()\n"
        '    os.system(f"torchrun --nproc-per-node={NGPU} run.py --data {data}")\n'
    )
    out = run(src).new_source
    assert "NGPU = torch.cuda.device_count()" in out and "starts that many processes" in out


# --- (held-out 24, left open last time) a test parametrized on CUDA alone (xtuner's model tests: every case is
# ("cuda", ...)): the cases were kept while the body's own devices moved to 'tpu', so no host ran it ---


def test_cases_that_are_all_cuda_move_with_their_test():
    src = (
        "import parametrize\nimport torch\n\n\nclass TestModel:\n"
        '    @parametrize.parametrize("device,tp", [("cuda", 1), ("cuda", 2)])\n'
        "    def test_run(self, device, tp):\n"
        '        model = torch.nn.Linear(2, 2).to("cuda")\n        return model, torch.zeros(2, device=device)\n'
    )
    out = run(src).new_source
    assert '[("tpu", 1), ("tpu", 2)]' in out and '.to("tpu")' in out and "TODO" not in out


def test_a_cuda_case_beside_a_cpu_case_is_still_kept():
    src = (
        "import pytest\nimport torch\n\n\n"
        '@pytest.mark.parametrize("device", ["cpu", "cuda"])\ndef test_both(device):\n'
        '    if device == "cuda" and not torch.cuda.is_available():\n        pytest.skip("no cuda")\n'
        "    return torch.zeros(2, device=device)\n"
    )
    out = run(src).new_source
    assert '["cpu", "cuda"]' in out and "is a test case of" in out


# --- a sparse tensor's name in one function is not the same name in another (pytext's test_swa: the sparse `x`
# of _test_rosenbrock_sparse made `x = x.to(device)` in _test_bn_update, a dense batch, get a false TPU110) ---


def test_a_sparse_name_is_matched_in_its_own_function_only():
    src = (
        "import torch\nfrom torch import sparse\n\n\nclass T:\n    def make(self, i, v):\n"
        "        x = sparse.DoubleTensor(i, v, torch.Size([2]))\n        return x.cuda()\n\n"
        "    def batches(self, dl):\n        for x in dl:\n            x = x.cuda()\n"
    )
    out = run(src).new_source
    assert out.count("TPU110") == 1 and out.index("TPU110") < out.index("def batches")


def test_all_cuda_cases_move_also_in_rows_with_other_strings():
    # (xtuner's `("cuda", "all2all", 4, 1)` rows, two strings each, were kept as name lists while the row with
    # one string moved: the file reached its fixed point only on the second --write)
    src = (
        "import parametrize\nimport torch\n\n\nclass T:\n"
        '    @parametrize.parametrize("device,dispatcher,ep", [("cuda", None, 1), ("cuda", "all2all", 4)])\n'
        "    def test_x(self, device, dispatcher, ep):\n        return torch.zeros(1, device=device)\n"
    )
    out = run(src).new_source
    assert '("tpu", None, 1), ("tpu", "all2all", 4)' in out
    assert run(out).new_source == out


# --- a check whose torch comes from a star import of a module the repository does not hold (ElegantRL's
# `th.cuda.is_available()` after `from methods.L2A.TNCO_local_search import *`): its f"cuda:{i}" became 'tpu' and
# the check stayed CUDA's ---


def test_a_choice_by_an_unresolvable_check_is_kept_with_it():
    src = (
        "from missing.module import *\n\n\ndef main(gpu_id):\n"
        '    return th.device(f"cuda:{gpu_id}" if th.cuda.is_available() and gpu_id >= 0 else "cpu")\n'
    )
    res = run(src)
    assert 'f"cuda:{gpu_id}" if th.cuda.is_available()' in res.new_source
    assert res.new_source.count("TODO(tpu-migrate TPU101)") == 1 and "does not import" in res.new_source


# --- workers started with a bound method (ElegantRL's `mp.spawn(self._train_worker, ...)`) or reaching the device
# through the project's functions two calls deep (pytext's run_single -> train_model -> prepare_task -> _set_cuda)
# were not flagged (TPU409) ---


def test_a_bound_method_started_in_processes_is_checked():
    src = (
        "import torch\nimport torch.multiprocessing as mp\n\n\nclass Trainer:\n"
        "    def _train_worker(self, rank):\n        x = torch.zeros(1).cuda()\n\n"
        "    def train(self):\n        mp.spawn(self._train_worker, nprocs=torch.cuda.device_count())\n"
    )
    out = run(src).new_source
    assert "TPU409" in out and "`self._train_worker`" in out


def test_a_worker_reaching_the_device_through_project_functions_is_checked(tmp_path):
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "workflow.py").write_text(
        "import torch\n\n\ndef _set_cuda(use):\n    if use and torch.cuda.is_available():\n"
        "        torch.cuda.set_device(0)\n\n\ndef prepare(cfg):\n    _set_cuda(cfg.cuda)\n\n\n"
        "def train_model(cfg):\n    prepare(cfg)\n"
    )
    (root / "pkg" / "main.py").write_text(
        "import torch\nfrom torch.multiprocessing.spawn import spawn\nfrom pkg.workflow import train_model\n\n\n"
        "def run_single(rank, cfg):\n    train_model(cfg)\n\n\n"
        "def main(cfg):\n    if cfg.world_size > 1:\n        spawn(run_single, (cfg,), cfg.world_size)\n"
        "    x = torch.zeros(1).cuda()\n"
    )
    out = write_tree(root)["pkg/main.py"]
    assert "TPU409" in out and "through `train_model`" in out


# --- (held-out 26) a check kept because the project class it switches on calls torch.cuda.get_device_name, which
# the run rewrites to torch.tpu's in that class's own file: the second --write then rewrote the check (OLMo-core's
# GPU monitor callback: no fixed point) ---


@pytest.mark.parametrize("query", ["get_device_name", "get_device_properties"])
def test_a_device_query_of_a_migrated_callee_still_reaches_cuda(query):
    from tpu_workbench.migrate import _host

    roots = {"torch": (0, "import", "torch")}
    for written in (f"torch.cuda.{query}(0)", f"torch.tpu.{query}(0)"):  # (before and after the first run)
        call = ast.parse(written).body[0].value
        assert _host._unmigrated_cuda_call(call, roots) == f"torch.cuda.{query}"


# --- (held-out 26) `if device == torch.device("cuda"):` in a function a CPU-only run calls became
# torch.device("tpu"), which raises where TorchTPU is not loaded (stablediffusion's txt2img); and the keyword form
# `torch.device("cuda", index=i)` kept its ordinal (sample-factory) ---


def test_a_compared_cuda_device_is_built_where_any_machine_can(tmp_path):
    from migrate_helpers import run_without_torchtpu

    src = (
        "import torch\n\n\ndef load(device):\n    if device == torch.device('cuda'):\n        return 'gpu'\n"
        "    return 'other'\n\n\nprint(load(torch.device('cpu')))\n"
    )
    out = run(src).new_source
    assert "device == _tpu_device()" in out
    proc = run_without_torchtpu(tmp_path, out)
    assert proc.returncode == 0 and "other" in proc.stdout, proc.stderr[-1500:]


def test_the_keyword_ordinal_of_a_device_is_dropped_like_the_positional_one():
    out = run('import torch\n\n\ndef place(i):\n    return torch.device("cuda", index=i)\n').new_source
    assert 'torch.device("tpu")' in out and "index" not in out


# --- (held-out 26) a memory statistic read where no device check guards it: CUDA's answered 0 on a CPU-only host,
# torch.accelerator's raises there (icefall's f5-tts `--oom-check` logging) ---


def test_an_unguarded_memory_query_still_answers_without_an_accelerator(tmp_path):
    from migrate_helpers import run_without_torchtpu

    src = (
        "import torch\n\n\ndef log():\n    return torch.cuda.max_memory_allocated(), torch.cuda.memory_stats()\n\n\n"
        "print(log())\nif torch.cuda.is_available():\n    print(torch.cuda.memory_allocated())\n"
    )
    out = run(src).new_source
    assert '_tpu_memory_stat("max_memory_allocated")' in out and '_tpu_memory_stat("memory_stats")' in out
    assert "    print(torch.accelerator.memory_allocated())" in out  # guarded: the plain rewrite
    proc = run_without_torchtpu(tmp_path, out)
    assert proc.returncode == 0 and "(0, {})" in proc.stdout, proc.stderr[-1500:]


# --- (held-out 26) bitsandbytes quantization asked of transformers (PixArt-sigma's `load_in_8bit=True`): CUDA
# kernels only, and no import of bitsandbytes in the file to flag ---


@pytest.mark.parametrize("kw", ["load_in_8bit=True", "load_in_4bit=args.q4"])
def test_a_bitsandbytes_load_is_flagged(kw):
    out = run(f"from transformers import AutoModel\n\nm = AutoModel.from_pretrained('x', {kw})\n").new_source
    assert "TPU211" in out and "bitsandbytes" in out


def test_a_load_that_turns_quantization_off_is_not_flagged():
    src = "import torch\nfrom transformers import AutoModel\n\nm = AutoModel.from_pretrained('x', load_in_8bit=False).cuda()\n"
    assert "bitsandbytes" not in run(src).new_source


# --- (held-out 24, re-read today) xtuner's tests moved to 'tpu' whole, but `self.create_pg(device)` of torch's
# DistributedTestBase builds a gloo group for 'tpu' (and asks torch.tpu.device_count(), which raises): flagged ---


def test_the_test_harness_process_group_is_flagged():
    src = (
        "import parametrize\nimport torch\n\n\nclass T(DeterministicDDPTestCase):\n"
        '    @parametrize.parametrize("device", [("cuda",)])\n    def test_x(self, device):\n'
        "        self.create_pg(device)\n        return torch.zeros(1, device=device)\n"
    )
    out = run(src).new_source
    assert "TPU411" in out and "gloo" in out and '[("tpu",)]' in out
    assert run(out).new_source == out


def test_a_memory_query_under_a_users_flag_still_answers_without_an_accelerator():
    # (`if args.cuda:` is the user's choice, not a test that a device is there: CUDA's query answered 0 under it
    # on a CPU-only host, so the helper keeps that answer)
    src = "import torch\n\n\ndef log(args):\n    if args.cuda:\n        return torch.cuda.max_memory_allocated()\n"
    assert '_tpu_memory_stat("max_memory_allocated")' in run(src).new_source
