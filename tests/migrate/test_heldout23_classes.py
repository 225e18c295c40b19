"""Wrong rewrites and broken fixed points found on held-out check 23 (benchmarks/migrate_corpus_heldout23.txt), each
as a class in its own words, each asserting what the tool must (not) do."""

from __future__ import annotations

import subprocess
import sys

import pytest
from migrate_helpers import run


def _write_twice(root) -> tuple[dict[str, str], dict[str, str]]:
    """Each .py file of ``root`` after one ``--write`` and after a second one."""
    cli = [sys.executable, "-m", "tpu_workbench.migrate.cli", "--write", "-q", str(root)]
    texts = []
    for _ in range(2):
        subprocess.run(cli, capture_output=True, text=True, timeout=300, check=False)
        texts.append({str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*.py"))})
    return texts[0], texts[1]


# --- gpytorch's tests: `if not torch.cuda.is_available(): return` then `with least_used_cuda_device():`, a project
# helper whose only CUDA call is `with torch.cuda.device(i): yield`. The first run kept the check (the helper
# "calls CUDA-only code") and unwrapped the helper's `with`; the second run saw a portable helper and renamed the
# check: one run was not a fixed point ---
HELPER = {
    "unwrapped": "    with torch.cuda.device(i):\n        yield\n",
    "tensor-device-in-a-loop": "    for t in ts:\n        with torch.cuda.device(t.device):\n            yield\n",
}


@pytest.mark.parametrize("body", sorted(HELPER))
def test_a_helper_whose_device_block_the_run_unwraps_is_not_cuda_only(tmp_path, body):
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "setup.py").write_text("")
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "utils.py").write_text(
        "import contextlib\nimport torch\n\n\n@contextlib.contextmanager\ndef pick(i=0, ts=()):\n"
        + HELPER[body]
    )
    (root / "pkg" / "test_x.py").write_text(
        "import torch\nfrom pkg.utils import pick\n\n\ndef test_x():\n    if not torch.cuda.is_available():\n"
        "        return\n    with pick():\n        x = torch.ones(2).cuda()\n"
    )
    first, second = _write_twice(root)
    assert first == second
    assert "torch.accelerator.is_available()" in first["pkg/test_x.py"]


def test_a_helper_visiting_devices_in_a_loop_stays_cuda_only_on_both_runs(tmp_path):
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "setup.py").write_text("")
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "utils.py").write_text(
        "import torch\n\n\ndef each():\n    for i in range(4):\n        with torch.cuda.device(i):\n"
        "            torch.ones(1)\n"
    )
    (root / "pkg" / "run.py").write_text(
        "import torch\nfrom pkg.utils import each\n\nif torch.cuda.is_available():\n    each()\n"
    )
    first, second = _write_twice(root)
    assert first == second
    assert "torch.cuda.is_available()" in first["pkg/run.py"]


# --- habitat-lab's inference worker: `if self.device.type == "cuda": torch.cuda.set_device(...)` in a function that
# also sets `torch.backends.cudnn.enabled = True`. The first run kept the test ("reads CUDA-only state `cudnn`") and
# deleted the cudnn lines; the second found no CUDA state and deleted the test: not a fixed point ---
@pytest.mark.parametrize(
    "switch",
    [
        "torch.backends.cudnn.enabled = True",
        "torch.backends.cudnn.benchmark = False",
        "torch.backends.cuda.matmul.allow_tf32 = True",
    ],
)
def test_a_cuda_switch_the_run_removes_does_not_keep_a_device_test(switch):
    src = (
        "import torch\n\n\nclass W:\n    def setup(self):\n        if self.device.type == 'cuda':\n"
        f"            torch.cuda.synchronize(self.device)\n        {switch}\n"
    )
    once = run(src).new_source
    assert "self.device.type == 'tpu'" in once
    assert run(once).new_source == once


def test_a_cuda_switch_the_code_reads_still_marks_a_cuda_path():
    src = (
        "import torch\n\n\ndef f(x):\n    if x.device.type != 'cuda':\n        return False\n"
        "    return torch.backends.cudnn.enabled\n"
    )
    assert "!= 'cuda'" in run(src).new_source


