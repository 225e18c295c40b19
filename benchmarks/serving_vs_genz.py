"""The serving validation rows predicted by this workbench and by GenZ (``pip install -e '.[benchmarks]'``),
side by side, plus the time to project 10,000 serving configurations.

    python benchmarks/serving_vs_genz.py [--json out.json]

GenZ (genz-llm 0.0.16) is given the same chips (catalog peak, HBM, NVLink/ICI), the same precision (fp8),
the same tensor parallelism (8) and the same model as far as it can express it. What it cannot express is
said per row instead of forcing a number: Qwen3.5's Gated-DeltaNet layers (it has attention or Mamba
layers only: the model is given to it as 60 full-attention GQA layers), continuous batching with chunked
prefill (its throughput at an interactivity target is read from decode-only steps at the batch that meets
it, prefill added as separate batched passes), and training (no training model in genz-llm 0.0.16).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from tpu_workbench.bench.catalog import load_catalog
from tpu_workbench.bench.projection.serving import ServingDeployment, StepModel, at_interactivity
from tpu_workbench.bench.projection.serving_benchmarks import PUBLISHED
from tpu_workbench.bench.projection.serving_benchmarks import projections as bench_projections
from tpu_workbench.bench.projection.serving_validation import (
    INFERENCEX_TCO,
    INPUT,
    OUTPUT,
    SEQ_OVERHEAD_S,
    group_of,
    serving_rows,
)
from tpu_workbench.bench.projection.shape import load_hf_config

CHIPS = ("TPU v7", "B200", "B300")


def _genz():
    try:
        from GenZ import decode_moddeling, prefill_moddeling  # lazy: optional
        from GenZ.Models import ModelConfig  # lazy: optional
    except ImportError as e:
        return None, f"GenZ not importable ({e}); pip install -e '.[benchmarks]'"
    return (decode_moddeling, prefill_moddeling, ModelConfig), ""


def _system(chip) -> dict:
    return {
        "Flops": chip.peak_tflops["bf16"],  # GenZ scales its compute by precision itself (fp8: x2)
        "Memory_size": chip.hbm_gbytes_per_device * chip.devices_per_chip,
        "Memory_BW": chip.hbm_bw_gbps,
        "ICN": chip.scaleup_gbytes_per_s_uni,
        "real_values": True,
    }


def genz_throughput(api, chip, tok_s_per_user: float) -> float | None:
    """Total tokens/s per chip at the largest decode batch whose GenZ step meets ``tok_s_per_user``, with the
    batch's prompts prefilled in GenZ prefill passes (time shared between them)."""
    decode, prefill, ModelConfig = api
    model = ModelConfig(
        model="qwen3.5-397b-a17b-as-gqa-moe",
        vocab_size=248320,
        hidden_size=4096,
        intermediate_size=1024,
        num_decoder_layers=60,
        num_attention_heads=32,
        head_dim=256,
        num_key_value_heads=2,
        num_experts=512,
        expert_top_k=10,
        moe_intermediate_size=1024,
        n_shared_experts=1,
        shared_expert_intermediate_size=1024,
    )
    sysd = _system(chip)
    best = None
    for batch in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512):
        try:
            d = decode(
                model=model,
                batch_size=batch,
                input_tokens=INPUT + OUTPUT // 2,
                output_tokens=0,
                system_name=sysd,
                bits="fp8",
                tensor_parallel=8,
            )
            p = prefill(
                model=model, batch_size=1, input_tokens=INPUT, system_name=sysd, bits="fp8", tensor_parallel=8
            )
        except Exception:  # GenZ refuses what does not fit  # noqa: BLE001
            break
        step_s = d["Latency"] / 1e3  # ModdelingOutput is a dict; its attributes stay 0
        prefill_s = p["Latency"] / 1e3 * batch / OUTPUT  # each sequence's prompt, spread over its outputs
        per_user = 1.0 / (step_s + prefill_s)
        if per_user < tok_s_per_user:
            break
        best = batch * (INPUT + OUTPUT) / OUTPUT * per_user / 8
    return best


def _moe_fields(c) -> dict:
    """GenZ's MoE fields for a mixture-of-experts config (none for a dense one): routed experts, top-k, expert
    width and shared experts, as in our shape (GenZ then reads top-k experts' weights per token, not all)."""
    if not c.n_experts:
        return {}
    out = {
        "num_experts": c.n_experts,
        "expert_top_k": c.top_k,
        "moe_intermediate_size": c.moe_ffn_dim,
    }
    if c.n_shared_experts:
        out |= {"n_shared_experts": c.n_shared_experts, "shared_expert_intermediate_size": c.moe_ffn_dim}
    return out


