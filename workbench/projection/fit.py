"""Stage 3: does the setting fit in HBM (per device)? Training picks the remat policy here ('auto': the least
recompute that fits); inference counts weights, the KV cache and the step's activations."""

from __future__ import annotations

from dataclasses import dataclass

from tpu_workbench.bench.flops import kv_bytes_per_token
from tpu_workbench.bench.projection.memory import MemoryFit, inference_memory, training_memory
from tpu_workbench.bench.projection.remat import saved_sublayers
from tpu_workbench.bench.projection.spec import Setting

AUTO_REMAT_ORDER = ("none", "minimal_with_context", "minimal", "save_dot_except_mlp", "save_qkv_proj", "full")


@dataclass(frozen=True)
class Fit:
    """The memory verdict and, for training, the remat policy it chose (None for inference)."""

    memory: MemoryFit
    remat: str | None = None
    saved: frozenset[str] = frozenset()
    offloaded: frozenset[str] = frozenset()
    kv_bytes_per_chip: float = 0.0

    @property
    def fits(self) -> bool:
        return self.memory.fits


def kv_cache_bytes_per_chip(s: Setting) -> float:
    """KV cache one chip holds: prefill writes the step's tokens; decode keeps ``batch`` sequences of
    ``seq`` + 1 positions per chip (its share of the TP group's KV heads, at least one head)."""
    kv_tok = kv_bytes_per_token(s.cfg, s.kvb) / min(s.lay.tp, s.cfg.n_kv_heads)
    positions = s.tokens if s.phase == "prefill" else s.batch * (s.seq + 1)
    return positions * s.lay.tp * kv_tok


def fit_memory(s: Setting) -> Fit:
    """Training: remat choice and its memory; inference: weights + KV cache + activations."""
    if s.phase == "train":
        return _choose_remat(s)
    kv = kv_cache_bytes_per_chip(s)
    mem = inference_memory(
        s.cfg,
        s.pc,
        s.lay,
        kv_bytes_per_chip=kv,
        devices_per_chip=s.chip.devices_per_chip,
        hbm_gb_per_device=s.chip.hbm_gbytes_per_device,
        weight_bytes=s.wb,
        tokens_per_chip=s.tokens,
        sequences_per_chip=s.batch,
        act_bytes=s.nb,
    )
    return Fit(mem, kv_bytes_per_chip=kv)


def _choose_remat(s: Setting) -> Fit:
    k = s.kernels
    offloaded = frozenset(
        sub
        for n, where in (k.remat_names or {}).items()
        if where == "offload"
        for sub in saved_sublayers("custom", {n: "offload"})
    )
    if k.remat.endswith(
        "_offloaded"
    ):  # MaxText qkv_proj_offloaded / minimal_offloaded keep them in host memory
        offloaded = offloaded | saved_sublayers(k.remat)
    candidates = AUTO_REMAT_ORDER if k.remat == "auto" else (k.remat,)
    fit = None
    for policy in candidates:
        saved = saved_sublayers(policy, k.remat_names)
        mem = training_memory(
            s.cfg,
            s.pc,
            s.lay,
            tokens_per_chip=s.tokens,
            devices_per_chip=s.chip.devices_per_chip,
            hbm_gb_per_device=s.chip.hbm_gbytes_per_device,
            saved=saved,
            offloaded=offloaded,
            state_bytes_per_param=s.a.optimizer_state_bytes_per_param + 2 * s.wb,
            act_bytes=s.nb,
            weight_bytes=s.wb,
            block=s.block,
            seq=s.seq,
        )
        fit = Fit(mem, policy, saved, offloaded)
        if k.remat != "auto" or mem.fits:
            return fit
    return Fit(fit.memory, candidates[-1], saved_sublayers(candidates[-1]), offloaded)
