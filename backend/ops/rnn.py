"""Recurrent cells and packed sequences: what ``nn.LSTM`` / ``nn.GRU`` reach on a non-CPU device.

ATen's RNN layers (``lstm``, ``gru``: CompositeImplicit, with dropout, bidirectional, projections and packed
input) run the per-step matmuls as ordinary ops and, on any device that is CUDA, XPU or PrivateUse1, hand the
gate nonlinearity to ``_thnn_fused_lstm_cell`` / ``_thnn_fused_gru_cell``. Those, and the backward kernels
autograd calls for them, are lowered here as one jitted XLA computation each. The workspace layout is this
module's own (the backward kernels below are its only readers): the LSTM's four activated gates
``[i, f, g, o]``; the GRU's ``[r, z, n, hx, h_n]`` (``h_n`` the hidden part of the new gate, bias included),
the shapes torch's CUDA kernels use.

``_pack_padded_sequence`` reads its CPU ``lengths`` on the host (as every device does) and gathers the packed
rows in one take; ``batch_sizes`` is a CPU tensor, as on CUDA.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import torch

from tpu_workbench.backend import lazy
from tpu_workbench.backend.ops._util import aten
from tpu_workbench.backend.ops.registry import lower
from tpu_workbench.backend.tensor import TpuTensor, payload


def _acc(dt: Any) -> Any:
    """Gate arithmetic dtype: float32 for half-precision inputs (torch's CUDA kernels accumulate so)."""
    return jnp.float32 if jnp.dtype(dt) in (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16)) else dt


def _gates(input_gates: Any, hidden_gates: Any, input_bias: Any, hidden_bias: Any) -> Any:
    acc = _acc(input_gates.dtype)
    g = input_gates.astype(acc) + hidden_gates.astype(acc)
    if input_bias is not None:
        g = g + input_bias.astype(acc)
    if hidden_bias is not None:
        g = g + hidden_bias.astype(acc)
    return g


def _check_cell(name: str, input_gates: Any, hidden_gates: Any, state: Any, n_gates: int) -> None:
    if input_gates.shape != hidden_gates.shape:
        raise RuntimeError(
            f"{name}: input_gates {tuple(input_gates.shape)} and hidden_gates "
            f"{tuple(hidden_gates.shape)} must have the same shape"
        )
    if input_gates.ndim != 2 or input_gates.shape[1] != n_gates * state.shape[-1] or state.ndim != 2:
        raise RuntimeError(
            f"{name}: expected gates of shape (batch, {n_gates} * hidden) and a state of shape "
            f"(batch, hidden); got {tuple(input_gates.shape)} and {tuple(state.shape)}"
        )


# ----------------------------------------------------------------------------- LSTM
@lower(aten._thnn_fused_lstm_cell.default, jit=True)
def _thnn_fused_lstm_cell(
    input_gates: Any, hidden_gates: Any, cx: Any, input_bias: Any = None, hidden_bias: Any = None
) -> tuple:
    """(hy, cy, workspace): the LSTM update from pre-activation gates ``[i, f, g, o]``."""
    _check_cell("_thnn_fused_lstm_cell", input_gates, hidden_gates, cx, 4)
    dt = input_gates.dtype
    i, f, g, o = jnp.split(_gates(input_gates, hidden_gates, input_bias, hidden_bias), 4, axis=1)
    i, f, g, o = jax.nn.sigmoid(i), jax.nn.sigmoid(f), jnp.tanh(g), jax.nn.sigmoid(o)
    cy = f * cx.astype(i.dtype) + i * g
    hy = o * jnp.tanh(cy)
    return hy.astype(dt), cy.astype(dt), jnp.concatenate([i, f, g, o], axis=1).astype(dt)


@lower(aten._thnn_fused_lstm_cell_backward_impl.default, jit=True)
def _thnn_fused_lstm_cell_backward_impl(
    grad_hy: Any, grad_cy: Any, cx: Any, cy: Any, workspace: Any, has_bias: bool
) -> tuple:
    """(grad_gates, grad_cx, grad_bias or None) from the saved activated gates; an undefined grad_hy or
    grad_cy (an output not used in the loss) counts as zero."""
    if grad_hy is None and grad_cy is None:
        return None, None, None
    dt = workspace.dtype
    acc = _acc(dt)
    i, f, g, o = (x.astype(acc) for x in jnp.split(workspace, 4, axis=1))
    cyf, cxf = cy.astype(acc), cx.astype(acc)
    ghy = jnp.zeros_like(cyf) if grad_hy is None else grad_hy.astype(acc)
    gcy = jnp.zeros_like(cyf) if grad_cy is None else grad_cy.astype(acc)
    tc = jnp.tanh(cyf)
    gc = ghy * o * (1 - tc * tc) + gcy
    grad_gates = jnp.concatenate(
        [gc * g * i * (1 - i), gc * cxf * f * (1 - f), gc * i * (1 - g * g), ghy * tc * o * (1 - o)], axis=1
    )
    grad_bias = grad_gates.sum(0).astype(dt) if has_bias else None
    return grad_gates.astype(dt), (gc * f).astype(dt), grad_bias


