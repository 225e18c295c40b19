"""The "tpu_dist" / "tpu" process group: collectives, DDP, FSDP2, device mesh, mp.spawn (2 ranks, CPU)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

SCRIPTS = Path(__file__).parent / "dist_scripts"


def _free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def _run(args: list[str], timeout: int = 170) -> str:
    env = {**os.environ, "TPU_DIST_TEST_TIMEOUT": str(timeout - 20), "OMP_NUM_THREADS": "1"}
    out = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env)
    assert out.returncode == 0, (out.stdout[-3000:], out.stderr[-5000:])
    return out.stdout


def _run_on_a_free_port(args: list[str], tries: int = 3) -> str:
    """``args`` + a port for rank 0's store. A port picked here is free only until closed: another process
    (an ephemeral connect, a parallel test) can take it before rank 0 binds it, so EADDRINUSE means try a
    fresh one; any other failure fails at once."""
    for attempt in range(tries):
        try:
            return _run([*args, _free_port()])
        except AssertionError as failure:
            if "EADDRINUSE" not in str(failure) or attempt == tries - 1:
                raise
    raise AssertionError("unreachable")


def _torchrun(script: str, *args: str) -> str:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    return _run([*cmd, str(SCRIPTS / script), *args])


def _losses(stdout: str) -> list[float]:
    lines = [ln for ln in stdout.splitlines() if ln.startswith("LOSSES ")]
    assert len(lines) == 1, stdout
    return json.loads(lines[0][len("LOSSES ") :])


@pytest.fixture(scope="module")
def single_losses() -> list[float]:
    # the single-process reference runs in this process (same code path as the workers)
    import importlib.util

    spec = importlib.util.spec_from_file_location("_tpu_dist_train", SCRIPTS / "train.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.train("single", 0, 1)


def test_backends_registered_for_tpu() -> None:
    for name in ("tpu_dist", "tpu"):
        assert name in dist.Backend.backend_list
        assert "tpu" in dist.Backend.backend_capability[name]
    assert dist.Backend.default_device_backend_map["tpu"] == "tpu_dist"


def test_set_tpu_launch_env_fills_standard_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    from tpu_workbench.backend.distributed import set_tpu_launch_env

    for k in ("WORLD_SIZE", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("MASTER_PORT", "31234")  # an existing value wins
    env = set_tpu_launch_env(nnodes=2, nproc_per_node=4, node_rank=1)
    assert env == {"WORLD_SIZE": "8", "NODE_RANK": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "31234"}


def test_single_rank_in_process_all_reduce_and_broadcast() -> None:
    store = dist.HashStore()
    dist.init_process_group("tpu_dist", store=store, rank=0, world_size=1)
    try:
        x = torch.arange(3.0).to("tpu")
        dist.all_reduce(x)
        dist.broadcast(x, src=0)
        assert x.device.type == "tpu" and x.cpu().tolist() == [0.0, 1.0, 2.0]
        out = torch.zeros(3).to("tpu")
        dist.all_gather_into_tensor(out, x * 2)
        assert out.cpu().tolist() == [0.0, 2.0, 4.0]
    finally:
        dist.destroy_process_group()


_EXIT_SCRIPT = """
import atexit, torch, torch.distributed as dist
import tpu_workbench.backend  # noqa: F401
atexit.register(lambda: print("initialized at exit:", dist.is_initialized(), flush=True))  # runs after ours
dist.init_process_group("tpu_dist", store=dist.HashStore(), rank=0, world_size=1)
x = torch.ones(2).to("tpu")
dist.all_reduce(x)
print("sum", x.sum().item(), flush=True)
"""


@pytest.mark.slow  # (quick loop: several seconds; runs in the full suite)
def test_a_program_that_never_destroys_its_group_has_it_destroyed_before_the_interpreter_dies() -> None:
    # gloo's threads freeing work during interpreter finalization abort the process (pytorch/pytorch#190489)
    out = _run([sys.executable, "-c", _EXIT_SCRIPT], timeout=120)
    assert "sum 2.0" in out and "initialized at exit: False" in out


@pytest.mark.slow
def test_all_collectives_two_ranks() -> None:
    out = _torchrun("collectives.py", "tpu_dist")
    assert "OK tpu_dist rank=0" in out


@pytest.mark.slow
def test_compiled_ddp_two_ranks_matches_single_process(single_losses: list[float]) -> None:
    # torch.compile(DDP(model), backend="tpu") under torchrun, over the "tpu" alias; plain eager DDP
    # is covered by the mp.spawn test below.
    losses = _losses(_torchrun("train.py", "ddp_compiled", "tpu"))
    assert losses == pytest.approx(single_losses, rel=1e-5, abs=1e-6)
    assert losses[-2] < losses[0]


@pytest.mark.slow
def test_fsdp2_with_device_mesh_matches_single_process(single_losses: list[float]) -> None:
    # no init_process_group: init_device_mesh("tpu", (2,)) creates the default group itself
    losses = _losses(_torchrun("train.py", "fsdp", "auto"))
    assert losses == pytest.approx(single_losses, rel=1e-5, abs=1e-6)


@pytest.mark.slow
def test_mp_spawn_ddp_matches_single_process(single_losses: list[float]) -> None:
    losses = _losses(_run_on_a_free_port([sys.executable, str(SCRIPTS / "train.py"), "spawn"]))
    assert losses == pytest.approx(single_losses, rel=1e-5, abs=1e-6)
