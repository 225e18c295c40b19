"""Checkpoint idioms: save -> resume -> continue with identical losses, every map_location spelling and
weights_only both ways, checkpoints written on "tpu" and on the CPU, and state_dict round trips."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from idioms import resume
from idioms.tiny import TinyCNN, TinyMLP, image_batches, train_losses, vector_batches

HERE = Path(__file__).parent


def _expected_device(kind: str, spelling: str) -> str:
    if spelling in ("cpu", "callable-host") or (spelling == "none" and kind != "on_tpu"):
        return "cpu"
    return "tpu"


def _cases() -> list:
    out = []
    for kind in resume.KINDS:
        for spelling in resume.MAP_LOCATIONS:
            for weights_only in (True, False):
                out.append(f"{kind}/{spelling}/weights_only={weights_only}")
    return out


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Run the whole save/resume matrix once, in its own interpreter (a crash in torch.load fails the cases)."""
    out = tmp_path_factory.mktemp("resume")
    proc = subprocess.run([sys.executable, "-m", "idioms.resume", str(out)], cwd=HERE, capture_output=True,
                          text=True, timeout=1800)  # fmt: skip
    assert proc.returncode == 0, f"resume script died (rc {proc.returncode}):\n{proc.stderr[-4000:]}"
    return json.loads(proc.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("case", _cases())
def test_resume_matrix(matrix: dict, case: str) -> None:
    got = matrix["cases"][case]
    assert "error" not in got, got.get("trace")
    kind, spelling, _ = case.split("/")
    assert got["model_devices"] == [_expected_device(kind, spelling)]
    assert got["loaded_mismatches"] == [] and got["state_mismatches"] == []
    assert got["iter_num"] == resume.STEPS and got["config"] == {"lr": 3e-2, "name": "tiny"}
    if case in resume.CONTINUE and kind == "trained_on_cpu":
        # the CPU run's own continuation: close, not equal (the first steps ran on other kernels)
        for a, b in zip(got["losses"], matrix["cpu_reference"], strict=True):
            assert abs(a - b) <= 1e-5 * max(1.0, abs(b))
    elif case in resume.CONTINUE:
        assert got["losses"] == matrix["reference"], (
            "a resumed run continues exactly as the uninterrupted one"
        )


# ------------------------------------------------------------------------------------------- in-process
def test_resume_through_a_file_continues_identically(tmp_path: Path) -> None:
    batches = vector_batches(4, seed=2)
    torch.manual_seed(0)
    model = TinyMLP().to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    train_losses(model, opt, batches[:2], "tpu")
    torch.save(
        {"model": model.state_dict(), "optimizer": opt.state_dict(), "iter_num": 2}, tmp_path / "ckpt.pt"
    )
    reference = train_losses(model, opt, batches[2:], "tpu")

    ck = torch.load(tmp_path / "ckpt.pt", map_location="tpu", weights_only=True)
    torch.manual_seed(1)
    fresh = TinyMLP().to("tpu")
    fresh.load_state_dict(ck["model"])
    fresh_opt = torch.optim.AdamW(fresh.parameters(), lr=1e-2)
    fresh_opt.load_state_dict(ck["optimizer"])
    assert all(p.device.type == "tpu" for p in fresh.parameters())
    assert train_losses(fresh, fresh_opt, batches[2:], "tpu") == reference


def test_whole_module_pickle_round_trip() -> None:
    torch.manual_seed(0)
    model = TinyCNN().to("tpu")
    model(image_batches(1)[0][0].to("tpu"))  # BatchNorm running stats move off their init values
    buf = io.BytesIO()
    torch.save(model, buf)  # word_language_model saves the module object itself
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)
    assert next(loaded.parameters()).device.type == "tpu"
    for (name, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items(), strict=True):
        assert a.dtype == b.dtype and torch.equal(a.cpu(), b.cpu()), name
    x = image_batches(1, seed=3)[0][0]
    model.eval()
    loaded.eval()
    assert torch.equal(model(x.to("tpu")).cpu(), loaded(x.to("tpu")).cpu())


