"""A whole validation run: jobs for the chosen architectures (and user models), the compile checks, the
records file and the report.

Phase 1 runs every architecture (forward, backward, tier-2 comparison, ``generate()`` for generative
models). Phase 2 runs one ``torch.compile(backend="tpu")`` forward per family, on the first architecture
(by name) of that family that passed tier 1, unless ``compile="all"`` asked for one in every run (then
phase 1 does it) or ``"none"``.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tpu_workbench.bench.errors import WorkbenchError, unknown
from tpu_workbench.bench.results import Record, append_records, read_records
from tpu_workbench.bench.validate import classify, report, zoo
from tpu_workbench.bench.validate.sweep import Job, JobOutcome, SweepOptions, run_jobs

COMPILE_MODES = ("family", "all", "none")


@dataclass
class ValidationRun:
    records: list[Record] = field(default_factory=list)
    records_path: Path | None = None
    report_path: Path | None = None
    summary: dict = field(default_factory=dict)
    wall_s: float = 0.0


def _jobs(
    archs: list[zoo.Architecture],
    user_models: list[str],
    generate: bool,
    compile_all: bool,
    harness_only: bool = False,
) -> list[Job]:
    jobs = [
        Job(
            a.model_type,
            model_type=a.model_type,
            check_generate=generate,
            check_compile=compile_all,
            harness_only=harness_only,
        )
        for a in archs
    ]
    jobs += [
        Job(spec, user_model=spec, check_generate=False, check_compile=compile_all) for spec in user_models
    ]
    return jobs


def run_validation(
    arch_patterns: list[str] | None = None,
    *,
    user_models: list[str] | None = None,
    options: SweepOptions | None = None,
    generate: bool = True,
    compile: str = "family",
    progress: bool = True,
    include_zoo: bool | None = None,
    resume: bool = False,
    order: str = "name",
    harness_only: bool = False,
) -> ValidationRun:
    """Validate the selected architectures (all when ``arch_patterns`` is empty and no user model is given)
    and write ``records.jsonl`` and ``report.md`` under ``options.out``.

    ``resume`` keeps the records already in ``records.jsonl`` and runs only the architectures without one
    (and those that were harness failures, since the harness may have learnt them since). ``order`` is
    ``"name"`` or ``"interleave"`` (round-robin over families, so a partial sweep covers every family).
    ``harness_only`` only builds each architecture and runs the CPU reference (no device, no checks).
    """
    options = options or SweepOptions()
    if compile not in COMPILE_MODES:
        raise WorkbenchError(unknown("compile mode", compile, COMPILE_MODES))
    user_models = list(user_models or [])
    if include_zoo is None:
        include_zoo = bool(arch_patterns) or not user_models
    archs = zoo.select(arch_patterns) if include_zoo else []
    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    records_path = out / "records.jsonl"
    by_name: dict[str, Record] = {}
    if resume and records_path.exists():
        kept = [
            r for r in read_records(records_path) if r.phase == report.PHASE and r.extra.get("harness_ok")
        ]
        by_name = {str(r.config.get("model_type")): r for r in kept}
        archs = [a for a in archs if a.model_type not in by_name]
    if records_path.exists():
        records_path.unlink()
    if by_name:
        append_records(records_path, list(by_name.values()))
    if order == "interleave":
        archs = interleave(archs)
    source = report.measured_source(options.device)
    opts = {
        "jobs": options.jobs,
        "timeout_s": options.timeout,
        "generate": generate and not harness_only,
        "compile": "none" if harness_only else compile,
        "device": "none (harness only)" if harness_only else options.device,
    }
    started = time.monotonic()
    bar = _bar(len(archs) + len(user_models), progress)

    def done(outcome: JobOutcome) -> None:
        rec = report.record_for(outcome.result, source, outcome.wall_s, opts, outcome.log)
        by_name[outcome.job.name] = rec
        append_records(records_path, rec)
        if bar is not None:
            bar.set_postfix_str(f"{outcome.job.name}: {rec.extra['status']}", refresh=False)
            bar.update(1)

    run_jobs(_jobs(archs, user_models, generate, compile == "all", harness_only), options, on_done=done)
    if bar is not None:
        bar.close()
    if compile == "family" and not harness_only:
        _compile_phase(by_name, options, progress)
    records = [by_name[j] for j in sorted(by_name)]
    wall = time.monotonic() - started
    summary = report.summary_record(records, source, wall, opts)
    records_path.unlink()
    append_records(records_path, records + [summary])  # final file: one line per architecture + the summary
    report_path = report.write_report(records + [summary], out / "report.md")
    return ValidationRun(records + [summary], records_path, report_path, summary.extra, wall)


def interleave(archs: list[zoo.Architecture]) -> list[zoo.Architecture]:
    """Round-robin over families (each in name order), so the first N runs cover every family."""
    groups: dict[str, list[zoo.Architecture]] = {}
    for a in archs:
        groups.setdefault(a.family, []).append(a)
    out: list[zoo.Architecture] = []
    while any(groups.values()):
        for family in sorted(groups):
            if groups[family]:
                out.append(groups[family].pop(0))
    return out


def _compile_phase(by_name: dict[str, Record], options: SweepOptions, progress: bool) -> None:
    """One compiled forward per family, on the first architecture of the family that passed tier 1."""
    known = {a.model_type for a in zoo.architectures()}
    checked = {rec.extra.get("family") for rec in by_name.values() if rec.extra.get("compile")}
    chosen: dict[str, str] = {}
    for name in sorted(by_name):
        rec = by_name[name]
        family = rec.extra.get("family") or "unknown"
        if rec.extra.get("tier1") and family not in chosen and family not in checked:
            chosen[family] = name
    if not chosen:
        return
    jobs = [
        Job(
            name,
            model_type=name if name in known else None,
            user_model=None if name in known else name,
            check_generate=False,
            check_compile=True,
            phase="compile",
        )
        for name in chosen.values()
    ]
    bar = _bar(len(jobs), progress, "compile")

    def done(outcome: JobOutcome) -> None:
        rec = by_name[outcome.job.name]
        check = outcome.result.get("compile")
        if check is None:
            check = {
                "status": "fail",
                "error_type": outcome.result.get("error_type", "error"),
                "error": outcome.result.get("error", "the compile run did not reach the compile stage"),
            }
        rec.extra["compile"] = report._strip(check)

        rec.extra["compile_class"] = classify.check_class(check)
        rec.extra["compile_representative_of"] = rec.extra.get("family")
        if bar is not None:
            bar.update(1)

    run_jobs(jobs, options, on_done=done)
    if bar is not None:
        bar.close()


def _bar(total: int, progress: bool, desc: str = "validate"):
    if not progress or total == 0:
        return None
    from tqdm.auto import tqdm  # lazy: startup

    return tqdm(total=total, desc=desc, unit="arch", file=sys.stderr, dynamic_ncols=True)


def merge_runs(
    paths: list[str | Path], out: str | Path, title: str = "Model-zoo validation"
) -> ValidationRun:
    """One report from several runs' records (e.g. a harness-only pass over every architecture and device
    runs over part of them): per architecture the later run wins, except that a harness-only success never
    replaces a device result (see :func:`report.merge`). The summary says which runs were merged."""

    sets = []
    for p in paths:
        p = Path(p)
        sets.append(read_records(p / "records.jsonl" if p.is_dir() else p))
    records = report.merge(*sets)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    summaries = [r for s in sets for r in s if r.phase == report.SUMMARY_PHASE]
    source = dict((summaries[-1] if summaries else records[-1]).source)
    source["merged_from"] = [str(p) for p in paths]
    source["git_revisions"] = sorted({str(r.source.get("git_revision")) for r in records})
    wall = sum(float(s.extra.get("sweep_wall_s") or 0) for s in summaries)
    summary = report.summary_record(records, source, wall, {"merged runs": len(paths)})
    path = out / "records.jsonl"
    if path.exists():
        path.unlink()
    append_records(path, records + [summary])
    report_path = report.write_report(records + [summary], out / "report.md", title)
    return ValidationRun(records + [summary], path, report_path, summary.extra, wall)


def listing() -> list[dict]:
    """Every architecture with the class that would be validated and its family (for ``--list``)."""
    return [
        {
            "model_type": a.model_type,
            "class": a.candidates[0].class_name if a.candidates else None,
            "family": a.family,
            "config_class": a.config_class,
        }
        for a in zoo.architectures()
    ]


def dump(run: ValidationRun) -> str:
    return json.dumps({k: v for k, v in asdict(run).items() if k in ("summary", "wall_s")}, default=str)
