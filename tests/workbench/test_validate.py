"""tpu-bench validate: the zoo walk, the shrinker, inputs, tier logic, failure classes, the process sweep."""

from __future__ import annotations

import json
import textwrap

import pytest
import torch

pytest.importorskip("transformers", reason="tpu-bench validate needs the validate extra (transformers)")

from tpu_workbench.backend import comparison as compare
from tpu_workbench.bench.errors import WorkbenchError
from tpu_workbench.bench.results import read_records
from tpu_workbench.bench.validate import classify, inputs, report, runner, shrink, zoo


@pytest.fixture(scope="module")
def archs():
    return {a.model_type: a for a in zoo.architectures()}


def test_zoo_covers_every_mapped_model_type(archs):
    from transformers.models.auto import modeling_auto

    mapped = set()
    for name in zoo.all_mapping_names():
        mapped |= set(getattr(modeling_auto, name))
    assert len(archs) >= 600
    assert set(archs) <= mapped
    # an encoder-decoder is validated whole, a BERT-like encoder as a masked LM, a decoder as a causal LM
    assert archs["bart"].candidates[0].class_name == "BartForConditionalGeneration"
    assert archs["bert"].candidates[0].class_name == "BertForMaskedLM"
    assert archs["llama"].candidates[0].class_name == "LlamaForCausalLM"
    assert archs["whisper"].family == "speech-seq2seq"


def test_select_globs_comma_lists_and_unknown_names(archs):
    chosen = [a.model_type for a in zoo.select(["llama,bert", "qwen2_vl*"])]
    assert chosen[:2] == ["bert", "llama"] and "qwen2_vl" in chosen
    with pytest.raises(WorkbenchError, match="similar: .*llama"):
        zoo.select(["lama"])


def test_shrink_layers_widths_and_special_tokens(archs):
    config, changes, reserved = runner.build_config(archs["llama"])
    assert config.num_hidden_layers == 2 and config.hidden_size == shrink.WIDTH
    assert config.vocab_size == shrink.VOCAB
    assert config.num_attention_heads % config.num_key_value_heads == 0
    for name in ("bos_token_id", "eos_token_id", "pad_token_id"):
        value = getattr(config, name)
        assert value is None or all(
            0 <= v < config.vocab_size for v in ([value] if isinstance(value, int) else value)
        )
    assert changes["num_hidden_layers"] == [32, 2]


def test_per_layer_kinds_keep_one_layer_of_each():
    d = {
        "num_hidden_layers": 12,
        "layer_types": ["sliding"] * 5 + ["full"] + ["sliding"] * 5 + ["full"],
        "per_layer": {"5": {"head_dim": 8}, "11": {"head_dim": 8}},
    }
    out, _, _ = shrink.shrink_config_dict(d)
    assert out["layer_types"] == ["sliding", "full"] and out["num_hidden_layers"] == 2
    assert list(out["per_layer"]) == ["01"]  # the full-attention layer's settings follow it to its new index
    three = {"num_hidden_layers": 6, "layer_types": ["mamba", "attention", "moe"] * 2}
    assert shrink.shrink_config_dict(three)[0]["num_hidden_layers"] == 3


def test_layer_index_lists_are_rescaled_and_widths_followed():
    d = {
        "num_hidden_layers": 12,
        "global_attn_indexes": [2, 5, 8, 11],
        "hidden_size": 768,
        "condition_dim": 768,
    }
    out, _, _ = shrink.shrink_config_dict(d)
    assert out["num_hidden_layers"] == 4 and out["global_attn_indexes"] == [0, 1, 2, 3]
    assert out["condition_dim"] == out["hidden_size"] == shrink.WIDTH


def test_mrope_sections_follow_the_head_size(archs):
    config, _, _ = runner.build_config(archs["qwen2_vl"])
    text = config.text_config
    section = text.rope_parameters["mrope_section"]
    assert sum(section) == text.hidden_size // text.num_attention_heads // 2


def test_backbone_stages_renumbered(archs):
    config, _, _ = runner.build_config(archs["dinov2"])
    assert config.num_hidden_layers == 2 and config.out_features == ["stage2"]


