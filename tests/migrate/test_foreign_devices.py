"""Device strings handed to a library that is not torch (issue 31, class left open by the first session):
isaacgym's ``sim_device="cuda:0"``, transformers' / accelerate's ``device_map``. Renaming 'cuda' to 'tpu' there
moves nothing to the TPU (the library refuses the name or does something else): kept and flagged, once. torch,
its family, the standard library and the project's own modules still get the rewrite."""

from __future__ import annotations

import pytest
from migrate_helpers import codes, run

ISAAC = (
    "import isaacgymenvs\nimport torch\n"
    "envs = isaacgymenvs.make(\n    seed=1,\n"
    "    sim_device='cuda:0' if torch.cuda.is_available() and args.cuda else 'cpu',\n"
    "    graphics_device_id=0 if torch.cuda.is_available() and args.cuda else -1,\n)\n"
    "x = torch.zeros(2, device='cuda')\n"
)


def _call_text(out: str, start: str) -> str:
    i = out.index(start)
    return out[i : out.index("\n)", i)]


def test_a_simulator_device_is_kept_with_the_checks_that_choose_it():
    res = run(ISAAC)
    call = _call_text(res.new_source, "envs = isaacgymenvs.make(")
    # the wrong rewrite: sim_device="tpu:0" handed to isaacgym, or a check that now picks graphics device 0 on TPU
    assert "tpu" not in call and "torch.accelerator" not in call
    assert "sim_device='cuda:0' if torch.cuda.is_available()" in call
    assert "torch.zeros(2, device='tpu')" in res.new_source  # torch's own device argument still migrates
    assert res.new_source.count("TODO(tpu-migrate TPU101)") == 1
    assert "isaacgymenvs.make" in next(
        d.message for d in res.diagnostics if d.code == "TPU101" and not d.fixed
    )


@pytest.mark.parametrize(
    "src, must_keep",
    [
        (
            "import accelerate\nm = accelerate.dispatch_model(model, device_map={'': 'cuda:0'})\n",
            "{'': 'cuda:0'}",
        ),
        (
            "import isaacgymenvs\nenvs = isaacgymenvs.make(1, 'Ant', 4, 'cuda:0', 'cuda:0')\n",
            "'cuda:0', 'cuda:0'",
        ),
        (
            "from some_sim import Sim\nsim = Sim(device='cuda' if use_gpu else 'cpu')\n",
            "device='cuda' if use_gpu else 'cpu'",
        ),
    ],
    ids=["accelerate-dict", "positional", "ternary"],
)
def test_device_names_for_third_party_libraries_are_kept_and_flagged(src, must_keep):
    res = run(src)
    assert must_keep in res.new_source  # not 'tpu' for a library whose device names are its own
    assert codes(res).count("TPU101") >= 1
    assert all(not d.fixed for d in res.diagnostics if d.code == "TPU101")
    assert res.new_source.count("TODO(tpu-migrate TPU101)") == 1


@pytest.mark.parametrize(
    "src, expected",
    [
        ("import torch\nx = torch.zeros(2, device='cuda')\n", "device='tpu'"),
        # transformers makes a device_map string {"": torch.device(device_map)} (integrations/accelerate.py
        # check_and_set_device_map): a torch device (SimPO's reward model; held-out 16)
        (
            "from transformers import AutoModelForCausalLM\nm = AutoModelForCausalLM.from_pretrained('gpt2', "
            "device_map='cuda')\n",
            "device_map='tpu'",
        ),
        ("import torchvision\nm = torchvision.models.get_model('resnet18').to('cuda')\n", ".to('tpu')"),
        ("import functools, torch\nz = functools.partial(torch.zeros, device='cuda')\n", "device='tpu'"),
        ("from .models import build\nm = build(device='cuda')\n", "device='tpu'"),
        (
            "import diffusers\npipe = diffusers.DiffusionPipeline.from_pretrained('x').to('cuda')\n",
            ".to('tpu')",
        ),
    ],
    ids=["torch", "hf-device-map", "torchvision-method", "stdlib", "relative-project", "method-of-a-value"],
)
def test_torch_stdlib_and_project_callees_still_migrate(src, expected):
    assert expected in run(src).new_source


def test_a_module_of_the_project_beside_the_file_is_the_project_s_own(tmp_path):
    (tmp_path / "models.py").write_text("def build(device):\n    return device\n")
    (tmp_path / "scripts").mkdir()
    script = tmp_path / "scripts" / "train.py"
    src = "from models import build\nm = build(device='cuda')\n"
    script.write_text(src)
    assert "device='tpu'" in run(src, path=str(script)).new_source
    # the same call with no such module around: a third-party library's
    assert "device='cuda'" in run(src).new_source


@pytest.mark.parametrize(
    "src",
    [
        "from transformers import pipeline\np = pipeline('text-generation', model='gpt2', device='cuda:0')\n",
        "import diffusers\np = diffusers.StableDiffusionPipeline.from_pretrained('x', device='cuda')\n",
    ],
)
def test_a_torch_native_library_s_device_argument_still_migrates(src):
    """transformers/diffusers hand ``device=`` to torch.device as it is (their device_map= stays flagged)."""
    res = run(src)
    assert "device='tpu" in res.new_source and "TODO" not in res.new_source
