"""Stage 4: the time of one step on one chip from its kernels (work.py), its collectives (topology.py) and
what the memory stage chose (remat).

    training   : T_compute = T_fwd + T_bwd (2 x matmuls, 2.5 x flash attention, 2 x elementwise)
                             + T_recompute (sub-layers the remat policy does not save) + loss + optimizer
    T_async    = FSDP gathers/reduce-scatters + data-parallel gradient reduction (ICI/NVLink and DCN)
                 + die-to-die copies; hidden under compute up to overlap x T_compute
    T_critical = expert all-to-all + tensor-parallel all-reduces, on the critical path
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
        "n_moe": cfg.n_layers if cfg.is_moe else 0,
        "act": s.tokens * lay.tp * cfg.d_model * s.nb,  # one activation tensor of the TP group
        "a2a": s.tokens * cfg.top_k * (s.capacity_factor or 1.0) * cfg.d_model * s.nb if cfg.is_moe else 0.0,
    }


def _train(step: Step, s: Setting, work: StepWork, fit: Fit) -> None:
    lay, fabric, a, x = s.lay, s.fabric, s.a, _shapes(s)
    again = recomputed(fit.saved)
    step.add_ops("forward", work, s)
    step.add_ops("backward", work, s, factor=lambda op: BACKWARD[op.kind])
    step.add_ops("recompute", work, s, only=again)
    step.add_memory("loss", work.loss_bytes, s.hbm)
    local_params = (
        x["dense"] / (lay.fsdp * lay.tp)
        + s.pc.routed_experts / (max(lay.ep, 1) * lay.tp * max(x["f_exp"], 1))
    ) / lay.pp
    step.add_memory("optimizer", local_params * (2 * a.optimizer_state_bytes_per_param + 2 * s.wb), s.hbm)
    dg, eg = x["dense_gathered"] / lay.pp, x["expert_gathered"] / lay.pp  # one stage's layers
    fsdp = 3 * fabric.ring(dg, lay.fsdp, lay.tp)
    fsdp += 3 * fabric.ring(eg, x["f_exp"], lay.tp * lay.ep) if s.cfg.is_moe else 0.0
    step.async_comm["fsdp_gather_scatter"] = fsdp
    grads_local = (dg / lay.fsdp + eg / x["f_exp"]) if lay.fsdp > 1 else (dg + eg)
    step.async_comm["dp_allreduce_in_slice"] = fabric.ring(grads_local, lay.dp_in_slice, lay.tp * lay.fsdp, 2)
    step.async_comm["dp_allreduce_across_slices_dcn"] = fabric.across_slices(
        grads_local, lay.dp_across_slices
    )
    if s.chip.devices_per_chip > 1:
        step.async_comm["die_to_die"] = fabric.die_to_die(3 * (dg + eg))
    passes = tp_allreduces_per_layer(s.block, recomputed_outputs=bool(again & {"out_proj", "mlp_wo"}))
    _tp_comm(step, passes * s.cfg.n_layers * fabric.ring(x["act"], lay.tp, 1, 2), s.kernels.async_collectives)
    a2a_passes = 4 + (2 if again & {"mlp_wi_0", "mlp_wi_1"} else 0)
    a2a = a2a_passes * x["n_moe"] * fabric.all_to_all(x["a2a"], lay.ep, lay.tp)
    async_a2a = "all_to_all" in s.kernels.async_collectives
    (step.async_comm if async_a2a else step.critical_comm)["ep_all_to_all"] = a2a
    _pipeline_and_context(step, s, again)


def _pipeline_and_context(step: Step, s: Setting, again: frozenset[str]) -> None:
    """Pipeline stages: the slowest stage's extra layers when pp x vpp does not divide them, the 1F1B bubble ((pp - 1) / (vpp x m) of the busy time, idle) and the activations
    and their gradients sent between stages (vpp times per micro-batch, overlapped with compute in the
    steady state). Context parallelism: ring attention gathers the keys and values of the whole sequence
    from the cp chips that share it, every layer, forward and twice backward (again + their gradients'
    reduce-scatter), overlapped with the attention it feeds. Causal load balance (zig-zag) is assumed."""
    lay, cfg = s.lay, s.cfg
    if lay.cp > 1 and s.kernels.ring_attention == "torch":
        _torch_ring(step, s, attention_recomputed="attention" in again)
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


def _torch_ring(step: Step, s: Setting, *, attention_recomputed: bool) -> None:
    """PyTorch's ring attention: the eager fp32 merges and accumulations of each ring step (HBM passes,
    on the critical path), and its communication: the keys and values after ``repeat_kv`` (torchtitan's
    Llama repeats the KV heads to all query heads before SDPA) all-gathered in bf16 for the forward, the
    recomputed forward and the backward, and the fp32 dK/dV passed to the next rank at every backward step
    (all async, overlapped with the attention)."""
    lay, cfg = s.lay, s.cfg
    out_elems = s.tokens * cfg.n_heads * cfg.head_dim  # the TP group's tokens x this chip's heads
    steps = lay.cp - 1
    fwd = (TORCH_RING_FWD_FIXED + TORCH_RING_FWD_PER_STEP * steps) * out_elems * cfg.n_layers
    bwd = (TORCH_RING_BWD_FIXED + TORCH_RING_BWD_PER_STEP * steps) * out_elems * cfg.n_layers
    step.add_memory("cp_ring_merge", fwd * (2 if attention_recomputed else 1) + bwd, s.hbm)
    kv_full = lay.cp * 2 * out_elems * s.a.activation_bytes  # gathered K and V of one layer
    gathers = 3 if attention_recomputed else 2
    dkv = lay.cp * 2 * out_elems * 4  # fp32 dK/dV sent once per ring step
    step.async_comm["cp_kv_ring"] = cfg.n_layers * (
        gathers * s.fabric.ring(kv_full, lay.cp, lay.tp) + s.fabric.ring(dkv, lay.cp, lay.tp)
    )


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


def _tp_comm(step: Step, t_allreduce: float, async_collectives: tuple[str, ...]) -> None:
    """Tensor-parallel activation collectives: an all-reduce = an all-gather + a reduce-scatter of the same
    volume; the half the setting's compiler makes asynchronous goes with the async collectives."""
    halves = {"all_gather": t_allreduce / 2, "reduce_scatter": t_allreduce / 2}
    for kind, t in halves.items():
        target = step.async_comm if kind in async_collectives else step.critical_comm
        target[f"tp_{kind}"] = t
