"""Cost identities (InferenceX / NVIDIA "LLM inference costs" blog):

    $ per 1M tokens = ($/chip-hr) / (tokens/s per chip · 3600) · 1e6
    tokens per $     = tokens/s per chip · 3600 / ($/chip-hr)
    $ per run of N   = N / (tokens/s per chip · n_chips) / 3600 · $/chip-hr · n_chips
    J per token      = W per chip / tokens/s per chip

Prices are per chip-hour, so throughput must be per chip (not per device, not per node).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from workbench.catalog import Chip, Price


@dataclass(frozen=True)
class CostLine:
    """Cost of throughput at one price tier, with the price's source and date."""

    tier: str
    usd_per_chip_hour: float
    usd_per_mtok: float
    tokens_per_usd: float
    price_source: str
    price_date: str

    def to_dict(self) -> dict:
        return asdict(self)


def usd_per_million_tokens(usd_per_chip_hour: float, tokens_per_s_per_chip: float) -> float:
    return usd_per_chip_hour / (tokens_per_s_per_chip * 3600.0) * 1e6


def tokens_per_usd(usd_per_chip_hour: float, tokens_per_s_per_chip: float) -> float:
    return tokens_per_s_per_chip * 3600.0 / usd_per_chip_hour


def usd_per_run(n_tokens: float, tokens_per_s_per_chip: float, n_chips: int, usd_per_chip_hour: float) -> float:
    """Cost of processing ``n_tokens`` (e.g. a training run) on ``n_chips`` at that per-chip rate."""
    hours = n_tokens / (tokens_per_s_per_chip * n_chips) / 3600.0
    return hours * n_chips * usd_per_chip_hour


def joules_per_token(watts_per_chip: float, tokens_per_s_per_chip: float) -> float:
    return watts_per_chip / tokens_per_s_per_chip


def cost_lines(prices: list[Price], tokens_per_s_per_chip: float) -> list[CostLine]:
    """One line per price tier."""
    return [CostLine(p.tier, p.usd_per_chip_hour, usd_per_million_tokens(p.usd_per_chip_hour, tokens_per_s_per_chip),
                     tokens_per_usd(p.usd_per_chip_hour, tokens_per_s_per_chip), p.source, p.date)
            for p in prices]


def energy(chip: Chip, tokens_per_s_per_chip: float) -> dict[str, float]:
    """J/token at the chip TDP and at SemiAnalysis all-in power, where the catalog knows them."""
    out: dict[str, float] = {}
    if chip.tdp_w:
        out["j_per_token_tdp"] = joules_per_token(chip.tdp_w, tokens_per_s_per_chip)
    if chip.allin_kw:
        out["j_per_token_allin"] = joules_per_token(chip.allin_kw * 1000, tokens_per_s_per_chip)
    return out
