"""The layer wiring the projection models beside DecoderConfig: plain 2-matrix MLPs and parallel blocks
(MaxText's default decoder of 2023, the model of the v5e / v5p tables)."""

import pytest

from tpu_workbench.bench.catalog import load_catalog
from tpu_workbench.bench.errors import WorkbenchError
from tpu_workbench.bench.flops import flops_per_token, param_counts
from tpu_workbench.bench.projection import project
from tpu_workbench.bench.projection.block import LLAMA, Block, block_flops_per_token, block_param_counts
from tpu_workbench.bench.projection.calibration import _block, _config
from tpu_workbench.bench.projection.work import forward_ops
from tpu_workbench.bench.published import training_blocks, training_models
from tpu_workbench.bench.workloads.config import DecoderConfig

PLAIN_PARALLEL = Block(mlp="plain", parallel=True, source="test")
DENSE = DecoderConfig(
    "dense-test",
    vocab=32768,
    d_model=4096,
    n_layers=8,
    n_heads=32,
    n_kv_heads=32,
    ffn_dim=16384,
    head_dim=128,
)


def test_a_plain_mlp_has_two_matrices_and_two_thirds_of_the_gated_mlp_weights():
    gated, plain = param_counts(DENSE), block_param_counts(DENSE, PLAIN_PARALLEL)
    assert gated.dense_ffn == 3 * 8 * 4096 * 16384 and plain.dense_ffn == 2 * 8 * 4096 * 16384
    assert plain.attention == gated.attention and plain.embedding == gated.embedding
    assert block_param_counts(DENSE, LLAMA) == gated


def test_model_flops_of_a_plain_mlp_drop_one_matmul_per_layer():
    gated = flops_per_token(DENSE, "train", 2048, convention="causal")
    plain = block_flops_per_token(DENSE, PLAIN_PARALLEL, "train", 2048, convention="causal")
    assert gated - plain == pytest.approx(3 * 2 * 8 * 4096 * 16384)  # fwd + 2 bwd, 2 FLOPs per weight
    assert block_flops_per_token(DENSE, LLAMA, "prefill", 2048) == flops_per_token(DENSE, "prefill", 2048)


def test_forward_ops_of_a_plain_parallel_block():
    kw = dict(
        tokens=4096, seq=2048, context=None, tp=1, ep=1, nb=2, tile=128, capacity_factor=None, attn_block=512
    )
    llama = forward_ops(DENSE, **kw)
    plain = forward_ops(DENSE, block=PLAIN_PARALLEL, **kw)
    names = [op.name for op in plain.ops]
    assert "mlp_wi_1" not in names and {"mlp_wi_0", "mlp_wo"} <= set(names)
    ew = {op.name: op.bytes for op in llama.ops}["elementwise"]
    ew_plain = {op.name: op.bytes for op in plain.ops}["elementwise"]
    # one norm and one add instead of two of each (4 d fewer), and the ReLU reads 1 input instead of 2 (1 ffn)
    assert ew - ew_plain == pytest.approx(4096 * (4 * 4096 + 16384) * 2 * 8)


def test_a_parallel_block_reduces_its_tensor_parallel_activations_once_per_layer():
    v5p = load_catalog().chip("TPU v5p")
    kw = dict(batch=2, seq=2048, remat="minimal", async_collectives=("all_gather",))
    seq = project(v5p, DENSE, "train", 64, "dp=1,fsdp=8,tp=8", block=Block(mlp="plain"), **kw)
    par = project(v5p, DENSE, "train", 64, "dp=1,fsdp=8,tp=8", block=PLAIN_PARALLEL, **kw)
    comm_seq, comm_par = seq.extra["comm_breakdown_s"], par.extra["comm_breakdown_s"]
    assert comm_par["tp_reduce_scatter"] == pytest.approx(comm_seq["tp_reduce_scatter"] / 2)
    assert par.step_median_s < seq.step_median_s


def test_the_record_names_the_wiring_with_its_source():
    rec = project(
        "TPU v5p", DENSE, "train", 64, "fsdp", batch=2, seq=2048, remat="full", block=PLAIN_PARALLEL
    )
    named = rec.source["inputs"]["named"]
    assert named["mlp_kind"] == {"value": "plain", "unit": "2 weight matrices", "source": "test"}
    assert named["parallel_block"]["value"] is True and named["parallel_block"]["source"] == "test"
    assert rec.flops_per_token == pytest.approx(
        block_flops_per_token(DENSE, PLAIN_PARALLEL, "train", 2048, convention="causal")
    )
    default = project("TPU v5p", DENSE, "train", 64, "fsdp", batch=2, seq=2048, remat="full")
    assert default.source["inputs"]["named"]["mlp_kind"]["value"] == "gated"


def test_a_plain_mlp_is_refused_for_moe_models():
    with pytest.raises(WorkbenchError, match="dense models only"):
        block_param_counts(_config("qwen3-235b-a22b"), PLAIN_PARALLEL)
    with pytest.raises(WorkbenchError, match="MLP kind"):
        Block(mlp="swiglu3")


def test_the_2023_maxtext_synthetic_models_have_the_2023_shape_and_wiring():
    """The v5e/v5p tables ran MaxText's base.yml of Sep 2023 - Feb 2024 (emb 2560, 8 heads of 256, ReLU MLP
    8192, vocab 32768, tied, parallel layer), not today's Llama-style base.yml."""
    blocks = training_blocks()
    for size in (16, 32, 64, 128, 256, 512, 1024):
        name = f"maxtext-synthetic-{size}b"
        cfg, block = _config(name), _block(name)
        assert block == Block.from_dict(blocks[name]) and block.mlp == "plain" and block.parallel
        assert "76bd53b0f" in block.source and "models.py" in block.source
        assert cfg.head_dim == 256 and cfg.vocab == 32768 and cfg.tie_embeddings
        assert cfg.d_model % 2560 == 0 and cfg.ffn_dim % 8192 == 0 and cfg.n_heads % 8 == 0
        assert block_param_counts(cfg, block).total / 1e9 == pytest.approx(size, rel=0.04), name
        assert "block" not in training_models()[name]  # the DecoderConfig fields stay loadable
    assert (_config("maxtext-synthetic-32b").d_model, _config("maxtext-synthetic-32b").n_heads) == (10240, 32)
    assert _block("llama3-70b") == Block()
