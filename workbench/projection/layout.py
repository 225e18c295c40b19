"""Parallel layouts: how the chips of a run split data, weights, heads and experts.

Axes nest tp ⊂ ep/fsdp ⊂ dp: tensor parallelism is innermost (its all-reduces need the fastest links),
FSDP shards weights inside a slice (ICI/NVLink domain), and data parallelism spans what is left, in
particular the slices of a multi-slice TPU run (hybrid sharding: FSDP inside a slice, DP across slices
over the data-center network). ``ep`` shards experts inside the dp·fsdp chips.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

from tpu_workbench.bench.errors import WorkbenchError, unknown
from tpu_workbench.bench.workloads.config import DecoderConfig

LAYOUTS = ("dp", "fsdp", "tp", "fsdp+tp", "ep", "fsdp+ep", "tp+ep")


@dataclass(frozen=True)
class Layout:
    """Parallel degrees; dp·fsdp·tp = chips. ep shards experts inside the dp·fsdp chips. ``slices``: how
    many scale-up domains (TPU slices) the chips span, joined by the data-center network. Normally the dp
    axis spans them (hybrid sharding); when dp does not divide by ``slices`` the FSDP axis itself crosses
    the DCN (MaxText dcn_fsdp_parallelism)."""

    dp: int = 1
    fsdp: int = 1
    tp: int = 1
    ep: int = 1
    slices: int = 1
    pp: int = 1  # pipeline stages (training), outermost: each chip holds n_layers / pp layers
    vpp: int = 1  # virtual stages per chip: interleaved 1F1B (1 = plain 1F1B)
    microbatches: int = 0  # per pipeline per step; 0 = one sequence each
    cp: int = 1  # context parallelism: groups of cp of the dp x fsdp chips split each sequence

    @property
    def n_chips(self) -> int:
        return self.dp * self.fsdp * self.tp * self.pp

    def pipeline_microbatches(self, batch: float) -> int:
        """Micro-batches per pipeline per step: the layout's, else one sequence each (a pipeline's tp x cp
        group at each stage sees ``batch`` x pp x tp x cp sequences; ``batch`` per chip)."""
        return self.microbatches or max(round(batch * self.pp * self.tp * self.cp), 1)

    def bubble_fraction(self, batch: float) -> float:
        """Idle share of a 1F1B pipeline over its busy time: (pp - 1) / (vpp x m) (Narayanan et al. 2021)."""
        return (self.pp - 1) / (self.vpp * self.pipeline_microbatches(batch)) if self.pp > 1 else 0.0

    def stage_imbalance(self, n_layers: int) -> float:
        """The slowest stage's layers over the mean: ceil(L / (pp x vpp)) x pp x vpp / L (uneven split)."""
        stages = self.pp * self.vpp
        return math.ceil(n_layers / stages) * stages / n_layers if self.pp > 1 else 1.0

    def inflight_activations(self, batch: float) -> float:
        """Share of a step's activations the first stage holds at once: min(pp, m) of m micro-batches
        (1F1B), times 1 + (pp - 1) / (pp x vpp) when interleaved; 1 without a pipeline."""
        if self.pp == 1:
            return 1.0
        m = self.pipeline_microbatches(batch)
        return min(self.pp, m) / m * (1 + (self.pp - 1) / (self.pp * self.vpp) if self.vpp > 1 else 1.0)

    @property
    def dp_across_slices(self) -> int:
        return self.slices if self.dp % self.slices == 0 else 1

    @property
    def dp_in_slice(self) -> int:
        return self.dp // self.dp_across_slices

    def label(self) -> str:
        return ",".join(f"{k}={v}" for k, v in asdict(self).items() if v > 1) or "single"


def _explicit(layout: str, n_chips: int) -> Layout:
    try:
        parts = dict(p.split("=") for p in layout.replace(" ", "").split(","))
        lay = Layout(**{k: int(v) for k, v in parts.items()})
    except (TypeError, ValueError):
        raise WorkbenchError(
            f"bad layout {layout!r}; write e.g. 'dp=2,fsdp=64,tp=4,ep=8' (keys dp, fsdp, tp, ep, slices; "
            "training also pp, vpp, microbatches, cp)"
        ) from None
    if lay.n_chips != n_chips:
        raise WorkbenchError(f"layout {layout!r} uses dp*fsdp*tp*pp = {lay.n_chips} chips, not {n_chips}")
    if min(lay.pp, lay.vpp, lay.cp) < 1 or lay.microbatches < 0:
        raise WorkbenchError(f"layout {layout!r}: pp, vpp and cp must be >= 1, microbatches >= 0")
    return lay


def resolve_layout(
    layout: str, n_chips: int, cfg: DecoderConfig, domain: int, max_tp: int, *, slices: int = 1
) -> Layout:
    """A named layout (see LAYOUTS) or an explicit 'dp=..,fsdp=..,tp=..,ep=..' for ``n_chips``.

    With ``slices`` > 1 the named FSDP layouts become hybrid: FSDP over the chips of one slice, data
    parallel across the slices."""
    if n_chips < 1:
        raise WorkbenchError("n_chips must be >= 1")
    if slices < 1 or n_chips % slices:
        raise WorkbenchError(f"slices={slices} must divide the chip count {n_chips}")
    if "=" in layout:
        lay = _explicit(layout, n_chips)
        if slices > 1 and lay.slices == 1:
            lay = replace(lay, slices=slices)
    else:
        if layout not in LAYOUTS:
            raise WorkbenchError(unknown("layout", layout, LAYOUTS) + " or 'dp=..,fsdp=..,tp=..,ep=..'")
        if "ep" in layout and not cfg.is_moe:
            raise WorkbenchError(f"layout {layout!r} needs a MoE model; {cfg.name} is dense")
        per_slice = n_chips // slices
        tp = math.gcd(per_slice, min(domain, max_tp, cfg.n_heads)) if "tp" in layout else 1
        rest = per_slice // tp
        ep = math.gcd(rest, cfg.n_experts) if "ep" in layout else 1
        if layout == "dp":
            lay = Layout(dp=n_chips, slices=slices)
        elif layout in ("fsdp", "fsdp+tp", "fsdp+ep"):
            lay = Layout(dp=slices, fsdp=rest, tp=tp, ep=ep, slices=slices)
        else:  # tp, ep, tp+ep: data parallel across the rest
            lay = Layout(dp=rest * slices, tp=tp, ep=ep, slices=slices)
    if lay.dp % lay.slices and lay.fsdp % lay.slices:
        raise WorkbenchError(
            f"slices={lay.slices} must divide the data-parallel degree (dp={lay.dp}) or the "
            f"FSDP degree (fsdp={lay.fsdp})"
        )
    if (lay.dp_in_slice * lay.fsdp) % lay.ep:
        raise WorkbenchError(
            f"ep={lay.ep} must divide the data x fsdp chips of one slice ({lay.dp_in_slice * lay.fsdp})"
        )
    if lay.pp * lay.vpp > cfg.n_layers:
        raise WorkbenchError(
            f"pp x vpp = {lay.pp * lay.vpp} exceeds the layer count ({cfg.n_layers}) of {cfg.name}"
        )
    if (lay.dp_in_slice * lay.fsdp) % lay.cp:
        raise WorkbenchError(
            f"cp={lay.cp} must divide the data x fsdp chips of one slice ({lay.dp_in_slice * lay.fsdp})"
        )
    if lay.ep > 1 and (not cfg.is_moe or cfg.n_experts % lay.ep):
        raise WorkbenchError(f"ep={lay.ep} must divide the expert count ({cfg.n_experts}) of a MoE model")
    return lay
