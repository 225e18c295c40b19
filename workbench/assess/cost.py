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
            "hf_config": m.get("hf_config"),
            "seq": m["shapes"][0][0][-1]
            if m.get("shapes") and m["shapes"][0] and m["shapes"][0][0]
            else None,
            "provenance": "measured (FlopCounterMode over the model's first forward in the cpu run)",
        }
    return None


#: hidden activations of gated (3-matrix) MLPs; other activations are read as a plain 2-matrix MLP
GATED_ACTS = ("silu", "swish", "swiglu")


def decoder_config(counts: dict):
    """A DecoderConfig and Block for a dense transformers decoder the run called, or (None, why not)."""
    from tpu_workbench.bench.projection.block import Block  # lazy: heavy
    from tpu_workbench.bench.workloads.config import DecoderConfig  # lazy: heavy

    hf = counts.get("hf_config") or {}
    if not hf or counts.get("unit") != "token":
        return None, "not a transformers model called with token ids"
    if hf.get("is_encoder_decoder") or hf.get("num_local_experts") or hf.get("num_experts"):
        return None, "an encoder-decoder or MoE config (only dense decoders are mapped)"
    d = hf.get("hidden_size") or hf.get("n_embd")
    layers = hf.get("num_hidden_layers") or hf.get("n_layer")
    heads = hf.get("num_attention_heads") or hf.get("n_head")
    if not (d and layers and heads and hf.get("vocab_size")):
        return None, "its config lacks hidden size, layers, heads or vocabulary"
    act = str(hf.get("hidden_act") or hf.get("activation_function") or "")
    cfg = DecoderConfig(
        name=f"{hf.get('model_type', 'model')} (from the run)",
        vocab=int(hf["vocab_size"]),
        d_model=int(d),
        n_layers=int(layers),
        n_heads=int(heads),
        n_kv_heads=int(hf.get("num_key_value_heads") or heads),
        ffn_dim=int(hf.get("intermediate_size") or hf.get("n_inner") or 4 * d),
        head_dim=int(hf.get("head_dim") or 0),
        tie_embeddings=bool(hf.get("tie_word_embeddings", False)),
        source="transformers config observed in the cpu run",
    )
    block = Block(mlp="gated" if act in GATED_ACTS else "plain", source=f"hidden activation {act!r}")
    return (cfg, block), ""


def _full(chips, mapped, n_chips: int, seq: int, kind: str | None) -> list[dict]:
    from tpu_workbench.bench.cost import pick_price  # lazy: startup
    from tpu_workbench.bench.projection import project  # lazy: heavy

    cfg, block = mapped
    rows = []
    for chip in chips:
        rec = project(chip, cfg, "train", n_chips, "fsdp", seq=seq, precision=PRECISION, block=block)
        price = pick_price(chip, kind) if kind else None
        rows.append(
            {
                "chip": chip.name,
                "tokens_per_s_per_chip": rec.tokens_per_s_per_chip,
                "mfu": rec.mfu,
                "bound": rec.extra.get("bound"),
                "projection_flops_per_token": rec.flops_per_token,
                "price": price,
            }
        )
    return rows


def _error_band(full: bool) -> dict:
    from tpu_workbench.bench.projection import calibration  # lazy: heavy

    s = calibration.summary(calibration.vs_published())
    return {
        "validation_points": s["validation_rows"],
        "within_acceptance": s["within_acceptance"],
        "acceptance": s["acceptance"],
        "max_abs_error": round(float(s["max_abs_error"]), 3) if s["max_abs_error"] is not None else None,
        "note": "errors of this projection on published large-model settings; a tiny model is far from them"
        if full
        else "errors of the full projection on published large-model settings; the compute-only term used here "
        "has no validation of its own and is optimistic for small models",
    }


def project_cost(counts: dict, chip_names: list[str], n_chips: int, tokens: float) -> dict:
    from tpu_workbench.bench.catalog import load_catalog  # lazy: startup
    from tpu_workbench.bench.cost import kinds_in_common, pick_price, usd_per_million_tokens  # lazy: startup
    from tpu_workbench.bench.projection import (  # lazy: heavy
        CALIBRATED_GEMM_EFFICIENCY,
        MODEL_NAME,
        MODEL_VERSION,
    )

    catalog = load_catalog()
    chips = [catalog.chip(n) for n in chip_names]
    kinds = kinds_in_common(chips)
    kind = kinds[0] if kinds else None

    mapped, why = decoder_config(counts)
    seq = int(counts.get("seq") or 2048)
    if mapped:
        base = _full(chips, mapped, n_chips, seq, kind)
        method = (
            f"{MODEL_NAME} {MODEL_VERSION}, full projection (compute, memory, communication) of the observed "
            f"transformers decoder: train, fsdp, seq {seq}, {mapped[1].mlp} MLP ({mapped[1].source})"
        )
    else:
        flops_per_token = TRAIN_FACTOR * counts["forward_flops_per_token"]
        base = [
            {
                "chip": chip.name,
                "tokens_per_s_per_chip": chip.peak(PRECISION, per="chip")
                * CALIBRATED_GEMM_EFFICIENCY
                / flops_per_token,
                "price": pick_price(chip, kind) if kind else None,
            }
            for chip in chips
        ]
        method = (
            f"compute term of {MODEL_NAME}: tokens/s = peak({PRECISION}) x {CALIBRATED_GEMM_EFFICIENCY} (calibrated "
            f"matmul efficiency) / ({TRAIN_FACTOR:g} x forward FLOPs/token); the full projection was not used: {why}"
        )
    rows = []
    for b in base:
        price = b.pop("price")
        tok_s = b["tokens_per_s_per_chip"]
        hours = tokens / (tok_s * n_chips) / 3600.0
        rows.append(
            {
                **b,
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
        "model": method,
        "full_projection": bool(mapped),
        "phase": "train",
        "chips": n_chips,
        "tokens": tokens,
        "price_kind": kind,
        "rows": rows,
        "error_band": _error_band(bool(mapped)),
    }
