"""Time of collectives on the real fabric: a switch (NVLink), a full mesh (AMD Infinity Fabric) or a torus
(TPU ICI), inside one scale-up domain, plus scale-out links (NICs / TPU DCN) beyond it.

- Ring collectives (all-gather, reduce-scatter, all-reduce) on a torus run along every axis the group
  spans at once: bandwidth = axes x the one-axis ring bandwidth (``ici_axis_gbytes_per_s``).
- All-to-all on a torus: every byte crosses the mean hop count of the group's sub-torus (k/4 per
  wrapped axis of k chips, (k²-1)/(3k) on an unwrapped line), sharing 2 links per spanned axis; it is
  several times slower than a ring collective of the same volume.
- Full mesh: each peer has its own link (MI300X: 7 x 64 GB/s), so a collective runs over all peer links.
- Switch: one hop at the per-chip one-direction link bandwidth.
- A group larger than the domain is hierarchical: the in-domain part on scale-up links, 1/g of the data
  over scale-out links (as NCCL's rings over rail-optimised NICs, or TPU multi-slice over DCN).
"""

from __future__ import annotations

from dataclasses import dataclass

from tpu_workbench.bench.catalog import Chip
from tpu_workbench.bench.errors import WorkbenchError
from tpu_workbench.bench.projection.assumptions import Assumptions


def torus_shape(chips: int, dims: int) -> tuple[int, ...]:
    """Near-cubic torus shape for ``chips`` (TPU slices: 256 = 4x8x8 in 3D, 16x16 in 2D), smallest first."""
    shape = [1] * dims
    n, p, factors = chips, 2, []
    while n > 1:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    for f in sorted(factors, reverse=True):
        shape.sort()
        shape[0] *= f
    return tuple(sorted(shape))


