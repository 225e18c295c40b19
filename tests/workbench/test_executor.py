"""The executor: a crash or a hang costs one task, outcomes are appended as they finish and a rerun resumes."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tpu_workbench.bench.errors import WorkbenchError
from tpu_workbench.bench.executor import ExecutorOptions, ResultStore, Task, run_tasks
from tpu_workbench.bench.executor.task import safe_name

P = "tpu_workbench.bench.executor.probes:"


def _opts(tmp_path: Path, **kw) -> ExecutorOptions:
    kw.setdefault("workers", 2)
    kw.setdefault("timeout", 60)
    return ExecutorOptions(start_method="forkserver", log_dir=tmp_path / "logs", **kw)


def test_a_segfault_costs_one_task_only(tmp_path):
    tasks = [Task(f"sq{i}", P + "square", {"x": i}) for i in range(5)]
    tasks.insert(2, Task("seg", P + "segfault"))
    tasks.append(Task("fail", P + "fail", {"why": "test"}))
    out = {o.key: o for o in run_tasks(tasks, _opts(tmp_path), store=tmp_path / "s.jsonl")}
    assert len(out) == 7
    assert [out[f"sq{i}"].result["y"] for i in range(5)] == [0, 1, 4, 9, 16]
    assert all(out[f"sq{i}"].status == "ok" for i in range(5))
    seg = out["seg"]
    assert seg.status == "crash" and "SIGSEGV" in seg.error
    assert seg.stage == "about to crash" and seg.partial == {"got": "this far"}
    assert out["fail"].status == "error" and "ValueError: asked to fail: test" in out["fail"].error
    pids = {out[f"sq{i}"].result["pid"] for i in range(5)}
    assert len(pids) == 5  # one process per task


def _gone(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "State:\tZ" in status


@pytest.mark.slow
def test_a_hang_is_killed_with_its_children(tmp_path):
    pidfile = tmp_path / "child.pid"
    tasks = [Task("hang", P + "hang", {"pidfile": str(pidfile)}), Task("sq", P + "square", {"x": 2})]
    out = {o.key: o for o in run_tasks(tasks, _opts(tmp_path, timeout=3))}
    assert out["hang"].status == "timeout" and out["hang"].stage == "hanging"
    assert out["sq"].status == "ok"
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 10
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _gone(child), "the hanging task's child outlived the timeout"


def test_a_rerun_skips_finished_tasks_and_a_torn_line(tmp_path):
    store = tmp_path / "s.jsonl"
    first = [Task(f"sq{i}", P + "square", {"x": i}) for i in range(3)]
    run_tasks(first, _opts(tmp_path), store=store)
    with open(store, "a") as f:
        f.write('{"key": "sq3", "status": "ok", "res')  # a run killed mid-write
    ran: list[str] = []
    tasks = first + [Task("sq3", P + "square", {"x": 3})]
    out = run_tasks(tasks, _opts(tmp_path), store=store, on_done=lambda o: ran.append(o.key))
    assert ran == ["sq3"]
    assert sorted(o.key for o in out) == ["sq0", "sq1", "sq2", "sq3"]
    assert set(ResultStore(store).load()) == {"sq0", "sq1", "sq2", "sq3"}
    again = run_tasks(tasks, _opts(tmp_path), store=store, resume=False, on_done=lambda o: ran.append(o.key))
    assert len(again) == 4 and len(ran) == 5
    assert all(json.loads(line)["key"] for line in store.read_text().splitlines()[:3])


def test_bad_input_is_refused(tmp_path):
    with pytest.raises(WorkbenchError, match="unique"):
        run_tasks([Task("a", P + "square"), Task("a", P + "square")])
    with pytest.raises(WorkbenchError, match="engine"):
        run_tasks([Task("a", P + "square")], engine="slurm")
    (bad,) = run_tasks([Task("a", "no_colon_here")], _opts(tmp_path))
    assert bad.status == "error" and "package.module:function" in bad.error


@given(st.text(max_size=300))
def test_log_names_are_safe(key):
    name = safe_name(key)
    assert len(name) <= 120 and all(c.isascii() and (c.isalnum() or c in "_.-") for c in name)
    assert (Path("/logs") / f"{name}.log").parent == Path("/logs")  # never a path out of the log folder


@pytest.mark.slow
def test_ray_engine_same_store_same_results(tmp_path):
    pytest.importorskip("ray", reason='the ray engine is an optional extra: pip install ".[ray]"')
    tasks = [Task(f"sq{i}", P + "square", {"x": i}) for i in range(4)]
    tasks += [Task("seg", P + "segfault"), Task("fail", P + "fail")]
    store = tmp_path / "ray.jsonl"
    out = {o.key: o for o in run_tasks(tasks, _opts(tmp_path, timeout=120), engine="ray", store=store)}
    assert [out[f"sq{i}"].result["y"] for i in range(4)] == [0, 1, 4, 9]
    assert out["seg"].status == "crash"
    assert out["fail"].status == "error" and "asked to fail" in out["fail"].error
    assert {o.engine for o in out.values()} == {"ray"}
    assert set(ResultStore(store).load()) == set(out)
    ran: list[str] = []
    run_tasks(tasks, _opts(tmp_path), engine="ray", store=store, on_done=lambda o: ran.append(o.key))
    assert ran == []  # resumed: nothing left to run, Ray not even started


def test_a_ray_address_that_does_not_answer_is_refused_fast():
    import socket

    from tpu_workbench.bench.executor.ray_engine import check_address

    with socket.socket() as s:  # a port nobody listens on: bind, never listen
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        start = time.monotonic()
        with pytest.raises(WorkbenchError, match="does not answer"):
            check_address(f"127.0.0.1:{port}")
        assert time.monotonic() - start < 6
    with pytest.raises(WorkbenchError, match="host:port"):
        check_address("not-an-address")
    check_address("auto")  # left to Ray
