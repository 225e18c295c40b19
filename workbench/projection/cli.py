"""``tpu-bench project``: the options beyond the basic ones and the handler (kept here, beside the model)."""

from __future__ import annotations

import argparse

from tpu_workbench.bench import argtypes
from tpu_workbench.bench.catalog import KIND_MEANING
from tpu_workbench.bench.projection import serve_cli
from tpu_workbench.bench.projection.remat import POLICIES

EPILOG = (
    "costs use one kind of price for every chip (--price-kind; default: the first of owner-tco, "
    "committed, list that all requested chips have); a stale price is marked '(stale)'.\n"
    "--vs-published prints the calibration point, the validation points with their errors, and the "
    "unanchored points apart."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``tpu-bench project`` that this module handles (the basic ones live in workbench.cli)."""
    p.add_argument(
        "--remat",
        default="auto",
        choices=[*POLICIES, "auto"],
        help="training rematerialisation policy (default auto: the least recompute that fits per device)",
    )
    p.add_argument(
        "--slices",
        type=argtypes.CHIP_COUNT,
        default=1,
        help="TPU slices joined by DCN: FSDP inside a slice, data parallel across (default 1)",
    )
    p.add_argument(
        "--straggler-cv",
        type=argtypes.STRAGGLER_CV,
        default=None,
        help="per-host step-time coefficient of variation, in [0, 1] (default 0.01)",
    )
    p.add_argument(
        "--price-kind",
        default=None,
        choices=list(KIND_MEANING),
        help="kind of price for the $ columns: " + "; ".join(f"{k} = {v}" for k, v in KIND_MEANING.items()),
    )
    p.add_argument(
        "--brief", action="store_true", help="with --vs-published: the tables only, no per-point details"
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="with --vs-published: a JSON list of rows (training and serving, each with source, date, vendor, "
        "chip, phase, precision, role, published, projected, unit, error_pct, note, id)",
    )
    p.add_argument(
        "--groups",
        action="store_true",
        help="with --vs-published --json: one JSON object instead: rows, per-group errors against the target, "
        "the targets and what was calibrated",
    )
    p.add_argument(
        "--kv-precision",
        default=None,
        help="precision of the KV cache for prefill/decode (default: the activations'); e.g. fp8",
    )

    serve_cli.add_arguments(p)


def _assumptions(args):
    from tpu_workbench.bench.projection import Assumptions  # lazy: startup

    overrides = {
        "gemm_efficiency": getattr(args, "compute_efficiency", None),
        "memory_efficiency": getattr(args, "memory_efficiency", None),
        "overlap": getattr(args, "overlap", None),
        "scaleout_gbytes_per_s_per_chip": getattr(args, "scaleout_gbytes_per_s", None),
        "scaleup_domain": getattr(args, "scaleup_domain", None),
        "straggler_cv": getattr(args, "straggler_cv", None),
    }
    return Assumptions(**{k: v for k, v in overrides.items() if v is not None})


def run(args) -> int:
    """Handler of ``tpu-bench project``; returns the exit status."""
    import pandas as pd  # lazy: startup

    from tpu_workbench.bench.catalog import load_catalog  # lazy: startup
    from tpu_workbench.bench.cost import comparable_prices, cost_line, usd_per_run  # lazy: startup
    from tpu_workbench.bench.projection import project, projection_vs_published  # lazy: startup
    from tpu_workbench.bench.projection.report import format_table  # lazy: startup
    from tpu_workbench.bench.results import append_records  # lazy: startup

    if getattr(args, "serve", False):
        return serve_cli.run_serve(args)
    if args.vs_published and getattr(args, "json", False):
        import json  # lazy: startup

        from tpu_workbench.bench.projection.serving_validation import vs_published_json  # lazy: startup

        table = vs_published_json(assumptions=_assumptions(args))
        print(json.dumps(table if args.groups else table["rows"], indent=1, default=str))
        return 0
    if args.vs_published:
        table = projection_vs_published(assumptions=_assumptions(args))
        print(format_table(table, details=not args.brief))
        return 0
    catalog = load_catalog(args.catalog_file)
    assumptions = _assumptions(args)
    chips = [catalog.chip(c) for c in args.chip]
    prices = comparable_prices(chips, args.price_kind)
    money = f"$/Mtok ({prices.kind})"
    records, rows = [], []
    for chip in chips:
        price = prices.prices[chip.name]
        for n in args.chips:
            for b in args.batch or [None]:
                rec = project(
                    chip,
                    args.workload,
                    args.phase,
                    n,
                    args.layout,
                    batch=b,
                    seq=args.seq,
                    precision=args.precision,
                    assumptions=assumptions,
                    catalog=catalog,
                    remat=args.remat,
                    slices=args.slices,
                    kv_precision=getattr(args, "kv_precision", None),
                )
                records.append(rec)
                runs = rec.tokens_per_s_per_chip is not None  # None: it does not fit, no rate and no price
                line = cost_line(price, rec.tokens_per_s_per_chip) if price and runs else None
                row = {
                    "chip": rec.chip,
                    "n_chips": rec.n_chips,
                    "layout": rec.extra["layout"],
                    "batch": rec.batch,
                    "tok/s/chip": rec.tokens_per_s_per_chip,
                    "tok/s/user": rec.tokens_per_s_per_user,
                    "MFU%": 100 * rec.mfu if runs else None,
                    "bound": rec.extra["bound"] if runs else "does not fit",
                    "comm%": 100 * rec.extra["comm_fraction"] if runs else None,
                    "fits/device": rec.extra["fits_in_hbm"],
                    money: (
                        f"{line.usd_per_mtok:.4f} ({line.tier} {line.price_date}"
                        f"{', stale' if line.stale else ''})"
                        if line
                        else (f"no {prices.kind} price" if runs else rec.extra["infeasible"])
                    ),
                }
                if args.run_tokens and line:
                    row[f"$ per run ({prices.kind})"] = usd_per_run(
                        args.run_tokens, rec.tokens_per_s_per_chip, n, line.usd_per_chip_hour
                    )
                    row["run days"] = args.run_tokens / rec.tokens_per_s / 86400
                rows.append(row)
    with pd.option_context("display.width", 250, "display.float_format", "{:,.2f}".format):
        print(pd.DataFrame(rows).to_string(index=False))
    print(
        f"prices: one kind for every chip, {prices.kind} = {prices.meaning}"
        + (f"; no {prices.kind} price for {', '.join(prices.missing)}" if prices.missing else "")
        + (f"; stale: {'; '.join(f'{k}: {v}' for k, v in prices.stale().items())}" if prices.stale() else "")
    )
    print(
        f"model: {records[0].source['model']} v{records[0].source['model_version']}; assumptions: "
        + ", ".join(f"{k}={v}" for k, v in records[0].source["assumptions"].items())
    )
    if args.out:
        append_records(args.out, records)
        print(f"{len(records)} projected record(s) appended to {args.out}")
    return 0
