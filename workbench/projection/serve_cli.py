"""``tpu-bench project --serve``: the serving model from the command line: $/M output and input tokens per chip
at an interactivity target for a request mix, the cheapest deployment per chip (``--search``), and TTFT /
TPOT percentiles of a JSONL trace (``--trace``, discrete-event simulation)."""

from __future__ import annotations

import argparse
import math

from tpu_workbench.bench.catalog import load_catalog
from tpu_workbench.bench.cost import comparable_prices
from tpu_workbench.bench.errors import WorkbenchError
from tpu_workbench.bench.projection.requests import NAMED_MIXES, load_trace
from tpu_workbench.bench.projection.serving import ServingDeployment, StepModel, at_interactivity
from tpu_workbench.bench.projection.serving_sim import simulate
from tpu_workbench.bench.projection.serving_validation import engine_overhead
from tpu_workbench.bench.projection.shape import load_hf_config
from tpu_workbench.bench.workloads.config import get_config

SEARCH_COUNTS = (1, 2, 4, 8)


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("serving (--serve)")
    g.add_argument(
        "--serve",
        action="store_true",
        help="serving model: continuous batching, KV capacity, $/M at --target",
    )
    g.add_argument(
        "--mix", default="1k/1k", help=f"input/output tokens per request: {', '.join(NAMED_MIXES)} or IN/OUT"
    )
    g.add_argument(
        "--target", type=float, default=20.0, help="interactivity target, output tok/s per user (default 20)"
    )
    g.add_argument(
        "--search", action="store_true", help="the cheapest deployment per chip (chip counts x layouts)"
    )
    g.add_argument(
        "--trace",
        default=None,
        metavar="JSONL",
        help="simulate this trace (input_tokens, output_tokens, arrival_s)",
    )
    g.add_argument(
        "--config-json", default=None, metavar="FILE", help="model shape from a transformers config.json"
    )


def parse_mix(text: str) -> tuple[int, int]:
    if text in NAMED_MIXES:
        return NAMED_MIXES[text]
    try:
        i, o = (int(x) for x in text.split("/"))
    except ValueError:
        raise WorkbenchError(
            f"bad --mix {text!r}: use {', '.join(NAMED_MIXES)} or IN/OUT tokens, e.g. 2048/512"
        ) from None
    if i < 1 or o < 1:
        raise WorkbenchError(f"bad --mix {text!r}: lengths must be >= 1")
    return i, o


def _candidates(cfg, n: int) -> list[str]:
    out = ["tp" if n > 1 else "dp"]
    if cfg.is_moe and n > 1 and cfg.n_experts % n == 0:
        out.append(f"dp={n},ep={n}")
    return out


def run_serve(args) -> int:
    """Handler of ``--serve``; returns the exit status."""
    import pandas as pd  # lazy: startup

    if args.out:
        raise WorkbenchError("--serve writes no records (-o): its rows are printed only")
    if not math.isfinite(args.target) or args.target <= 0:
        raise WorkbenchError(f"--target must be a number > 0, not {args.target}")
    cfg, shape = load_hf_config(args.config_json) if args.config_json else (get_config(args.workload), None)
    mix = parse_mix(args.mix)
    if sum(mix) > cfg.max_seq:
        raise WorkbenchError(
            f"--mix {args.mix} ({sum(mix)} positions) exceeds {cfg.name}'s context ({cfg.max_seq})"
        )
    catalog = load_catalog(args.catalog_file)
    chips = [catalog.chip(c) for c in args.chip]
    for c in chips:
        c.peak(args.precision)  # a precision the chip has no peak for: one-line error
    prices = comparable_prices(chips, args.price_kind)
    rows = []
    for chip in chips:
        price = prices.prices[chip.name]
        counts = SEARCH_COUNTS if args.search else tuple(args.chips)
        options = []
        for n in counts:
            for layout in _candidates(cfg, n) if args.search else [args.layout]:
                d = ServingDeployment(
                    chip.name,
                    n,
                    layout,
                    precision=args.precision,
                    kv_precision=args.kv_precision,
                    seq_overhead_s=engine_overhead(chip.name),
                )
                try:
                    m = StepModel.build(cfg, d, shape=shape, catalog=catalog)
                except WorkbenchError as e:
                    options.append({"chip": chip.name, "chips": n, "layout": layout, "why not": str(e)})
                    continue
                p = at_interactivity(m, *mix, args.target, price.usd_per_chip_hour if price else 1.0)
                row = {"chip": chip.name, "chips": n, "layout": layout}
                if p.infeasible or price is None:
                    options.append({**row, "why not": p.infeasible or f"no {prices.kind} price"})
                    continue
                st = p.state
                options.append(
                    {
                        **row,
                        "concurrency": st.concurrency,
                        "tok/s/user": st.tok_s_per_user,
                        "out tok/s/chip": st.output_tok_s_per_chip,
                        "TTFT s": st.ttft_s,
                        "$/M output": p.usd_per_m_output,
                        "$/M input": p.usd_per_m_input,
                        "why not": "",
                    }
                )
                if args.trace:
                    reqs = load_trace(args.trace, cfg.max_seq)
                    s = simulate(m, reqs).summary()
                    options[-1].update(
                        {k: s[k] for k in ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s")}
                    )
        priced = [o for o in options if not o["why not"]]
        if args.search:
            rows.append(min(priced, key=lambda o: o["$/M output"]) if priced else options[0])
        else:
            rows += options
    with pd.option_context("display.width", 250, "display.float_format", "{:,.4g}".format):
        print(pd.DataFrame(rows).fillna("").to_string(index=False))
    print(
        f"projected (serving model): {cfg.name}, {mix[0]} in / {mix[1]} out, >= {args.target:g} output tok/s/user, "
        f"{args.precision} weights, KV {args.kv_precision or 'as activations'}; prices: {prices.kind}"
        + ("; --search: cheapest $/M output over chip counts x layouts" if args.search else "")
    )
    return 0
