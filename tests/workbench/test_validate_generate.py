"""The generate() check's setup: what it passes that an offline config lacks."""

from __future__ import annotations

from types import SimpleNamespace

from tpu_workbench.bench.validate.runner import _decoder_start


def _model(is_ed: bool, start: int | None, pad: int | None, gen_start: int | None = None) -> SimpleNamespace:
    cfg = SimpleNamespace(is_encoder_decoder=is_ed, decoder_start_token_id=start, pad_token_id=pad)
    return SimpleNamespace(config=cfg, generation_config=SimpleNamespace(decoder_start_token_id=gen_start))


def test_an_encoder_decoder_without_a_start_token_starts_from_its_pad_token() -> None:
    assert _decoder_start(_model(True, None, 3)) == {"decoder_start_token_id": 3}


def test_a_named_start_token_or_a_decoder_only_model_is_left_alone() -> None:
    assert _decoder_start(_model(True, 5, 3)) == {}
    assert _decoder_start(_model(True, None, 3, gen_start=7)) == {}
    assert _decoder_start(_model(False, None, 3)) == {}
    assert _decoder_start(_model(True, None, None)) == {}