def test_state_dict_round_trips_between_tpu_and_cpu_exactly() -> None:
    torch.manual_seed(0)
    cpu_model = TinyCNN()
    cpu_model.register_buffer("mask", torch.tensor([True, False, True]))
    cpu_model.register_buffer("half_table", torch.randn(3).to(torch.bfloat16))
    cpu_model(torch.randn(2, 1, 8, 8))
    cpu_state = {k: v.clone() for k, v in cpu_model.state_dict().items()}

    torch.manual_seed(1)
    tpu_model = TinyCNN()
    tpu_model.register_buffer("mask", torch.zeros(3, dtype=torch.bool))
    tpu_model.register_buffer("half_table", torch.zeros(3, dtype=torch.bfloat16))
    tpu_model.to("tpu")
    tpu_model.load_state_dict(cpu_state)  # CPU state into a model living on "tpu"
    tpu_state = tpu_model.state_dict()
    assert {v.device.type for v in tpu_state.values()} == {"tpu"}
    for k, v in cpu_state.items():
        assert tpu_state[k].dtype == v.dtype and torch.equal(tpu_state[k].cpu(), v), k
    assert tpu_state["features.1.num_batches_tracked"].dtype == torch.int64

    back = TinyCNN()
    back.register_buffer("mask", torch.zeros(3, dtype=torch.bool))
    back.register_buffer("half_table", torch.zeros(3, dtype=torch.bfloat16))
    back.load_state_dict(tpu_state)  # "tpu" state into a CPU model
    for k, v in back.state_dict().items():
        assert v.device.type == "cpu" and torch.equal(v, cpu_state[k]), k


def test_optimizer_state_moves_to_the_parameters_device() -> None:
    torch.manual_seed(0)
    cpu_model = TinyCNN()
    cpu_opt = torch.optim.Adam(cpu_model.parameters(), lr=1e-2)
    x, y = image_batches(1)[0]
    torch.nn.functional.cross_entropy(cpu_model(x), y).backward()
    cpu_opt.step()

    tpu_model = TinyCNN()
    tpu_model.load_state_dict(cpu_model.state_dict())
    tpu_model.to("tpu")
    tpu_opt = torch.optim.Adam(tpu_model.parameters(), lr=1e-2)
    tpu_opt.load_state_dict(cpu_opt.state_dict())
    for p in tpu_model.parameters():
        st = tpu_opt.state[p]
        assert st["exp_avg"].device.type == "tpu" and st["exp_avg_sq"].device.type == "tpu"
    for a, b in zip(cpu_opt.state.values(), tpu_opt.state.values(), strict=True):
        assert torch.equal(a["exp_avg"], b["exp_avg"].cpu()) and torch.equal(a["step"], b["step"].cpu())


@pytest.mark.slow
def test_tpu_checkpoint_loads_on_a_machine_without_the_device(tmp_path: Path) -> None:
    state = {
        "w": torch.arange(6.0).view(2, 3),
        "n": torch.tensor(5),
        "h": torch.ones(2, dtype=torch.bfloat16),
    }
    torch.save({k: v.to("tpu") for k, v in state.items()}, tmp_path / "tpu.pt")
    code = ("import json, sys, torch; ck = torch.load(sys.argv[1], map_location='cpu', weights_only=True); "
            "print(json.dumps({k: [str(v.device), str(v.dtype), v.float().flatten().tolist()] "
            "for k, v in ck.items()}))")  # fmt: skip
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "tpu.pt")], capture_output=True, text=True,
                          env=env, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout)
    assert got == {k: ["cpu", str(v.dtype), v.float().flatten().tolist()] for k, v in state.items()}


@pytest.mark.parametrize("map_location", [None, "tpu", "cpu"])
def test_views_saved_with_their_base_load_sharing_one_storage(
    tmp_path: Path, map_location: str | None
) -> None:
    """torch.save writes a view as its base's storage plus offset and strides, as for a CUDA tensor: loaded
    back, the view still aliases its base (a write to one shows in the other) and reports the same layout."""
    base = torch.arange(12.0).view(3, 4).to("tpu")
    saved = {"base": base, "col": base[:, 1], "t": base.t(), "tail": base.view(-1)[5:]}
    torch.save(saved, tmp_path / "views.pt")
    got = torch.load(tmp_path / "views.pt", map_location=map_location)
    want = {k: v.cpu() for k, v in saved.items()}
    for k in saved:
        assert got[k].device.type == ("cpu" if map_location == "cpu" else "tpu")
        assert torch.equal(got[k].cpu(), want[k]), k
        assert (
            got[k].stride() == saved[k].stride() and got[k].storage_offset() == saved[k].storage_offset()
        ), k
    got["base"].add_(100)
    assert torch.equal(got["col"].cpu(), want["col"] + 100)
    assert torch.equal(got["t"].cpu(), want["t"] + 100)
    got["tail"].zero_()
    assert got["base"].cpu().view(-1)[5:].eq(0).all()


def test_a_later_save_sees_writes_made_since_the_first(tmp_path: Path) -> None:
    x = torch.zeros(4).to("tpu")
    torch.save(x[1:], tmp_path / "a.pt")
    x.add_(1)
    torch.save(x[1:], tmp_path / "b.pt")
    assert torch.equal(torch.load(tmp_path / "a.pt").cpu(), torch.zeros(3))
    assert torch.equal(torch.load(tmp_path / "b.pt").cpu(), torch.ones(3))
