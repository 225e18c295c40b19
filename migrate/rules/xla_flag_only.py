"""torch_xla areas that are flagged, never rewritten: SPMD, XLA FSDP, metrics, private API."""

from __future__ import annotations

import libcst as cst

from .base import Rule, register

SPMD_MODULES = _SPMD = (
    "torch_xla.distributed.spmd",
    "torch_xla.experimental.xla_sharding",
    "torch_xla.experimental.spmd",
    "torch_xla.experimental.xla_sharded_tensor",
    "torch_xla.distributed.fsdp.spmd_fully_sharded_data_parallel",
    "torch_xla.experimental.spmd_fully_sharded_data_parallel",
)
_METRICS = "torch_xla.debug.metrics"
_REPORTS = frozenset({f"{_METRICS}.metrics_report", f"{_METRICS}.short_metrics_report"})


@register
class Spmd(Rule):
    code = "TPU901"
    name = "spmd"
    family = "xla_flag_only"
    outcome = "flagged"
    summary = (
        "Flag SPMD: xr.use_spmd, xs.Mesh, mark_sharding, get_1d_mesh, HybridMesh, set_global_mesh, FSDPv2."
    )
    rationale = (
        "TorchTPU has no GSPMD. The equivalent is DTensor: init_device_mesh('tpu', ...) with "
        "distribute_tensor / parallelize_module, or FSDP2 fully_shard; the port is a design decision."
    )
    before = "import torch_xla.runtime as xr\n\nxr.use_spmd()\n"
    after = (
        "import torch_xla.runtime as xr\n\n# TODO(tpu-migrate TPU901): `xr.use_spmd`: SPMD is not supported "
        'by TorchTPU; use DTensor (init_device_mesh("tpu", ...), distribute_tensor, parallelize_module) or '
        "FSDP2 fully_shard\nxr.use_spmd()\n"
    )
    refs = frozenset({"torch_xla.runtime.use_spmd", "torch_xla.runtime.is_spmd"})
    ref_prefixes = _SPMD

    def ref(self, ctx, orig, node, qname):
        short = qname.replace("torch_xla.runtime.", "xr.").replace("torch_xla.distributed.spmd.", "xs.")
        ctx.flag(
            orig,
            f'`{short}`: SPMD is not supported by TorchTPU; use DTensor (init_device_mesh("tpu", ...), '
            "distribute_tensor, parallelize_module) or FSDP2 fully_shard",
            code=self.code,
        )
        return None


@register
class XlaFsdp(Rule):
    code = "TPU902"
    name = "xla-fsdp"
    family = "xla_flag_only"
    outcome = "flagged"
    summary = (
        "Flag XlaFullyShardedDataParallel, consolidate_sharded_model_checkpoints and XLA FSDP wrap policies."
    )
    rationale = (
        "The native equivalent is FSDP2 (torch.distributed.fsdp.fully_shard); checkpoints are saved with DCP."
    )
    before = (
        "from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP\n\nmodel = FSDP(model)\n"
    )
    after = (
        "from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP\n\n"
        "# TODO(tpu-migrate TPU902): `XlaFullyShardedDataParallel`: use FSDP2 "
        "(torch.distributed.fsdp.fully_shard) and DCP checkpoints\nmodel = FSDP(model)\n"
    )
    ref_prefixes = ("torch_xla.distributed.fsdp",)

    def ref(self, ctx, orig, node, qname):
        ctx.flag(
            orig,
            f"`{qname.rsplit('.', 1)[1]}`: use FSDP2 (torch.distributed.fsdp.fully_shard) and DCP "
            "checkpoints",
            code=self.code,
        )
        return None


def _report_call(ctx, node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Call) and ctx.qname(node.func) in _REPORTS


