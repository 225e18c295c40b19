"""``project()``: one projected record for a model, phase, chip, chip count and layout (model
``workbench-roofline-comm``, version MODEL_VERSION), as five stages, each its own module:

1. :func:`~workbench.projection.spec.resolve` - the request (Workload, Deployment, Kernels dataclasses) to a
   resolved Setting (chip, layout, fabric, efficiencies, bytes per element);
2. :func:`~workbench.projection.work.forward_ops` - the kernels of one step on one chip;
3. :func:`~workbench.projection.fit.fit_memory` - the HBM fit per device (and the remat policy);
4. :func:`~workbench.projection.step.time_step` - kernel and collective times of the step;
5. :func:`~workbench.projection.record.build_record` - rates, MFU/MBU, prices (none where it does not fit).

The layer's wiring (:class:`~workbench.projection.block.Block`) sets the matmuls, elementwise passes,
tensor-parallel collectives and model FLOPs. Every input is stored in the record with its unit and source.
"""

from __future__ import annotations

from tpu_workbench.bench.catalog import Catalog, Chip
from tpu_workbench.bench.projection.assumptions import Assumptions
from tpu_workbench.bench.projection.block import Block
from tpu_workbench.bench.projection.fit import fit_memory
from tpu_workbench.bench.projection.record import MODEL_NAME, MODEL_VERSION, build_record
from tpu_workbench.bench.projection.remat import POLICIES
from tpu_workbench.bench.projection.spec import BYTES, PHASES, Deployment, Kernels, Workload, resolve
from tpu_workbench.bench.projection.step import time_step
from tpu_workbench.bench.projection.work import StepWork, forward_ops
from tpu_workbench.bench.results import Record
from tpu_workbench.bench.workloads.config import DecoderConfig

__all__ = ["BYTES", "MODEL_NAME", "MODEL_VERSION", "PHASES", "project", "project_spec", "remat_policies"]


def step_work(s) -> StepWork:
    """Stage 2: the forward kernels of one step of the resolved setting ``s`` on one chip."""
    k = s.kernels
    return forward_ops(
        s.cfg,
        tokens=s.tokens,
        seq=s.seq,
        context=s.seq if s.phase == "decode" else None,
        tp=s.lay.tp,
        ep=s.lay.ep,
        nb=s.nb,
        tile=s.chip.mxu_tile,
        capacity_factor=s.capacity_factor,
        attn_block=k.attn_block,
        gmm_tile=tuple(k.gmm_tile) if k.gmm_tile else None,
        devices_per_chip=s.chip.devices_per_chip,
        block=s.block,
        kv_nb=s.kvb,
    )


def project_spec(
    workload: Workload,
    deployment: Deployment,
    kernels: Kernels | None = None,
    *,
    assumptions: Assumptions | None = None,
    catalog: Catalog | None = None,
    require_fit: bool = True,
) -> Record:
    """The five stages on one request. ``require_fit``: see :func:`project`."""
    s = resolve(workload, deployment, kernels or Kernels(), assumptions, catalog)
    work = step_work(s)
    fit = fit_memory(s)
    return build_record(s, work, fit, time_step(s, work, fit), require_fit=require_fit)


