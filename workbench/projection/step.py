"""Stage 4: the time of one step on one chip from its kernels (work.py), its collectives (topology.py) and
what the memory stage chose (remat).

    training   : T_compute = T_fwd + T_bwd (2 x matmuls, 2.5 x flash attention, 2 x elementwise)
                             + T_recompute (sub-layers the remat policy does not save) + loss + optimizer
    T_async    = FSDP gathers/reduce-scatters + data-parallel gradient reduction (ICI/NVLink and DCN)
                 + die-to-die copies; hidden under compute up to overlap x T_compute
    T_critical = expert all-to-all + tensor-parallel all-reduces, on the critical path (the halves the
                 setting's flags make async excepted), and the FSDP gradient reduce-scatter where the
                 flags do not overlap it (Kernels.grad_reduce_async)
    pipeline   : T_compute += bubble (pp - 1) / (vpp x m) x T_compute; stage sends/receives are async;
    context    : the ring attention's key/value gathers are async; PyTorch's ring adds its eager fp32
                 merges per ring step (HBM passes)
    T_step     = (T_compute + exposed T_async + (1 - critical_overlap) x T_critical)
                 x (1 + straggler_cv x sqrt(2 ln hosts))
"""

from __future__ import annotations

from tpu_workbench.bench.flops import kv_bytes_per_token
from tpu_workbench.bench.projection.assumptions import Assumptions
from tpu_workbench.bench.projection.block import Block
from tpu_workbench.bench.projection.fit import Fit
from tpu_workbench.bench.projection.remat import recomputed
from tpu_workbench.bench.projection.spec import Setting
from tpu_workbench.bench.projection.work import StepWork

BACKWARD = {"gemm": 2.0, "grouped_gemm": 2.0, "attention": 2.5, "elementwise": 2.0}
# Bytes per gradient element in the data-parallel reductions (FSDP reduce-scatter, DP all-reduce): fp32 in
# both frameworks' defaults: MaxText grad_dtype "float32" (AI-Hypercomputer/maxtext@e591f30cb
# src/maxtext/configs/base.yml), torchtitan FSDP2 MixedPrecisionPolicy(reduce_dtype=mixed_precision_reduce,
# default "float32"; torchtitan parallelize_llama / config_manager).
GRAD_REDUCE_BYTES = 4.0


class Step:
    """Times of one step's parts (seconds), the HBM bytes it moves and whether its kernels are math- or
    memory-bound."""

    def __init__(self):
        self.compute: dict[str, float] = {}
        self.async_comm: dict[str, float] = {}
        self.critical_comm: dict[str, float] = {}
        self.math_bound = 0.0
        self.memory_bound = 0.0
        self.hbm_bytes = 0.0

    def add_ops(self, label: str, work: StepWork, s: Setting, factor=None, only=None) -> None:
        t = 0.0
        for op in work.ops:
            if only is not None and op.sublayer not in only:
                continue
            mult = factor(op) if factor else 1.0
            op_t = op.time(s.peak, s.hbm, s.eff) * mult
            t += op_t
            self.hbm_bytes += op.bytes * mult
            if op.flops and op.flops / (s.peak * s.eff[op.kind] * op.fill) >= op.bytes / s.hbm:
                self.math_bound += op_t
            else:
                self.memory_bound += op_t
        self.compute[label] = t

    def add_memory(self, label: str, nbytes: float, hbm: float) -> None:
        self.compute[label] = nbytes / hbm
        self.memory_bound += nbytes / hbm
        self.hbm_bytes += nbytes

    def total(self, a: Assumptions, straggler: float) -> dict[str, float]:
        t_compute = sum(self.compute.values())
        t_async = sum(self.async_comm.values())
        hidden = min(t_async, a.overlap * t_compute)
        exposed_async = t_async - hidden
        exposed_crit = (1 - a.critical_overlap) * sum(self.critical_comm.values())
        base = t_compute + exposed_async + exposed_crit
        return {
            "compute": t_compute,
            "async_comm": t_async,
            "async_hidden": hidden,
            "async_exposed": exposed_async,
            "critical_comm": sum(self.critical_comm.values()),
            "critical_exposed": exposed_crit,
            "straggler": base * (straggler - 1),
            "step": base * straggler,
        }


