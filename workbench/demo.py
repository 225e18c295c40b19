"""``tpu-bench demo``: the whole chain, headless — migrate → run on "tpu" and "cpu" → benchmark → project → report.

1. Copy the bundled sample projects (``examples/``) into ``OUT/migrated/`` and migrate the copy with
   tpu-migrate (``examples/`` is never modified); keep the diff and the markdown report.
2. Run each runnable migrated sample for a few steps on ``"cpu"`` and on ``"tpu"`` (child processes) and
   check the loss curves agree: ``|tpu - cpu| <= ATOL + rtol·|cpu|`` at every step (rtol 1e-3 for fp32
   samples; 2e-2 for the notebook, whose autocast runs bf16 on the accelerator only).
3. Benchmark the ``tiny`` decoder (train; decode in the full demo; ``torch.compile(backend="tpu")`` too) on
   every device present, with a short time budget; records go to ``OUT/measured.jsonl``.
4. Project a realistic model to the catalog chips (roofline + communication model), compare the model with
   the published points, and draw the figures.
5. Write ``OUT/README.md`` (summary with every table and each number's provenance) and the PNGs; print its
   path. Exit status 1 if a check failed (migration error, a run failing, losses disagreeing, a benchmark
   failing), 0 otherwise.

    tpu-bench demo                      # full demo (~3 min on a 2-core CPU)
    tpu-bench demo -- --quick --out /tmp/r   # reduced: one sample, train only (tests use this)
    python -m workbench.demo --help
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from workbench import demo_chain as chain

DEFAULT_OUT = "demo-report"
PROJECT_CHIPS_FIG = ("TPU v7", "TPU v6e", "H100 SXM", "H200", "B200")
PROJECT_WORKLOAD = "llama3-8b"


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
    figures: list[tuple[str, str]] = field(default_factory=list)
    step_times: list[tuple[str, float]] = field(default_factory=list)

    def check(self, name: str, ok: bool, detail: str) -> None:
        self.checks.append(Check(name, ok, detail))
        print(f"    {'PASS' if ok else 'FAIL'}  {name}: {detail}", flush=True)

    def add(self, text: str) -> None:
        self.sections.append(text)

    def figure(self, path: Path, caption: str) -> None:
        self.figures.append((path.name, caption))
        self.add(f"![{caption}]({path.name})\n\n*{caption}*\n")


def md_table(df, digits: int = 3) -> str:
    """A pandas frame as a GitHub markdown table (no tabulate dependency)."""
    if df is None or len(df) == 0:
        return "_(none)_\n"

    def cell(v) -> str:
        if isinstance(v, float):
            if math.isnan(v):
                return "-"
            if v != 0 and (abs(v) >= 1e6 or abs(v) < 1e-3):
                return f"{v:.{digits}g}"
            return f"{v:,.{digits}g}" if abs(v) < 1000 else f"{v:,.0f}"
        return str(v).replace("|", "\\|").replace("\n", " ")

    cols = list(df.columns)
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(cell(v) for v in row) + " |")
    return "\n".join(lines) + "\n"


def _step(rep: Report, n: int, total: int, title: str) -> float:
    print(f"[{n}/{total}] {title} ({time.perf_counter() - rep.started:.0f} s elapsed)", flush=True)
    return time.perf_counter()


# --------------------------------------------------------------------------------------------------- steps

def step_migrate(rep: Report, args) -> Path | None:
    work = rep.out / "migrated"
    if work.exists():
        shutil.rmtree(work)
    names = args.samples
    mig = chain.migrate_examples(work, source=args.examples, names=names)
    if mig.run is None:
        rep.check("migrate samples", False, mig.error)
        rep.add(f"## 1. Migration\n\n**FAILED**: `{mig.error}`\n")
        return None
    run = mig.run
    counts = chain.outcome_counts(run, work)
    diags = chain.diagnostics_frame(run, work)
    (rep.out / "migration-report.md").write_text(run.report_markdown(), encoding="utf-8")
    (rep.out / "migration.diff").write_text("".join(f.diff for f in run.files), encoding="utf-8")
    bad = [f.path for f in run.files if f.status == "unparsable"]
    rep.check("migrate samples", mig.ok,
              f"{len(run.files)} files, {len(diags)} findings, converted {run.converted_percent:.1f}% "
              f"in {mig.seconds:.1f} s" + (f"; unparsable: {bad}" if bad else ""))
    for r in counts.to_dict("records"):
        print(f"      {r['file']:<22} {r['status']:<10} rewritten {r['rewritten']:>2}  warned {r['warned']:>2}  "
              f"flagged {r['flagged']:>2}  converted {r['converted %']:.0f}%", flush=True)
    flagged = diags[diags["outcome"] == "flagged"]
    rep.add("## 1. Migration (tpu-migrate)\n\n"
            f"The sample projects were copied from `{args.examples or chain.examples_dir()}` to `migrated/` and "
            f"migrated there (the originals are untouched). Full diff: [migration.diff](migration.diff); "
            f"tpu-migrate's own report: [migration-report.md](migration-report.md).\n\n"
            f"**Converted: {run.converted_percent:.1f}%** of {len(diags)} findings (rewritten + rewritten with a "
            "warning, over all findings).\n\n" + md_table(counts) +
            "\nFlagged for a human (each has one `# TODO(tpu-migrate ...)` comment in the code):\n\n" +
            md_table(flagged[["file", "line", "code", "message"]]))
    return work


def step_losses(rep: Report, args, work: Path) -> None:
    names = [s.name for s in chain.SAMPLES if s.runnable and (not args.samples or s.name in args.samples)]
    platform = chain.tpu_platform()
    print(f"      \"tpu\" device here: {platform}", flush=True)
    checks = []
    for name in names:
        c = chain.check_losses(work, name, steps=args.steps)
        checks.append(c)
        detail = (f"{len(c.cpu.losses)} steps, max rel diff {c.max_rel_diff:.2e} (tolerance |diff| <= "
                  f"{c.atol:g} + {c.rtol:g}*|cpu|; {chain.sample(name).precision_note}); cpu {c.cpu.seconds:.0f} s, "
                  f"tpu {c.tpu.seconds:.0f} s")
        rep.check(f"losses agree: {name}", c.ok, detail if c.ok else c.problem())
    not_run = [s for s in chain.SAMPLES if not s.runnable and (not args.samples or s.name in args.samples)]
    frame = chain.checks_frame(checks)
    chain.losses_frame(checks).to_csv(rep.out / "losses.csv", index=False)
    rep.add("## 2. Migrated samples on \"tpu\" and on \"cpu\"\n\n"
            f"Each runnable migrated sample ran {args.steps} steps as a child process, once on `cpu` and once on "
            f"`tpu` (its migrated default device). **The \"tpu\" device here is `{platform}`** — this project's "
            "backend executing through JAX"
            + (" on the host CPU, not a TPU" if "XLA:CPU" in platform else "") +
            ". Agreement: `|tpu − cpu| ≤ atol + rtol·|cpu|` at every step, atol "
            f"{chain.ATOL:g}; rtol per row. Per-step losses: [losses.csv](losses.csv).\n\n" +
            md_table(frame.drop(columns=["problem"]) if frame["problem"].eq("").all() else frame) +
            "".join(f"\nNot run: `{s.name}` — {s.why_not_run}.\n" for s in not_run))
    if checks:
        path = rep.out / "losses.png"
        chain.plot_losses(checks, tpu_label=f"tpu via {platform.split('via ', 1)[-1].split(' (')[0]}"
                          if "via" in platform else "tpu", path=path)
        rep.figure(path, "Loss per step of each migrated sample on cpu (solid) and on the \"tpu\" device (dashed); "
                         "both measured here.")


def step_benchmark(rep: Report, args) -> list:
    import warnings

    from workbench.compare import compare_table
    from workbench.devices import present_devices
    from workbench.plots import plot_mfu_bars, plot_throughput_bars
    from workbench.results import load_results
    from workbench.run import run_benchmark, run_matrix

    devices = present_devices()
    phases = ["train"] if args.quick else ["train", "decode"]
    out = rep.out / "measured.jsonl"
    if out.exists():
        out.unlink()
    print(f"      devices present: {', '.join(devices)}; tiny decoder {', '.join(phases)}, batch 4 x 64 tokens, "
          f"fp32, {args.budget:g} s timing budget each", flush=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = run_matrix(["tiny"], phases, devices, batches=[4], seqs=[64], budget_s=args.budget, out=str(out),
                            progress=False)
    records, failures = list(result.records), list(result.failures)
    if "tpu" in devices and not args.quick:
        try:
            rec = run_benchmark("tiny", "train", "tpu", compiled=True, batch=4, seq=64, budget_s=args.budget)
            from workbench.results import append_records

            append_records(out, [rec])
            records.append(rec)
        except Exception as exc:  # noqa: BLE001 - reported as a failed check
            failures.append(({"workload": "tiny", "phase": "train", "device": "tpu", "compiled": True},
                             f"{type(exc).__name__}: {exc}"[:300]))
    for r in records:
        print(f"      {r.phase:>7} {r.device + ('+compiled' if r.compiled else ''):<13} {r.tokens_per_s:>10,.0f} "
              f"{r.tokens_kind} tokens/s  step {1e3 * r.step_median_s:7.2f} ms  MFU {100 * r.mfu:5.2f}%  "
              f"[{r.platform}]", flush=True)
    rep.check("benchmark tiny decoder", not failures and bool(records),
              f"{len(records)} records on {', '.join(devices)}" +
              "".join(f"; FAILED {c}: {m}" for c, m in failures))
    if not records:
        rep.add("## 3. Benchmark\n\n**No records** — " + "; ".join(m for _, m in failures) + "\n")
        return records
    df = load_results(out)
    table = compare_table(df, baseline="cpu" if "cpu" in devices else None)
    from workbench.demo_views import emulation_note

    rep.add("## 3. Benchmark on the devices present (measured)\n\n"
            f"`tiny` decoder ({records[0].config.get('n_layers')} layers, d_model {records[0].config.get('d_model')}), "
            f"batch 4 × 64 tokens, fp32, timing budget {args.budget:g} s per cell (warm-up excluded, device "
            "synchronised, median of timed blocks). MFU is against a **measured host-CPU fp32 matmul peak** for "
            "cpu and for a \"tpu\" emulated on the CPU (see `peak_basis` in the records). Records with full "
            "provenance: [measured.jsonl](measured.jsonl).\n\n" + md_table(table.drop(columns=["peak_basis"])) +
            f"\n{emulation_note(df)}\n" +
            "".join(f"\n**FAILED** {c}: `{m}`\n" for c, m in failures))
    for fn, name, cap in ((plot_throughput_bars, "throughput.png", "Measured throughput per device (tokens/s)."),
                          (plot_mfu_bars, "mfu.png", "Measured MFU (% of the measured host-CPU matmul peak).")):
        fn(df, path=rep.out / name)
        rep.figure(rep.out / name, cap)
    import matplotlib.pyplot as plt

    plt.close("all")
    return records


def step_project(rep: Report, args) -> None:
    import matplotlib.pyplot as plt
    import pandas as pd

    from workbench import demo_views as views
    from workbench.catalog import load_catalog
    from workbench.plots import plot_roofline
    from workbench.projection import MODEL_VERSION, format_vs_published, project, projection_vs_published
    from workbench.results import append_records

    catalog = load_catalog()
    wl = PROJECT_WORKLOAD
    rows, records = [], []
    for chip in catalog.chips():
        if "bf16" not in chip.peak_tflops:
            continue
        for phase, n, layout, batch in (("train", 8, "fsdp", 4), ("decode", 8, "tp", 64)):
            rec = project(chip, wl, phase, n, layout, batch=batch, seq=4096, catalog=catalog)
            records.append(rec)
            cheapest = min(rec.cost, key=lambda c: c["usd_per_mtok"]) if rec.cost else None
            rows.append({"chip": chip.name, "phase": phase, "chips": n, "layout": rec.extra["layout"],
                         "batch/chip": batch, "tok/s/chip": rec.tokens_per_s_per_chip, "MFU %": 100 * rec.mfu,
                         "bound": rec.extra["bound"], "fits HBM": rec.extra["fits_in_hbm"],
                         "$/M tok (cheapest tier)": cheapest["usd_per_mtok"] if cheapest else float("nan"),
                         "tier (price date)": f"{cheapest['tier']} ${cheapest['usd_per_chip_hour']:g} "
                                              f"({cheapest['price_date']})" if cheapest else "no price in catalog"})
    append_records(rep.out / "projected.jsonl", records)
    table = pd.DataFrame(rows)
    best = table[table["phase"] == "train"].sort_values("$/M tok (cheapest tier)").head(3)
    print("      cheapest training $/M tokens (projected, cheapest listed tier): " +
          ", ".join(f"{r['chip']} {r['$/M tok (cheapest tier)']:.3f}" for r in best.to_dict("records")), flush=True)
    vs = projection_vs_published()
    modelled = vs[vs["rel_error"].notna()]
    rep.check("projection ran", len(records) > 0 and len(modelled) > 0,
              f"{len(records)} projected records for {len({r.chip for r in records})} chips; "
              f"{len(modelled)} published points compared")
    rep.add(f"## 4. Projection to the catalog chips (projected, model workbench-roofline-comm {MODEL_VERSION})\n\n"
            f"`{wl}` (bf16, seq 4096) training on 8 chips (FSDP, 4 sequences per chip) and decoding on 8 chips "
            "(TP, 64 concurrent sequences per chip, context 4096), default assumptions (compute efficiency 0.5, "
            "memory 0.8, collectives 0.8, overlap 0.5; every input is stored in "
            "[projected.jsonl](projected.jsonl)). Prices are the catalog's, with tier and date; verify before use.\n\n"
            + md_table(table) +
            "\n### Projection vs published points\n\nThe model is not fitted to these points; the relative error "
            "shows how far a generic roofline is from tuned systems.\n\n```\n" + format_vs_published(vs) + "\n```\n")
    chips_fig = [c for c in PROJECT_CHIPS_FIG if c in catalog.names()]
    # cost per tier (decode, projected)
    dec = [r for r in records if r.phase == "decode" and r.chip in chips_fig and r.cost]
    views.plot_cost_tiers(dec, title_suffix=f" (projected: {wl} decode, b64 per chip, 8 chips, TP)",
                          path=rep.out / "cost.png")
    rep.figure(rep.out / "cost.png", f"Projected $ per million output tokens per price tier, {wl} decode "
                                     "(hatched = projected).")
    frontier = views.decode_frontier(chips_fig, wl)
    frame = views.frontier_frame(frontier)
    views.plot_tco(frame, target=20, workload=wl, published=views.published_serving(), path=rep.out / "pareto.png")
    rep.figure(rep.out / "pareto.png", f"Projected decode Pareto fronts and $/M output tokens vs interactivity for "
                                       f"{wl} on 8 chips (cheapest tier); stars: published InferenceX points "
                                       "(a different, larger model: Qwen3.5-397B FP8).")
    rep.add("At 20 output tokens/s per user (projected, cheapest tier):\n\n" + md_table(views.at_target(frame, 20)))
    counts = (1, 8, 64, 512, 1024, 2048, 4096, 8192)
    frames = [views.scaling_frame(chips_fig[:3], "llama3-70b", ("dp", "fsdp"), counts),
              views.scaling_frame(("TPU v7", "B200"), "qwen3-235b-a22b", ("fsdp+ep",), counts)]
    pub = views.published_scaling()
    views.plot_scaling_efficiency(frames, pub, path=rep.out / "scaling.png")
    rep.figure(rep.out / "scaling.png", "Projected weak-scaling efficiency from 1 to 8,192 chips (dashed) with the "
                                        "published TorchTitan Qwen3-MoE-235B points on TPU v7 (stars).")
    rep.add("Published scaling points vs the projection:\n\n" + md_table(pub.drop(columns=["source", "rel error"])) +
            f"\nSource: {pub['source'].iloc[0] if len(pub) else '-'}\n")
    roof = [r for r in records if r.chip in chips_fig[:3]]
    plot_roofline([catalog.chip(c) for c in chips_fig[:3]], roof, path=rep.out / "roofline.png")
    rep.figure(rep.out / "roofline.png", f"Roofline of three catalog chips with the projected {wl} points.")
    plt.close("all")


# --------------------------------------------------------------------------------------------------- main

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tpu-bench demo", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="The end-to-end demo: migrate the sample projects, run them on \"tpu\" and \"cpu\" and "
                    "check the losses agree, benchmark a small decoder on the devices present, project to the "
                    "catalog chips, and write a report folder (README.md + PNGs).",
        epilog="exit status: 0 all checks passed, 1 a check failed, 2 bad arguments")
    p.add_argument("--out", default=DEFAULT_OUT, help=f"report folder (default ./{DEFAULT_OUT}/)")
    p.add_argument("--quick", action="store_true",
                   help="reduced run for tests: one sample (cuda_ddp), 3 steps, train phase only, 0.3 s budget")
    p.add_argument("--steps", type=int, default=None, help="training steps per migrated sample (default 5)")
    p.add_argument("--budget", type=float, default=None, help="timing budget per benchmark cell in s (default 1)")
    p.add_argument("--samples", nargs="+", default=None, choices=[s.name for s in chain.SAMPLES],
                   help="samples to migrate and run (default: all)")
    p.add_argument("--examples", default=None, help="folder with the sample projects (default: the bundled examples/)")
    p.add_argument("--skip", nargs="+", default=[], choices=["losses", "benchmark", "projection"],
                   help="leave out steps")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "--":  # `tpu-bench demo -- --quick`
        argv = argv[1:]
    args = build_parser().parse_args(argv)
    if args.quick:
        args.samples = args.samples or ["cuda_ddp"]
        args.steps = args.steps or 3
        args.budget = args.budget or 0.3
    args.steps = args.steps or 5
    args.budget = args.budget or 1.0
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    for old in [*out.glob("*.png"), out / "projected.jsonl", out / "measured.jsonl", out / "losses.csv"]:
        if old.exists():
            old.unlink()
    rep = Report(out)
    total = 5
    print(f"tpu-bench demo → {out}" + (" (quick)" if args.quick else ""), flush=True)

    t = _step(rep, 1, total, "migrate the sample projects with tpu-migrate")
    work = step_migrate(rep, args)
    rep.step_times.append(("migrate", time.perf_counter() - t))

    if "losses" not in args.skip:
        t = _step(rep, 2, total, f"run the migrated samples on cpu and on tpu ({args.steps} steps each)")
        if work is None:
            rep.check("losses agree", False, "skipped: migration failed")
        else:
            try:
                step_losses(rep, args, work)
            except Exception as exc:  # noqa: BLE001 - a broken step is a failed check, not a crash
                rep.check("losses agree", False, f"{type(exc).__name__}: {exc}")
        rep.step_times.append(("cpu vs tpu runs", time.perf_counter() - t))

    if "benchmark" not in args.skip:
        t = _step(rep, 3, total, "benchmark the tiny decoder on the devices present")
        try:
            step_benchmark(rep, args)
        except Exception as exc:  # noqa: BLE001
            rep.check("benchmark tiny decoder", False, f"{type(exc).__name__}: {exc}")
        rep.step_times.append(("benchmark", time.perf_counter() - t))

    if "projection" not in args.skip:
        t = _step(rep, 4, total, "project to the catalog chips and draw the figures")
        try:
            step_project(rep, args)
        except Exception as exc:  # noqa: BLE001
            rep.check("projection ran", False, f"{type(exc).__name__}: {exc}")
        rep.step_times.append(("projection + figures", time.perf_counter() - t))

    _step(rep, 5, total, "write the report")
    failed = [c for c in rep.checks if not c.ok]
    wall = time.perf_counter() - rep.started
    head = ["# tpu-workbench demo report\n",
            f"Generated by `tpu-bench demo{' --quick' if args.quick else ''}` on "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} in {wall:.0f} s "
            f"({', '.join(f'{n} {s:.0f} s' for n, s in rep.step_times)}).\n",
            "Provenance: **measured** = run on this host (the \"tpu\" device is labelled with the platform it "
            "really ran on); **projected** = the roofline + communication model with stated inputs; "
            "**published** = a cited source. Figures: measured solid, projected hatched/dashed, published stars.\n",
            f"## Checks: {'ALL PASSED' if not failed else f'{len(failed)} FAILED'}\n",
            md_table(__import__("pandas").DataFrame([{"check": c.name, "result": "PASS" if c.ok else "FAIL",
                                                       "detail": c.detail} for c in rep.checks]))]
    (out / "README.md").write_text("\n".join(head + rep.sections), encoding="utf-8")
    print(f"{'all checks passed' if not failed else f'{len(failed)} check(s) FAILED: ' + ', '.join(c.name for c in failed)}"
          f" in {wall:.0f} s", flush=True)
    print(f"report: {out / 'README.md'}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