@register
class Metrics(Rule):
    code = "TPU903"
    name = "xla-metrics"
    family = "xla_flag_only"
    outcome = "flagged"
    summary = "Delete print-only metrics reports (print(met.metrics_report())); flag every other torch_xla metrics use."
    rationale = (
        "There is no TorchTPU equivalent (torch.tpu._get_cache_stats is private). Printing a report is "
        "diagnostics and can go; assertions on counters test XLA internals and need a human."
    )
    before = (
        "import torch_xla.debug.metrics as met\n\nprint(met.metrics_report())\n"
        'n = met.counter_value("CachedCompile")\n'
    )
    after = (
        "import torch_xla.debug.metrics as met\n\n# TODO(tpu-migrate TPU903): `met.counter_value`: torch_xla "
        "metrics have no TorchTPU equivalent (TORCH_LOGS, XLA_FLAGS dumps); remove or replace this check\n"
        'n = met.counter_value("CachedCompile")\n'
    )
    ref_prefixes = (_METRICS,)
    node_types = (cst.SimpleStatementLine,)

    def visit_node(self, ctx, node):
        if len(node.body) != 1 or not isinstance(node.body[0], cst.Expr):
            return
        v = node.body[0].value
        positional = [a for a in v.args if a.keyword is None] if isinstance(v, cst.Call) else []
        if _report_call(ctx, v) or (
            len(positional) == 1
            and not positional[0].star
            and _report_call(ctx, positional[0].value)
            and (
                ctx.qname(v.func) == "torch_xla.core.xla_model.master_print"
                or (isinstance(v.func, cst.Name) and v.func.value == "print")
            )
        ):
            ctx.claim_statement(node, self)
            ctx.suppress_current_statement()

    def statement(self, ctx, orig, node, qname, call, target):
        ctx.report(orig, "removed print-only torch_xla metrics report", code=self.code, outcome="warned")
        return cst.RemovalSentinel.REMOVE

    def ref(self, ctx, orig, node, qname):
        ctx.flag(
            orig,
            f"`met.{qname.rsplit('.', 1)[1]}`: torch_xla metrics have no TorchTPU equivalent "
            "(TORCH_LOGS, XLA_FLAGS dumps); remove or replace this check",
            code=self.code,
        )
        return None


@register
class PrivateXla(Rule):
    code = "TPU904"
    name = "private-torch-xla"
    family = "xla_flag_only"
    outcome = "flagged"
    summary = "Flag private torch_xla API: torch_xla._XLAC.*, xm._fetch_gradients and other _names."
    rationale = "Internal APIs have no contract and no TorchTPU counterpart."
    before = "import torch_xla\n\nh = torch_xla._XLAC._get_xla_tensors_hlo([t])\n"
    after = (
        "import torch_xla\n\n# TODO(tpu-migrate TPU904): `torch_xla._XLAC._get_xla_tensors_hlo` is private "
        "torch_xla API; no TorchTPU equivalent\nh = torch_xla._XLAC._get_xla_tensors_hlo([t])\n"
    )
    ref_prefixes = ("torch_xla._XLAC",)

    def ref(self, ctx, orig, node, qname):
        ctx.flag(orig, f"`{qname}` is private torch_xla API; no TorchTPU equivalent", code=self.code)
        return None


class SpmdProgram(Spmd):
    """Used instead of :class:`Spmd` for a whole file that uses SPMD (not registered: same code).

    In an SPMD program every torch_xla call means something else (one process drives all devices:
    ``global_runtime_device_count`` is the device count, not the world size), so nothing is rewritten
    and every torch_xla use is flagged for the port to DTensor.
    """

    refs = frozenset()
    ref_prefixes = ("torch_xla",)

    def ref(self, ctx, orig, node, qname):
        short = qname.replace("torch_xla.runtime.", "xr.").replace("torch_xla.distributed.spmd.", "xs.")
        short = short.replace("torch_xla.core.xla_model.", "xm.")
        if qname.startswith(_SPMD) or qname in Spmd.refs:
            return super().ref(ctx, orig, node, qname)
        ctx.flag(
            orig,
            f"`{short}` in an SPMD program: port it together with the sharding design "
            "(DTensor on TorchTPU); not rewritten",
            code=self.code,
        )
        return None


SPMD_MARKERS = (
    "use_spmd",
    "torch_xla.distributed.spmd",
    "xla_sharding",
    "SpmdFullyShardedDataParallel",
    "torch_xla.experimental.spmd",
)
