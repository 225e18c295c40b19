"""``tpu-bench demo``: the whole chain, headless — migrate → run on "tpu" and "cpu" → benchmark → project → report.

1. Copy the bundled sample projects (``examples/``) into ``OUT/migrated/`` and migrate the copy with
   tpu-migrate (``examples/`` is never modified); keep the diff and the markdown report.
2. Run each runnable migrated sample for a few steps on ``"cpu"`` and on ``"tpu"`` (child processes, each
   step's loss printed as it arrives) and check the loss curves agree: ``|tpu - cpu| <= ATOL + rtol·|cpu|``
   at every step (rtol 1e-3 for fp32 samples; 2e-2 for the notebook, whose autocast runs bf16 on the
   accelerator only).
3. Benchmark the ``tiny`` decoder (train; decode in the full demo; ``torch.compile(backend="tpu")`` too) on
   every device present, with a short time budget; records go to ``OUT/measured.jsonl``.
4. Project a realistic model to the catalog chips (roofline + communication model), compare the model with
   the published points, and draw the figures.
5. Write ``OUT/README.md`` (summary with every table and each number's provenance) and the PNGs; print its
   path. Exit status 1 if a check failed (migration error, a run failing, losses disagreeing, a benchmark
   failing), 0 otherwise.

    tpu-bench demo                      # full demo (~3 min on a 2-core CPU)
    tpu-bench demo -- --quick --out /tmp/r   # reduced: one sample, train only (tests use this)
    python -m tpu_workbench.bench.demo --help
"""

from __future__ import annotations

import shutil
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from tpu_workbench.bench import analysis, plots, tables
from tpu_workbench.bench import demo_chain as chain
from tpu_workbench.bench.catalog import load_catalog
from tpu_workbench.bench.compare import compare_table
from tpu_workbench.bench.demo_options import build_parser
from tpu_workbench.bench.demo_verdict import kinds_legend, verdict_table
from tpu_workbench.bench.devices import present_devices
from tpu_workbench.bench.paths import examples_dir
from tpu_workbench.bench.projection import (
    MODEL_VERSION,
    format_vs_published,
    project,
    projection_vs_published,
)
from tpu_workbench.bench.projection import serving_views as sv
from tpu_workbench.bench.results import append_records, load_results, variant_label
from tpu_workbench.bench.run import run_benchmark, run_matrix
from tpu_workbench.bench.serving_answers import cost_answer, serving_verdict
from tpu_workbench.migrate import markdown_report

PROJECT_CHIPS_FIG = ("TPU v7", "TPU v6e", "H100 SXM", "H200", "B200")
PROJECT_WORKLOAD = "llama3-8b"
SCALING_COUNTS = (1, 8, 64, 512, 1024, 2048, 4096, 8192)
BENCH_BATCH, BENCH_SEQ = 4, 64


@dataclass(frozen=True)
class Settings:
    """What the demo runs, resolved from the command line (``--quick`` fills in its reduced values)."""

    out: Path
    quick: bool = False
    steps: int = 5
    budget_s: float = 1.0
    samples: tuple[str, ...] | None = None
    examples: Path | None = None
    skip: frozenset[str] = frozenset()

    @property
    def phases(self) -> tuple[str, ...]:
        return ("train",) if self.quick else ("train", "decode")


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


@dataclass
class Report:
    out: Path
    started: float = field(default_factory=time.perf_counter)
    checks: list[Check] = field(default_factory=list)
    sections: list[str] = field(default_factory=list)
    step_times: list[tuple[str, float]] = field(default_factory=list)
    verdict: list[str] = field(default_factory=list)  # the first screen: answer table and one figure

    def check(self, name: str, ok: bool, detail: str) -> None:
        self.checks.append(Check(name, ok, detail))
        say(f"    {'PASS' if ok else 'FAIL'}  {name}: {detail}")

    def add(self, text: str) -> None:
        self.sections.append(text)

    def figure(self, fig, name: str, caption: str, *, first: bool = False) -> None:
        """Save a figure; ``first``: it goes on the report's first screen (the verdict), not the details."""
        path = self.out / name
        fig.savefig(path)
        (self.verdict if first else self.sections).append(f"![{caption}]({name})\n\n*{caption}*\n")


