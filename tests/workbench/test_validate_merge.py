"""Merging validation runs: which record of an architecture stands."""

from __future__ import annotations

from tpu_workbench.bench.results import Record
from tpu_workbench.bench.validate import report


def _rec(arch: str, status: str) -> Record:
    return Record(
        provenance="measured",
        workload=arch,
        phase=report.PHASE,
        device="tpu",
        config={"model_type": arch},
        extra={"status": status},
        source={"kind": "measured", "host": "test"},
    )


def test_a_harness_only_success_keeps_the_device_result_but_a_later_build_failure_replaces_it() -> None:
    early = [_rec("a", "pass"), _rec("b", "pass"), _rec("c", "harness")]
    later = [_rec("a", "built"), _rec("b", "harness"), _rec("c", "pass")]
    merged = {r.config["model_type"]: r.extra["status"] for r in report.merge(early, later)}
    # a: only built again, no device run: the device result stands. b: today's harness cannot build it,
    # so the old device result is of a configuration it no longer makes. c: later device result.
    assert merged == {"a": "pass", "b": "harness", "c": "pass"}
