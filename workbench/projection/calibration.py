"""Calibration protocol: fit ``gemm_efficiency`` on ONE named published point, validate on every other.

Categories of a published point in the comparison:

- ``calibration``: the one point the efficiency is fitted on (CALIBRATION_POINT).
- ``validation``: a point with a complete setting (model, chips, layout, batch, sequence, remat, precision
  from the source's own config); its error is the model's error.
- ``validation (assumed setting)``: the source leaves parts of the setting open (a point's ``assumed`` field
  says which: batch and layout, or the chip's own peak); the row states what was assumed, and its error is
  reported apart from the complete-setting validation.
- ``inconsistent reading``: a complete setting whose own figures contradict each other (the consistency
  check below fails); shown with its error, apart from validation.
- ``unanchored``: the projection cannot be set up for it (reason given); never reported as model error.

Every point also gets a consistency check of its own reading: tokens/s x FLOPs/token / peak must give the
published MFU (or TFLOP/s / peak the MFU); a reading that fails is flagged as wrong, not modelled around.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from tpu_workbench.bench.catalog import Catalog, Chip, load_catalog
from tpu_workbench.bench.flops import flops_per_token
from tpu_workbench.bench.projection.assumptions import Assumptions
from tpu_workbench.bench.projection.block import LLAMA, Block, block_flops_per_token
from tpu_workbench.bench.projection.model import project
from tpu_workbench.bench.published import published_records, training_blocks, training_models, training_points
from tpu_workbench.bench.results import Record
from tpu_workbench.bench.workloads.config import PRESETS, DecoderConfig

CALIBRATION_POINT = "maxtext-tpu7x-llama3.1-70b-8k-64"
CALIBRATION_REASON = (
    "a complete, recent (2026-08) setting on the headline chip (TPU7x), dense (so the fitted "
    "number is the matmul efficiency, not MoE routing or communication), single slice, "
    "with tokens/s and TFLOP/s both printed"
)
# GPUs: one point of their own (one calibration point per vendor and phase family), for the same parameter
GPU_CALIBRATION_POINT = "torchtitan-h100-llama3.1-8b-8-compile"
GPU_CALIBRATION_REASON = (
    "the one GPU training setting with its config at hand (torchtitan 9dec370 llama3_8b.toml); its chips are "
    "96 GB H100s at a 500 W power limit whose peak lies below the catalog's 989 TF/s, so the fitted GPU "
    "efficiency also absorbs that clock gap"
)
GPU_FP8_CALIBRATION_POINT = "torchtitan-h100-llama3.1-8b-8-float8"  # GPU training at fp8: its own point
# TPU training at fp8 (MaxText fp8_full): its own point, the fp8 twin of CALIBRATION_POINT (same model, chips,
# batch and remat), so the fitted number is the fp8 matmul efficiency and nothing else
TPU_FP8_CALIBRATION_POINT = "maxtext-tpu7x-llama3.1-70b-fp8-64"
# one calibration point per (vendor, precision) of training: fp8 ones are fitted after their vendor's bf16 one
# (their attention runs as a bf16 kernel at that efficiency)
CALIBRATION_POINTS = {
    ("tpu", "bf16"): CALIBRATION_POINT,
    ("gpu", "bf16"): GPU_CALIBRATION_POINT,
    ("gpu", "fp8"): GPU_FP8_CALIBRATION_POINT,
    ("tpu", "fp8"): TPU_FP8_CALIBRATION_POINT,
}
ACCEPTANCE = 0.15
CONSISTENT = 0.03  # relative tolerance of a reading's self-consistency (rounded figures, "approx" tokens/s)


@dataclass
class PointSetup:
    """A published point set up for :func:`project`."""

    id: str
    group: str
    chip: Chip
    cfg: DecoderConfig
    kwargs: dict
    published: dict
    convention: str
    category: str
    assumed: str = ""
    source: dict = field(default_factory=dict)
    setting_text: str = ""
    block: Block = LLAMA
    attention_relative: float | None = None  # the setting's attention kernel vs its GEMMs (training.json)


def _config(name: str) -> DecoderConfig:
    if name in PRESETS:
        return PRESETS[name]
    return DecoderConfig(**training_models()[name])


def _block(name: str) -> Block:
    """The layer wiring of a published model (the Llama layer unless training.json says otherwise)."""
    return Block.from_dict(training_blocks().get(name))


def _setup(p: dict, catalog: Catalog) -> PointSetup:
    st = p["setting"]
    chip = catalog.chip(st["chip"])
    kwargs = {
        "batch": st["per_device_batch"] * chip.devices_per_chip,
        "seq": st["seq"],
        "precision": st["precision"],
        "remat": st["remat"],
        "remat_names": st.get("remat_names"),
        "slices": st.get("slices", 1),
        "capacity_factor": st.get("capacity_factor"),
        "attn_block": st.get("attn_block", 512),
        "layout": st["layout"],
        "n_chips": st["n_chips"],
        "optimizer_state_bytes_per_param": st.get("optimizer_state_bytes_per_param"),
        "async_collectives": tuple(st.get("async_collectives", ())),
        "attention_efficiency": st.get("attention_efficiency"),
        "gmm_tile": st.get("gmm_tile"),
        "ring_attention": st.get("ring_attention", "allgather"),
        "attention_backward_relative": st.get("attention_backward_relative"),
        "grad_reduce_async": st.get("grad_reduce_async", True),
        "tp_gather_bytes": st.get("tp_gather_bytes"),
    }
    assumed = st.get("assumed", "")
    if p["id"] in CALIBRATION_POINTS.values():
        category = "calibration"
    else:
        category = "validation (assumed setting)" if assumed else "validation"
    return PointSetup(
        p["id"],
        p["group"],
        chip,
        _config(st["model"]),
        kwargs,
        p["published"],
        st.get("mfu_convention", "causal"),
        category,
        assumed,
        source=p["source"],
        setting_text=st["text"],
        block=_block(st["model"]),
        attention_relative=st.get("attention_relative"),
    )


def project_point(
    s: PointSetup, assumptions: Assumptions | None = None, catalog: Catalog | None = None
) -> Record:
    kw = dict(s.kwargs)
    n, layout = kw.pop("n_chips"), kw.pop("layout")
    if s.attention_relative is not None:  # relative to the (fitted) GEMMs: a power cap slows both alike
        assumptions = (assumptions or Assumptions()).with_(attention_relative=s.attention_relative)
    return project(
        s.chip,
        s.cfg,
        "train",
        n,
        layout,
        assumptions=assumptions,
        convention=s.convention,
        catalog=catalog,
        block=s.block,
        require_fit=False,  # a published run ran: where the memory model says it does not fit, it is wrong
        **kw,
    )


def _tokens_per_device(pub: dict, chip: Chip) -> float | None:
    if pub.get("tokens_per_s_per_device"):
        return float(pub["tokens_per_s_per_device"])
    if pub.get("tokens_per_s_per_chip"):
        return pub["tokens_per_s_per_chip"] / chip.devices_per_chip
    return None


def _mfu(pub: dict, chip: Chip) -> tuple[float | None, str]:
    if pub.get("mfu") is not None:
        return float(pub["mfu"]), "as printed"
    if pub.get("tflops_per_chip"):
        return pub["tflops_per_chip"] / chip.peak_tflops[
            "bf16"
        ], "printed TFLOP/s per chip / catalog bf16 peak"
    return None, ""


def consistency(
    pub: dict,
    cfg: DecoderConfig | None,
    chip: Chip | None,
    seq: int | None,
    phase: str = "train",
    stated: str | None = None,
    block: Block = LLAMA,
) -> str:
    """Does the point's reading hold together? tokens/s x FLOPs/token / peak vs MFU, TFLOP/s / peak vs MFU."""
    if chip is None:
        return "not checked (no catalog chip)"
    peak = chip.peak_tflops.get("bf16", 0) * 1e12
    tok = _tokens_per_device(pub, chip)
    tok_chip = tok * chip.devices_per_chip if tok else None
    msgs = []
    if pub.get("tflops_per_chip") and pub.get("mfu") is not None:
        implied = pub["tflops_per_chip"] * 1e12 / peak
        ok = abs(implied / pub["mfu"] - 1) <= CONSISTENT
        msgs.append(
            f"TFLOP/s / peak = {100 * implied:.2f}% vs MFU {100 * pub['mfu']:.2f}%: "
            + ("consistent" if ok else "INCONSISTENT (the peak or the MFU reading is wrong)")
        )
    mfu = (
        pub.get("mfu")
        if pub.get("mfu") is not None
        else (pub["tflops_per_chip"] * 1e12 / peak if pub.get("tflops_per_chip") else None)
    )
    mfu_range = pub.get("mfu_range")
    if tok_chip and (mfu is not None or mfu_range) and cfg is not None and seq:
        target = mfu if mfu is not None else sum(mfu_range) / 2
        implied_f = target * peak / tok_chip
        fits = []
        for conv in ("palm", "causal"):
            f = block_flops_per_token(cfg, block, phase, seq, convention=conv)
            got = tok_chip * f / peak
            inside = (
                (mfu_range[0] * (1 - CONSISTENT) <= got <= mfu_range[1] * (1 + CONSISTENT))
                if mfu_range
                else (abs(got / mfu - 1) <= CONSISTENT)
            )
            if inside:
                fits.append(f"{conv} ({f / 1e9:.1f} GFLOP/token -> {100 * got:.1f}%)")
        head = f"tokens/s x FLOPs/token / peak: implied {implied_f / 1e9:.1f} GFLOP/token; "
        if fits:
            msg = head + "reproduced by " + " and ".join(fits)
            if stated and not any(f.startswith(stated) for f in fits):
                msg += f"; NOT by the stated {stated} convention (reading wrong?)"
            msgs.append(msg)
        else:
            msgs.append(
                head + f"no FLOP convention of {cfg.name} at seq {seq} reproduces it: INCONSISTENT reading"
            )
    return "; ".join(msgs) or "not checkable (one figure only)"


