"""tpu-bench: measure, compare, project and plot throughput, MFU and cost, with provenance.

Every subcommand validates names first; bad input prints an error naming the valid choices and
exits with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from workbench.errors import WorkbenchError

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


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _add_run(sub) -> None:
    from workbench.flops import CONVENTIONS
    from workbench.workloads import PHASES, VISION_PHASES, workload_names

    p = sub.add_parser(
        "run", help="measure workloads on devices present here; append records to a JSONL file",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run every combination of workload x phase x device x batch x seq (x compiled), with "
                    "warm-up excluded, the device synchronised, median and IQR kept with raw samples.",
        epilog="examples:\n"
               "  tpu-bench run -w tiny -p train -d cpu -b 4 -s 64 -o results/cpu.jsonl\n"
               "  tpu-bench run -w tiny small -p train prefill decode -d cpu tpu -b 1 8 -s 128\n"
               "  tpu-bench run -w tiny -p train -d tpu --compiled both --budget 5\n\n"
               f"workloads: {', '.join(workload_names())}\n"
               f"phases: {', '.join(PHASES)} (decoders); {', '.join(VISION_PHASES)} (small-cnn)\n"
               "MFU: vs the catalog peak of the device's chip; on a host CPU (and a tpu emulated on it)\n"
               "vs a measured host-CPU matmul peak. Decode also reports memory-bandwidth utilisation.")
    p.add_argument("-w", "--workload", nargs="+", default=["tiny"], metavar="NAME")
    p.add_argument("-p", "--phase", nargs="+", default=["train"], metavar="PHASE")
    p.add_argument("-d", "--device", nargs="+", default=["cpu"], metavar="DEV", help="cpu, cuda, tpu")
    p.add_argument("-b", "--batch", nargs="+", type=int, default=[4])
    p.add_argument("-s", "--seq", nargs="+", type=int, default=[64], help="sequence (decode: context) length")
    p.add_argument("--compiled", choices=["no", "yes", "both"], default="no",
                   help="torch.compile the model (backend 'tpu' on tpu, inductor elsewhere)")
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"])
    p.add_argument("--convention", default="palm", choices=list(CONVENTIONS), help="attention FLOP convention")
    p.add_argument("--budget", type=_positive_float, default=2.0, help="seconds of timing per combination")
    p.add_argument("-o", "--out", default="results/runs.jsonl", help="JSONL file to append to")
    p.add_argument("--no-progress", action="store_true")


def _cmd_run(args) -> int:
    from workbench.run import run_matrix

    compiled = {"no": (False,), "yes": (True,), "both": (False, True)}[args.compiled]
    result = run_matrix(args.workload, args.phase, args.device, batches=args.batch, seqs=args.seq,
                        compiled=compiled, precision=args.precision, budget_s=args.budget, out=args.out,
                        progress=not args.no_progress, convention=args.convention)
    for r in result.records:
        mfu = f"{100 * r.mfu:.2f}%" if r.mfu is not None else "n/a"
        print(f"{r.workload:>10} {r.phase:>7} {r.device + ('+compiled' if r.compiled else ''):>13} "
              f"b={r.batch}{'' if r.seq is None else f' s={r.seq}'}: {r.tokens_per_s:,.1f} "
              f"{'images' if r.unit == 'images' else r.tokens_kind + ' tokens'}/s, step "
              f"{1e3 * r.step_median_s:.2f} ms (IQR {100 * r.step_iqr_s / r.step_median_s:.1f}%), MFU {mfu} "
              f"[{r.peak_basis}] on {r.platform}")
    for note in sorted(set(result.skipped)):
        print(f"skipped {note}", file=sys.stderr)
    for combo, msg in result.failures:
        print(f"FAILED {combo}: {msg}", file=sys.stderr)
    print(f"{len(result.records)} record(s) appended to {args.out}")
    return 1 if result.failures else 0


def _add_compare(sub) -> None:
    p = sub.add_parser("compare", help="table of result files: tokens/s, MFU, ratio to a baseline device",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="example:\n  tpu-bench compare results/*.jsonl --baseline cpu\n"
                              "variants are device names, '+compiled' when torch.compile was used")
    p.add_argument("files", nargs="+")
    p.add_argument("--baseline", default=None, help="variant the ratio is taken against (default cpu)")
    p.add_argument("--csv", default=None, help="also write the table as CSV")


def _cmd_compare(args) -> int:
    from workbench.compare import compare_table, format_table
    from workbench.results import load_results

    table = compare_table(load_results(*args.files), baseline=args.baseline)
    print(format_table(table))
    if args.csv:
        table.to_csv(args.csv, index=False)
    return 0


def _add_project(sub) -> None:
    from workbench.projection import LAYOUTS

    p = sub.add_parser(
        "project", help="roofline + communication projection for catalog chips and any scale",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
               '  tpu-bench project --chip "TPU v7" H100 -w llama3-70b -p train --chips 8 64 512 --layout fsdp\n'
               '  tpu-bench project --chip B200 -w llama3-70b -p decode --batch 1 8 64 --seq 4096 --chips 8 --layout tp\n'
               "  tpu-bench project --vs-published\n\n"
               f"layouts: {', '.join(LAYOUTS)} or explicit 'dp=2,fsdp=64,tp=4,ep=8'\n"
               "every assumption (efficiencies, overlap, scale-out bandwidth) is an option with a default\n"
               "and is written into each projected record.")
    p.add_argument("--chip", nargs="+", default=["TPU v7"])
    p.add_argument("-w", "--workload", default="llama3-70b")
    p.add_argument("-p", "--phase", default="train", choices=["train", "prefill", "decode"])
    p.add_argument("--chips", nargs="+", type=int, default=[1, 8, 64, 512, 4096, 8192])
    p.add_argument("--layout", default="fsdp")
    p.add_argument("--batch", nargs="+", type=int, default=None,
                   help="sequences per chip (train/prefill) or concurrent sequences (decode)")
    p.add_argument("--seq", type=int, default=4096)
    p.add_argument("--precision", default="bf16")
    p.add_argument("--compute-efficiency", type=float, default=None)
    p.add_argument("--memory-efficiency", type=float, default=None)
    p.add_argument("--overlap", type=float, default=None)
    p.add_argument("--scaleout-gbps", type=float, default=None, help="scale-out GB/s per chip")
    p.add_argument("--scaleup-domain", type=int, default=None, help="override the chip's scale-up domain (e.g. slice size)")
    p.add_argument("--run-tokens", type=float, default=None,
                   help="also print the $ cost of a run of this many tokens (e.g. 15e12), cheapest tier")
    p.add_argument("--vs-published", action="store_true", help="print projected vs published points")
    p.add_argument("-o", "--out", default=None, help="append projected records to this JSONL")
    p.add_argument("--catalog-file", action="append", default=[])


def _cmd_project(args) -> int:
    import pandas as pd

    from workbench.catalog import load_catalog
    from workbench.cost import usd_per_run
    from workbench.projection import Assumptions, format_vs_published, project, projection_vs_published
    from workbench.results import append_records

    if args.vs_published:
        print(format_vs_published(projection_vs_published()))
        return 0
    catalog = load_catalog(args.catalog_file)
    overrides = {k: v for k, v in {"compute_efficiency": args.compute_efficiency,
                                    "memory_efficiency": args.memory_efficiency, "overlap": args.overlap,
                                    "scaleout_gbps_per_chip": args.scaleout_gbps,
                                    "scaleup_domain": args.scaleup_domain}.items() if v is not None}
    assumptions = Assumptions(**overrides)
    records, rows = [], []
    for chip in args.chip:
        for n in args.chips:
            for b in args.batch or [None]:
                rec = project(catalog.chip(chip), args.workload, args.phase, n, args.layout, batch=b,
                              seq=args.seq, precision=args.precision, assumptions=assumptions, catalog=catalog)
                records.append(rec)
                cheapest = min(rec.cost, key=lambda c: c["usd_per_mtok"]) if rec.cost else None
                row = {"chip": rec.chip, "n_chips": rec.n_chips, "layout": rec.extra["layout"],
                             "batch": rec.batch, "tok/s/chip": rec.tokens_per_s_per_chip,
                             "tok/s/user": rec.tokens_per_s_per_user, "MFU%": 100 * rec.mfu,
                             "bound": rec.extra["bound"], "comm%": 100 * rec.extra["comm_fraction"],
                             "fits": rec.extra["fits_in_hbm"],
                             "$/Mtok (cheapest tier)": (f"{cheapest['usd_per_mtok']:.4f} ({cheapest['tier']})"
                                                        if cheapest else "no price")}
                if args.run_tokens and cheapest:
                    row["$ per run (cheapest)"] = usd_per_run(args.run_tokens, rec.tokens_per_s_per_chip, n,
                                                              cheapest["usd_per_chip_hour"])
                    row["run days"] = args.run_tokens / rec.tokens_per_s / 86400
                rows.append(row)
    with pd.option_context("display.width", 250, "display.float_format", "{:,.2f}".format):
        print(pd.DataFrame(rows).to_string(index=False))
    print(f"model: {records[0].source['model']} v{records[0].source['model_version']}; assumptions: "
          + ", ".join(f"{k}={v}" for k, v in records[0].source["assumptions"].items()))
    if args.out:
        append_records(args.out, records)
        print(f"{len(records)} projected record(s) appended to {args.out}")
    return 0


def _add_plot(sub) -> None:
    from workbench.plots import KINDS

    p = sub.add_parser("plot", help="PNG figures from result files (measured, projected, published marked apart)",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="examples:\n  tpu-bench plot results/tiny.jsonl --outdir plots/\n"
                              "  tpu-bench plot results/tiny.jsonl --kind throughput mfu --outdir plots/\n"
                              "  tpu-bench plot --kind scaling roofline pareto cost --outdir plots/   "
                              "(projection figures need no files)\n"
                              f"kinds: {', '.join(KINDS)}")
    p.add_argument("files", nargs="*")
    p.add_argument("--kind", nargs="+", default=["all"], choices=[*KINDS, "all"])
    p.add_argument("--outdir", default="plots")
    p.add_argument("--chip", nargs="+", default=["TPU v7", "H100 SXM", "B200"],
                   help="chips for the projected figures (cost, pareto, scaling, roofline)")
    p.add_argument("-w", "--workload", default="llama3-70b", help="model for the projected figures")


def _cmd_plot(args) -> int:
    from workbench.plots import make_plots

    paths = make_plots(args.files, kinds=args.kind, outdir=args.outdir, chips=args.chip, workload=args.workload)
    for path in paths:
        print(path)
    return 0


def _add_catalog(sub) -> None:
    p = sub.add_parser("catalog", help="list or show catalog chips (peaks, memory, links, dated prices)",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog='examples:\n  tpu-bench catalog list\n  tpu-bench catalog show "TPU v7"\n'
                              "  tpu-bench catalog list --file my_chips.toml   (add chips or [[price]] entries)")
    p.add_argument("action", choices=["list", "show"])
    p.add_argument("name", nargs="?")
    p.add_argument("--file", action="append", default=[], help="extra catalog TOML/JSON file")
    p.add_argument("--json", action="store_true")


def _cmd_catalog(args) -> int:
    from workbench.catalog import load_catalog

    catalog = load_catalog(args.file)
    if args.action == "list":
        if args.json:
            print(json.dumps([c.to_dict() for c in catalog.chips()], indent=1))
            return 0
        print(f"{'chip':<11} {'dev/chip':>8} {'BF16 TF/s':>9} {'FP8 TF/s':>8} {'HBM GB':>7} {'HBM GB/s':>8} "
              f"{'scale-up GB/s':>14} {'domain':>6} {'TDP W':>6}  prices")
        for c in catalog.chips():
            peak = c.peak_tflops
            tiers = ", ".join(f"{p.tier} ${p.usd_per_chip_hour:g}" for p in c.prices) or "-"
            print(f"{c.name:<11} {c.devices_per_chip:>8} {peak.get('bf16', float('nan')):>9,.0f} "
                  f"{peak.get('fp8', float('nan')):>8,.0f} {c.hbm_gb:>7.0f} {c.hbm_bw_gbps:>8,.0f} "
                  f"{c.scaleup_bw_gbps:>8,.0f} {c.scaleup_direction:<5} {c.scaleup_domain:>6} "
                  f"{c.tdp_w or float('nan'):>6.0f}  {tiers}")
        return 0
    if not args.name:
        raise WorkbenchError(f"catalog show needs a chip name; known: {', '.join(catalog.names())}")
    chip = catalog.chip(args.name)
    d = chip.to_dict()
    d["peak_tflops_per_device"] = chip.peak_tflops_per_device
    print(json.dumps(d, indent=1))
    return 0


def _cmd_demo(args) -> int:
    try:
        import workbench.demo as demo
    except ModuleNotFoundError as exc:
        if exc.name != "workbench.demo":
            raise
        raise WorkbenchError("the demo is not available in this install (workbench/demo.py is missing)") from None
    return int(demo.main(args.demo_args) or 0)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tpu-bench", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG_MAIN,
        description="Throughput, MFU and cost of real workloads: measured here, projected for catalog "
                    "chips at any scale, and published reference points, never mixed silently.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{run,compare,project,plot,catalog,demo}")
    _add_run(sub)
    _add_compare(sub)
    _add_project(sub)
    _add_plot(sub)
    _add_catalog(sub)
    d = sub.add_parser("demo", help="the guided end-to-end demo (migrate → run → compare → plot)")
    d.add_argument("demo_args", nargs=argparse.REMAINDER)
    return parser


COMMANDS = {"run": _cmd_run, "compare": _cmd_compare, "project": _cmd_project, "plot": _cmd_plot,
            "catalog": _cmd_catalog, "demo": _cmd_demo}


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``tpu-bench`` console script; returns the exit status."""
    try:
        parser = build_parser()
    except RuntimeError as exc:  # torch itself failed to import (backend autoload)
        print(f"tpu-bench: error: {exc}; set TORCH_DEVICE_BACKEND_AUTOLOAD=0 to run without the 'tpu' backend",
              file=sys.stderr)
        return 2
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["demo"]:  # the demo parses its own options (argparse.REMAINDER refuses a leading --flag)
        return _cmd_demo(argparse.Namespace(demo_args=argv[1:]))
    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except WorkbenchError as exc:
        print(f"tpu-bench {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"tpu-bench {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:
        if "backend extension" not in str(exc):
            raise
        print(f"tpu-bench {args.command}: error: torch could not autoload the 'tpu' backend ({exc}); "
              "set TORCH_DEVICE_BACKEND_AUTOLOAD=0 to measure on cpu without it", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["main", "build_parser", "Path"]