def spanned_extents(shape: tuple[int, ...], inner: int, size: int) -> list[tuple[int, bool]]:
    """(extent, wraps) on each torus axis for a group of ``size`` chips whose members are ``inner`` chips
    apart (inner axes fill the torus first). ``wraps``: the group covers the whole axis (ring links)."""
    out, cum, remaining = [], max(inner, 1), size
    for s in shape:
        if remaining <= 1:
            break
        if cum >= s:
            cum //= s
            continue
        take = min(s // cum, remaining)
        out.append((take, take == s))
        remaining //= take
        cum = 1
    if remaining > 1:  # does not fit the domain's torus: the caller splits it hierarchically first
        out.append((remaining, False))
    return out


def mean_hops(extent: int, wraps: bool) -> float:
    """Mean shortest distance between two chips on a ring (wraps) or a line of ``extent`` chips."""
    if extent <= 1:
        return 0.0
    if wraps:
        return extent / 4 if extent % 2 == 0 else (extent * extent - 1) / (4 * extent)
    return (extent * extent - 1) / (3 * extent)


@dataclass(frozen=True)
class Fabric:
    """Links of one chip, in bytes per second (collective efficiency applied), and the domain size."""

    topology: str
    domain: int
    shape: tuple[int, ...]
    axis_bytes_per_s: float  # torus: ring bandwidth along one axis (both directions)
    link_bytes_per_s: float  # switch: per-chip one-direction bandwidth; torus: one link, one direction
    peer_bytes_per_s: float  # full mesh: one peer link, one direction
    scaleout_bytes_per_s: float
    d2d_bytes_per_s: float | None
    latency_s: float
    inputs: dict

    @classmethod
    def for_chip(cls, chip: Chip, a: Assumptions, *, slice_chips: int | None = None) -> Fabric:
        eff = a.collective_efficiency
        domain = slice_chips or a.scaleup_domain or chip.scaleup_domain
        out_gbytes = a.scaleout_gbytes_per_s_per_chip
        out_basis = "assumption scaleout_gbytes_per_s_per_chip"
        if out_gbytes is None:
            out_gbytes = chip.scaleout_gbytes_per_s_per_chip
            out_basis = (
                f"catalog {chip.scaleout_gbits_per_s_per_chip:g} Gb/s per chip / 8 ({chip.scaleout_note})"
                if out_gbytes is not None
                else ""
            )
        topo = chip.scaleup_topology
        axis = (chip.ici_axis_gbytes_per_s or 0.0) * 1e9 * eff
        if topo.startswith("torus"):
            shape = torus_shape(domain, 2 if topo == "torus-2d" else 3)
            link = axis / 2
        else:
            shape, link = (domain,), chip.scaleup_bw_uni_gbps * 1e9 * eff
        peer = (chip.scaleup_peer_gbytes_per_s or 0.0) * 1e9 * eff
        inputs = {
            "topology": {"value": topo, "unit": "-", "source": f"catalog {chip.name} scaleup_topology"},
            "scaleup_domain_chips": {
                "value": domain,
                "unit": "chips",
                "source": "slice size of the setting"
                if slice_chips
                else (
                    "assumption scaleup_domain" if a.scaleup_domain else f"catalog {chip.name} scaleup_domain"
                ),
            },
            "torus_shape": {
                "value": list(shape),
                "unit": "chips per axis",
                "source": "near-cubic factorisation of the domain (torus_shape)",
            }
            if topo.startswith("torus")
            else None,
            "ici_axis_gbytes_per_s": {
                "value": chip.ici_axis_gbytes_per_s,
                "unit": "GB/s",
                "source": f"catalog {chip.name}",
            }
            if topo.startswith("torus")
            else None,
            "scaleup_gbytes_per_s_uni": {
                "value": chip.scaleup_bw_uni_gbps,
                "unit": "GB/s per direction",
                "source": f"catalog {chip.name} scaleup_bw_gbps ({chip.scaleup_direction})",
            },
            "scaleup_peer_gbytes_per_s": {
                "value": chip.scaleup_peer_gbytes_per_s,
                "unit": "GB/s per peer",
                "source": f"catalog {chip.name}",
            }
            if topo == "full-mesh"
            else None,
            "scaleout_gbytes_per_s_per_chip": {
                "value": out_gbytes,
                "unit": "GB/s per chip and direction",
                "source": out_basis or "unknown: not in the catalog",
            },
            "d2d_gbytes_per_s": {
                "value": chip.d2d_gbytes_per_s,
                "unit": "GB/s",
                "source": f"catalog {chip.name}",
            }
            if chip.devices_per_chip > 1
            else None,
            "collective_efficiency": {"value": eff, "unit": "fraction", "source": "assumption"},
        }
        return cls(
            topo,
            domain,
            shape,
            axis,
            link,
            peer,
            (out_gbytes or 0.0) * 1e9 * eff,
            None if chip.d2d_gbytes_per_s is None else chip.d2d_gbytes_per_s * 1e9,
            a.collective_latency_us * 1e-6,
            {k: v for k, v in inputs.items() if v is not None},
        )

    # -- helpers ---------------------------------------------------------------------------------------------

    def _split(self, size: int, inner: int) -> tuple[int, int]:
        """(g, k): g members of the group share a scale-up domain, k such groups talk over scale-out."""
        g = max(min(size, self.domain // max(inner, 1)), 1)
        while size % g:
            g -= 1
        return g, size // g

    def _need_scaleout(self) -> float:
        if self.scaleout_bytes_per_s <= 0:
            raise WorkbenchError(
                "this setting crosses the scale-up domain but the chip has no scale-out "
                "bandwidth in the catalog; pass scaleout_gbytes_per_s_per_chip"
            )
        return self.scaleout_bytes_per_s

    def _ring_bw(self, g: int, inner: int) -> float:
        """Bytes/s one chip moves in a ring collective over g in-domain members."""
        if self.topology.startswith("torus"):
            axes = [e for e, _ in spanned_extents(self.shape, inner, g) if e > 1]
            return max(len(axes), 1) * self.axis_bytes_per_s
        if self.topology == "full-mesh":
            return (g - 1) * self.peer_bytes_per_s
        return self.link_bytes_per_s

    # -- collectives -----------------------------------------------------------------------------------------

    def ring(self, volume: float, size: int, inner: int = 1, factor: float = 1.0) -> float:
        """All-gather / reduce-scatter (factor 1) or all-reduce (factor 2) of ``volume`` bytes (the full,
        gathered size) over ``size`` chips whose members are ``inner`` chips apart."""
        if size <= 1 or volume <= 0:
            return 0.0
        g, k = self._split(size, inner)
        t = factor * volume * (g - 1) / g / self._ring_bw(g, inner) if g > 1 else 0.0
        if k > 1:
            t += factor * (volume / g) * (k - 1) / k / self._need_scaleout()
        return t + self.latency_s

    def all_to_all(self, volume: float, size: int, inner: int = 1) -> float:
        """``volume`` bytes leaving each chip, spread evenly over ``size`` peers."""
        if size <= 1 or volume <= 0:
            return 0.0
        g, _ = self._split(size, inner)
        t = 0.0
        local = volume * (g - 1) / size  # bytes to in-domain peers
        if g > 1:
            if self.topology.startswith("torus"):
                ext = spanned_extents(self.shape, inner, g)
                hops = sum(mean_hops(e, w) for e, w in ext)
                t += local * hops / (2 * len(ext) * self.link_bytes_per_s)
            elif self.topology == "full-mesh":
                t += local / ((g - 1) * self.peer_bytes_per_s)
            else:
                t += local / self.link_bytes_per_s
        if size > g:
            t += volume * (size - g) / size / self._need_scaleout()
        return t + self.latency_s

    def across_slices(self, volume: float, slices: int) -> float:
        """All-reduce of ``volume`` bytes per chip with the same chip of every other slice (over DCN)."""
        if slices <= 1 or volume <= 0:
            return 0.0
        return 2 * volume * (slices - 1) / slices / self._need_scaleout() + self.latency_s

    def die_to_die(self, volume: float) -> float:
        """Copy of ``volume`` bytes between the two devices of one chip (TPU v7 dies)."""
        if not self.d2d_bytes_per_s or volume <= 0:
            return 0.0
        return volume / self.d2d_bytes_per_s
