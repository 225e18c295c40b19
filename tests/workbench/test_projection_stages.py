"""Each stage of the projection pipeline on its own: resolve (the request), work, fit, step time, record."""

from __future__ import annotations

import pytest

from tpu_workbench.bench.errors import WorkbenchError
from tpu_workbench.bench.flops import kv_bytes_per_token
from tpu_workbench.bench.projection.fit import fit_memory, kv_cache_bytes_per_chip
from tpu_workbench.bench.projection.model import project, project_spec, step_work
from tpu_workbench.bench.projection.record import build_record
from tpu_workbench.bench.projection.spec import Deployment, Kernels, Workload, resolve
from tpu_workbench.bench.projection.step import time_step
from tpu_workbench.bench.workloads import get_config

DECODE = Workload("llama3-8b", "decode", batch=8, seq=16384)
V6E_TP8 = Deployment("TPU v6e", 8, "tp")


def test_resolve_refuses_unknown_precisions_and_collectives_in_one_line():
    with pytest.raises(WorkbenchError, match="precision"):
        resolve(DECODE, Deployment("TPU v6e", 8, "tp", kv_precision="fp3"), Kernels())
    with pytest.raises(WorkbenchError, match="async collective"):
        resolve(DECODE, V6E_TP8, Kernels(async_collectives=("broadcast",)))
    with pytest.raises(WorkbenchError, match="no catalog peak"):
        resolve(DECODE, Deployment("A100", 1, "tp", precision="fp8"), Kernels())
    s = resolve(DECODE, Deployment("TPU v6e", 8, "tp", kv_precision="fp8"), Kernels())
    assert (s.lay.tp, s.tokens, s.nb, s.kvb) == (8, 8, 2.0, 1.0)


def test_fit_counts_every_sequences_whole_cache_per_chip():
    s = resolve(DECODE, V6E_TP8, Kernels())
    per_token = kv_bytes_per_token(get_config("llama3-8b"), 2.0)
    assert kv_cache_bytes_per_chip(s) == pytest.approx(64 * 16385 * per_token / 8)
    fit = fit_memory(s)
    assert (
        fit.remat is None
        and fit.fits
        and set(fit.memory.breakdown_gb) == {"weights", "kv_cache", "activations"}
    )
    train = fit_memory(resolve(Workload("llama3-8b", "train", 1, 4096), Deployment("H100", 8), Kernels()))
    assert train.remat is not None and train.fits


def test_step_time_of_decode_grows_with_the_context_through_the_attention_kernel():
    t = {}
    for ctx in (1024, 8192):
        s = resolve(Workload("llama3-8b", "decode", batch=8, seq=ctx), V6E_TP8, Kernels())
        work = step_work(s)
        attn = next(op for op in work.ops if op.name == "attention")
        assert attn.bytes >= kv_cache_bytes_per_chip(s) * 0.99  # the whole cache is read
        t[ctx] = time_step(s, work, fit_memory(s)).compute["forward"]
    assert t[8192] > 2 * t[1024]


def test_record_of_the_stages_is_the_record_of_project():
    s = resolve(DECODE, V6E_TP8, Kernels())
    work, fit = step_work(s), fit_memory(s)
    rec = build_record(s, work, fit, time_step(s, work, fit))
    same = project("TPU v6e", "llama3-8b", "decode", 8, "tp", batch=8, seq=16384)
    assert rec.step_median_s == pytest.approx(same.step_median_s) and rec.cost == same.cost
    kept = project_spec(
        Workload("llama3-8b", "decode", batch=8, seq=32768), V6E_TP8, require_fit=False
    )  # a published run: throughput kept, never a price
    assert kept.tokens_per_s_per_chip > 0 and kept.cost == [] and kept.extra["infeasible"]
