"""The demo report's first screen: which chip, at what $ per million tokens, from which price — the answer a
buyer came for, before the details (issue 34: it sat ~400 lines down an 85 KB report).

One row per phase and kind of price: chips are ranked only within one kind (an owner's TCO is never ranked
against a list price), the token kind is named (training tokens vs output tokens are different goods), and
each figure says it is projected and which dated, sourced price it used.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from tpu_workbench.bench.analysis import fits_in_memory
from tpu_workbench.bench.catalog.prices import KIND_MEANING
from tpu_workbench.bench.cost import HEADLINE_KINDS, line_of_kind
from tpu_workbench.bench.tables import fmt

TOKENS = {"train": "training tokens", "prefill": "prompt tokens", "decode": "output tokens"}


def verdict_table(records: Sequence, kinds: Sequence[str] = HEADLINE_KINDS) -> pd.DataFrame:
    """Cheapest chip per (phase, price kind) among projected records that fit in memory, with the runner-up
    and the price used (tier, $/chip-hour, date, source)."""
    rows = []
    for phase in dict.fromkeys(r.phase for r in records):
        for kind in kinds:
            ranked = sorted(
                (line["usd_per_mtok"], r.chip, line)
                for r in records
                if r.phase == phase and fits_in_memory(r)
                for line in [line_of_kind(r.cost, kind)]
                if line
            )
            if not ranked:
                continue
            usd, chip, line = ranked[0]
            rows.append(
                {
                    "phase": phase,
                    "price kind": kind,
                    "cheapest chip": chip,
                    "$ per M tokens": f"${fmt(usd)} per M {TOKENS.get(phase, 'tokens')}",
                    "runner-up": f"{ranked[1][1]} ${fmt(ranked[1][0])}" if len(ranked) > 1 else "-",
                    "price used (projected x catalog price)": (
                        f"{line['tier']} ${line['usd_per_chip_hour']:g}/chip-h, {line['price_date']}"
                        + (" (stale)" if line.get("stale") else "")
                        + f"; {str(line.get('price_source', ''))[:60]}"
                    ),
                }
            )
    return pd.DataFrame(rows)


def kinds_legend(table: pd.DataFrame) -> str:
    """What each kind of price in the table means (one line each)."""
    kinds = list(dict.fromkeys(table["price kind"])) if len(table) else []
    return "".join(f"- **{k}**: {KIND_MEANING[k]}\n" for k in kinds)
