"""tpu-bench: measure, compare, project and plot throughput, MFU and cost, with provenance.

Every subcommand validates names first; bad input prints an error naming the valid choices and
exits with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
import warnings
from pathlib import Path

from tpu_workbench.bench import argtypes
from tpu_workbench.bench.catalog import CatalogError
from tpu_workbench.bench.errors import WorkbenchError
from tpu_workbench.bench.results import SchemaError, variant_label

EPILOG_MAIN = """\
examples:
  tpu-bench catalog list
  tpu-bench catalog show "TPU v7"
  tpu-bench run -w tiny -p train -d cpu tpu -b 4 -s 64 -o results/tiny.jsonl
  tpu-bench compare results/tiny.jsonl --baseline cpu
  tpu-bench project --chip "TPU v7" -w qwen3-235b-a22b -p train --chips 1 64 1024 8192 --layout fsdp+ep
  tpu-bench project --vs-published
  tpu-bench plot results/tiny.jsonl --outdir plots/
  tpu-bench demo

Numbers carry their provenance: measured (this host), projected (a stated model with stated
inputs) or published (a cited source). A "tpu" run that JAX executes on the CPU is labelled
"tpu via XLA:CPU", never as a TPU.
"""


def _add_run(sub) -> None:
    from tpu_workbench.bench.flops import CONVENTIONS  # lazy: startup
    from tpu_workbench.bench.workloads import PHASES, VISION_PHASES, workload_names  # lazy: startup

    p = sub.add_parser(
        "run",
        help="measure workloads on devices present here; append records to a JSONL file",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run every combination of workload x phase x device x batch x seq (x compiled x eager mode on tpu), with "
        "warm-up excluded, the device synchronised, median and IQR kept with raw samples.",
        epilog="examples:\n"
        "  tpu-bench run -w tiny -p train -d cpu -b 4 -s 64 -o results/cpu.jsonl\n"
        "  tpu-bench run -w tiny small -p train prefill decode -d cpu tpu -b 1 8 -s 128\n"
        "  tpu-bench run -w tiny -p train -d tpu --compiled both --budget 5\n"
        "  tpu-bench run -w tiny -p train -d cpu tpu --eager both   (strict and fused eager side by side)\n\n"
        f"workloads: {', '.join(workload_names())}\n"
        f"phases: {', '.join(PHASES)} (decoders); {', '.join(VISION_PHASES)} (small-cnn)\n"
        "MFU: vs the catalog peak of the device's chip; on a host CPU (and a tpu emulated on it)\n"
        "vs a measured host-CPU matmul peak. Decode also reports memory-bandwidth utilisation.",
    )
    p.add_argument(
        "-w",
        "--workload",
        nargs="+",
        default=["tiny"],
        metavar="NAME",
        help="workload presets to run (default tiny; listed below)",
    )
    p.add_argument(
        "-p",
        "--phase",
        nargs="+",
        default=["train"],
        metavar="PHASE",
        help=f"phases to run: {', '.join(dict.fromkeys((*PHASES, *VISION_PHASES)))} (default train)",
    )
    p.add_argument(
        "-d",
        "--device",
        nargs="+",
        default=["cpu"],
        metavar="DEV",
        help="devices present here: cpu, cuda, tpu (default cpu)",
    )
    p.add_argument(
        "-b",
        "--batch",
        nargs="+",
        type=argtypes.POSITIVE_INT,
        default=[4],
        metavar="N",
        help="sequences (images) per step, integers >= 1 (default 4)",
    )
    p.add_argument(
        "-s",
        "--seq",
        nargs="+",
        type=argtypes.POSITIVE_INT,
        default=[64],
        metavar="T",
        help="sequence length (decode: context length), integers >= 1 (default 64)",
    )
    p.add_argument(
        "--compiled",
        choices=["no", "yes", "both"],
        default="no",
        help="torch.compile the model (backend 'tpu' on tpu, inductor elsewhere)",
    )
    p.add_argument(
        "--eager",
        choices=["strict", "fused", "both"],
        default="strict",
        help="eager mode of uncompiled runs on tpu: strict (one op at a time, the default), fused "
        "(ops recorded and run as one cached XLA program), or both side by side",
    )
    p.add_argument(
        "--precision",
        default="fp32",
        choices=["fp32", "bf16", "fp16"],
        help="dtype of the weights and activations (default fp32)",
    )
    p.add_argument(
        "--convention", default="palm", choices=list(CONVENTIONS), help="attention FLOP convention"
    )
    p.add_argument(
        "--budget",
        type=argtypes.BUDGET_S,
        default=2.0,
        metavar="S",
        help="seconds of timing per combination, in (0, 3600] (default 2)",
    )
    p.add_argument(
        "-o", "--out", type=argtypes.OUTPUT_FILE, default="results/runs.jsonl", help="JSONL file to append to"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _cmd_run(args) -> int:
    from tpu_workbench.bench.compare import NOISY_IQR_PCT  # lazy: startup
    from tpu_workbench.bench.run import run_matrix  # lazy: startup

    compiled = {"no": (False,), "yes": (True,), "both": (False, True)}[args.compiled]
    eager = ("strict", "fused") if args.eager == "both" else (args.eager,)
    result = run_matrix(
        args.workload,
        args.phase,
        args.device,
        batches=args.batch,
        seqs=args.seq,
        compiled=compiled,
        precision=args.precision,
        budget_s=args.budget,
        out=args.out,
        progress=not args.no_progress,
        convention=args.convention,
        eager_modes=eager,
    )
    for r in result.records:
        mfu = f"{100 * r.mfu:.2f}%" if r.mfu is not None else "n/a"
        print(
            f"{r.workload:>10} {r.phase:>7} {variant_label(r):>13} "
            f"b={r.batch}{'' if r.seq is None else f' s={r.seq}'}: {r.tokens_per_s:,.1f} "
            f"{'images' if r.unit == 'images' else r.tokens_kind + ' tokens'}/s, step "
            f"{1e3 * r.step_median_s:.2f} ms (IQR {100 * r.step_iqr_s / r.step_median_s:.1f}%"
            f"{', NOISY' if 100 * r.step_iqr_s > NOISY_IQR_PCT * r.step_median_s else ''}), MFU {mfu} "
            f"[{r.peak_basis}] on {r.platform}"
        )
    for note in sorted(set(result.skipped)):
        print(f"skipped {note}", file=sys.stderr)
    for combo, msg in result.failures:
        print(f"FAILED {combo}: {msg}", file=sys.stderr)
    print(f"{len(result.records)} record(s) appended to {args.out}")
    return 1 if result.failures else 0


def _add_compare(sub) -> None:
    p = sub.add_parser(
        "compare",
        help="table of result files: tokens/s, MFU, ratio to a baseline device",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example:\n  tpu-bench compare results/*.jsonl --baseline cpu\n"
        "variants are device names, '+compiled' when torch.compile was used, '+fused' for fused eager "
        "on tpu",
    )
    p.add_argument("files", nargs="+", help="result JSONL files or folders of them")
    p.add_argument("--baseline", default=None, help="variant the ratio is taken against (default cpu)")
    p.add_argument("--csv", type=argtypes.OUTPUT_FILE, default=None, help="also write the table as CSV")
    p.add_argument(
        "--pool",
        action="store_true",
        help="merge the runs of one cell from different files (default: one row per file)",
    )


def _cmd_compare(args) -> int:
    from tpu_workbench.bench import tables  # lazy: startup
    from tpu_workbench.bench.compare import compare_table, format_table, other_records_table  # lazy: startup
    from tpu_workbench.bench.results import load_results  # lazy: startup

    df = load_results(*args.files)
    if df.empty:
        raise WorkbenchError(f"no records in {', '.join(args.files)}")
    others = other_records_table(df)
    table = None
    if (df["provenance"] == "measured").any():
        table = compare_table(df, baseline=args.baseline, pool=args.pool)
        print(format_table(table))
    if len(others):
        counts = ", ".join(
            f"{n} {kind}" for kind, n in others["provenance"].value_counts().sort_index().items()
        )
        print(
            f"\nnot compared with the measured runs ({counts}: other provenance):"
            if table is not None
            else f"no measured records; {counts} record(s):"
        )
        print(tables.text(others))
    if args.csv:
        Path(args.csv).parent.mkdir(parents=True, exist_ok=True)
        (table if table is not None else others).to_csv(args.csv, index=False)
    return 0


def _add_project(sub) -> None:
    from tpu_workbench.bench.flops import PHASES as FLOP_PHASES  # lazy: startup
    from tpu_workbench.bench.projection import LAYOUTS  # lazy: startup

    p = sub.add_parser(
        "project",
        help="roofline + communication projection for catalog chips and any scale",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
        '  tpu-bench project --chip "TPU v7" H100 -w llama3-70b -p train --chips 8 64 512 --layout fsdp\n'
        "  tpu-bench project --chip B200 -w llama3-70b -p decode --batch 1 8 64 --seq 4096 --chips 8 --layout tp\n"
        "  tpu-bench project --vs-published\n\n"
        f"layouts: {', '.join(LAYOUTS)} or explicit 'dp=2,fsdp=64,tp=4,ep=8'\n"
        "every assumption (efficiencies, overlap, scale-out bandwidth) is an option with a default\n"
        "and is written into each projected record.",
    )
    p.add_argument(
        "--chip",
        nargs="+",
        default=["TPU v7"],
        metavar="CHIP",
        help='catalog chips (names or aliases; `tpu-bench catalog list`), default "TPU v7"',
    )
    p.add_argument("-w", "--workload", default="llama3-70b", help="decoder preset (default llama3-70b)")
    p.add_argument("-p", "--phase", default="train", choices=list(FLOP_PHASES), help="phase (default train)")
    p.add_argument(
        "--chips",
        nargs="+",
        type=argtypes.CHIP_COUNT,
        default=[1, 8, 64, 512, 4096, 8192],
        metavar="N",
        help=f"chip counts, integers from 1 to {argtypes.MAX_CHIPS:,} (more than any cluster built)",
    )
    p.add_argument(
        "--layout",
        default="fsdp",
        help="parallel layout: a name listed below or explicit 'dp=..,fsdp=..,tp=..,ep=..' (default fsdp)",
    )
    p.add_argument(
        "--batch",
        nargs="+",
        type=argtypes.POSITIVE_INT,
        default=None,
        metavar="N",
        help="sequences per chip (train/prefill) or concurrent sequences (decode), integers >= 1 "
        "(default: the phase's default batch)",
    )
    p.add_argument(
        "--seq",
        type=argtypes.POSITIVE_INT,
        default=4096,
        help="sequence length (decode: context length), integer >= 1 (default 4096)",
    )
    p.add_argument(
        "--precision",
        default="bf16",
        help="precision of the math and weights; the chip needs a catalog peak for it (default bf16)",
    )
    p.add_argument(
        "--compute-efficiency",
        type=argtypes.FRACTION,
        default=None,
        help="fraction of the dense peak reached, in (0, 1]",
    )
    p.add_argument(
        "--memory-efficiency",
        type=argtypes.FRACTION,
        default=None,
        help="fraction of the HBM bandwidth reached, in (0, 1]",
    )
    p.add_argument(
        "--overlap",
        type=argtypes.SHARE,
        default=None,
        help="share of communication hidden under math, in [0, 1]",
    )
    p.add_argument(
        "--scaleout-gbytes-per-s",
        "--scaleout-gbps",
        type=argtypes.POSITIVE,
        default=None,
        help="scale-out (NIC / TPU DCN) GB/s per chip and direction, > 0 (default: the catalog's "
        "vendor Gb/s figure / 8)",
    )
    p.add_argument(
        "--scaleup-domain",
        type=argtypes.CHIP_COUNT,
        default=None,
        help="override the chip's scale-up domain (e.g. slice size), integer >= 1",
    )
    p.add_argument(
        "--run-tokens",
        type=argtypes.RUN_TOKENS,
        default=None,
        help="also print the $ cost of a run of this many tokens (e.g. 15e12) at the chosen price kind",
    )
    p.add_argument("--vs-published", action="store_true", help="print projected vs published points")
    p.add_argument(
        "-o", "--out", type=argtypes.OUTPUT_FILE, default=None, help="append projected records to this JSONL"
    )
    p.add_argument(
        "--catalog-file",
        action="append",
        default=[],
        metavar="FILE",
        help="extra catalog TOML/JSON file (repeatable)",
    )
    from tpu_workbench.bench.projection.cli import EPILOG, add_arguments  # lazy: startup

    add_arguments(p)
    p.epilog += "\n" + EPILOG


def _cmd_project(args) -> int:
    from tpu_workbench.bench.projection.cli import run  # lazy: startup
    from tpu_workbench.bench.workloads.config import check_context  # lazy: startup

    if not args.vs_published:
        check_context(args.workload, args.seq, args.phase)
    return run(args)


def _add_plot(sub) -> None:
    from tpu_workbench.bench.plot_kinds import KINDS  # lazy: startup

    p = sub.add_parser(
        "plot",
        help="PNG figures from result files (measured, projected, published marked apart)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  tpu-bench plot results/tiny.jsonl --outdir plots/\n"
        "  tpu-bench plot results/tiny.jsonl --kind throughput mfu --outdir plots/\n"
        "  tpu-bench plot --kind scaling roofline pareto cost --outdir plots/   "
        "(projection figures need no files)\n"
        f"kinds: {', '.join(KINDS)}",
    )
    p.add_argument("files", nargs="*", help="result JSONL files for the measured figures (throughput, mfu)")
    p.add_argument(
        "--kind", nargs="+", default=["all"], choices=[*KINDS, "all"], help="figures to draw (default all)"
    )
    p.add_argument(
        "--outdir", type=argtypes.OUTPUT_DIR, default="plots", help="folder for the PNGs (default plots/)"
    )
    p.add_argument(
        "--chip",
        nargs="+",
        default=["TPU v7", "H100 SXM", "B200"],
        help="chips for the projected figures (cost, pareto, scaling, roofline)",
    )
    p.add_argument("-w", "--workload", default="llama3-70b", help="model for the projected figures")


def _cmd_plot(args) -> int:
    from tpu_workbench.bench.plots import make_plots  # lazy: startup

    measured_kinds = [k for k in args.kind if k in ("throughput", "mfu")]
    if measured_kinds and not args.files:
        raise WorkbenchError(
            f"--kind {' '.join(measured_kinds)} draws measured runs: give result files (tpu-bench plot FILE.jsonl ...)"
        )
    paths = make_plots(
        args.files, kinds=args.kind, outdir=args.outdir, chips=args.chip, workload=args.workload
    )
    if not paths:  # one line for a usage error: the refusal says it all
        raise WorkbenchError("no figure drawn: the files hold no measured records")
    for path in paths:
        print(path)
    skipped = (
        sorted({"throughput", "mfu"} - {p.stem for p in paths})
        if "all" in args.kind or measured_kinds
        else []
    )
    if skipped:
        print(
            f"tpu-bench plot: {', '.join(skipped)} not drawn: no measured records in the files given",
            file=sys.stderr,
        )
    return 0


def _add_catalog(sub) -> None:
    p = sub.add_parser(
        "catalog",
        help="list or show catalog chips (peaks, memory, links, dated prices)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog='examples:\n  tpu-bench catalog list\n  tpu-bench catalog show "TPU v7"\n'
        "  tpu-bench catalog list --file my_chips.toml   (add chips or [[price]] entries)",
    )
    p.add_argument("action", choices=["list", "show"], help="list every chip, or show one")
    p.add_argument("name", nargs="?", help="chip name or alias (for show)")
    p.add_argument("--file", action="append", default=[], help="extra catalog TOML/JSON file")
    p.add_argument("--json", action="store_true", help="print JSON")


def _cmd_catalog(args) -> int:
    from tpu_workbench.bench.catalog import load_catalog  # lazy: startup

    catalog = load_catalog(args.file)
    if args.action == "list":
        if args.json:
            print(json.dumps([c.to_dict() for c in catalog.chips()], indent=1))
            return 0
        from tpu_workbench.bench.catalog.listing import format_list  # lazy: startup

        print(format_list(catalog))
        return 0
    if not args.name:
        raise WorkbenchError(f"catalog show needs a chip name; known: {', '.join(catalog.names())}")
    chip = catalog.chip(args.name)
    d = chip.to_dict()
    d["peak_tflops_per_device"] = chip.peak_tflops_per_device
    print(json.dumps(d, indent=1))
    return 0


def _cmd_demo(args) -> int:
    from tpu_workbench.bench.demo_options import build_parser as demo_parser  # lazy: startup

    demo_args = args.demo_args[1:] if args.demo_args[:1] == ["--"] else args.demo_args  # `demo -- --quick`
    demo_parser().parse_args(demo_args)  # --help and bad options answered before the heavy imports
    try:
        import tpu_workbench.bench.demo as demo  # lazy: startup
    except ModuleNotFoundError as exc:
        if exc.name != "tpu_workbench.bench.demo":
            raise
        raise WorkbenchError(
            "the demo is not available in this install (workbench/demo.py is missing)"
        ) from None
    return int(demo.main(args.demo_args) or 0)


def build_parser() -> argparse.ArgumentParser:
    parser = argtypes.OneLineParser(
        prog="tpu-bench",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EPILOG_MAIN,
        description="Throughput, MFU and cost of real workloads: measured here, projected for catalog "
        "chips at any scale, and published reference points, never mixed silently.",
    )
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="{run,compare,project,plot,catalog,validate,assess,demo}"
    )
    _add_run(sub)
    _add_compare(sub)
    _add_project(sub)
    _add_plot(sub)
    _add_catalog(sub)
    _add_validate(sub)
    _add_assess(sub)
    d = sub.add_parser("demo", help="the guided end-to-end demo (migrate → run → compare → plot)")
    d.add_argument(
        "demo_args", nargs=argparse.REMAINDER, help="the demo's own options (tpu-bench demo --help)"
    )
    return parser


def _add_validate(sub) -> None:
    from tpu_workbench.bench.validate.cli import add_parser  # lazy: startup

    add_parser(sub)


def _cmd_validate(args) -> int:
    from tpu_workbench.bench.validate.cli import run  # lazy: startup

    return run(args)


def _add_assess(sub) -> None:
    from tpu_workbench.bench.assess.cli import add_parser  # lazy: startup

    add_parser(sub)


def _cmd_assess(args) -> int:
    from tpu_workbench.bench.assess.cli import run  # lazy: startup

    return run(args)


COMMANDS = {
    "run": _cmd_run,
    "compare": _cmd_compare,
    "project": _cmd_project,
    "plot": _cmd_plot,
    "catalog": _cmd_catalog,
    "validate": _cmd_validate,
    "assess": _cmd_assess,
    "demo": _cmd_demo,
}


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings about user files (a skipped results line) as one line, without source context."""
    print(f"tpu-bench: warning: {message}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``tpu-bench`` console script; returns the exit status."""
    try:
        parser = build_parser()
    except RuntimeError as exc:  # torch itself failed to import (backend autoload)
        print(
            f"tpu-bench: error: {exc}; set TORCH_DEVICE_BACKEND_AUTOLOAD=0 to run without the 'tpu' backend",
            file=sys.stderr,
        )
        return 2
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["demo"]:  # the demo parses its own options (argparse.REMAINDER refuses a leading --flag)
        args = argparse.Namespace(command="demo", demo_args=argv[1:])
    else:
        args = parser.parse_args(argv)
    try:
        return _dispatch(args)
    except BrokenPipeError:  # `tpu-bench project | head`: the reader has all it wanted
        sys.stderr.close()
        return 0


def _dispatch(args: argparse.Namespace) -> int:
    with warnings.catch_warnings():
        warnings.showwarning = _one_line_warning
        try:
            return COMMANDS[args.command](args)
        except USER_ERRORS as exc:
            print(f"tpu-bench {args.command}: error: {_where(exc, args)}{_first_line(exc)}", file=sys.stderr)
            return 2
        except RuntimeError as exc:
            if "backend extension" not in str(exc):
                raise
            print(
                f"tpu-bench {args.command}: error: torch could not autoload the 'tpu' backend ({exc}); "
                "set TORCH_DEVICE_BACKEND_AUTOLOAD=0 to measure on cpu without it",
                file=sys.stderr,
            )
            return 2


USER_ERRORS = (
    WorkbenchError,
    CatalogError,
    SchemaError,
    tomllib.TOMLDecodeError,
    json.JSONDecodeError,
    FileNotFoundError,
    IsADirectoryError,
    PermissionError,
    UnicodeDecodeError,
)
"""Errors caused by what the user typed or pointed at: one line, exit status 2, no traceback."""


def _where(exc: BaseException, args: argparse.Namespace) -> str:
    """For a TOML/JSON syntax error (whose text has the line but not the file): the user's catalog file that
    does not parse, as a "path: " prefix."""
    if not isinstance(exc, tomllib.TOMLDecodeError | json.JSONDecodeError):
        return ""
    for name in [*getattr(args, "file", []), *getattr(args, "catalog_file", [])]:
        try:
            text = Path(name).read_text(encoding="utf-8")
            tomllib.loads(text) if name.endswith(".toml") else json.loads(text)
        except (OSError, ValueError):
            return f"{name}: "
    return ""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["main", "build_parser", "Path"]
