"""Registration: autoload through `import torch`, idempotence, lazy JAX, standing aside."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

from tpu_workbench import backend


def _run(code: str, **env: str) -> subprocess.CompletedProcess:
    e = dict(os.environ)
    e.update(env)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=e, timeout=120
    )


def test_register_is_idempotent() -> None:
    assert backend.register() is True
    assert backend.register() is True
    assert torch._C._get_privateuse1_backend_name() == "tpu"
    assert backend.is_registered() and not backend.stood_aside()


@pytest.mark.slow
def test_autoload_fresh_interpreter_without_jax_until_use() -> None:
    r = _run("""
        import sys, torch
        assert "jax" not in sys.modules, "autoload must not import jax"
        x = torch.randn(2, device="tpu")
        assert "jax" in sys.modules
        print(x.device, x.shape)
    """)
    assert r.returncode == 0, r.stderr
    assert "tpu:0 torch.Size([2])" in r.stdout


@pytest.mark.slow
def test_autoload_off() -> None:
    r = _run(
        """
        import torch
        print(torch._C._get_privateuse1_backend_name(), hasattr(torch, "tpu"))
    """,
        TORCH_DEVICE_BACKEND_AUTOLOAD="0",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "privateuseone False"


@pytest.mark.slow
def test_stands_aside_when_privateuse1_is_owned() -> None:
    r = _run(
        """
        import torch
        torch.utils.rename_privateuse1_backend("other")
        from tpu_workbench import backend
        assert backend.register() is False
        assert backend.register() is False
        assert backend.stood_aside()
        print("owner", torch._C._get_privateuse1_backend_name())
    """,
        TORCH_DEVICE_BACKEND_AUTOLOAD="0",
    )
    assert r.returncode == 0, r.stderr
    assert "owner other" in r.stdout
    assert r.stderr.count("stands aside") == 1, r.stderr


def test_device_name_is_honest() -> None:
    name = torch.tpu.get_device_name()
    import jax

    assert name == f"XLA {jax.devices()[0].platform.upper()} via JAX {jax.__version__}"
    assert "TPU" not in name.split(" via ")[0] or jax.devices()[0].platform == "tpu"
    props = torch.tpu.get_device_properties()
    assert props.platform == jax.devices()[0].platform