def calibrate(
    point_id: str = CALIBRATION_POINT, assumptions: Assumptions | None = None, catalog: Catalog | None = None
) -> tuple[float, Record]:
    """The gemm_efficiency at which the projection reproduces the point's published tokens/s (bisection;
    throughput rises monotonically with the efficiency). Returns (efficiency, record at that efficiency)."""
    catalog = catalog or load_catalog()
    base = assumptions or Assumptions()
    point = next(p for p in training_points() if p["id"] == point_id)
    s = _setup(point, catalog)
    target = _tokens_per_device(s.published, s.chip)
    lo, hi = 0.05, 1.0
    for _ in range(40):
        mid = (lo + hi) / 2
        rec = project_point(s, base.with_(gemm_efficiency=mid), catalog)
        lo, hi = (mid, hi) if rec.tokens_per_s_per_device < target else (lo, mid)
    eff = (lo + hi) / 2
    return eff, project_point(s, base.with_(gemm_efficiency=eff), catalog)


# TorchTPU release figures (figures.json rows): what the source leaves open and how the model reads it
_TORCHTPU_ASSUMED = {
    "setting": dict(
        seq=4096,
        per_device_batch=16,
        remat="custom",
        remat_names={"decoder_layer_input": "offload"},
        attn_block=1024,
        gmm_tile=(512, 1024, 1024),
    ),
    "text": (
        "model qwen3-235b-a22b; batch, sequence, layout and remat are not published: assumed as in MaxText's "
        "TPU7x recipe for the same model (16 sequences x 4096 tokens per TensorCore, FSDP over the 1,024 "
        "chips of each slice, data parallel across slices over DCN, only the layer input saved, tokamax grouped "
        "matmuls with MaxText's default 512 x 1024 x 1024 tiles), bf16, "
        "causal FLOP count (the consistency check shows it reproduces the published 27-29% MFU)"
    ),
}
# rows 5-6 run the MaxText recipe's model and setting (assumed): the same gap as its MaxText row
_TORCHTPU_GAP = {
    "record_check": "release figures without batch, sequence or layout; set up as MaxText's TPU7x qwen3-235b-a22b "
    "recipe (see that row's record check)",
    "hypothesis": "HYPOTHESIS: as maxtext-tpu7x-qwen3-235b-4k-256 (the same model and assumed recipe): non-matmul "
    "work of the dropless MoE beyond its gathers and un-permute costed at HBM streaming speed (XLA's row gathers "
    "slower than that, or the grouped matmuls on 1,536-wide experts); not the routing argsorts (~0.1 ms each on "
    "TPU v7x, vllm-project/tpu-inference#3488)",
}
_UNANCHORED = {
    4: "model unnamed ('a 30B model'): the published pair 25.7k tok/s at 59% MFU implies about 53 GFLOP/token "
    "(~26B active weights); no preset matches, so no projection is a test of the model",
    7: "model and per-chip/per-core basis not stated; 1,828 / 1,937 tok/s at 64 chips is below row 5's "
    "per-TensorCore figure at 1,024 chips, so it is another workload",
    9: "serving: model, sequence lengths and serving setting not stated",
    10: "serving: AgentX traces (multi-turn, long context) not modelled",
    11: "serving at an interactivity target (Qwen3.5-397B, not a preset) needs a scheduler model",
    12: "as row 11",
    13: "as row 11",
    14: "as row 11 (end-to-end latency target)",
}