def genz_bench(api, pr, chip) -> float | None:
    """A published serving benchmark (MLPerf / jetstream-pytorch / tpu-recipes row) in GenZ: the same model
    (MoE fields included; linear-attention layers as GQA), chip, precision and tensor parallelism, decode steps at our concurrency and decode context, each sequence's
    prompt prefilled in a GenZ prefill pass spread over its outputs -> output tok/s per chip. GenZ's
    ``Flops`` is its bf16 figure (it scales by precision itself)."""
    decode, prefill, ModelConfig = api
    p = pr.point
    if pr.concurrency is None:  # no projection of ours (the setting does not fit): nothing to set GenZ to
        return None
    c, _ = load_hf_config(PUBLISHED / "models" / p["model"])
    model = ModelConfig(
        model=p["model"],
        vocab_size=c.vocab,
        hidden_size=c.d_model,
        intermediate_size=c.ffn_dim,
        num_decoder_layers=c.n_layers,
        num_attention_heads=c.n_heads,
        head_dim=c.head_dim,
        num_key_value_heads=c.n_kv_heads,
        **_moe_fields(c),
    )
    sysd = _system(chip)
    bits = {"bf16": "bf16", "fp8": "fp8", "fp4": "fp4", "int8": "int8"}[p["precision"]]
    ctx = p["cache_tokens"] if p["kv_allocation"] == "fixed" else pr.input_tokens + pr.output_tokens // 2
    try:
        d = decode(
            model=model,
            batch_size=pr.concurrency,
            input_tokens=ctx,
            output_tokens=0,
            system_name=sysd,
            bits=bits,
            tensor_parallel=p["tp"],
        )
        pf = prefill(
            model=model,
            batch_size=1,
            input_tokens=pr.input_tokens,
            system_name=sysd,
            bits=bits,
            tensor_parallel=p["tp"],
        )
    except Exception:  # GenZ refuses what does not fit  # noqa: BLE001
        return None
    step_s = d["Latency"] / 1e3 + pf["Latency"] / 1e3 * pr.concurrency / pr.output_tokens
    return pr.concurrency / step_s / p["tp"]


def sweep_time(n: int = 10_000) -> float:
    """Seconds to project ``n`` serving configurations (chip x layout x concurrency x mix)."""
    t = time.perf_counter()
    done = 0
    mixes = ((1024, 1024), (1024, 8192), (8192, 1024))
    while done < n:
        for chip in ("TPU v7", "B200", "H100 SXM", "TPU v6e"):
            for layout in ("tp", "dp=8"):
                m = StepModel.build(
                    "llama3-70b", ServingDeployment(chip, 8, layout, precision="fp8", max_batch=512)
                )
                for i, o in mixes:
                    for target in (5, 10, 20, 30, 50, 75, 100, 150):
                        at_interactivity(m, i, o, target, 2.0)
                        done += 1
    return time.perf_counter() - t


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write both tables here")
    args = ap.parse_args(argv)
    catalog = load_catalog()
    ours = [r for r in serving_rows(catalog) if r.role == "validation" and r.error_pct is not None]
    api, why = _genz()
    table = []
    bench = {pr.point["id"]: pr for pr in bench_projections(SEQ_OVERHEAD_S)}
    for r in ours:
        g = None
        note = why
        if api and r.id in bench:
            g = genz_bench(api, bench[r.id], catalog.chip(r.chip))
            note = (
                "GenZ: same model/chip/precision/tp, decode at our concurrency and context + prefill passes"
            )
            if g is None:
                note = "GenZ cannot express it (refused the setting: does not fit in its memory model)"
        elif api and r.id == "row 12" and r.chip in CHIPS:
            g = genz_throughput(api, catalog.chip(r.chip), 20.0)
            note = "GenZ: GDN layers as GQA; decode steps + separate prefill passes"
        elif api and r.id == "row 11" and r.chip in CHIPS:
            t = genz_throughput(api, catalog.chip(r.chip), 100.0)
            usd = INFERENCEX_TCO[r.chip]
            g = usd / (t * 3600) * 1e6 if t else None
            note = "GenZ: as row 12, priced as ours"
        elif api:
            note = (
                "GenZ cannot express it ("
                + (
                    "prefill MFU of an unnamed model"
                    if r.id == "row 4"
                    else "E2E latency under continuous batching / a ratio of the above"
                )
                + ")"
            )
        table.append(
            {
                "id": r.id,
                "chip": r.chip,
                "group": group_of(r),
                "published": r.published,
                "ours": r.projected,
                "ours_error_pct": r.error_pct,
                "genz": g,
                "genz_error_pct": None if g is None else 100 * (g / r.published - 1),
                "note": note,
            }
        )
    groups = {}
    for g in sorted({row["group"] for row in table}):
        part = [row for row in table if row["group"] == g]
        ge = [abs(row["genz_error_pct"]) for row in part if row["genz_error_pct"] is not None]
        groups[g] = {
            "ours_median_abs_error_pct": statistics.median(abs(row["ours_error_pct"]) for row in part),
            "genz_median_abs_error_pct": statistics.median(ge) if ge else None,
            "genz_rows": len(ge),
        }
    out = {
        "rows": table,
        "groups": groups,
        "sweep_10k_configs_s": sweep_time(),
        "genz": why or "genz-llm imported",
    }
    print(json.dumps(out, indent=1, default=str))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
