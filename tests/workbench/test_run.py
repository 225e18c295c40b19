import pytest
import torch

from tpu_workbench.bench.devices import present_devices, tpu_present
from tpu_workbench.bench.errors import WorkbenchError
from tpu_workbench.bench.results import Record
from tpu_workbench.bench.run import benchmark_callable, run_benchmark, run_matrix


def test_cpu_train_record_is_complete():
    r = run_benchmark("tiny", "train", "cpu", batch=2, seq=16, budget_s=0.2)
    assert r.provenance == "measured" and r.device == "cpu" and r.chip is None
    assert r.tokens_per_s == pytest.approx(2 * 16 / r.step_median_s)
    assert r.step_samples_s and r.first_call_s > 0 and r.tokens_kind == "total"
    assert r.peak_basis.startswith("measured host-CPU matmul peak")
    assert r.mfu == pytest.approx(r.flops_per_token * r.tokens_per_s / (r.peak_tflops * 1e12))
    src = r.source
    assert src["git_revision"] and src["versions"]["torch"] == torch.__version__ and src["date"]
    assert src["host"]["hostname"] and "host CPU" in src["platform"]
    assert Record.from_dict(r.to_dict()) == r


def test_decode_reports_output_tokens_and_bandwidth_utilisation():
    r = run_benchmark("tiny", "decode", "cpu", batch=2, seq=16, budget_s=0.1)
    assert r.tokens_kind == "output" and r.output_tokens_per_s == pytest.approx(r.tokens_per_s)
    assert r.tokens_per_s_per_user == pytest.approx(1 / r.step_median_s)
    assert 0 < r.mbu and "copy bandwidth" in r.bandwidth_basis


def test_bad_names_are_clear_errors():
    with pytest.raises(WorkbenchError, match="tiny"):
        run_benchmark("gpt5", "train", "cpu", batch=1, seq=8)
    with pytest.raises(WorkbenchError, match="present: cpu"):
        run_benchmark("tiny", "train", "npu", batch=1, seq=8)
    with pytest.raises(WorkbenchError, match="decode"):
        run_benchmark("tiny", "infer", "cpu", batch=1, seq=8)
    with pytest.raises(WorkbenchError, match="measured host-CPU"):
        run_benchmark("tiny", "train", "cpu", batch=1, seq=8, chip="H100")


def test_benchmark_callable_counts_flops_of_user_step():
    a = torch.randn(64, 64)
    r = benchmark_callable(lambda: a @ a, tokens_per_call=64, name="matmul", budget_s=0.1)
    assert r.flops_per_token == pytest.approx(2 * 64**3 / 64)
    assert r.flop_convention == "flop_counter" and r.workload == "matmul"


def test_run_matrix_appends_each_record(tmp_path):
    out = tmp_path / "m.jsonl"
    res = run_matrix(
        ["tiny", "small-cnn"],
        ["prefill", "infer"],
        ["cpu"],
        batches=[1],
        seqs=[8],
        budget_s=0.05,
        out=str(out),
        progress=False,
    )
    assert not res.failures
    assert {(r.workload, r.phase) for r in res.records} == {("tiny", "prefill"), ("small-cnn", "infer")}
    assert len(out.read_text().splitlines()) == 2


def test_present_devices_always_has_cpu():
    assert present_devices()[0] == "cpu"


@pytest.mark.slow
@pytest.mark.skipif(not tpu_present(), reason="the 'tpu' device is not registered here")
def test_tpu_prefill_is_labelled_with_its_real_platform():
    r = run_benchmark("tiny", "prefill", "tpu", batch=1, seq=8, budget_s=0.2)
    assert r.device == "tpu"
    if "XLA:TPU" not in r.platform:
        assert "via XLA:" in r.platform and r.chip is None
        assert r.peak_basis.startswith("measured host-CPU")


@pytest.mark.slow
@pytest.mark.skipif(not tpu_present(), reason="the 'tpu' device is not registered here")
def test_cli_tpu_train_eager_and_compiled_writes_records(tmp_path):
    from tpu_workbench.bench.cli import main
    from tpu_workbench.bench.results import read_records

    out = tmp_path / "tpu.jsonl"
    rc = main(
        [
            "run",
            "-w",
            "tiny",
            "-p",
            "train",
            "-d",
            "tpu",
            "-b",
            "1",
            "-s",
            "8",
            "--compiled",
            "both",
            "--budget",
            "0.2",
            "-o",
            str(out),
            "--no-progress",
        ]
    )
    recs = read_records(out)
    assert rc == 0 and [r.compiled for r in recs] == [False, True]
    assert all("via XLA" in r.platform or "XLA:TPU" in r.platform for r in recs)
    assert recs[1].compile_s is not None and recs[0].compile_s is None


@pytest.mark.slow
@pytest.mark.skipif(not tpu_present(), reason="needs the tpu device")
def test_eager_modes_side_by_side_are_labelled_records():
    from tpu_workbench.bench.analysis import load_frames
    from tpu_workbench.bench.compare import compare_table
    from tpu_workbench.bench.results import variant_label

    result = run_matrix(
        ["tiny"],
        ["train"],
        ["cpu", "tpu"],
        batches=[2],
        seqs=[16],
        budget_s=0.2,
        progress=False,
        eager_modes=("strict", "fused"),
    )
    assert not result.failures
    by_label = {variant_label(r): r for r in result.records}
    assert set(by_label) == {"cpu", "tpu", "tpu+fused"}
    assert by_label["cpu"].eager_mode is None and by_label["tpu"].eager_mode == "strict"
    fused = by_label["tpu+fused"]
    assert fused.eager_mode == "fused" and "materialisation point" in fused.extra["fused_eager"]
    assert Record.from_dict(fused.to_dict()) == fused
    table = compare_table(load_frames(result.records))
    assert set(table["variant"]) == {"cpu", "tpu", "tpu+fused"}


def test_eager_mode_choices_are_checked():
    with pytest.raises(WorkbenchError, match="valid choices: fused, strict"):
        run_benchmark("tiny", "train", "cpu", batch=1, seq=8, eager="lazy")
    with pytest.raises(WorkbenchError, match="uncompiled runs on 'tpu' only"):
        run_benchmark("tiny", "train", "cpu", batch=1, seq=8, eager="fused")
    with pytest.raises(WorkbenchError, match="valid choices: fused, strict"):
        run_matrix(["tiny"], ["train"], ["cpu"], eager_modes=("deferred",))
