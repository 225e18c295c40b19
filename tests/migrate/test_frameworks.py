"""Framework device knobs (Lightning, Hugging Face, composer, accelerate): flagged, literals never rewritten."""

from __future__ import annotations

import pytest
from migrate_helpers import codes, run

L = "import lightning as L\n"


@pytest.mark.parametrize(
    ("src", "code", "kept"),
    [
        (L + 't = L.Trainer(accelerator="cuda", devices=2)\n', "TPU911", 'accelerator="cuda"'),
        (L + 't = L.Trainer(accelerator="gpu")\n', "TPU911", 'accelerator="gpu"'),
        ("import pytorch_lightning as pl\nt = pl.Trainer(gpus=2)\n", "TPU911", "gpus=2"),
        ("from pytorch_lightning import Trainer\nt = Trainer(tpu_cores=8)\n", "TPU911", "tpu_cores=8"),
        (
            "from lightning.fabric import Fabric\nf = Fabric(accelerator='tpu', strategy='xla_fsdp')\n",
            "TPU911",
            "strategy='xla_fsdp'",
        ),
        (
            "from lightning.pytorch.accelerators import XLAAccelerator\nok = XLAAccelerator.is_available()\n",
            "TPU911",
            "XLAAccelerator.is_available()",
        ),
        ("import composer\nt = composer.Trainer(model=m, device='gpu')\n", "TPU913", "device='gpu'"),
        ("from composer.devices import DeviceTPU\nd = DeviceTPU()\n", "TPU913", "DeviceTPU()"),
        (
            "import transformers\na = transformers.TrainingArguments('o', tpu_metrics_debug=True)\n",
            "TPU912",
            "tpu_metrics_debug=True",
        ),
        ('argv = ["--tpu_num_cores", "8", "--debug", "tpu_metrics_debug"]\n', "TPU912", '"--tpu_num_cores"'),
        ('os.system("python run_glue.py --tpu_num_cores=8 --do_train")\n', "TPU912", "--tpu_num_cores=8"),
        (
            'subprocess.run(["accelerate", "launch", "--tpu", "--tpu_use_cluster", "t.py"])\n',
            "TPU914",
            '"--tpu"',
        ),
    ],
)
def test_framework_knob_is_flagged_and_kept(src, code, kept):
    res = run(src)
    assert kept in res.new_source
    assert f"# TODO(tpu-migrate {code})" in res.new_source
    assert code in codes(res) and not any(d.fixed for d in res.diagnostics if d.code == code)


def test_cuda_accelerator_is_never_rewritten_to_lightnings_tpu():
    # "tpu" here would select Lightning's torch_xla path: wrong, so the literal stays even with the rule off.
    src = L + 'import torch\nt = L.Trainer(accelerator="cuda")\nx = torch.ones(1, device="cuda")\n'
    for kw in ({}, {"ignore": ["TPU911"]}):
        out = run(src, **kw).new_source
        assert 'L.Trainer(accelerator="cuda")' in out and 'device="tpu"' in out


@pytest.mark.parametrize(
    "src",
    [
        "class Trainer:\n    pass\nt = Trainer(accelerator='tpu', tpu_cores=8)\n",  # not Lightning's
        "from transformers import TrainingArguments\na = TrainingArguments('o', debug='underflow_overflow')\n",
        "from composer import Trainer\nt = Trainer(model=m, device='cpu')\n",
        "cmd = 'accelerate launch --num_processes 8 train.py'\n",
        "flags = ['--tpu']\n",  # no accelerate command around it
        "msg = 'see the docs of --tpu_num_cores for details'  # prose, not an option\n",
    ],
)
def test_not_a_knob_is_left_alone(src):
    res = run(src)
    assert res.new_source == src and not [c for c in codes(res) if c.startswith("TPU91")]


def test_one_todo_per_statement():
    src = (
        "from lightning.pytorch.strategies import XLAStrategy\n"
        + L
        + "t = L.Trainer(accelerator='tpu', strategy=XLAStrategy())\n"
    )
    res = run(src)
    assert res.new_source.count("TODO(tpu-migrate TPU911)") == 1
    assert codes(res).count("TPU911") == 2


def test_prefilter_lets_framework_files_through_but_not_migrated_code():
    from tpu_workbench.migrate.source import needs_parse

    assert needs_parse("from composer import Trainer\nt = Trainer(model=m, device='gpu')\n")
    assert needs_parse("t = L.Trainer(accelerator='tpu')\n")
    assert not needs_parse('x = torch.ones(1, device="tpu")\nok = torch.accelerator.is_available()\n')


@pytest.mark.parametrize(
    "src",
    [
        L + 't = L.Trainer(accelerator="auto", devices="auto")\n',
        L + "t = L.Trainer(accelerator=choice)\n",
        L + "t = L.Trainer(accelerator=args.accelerator, devices=1)\n",
        L + "f = L.Fabric(accelerator=cfg['accelerator'])\n",
        "import pytorch_lightning as pl\nt = pl.Trainer(accelerator=os.environ.get('ACC', 'gpu'))\n",
    ],
)
def test_a_run_time_or_auto_accelerator_is_flagged_never_given_tpu(src):
    res = run(src)
    code_lines = "\n".join(line for line in res.new_source.splitlines() if not line.lstrip().startswith("#"))
    assert codes(res) == ["TPU911"] and "tpu" not in code_lines


@pytest.mark.parametrize("default", ["gpu", "cuda", "auto"])
def test_an_accelerator_option_default_is_never_renamed(default):
    src = (
        "import argparse\nimport lightning as L\np = argparse.ArgumentParser()\n"
        f"p.add_argument('--accelerator', default='{default}', choices=['cpu', 'gpu', 'cuda', 'auto'])\n"
        "args = p.parse_args()\nt = L.Trainer(accelerator=args.accelerator)\n"
    )
    res = run(src)
    code_lines = "\n".join(line for line in res.new_source.splitlines() if not line.lstrip().startswith("#"))
    assert f"default='{default}'" in code_lines and "tpu" not in code_lines
    assert "TPU911" in codes(res)