# ----------------------------------------------------------------------------- GRU
@lower(aten._thnn_fused_gru_cell.default, jit=True)
def _thnn_fused_gru_cell(
    input_gates: Any, hidden_gates: Any, hx: Any, input_bias: Any = None, hidden_bias: Any = None
) -> tuple:
    """(hy, workspace): r = σ(i_r + h_r), z = σ(i_z + h_z), n = tanh(i_n + r * h_n), hy = (1 - z) n + z hx."""
    _check_cell("_thnn_fused_gru_cell", input_gates, hidden_gates, hx, 3)
    dt = input_gates.dtype
    acc = _acc(dt)
    ig, hg = input_gates.astype(acc), hidden_gates.astype(acc)
    if input_bias is not None:
        ig = ig + input_bias.astype(acc)
    if hidden_bias is not None:
        hg = hg + hidden_bias.astype(acc)
    i_r, i_z, i_n = jnp.split(ig, 3, axis=1)
    h_r, h_z, h_n = jnp.split(hg, 3, axis=1)
    r, z = jax.nn.sigmoid(i_r + h_r), jax.nn.sigmoid(i_z + h_z)
    n = jnp.tanh(i_n + r * h_n)
    hxf = hx.astype(acc)
    hy = (hxf - n) * z + n
    return hy.astype(dt), jnp.concatenate([r, z, n, hxf, h_n], axis=1).astype(dt)


@lower(aten._thnn_fused_gru_cell_backward.default, jit=True)
def _thnn_fused_gru_cell_backward(grad_hy: Any, workspace: Any, has_bias: bool) -> tuple:
    """(grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias, grad_hidden_bias)."""
    dt = workspace.dtype
    acc = _acc(dt)
    r, z, n, hx, h_n = (x.astype(acc) for x in jnp.split(workspace, 5, axis=1))
    gh = grad_hy.astype(acc)
    g_n = gh * (1 - z) * (1 - n * n)
    g_z = gh * (hx - n) * z * (1 - z)
    g_r = g_n * h_n * r * (1 - r)
    grad_input = jnp.concatenate([g_r, g_z, g_n], axis=1)
    grad_hidden = jnp.concatenate([g_r, g_z, g_n * r], axis=1)
    gi_bias = grad_input.sum(0).astype(dt) if has_bias else None
    gh_bias = grad_hidden.sum(0).astype(dt) if has_bias else None
    return grad_input.astype(dt), grad_hidden.astype(dt), (gh * z).astype(dt), gi_bias, gh_bias


# ----------------------------------------------------------------------------- packed sequences
def _host_lengths(lengths: Any) -> np.ndarray:
    if isinstance(lengths, TpuTensor):
        raise RuntimeError(
            "_pack_padded_sequence: 'lengths' argument should be a 1D CPU int64 tensor, but got "
            "1D tpu Long tensor"
        )
    if lengths.dtype != torch.int64 or lengths.dim() != 1:
        raise RuntimeError(
            f"_pack_padded_sequence: 'lengths' argument should be a 1D CPU int64 tensor, but got "
            f"{lengths.dim()}D {lengths.dtype} tensor"
        )
    return lengths.detach().contiguous().numpy()


def _gather_rows(x: Any, rows: Any, batch_first: bool) -> Any:
    if batch_first:
        x = jnp.swapaxes(x, 0, 1)
    return jnp.take(x.reshape((x.shape[0] * x.shape[1],) + x.shape[2:]), rows, axis=0)


@lower(aten._pack_padded_sequence.default, raw=True)
def _pack_padded_sequence(input: Any, lengths: Any, batch_first: bool) -> tuple:
    """(data, batch_sizes): the rows ``input[t, :batch_sizes[t]]`` for each step t, stacked (time-major)."""
    x = payload(input)  # only its shape is read here: in fused eager the gather is recorded, not run
    t_max, batch = (x.shape[1], x.shape[0]) if batch_first else (x.shape[0], x.shape[1])
    if x.size == 0:
        raise RuntimeError("Cannot pack empty tensors.")
    lens = _host_lengths(lengths)
    if lens.shape[0] != batch:
        raise RuntimeError(
            f"Expected `len(lengths)` to be equal to batch_size, but got {lens.shape[0]} (batch_size={batch})"
        )
    if lens[-1] <= 0:
        raise RuntimeError(
            "Length of all samples has to be greater than 0, but found an element in 'lengths' that is <= 0"
        )
    if np.any(lens[1:] > lens[:-1]):
        raise RuntimeError(
            "`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You can pass "
            "`enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to sidestep this requirement if "
            "you do not need ONNX exportability."
        )
    if lens[0] > t_max:
        raise RuntimeError(
            f"Expected sequence length to be larger than or equal to max length, but got {t_max} < {int(lens[0])}"
        )
    batch_sizes = (lens[None, :] > np.arange(int(lens[0]))[:, None]).sum(1).astype(np.int64)
    rows = np.concatenate([t * batch + np.arange(b) for t, b in enumerate(batch_sizes)])
    data = lazy.call(_gather_rows, (x, jnp.asarray(rows), bool(batch_first)))
    return TpuTensor(data), torch.from_numpy(batch_sizes)