# --- lightning-flash's examples and tests: `flash.Trainer(gpus=torch.cuda.device_count())` became
# `torch.accelerator.device_count()`: Lightning 1.x's `gpus=` counts CUDA GPUs, and a TPU host asking for one raises
# MisconfigurationException where the original trained on the CPU with gpus=0 (25 hunks) ---
@pytest.mark.parametrize(
    "call",
    [
        "flash.Trainer(max_epochs=1, gpus=torch.cuda.device_count())",
        "pl.Trainer(gpus=torch.cuda.device_count() if torch.cuda.device_count() > 1 else None)",
        "pl.Trainer(gpus=int(torch.cuda.is_available()))",
        "ray.remote(num_gpus=torch.cuda.device_count())(f)",
    ],
)
def test_a_frameworks_count_of_cuda_gpus_stays_cudas(call):
    src = f"import torch\nimport flash\nimport pytorch_lightning as pl\nimport ray\n\nt = {call}\n"
    res = run(src)
    assert call in res.new_source
    assert "a framework's count of CUDA GPUs" in res.new_source
    assert "never runs on TPU" not in res.new_source  # (a count, not a test: the framework runs on the CPU)


def test_a_device_count_for_the_programs_own_use_is_still_renamed():
    out = run("import torch\n\nn = torch.cuda.device_count()\nprint(n)\n").new_source
    assert "torch.accelerator.device_count()" in out


# --- fish-speech: `@click.option("--device", default="cuda")` was kept as "a library that is not torch" while the
# value goes to model.to(device); click only parses the command line, like argparse, whose defaults are migrated ---
def test_a_click_option_default_is_migrated_like_argparses(tmp_path):
    import subprocess
    import sys

    src = (
        "import click\nimport torch\n\n\n@click.command()\n@click.option('--device', default='cuda')\n"
        "@click.option('--other', type=click.Choice(['cpu', 'cuda']), default='cuda')\n"
        "def main(device, other):\n    print(torch.ones(1).to(device).device.type, other)\n\n\n"
        "if __name__ == '__main__':\n    main()\n"
    )
    out = run(src).new_source
    assert "default='tpu'" in out and "click.Choice(['cpu', 'cuda', 'tpu'])" in out
    assert run(out).new_source == out
    script = tmp_path / "cli.py"
    script.write_text(out)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.split() == ["tpu", "tpu"], proc.stderr[-1500:]


# --- allennlp's util (peak memory, distributed_device) and ClassyVision's distributed_util: `dist.get_backend() ==
# "nccl"` (or Backend.NCCL) decides whether collective tensors go to the device; the group became 'tpu_dist' and the
# test stayed NCCL's: on TPU the tensors reached the collective on the CPU, which TorchTPU's backend does not serve ---
@pytest.mark.parametrize(
    "test, expected",
    [
        ('dist.get_backend() == "nccl"', 'dist.get_backend() in ("nccl", "tpu_dist")'),
        ("dist.get_backend() != 'nccl'", "dist.get_backend() not in ('nccl', 'tpu_dist')"),
        ("dist.get_backend(group) == Backend.NCCL", 'dist.get_backend(group) in (Backend.NCCL, "tpu_dist")'),
        ('"nccl" == dist.get_backend()', 'dist.get_backend() in ("nccl", "tpu_dist")'),
    ],
)
def test_a_test_for_the_running_nccl_backend_also_accepts_tpu_dist(test, expected):
    src = (
        "import torch\nimport torch.distributed as dist\nfrom torch.distributed import Backend\n\n\n"
        f"def gather(t, group=None):\n    if {test}:\n        t = t.cuda()\n    dist.all_reduce(t)\n    return t\n"
    )
    out = run(src).new_source
    assert expected in out and 't.to("tpu")' in out and "TODO" not in out
    assert run(out).new_source == out


def test_a_backend_test_around_nccls_own_machinery_is_kept_and_flagged():
    src = (
        "import torch\nimport torch.distributed as dist\n\n\ndef f(t):\n    if dist.get_backend() == 'nccl':\n"
        "        s = torch.cuda.Stream()\n        with torch.cuda.stream(s):\n            dist.all_reduce(t)\n"
    )
    out = run(src).new_source
    assert "dist.get_backend() == 'nccl'" in out and "TPU102" in out