def _row(
    s_id,
    group,
    category,
    chip,
    n,
    metric,
    published,
    projected,
    note,
    source,
    consistency_text,
    low=None,
    high=None,
    model_gap: dict | None = None,
) -> dict:
    if projected is None or published is None:
        err = None
    elif low is not None and high is not None:
        err = 0.0 if low <= projected <= high else projected / (low if projected < low else high) - 1
    else:
        err = projected / float(published) - 1
    if err is not None and abs(err) > ACCEPTANCE and category.startswith("validation"):
        # a miss keeps its row; its note says why first (training.json model_gap), then the setting
        why = (model_gap or {}).get("hypothesis", "no hypothesis recorded")
        note = f"MISS ({100 * err:+.1f} %): {why}; SETTING: {note}"
    return {
        "id": s_id,
        "group": group,
        "category": category,
        "chip": chip,
        "n_chips": n,
        "metric": metric,
        "published": published,
        "projected": projected,
        "rel_error": err,
        "assumptions": note,
        "consistency": consistency_text,
        "source": source,
        "model_gap": model_gap,
    }


def _source_text(src: dict) -> str:
    where = src.get("url") or (
        f"{src['repo']}:{src['path']}@{src['commit'][:9]}" if src.get("repo") else src.get("via", "")
    )
    return f"{src.get('title', '')} ({where}; {src.get('date', '')})"