def test_vision_language_inputs_hold_one_placeholder_per_image_feature(archs):
    config, _, reserved = runner.build_config(archs["llava"])
    model = runner.build_model(runner._model_class("LlavaForConditionalGeneration"), config)
    args = inputs.build_inputs(model, config, reserved)
    with torch.no_grad():
        feats = model.model.get_image_features(pixel_values=args["pixel_values"]).pooler_output
    n_features = sum(f.shape[0] for f in feats)
    assert int((args["input_ids"] == config.image_token_id).sum()) == n_features
    assert args["attention_mask"].shape == args["input_ids"].shape


@pytest.mark.slow
def test_harness_runs_three_architectures_on_the_cpu():
    """The harness path end to end, in-process, with the CPU standing in for the device."""
    for name in ("gpt2", "vit", "wav2vec2"):
        res = runner.validate(name, device="cpu", check_generate=False)
        assert res["status"] == "pass", (name, res.get("error"))
        assert res["agreement"]["forward"]["compared"] >= 1
        assert res["agreement"]["gradients"]["compared"] > 0
        assert res["harness_ok"] and res["tier1"] and res["parameters"] < 2_000_000


def test_tolerances_scale_with_the_tensor():
    ref = torch.tensor([1000.0, 1e-3])
    ok, bad = compare.compare_tensor("x", ref + torch.tensor([0.05, 0.05]), ref, 1e-4, 1e-5)
    assert bad is None and ok <= 1  # 0.05 is within 1e-4 of the tensor's scale (1000)
    _, bad = compare.compare_tensor("x", ref + torch.tensor([0.5, 0.0]), ref, 1e-4, 1e-5)
    assert bad is not None
    nan = torch.tensor([float("nan"), 1.0])
    _, bad = compare.compare_tensor("x", torch.tensor([1.0, 1.0]), nan, 1e-4, 1e-5)
    assert bad is not None and "NaN" in bad.detail
    assert compare.compare_tensor("i", torch.tensor([1, 2]), torch.tensor([1, 3]), 0, 0)[1] is not None


def test_failure_classes():
    assert (
        classify.classify_error(
            "NotImplementedError", "operator 'aten::histc' is not implemented for TPU. Set ..."
        )
        == "missing op aten::histc"
    )
    assert (
        classify.classify_error("RuntimeError", "\"histogram_cpu\" not implemented for 'Int'")
        == "histogram_cpu refuses dtype Int"
    )
    assert (
        classify.classify_error("crash", "the process died (SIGSEGV) during stage 'tpu_forward'")
        == "process died (SIGSEGV) in tpu_forward"
    )
    same = [
        classify.classify_error("RuntimeError", f"shape '[2, {n}]' is invalid for input of size {n * 3}")
        for n in (4, 9)
    ]
    assert same[0] == same[1]
    rescued = {"status": "fail", "cpu_rescued": {"rescues": {"aten::_weight_norm_interface_backward": 2}}}
    assert (
        classify.classify(rescued) == "backward op re-run on the CPU: aten::_weight_norm_interface_backward"
    )


def test_a_backward_rescue_is_a_tier1_failure(monkeypatch):
    """An op re-run on the CPU during the device stages makes tier 1 fail even though the run completed."""
    real = compare.counter_diff

    def with_rescue(before):
        diff = real(before)
        diff["rescues"] = {"aten::fake_backward": 1}
        return diff

    monkeypatch.setattr(compare, "counter_diff", with_rescue)
    res = runner.validate("gpt2", device="cpu", check_generate=False)
    assert res["tier1"] is False and res["tier2"] is False and res["status"] == "fail"
    assert classify.classify(res).startswith("backward op re-run on the CPU")


def test_report_counts_harness_failures_apart(tmp_path):
    source = {"device": "cpu", "platform": "host CPU", "device_name": "cpu", "emulated": False, "date": "d"}
    results = [
        {"model_type": "a", "status": "pass", "tier1": True, "tier2": True, "family": "x"},
        {
            "model_type": "b",
            "status": "tier1",
            "tier1": True,
            "tier2": False,
            "family": "x",
            "agreement": {"forward": {"ok": False}, "gradients": {"ok": True}},
        },
        {
            "model_type": "c",
            "status": "fail",
            "tier1": False,
            "tier2": False,
            "error_type": "NotImplementedError",
            "error": "operator 'aten::foo' is not implemented for TPU",
            "family": "x",
        },
        {
            "model_type": "d",
            "status": "harness",
            "failed_stage": "config",
            "error_type": "ValueError",
            "error": "bad config",
            "family": "x",
        },
    ]
    recs = [report.record_for(r, source, 1.0, {}) for r in results]
    s = report.summarise(recs)
    assert (s["architectures"], s["built"], s["tier1"], s["tier2"]) == (4, 3, 2, 1)
    assert s["harness_failures"] == {"d": "ValueError: bad config"}
    assert s["failure_classes"][0][0] in ("missing op aten::foo", "numerical mismatch vs CPU (forward)")
    text = report.markdown(recs)
    assert "| d | config | bad config |" in text and "66.7% of run" in text