def test_the_membership_runs_on_a_cpu_only_host(tmp_path):
    import os
    import subprocess
    import sys

    lib = "import torch\nimport torch.distributed as dist\n\n\ndef total(t):\n    if dist.get_backend() == 'nccl':\n        t = t.cuda()\n    dist.all_reduce(t)\n    return float(t.sum())\n"
    out = run(lib).new_source
    assert "in ('nccl', 'tpu_dist')" in out
    (tmp_path / "lib.py").write_text(out)
    (tmp_path / "main.py").write_text(
        "import torch\nimport torch.distributed as dist\nfrom lib import total\n\n"
        "dist.init_process_group('gloo', init_method='tcp://127.0.0.1:29571', rank=0, world_size=1)\n"
        "print('sum', total(torch.ones(2)))\ndist.destroy_process_group()\n"
    )
    env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    proc = subprocess.run(
        [sys.executable, "main.py"], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0 and "sum 2.0" in proc.stdout, proc.stderr[-1500:]


# --- allennlp's get_range_vector: `torch.cuda.LongTensor(size, device=device)` became a constructor built on the
# CPU type, which refused the device keyword ("legacy constructor expects device type: cpu") ---
def test_a_cuda_tensor_type_called_with_a_device_builds_on_tpu():
    from migrate_helpers import run_on_tpu

    src = (
        "import torch\n\n\ndef get_range_vector(size, device):\n"
        "    return torch.cuda.LongTensor(size, device=device).fill_(1).cumsum(0) - 1\n\n\n"
        "v = get_range_vector(4, 0)\nprint(v.device.type, v.tolist())\n"
    )
    out = run(src).new_source
    proc = run_on_tpu(out)
    assert proc.returncode == 0 and "tpu [0, 1, 2, 3]" in proc.stdout, proc.stderr[-1500:]


# --- cloneofsimo/lora: `with torch.autocast("cuda"):` in a function whose device is the caller's (`device="cuda:0"`
# default, `--device cpu` on the command line) became a bare autocast("tpu"), which raises without TorchTPU ---
def test_autocast_in_code_that_takes_its_device_from_the_caller_stays_portable(tmp_path):
    from migrate_helpers import run_without_torchtpu

    src = (
        "import torch\n\n\ndef evaluate(model, x, device='cuda:0'):\n    model.to(device)\n"
        "    with torch.autocast('cuda'):\n        return model(x.to(device))\n\n\n"
        "print(evaluate(torch.nn.Linear(2, 2), torch.ones(1, 2), device='cpu').shape)\n"
    )
    out = run(src).new_source
    assert "_tpu_autocast(" in out
    proc = run_without_torchtpu(tmp_path, out)
    assert proc.returncode == 0 and "torch.Size([1, 2])" in proc.stdout, proc.stderr[-1500:]


# --- fish-speech: `torch.compile(fn, backend="inductor" if torch.cuda.is_available() else "aot_eager")` was renamed
# to torch.accelerator's check: a TPU host asked for inductor, which TorchTPU's compile refuses for TPU inputs ---
def test_a_check_choosing_the_inductor_backend_stays_cudas():
    src = (
        "import torch\n\nm = torch.nn.Linear(2, 2).cuda()\n"
        "f = torch.compile(m, backend='inductor' if torch.cuda.is_available() else 'aot_eager')\n"
    )
    out = run(src).new_source
    assert "'inductor' if torch.cuda.is_available() else 'aot_eager'" in out


def test_an_explicit_inductor_backend_is_dropped_for_the_default():
    out = run(
        "import torch\n\nm = torch.nn.Linear(2, 2).cuda()\nf = torch.compile(m, backend='inductor')\n"
    ).new_source
    assert "torch.compile(m)" in out


# --- pyannote's MRE notebook: `gpu = torch.device("cuda")` then `pipeline.to(gpu)`: the name `gpu` was read as an
# integer CUDA ordinal and the argument became the string "tpu", which pyannote's Pipeline.to refuses (TypeError) ---
@pytest.mark.parametrize("bound", ['torch.device("cuda")', '"cuda"'])
def test_a_name_bound_to_a_device_is_not_an_ordinal(bound):
    src = f"import torch\n\nif torch.cuda.is_available():\n    gpu = {bound}\n    pipeline.to(gpu)\n"
    out = run(src).new_source
    assert "pipeline.to(gpu)" in out


def test_a_name_bound_to_an_ordinal_is_still_the_processs_device():
    out = run("import torch\n\ngpu = args.gpu\nx = x.cuda()\nmodel = model.to(gpu)\n").new_source
    assert 'model.to("tpu")' in out


# --- gpytorch's `*_cuda` tests: `if torch.cuda.is_available(): with least_used_cuda_device(): ...`, a project
# helper decorated with @contextmanager whose CUDA code the run migrates; a decorated helper was never judged
# portable, so 7 tests stayed CUDA's while their helper became device-neutral (green and never run on TPU) ---
def test_a_context_manager_helper_whose_cuda_code_is_migrated_is_portable(tmp_path):
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "setup.py").write_text("")
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "utils.py").write_text(
        "from contextlib import contextmanager\nimport torch\n\n\n@contextmanager\ndef least_used_cuda_device():\n"
        "    i = torch.cuda.device_count() - 1\n    with torch.cuda.device(i):\n        yield\n"
    )
    (root / "pkg" / "test_x.py").write_text(
        "import torch\nfrom pkg.utils import least_used_cuda_device\n\n\ndef test_x():\n"
        "    if torch.cuda.is_available():\n        with least_used_cuda_device():\n"
        "            assert torch.ones(2).cuda().sum() == 2\n"
    )
    first, second = _write_twice(root)
    assert first == second
    assert "if torch.accelerator.is_available():" in first["pkg/test_x.py"]
    assert "TODO" not in first["pkg/test_x.py"]