def _vendor(chip: str) -> str:
    return "tpu" if str(chip).upper().startswith("TPU") else "gpu"


def _fitted_assumptions(
    a: Assumptions, catalog: Catalog, calibrated: bool
) -> dict[tuple[str, str], Assumptions]:
    """The assumptions each (vendor, precision) of training projects with: gemm_efficiency fitted on its own
    calibration point (CALIBRATION_POINTS); an fp8 setting's attention keeps its vendor's bf16 efficiency."""
    if not calibrated:
        return dict.fromkeys(CALIBRATION_POINTS, a)
    out = {}
    for vendor, precision in sorted(CALIBRATION_POINTS, key=lambda k: k[1] != "bf16"):
        base = (
            a
            if precision == "bf16"
            else a.with_(attention_gemm_efficiency=out[vendor, "bf16"].gemm_efficiency)
        )
        eff, _ = calibrate(CALIBRATION_POINTS[vendor, precision], base, catalog)
        out[vendor, precision] = base.with_(gemm_efficiency=eff)
    return out


def vs_published(
    *, assumptions: Assumptions | None = None, catalog: Catalog | None = None, calibrated: bool = True
):
    """DataFrame: every published point beside the projection, with its category, relative error
    (projected / published - 1) and consistency check. ``calibrated``: fit gemm_efficiency on
    CALIBRATION_POINT first (else use ``assumptions`` as given)."""
    import pandas as pd  # lazy: heavy

    catalog = catalog or load_catalog()
    fitted = _fitted_assumptions(assumptions or Assumptions(), catalog, calibrated)
    rows = []
    for p in training_points():
        st = p["setting"]
        pa = fitted[_vendor(st.get("chip", "")), "fp8" if st.get("precision") == "fp8" else "bf16"]
        chip = catalog.chip(st["chip"]) if st.get("chip") in catalog else None
        src = _source_text(p["source"])
        cfg = (
            _config(st["model"])
            if st.get("model") in PRESETS or st.get("model") in training_models()
            else None
        )
        block = _block(st["model"]) if cfg is not None else LLAMA
        check = consistency(
            p["published"], cfg, chip, st.get("seq"), stated=st.get("mfu_convention"), block=block
        )
        if p.get("unanchored"):
            tok = (
                _tokens_per_device(p["published"], chip)
                if chip
                else p["published"].get("tokens_per_s_per_device")
            )
            rows.append(
                _row(
                    p["id"],
                    p["group"],
                    "unanchored",
                    st.get("chip"),
                    st.get("n_chips"),
                    "tokens/s per device",
                    tok,
                    None,
                    "not modelled: " + p["unanchored"],
                    src,
                    check,
                )
            )
            continue
        s = _setup(p, catalog)
        if "INCONSISTENT" in check and s.category != "calibration":
            s.category = "inconsistent reading"
        rec = project_point(s, pa, catalog)
        note = (
            s.setting_text
            + (f"; SETTING CONFLICT: {st['setting_conflict']}" if st.get("setting_conflict") else "")
            + (f"; ASSUMED: {s.assumed}" if s.assumed else "")
        )
        if not rec.extra["fits_in_hbm"]:
            note += (
                f"; projected memory {rec.extra['memory_per_device_gb']:.0f} GB per device exceeds "
                f"{rec.extra['memory_capacity_per_device_gb']:.0f} GB (memory model is approximate)"
            )

        def add(
            metric, published, projected, text, low=None, high=None, s=s, rec=rec, p=p, src=src, check=check
        ):
            rows.append(
                _row(
                    s.id,
                    s.group,
                    s.category,
                    s.chip.name,
                    rec.n_chips,
                    metric,
                    published,
                    projected,
                    text,
                    src,
                    check,
                    low,
                    high,
                    model_gap=p.get("model_gap"),
                )
            )

        tok = _tokens_per_device(s.published, s.chip)
        if tok is not None:
            add("tokens/s per device", tok, rec.tokens_per_s_per_device, note)
        mfu, basis = _mfu(s.published, s.chip)
        if mfu is not None and s.kwargs["precision"] != "bf16" and s.published.get("tflops_per_chip"):
            # an fp8 run's printed TFLOP/s over the bf16 peak is no MFU of either peak: compare the TFLOP/s
            tflops = s.published["tflops_per_chip"]
            add(
                f"TFLOP/s per chip ({s.convention})",
                tflops,
                rec.achieved_tflops,
                note + "; model TFLOP/s as printed",
            )
        elif mfu is not None:
            add(f"MFU ({s.convention})", mfu, rec.mfu, note + f"; MFU {basis}")
        elif s.published.get("mfu_range"):
            lo, hi = s.published["mfu_range"]
            add(
                f"MFU ({s.convention})",
                f"{lo:.2f}-{hi:.2f}",
                rec.mfu,
                note + "; MFU range as printed",
                lo,
                hi,
            )
        if tok is None and mfu is not None:
            rows[-1]["assumptions"] += "; tokens/s not published (TFLOP/s and MFU only)"
    rows += _torchtpu_rows(fitted["tpu", "bf16"], catalog)
    table = pd.DataFrame(rows)
    table.attrs["gemm_efficiency"] = fitted["tpu", "bf16"].gemm_efficiency
    table.attrs["gpu_gemm_efficiency"] = fitted["gpu", "bf16"].gemm_efficiency
    table.attrs["gpu_fp8_gemm_efficiency"] = fitted["gpu", "fp8"].gemm_efficiency
    table.attrs["tpu_fp8_gemm_efficiency"] = fitted["tpu", "fp8"].gemm_efficiency
    return table


