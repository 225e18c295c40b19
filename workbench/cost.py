"""Cost identities (InferenceX / NVIDIA "LLM inference costs" blog) and like-for-like price choice:

    $ per 1M tokens = ($/chip-hr) / (tokens/s per chip · 3600) · 1e6
    tokens per $     = tokens/s per chip · 3600 / ($/chip-hr)
    $ per run of N   = N / (tokens/s per chip · n_chips) / 3600 · $/chip-hr · n_chips
    J per token      = W per chip / tokens/s per chip

Prices are per chip-hour, so throughput must be per chip (not per device, not per node).

Chips are only compared at the same KIND of price (see :data:`tpu_workbench.bench.catalog.PRICE_KINDS`): a cloud
list price, a committed rental, an owner's TCO, a provider's internal cost. :func:`comparable_prices`
picks one price per chip within one kind (never the cheapest tier of each chip regardless of kind, which
would set Google's internal TPU cost beside a hyperscaler's ownership cost for a GPU); stale prices (no
month, older than a year, or superseded) are flagged, and skipped when a fresh one of the kind exists.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

from tpu_workbench.bench.catalog import KIND_MEANING, PRICE_KINDS, Chip, Price
from tpu_workbench.bench.errors import WorkbenchError, unknown

# kinds a headline may use when none is named, most widely available first; provider-internal never
HEADLINE_KINDS = ("owner-tco", "committed", "list")


@dataclass(frozen=True)
class CostLine:
    """Cost of throughput at one price, with the price's tier, kind, source, date and staleness."""

    tier: str
    usd_per_chip_hour: float
    usd_per_mtok: float
    tokens_per_usd: float
    price_source: str
    price_date: str
    price_kind: str = ""
    stale: str = ""  # '' = fresh, else why the price is stale

    def to_dict(self) -> dict:
        return asdict(self)


def usd_per_million_tokens(usd_per_chip_hour: float, tokens_per_s_per_chip: float) -> float:
    return usd_per_chip_hour / (tokens_per_s_per_chip * 3600.0) * 1e6


def tokens_per_usd(usd_per_chip_hour: float, tokens_per_s_per_chip: float) -> float:
    return tokens_per_s_per_chip * 3600.0 / usd_per_chip_hour


def usd_per_run(
    n_tokens: float, tokens_per_s_per_chip: float, n_chips: int, usd_per_chip_hour: float
) -> float:
    """Cost of processing ``n_tokens`` (e.g. a training run) on ``n_chips`` at that per-chip rate."""
    hours = n_tokens / (tokens_per_s_per_chip * n_chips) / 3600.0
    return hours * n_chips * usd_per_chip_hour


def joules_per_token(watts_per_chip: float, tokens_per_s_per_chip: float) -> float:
    return watts_per_chip / tokens_per_s_per_chip


def cost_line(price: Price, tokens_per_s_per_chip: float, today: dt.date | None = None) -> CostLine:
    return CostLine(
        price.tier,
        price.usd_per_chip_hour,
        usd_per_million_tokens(price.usd_per_chip_hour, tokens_per_s_per_chip),
        tokens_per_usd(price.usd_per_chip_hour, tokens_per_s_per_chip),
        price.source,
        price.date,
        price.kind,
        price.staleness(today),
    )


def cost_lines(
    prices: list[Price], tokens_per_s_per_chip: float, today: dt.date | None = None
) -> list[CostLine]:
    """One line per price (tier), each with its kind and stale flag."""
    return [cost_line(p, tokens_per_s_per_chip, today) for p in prices]


def price_kind(tier: str) -> str:
    """The kind of money a tier is ('list', 'committed', 'owner-tco', 'provider-internal', 'spot', 'custom')."""
    if tier not in PRICE_KINDS:
        raise WorkbenchError(unknown("price tier", tier, PRICE_KINDS))
    return PRICE_KINDS[tier]


def _check_kind(kind: str) -> None:
    if kind not in KIND_MEANING:
        raise WorkbenchError(unknown("price kind", kind, KIND_MEANING))


def pick_price(chip: Chip, kind: str, *, today: dt.date | None = None) -> Price | None:
    """The cheapest price of ``kind`` for ``chip``, preferring fresh prices to stale ones (a stale one is
    returned only when no fresh one of the kind exists; check ``price.staleness()``). None if it has none."""
    _check_kind(kind)
    prices = [p for p in chip.prices if p.kind == kind]
    fresh = [p for p in prices if not p.staleness(today)]
    pool = fresh or prices
    return min(pool, key=lambda p: p.usd_per_chip_hour) if pool else None


def kinds_in_common(chips: Iterable[Chip]) -> list[str]:
    """Price kinds every one of ``chips`` has (in HEADLINE_KINDS order first)."""
    chips = list(chips)
    sets = [{p.kind for p in c.prices} for c in chips]
    common = set.intersection(*sets) if sets else set()
    order = [*HEADLINE_KINDS, *(k for k in KIND_MEANING if k not in HEADLINE_KINDS)]
    return [k for k in order if k in common]


@dataclass(frozen=True)
class ComparablePrices:
    """One price per chip, all of one kind. ``missing`` names the chips without a price of that kind."""

    kind: str
    meaning: str
    prices: dict[str, Price | None]

    @property
    def missing(self) -> list[str]:
        return [name for name, p in self.prices.items() if p is None]

    def stale(self, today: dt.date | None = None) -> dict[str, str]:
        """Chip -> why its chosen price is stale (only stale ones)."""
        return {n: p.staleness(today) for n, p in self.prices.items() if p is not None and p.staleness(today)}


def comparable_prices(
    chips: Sequence[Chip], kind: str | None = None, *, today: dt.date | None = None
) -> ComparablePrices:
    """A like-for-like price per chip. ``kind=None`` takes the first of HEADLINE_KINDS that every chip has
    (else the first that most chips have); ``provider-internal`` is used only when asked for by name."""
    if kind is None:
        common = [k for k in kinds_in_common(chips) if k in HEADLINE_KINDS]
        if common:
            kind = common[0]
        else:
            counts = {k: sum(any(p.kind == k for p in c.prices) for c in chips) for k in HEADLINE_KINDS}
            kind = max(HEADLINE_KINDS, key=lambda k: (counts[k], -HEADLINE_KINDS.index(k)))
    _check_kind(kind)
    return ComparablePrices(
        kind, KIND_MEANING[kind], {c.name: pick_price(c, kind, today=today) for c in chips}
    )


def line_of_kind(lines: Sequence[dict], kind: str) -> dict | None:
    """From a record's ``cost`` list: the cheapest line of ``kind`` (fresh before stale), or None."""
    _check_kind(kind)
    of_kind = [c for c in lines if c.get("price_kind", PRICE_KINDS.get(c.get("tier", ""), "")) == kind]
    fresh = [c for c in of_kind if not c.get("stale")]
    pool = fresh or of_kind
    return min(pool, key=lambda c: c["usd_per_mtok"]) if pool else None


def energy(chip: Chip, tokens_per_s_per_chip: float) -> dict[str, float]:
    """J/token at the chip TDP and at SemiAnalysis all-in power, where the catalog knows them."""
    out: dict[str, float] = {}
    if chip.tdp_w:
        out["j_per_token_tdp"] = joules_per_token(chip.tdp_w, tokens_per_s_per_chip)
    if chip.allin_kw:
        out["j_per_token_allin"] = joules_per_token(chip.allin_kw * 1000, tokens_per_s_per_chip)
    return out