# --- mmengine's test_log_processor: `@patch('torch.cuda.max_memory_allocated', MagicMock())` followed the code
# under test to torch.accelerator, but `torch.cuda.max_memory_allocated.assert_called()` was only flagged: the
# real function has no assert_called, and the test raised AttributeError on every machine ---
def test_a_mock_read_back_follows_its_patch(tmp_path):
    from migrate_helpers import run_without_torchtpu

    src = (
        "import torch\nfrom unittest.mock import MagicMock, patch\n\n\ndef peak():\n"
        "    m = torch.cuda.max_memory_allocated()\n    torch.cuda.reset_peak_memory_stats()\n    return m\n\n\n"
        "@patch('torch.cuda.max_memory_allocated', MagicMock(return_value=7))\n"
        "@patch('torch.cuda.reset_peak_memory_stats', MagicMock())\ndef test_peak():\n    assert peak() == 7\n"
        "    torch.cuda.max_memory_allocated.assert_called()\n"
        "    torch.cuda.reset_peak_memory_stats.assert_called_once()\n\n\ntest_peak()\nprint('ok')\n"
    )
    out = run(src).new_source
    assert "torch.accelerator.max_memory_allocated.assert_called()" in out and "TODO" not in out
    proc = run_without_torchtpu(tmp_path, out)
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr[-1500:]


def test_a_mock_api_of_an_unpatched_function_is_still_flagged():
    out = run("import torch\n\ntorch.cuda.synchronize.assert_called()\n").new_source
    assert "TODO(tpu-migrate TPU299)" in out


# --- LitServe's connector and server: `accelerator in ("cpu", "cuda", "mps")`, `self._accelerator == "cuda"` and
# `return "cuda"` from `_choose_gpu_accelerator_backend` are the framework's accelerator names ("gpu", "auto" beside
# them); renamed, the documented accelerator="cuda" raised AttributeError and its "tpu" counted NVIDIA GPUs ---
def test_a_frameworks_accelerator_names_are_kept_and_flagged_once():
    src = (
        "import torch\n\n\nclass Connector:\n    def __init__(self, accelerator='auto'):\n"
        "        if accelerator not in ['auto', 'cpu', 'mps', 'cuda', 'gpu']:\n            raise ValueError(accelerator)\n"
        "        if accelerator in ('cpu', 'cuda', 'mps'):\n            self._accelerator = accelerator\n"
        "        elif accelerator == 'gpu':\n            self._accelerator = self._choose_gpu_accelerator()\n\n"
        "    def _choose_gpu_accelerator(self):\n        if torch.cuda.device_count() > 0:\n            return 'cuda'\n"
        "        return 'cpu'\n\n    def count(self):\n        return 2 if self._accelerator == 'cuda' else 1\n"
    )
    out = run(src).new_source
    code_lines = [ln for ln in out.splitlines() if not ln.strip().startswith("#")]
    assert not any("'tpu'" in ln for ln in code_lines) and sum(ln.count("'cuda'") for ln in code_lines) == 4
    assert out.count("a framework's accelerator name") == 1