FACTORIES = textwrap.dedent("""
    import os, signal, time
    import torch

    class Net(torch.nn.Module):
        def __init__(self, mode):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)
            self.mode = mode

        def forward(self, x):
            if x.device.type != "cpu" and self.mode == "crash":
                os.kill(os.getpid(), signal.SIGSEGV)
            if x.device.type != "cpu" and self.mode == "hang":
                time.sleep(600)
            return self.lin(x)

    def ok():
        return Net("ok"), (torch.randn(2, 4),)

    def crash():
        return Net("crash"), (torch.randn(2, 4),)

    def hang():
        return Net("hang"), (torch.randn(2, 4),)
""")


@pytest.mark.slow
def test_sweep_survives_a_segfault_and_a_hang(tmp_path, monkeypatch):
    """Each run is its own process: a segfault and a hang are recorded (stage, signal) and the sweep goes on."""
    from tpu_workbench.bench.validate.orchestrate import run_validation
    from tpu_workbench.bench.validate.sweep import SweepOptions

    (tmp_path / "user_nets.py").write_text(FACTORIES)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    run = run_validation(
        None,
        user_models=["user_nets:ok", "user_nets:crash", "user_nets:hang"],
        options=SweepOptions(jobs=2, timeout=60, out=tmp_path / "out", device="tpu"),
        compile="none",
        progress=False,
    )
    by = {r.config["model_type"]: r.extra for r in run.records if r.phase == report.PHASE}
    assert by["user_nets:ok"]["tier2"] is True
    assert by["user_nets:crash"]["failure_class"] == "process died (SIGSEGV) in tpu_forward"
    assert by["user_nets:hang"]["failure_class"] == "timeout in tpu_forward"
    assert len(read_records(tmp_path / "out" / "records.jsonl")) == 4  # three runs + the summary
    assert "process died (SIGSEGV)" in (tmp_path / "out" / "report.md").read_text()


# A fixed spread over the families (decoders, MoE, encoders, seq2seq, vision, audio, vision-language).
SPREAD = [
    "albert",
    "bart",
    "bert",
    "bloom",
    "clip",
    "convnext",
    "deberta-v2",
    "deit",
    "distilbert",
    "falcon",
    "gemma",
    "gpt2",
    "gpt_neox",
    "granite",
    "llava",
    "mistral",
    "mixtral",
    "mobilevit",
    "mpt",
    "opt",
    "phi3",
    "qwen2",
    "qwen2_moe",
    "resnet",
    "roberta",
    "t5",
    "vit",
    "wav2vec2",
    "whisper",
    "xlm-roberta",
]


@pytest.mark.slow
def test_fixed_spread_of_thirty_architectures(tmp_path):
    """Every architecture of the spread is built by the harness; runs that needed the CPU never pass."""
    from tpu_workbench.bench.validate.orchestrate import run_validation
    from tpu_workbench.bench.validate.sweep import SweepOptions

    run = run_validation(
        SPREAD,
        options=SweepOptions(jobs=2, timeout=240, out=tmp_path),
        generate=False,
        compile="none",
        progress=False,
    )
    rows = [r for r in run.records if r.phase == report.PHASE]
    assert sorted(r.config["model_type"] for r in rows) == sorted(SPREAD)
    not_built = {r.config["model_type"]: r.extra["error"] for r in rows if not r.extra["harness_ok"]}
    assert not not_built
    for r in rows:
        rescued = r.extra.get("cpu_rescued") or {}
        if rescued.get("rescues") or rescued.get("fallbacks"):
            assert r.extra["tier1"] is False
    summary = json.loads(json.dumps(run.summary, default=str))
    assert summary["built"] == len(SPREAD)
