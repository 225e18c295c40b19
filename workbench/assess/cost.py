"""What the run would cost on the chosen GPU and TPU: parameters and FLOPs per token counted from the run, the
compute term of the projection (catalog peak x the projection's calibrated matmul efficiency) and catalog
prices; the projection's validation error band beside the figures.

Honest limits, stated in the report: this is the compute-bound term only (no memory, communication or
per-op overheads), so it is optimistic for small models; linear scaling over ``chips`` is assumed.
"""

from __future__ import annotations

#: a training step costs about 3 forward passes (forward + backward's two matmuls per forward matmul)
TRAIN_FACTOR = 3.0
PRECISION = "bf16"


def model_counts(probe: dict) -> dict | None:
    """The largest model the run called with a FLOP count: parameters, forward FLOPs per token (``unit``:
    "token" for token-id inputs, "sample" for a float input's rows). Modules with weights come first."""
    mods = [m for m in probe.get("modules", []) if m.get("flops") and m["flops"] > 0 and m.get("flop_tokens")]
    mods.sort(
        key=lambda m: m["parameters"] <= 0
    )  # stable: by parameters (the probe's order) within each group
    for m in mods:
        return {
            "class": m["class"],
            "parameters": m["parameters"],
            "forward_flops_per_token": m["flops"] / m["flop_tokens"],
            "tokens_in_run": m["tokens"],
            "unit": m.get("unit", "token"),
            "provenance": "measured (FlopCounterMode over the model's first forward in the cpu run)",
        }
    return None


def _error_band() -> dict:
    from tpu_workbench.bench.projection import calibration  # lazy: heavy

    s = calibration.summary(calibration.vs_published())
    return {
        "validation_points": s["validation_rows"],
        "within_acceptance": s["within_acceptance"],
        "acceptance": s["acceptance"],
        "max_abs_error": round(float(s["max_abs_error"]), 3) if s["max_abs_error"] is not None else None,
        "note": "errors of the full projection on published large-model settings; the compute-only term used "
        "here has no validation of its own and is optimistic for small models",
    }


def project_cost(counts: dict, chip_names: list[str], n_chips: int, tokens: float) -> dict:
    from tpu_workbench.bench.catalog import load_catalog  # lazy: startup
    from tpu_workbench.bench.cost import kinds_in_common, pick_price, usd_per_million_tokens  # lazy: startup
    from tpu_workbench.bench.projection import CALIBRATED_GEMM_EFFICIENCY  # lazy: heavy

    catalog = load_catalog()
    chips = [catalog.chip(n) for n in chip_names]
    kinds = kinds_in_common(chips)
    kind = kinds[0] if kinds else None
    flops_per_token = TRAIN_FACTOR * counts["forward_flops_per_token"]
    rows = []
    for chip in chips:
        peak = chip.peak(PRECISION, per="chip")
        tok_s = peak * CALIBRATED_GEMM_EFFICIENCY / flops_per_token
        price = pick_price(chip, kind) if kind else None
        hours = tokens / (tok_s * n_chips) / 3600.0
        rows.append(
            {
                "chip": chip.name,
                "peak_flops": peak,
                "tokens_per_s_per_chip": tok_s,
                "hours": hours,
                "usd_per_chip_hour": price.usd_per_chip_hour if price else None,
                "price_tier": price.tier if price else None,
                "price_source": price.source if price else None,
                "price_date": price.date if price else None,
                "usd_per_mtok": usd_per_million_tokens(price.usd_per_chip_hour, tok_s) if price else None,
                "usd_run": price.usd_per_chip_hour * hours * n_chips if price else None,
            }
        )
    return {
        "provenance": "projected",
        "model": f"compute term of workbench-roofline-comm: tokens/s = peak({PRECISION}) x "
        f"{CALIBRATED_GEMM_EFFICIENCY} (calibrated matmul efficiency) / ({TRAIN_FACTOR:g} x forward FLOPs/token)",
        "phase": "train",
        "chips": n_chips,
        "tokens": tokens,
        "price_kind": kind,
        "rows": rows,
        "error_band": _error_band(),
    }