def test_a_device_compared_by_another_name_is_still_renamed():
    out = run("import torch\n\n\ndef f(device):\n    return device == 'cuda'\n").new_source
    assert "device == 'tpu'" in out


# --- torchrl's compile test (`[Collector, MultiAsync] if not torch.cuda.is_available() else [Collector]`) and
# LitServe's `skipif(torch.cuda.device_count() > 0)`: kept checks whose TODO said the code "never runs on TPU",
# while a TPU host runs exactly that code (the side for a machine without CUDA) ---
@pytest.mark.parametrize(
    "line",
    [
        "@pytest.mark.parametrize('k', ['a', 'b'] if not torch.cuda.is_available() else ['a'])\ndef test_k(k):\n"
        "    assert k\n",
        "@pytest.mark.skipif(torch.cuda.device_count() > 0, reason='needs no gpu')\ndef test_k():\n    assert 1\n",
    ],
)
def test_a_kept_check_whose_code_runs_without_cuda_says_so(line):
    out = run("import pytest\nimport torch\n\n\n" + line).new_source
    assert "kept as CUDA's check" in out and "a TPU host takes its path for a machine without CUDA" in out
    assert "never runs on TPU" not in out


# --- lightning-flash's Trainer: `if torch.cuda.is_available(): kwargs["gpus"] = -1` under test (all CUDA GPUs,
# Lightning 1.x); renamed, every flash.Trainer on a TPU host asked for GPUs and raised ---
@pytest.mark.parametrize("target", ['kwargs["gpus"]', "self.num_gpus", "gpus"])
def test_a_check_that_sets_a_frameworks_gpu_count_stays_cudas(target):
    src = f"import torch\n\n\ndef setup(self, kwargs):\n    if torch.cuda.is_available():\n        {target} = -1\n"
    out = run(src).new_source
    assert "if torch.cuda.is_available():" in out and "a framework's count of CUDA GPUs" in out


# --- RVC's extract_f0.py: `mode = sys.argv[1].lower()` ... `elif mode == "cuda":`, a mode its launcher passes on
# the command line (webui.py, unchanged); renamed, the launcher's "cuda" raised "Unsupported F0 extraction mode" ---
def test_a_mode_read_from_the_command_line_is_compared_as_written():
    src = (
        "import sys\nimport torch\n\nmode = sys.argv[1].lower()\nif mode == 'cpu':\n    n = 1\n"
        "elif mode == 'cuda':\n    x = torch.ones(1).cuda()\n"
    )
    out = run(src).new_source
    assert "elif mode == 'cuda':" in out and "command line" in out


# --- mmengine: its `mmengine/dist/` package (init_dist, the process groups) was skipped as a build output, so a whole
# tree run never migrated it while the files calling it were; a build's dist/ and build/ folders still are skipped ---
def test_a_package_named_dist_or_build_is_migrated_and_build_outputs_are_not(tmp_path):
    from tpu_workbench.migrate.discover import walk

    for name in ("dist", "build"):
        (tmp_path / "pkg" / name).mkdir(parents=True)
        (tmp_path / "pkg" / name / "__init__.py").write_text("")
        (tmp_path / "pkg" / name / "utils.py").write_text("import torch\n")
        (tmp_path / name / "lib").mkdir(parents=True)
        (tmp_path / name / "lib" / "copy.py").write_text("import torch\n")
    found = {str(p.relative_to(tmp_path)) for p in map(__import__("pathlib").Path, walk(str(tmp_path)))}
    assert {"pkg/dist/utils.py", "pkg/build/utils.py"} <= found
    assert not any(f.startswith(("dist/", "build/")) for f in found)


# --- habitat-lab's sensor tests: `parametrize("cuda", [True, False])` names a parameter; the TODO called it a test
# case and asked for a 'tpu' case ---
def test_a_parametrize_argument_name_is_not_a_case():
    src = (
        "import pytest\nimport torch\n\n\n@pytest.mark.parametrize('cuda', [True, False])\ndef test_x(cuda):\n"
        "    x = torch.ones(1).cuda() if cuda else torch.ones(1)\n"
    )
    out = run(src).new_source
    assert "parametrize('cuda', [True, False])" in out and "test case" not in out


