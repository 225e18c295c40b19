"""Hardware catalog: chips, peaks per precision, memory, links and dated prices, loaded from data files.

The data lives in ``catalog/data/*.toml`` (not in code) so that every figure sits next to its source.
Users add or override chips and prices with their own TOML/JSON files (``load_catalog(extra_paths)``).
An unknown chip is an error listing the known ones: a silent default peak is how torchtitan reported
150-560 % "MFU" on chips it did not know.
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tpu_workbench.bench.catalog.prices import KIND_MEANING, PRICE_KINDS, PRICE_TIERS, Price, price_staleness
from tpu_workbench.bench.errors import WorkbenchError, unknown

DATA_DIR = Path(__file__).parent / "data"
GIB_TO_GB = 1.073741824
PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")
DIRECTIONS = ("uni", "bidir", "unspecified")
# how the scale-up domain is wired: a switch (NVLink), a full mesh of point-to-point links (AMD Infinity
# Fabric), or a torus of nearest-neighbour links (TPU ICI, Trainium NeuronLink)
TOPOLOGIES = ("switch", "full-mesh", "torus-2d", "torus-3d")


class UnknownChipError(WorkbenchError):
    """Raised for a chip name the catalog does not know; the message lists the known chips."""


class CatalogError(WorkbenchError):
    """A catalog data file is malformed (missing field, bad unit, negative number)."""


@dataclass(frozen=True)
class Chip:
    """One accelerator chip. Peaks are dense TFLOP/s per chip; divide by devices_per_chip for a device."""

    name: str
    vendor: str
    peak_tflops: dict[str, float]
    devices_per_chip: int
    hbm_gb: float
    hbm_bw_gbps: float
    scaleup_bw_gbps: float
    scaleup_direction: str
    scaleup_domain: int
    scaleup_link: str = ""
    tdp_w: float | None = None
    allin_kw: float | None = None
    prices: list[Price] = field(default_factory=list)
    aliases: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    notes: str = ""
    origin: str = ""
    scaleup_topology: str = "switch"
    ici_axis_gbytes_per_s: float | None = None
    ici_ports: int | None = None
    scaleup_peer_gbytes_per_s: float | None = None
    scaleout_gbits_per_s_per_chip: float | None = None
    scaleout_note: str = ""
    d2d_gbytes_per_s: float | None = None
    mxu_tile: int | None = None
    pod_chips: int | None = None
    chips_per_host: int = 8
    disputed: tuple[dict, ...] = ()

    @property
    def hbm_gbytes(self) -> float:
        """HBM capacity per chip in GB (10^9 bytes; GiB sources are converted on load)."""
        return self.hbm_gb

    @property
    def hbm_gbytes_per_device(self) -> float:
        """HBM per device (TPU v7: each TensorCore die has its own half of the HBM stacks)."""
        return self.hbm_gb / self.devices_per_chip

    @property
    def hbm_gbytes_per_s(self) -> float:
        """HBM bandwidth per chip in GB/s (the stored field ``hbm_bw_gbps`` is GB/s, not Gb/s)."""
        return self.hbm_bw_gbps

    @property
    def scaleout_gbytes_per_s_per_chip(self) -> float | None:
        """Scale-out (NIC / TPU DCN) bandwidth per chip and direction in GB/s, converted from the
        vendor's Gb/s figure (÷ 8)."""
        return None if self.scaleout_gbits_per_s_per_chip is None else self.scaleout_gbits_per_s_per_chip / 8

    def peak(self, precision: str, *, per: str = "chip") -> float:
        """Peak dense FLOP/s (not TFLOP/s) at ``precision`` per ``chip`` or per ``device``."""
        if precision not in self.peak_tflops:
            raise WorkbenchError(
                f"chip {self.name!r} has no catalog peak for precision {precision!r}; "
                f"known precisions for it: {', '.join(sorted(self.peak_tflops))}"
            )
        if per not in ("chip", "device"):
            raise WorkbenchError(unknown("peak basis", per, ("chip", "device")))
        value = self.peak_tflops[precision] * 1e12
        return value / self.devices_per_chip if per == "device" else value

    @property
    def peak_tflops_per_device(self) -> dict[str, float]:
        """Per-device peaks (TPU7x: half the chip; Trainium2 with LNC=2: a quarter)."""
        return {p: v / self.devices_per_chip for p, v in self.peak_tflops.items()}

    @property
    def scaleup_bw_uni_gbps(self) -> float:
        """One-direction scale-up bandwidth per chip in GB/s. 'unspecified' is treated as bidirectional
        (halved), the conservative reading."""
        return self.scaleup_bw_gbps if self.scaleup_direction == "uni" else self.scaleup_bw_gbps / 2

    @property
    def scaleup_gbytes_per_s_uni(self) -> float:
        """Same as :attr:`scaleup_bw_uni_gbps`, with the unit in the name."""
        return self.scaleup_bw_uni_gbps

    def price(self, tier: str) -> Price:
        """The price for one tier; error lists the tiers this chip has."""
        for p in self.prices:
            if p.tier == tier:
                return p
        raise WorkbenchError(
            f"chip {self.name!r} has no {tier!r} price; its tiers: "
            f"{', '.join(p.tier for p in self.prices) or '(none in the catalog)'}"
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for records and JSON output."""
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["prices"] = [{**vars(p), "kind": p.kind, "stale": p.staleness()} for p in self.prices]
        d["aliases"], d["sources"] = list(self.aliases), list(self.sources)
        d["peak_tflops"] = dict(self.peak_tflops)
        d["disputed"] = [dict(x) for x in self.disputed]
        return d


def _norm(name: str) -> str:
    return " ".join(name.lower().replace("_", " ").split())


class Catalog:
    """Chips by name (case-insensitive, aliases allowed)."""

    def __init__(self, chips: list[Chip]):
        self._chips: dict[str, Chip] = {}
        self._alias: dict[str, str] = {}
        for chip in chips:
            self.add(chip)

    def add(self, chip: Chip) -> None:
        """Add or replace a chip (a user file replacing a built-in one by the same name wins)."""
        self._chips[chip.name] = chip
        for key in (chip.name, *chip.aliases):
            self._alias[_norm(key)] = chip.name

    def names(self) -> list[str]:
        """Canonical chip names in catalog order."""
        return list(self._chips)

    def chips(self) -> list[Chip]:
        return list(self._chips.values())

    def __contains__(self, name: str) -> bool:
        return _norm(name) in self._alias

    def chip(self, name: str) -> Chip:
        """Look up by name or alias; unknown names raise UnknownChipError listing the known chips."""
        key = self._alias.get(_norm(name))
        if key is None:
            raise UnknownChipError(unknown("chip", name, self.names()))
        return self._chips[key]

    def match_device_name(self, device_name: str) -> Chip | None:
        """Best catalog chip for a device name such as 'NVIDIA H100 80GB HBM3' (longest alias contained)."""
        text = _norm(device_name)
        if "pcie" in text or re.search(r"\bnvl(?!72)", text):
            return None  # PCIe / NVL boards have other peaks and power than the SXM parts catalogued here
        best: tuple[int, str] | None = None
        for alias, chip_name in self._alias.items():
            if alias and alias in text and (best is None or len(alias) > best[0]):
                best = (len(alias), chip_name)
        return self._chips[best[1]] if best else None


def _positive(entry: dict, key: str, origin: str, *, required: bool = True) -> float | None:
    if key not in entry:
        if required:
            raise CatalogError(f"{origin}: chip {entry.get('name', '?')!r} is missing {key!r}")
        return None
    value = entry[key]
    if not _finite_positive(value):
        raise CatalogError(
            f"{origin}: chip {entry.get('name')!r} field {key!r} must be a positive number, got {value!r}"
        )
    return float(value)


def _parse_price(p: dict, chip: str, origin: str) -> Price:
    _check_table(p, PRICE_KEYS, origin, f"a price of {chip!r}")
    for key in ("tier", "usd_per_chip_hour", "source", "date"):
        if key not in p:
            raise CatalogError(f"{origin}: a price of {chip!r} is missing {key!r}")
    if p["tier"] not in PRICE_TIERS:
        raise CatalogError(f"{origin}: {chip!r} price tier {p['tier']!r} not one of {', '.join(PRICE_TIERS)}")
    if not _finite_positive(p["usd_per_chip_hour"]):
        raise CatalogError(
            f"{origin}: {chip!r} price must be a positive number (finite), got {p['usd_per_chip_hour']!r}"
        )
    return Price(
        p["tier"],
        float(p["usd_per_chip_hour"]),
        str(p["source"]),
        str(p["date"]),
        str(p.get("stale_note", "")),
    )


def _optional_int(entry: dict, key: str, origin: str) -> int | None:
    value = _positive(entry, key, origin, required=False)
    return None if value is None else int(value)


def _parse_disputed(entry: dict, origin: str) -> tuple[dict, ...]:
    out = []
    for d in entry.get("disputed", []):
        missing = [k for k in ("field", "value", "unit", "source") if k not in d]
        if missing:
            raise CatalogError(f"{origin}: a disputed figure of {entry.get('name')!r} is missing {missing}")
        out.append(dict(d))
    return tuple(out)


def parse_chip(entry: dict, origin: str) -> Chip:
    """Validate one chip table from a data file (units: GB, GB/s, TFLOP/s, W, kW)."""
    _check_table(entry, CHIP_KEYS, origin, "a chip entry")
    name = entry.get("name")
    if not name or not isinstance(name, str):
        raise CatalogError(f"{origin}: a chip entry has no name (a non-empty string)")
    for key in _TEXT_KEYS & entry.keys():
        if not isinstance(entry[key], str):
            raise CatalogError(f"{origin}: chip {name!r} field {key!r} must be a string, got {entry[key]!r}")
    for key, kind in _LIST_KEYS.items():
        if key in entry and not (
            isinstance(entry[key], list) and all(isinstance(v, kind) for v in entry[key])
        ):
            raise CatalogError(
                f"{origin}: chip {name!r} field {key!r} must be a list of "
                f"{'strings' if kind is str else 'tables'}, got {entry[key]!r}"[:300]
            )
    peaks = entry.get("peak_tflops")
    if not isinstance(peaks, dict) or not peaks:
        raise CatalogError(f"{origin}: chip {name!r} needs a non-empty peak_tflops table")
    for prec, value in peaks.items():
        if prec not in PRECISIONS:
            raise CatalogError(
                f"{origin}: chip {name!r} precision {prec!r} not one of {', '.join(PRECISIONS)}"
            )
        if not _finite_positive(value):
            raise CatalogError(f"{origin}: chip {name!r} peak {prec} must be a positive finite number")
    if "hbm_gb" in entry:
        hbm = _positive(entry, "hbm_gb", origin)
    elif "hbm_gib" in entry:
        hbm = _positive(entry, "hbm_gib", origin) * GIB_TO_GB
    else:
        raise CatalogError(f"{origin}: chip {name!r} needs hbm_gb or hbm_gib")
    direction = entry.get("scaleup_direction", "unspecified")
    if direction not in DIRECTIONS:
        raise CatalogError(
            f"{origin}: chip {name!r} scaleup_direction must be one of {', '.join(DIRECTIONS)}"
        )
    devices = entry.get("devices_per_chip", 1)
    if not isinstance(devices, int) or devices < 1:
        raise CatalogError(f"{origin}: chip {name!r} devices_per_chip must be a positive integer")
    topology = entry.get("scaleup_topology", "switch")
    if topology not in TOPOLOGIES:
        raise CatalogError(f"{origin}: chip {name!r} scaleup_topology must be one of {', '.join(TOPOLOGIES)}")
    if topology.startswith("torus") and "ici_axis_gbytes_per_s" not in entry:
        raise CatalogError(
            f"{origin}: torus chip {name!r} needs ici_axis_gbytes_per_s (ring bandwidth of one axis)"
        )
    return Chip(
        name=name,
        vendor=entry.get("vendor", ""),
        peak_tflops={k: float(v) for k, v in peaks.items()},
        devices_per_chip=devices,
        hbm_gb=hbm,
        hbm_bw_gbps=_positive(entry, "hbm_bw_gbps", origin),
        scaleup_bw_gbps=_positive(entry, "scaleup_bw_gbps", origin),
        scaleup_direction=direction,
        scaleup_domain=int(_positive(entry, "scaleup_domain", origin)),
        scaleup_link=entry.get("scaleup_link", ""),
        tdp_w=_positive(entry, "tdp_w", origin, required=False),
        allin_kw=_positive(entry, "allin_kw", origin, required=False),
        prices=[_parse_price(p, name, origin) for p in entry.get("prices", [])],
        aliases=tuple(entry.get("aliases", ())),
        sources=tuple(entry.get("sources", ())),
        notes=entry.get("notes", ""),
        origin=origin,
        scaleup_topology=topology,
        ici_axis_gbytes_per_s=_positive(entry, "ici_axis_gbytes_per_s", origin, required=False),
        ici_ports=_optional_int(entry, "ici_ports", origin),
        scaleup_peer_gbytes_per_s=_positive(entry, "scaleup_peer_gbytes_per_s", origin, required=False),
        scaleout_gbits_per_s_per_chip=_positive(
            entry, "scaleout_gbits_per_s_per_chip", origin, required=False
        ),
        scaleout_note=entry.get("scaleout_note", ""),
        d2d_gbytes_per_s=_positive(entry, "d2d_gbytes_per_s", origin, required=False),
        mxu_tile=_optional_int(entry, "mxu_tile", origin),
        pod_chips=_optional_int(entry, "pod_chips", origin),
        chips_per_host=_optional_int(entry, "chips_per_host", origin) or 8,
        disputed=_parse_disputed(entry, origin),
    )


def _finite_positive(value: object) -> bool:
    """A real positive number: not a bool (TOML true is no figure), not NaN, not infinite."""
    return (
        isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    )


CHIP_KEYS = frozenset(
    (
        "name vendor aliases sources notes peak_tflops devices_per_chip hbm_gb hbm_gib hbm_bw_gbps "
        "scaleup_bw_gbps scaleup_direction scaleup_domain scaleup_link scaleup_topology tdp_w allin_kw prices "
        "ici_axis_gbytes_per_s ici_ports scaleup_peer_gbytes_per_s scaleout_gbits_per_s_per_chip "
        "scaleout_note d2d_gbytes_per_s mxu_tile pod_chips chips_per_host disputed"
    ).split()
)
"""Every key a ``[[chip]]`` table may have: a misspelt one (``hbm_gbs``) is refused, not silently ignored."""
PRICE_KEYS = frozenset(("chip", "tier", "usd_per_chip_hour", "source", "date", "stale_note"))
_TEXT_KEYS = frozenset(("vendor", "notes", "scaleup_link", "scaleout_note", "scaleup_direction"))
_LIST_KEYS = {"aliases": str, "sources": str, "prices": dict, "disputed": dict}
FILE_KEYS = ("chip", "price")


def _check_table(table: object, known: frozenset[str], origin: str, what: str) -> None:
    if not isinstance(table, dict):
        raise CatalogError(f"{origin}: {what} must be a table, got {table!r}"[:300])
    unknown_keys = sorted(set(table) - known)
    if unknown_keys:
        raise CatalogError(
            f"{origin}: {what} has unknown key(s) {', '.join(map(repr, unknown_keys))}; "
            f"known: {', '.join(sorted(known))}"
        )


def _check_file(data: dict, path: Path) -> None:
    """Top level of a catalog file: only ``chip`` and ``price`` arrays of tables."""
    unknown_keys = sorted(set(data) - set(FILE_KEYS))
    if unknown_keys:
        raise CatalogError(
            f"{path}: unknown top-level key(s) {', '.join(map(repr, unknown_keys))}; a catalog file holds "
            "[[chip]] and [[price]] tables"
        )
    for key in FILE_KEYS:
        if key in data and not (isinstance(data[key], list) and all(isinstance(t, dict) for t in data[key])):
            raise CatalogError(
                f"{path}: {key!r} must be an array of tables ([[{key}]]), got {data[key]!r}"[:300]
            )


def _read(path: Path) -> dict:
    """The file's tables; a syntax error becomes one CatalogError naming the file (and the parser's line)."""
    try:
        if path.suffix == ".toml":
            with path.open("rb") as f:
                return tomllib.load(f)
        if path.suffix == ".json":
            data = json.loads(path.read_text(), parse_constant=_no_constant)
            if not isinstance(data, dict):
                raise CatalogError(f"{path}: a catalog file is a JSON object with chip/price arrays")
            return data
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(f"{path}: not valid TOML: {exc}") from None
    except json.JSONDecodeError as exc:
        raise CatalogError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    except _NotANumber as exc:
        raise CatalogError(f"{path}: {exc}") from None
    except UnicodeDecodeError:
        raise CatalogError(f"{path}: not UTF-8 text") from None
    raise CatalogError(f"{path}: catalog files must be .toml or .json")


class _NotANumber(ValueError):
    pass


def _no_constant(name: str):
    raise _NotANumber(f"{name} is not a number a catalog can hold (JSON has no NaN or Infinity)")


def _header_lines(path: Path, table: str) -> list[int]:
    """Line numbers of each ``[[table]]`` header in a TOML file (so an entry's error names its line)."""
    if path.suffix != ".toml":
        return []
    return [
        i
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if line.strip().startswith(f"[[{table}]]")
    ]


def _origin(path: Path, lines: list[int], k: int) -> str:
    return f"{path}:{lines[k]}" if k < len(lines) else str(path)


def load_catalog(extra_paths: tuple[str | Path, ...] | list[str | Path] = ()) -> Catalog:
    """Built-in chips plus user files. A user file may define ``[[chip]]`` entries (new chips or full
    replacements) and ``[[price]]`` entries (``chip = "H100 SXM"`` plus a price) appended to known chips."""
    catalog = Catalog([])
    for path in sorted(DATA_DIR.glob("*.toml")) + sorted(DATA_DIR.glob("*.json")):
        for entry in _read(path).get("chip", []):
            catalog.add(parse_chip(entry, path.name))
    for extra in extra_paths:
        path = Path(extra)
        if not path.exists():
            raise WorkbenchError(f"catalog file not found: {path}")
        if not path.is_file():
            raise WorkbenchError(f"catalog file is not a regular file: {path}")
        data = _read(path)
        _check_file(data, path)
        chip_lines, price_lines = _header_lines(path, "chip"), _header_lines(path, "price")
        for k, entry in enumerate(data.get("chip", [])):
            catalog.add(parse_chip(entry, _origin(path, chip_lines, k)))
        for k, p in enumerate(data.get("price", [])):
            origin = _origin(path, price_lines, k)
            _check_table(p, PRICE_KEYS, origin, "a [[price]] entry")
            if not isinstance(p.get("chip", ""), str):
                raise CatalogError(
                    f"{origin}: a [[price]] entry's chip must be a chip name, got {p['chip']!r}"
                )
            try:
                chip = catalog.chip(p.get("chip", ""))
            except WorkbenchError as exc:
                raise CatalogError(f"{origin}: {exc}") from None
            price = _parse_price(p, chip.name, origin)
            catalog.add(_with_prices(chip, [*chip.prices, price]))
    return catalog


def _with_prices(chip: Chip, prices: list[Price]) -> Chip:
    d = {k: getattr(chip, k) for k in chip.__dataclass_fields__}
    d["prices"] = prices
    return Chip(**d)


__all__ = [
    "Catalog",
    "CatalogError",
    "Chip",
    "KIND_MEANING",
    "PRICE_KINDS",
    "PRICE_TIERS",
    "PRECISIONS",
    "Price",
    "TOPOLOGIES",
    "UnknownChipError",
    "load_catalog",
    "price_staleness",
]
