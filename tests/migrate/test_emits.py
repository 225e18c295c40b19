"""Every API the rules can write exists in TorchTPU 0.2.0's contract or in the installed torch 2.13,
and none is a legacy torch.tpu API that raises on torch >= 2.11."""

from __future__ import annotations

import re

import pytest

from tpu_workbench.migrate.rules import all_rules

# torch.tpu public API of TorchTPU 0.2.0 (torchtpu-contract.md section 3), minus the ones that raise (section 4).
LEGACY_RAISING = {
    f"torch.tpu.{n}"
    for n in (
        "is_available",
        "device_count",
        "synchronize",
        "current_device",
        "set_device",
        "current_stream",
        "set_stream",
        "initial_seed",
        "get_rng_state",
        "device",
    )
}
TORCH_TPU_CONTRACT = {
    f"torch.tpu.{n}"
    for n in (
        "EagerMode",
        "Event",
        "Precision",
        "Stream",
        "default_generators",
        "default_stream",
        "device_of",
        "get_amp_supported_dtype",
        "get_device_name",
        "get_device_properties",
        "is_initialized",
        "manual_seed",
        "manual_seed_all",
        "precision",
        "set_eager_mode",
        "set_rng_state",
        "stream",
    )
}


def _emitted() -> list[tuple[str, str]]:
    return [(r.code, api) for r in all_rules() for api in r.emits]


def _new_in_examples() -> set[tuple[str, str]]:
    """torch APIs that a rule's documented output adds (present in `after`, absent from `before`)."""
    pat = re.compile(r"\btorch(?:\.[A-Za-z_]\w*)+")
    found = set()

    def code_only(text: str) -> str:  # TODO comments give advice, they are not emitted code
        return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))

    for r in all_rules():
        for api in set(pat.findall(code_only(r.after))) - set(pat.findall(r.before)):
            found.add((r.code, api))
    return found


def _exists_in_torch(api: str) -> bool:
    import torch

    obj = torch
    for part in api.split(".")[1:]:
        if not hasattr(obj, part):
            return False
        obj = getattr(obj, part)
    return True


@pytest.mark.parametrize(("code", "api"), _emitted(), ids=lambda x: str(x))
def test_emitted_api_exists_and_is_not_legacy(code, api):
    assert api not in LEGACY_RAISING, f"{code} emits {api}, which raises on TorchTPU with torch >= 2.11"
    assert api in TORCH_TPU_CONTRACT or _exists_in_torch(api), (
        f"{code} emits {api}: not in the contract or torch"
    )


def test_every_api_in_examples_is_declared():
    """`emits` is not a hand-kept list that can drift: what the examples write must be declared."""
    by_code = {r.code: r for r in all_rules()}
    declared = {
        (r.code, api) for r in all_rules() for req in (r.code, *r.requires) for api in by_code[req].emits
    }
    missing = [
        (c, a)
        for c, a in _new_in_examples()
        if not any(
            c == dc and (da == a or da.startswith(a + ".") or a.startswith(da + ".")) for dc, da in declared
        )
    ]
    assert not missing


def test_legacy_apis_are_never_in_outputs():
    for r in all_rules():
        for api in LEGACY_RAISING:
            assert not re.search(re.escape(api) + r"\b(?!_)", r.after), (r.code, api)
