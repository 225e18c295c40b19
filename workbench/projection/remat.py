"""Activation rematerialisation: which forward results a training step keeps, and so what it recomputes.

A policy is the set of sub-layer outputs that are saved (on the device or offloaded to the host); every
other sub-layer is recomputed in the backward pass, which costs its forward time again. Names follow
MaxText's checkpoint names (``query_proj``, ``mlpwi`` ...; ``remat_policy`` in its decoders.py) mapped onto
the sub-layers the model times.
"""

from __future__ import annotations

from tpu_workbench.bench.errors import WorkbenchError, unknown

# the sub-layers of a decoder layer the projection times separately
SUBLAYERS = (
    "q_proj",
    "k_proj",
    "v_proj",
    "attention",
    "out_proj",
    "mlp_wi_0",
    "mlp_wi_1",
    "mlp_wo",
    "elementwise",
)

# MaxText checkpoint names -> sub-layers they save
MAXTEXT_NAMES = {
    "query_proj": ("q_proj",),
    "key_proj": ("k_proj",),
    "value_proj": ("v_proj",),
    "kv_proj": ("k_proj", "v_proj"),
    "qkv_proj": ("q_proj", "k_proj", "v_proj"),
    "context": ("attention",),
    "out_proj": ("out_proj",),
    "mlpwi_0": ("mlp_wi_0",),
    "mlpwi_1": ("mlp_wi_1",),
    "mlpwi": ("mlp_wi_0", "mlp_wi_1"),
    "mlpwo": ("mlp_wo",),
    "decoder_layer_input": (),  # the layer input is where recomputation starts; it saves no sub-layer
}

_MINIMAL = ("q_proj", "k_proj", "v_proj", "out_proj", "mlp_wi_0", "mlp_wi_1", "mlp_wo")
# named policies -> saved sub-layers (MaxText decoders.py get_remat_policy; torchtitan activation_checkpoint)
POLICIES: dict[str, tuple[str, ...]] = {
    "none": SUBLAYERS,
    "full": (),
    "minimal": _MINIMAL,
    "minimal_with_context": (*_MINIMAL, "attention"),
    "save_dot_with_context_except_mlp": ("q_proj", "k_proj", "v_proj", "attention", "out_proj"),
    "save_dot_except_mlpwi": ("q_proj", "k_proj", "v_proj", "out_proj", "mlp_wo"),
    "save_dot_except_mlp": ("q_proj", "k_proj", "v_proj", "out_proj"),
    "save_qkv_proj": ("q_proj", "k_proj", "v_proj"),
    "qkv_proj_offloaded": ("q_proj", "k_proj", "v_proj"),
    "minimal_offloaded": _MINIMAL,
    "save_out_proj": ("out_proj",),
    # torchtitan selective AC 'op' (parallelize_llama.py _save_list): saves every matmul output except every
    # second one of a block (wq, wk, wv, wo, w1, w3, w2 -> wk, wo, w3 recomputed) and the SDPA output
    "torchtitan_op": ("q_proj", "v_proj", "attention", "mlp_wi_0", "mlp_wo"),
}
REASON = (
    "recomputed sub-layers cost their forward time again in the backward pass (remat is counted in "
    "time, never in model FLOPs / MFU)"
)


def saved_sublayers(policy: str, custom_names: dict[str, str] | None = None) -> frozenset[str]:
    """Sub-layers a policy saves. ``policy='custom'`` takes MaxText-style ``{name: 'device' | 'offload' |
    'remat'}``: 'device' and 'offload' save, anything else recomputes."""
    if policy == "custom":
        saved: set[str] = set()
        for name, where in (custom_names or {}).items():
            if name not in MAXTEXT_NAMES:
                raise WorkbenchError(unknown("MaxText checkpoint name", name, MAXTEXT_NAMES))
            if where in ("device", "offload"):
                saved.update(MAXTEXT_NAMES[name])
        return frozenset(saved)
    if policy not in POLICIES:
        raise WorkbenchError(unknown("remat policy", policy, [*POLICIES, "custom", "auto"]))
    return frozenset(POLICIES[policy])


def recomputed(saved: frozenset[str]) -> frozenset[str]:
    """Sub-layers recomputed under ``saved``. Elementwise work is recomputed unless every sub-layer is kept
    (its inputs are the unsaved intermediates)."""
    out = set(SUBLAYERS) - set(saved)
    if saved >= set(SUBLAYERS) - {"elementwise"}:
        out.discard("elementwise")
    return frozenset(out)