def _torchtpu_rows(a: Assumptions, catalog: Catalog) -> list[dict]:
    v7 = catalog.chip("TPU v7")
    rows = []
    for pub in published_records():
        row = pub.source["row"]
        src = _source_text(pub.source)
        group = "TorchTPU release figures"
        if row in (5, 6):
            cfg = _config("qwen3-235b-a22b")
            st = _TORCHTPU_ASSUMED["setting"]
            n_list = [int(pub.n_chips)] if row == 5 else [1024, 8192]
            for n in n_list:
                slices = n // 1024
                rec = project(
                    v7,
                    cfg,
                    "train",
                    n,
                    "fsdp",
                    batch=st["per_device_batch"] * v7.devices_per_chip,
                    seq=st["seq"],
                    remat=st["remat"],
                    remat_names=st["remat_names"],
                    slices=slices,
                    attn_block=st["attn_block"],
                    gmm_tile=st["gmm_tile"],
                    require_fit=False,
                    assumptions=a,
                    catalog=catalog,
                    convention="causal",
                    async_collectives=("all_gather",),
                )
                if row == 5:
                    tok = pub.tokens_per_s_per_device
                    check = consistency(
                        {"tokens_per_s_per_device": tok, "mfu_range": [0.27, 0.29]},
                        cfg,
                        v7,
                        st["seq"],
                        stated="causal",
                    )
                    rows.append(
                        _row(
                            f"torchtpu-row5-{slices}slice",
                            group,
                            "validation (assumed setting)",
                            "TPU v7",
                            n,
                            "tokens/s per TensorCore",
                            tok,
                            rec.tokens_per_s_per_device,
                            _TORCHTPU_ASSUMED["text"],
                            src,
                            check,
                            model_gap=_TORCHTPU_GAP,
                        )
                    )
                else:
                    lo, hi = pub.extra["mfu_min"], pub.extra["mfu_max"]
                    rows.append(
                        _row(
                            f"torchtpu-row6-{slices}slice",
                            group,
                            "validation (assumed setting)",
                            "TPU v7",
                            n,
                            "MFU (causal)",
                            f"{lo:.2f}-{hi:.2f}",
                            rec.mfu,
                            _TORCHTPU_ASSUMED["text"],
                            src,
                            "see row 5",
                            lo,
                            hi,
                            model_gap=_TORCHTPU_GAP,
                        )
                    )
        elif row in _UNANCHORED:
            if pub.tokens_per_s_per_chip:
                metric, value = "tokens/s per chip", pub.tokens_per_s_per_chip
            elif pub.cost:
                metric, value = "$ per M tokens", pub.cost[0]["usd_per_mtok"]
            elif pub.extra.get("tokens_per_s_as_reported"):
                metric, value = "tokens/s (unit unstated)", pub.extra["tokens_per_s_as_reported"]
            else:
                metric, value = "tokens per $ gain", pub.source["figure"]
            check = "not checkable"
            if row == 4:
                implied = pub.mfu * v7.peak_tflops["bf16"] * 1e12 / pub.tokens_per_s_per_chip
                check = (
                    f"25.7k tok/s x F / 2,307 TF/s = 59% needs F = {implied / 1e9:.1f} GFLOP/token; dense "
                    f"qwen3-32b prefill at 4096 has {flops_per_token(_config('qwen3-32b'), 'prefill', 4096, convention='causal') / 1e9:.1f} "
                    "(so the old dense stand-in was not this workload)"
                )
            rows.append(
                _row(
                    f"torchtpu-row{row}",
                    group,
                    "unanchored",
                    pub.chip,
                    pub.n_chips,
                    metric,
                    value,
                    None,
                    "not modelled: " + _UNANCHORED[row],
                    src,
                    check,
                )
            )
    return rows