# --- fish-speech: the check choosing `backend=` stayed CUDA's, its twin choosing `mode=` in the same call was renamed
# (a TPU host passed mode="default", which TorchTPU's compile refuses) ---
def test_every_check_of_a_compile_call_choosing_inductor_stays_cudas():
    src = (
        "import torch\n\nm = torch.nn.Linear(2, 2).cuda()\nf = torch.compile(m, backend='inductor' if "
        "torch.cuda.is_available() else 'aot_eager', mode='default' if torch.cuda.is_available() else None)\n"
    )
    out = run(src).new_source
    assert "torch.accelerator" not in out.split("f = ", 1)[1]


# --- mmengine's hook tests: `self.create_pg('cuda')` in a class built on torch.testing._internal's
# DistributedTestBase, which maps only cuda/hpu/xpu/cpu to backends ('tpu' got a gloo group for TPU tensors) ---
def test_a_device_handed_to_torchs_internal_test_harness_is_kept():
    src = (
        "import torch\nfrom torch.testing._internal.common_distributed import DistributedTestBase\n\n\n"
        "class T(DistributedTestBase):\n    def test_x(self):\n        self.create_pg('cuda')\n"
        "        x = torch.ones(1).cuda()\n"
    )
    out = run(src).new_source
    assert "self.create_pg('cuda')" in out and "internal test harness" in out


# --- gpytorch's NNUtil: `def to(self, device): ... elif "cuda" in str(device): return self.cuda()`; as
# `self.to("tpu")` the method called itself until RecursionError ---
def test_self_cuda_in_a_class_with_its_own_to_is_flagged_not_rewritten():
    src = (
        "import torch\n\n\nclass NN(torch.nn.Module):\n    def to(self, device):\n"
        "        if 'cuda' in str(device):\n            return self.cuda()\n        return super().to(device)\n\n"
        "    def cuda(self, device=None):\n        return super().cuda(device=device)\n"
    )
    out = run(src).new_source
    assert "return self.cuda()" in out and 'self.to("tpu")' not in out
    assert 'super().to("tpu")' in out  # (nn.Module's own .to: safe)
    alone = run(
        "import torch\n\n\nclass NN(torch.nn.Module):\n    def to(self, d):\n        return self.cuda()\n"
    )
    assert "defines its own `to()`" in alone.new_source


def test_self_cuda_in_a_plain_module_is_still_moved():
    src = "import torch\n\n\nclass M(torch.nn.Module):\n    def place(self):\n        return self.cuda()\n"
    assert 'return self.to("tpu")' in run(src).new_source


# --- torchrl's env sync: `partial(torch.cuda.synchronize, device=policy_device)` kept the keyword, which
# torch.accelerator.synchronize calls device_index (TypeError at every synchronised rollout) ---
def test_a_partial_of_a_renamed_function_renames_its_keywords():
    from migrate_helpers import run_on_tpu

    src = (
        "import functools\nimport torch\n\nd = torch.device('cuda')\n"
        "sync = functools.partial(torch.cuda.synchronize, device=d)\nsync()\nprint('synced')\n"
    )
    out = run(src).new_source
    assert "functools.partial(torch.accelerator.synchronize, device_index=d)" in out
    proc = run_on_tpu(out)
    assert proc.returncode == 0 and "synced" in proc.stdout, proc.stderr[-1500:]


# --- sam2's trainer (held-out 14, re-read on today's tool): `def __init__(self, accelerator: str = "cuda")` with
# `if accelerator == "cuda": ... else: raise`: the comparisons were kept as accelerator names while the default
# became "tpu", and a Trainer built with the default raised "Unsupported accelerator: tpu" ---
def test_an_accelerator_parameters_default_is_kept_with_its_comparisons(tmp_path):
    from migrate_helpers import run_on_tpu

    src = (
        "import torch\n\n\nclass Trainer:\n    def __init__(self, accelerator: str = 'cuda'):\n"
        "        if accelerator == 'cuda':\n            self.device = torch.device('cuda')\n"
        "        elif accelerator == 'cpu':\n            self.device = torch.device('cpu')\n        else:\n"
        "            raise ValueError(accelerator)\n\n\nprint(Trainer().device.type)\n"
    )
    out = run(src).new_source
    assert "accelerator: str = 'cuda'" in out and "torch.device('tpu')" in out
    proc = run_on_tpu(out)
    assert proc.returncode == 0 and proc.stdout.strip() == "tpu", proc.stderr[-1500:]