def project(
    chip: Chip | str,
    config: DecoderConfig | str,
    phase: str,
    n_chips: int,
    layout: str = "fsdp",
    *,
    batch: int | float | None = None,
    seq: int = 4096,
    precision: str = "bf16",
    assumptions: Assumptions | None = None,
    convention: str = "causal",
    catalog: Catalog | None = None,
    remat: str = "auto",
    remat_names: dict[str, str] | None = None,
    slices: int = 1,
    capacity_factor: float | None = None,
    attn_block: int = 512,
    optimizer_state_bytes_per_param: float | None = None,
    async_collectives: tuple[str, ...] = (),
    attention_efficiency: float | None = None,
    gmm_tile: tuple[int, int, int] | None = None,
    block: Block | None = None,
    kv_precision: str | None = None,
    ring_attention: str = "allgather",
    attention_backward_relative: float | None = None,
    grad_reduce_async: bool = True,
    tp_gather_bytes: float | None = None,
    require_fit: bool = True,
) -> Record:
    """Projected record for ``config`` doing ``phase`` on ``n_chips`` x ``chip`` with ``layout`` (the keyword
    form of :func:`project_spec`).

    ``batch``: sequences per chip (decode: concurrent sequences per chip, at context ``seq``).
    ``remat``: a policy of :data:`tpu_workbench.bench.projection.remat.POLICIES`, ``'custom'`` with MaxText-style
    ``remat_names`` ({'query_proj': 'offload', ...}), or ``'auto'`` (the least recompute that fits).
    ``slices``: TPU slices joined by DCN (FSDP inside a slice, data parallel across slices).
    ``capacity_factor``: MoE token dropping with padded expert capacity (None = dropless).
    ``async_collectives``: activation collectives the setting's compiler overlaps with compute
    ('all_gather', 'reduce_scatter', 'all_to_all'; XLA continuation fusion flags): the matching half of the
    tensor-parallel all-reduces (or the all-to-all) moves off the critical path.
    ``attention_efficiency``: absolute fraction of peak of the setting's attention kernel (e.g. 0.35 for
    FlashAttention-2 on H100), replacing gemm_efficiency x attention_relative.
    ``gmm_tile``: (m, k, n) tiles of the setting's MoE grouped-matmul kernel (MaxText's tokamax/megablox
    ``wi_tile_*``/``wo_tile_*``); experts pad K and N to them and end in a partial m-tile. None: MXU tiles.
    ``block``: the layer's wiring where it is not the Llama layer DecoderConfig assumes (a plain 2-matrix
    MLP; attention and MLP in parallel); it changes the matmuls, the elementwise passes, the tensor-parallel
    collectives and the model FLOPs.
    ``kv_precision``: precision of the KV cache (None: the activations').
    ``ring_attention``: how context parallelism runs attention (step.RING_ATTENTION: 'allgather', the
    MaxText/XLA way, or 'torch', PyTorch's context_parallel with its eager per-step merges).
    ``attention_backward_relative``: the attention kernel's backward efficiency over its forward one (None: the
    same; FlashAttention-2's backward runs at ~2/3 of its forward rate).
    ``grad_reduce_async``: the FSDP gradient reduce-scatter overlaps compute (PyTorch FSDP2's own stream;
    XLA with data-parallel pipelining or SparseCore reduce-scatter flags); False puts it on the critical path.
    ``tp_gather_bytes``: bytes per element of the tensor-parallel all-gathers where the framework casts
    before gathering (torchao float8 TP: 1); None: the activations' width.
    ``require_fit``: a setting that does not fit in HBM gets no throughput, MFU or price (``extra['infeasible']``
    says why); False keeps the throughput (never the price) for published settings known to have run, where
    the memory model, not the setting, is wrong.
    The MFU convention defaults to "causal" (MaxText/Megatron) because published TPU figures use it.
    """
    a = assumptions or Assumptions()
    if optimizer_state_bytes_per_param is not None:
        a = a.with_(optimizer_state_bytes_per_param=optimizer_state_bytes_per_param)
    return project_spec(
        Workload(config, phase, batch, seq, convention, block, capacity_factor),
        Deployment(chip, n_chips, layout, slices, precision, kv_precision),
        Kernels(
            remat,
            remat_names,
            attn_block,
            tuple(async_collectives),
            attention_efficiency,
            gmm_tile,
            ring_attention,
            attention_backward_relative,
            grad_reduce_async,
            tp_gather_bytes,
        ),
        assumptions=a,
        catalog=catalog,
        require_fit=require_fit,
    )


def remat_policies() -> list[str]:
    return [*POLICIES, "custom", "auto"]