def say(text: str) -> None:
    print(text, flush=True)


# --------------------------------------------------------------------------------------------------- steps


def step_migrate(rep: Report, *, examples: Path | None, samples: Sequence[str] | None) -> Path | None:
    """Copy and migrate the samples; returns the folder of the migrated copy (None if migration failed)."""
    work = rep.out / "migrated"
    if work.exists():
        shutil.rmtree(work)
    mig = chain.migrate_examples(work, source=examples, names=list(samples) if samples else None)
    if mig.run is None:
        rep.check("migrate samples", False, mig.error)
        rep.add(f"## 1. Migration\n\n**FAILED**: `{mig.error}`\n")
        return None
    run = mig.run
    counts = chain.outcome_counts(run, work)
    diags = chain.diagnostics_frame(run, work)
    (rep.out / "migration-report.md").write_text(markdown_report(run), encoding="utf-8")
    (rep.out / "migration.diff").write_text("".join(f.diff for f in run.files), encoding="utf-8")
    bad = [f.path for f in run.files if f.status == "unparsable"]
    rep.check(
        "migrate samples",
        mig.ok,
        f"{len(run.files)} files, {len(diags)} findings, converted {run.converted_percent:.1f}% "
        f"in {mig.seconds:.1f} s" + (f"; unparsable: {bad}" if bad else ""),
    )
    for r in counts.to_dict("records"):
        say(
            f"      {r['file']:<22} {r['status']:<10} rewritten {r['rewritten']:>2}  warned {r['warned']:>2}  "
            f"flagged {r['flagged']:>2}  converted {r['converted %']:.0f}%"
        )
    flagged = diags[diags["outcome"] == "flagged"]
    rep.add(
        "## 1. Migration (tpu-migrate)\n\n"
        f"The sample projects were copied from `{examples or examples_dir()}` to `migrated/` and "
        f"migrated there (the originals are untouched). Full diff: [migration.diff](migration.diff); "
        f"tpu-migrate's own report: [migration-report.md](migration-report.md).\n\n"
        f"**Converted: {run.converted_percent:.1f}%** of {len(diags)} findings (rewritten + rewritten with a "
        "warning, over all findings).\n\n"
        + tables.markdown(counts)
        + "\nFlagged for a human (each has one `# TODO(tpu-migrate ...)` comment in the code):\n\n"
        + tables.markdown(flagged[["file", "line", "code", "message"]])
    )
    return work


def _progress_printer(name: str, started: float) -> Callable[[str, str], None]:
    """Prints each ``step i loss x`` line of a child run as it arrives, with the time since the start."""

    def on_line(device: str, line: str) -> None:
        losses = chain.LOSS_LINE.findall(line)
        if losses:
            step, loss = losses[0]
            say(
                f"      {name:<10} {device:<3} step {step} loss {loss}  ({time.perf_counter() - started:.0f} s)"
            )

    return on_line