def time_step(s: Setting, work: StepWork, fit: Fit) -> Step:
    """Kernels and collectives of one step of ``s`` (training or inference)."""
    step = Step()
    (_train if s.phase == "train" else _inference)(step, s, work, fit)
    return step


def _shapes(s: Setting) -> dict[str, float]:
    cfg, pc, lay = s.cfg, s.pc, s.lay
    dense = pc.total - pc.routed_experts
    return {
        "dense": dense,
        "dense_gathered": (dense - pc.embedding) * s.wb / lay.tp,  # one TP shard's weights (embedding: rows)
        "expert_gathered": pc.routed_experts * s.wb / (lay.tp * lay.ep),
        "f_exp": max(lay.fsdp * lay.dp_in_slice // lay.ep, 1) if lay.ep > 1 else lay.fsdp,
        "n_moe": cfg.moe_layers,
        "act": s.tokens * lay.tp * cfg.d_model * s.nb,  # one activation tensor of the TP group
        "a2a": s.tokens * cfg.top_k * (s.capacity_factor or 1.0) * cfg.d_model * s.nb if cfg.is_moe else 0.0,
    }


def _train(step: Step, s: Setting, work: StepWork, fit: Fit) -> None:
    lay, fabric, a, x = s.lay, s.fabric, s.a, _shapes(s)
    again = recomputed(fit.saved)
    step.add_ops("forward", work, s)
    bwd_rel = s.kernels.attention_backward_relative or 1.0
    step.add_ops(
        "backward",
        work,
        s,
        factor=lambda op: BACKWARD[op.kind] / (bwd_rel if op.kind == "attention" else 1.0),
    )
    step.add_ops("recompute", work, s, only=again)
    step.add_memory("loss", work.loss_bytes, s.hbm)
    local_params = (
        x["dense"] / (lay.fsdp * lay.tp)
        + s.pc.routed_experts / (max(lay.ep, 1) * lay.tp * max(x["f_exp"], 1))
    ) / lay.pp
    step.add_memory("optimizer", local_params * (2 * a.optimizer_state_bytes_per_param + 2 * s.wb), s.hbm)
    dg, eg = x["dense_gathered"] / lay.pp, x["expert_gathered"] / lay.pp  # one stage's layers
    g = GRAD_REDUCE_BYTES / s.wb  # gradients are reduced in fp32, weights gathered at their own width
    ring = fabric.ring(dg, lay.fsdp, lay.tp)
    ring += fabric.ring(eg, x["f_exp"], lay.tp * lay.ep) if s.cfg.is_moe else 0.0
    step.async_comm["fsdp_gather"] = 2 * ring  # forward and backward (re-)gathers
    # The gradient reduce-scatter hides under compute only where the software overlaps it: PyTorch FSDP2 on
    # its own stream; XLA where the flags pipeline data-parallel reductions across iterations
    # (xla_tpu_enable_data_parallel_all_reduce_opt / _data_parallel_opt_different_sized_ops, "enable pipelining
    # of data parallel ops across multiple iterations") or offload reduce-scatters to SparseCore (default on
    # Ironwood): AI-Hypercomputer/maxtext@e591f30cb benchmarks/xla_flags_library.py DATA_PARALLEL_OVERLAP,
    # ENABLE_SPARSECORE_OFFLOADING_FOR_REDUCE_SCATTER. Flags with neither (CF_FOR_ALL_GATHER makes only
    # all-gathers continuation-fused) leave it on the critical path (grad_reduce_async=False).
    rs = step.async_comm if s.kernels.grad_reduce_async else step.critical_comm
    rs["fsdp_grad_reduce_scatter"] = g * ring
    grads_local = g * ((dg / lay.fsdp + eg / x["f_exp"]) if lay.fsdp > 1 else (dg + eg))
    step.async_comm["dp_allreduce_in_slice"] = fabric.ring(grads_local, lay.dp_in_slice, lay.tp * lay.fsdp, 2)
    step.async_comm["dp_allreduce_across_slices_dcn"] = fabric.across_slices(
        grads_local, lay.dp_across_slices
    )
    if s.chip.devices_per_chip > 1:
        step.async_comm["die_to_die"] = fabric.die_to_die((2 + g) * (dg + eg))
    passes = tp_allreduces_per_layer(s.block, recomputed_outputs=bool(again & {"out_proj", "mlp_wo"}))
    gather = (s.kernels.tp_gather_bytes or s.nb) / s.nb
    _tp_comm(
        step,
        passes * s.cfg.n_layers * fabric.ring(x["act"], lay.tp, 1, 2),
        s.kernels.async_collectives,
        gather_relative=gather,
    )
    a2a_passes = 4 + (2 if again & {"mlp_wi_0", "mlp_wi_1"} else 0)
    a2a = a2a_passes * x["n_moe"] * fabric.all_to_all(x["a2a"], lay.ep, lay.tp)
    async_a2a = "all_to_all" in s.kernels.async_collectives
    (step.async_comm if async_a2a else step.critical_comm)["ep_all_to_all"] = a2a
    if s.cfg.is_moe and s.capacity_factor is None:
        _dropless_moe_passes(step, s, elementwise_recomputed="elementwise" in again)
    _pipeline_and_context(step, s, work, again)


# MaxText's dropless MoE (sparse_matmul=True with the default use_custom_sort_vjp=True, no ring of experts, no
# ragged sort: AI-Hypercomputer/maxtext@e591f30cb src/maxtext/layers/moe.py permute / unpermute /
# _sort_activations): HBM elements per token and layer, in units of d_model, k = experts per token.
# forward: the k token copies gathered in expert order (jnp.repeat fused into inputs[sort_indices]: read k,
# write k), the un-permute gather (read k, write k), the weighted sum over k (read k, write 1) = 5k + 1;
# backward: the weighted sum's VJP (d intermediate: read 1, write k; d weights: read k + 1), the two custom-VJP
# gathers run with the inverse permutation (2 x (read k, write k)), jnp.repeat's VJP (sum over k: read k,
# write 1) = 7k + 3. forward_ops' elementwise op already counts (2 + 2k) of them per forward pass and twice that
# in the backward (step.BACKWARD); this adds the rest, training only (serving engines fuse differently).
def _dropless_moe_passes(step: Step, s: Setting, *, elementwise_recomputed: bool) -> None:
    """The dispatch/combine copies of a dropless MoE training step beyond the elementwise op's routing
    passes (HBM, on the critical path). The argsorts of the routing keys are not costed (no source for the
    sort's speed on the chip)."""
    k, passes = s.cfg.top_k, 2 if elementwise_recomputed else 1
    actual = (5 * k + 1) * passes + (7 * k + 3)
    counted = (2 + 2 * k) * (passes + BACKWARD["elementwise"])
    elems = max(actual - counted, 0) * s.cfg.d_model * s.tokens * s.cfg.moe_layers
    step.add_memory("moe_dispatch", elems * s.nb, s.hbm)


def _pipeline_and_context(step: Step, s: Setting, work: StepWork, again: frozenset[str]) -> None:
    """Pipeline stages: the slowest stage's extra layers when pp x vpp does not divide them, the 1F1B bubble ((pp - 1) / (vpp x m) of the busy time, idle) and the activations
    and their gradients sent between stages (vpp times per micro-batch, overlapped with compute in the
    steady state). Context parallelism: ring attention gathers the keys and values of the whole sequence
    from the cp chips that share it, every layer, forward and twice backward (again + their gradients'
    reduce-scatter), overlapped with the attention it feeds. Causal load balance (zig-zag) is assumed."""
    lay, cfg = s.lay, s.cfg
    if lay.cp > 1 and s.kernels.ring_attention == "torch":
        attention_fwd = sum(op.time(s.peak, s.hbm, s.eff) for op in work.ops if op.kind == "attention")
        _torch_ring(step, s, attention_recomputed="attention" in again, attention_fwd_s=attention_fwd)
    elif lay.cp > 1:
        kv_layer = (
            s.tokens * lay.cp * kv_bytes_per_token(cfg, s.nb) / cfg.n_layers / min(lay.tp, cfg.n_kv_heads)
        )
        step.async_comm["cp_kv_ring"] = 3 * cfg.n_layers * s.fabric.ring(kv_layer, lay.cp, lay.tp)

    if lay.pp > 1:
        busy = sum(t for k, t in step.compute.items() if k != "optimizer")
        step.compute["pipeline_imbalance"] = (lay.stage_imbalance(cfg.n_layers) - 1) * busy
        busy *= lay.stage_imbalance(cfg.n_layers)
        step.compute["pipeline_bubble"] = lay.bubble_fraction(s.batch) * busy
        per_direction = s.tokens * lay.pp * cfg.d_model * s.nb * lay.vpp
        step.async_comm["pp_send_recv"] = s.fabric.ring(per_direction, 2, lay.n_chips // lay.pp, 4)


# PyTorch context_parallel (torch/distributed/tensor/experimental/_attention.py, pytorch/pytorch@0123248a,
# _templated_ring_attention and its backward; torchtitan 9dec370 runs it with the defaults
# convert_to_f32=True, enable_load_balance=True, rotate_method=ALL_GATHER): one SDPA call per ring step on
# the local queries and one chunk of keys/values, each result merged into an fp32 output by eager ops.
# HBM bytes per element of the chip's attention output O (tokens x heads x head_dim) and per layer:
# forward, each step after the first: torch.cat of the local K/V for the exchange (K and V = 2 O elements,
# read + write in bf16: 8), the merge of a block of O (all steps i <= rank) or O/2 (partial, i > rank; half
# the steps on average): block_out.to(fp32) (r2 w4), out - block_out (r8 w4), sigmoid(..) * (..) (r4 w4),
# out - (..) (r8 w4) = 38 per block element, plus torch.cat of the partial update (r4 w4 over O):
# 0.5 x 38 + 0.5 x (19 + 8) = 32.5; fixed: the first step's fp32 cast (6) and out.to(bf16) (6).
TORCH_RING_FWD_PER_STEP = 8 + 32.5
TORCH_RING_FWD_FIXED = 6 + 6
# backward, each step after the first: torch.cat of K/V (8); grad_query += its bf16 block (r6 w4 = 10, full)
# or the partial update + cat (13), avg 11.5; dK and dV the same in fp32 over 2 O (20 full, 26 partial),
# avg 23; torch.cat of the fp32 dK/dV for the ring exchange (r8 w8 = 16, every step). Fixed: zeros_like
# of dQ, dK, dV in fp32 (12), the first step's accumulations (10 + 20) and exchange (16), and the final
# casts dQ.to(bf16) (6) and dK/dV.to(bf16) (12).
TORCH_RING_BWD_PER_STEP = 8 + 11.5 + 23 + 16
TORCH_RING_BWD_FIXED = 12 + 30 + 16 + 18


def _torch_ring(step: Step, s: Setting, *, attention_recomputed: bool, attention_fwd_s: float) -> None:
    """PyTorch's ring attention: the eager fp32 merges and accumulations of each ring step (HBM passes,
    on the critical path), and its communication: the keys and values after ``repeat_kv`` (torchtitan's
    Llama repeats the KV heads to all query heads before SDPA) all-gathered in bf16 for the forward, the
    recomputed forward and the backward, and the fp32 dK/dV passed to the next rank at every backward step.
    With the ALL_GATHER rotater the gather is issued at ring step 0 and waited at step 1, so only step 0's
    attention (1/cp of it) hides it; each dK/dV exchange is waited one step later. What those steps do not
    hide is on the critical path (``attention_fwd_s``: the step's forward attention time)."""
    lay, cfg = s.lay, s.cfg
    out_elems = s.tokens * cfg.n_heads * cfg.head_dim  # the TP group's tokens x this chip's heads
    steps = lay.cp - 1
    fwd = (TORCH_RING_FWD_FIXED + TORCH_RING_FWD_PER_STEP * steps) * out_elems * cfg.n_layers
    bwd = (TORCH_RING_BWD_FIXED + TORCH_RING_BWD_PER_STEP * steps) * out_elems * cfg.n_layers
    step.add_memory("cp_ring_merge", fwd * (2 if attention_recomputed else 1) + bwd, s.hbm)
    gather = s.fabric.ring(lay.cp * 2 * out_elems * s.a.activation_bytes, lay.cp, lay.tp)  # one layer's K/V
    exchange = s.fabric.ring(lay.cp * 2 * out_elems * 4, lay.cp, lay.tp) / lay.cp  # one step's fp32 dK/dV
    fwd_step = attention_fwd_s / cfg.n_layers / lay.cp  # one ring step of one layer
    bwd_step = fwd_step * BACKWARD["attention"] / (s.kernels.attention_backward_relative or 1.0)
    passes = 2 if attention_recomputed else 1
    exposed = passes * max(gather - fwd_step, 0.0) + max(gather - bwd_step, 0.0)
    exposed += lay.cp * max(exchange - bwd_step, 0.0)
    total = passes * gather + gather + lay.cp * exchange
    step.async_comm["cp_kv_ring"] = cfg.n_layers * (total - exposed)
    step.critical_comm["cp_kv_ring_exposed"] = cfg.n_layers * exposed


def _inference(step: Step, s: Setting, work: StepWork, fit: Fit) -> None:
    lay, fabric, x = s.lay, s.fabric, _shapes(s)
    step.add_ops("forward", work, s)
    if s.phase == "prefill":
        step.add_memory("kv_write", fit.kv_bytes_per_chip, s.hbm)
    # weights are resident; an FSDP layout gathers them every step with nothing to hide behind in decode
    gather = fabric.ring(x["dense_gathered"], lay.fsdp, lay.tp) if lay.fsdp > 1 else 0.0
    (step.async_comm if s.phase == "prefill" else step.critical_comm)["fsdp_gather"] = gather
    passes = tp_allreduces_per_layer(s.block, recomputed_outputs=False) / 2  # forward only
    _tp_comm(step, passes * s.cfg.n_layers * fabric.ring(x["act"], lay.tp, 1, 2), s.kernels.async_collectives)
    step.critical_comm["ep_all_to_all"] = 2 * x["n_moe"] * fabric.all_to_all(x["a2a"], lay.ep, lay.tp)


def tp_allreduces_per_layer(block: Block, *, recomputed_outputs: bool) -> int:
    """Tensor-parallel all-reduces (all-gather + reduce-scatter) of one layer's activations in a training
    step: one per branch output forward and backward, again when the outputs are recomputed. A parallel block
    sums attention and MLP outputs before reducing, so it has one branch output, a sequential layer two (XLA's
    ReduceScatterReassociate / AllReduceReassociate passes turn add(reduce(a), reduce(b)) into reduce(a + b)
    where the framework constrains each branch output separately, as MaxText 2023 did)."""
    outputs = 1 if block.parallel else 2
    return outputs * (3 if recomputed_outputs else 2)


def _tp_comm(
    step: Step, t_allreduce: float, async_collectives: tuple[str, ...], *, gather_relative: float = 1.0
) -> None:
    """Tensor-parallel activation collectives: an all-reduce = an all-gather + a reduce-scatter of the same
    volume; the half the setting's compiler makes asynchronous goes with the async collectives.
    ``gather_relative``: the all-gathers' bytes per element over the activations' (torchao float8 TP casts
    to float8 before gathering, forward and backward: torchao@eab345c torchao/float8/float8_tensor_parallel.py
    Float8ColwiseParallel / PrepareFloat8ModuleInput cast inputs, NoopFwToFloat8BwDynamic casts the rowwise
    outputs' gradients to e5m2 ahead of the backward gather; the reduce-scatters stay bf16)."""
    halves = {"all_gather": gather_relative * t_allreduce / 2, "reduce_scatter": t_allreduce / 2}
    for kind, t in halves.items():
        target = step.async_comm if kind in async_collectives else step.critical_comm
        target[f"tp_{kind}"] = t
