"""Dated prices per chip-hour: their tier, the kind of money a tier is, and whether a price is stale.

A price is only comparable with another of the same *kind*: a cloud list price, a committed rental,
an owner's total cost of ownership, or a provider's internal cost are different quantities (Google's
internal TPU cost beside a hyperscaler's ownership cost for a GPU is not a like-for-like comparison).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

PRICE_TIERS = (
    "on-demand",
    "capacity-block",
    "commit-1yr",
    "rent-3yr",
    "own-hyperscaler",
    "own-neocloud",
    "own-internal",
    "spot",
    "custom",
)

# tier -> kind of price; headlines compare chips within one kind only
PRICE_KINDS: dict[str, str] = {
    "on-demand": "list",
    "capacity-block": "list",
    "spot": "spot",
    "commit-1yr": "committed",
    "rent-3yr": "committed",
    "own-hyperscaler": "owner-tco",
    "own-neocloud": "owner-tco",
    "own-internal": "provider-internal",
    "custom": "custom",
}
KIND_MEANING = {
    "list": "a cloud's published rate for renting the chip (on-demand or a capacity block)",
    "spot": "an interruptible market rate",
    "committed": "a rate for a 1- or 3-year rental commitment",
    "owner-tco": "an owner's all-in cost per chip-hour (capex + power + operations; SemiAnalysis TCO model)",
    "provider-internal": "a chip maker's or cloud's own internal cost (not available to customers)",
    "custom": "a user-supplied price",
}
STALE_AFTER_DAYS = 365


@dataclass(frozen=True)
class Price:
    """One dated price for one chip-hour; the tier says what kind of money it is (rent vs own).
    ``stale_note`` marks a price the source itself says was superseded (e.g. before a price cut)."""

    tier: str
    usd_per_chip_hour: float
    source: str
    date: str
    stale_note: str = ""

    @property
    def kind(self) -> str:
        return PRICE_KINDS[self.tier]

    def staleness(self, today: dt.date | None = None) -> str:
        """Why this price is stale on ``today`` ('' when it is not): no month in its date, older than a
        year, or superseded according to its source."""
        return price_staleness(self.date, self.stale_note, today)


def parse_price_date(date: str) -> tuple[dt.date | None, str]:
    """(first day the date can mean, precision 'day' | 'month' | 'year'); (None, '') if unreadable."""
    m = re.fullmatch(r"\s*(\d{4})(?:-(\d{1,2}))?(?:-(\d{1,2}))?\s*", date or "")
    if not m:
        return None, ""
    year, month, day = int(m.group(1)), m.group(2), m.group(3)
    if month is None:
        return dt.date(year, 1, 1), "year"
    if day is None:
        return dt.date(year, int(month), 1), "month"
    return dt.date(year, int(month), int(day)), "day"


def price_staleness(date: str, stale_note: str = "", today: dt.date | None = None) -> str:
    """'' for a fresh price, else the reasons it is stale (joined with '; ')."""
    today = today or dt.date.today()
    reasons = []
    start, precision = parse_price_date(date)
    if start is None:
        reasons.append(f"date {date!r} unreadable")
    elif precision == "year":
        reasons.append(f"dated only by year ({date})")
    elif (today - start).days > STALE_AFTER_DAYS:
        reasons.append(f"older than a year ({date}, as of {today.isoformat()})")
    if stale_note:
        reasons.append(stale_note)
    return "; ".join(reasons)