def step_losses(rep: Report, work: Path, *, samples: Sequence[str] | None, steps: int) -> None:
    """Run each runnable migrated sample on cpu and tpu and check the losses agree."""
    names = [s.name for s in chain.SAMPLES if s.runnable and (not samples or s.name in samples)]
    platform = chain.tpu_platform()
    say(f'      "tpu" device here: {platform}')
    checks = []
    for name in names:
        say(f"      {name}: starting on cpu and tpu ({steps} steps each)")
        c = chain.check_losses(work, name, steps=steps, on_line=_progress_printer(name, time.perf_counter()))
        checks.append(c)
        detail = (
            f"{len(c.cpu.losses)} steps, max rel diff {c.max_rel_diff:.2e} (tolerance |diff| <= "
            f"{c.atol:g} + {c.rtol:g}*|cpu|; {chain.sample(name).precision_note}); cpu {c.cpu.seconds:.0f} s, "
            f"tpu {c.tpu.seconds:.0f} s"
        )
        rep.check(f"losses agree: {name}", c.ok, detail if c.ok else c.problem())
    not_run = [s for s in chain.SAMPLES if not s.runnable and (not samples or s.name in samples)]
    frame = chain.checks_frame(checks)
    chain.losses_frame(checks).to_csv(rep.out / "losses.csv", index=False)
    rep.add(
        '## 2. Migrated samples on "tpu" and on "cpu"\n\n'
        f"Each runnable migrated sample ran {steps} steps as a child process, once on `cpu` and once on "
        f'`tpu` (its migrated default device). **The "tpu" device here is `{platform}`** — this project\'s '
        "backend executing through JAX"
        + (" on the host CPU, not a TPU" if "XLA:CPU" in platform else "")
        + ". Agreement: `|tpu − cpu| ≤ atol + rtol·|cpu|` at every step, atol "
        f"{chain.ATOL:g}; rtol per row. Per-step losses: [losses.csv](losses.csv).\n\n"
        + tables.markdown(frame.drop(columns=["problem"]) if frame["problem"].eq("").all() else frame)
        + "".join(f"\nNot run: `{s.name}` — {s.why_not_run}.\n" for s in not_run)
    )
    if checks:
        label = f"tpu via {platform.split('via ', 1)[-1].split(' (')[0]}" if "via" in platform else "tpu"
        rep.figure(
            plots.plot_losses(checks, tpu_label=label),
            "losses.png",
            'Loss per step of each migrated sample on cpu (solid) and on the "tpu" device (dashed); '
            "both measured here.",
        )