def misses(table) -> list[dict]:
    """Complete-setting validation points outside the acceptance band, one entry per point: its errors, the
    re-check of its setting against the source (``record_check``) and what the model lacks, labelled as a
    hypothesis (``hypothesis``); both come from the point's ``model_gap`` in training.json, or say that
    none is recorded."""
    out: dict[str, dict] = {}
    val = table[(table["category"] == "validation") & table["rel_error"].notna()]
    for r in val.to_dict("records"):
        e = r["rel_error"]
        if not (isinstance(e, float) and math.isfinite(e)) or abs(e) <= ACCEPTANCE:
            continue
        gap = r.get("model_gap") if isinstance(r.get("model_gap"), dict) else {}
        m = out.setdefault(
            r["id"],
            {
                "id": r["id"],
                "errors": {},
                "record_check": gap.get("record_check", "no re-check of the setting recorded"),
                "hypothesis": gap.get("hypothesis", "no hypothesis recorded"),
            },
        )
        m["errors"][r["metric"]] = e
    return list(out.values())


def summary(table) -> dict:
    """Calibration point, validation errors (complete settings) and the largest of them."""
    val = table[(table["category"] == "validation") & table["rel_error"].notna()]
    errs = [e for e in val["rel_error"] if isinstance(e, float) and math.isfinite(e)]
    return {
        "calibration_point": CALIBRATION_POINT,
        "validation_rows": len(errs),
        "within_acceptance": sum(abs(e) <= ACCEPTANCE for e in errs),
        "max_abs_error": max((abs(e) for e in errs), default=None),
        "acceptance": ACCEPTANCE,
    }
