"""The torch.tpu / torch.accelerator contract (TorchTPU 0.2.0 on torch 2.13)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

LEGACY = {
    "is_available": (), "device_count": (), "synchronize": (), "current_device": (), "set_device": (0,),
    "current_stream": (), "initial_seed": (), "get_rng_state": (),
}  # fmt: skip

PUBLIC = [
    "EagerMode",
    "Event",
    "Precision",
    "Stream",
    "current_device",
    "current_stream",
    "default_generators",
    "default_stream",
    "device",
    "device_count",
    "device_of",
    "eager_mode",
    "get_amp_supported_dtype",
    "get_device_name",
    "get_device_properties",
    "get_rng_state",
    "initial_seed",
    "is_available",
    "is_initialized",
    "manual_seed",
    "manual_seed_all",
    "precision",
    "set_device",
    "set_eager_mode",
    "set_rng_state",
    "set_stream",
    "stream",
    "synchronize",
]


def test_public_names() -> None:
    missing = [n for n in PUBLIC if not hasattr(torch.tpu, n)]
    assert not missing


@pytest.mark.parametrize("name", sorted(LEGACY))
def test_legacy_apis_raise_with_replacement(name: str) -> None:
    with pytest.raises(RuntimeError, match=r"torch\.(accelerator|random)\."):
        getattr(torch.tpu, name)(*LEGACY[name])


def test_legacy_context_manager_raises() -> None:
    with pytest.raises(RuntimeError, match="torch.accelerator"):
        torch.tpu.device(0)


@pytest.mark.slow
def test_legacy_allowed_with_one_warning() -> None:
    code = (
        "import warnings, torch\n"
        "warnings.simplefilter('always')\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    assert torch.tpu.is_available() and torch.tpu.device_count() == 1\n"
        "    torch.tpu.synchronize(); torch.tpu.current_device()\n"
        "print(len([x for x in w if 'legacy' in str(x.message)]))\n"
    )
    env = dict(os.environ, TORCH_TPU_ALLOW_LEGACY_DEVICE_APIS="1")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "1"


def test_accelerator_api() -> None:
    assert torch.accelerator.is_available()
    assert torch.accelerator.device_count() == 1
    assert torch.accelerator.current_accelerator().type == "tpu"
    torch.accelerator.set_device_index(0)
    assert torch.accelerator.current_device_index() == 0
    x = torch.ones(3, device="tpu") * 2
    torch.accelerator.synchronize()
    assert x.sum().item() == 6


def test_autocast_defaults_to_bf16_and_casts_matmul_family() -> None:
    a = torch.randn(4, 4, device="tpu")
    lin = torch.nn.Linear(4, 4).to("tpu")
    conv = torch.nn.Conv2d(2, 2, 3).to("tpu")
    with torch.amp.autocast("tpu"):
        assert torch.get_autocast_dtype("tpu") == torch.bfloat16
        assert (a @ a).dtype == torch.bfloat16
        assert torch.mm(a, a).dtype == torch.bfloat16
        assert lin(a).dtype == torch.bfloat16
        assert conv(torch.randn(1, 2, 5, 5, device="tpu")).dtype == torch.bfloat16
        q = torch.randn(1, 2, 4, 8, device="tpu")
        assert torch.nn.functional.scaled_dot_product_attention(q, q, q).dtype == torch.bfloat16
        assert (a + a).dtype == torch.float32  # pointwise ops are not cast
        assert torch.softmax(a.bfloat16(), -1).dtype == torch.float32
    assert (a @ a).dtype == torch.float32
    assert torch.tpu.get_amp_supported_dtype() == [torch.bfloat16, torch.float16]


def test_matmul_precision_mapping() -> None:
    from tpu_workbench.backend.state import Precision, current_precision

    prev = torch.get_float32_matmul_precision()
    try:
        for name, p in [
            ("medium", Precision.DEFAULT),
            ("high", Precision.HIGH),
            ("highest", Precision.HIGHEST),
        ]:
            torch.set_float32_matmul_precision(name)
            assert current_precision() is p
        with torch.tpu.precision(torch.tpu.Precision.DEFAULT):
            assert current_precision() is Precision.DEFAULT
            # the matmul still runs (on CPU XLA DEFAULT == HIGHEST numerically)
            a = torch.randn(8, 8, device="tpu")
            assert (a @ a).shape == (8, 8)
    finally:
        torch.set_float32_matmul_precision(prev)


def test_eager_modes() -> None:
    assert torch.tpu.eager_mode is torch.tpu.EagerMode.DEFER_NEVER
    with torch.tpu.set_eager_mode(torch.tpu.EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING):
        assert torch.tpu.eager_mode is torch.tpu.EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING
        assert (torch.ones(2, device="tpu") + 1).sum().item() == 4
    assert torch.tpu.eager_mode is torch.tpu.EagerMode.DEFER_NEVER
    torch.tpu.eager_mode = torch.tpu.EagerMode.DEFER_AND_FUSE
    try:
        assert torch.tpu.eager_mode is torch.tpu.EagerMode.DEFER_AND_FUSE
        assert (torch.ones(2, device="tpu") + 1).sum().item() == 4
    finally:
        torch.tpu.eager_mode = torch.tpu.EagerMode.DEFER_NEVER
    assert torch.tpu.eager_mode is torch.tpu.EagerMode.DEFER_NEVER
    with pytest.raises(ValueError, match="DEFER_NEVER"):
        torch.tpu.eager_mode = "FAST"


def test_streams_are_placeholders() -> None:
    s = torch.tpu.default_stream()
    e = torch.tpu.Event()
    e.record(s)
    e.synchronize()
    assert s.query() and e.query()


def test_missing_op_raises_and_fallback_counts() -> None:
    from tpu_workbench.backend import dispatch
    from tpu_workbench.backend.ops.registry import REGISTRY

    op = torch.ops.aten.linalg_eig.default  # no lowering yet (complex eigenvectors of general matrices)
    assert op not in REGISTRY
    a = torch.randn(4, 4)
    x = (a @ a.T + 4 * torch.eye(4)).to("tpu")
    with pytest.raises(NotImplementedError, match=r"operator 'aten::linalg_eig' is not implemented for TPU"):
        torch.linalg.eigvals(x)
    dispatch.set_cpu_fallback(True)
    try:
        with pytest.warns(UserWarning, match="running it on the CPU"):
            r = torch.linalg.eigvals(x)
        r2 = torch.linalg.eigvals(x)
        assert r.device.type == "tpu"
        torch.testing.assert_close(r.cpu(), torch.linalg.eigvals(x.cpu()))
        torch.testing.assert_close(r2.cpu(), r.cpu())
        assert dispatch.FALLBACK_COUNTS["aten::linalg_eig"] == 2
    finally:
        dispatch.set_cpu_fallback(False)


def test_set_eager_mode_takes_effect_when_called_and_restores_as_a_block() -> None:
    """A bare ``torch.tpu.set_eager_mode(...)`` switches the mode (as ``torch.set_grad_enabled`` does) instead of
    silently doing nothing; as a ``with`` block it restores the previous mode."""
    start = torch.tpu.eager_mode
    try:
        torch.tpu.set_eager_mode(torch.tpu.EagerMode.DEFER_AND_FUSE)
        assert torch.tpu.eager_mode is torch.tpu.EagerMode.DEFER_AND_FUSE
        with torch.tpu.set_eager_mode(torch.tpu.EagerMode.DEFER_NEVER):
            assert torch.tpu.eager_mode is torch.tpu.EagerMode.DEFER_NEVER
        assert torch.tpu.eager_mode is torch.tpu.EagerMode.DEFER_AND_FUSE
    finally:
        torch.tpu.eager_mode = start