def step_benchmark(rep: Report, *, budget_s: float, phases: Sequence[str], compiled_tpu: bool) -> list:
    """Measure the tiny decoder on every device present; write measured.jsonl and the bar charts."""
    devices = present_devices()
    out = rep.out / "measured.jsonl"
    say(
        f"      devices present: {', '.join(devices)}; tiny decoder {', '.join(phases)}, batch {BENCH_BATCH} x "
        f"{BENCH_SEQ} tokens, fp32, {budget_s:g} s timing budget each"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = run_matrix(
            ["tiny"],
            phases,
            devices,
            batches=[BENCH_BATCH],
            seqs=[BENCH_SEQ],
            budget_s=budget_s,
            out=str(out),
            progress=False,
            eager_modes=("strict", "fused"),
            on_combo=lambda i, n, name: say(
                f"      [{i}/{n}] {name} ({time.perf_counter() - rep.started:.0f} s elapsed)"
            ),
        )
    records, failures = list(result.records), list(result.failures)
    if "tpu" in devices and compiled_tpu:
        try:
            rec = run_benchmark(
                "tiny", "train", "tpu", compiled=True, batch=BENCH_BATCH, seq=BENCH_SEQ, budget_s=budget_s
            )
            append_records(out, [rec])
            records.append(rec)
        except Exception as exc:  # noqa: BLE001 - reported as a failed check
            failures.append(
                (
                    {"workload": "tiny", "phase": "train", "device": "tpu", "compiled": True},
                    f"{type(exc).__name__}: {exc}"[:300],
                )
            )
    for r in records:
        say(
            f"      {r.phase:>7} {variant_label(r):<13} {r.tokens_per_s:>10,.0f} "
            f"{r.tokens_kind} tokens/s  step {1e3 * r.step_median_s:7.2f} ms  MFU {100 * r.mfu:5.2f}%  "
            f"[{r.platform}]"
        )
    rep.check(
        "benchmark tiny decoder",
        not failures and bool(records),
        f"{len(records)} records on {', '.join(devices)}"
        + "".join(f"; FAILED {c}: {m}" for c, m in failures),
    )
    if not records:
        rep.add("## 3. Benchmark\n\n**No records** — " + "; ".join(m for _, m in failures) + "\n")
        return records
    df = load_results(out)
    table = compare_table(df, baseline="cpu" if "cpu" in devices else None)
    rep.add(
        "## 3. Benchmark on the devices present (measured)\n\n"
        f"`tiny` decoder ({records[0].config.get('n_layers')} layers, d_model {records[0].config.get('d_model')}), "
        f"batch {BENCH_BATCH} × {BENCH_SEQ} tokens, fp32, timing budget {budget_s:g} s per cell (warm-up "
        "excluded, device synchronised, median of timed blocks). MFU is against a **measured host-CPU fp32 "
        'matmul peak** for cpu and for a "tpu" emulated on the CPU (see `peak_basis` in the records). '
        "Records with full provenance: [measured.jsonl](measured.jsonl).\n\n"
        + tables.markdown(table.drop(columns=["peak_basis"]))
        + f"\n{analysis.emulation_note(df)}\n"
        + "".join(f"\n**FAILED** {c}: `{m}`\n" for c, m in failures)
    )
    rep.figure(
        plots.plot_throughput_bars(df),
        "throughput.png",
        "Measured throughput per device; error bars: interquartile range of the timed steps.",
    )
    rep.figure(plots.plot_mfu_bars(df), "mfu.png", "Measured MFU (% of the measured host-CPU matmul peak).")
    return records


def _projection_rows(catalog, workload: str) -> tuple[list, pd.DataFrame]:
    records, rows = [], []
    for chip in catalog.chips():
        if "bf16" not in chip.peak_tflops:
            continue
        for phase, n, layout, batch in (("train", 8, "fsdp", 4), ("decode", 8, "tp", 64)):
            rec = project(chip, workload, phase, n, layout, batch=batch, seq=4096, catalog=catalog)
            records.append(rec)
            rows.append(
                {
                    "chip": chip.name,
                    "phase": phase,
                    "chips": n,
                    "layout": rec.extra["layout"],
                    "batch/chip": batch,
                    "tok/s/chip": rec.tokens_per_s_per_chip,
                    "MFU %": None if rec.mfu is None else 100 * rec.mfu,  # None: does not fit, no rate
                    "bound": "does not fit" if rec.extra.get("infeasible") else rec.extra["bound"],
                    **analysis.cost_cells(rec),
                }
            )
    return records, pd.DataFrame(rows)


def step_project(rep: Report, *, workload: str = PROJECT_WORKLOAD) -> None:
    """Project ``workload`` to every catalog chip, compare with the published points, draw the figures."""
    catalog = load_catalog()
    records, table = _projection_rows(catalog, workload)
    append_records(rep.out / "projected.jsonl", records)
    chips_fig = [c for c in PROJECT_CHIPS_FIG if c in catalog.names()]
    answer = pd.concat(
        [verdict_table([r for r in records if r.phase == "train"]), serving_verdict(chips_fig, workload)]
    )
    rep.verdict.append(
        f"## The answer: cheapest chip per kind of price (projected, `{workload}` bf16, 8 chips)\n\n"
        + tables.markdown(answer)
        + "\nChips are ranked only within one kind of price; training and serving count different tokens. "
        "Training: the roofline + communication model; serving: the serving model (continuous batching, "
        "every decode step reads the whole KV cache, the engine overhead per sequence calibrated per vendor, "
        "priced at the largest concurrency meeting the target; "
        "a chip that does not fit or misses it is not ranked). Catalog's dated prices: verify before "
        "buying.\n\n" + kinds_legend(answer)
    )
    headline = analysis.cheapest_by_price_kind([r for r in records if r.phase == "train"])
    say("      cheapest projected training $ per million tokens, within one kind of price:")
    for line in headline:
        say(f"      {line}")
    vs = projection_vs_published()
    modelled = vs[vs["rel_error"].notna()]
    rep.check(
        "projection ran",
        len(records) > 0 and len(modelled) > 0,
        f"{len(records)} projected records for {len({r.chip for r in records})} chips; "
        f"{len(modelled)} published points compared",
    )
    rep.add(
        f"## 4. Projection to the catalog chips (projected, model workbench-roofline-comm {MODEL_VERSION})\n\n"
        f"`{workload}` (bf16, seq 4096) training on 8 chips (FSDP, 4 sequences per chip) and decoding on 8 "
        "chips (TP, 64 concurrent sequences per chip, context 4096), default assumptions (every input is "
        'stored in [projected.jsonl](projected.jsonl)). Prices are the catalog\'s, with tier and date ("stale": '
        "older than a year, dated only by year, or superseded); verify before use. Each `$/M tok` column "
        "uses one kind of price for every chip; a configuration that does not fit in HBM has no cost.\n\n"
        "Cheapest training $ per million tokens, compared only within one kind of price:\n\n"
        + "".join(f"- {line}\n" for line in headline)
        + "\n"
        + tables.markdown(table)
        + "\n### Projection vs published points\n\nThe model is not fitted to these points; the relative error "
        "shows how far a generic roofline is from tuned systems.\n\n```\n"
        + format_vs_published(vs)
        + "\n```\n"
    )
    costs = sv.cost_table(chips_fig, workload, target=20.0, price_kind=analysis.DEFAULT_PRICE_KIND)
    curves = sv.curve_frame(chips_fig, workload)
    rep.figure(
        sv.plot_serving(curves, costs, target=20.0, published=sv.published_vs_projected()),
        "cost.png",
        f"Serving model (projected): {workload} 1k in / 1k out on 8 chips (TP): output tok/s per chip vs "
        f"per user; $ per million output tokens at 20 tok/s/user ({analysis.DEFAULT_PRICE_KIND}); right: "
        "InferenceX Qwen3.5-397B FP8 $ per million total tokens (published stars) beside the projection.",
        first=True,
    )
    rep.add(
        "### Serving at 20 output tokens/s per user (serving model, projected)\n\n"
        + cost_answer(costs, target=20.0)[0]
        + "\n\n"
        + tables.markdown(costs)
    )
    frame = analysis.frontier_frame(analysis.decode_frontier(chips_fig, workload))
    rep.figure(
        plots.plot_tco(frame, target=20, workload=workload, published=analysis.published_serving()),
        "pareto.png",
        f"Projected decode Pareto fronts and $/M output tokens vs interactivity for "
        f"{workload} on 8 chips (each chip's {analysis.DEFAULT_PRICE_KIND} price); stars: "
        "published InferenceX points (a different, larger model: Qwen3.5-397B FP8).",
    )
    rep.add(
        f"At 20 output tokens/s per user (projected, each chip's {analysis.DEFAULT_PRICE_KIND} price; a chip "
        "without one has no cost):\n\n" + tables.markdown(analysis.at_target(frame, 20))
    )
    frames = [
        analysis.scaling_frame(chips_fig[:3], "llama3-70b", ("dp", "fsdp"), SCALING_COUNTS),
        analysis.scaling_frame(("TPU v7", "B200"), "qwen3-235b-a22b", ("fsdp+ep",), SCALING_COUNTS),
    ]
    pub = analysis.published_scaling()
    rep.figure(
        plots.plot_scaling(frames, pub),
        "scaling.png",
        "Projected weak-scaling efficiency from 1 to 8,192 chips (dashed) with the published TorchTitan "
        "Qwen3-MoE-235B points on TPU v7 (stars).",
    )
    rep.add(
        "Published scaling points vs the projection:\n\n"
        + tables.markdown(pub.drop(columns=["source", "rel error"]))
        + f"\nSource: {pub['source'].iloc[0] if len(pub) else '-'}\n"
    )
    roof = [r for r in records if r.chip in chips_fig[:3]]
    rep.figure(
        plots.plot_roofline([catalog.chip(c) for c in chips_fig[:3]], roof),
        "roofline.png",
        f"Roofline of three catalog chips with the projected {workload} points.",
    )


# --------------------------------------------------------------------------------------------------- main


def settings_from(argv: Sequence[str]) -> Settings:
    args = build_parser().parse_args(list(argv))
    quick_samples = ("cuda_ddp",) if args.quick else None
    return Settings(
        out=Path(args.out).resolve(),
        quick=args.quick,
        steps=args.steps or (3 if args.quick else 5),
        budget_s=args.budget or (0.3 if args.quick else 1.0),
        samples=tuple(args.samples) if args.samples else quick_samples,
        examples=Path(args.examples) if args.examples else None,
        skip=frozenset(args.skip),
    )


@dataclass(frozen=True)
class Stage:
    key: str
    title: str
    check: str
    run: Callable[[], object]


def _stages(rep: Report, s: Settings) -> list[Stage]:
    state: dict[str, Path | None] = {}

    def migrate() -> None:
        state["work"] = step_migrate(rep, examples=s.examples, samples=s.samples)

    def losses() -> None:
        if state.get("work") is None:
            rep.check("losses agree", False, "skipped: migration failed")
            return
        step_losses(rep, state["work"], samples=s.samples, steps=s.steps)

    stages = [
        Stage("migrate", "migrate the sample projects with tpu-migrate", "migrate samples", migrate),
        Stage(
            "losses",
            f"run the migrated samples on cpu and on tpu ({s.steps} steps each)",
            "losses agree",
            losses,
        ),
        Stage(
            "benchmark",
            "benchmark the tiny decoder on the devices present",
            "benchmark tiny decoder",
            lambda: step_benchmark(rep, budget_s=s.budget_s, phases=s.phases, compiled_tpu=not s.quick),
        ),
        Stage(
            "projection",
            "project to the catalog chips and draw the figures",
            "projection ran",
            lambda: step_project(rep),
        ),
    ]
    return [st for st in stages if st.key not in s.skip]


def _clear_old_outputs(out: Path) -> None:
    for old in [*out.glob("*.png"), out / "projected.jsonl", out / "measured.jsonl", out / "losses.csv"]:
        if old.exists():
            old.unlink()


def run_demo(s: Settings) -> int:
    """Run every stage of ``s`` and write the report; 0 when every check passed, else 1."""
    s.out.mkdir(parents=True, exist_ok=True)
    _clear_old_outputs(s.out)
    rep = Report(s.out)
    stages = _stages(rep, s)
    total = len(stages) + 1
    say(f"tpu-bench demo → {s.out}" + (" (quick)" if s.quick else ""))
    for i, stage in enumerate(stages, 1):
        say(f"[{i}/{total}] {stage.title} ({time.perf_counter() - rep.started:.0f} s elapsed)")
        t = time.perf_counter()
        try:
            stage.run()
        except Exception as exc:  # noqa: BLE001 - a broken step is a failed check, not a crash
            rep.check(stage.check, False, f"{type(exc).__name__}: {exc}")
        rep.step_times.append((stage.key, time.perf_counter() - t))
    say(f"[{total}/{total}] write the report ({time.perf_counter() - rep.started:.0f} s elapsed)")
    failed = [c for c in rep.checks if not c.ok]
    wall = time.perf_counter() - rep.started
    checks = pd.DataFrame(
        [{"check": c.name, "result": "PASS" if c.ok else "FAIL", "detail": c.detail} for c in rep.checks]
    )
    head = [
        "# tpu-workbench demo report\n",
        *rep.verdict,
        "## Details\n",
        f"Generated by `tpu-bench demo{' --quick' if s.quick else ''}` on "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} in {wall:.0f} s "
        f"({', '.join(f'{n} {t:.0f} s' for n, t in rep.step_times)}).\n",
        'Provenance: **measured** = run on this host (the "tpu" device is labelled with the platform it '
        "really ran on); **projected** = the roofline + communication model with stated inputs; "
        "**published** = a cited source. Figures: measured solid, projected hatched/dashed, published stars.\n",
        f"## Checks: {'ALL PASSED' if not failed else f'{len(failed)} FAILED'}\n",
        tables.markdown(checks),
    ]
    (s.out / "README.md").write_text("\n".join(head + rep.sections), encoding="utf-8")
    verdict = (
        "all checks passed"
        if not failed
        else f"{len(failed)} check(s) FAILED: " + ", ".join(c.name for c in failed)
    )
    say(f"{verdict} in {wall:.0f} s")
    say(f"report: {s.out / 'README.md'}")
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "--":  # `tpu-bench demo -- --quick`
        argv = argv[1:]
    return run_demo(settings_from(argv))


if __name__ == "__main__":
    sys.exit(main())
