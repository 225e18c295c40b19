"""The serving rows of shared/reference/published-figures.md (4, 7, 9-14) projected with the serving model,
beside the training points of :mod:`~workbench.projection.calibration`, as one JSON-ready table.

Calibration (one point per vendor, phase family and precision; everything else validates):

- TPU serve fp8: row 12 Ironwood (9,364 tok/s/chip at 20 tok/s/user) fits ``seq_overhead_s``, the engine's
  time per running sequence per step beyond the roofline (scheduler, sampler, paged-attention metadata,
  ragged MoE dispatch);
- GPU serve fp8: row 12 B200 (8,903 tok/s/chip) fits the same parameter for GPUs (B300 uses it);
- training: ``gemm_efficiency`` on the calibration point named in calibration.py.

Settings the rows leave open are assumptions, stated per row: one replica of 8 chips, tensor parallel 8
(vLLM's default for one node), FP8 weights and KV cache, chunked prefill with an 8,192-token budget, up to
512 concurrent sequences. Prices are the ones the article's dollars were computed with (``INFERENCEX_TCO``).
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from tpu_workbench.bench.catalog import Catalog, load_catalog
from tpu_workbench.bench.projection.calibration import CALIBRATION_POINTS, vs_published
from tpu_workbench.bench.projection.engine_costs import INFERENCEX_ENGINE, step_overhead_s
from tpu_workbench.bench.projection.model import project
from tpu_workbench.bench.projection.serving import (
    ServingDeployment,
    StepModel,
    at_interactivity,
    steady_state,
)
from tpu_workbench.bench.projection.serving_benchmarks import points as bench_points
from tpu_workbench.bench.projection.serving_benchmarks import projections as bench_projections
from tpu_workbench.bench.projection.serving_chunked import chunked_steady_state
from tpu_workbench.bench.projection.shape import load_hf_config

MODELS = Path(__file__).resolve().parents[1] / "published" / "models"
INPUT, OUTPUT = 8192, 1024
TARGETS = {"band": 0.15, "share_within_band": 0.90, "max_abs": 0.25}
SOURCE_11_14 = (
    "SemiAnalysis 'TPU InferenceX full steam' (InferenceX-app blog, 2026-09-07), via published-figures.md"
)
SOURCE_1_8 = "PyTorch Blog 'Introducing TorchTPU' + Google Cloud Blog, via trade press (2026-11-03)"
SOURCE_9_10 = "SemiAnalysis InferenceX as cited in trade press (2026-11-03); no primary page matched"
# Fitted by fit_seq_overhead() on row 12 (tests/workbench/test_validation_serving.py re-fits and checks them).
SEQ_OVERHEAD_S = {"tpu": 4.515e-05, "gpu": 6.193e-05}
CALIBRATION_ROWS = {"tpu": ("row 12", "TPU v7", 9364.0), "gpu": ("row 12", "B200", 8903.0)}


def vendor_of(chip: str) -> str:
    return "tpu" if chip.upper().startswith("TPU") else "gpu"


def engine_overhead(chip: str) -> float:
    """The serving engine's time per running sequence per step beyond the roofline, as calibrated for the
    chip's vendor (row 12): what the notebooks, the demo and ``--serve`` apply, so they show the model that
    the validation table measures."""
    return SEQ_OVERHEAD_S[vendor_of(chip)]


@dataclass(frozen=True)
class Row:
    """One line of the JSON table (fields named by the issue)."""

    source: str
    date: str
    vendor: str
    chip: str
    phase: str
    precision: str
    role: str  # calibration | validation | unanchored | inconsistent
    published: float | None
    projected: float | None
    unit: str
    error_pct: float | None
    note: str
    id: str = ""

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@lru_cache(maxsize=64)
def _model(chip: str, overhead: float, step_s: float | None = None) -> StepModel:
    """``step_s``: the engine's host cost per step; None = the chip's engine in engine_costs.py (sourced)."""
    cfg, shape = load_hf_config(MODELS / "qwen3.5-397b-a17b.json")
    d = ServingDeployment(
        chip,
        8,
        "tp",
        precision="fp8",
        kv_precision="fp8",
        max_batch=512,
        chunk_tokens=8192,
        seq_overhead_s=overhead,
        step_overhead_s=step_overhead_s(INFERENCEX_ENGINE[chip]) if step_s is None else step_s,
    )
    return StepModel.build(cfg, d, shape=shape)


def model_for(
    chip: str, overheads: dict[str, float] | None = None, step_s: dict[str, float] | None = None
) -> StepModel:
    """The InferenceX setting on ``chip``; ``step_s`` (per vendor) overrides the engine registry (probes)."""
    v = vendor_of(chip)
    return _model(chip, (overheads or SEQ_OVERHEAD_S)[v], None if step_s is None else step_s[v])


# $/chip-hr the article's dollars use: external TPU TCO $1.21 (row 11) against "B200/B300 TCO for a hyperscaler
# lab" = InferenceX-app packages/constants/src/gpu-keys.ts HW_REGISTRY ``costh`` ("owning at large hyperscaler
# volume"; tco.ts: "SemiAnalysis Market July 2026 Pricing Surveys & AI Cloud TCO Model"): b200 1.73, b300 2.26,
# tpuv7 1.21. The article's own ratios give the same: rows 12 + 13 (+50.4 % / +96 % at $1.21) and the internal
# TCO ones (+76.7 % / +130.2 % at $1.03) each imply B200 $1.730 and B300 $2.260. (The catalog's own-hyperscaler
# B200 $1.95 / B300 $2.34 are the app's April 2026 constants.)
INFERENCEX_TCO = {"TPU v7": 1.21, "B200": 1.73, "B300": 2.26}


def _price(chip: str, catalog: Catalog) -> float:
    if chip in INFERENCEX_TCO:
        return INFERENCEX_TCO[chip]
    return catalog.chip(chip).price("own-hyperscaler").usd_per_chip_hour


def _throughput_at(m: StepModel, tok_s_per_user: float, state=None) -> float | None:
    p = at_interactivity(m, INPUT, OUTPUT, tok_s_per_user, 1.0, state)
    return p.state.total_tok_s_per_chip if p.state else None


def _at_e2e(m: StepModel, e2e_s: float, state=None):
    """The highest concurrency whose median end-to-end latency (TTFT + (O-1) x TPOT) stays within e2e_s."""
    steady = state or steady_state
    best = None
    lo, hi = 1, m.deployment.max_batch
    while lo <= hi:
        mid = (lo + hi) // 2
        st = steady(m, INPUT, OUTPUT, mid)
        if st.ttft_s + (OUTPUT - 1) * st.tpot_s <= e2e_s:
            best, lo = st, mid + 1
        else:
            hi = mid - 1
    return best


def fit_seq_overhead(
    vendor: str, catalog: Catalog | None = None, state=None, step_s: float | None = None
) -> float:
    """Bisect the per-sequence step overhead so the calibration row's tok/s/chip is met at 20 tok/s/user
    (``state``: the closed form, default the fluid :func:`steady_state`; ``step_s``: the host cost per step,
    default the engine registry's)."""
    _, chip, target = CALIBRATION_ROWS[vendor]
    lo, hi = 0.0, 1e-3
    for _ in range(40):
        mid = (lo + hi) / 2
        got = _throughput_at(_model(chip, mid, step_s), 20.0, state) or 0.0
        lo, hi = (mid, hi) if got > target else (lo, mid)
    return (lo + hi) / 2


def _err(projected: float | None, published: float) -> float | None:
    return None if projected is None else 100.0 * (projected / published - 1)


@dataclass(frozen=True)
class _Ctx:
    """What every row's projection reads: the catalog (prices) and the per-vendor overheads."""

    catalog: Catalog
    overheads: dict[str, float]
    state: Callable | None = None  # the closed form; None = serving.steady_state
    step_s: dict[str, float] | None = None  # host cost per step per vendor; None = the engine registry

    def model(self, chip: str) -> StepModel:
        return model_for(chip, self.overheads, self.step_s)

    def price(self, chip: str) -> float:
        return _price(chip, self.catalog)

    def usd_per_m(self, chip: str, tok_s_per_chip: float | None) -> float | None:
        return self.price(chip) / (tok_s_per_chip * 3600) * 1e6 if tok_s_per_chip else None


def _tput_20(chip: str, c: _Ctx) -> float | None:
    return _throughput_at(c.model(chip), 20.0, c.state)


def _usd_at_100(chip: str, c: _Ctx) -> float | None:
    return c.usd_per_m(chip, _throughput_at(c.model(chip), 100.0, c.state))


def _v7_tokens_per_usd_ratio(chip: str, c: _Ctx) -> float | None:
    other = _tput_20(chip, c)
    return (_tput_20("TPU v7", c) / c.price("TPU v7")) / (other / c.price(chip)) if other else None


def _usd_at_e2e_20s(chip: str, c: _Ctx) -> float | None:
    st = _at_e2e(c.model(chip), 20.0, c.state)
    return c.usd_per_m(chip, st.total_tok_s_per_chip if st else None)


ASSUMED = (
    "Qwen3.5-397B-A17B FP8 (config.json shape), 8k in / 1k out, ASSUMED: 1 replica of 8 chips tp=8, FP8 KV, "
    "chunked prefill 8,192 tokens, <= 512 sequences"
)


@dataclass(frozen=True)
class ServeSpec:
    """One InferenceX figure of rows 11-14: its unit, the published value per chip, how to project it and
    what its note says (``{price}`` is filled with the chip's price). ``versus``: a TPU v7 vs chip
    ratio (vendor 'tpu', judged in group 'both serve')."""

    row: str
    unit: str
    published: tuple[tuple[str, float], ...]
    project: Callable[[str, _Ctx], float | None]
    note: str
    versus: bool = False


SERVE_SPECS = (
    ServeSpec(
        "row 12",
        "total tok/s per chip at 20 tok/s/user",
        (("TPU v7", 9364.0), ("B200", 8903.0), ("B300", 8925.0)),
        _tput_20,
        ASSUMED,
    ),
    ServeSpec(
        "row 11",
        "$ per M total tokens at 100 tok/s/user",
        (("TPU v7", 0.181), ("B200", 0.222), ("B300", 0.276)),
        _usd_at_100,
        "price ${price:.2f}/chip-hr (InferenceX's TCO, as the article); " + ASSUMED,
    ),
    ServeSpec(
        "row 13",
        "tokens per $ ratio at 20 tok/s/user (external TCO)",
        (("B200", 1.504), ("B300", 1.96)),
        _v7_tokens_per_usd_ratio,
        "ratio of the row-12 projections over InferenceX's TCO (the ones the published ratio implies): with "
        "two of the three row-12 points calibration, this checks little beyond B300's throughput",
        versus=True,
    ),
    ServeSpec(
        "row 14",
        "$ per M total tokens at 20 s median end-to-end latency",
        (("TPU v7", 0.098), ("B200", 0.106), ("B300", 0.132)),
        _usd_at_e2e_20s,
        "median E2E = TTFT + 1023 x TPOT (closed form); price ${price:.2f}; " + ASSUMED,
    ),
)


# The article's concurrency-256 point is its 20 tok/s/user point ("this datapoint specifically"), with the mean
# TTFT it gives there; InferenceX samples lengths uniform in [0.8 x, x] (benchmark-tmpl.yml RANDOM_RANGE_RATIO
# 0.8, benchmark_serving.py sample_random_requests): means of 8k / 1k.
ROW12_CONCURRENCY = 256
ROW12_TTFT_S = {"TPU v7": 5.41, "B200": 3.75, "B300": 2.40}
BENCH_MEAN_IO = ((int(0.8 * INPUT) + INPUT) / 2, (int(0.8 * OUTPUT) + OUTPUT) / 2)


def implied_chips_per_replica(chip: str, tok_s_per_chip: float) -> float:
    """Little's law on the published row-12 point: concurrency = request rate x mean E2E, E2E = mean TTFT +
    (O - 1) / (20 tok/s/user), so the replica's chips = rate x tokens per request / tok/s per chip."""
    i, o = BENCH_MEAN_IO
    rate = ROW12_CONCURRENCY / (ROW12_TTFT_S[chip] + (o - 1) / 20.0)
    return rate * (i + o) / tok_s_per_chip


@lru_cache(maxsize=1)
def _chunked_overheads() -> tuple[tuple[str, float], ...]:
    return tuple((v, fit_seq_overhead(v, state=chunked_steady_state)) for v in ("tpu", "gpu"))


def _source_checks(spec: ServeSpec, chip: str, pub: float, c: _Ctx) -> str:
    """What the row's note adds from the source checks: the chunk-exact closed form's error (it agrees with
    the simulation where the fluid one over-costs small batches; overheads re-fitted on row 12) and, on row 12,
    the replica size Little's law gives."""
    alt = _Ctx(c.catalog, dict(_chunked_overheads()), chunked_steady_state)
    err = _err(spec.project(chip, alt), pub)
    out = "; chunk-exact closed form (serving_chunked): " + ("no number" if err is None else f"{err:+.1f} %")
    if spec.row == "row 12":
        n = implied_chips_per_replica(chip, pub)
        out += (
            f"; source check: Little's law at the published concurrency {ROW12_CONCURRENCY} (mean TTFT "
            f"{ROW12_TTFT_S[chip]} s, lengths U[0.8, 1] x 8k/1k) gives {n:.1f} chips per replica, not the 8 "
            "assumed (InferenceX@843c6254 runs B200/B300 at tp 4; vllm-project/tpu-inference@b8692ff "
            "tests/e2e/benchmarking/inferencex/qwen3.5/server.sh serves v7x-8 = 4 chips at tp 8 devices)"
        )
    return out


def _spec_rows(spec: ServeSpec, c: _Ctx) -> list[Row]:
    rows = []
    for chip, pub in spec.published:
        got = spec.project(chip, c)
        v = "tpu" if spec.versus else vendor_of(chip)  # a ratio prices TPU v7 against the chip
        cal = not spec.versus and CALIBRATION_ROWS[v][:2] == (spec.row, chip)
        note = spec.note.replace("{price:.2f}", f"{c.price(chip):.2f}") + _source_checks(spec, chip, pub, c)
        if cal:
            note = f"fits seq_overhead_s[{v}] = {c.overheads[v]:.3g} s; " + note
        label = f"TPU v7 vs {chip}" if spec.versus else chip
        role = "calibration" if cal else "validation"
        rows.append(
            Row(
                SOURCE_11_14,
                "2026-09-07",
                v,
                label,
                "serve",
                "fp8",
                role,
                pub,
                got,
                spec.unit,
                _err(got, pub),
                note,
                spec.row,
            )
        )
    return rows


# Why a serving validation row misses the +/-15 % band, where a reason is known (hypotheses say so); the
# published benchmarks carry theirs as ``miss_reason`` in their data file.
MISS_WHY = {
    "row 11": "compensating errors (docs/projection.md, InferenceX): the fluid closed form spreads B·I/O prompt "
    "tokens over every step, which at ~10-20 users reads most experts each step and doubles the TPOT against "
    "the simulation (the chunk-exact form, in the note, agrees with it and is far under-priced); what it "
    "offsets is a cost per step beyond the roofline at low concurrency (~5 ms at the published point) "
    "that the per-sequence overhead fitted at concurrency 256 does not give; it is not the engines' host "
    "work, which SGLang and vLLM-TPU overlap with the device step by their own sources (engine_costs.json: "
    "exposed 0), so device-side (hypothesis: small-batch kernel and MoE dispatch costs); not fitted: one "
    "calibration point per vendor",
    "row 14": "the published TPOT at the 20 s point (~21 ms at ~33 users on 4 chips by Little's law) is ~9 ms "
    "above the roofline there, more than the per-sequence overhead fitted at concurrency 256 adds, so the "
    "20 s budget admits more concurrency here than there: under-priced (hypothesis, not fitted; the closed "
    "form's TTFT, ~0.1 s, adds to it where the published one is seconds)",
    "row 4": "the published pair implies fewer FLOPs per token than the ASSUMED qwen3-32b does here (both in the "
    "SETTING; its tok/s row is within the band, its MFU row is not): the unnamed '30B' model is smaller "
    "(hypothesis)",
}


def _with_miss(r: Row, why: str | None) -> Row:
    """A validation row outside the band opens its note with MISS and the reason (or that none is known)."""
    if r.role != "validation" or r.error_pct is None or abs(r.error_pct) <= 100 * TARGETS["band"]:
        return r
    reason = why or "reason not established"
    return replace(r, note=f"MISS ({r.error_pct:+.1f} %): {reason}; SETTING: {r.note}")


def serving_rows(catalog: Catalog | None = None, overheads: dict[str, float] | None = None) -> list[Row]:
    """Rows 4, 7, 9-14, projected (or why not)."""
    c = _Ctx(catalog or load_catalog(), overheads or SEQ_OVERHEAD_S)
    rows = [r for spec in SERVE_SPECS for r in _spec_rows(spec, c)]
    rows += _bench_rows(c) + _prefill_row4(c.catalog) + _unanchored()
    bench_why = {p["id"]: p.get("miss_reason") for p in bench_points()}
    return [_with_miss(r, MISS_WHY.get(r.id) or bench_why.get(r.id)) for r in rows]


def _bench_rows(c: _Ctx) -> list[Row]:
    """Published serving benchmarks (MLPerf Inference llama2-70b on GPUs, jetstream-pytorch on TPU v5e): validation
    rows; nothing is fitted on them."""
    rows = []
    for pr in bench_projections(c.overheads):
        p, src = pr.point, pr.point["source"]
        got, pub = pr.output_tok_s_per_chip, pr.published_per_chip
        rows.append(
            Row(
                f"{src['title']} ({src['repo']}@{src['commit'][:9]} {src['path']})",
                src["date"],
                vendor_of(p["chip"]),
                p["chip"],
                "serve",
                p["precision"],
                "validation",
                pub,
                got,
                p["unit"],
                _err(got, pub),
                pr.note(),
                p["id"],
            )
        )
    return rows


def _prefill_row4(catalog: Catalog) -> list[Row]:
    rec = project("TPU v7", "qwen3-32b", "prefill", 1, "fsdp", batch=1, seq=4096, catalog=catalog)
    note = (
        "ASSUMED: the unnamed dense '30B' model as qwen3-32b, one 4,096-token prompt per step, bf16, the "
        "training-calibrated GEMM efficiency; 'pure PyTorch, no custom kernels' is not modelled"
    )
    peak = catalog.chip("TPU v7").peak("bf16", per="chip")
    note += (
        f"; FLOPs per token: {rec.mfu * peak / rec.tokens_per_s_per_chip / 1e9:.0f} G here, "
        f"{0.59 * peak / 25700.0 / 1e9:.0f} G in the published pair (MFU x bf16 peak / tok/s)"
    )
    return [
        Row(
            SOURCE_1_8,
            "2026-11",
            "tpu",
            "TPU v7",
            "prefill",
            "bf16",
            "validation",
            pub,
            got,
            unit,
            _err(got, pub),
            note,
            "row 4",
        )
        for pub, got, unit in (
            (25700.0, rec.tokens_per_s_per_chip, "tokens/s per chip"),
            (0.59, rec.mfu, "MFU"),
        )
    ]


WHY_7 = "the model, sequence length and per-chip/per-core basis are not stated: nothing to project"
WHY_9_10 = "model, lengths, interactivity and price basis unnamed; not matched to a primary InferenceX page"
# (source, phase, precision, published, unit, note, row): figures with nothing to project
UNANCHORED = (
    (SOURCE_1_8, "train", "bf16", 1828.0, "tokens/s", "PyTorch/TorchTitan at 64 chips; " + WHY_7, "row 7"),
    (SOURCE_1_8, "train", "bf16", 1937.0, "tokens/s", "JAX/MaxText at 64 chips; " + WHY_7, "row 7"),
    (
        SOURCE_9_10,
        "serve",
        "unstated",
        0.0201,
        "$ per M tokens",
        "MoE inference, vLLM-TorchTPU; " + WHY_9_10,
        "row 9",
    ),
    (
        SOURCE_9_10,
        "serve",
        "unstated",
        0.0083,
        "$ per M tokens",
        "AgentX agentic benchmark; " + WHY_9_10,
        "row 10",
    ),
)


UNANCHORED_NOTE = "UNANCHORED (not projected); "


def _unanchored() -> list[Row]:
    return [
        Row(
            src,
            "2026-11",
            "tpu",
            "TPU v7",
            phase,
            prec,
            "validation",
            pub,
            None,
            unit,
            None,
            UNANCHORED_NOTE + note,
            rid,
        )
        for src, phase, prec, pub, unit, note, rid in UNANCHORED
    ]


def training_rows(assumptions=None, catalog=None) -> list[Row]:
    """The training comparison of calibration.py in the same row format (roles: calibration, validation
    (complete or assumed setting), unanchored, inconsistent)."""
    # the two roles: the calibration points, and everything else validates; what kind of validation
    # row it is opens its note
    prefix = {
        "calibration": "",
        "validation": "",
        "validation (assumed setting)": "ASSUMED setting; ",
        "inconsistent reading": "INCONSISTENT READING (the source's own figures disagree); ",
        "unanchored": "UNANCHORED (not projected); ",
    }
    dates = {p["id"]: p["source"].get("date", "") for p in _training_points()}
    out = []
    for r in vs_published(assumptions=assumptions, catalog=catalog).to_dict("records"):
        if str(r["id"]).startswith("torchtpu-row") and not str(r["id"]).startswith(
            ("torchtpu-row5", "torchtpu-row6")
        ):
            continue  # rows 4, 7, 9-14 are the serving module's
        pub, proj = r["published"], r["projected"]
        numeric = isinstance(proj, int | float) and not math.isnan(proj)
        src = r["source"]
        date = dates.get(r["id"]) or "2026-11"  # the TorchTPU rows 5-6
        err = r["rel_error"]
        out.append(
            Row(
                src.get("title", str(src)) if isinstance(src, dict) else str(src),
                str(date),
                vendor_of(str(r["chip"])),
                str(r["chip"]),
                "train",
                "fp8" if "float8" in str(r["id"]) or "fp8" in str(r["id"]) else "bf16",
                "calibration" if r["category"] == "calibration" else "validation",
                float(pub) if isinstance(pub, int | float) else str(pub),  # MFU ranges stay as printed
                float(proj) if numeric and proj is not None else None,
                str(r["metric"]),
                None if err is None or (isinstance(err, float) and math.isnan(err)) else 100.0 * err,
                prefix[r["category"]] + str(r["assumptions"])[:300],
                str(r["id"]),
            )
        )
    return out


def _training_points() -> list[dict]:
    return json.loads((MODELS.parent / "training.json").read_text())["points"]


def group_of(row: Row) -> str:
    """The vendor and phase family a row is judged in; a TPU-vs-GPU ratio row checks both vendors at once
    and is judged apart ('both serve')."""
    family = "train" if row.phase == "train" else "serve"
    return f"{'both' if ' vs ' in row.chip else row.vendor} {family}"


def summary(rows: list[Row]) -> dict[str, dict]:
    """Per group (vendor x train/serve): validation rows with a number, share within the band, largest and
    median |error|, and whether the issue's targets are met."""
    out = {}
    for g in sorted({group_of(r) for r in rows}):
        errs = [
            abs(r.error_pct)
            for r in rows
            if group_of(r) == g and r.role == "validation" and r.error_pct is not None
        ]
        unproj = sum(1 for r in rows if group_of(r) == g and r.role == "validation" and r.error_pct is None)
        within = sum(e <= 100 * TARGETS["band"] for e in errs)
        out[g] = {
            "validation_rows": len(errs),
            "validation_rows_not_projected": unproj,
            "within_15pct": within,
            "share_within_15pct": within / len(errs) if errs else None,
            "median_abs_error_pct": statistics.median(errs) if errs else None,
            "max_abs_error_pct": max(errs) if errs else None,
            "calibration_rows": sum(1 for r in rows if group_of(r) == g and r.role == "calibration"),
            "meets_target": bool(errs)
            and within / len(errs) >= TARGETS["share_within_band"]
            and max(errs) <= 100 * TARGETS["max_abs"],
        }
    return out


def vs_published_json(assumptions=None, catalog=None) -> dict:
    """Everything ``tpu-bench project --vs-published --json`` prints."""
    rows = training_rows(assumptions, catalog) + serving_rows(catalog)
    return {
        "rows": [r.to_dict() for r in rows],
        "groups": summary(rows),
        "targets": TARGETS,
        "calibration": {
            "train": {f"{v} {p}": f"gemm_efficiency on {pid}" for (v, p), pid in CALIBRATION_POINTS.items()},
            "serve": {v: f"seq_overhead_s on {row} {chip}" for v, (row, chip, _) in CALIBRATION_ROWS.items()},
        },
    }


def inferencex_errors(
    state=None, step_s: dict[str, float] | None = None
) -> dict[tuple[str, str], float | None]:
    """Every InferenceX row's error (%) with a given closed form and host cost per step per vendor, the
    per-sequence overhead re-fitted on row 12 for each (a probe of what a per-step engine cost would do;
    the table itself takes its per-step cost from engine_costs.py)."""
    ov = {
        v: fit_seq_overhead(v, state=state, step_s=None if step_s is None else step_s[v])
        for v in ("tpu", "gpu")
    }
    c = _Ctx(load_catalog(), ov, state, step_s)
    return {
        (spec.row, chip if not spec.versus else f"TPU v7 vs {chip}"): _err(spec.project(chip, c), pub)
        for spec in SERVE_SPECS
        for chip, pub in spec.published
    }
