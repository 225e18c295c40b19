"""Expressions shared by the torch_xla families (rank, world size, local rank)."""

XM = "torch_xla.core.xla_model"
XR = "torch_xla.runtime"
RANK = "(torch.distributed.get_rank() if torch.distributed.is_initialized() else 0)"
WORLD = "(torch.distributed.get_world_size() if torch.distributed.is_initialized() else 1)"
LOCAL_RANK = 'int(os.environ.get("LOCAL_RANK", 0))'
DIST_EMITS = ("torch.distributed.get_rank", "torch.distributed.get_world_size", "torch.distributed.is_initialized")


def xm(*names: str) -> frozenset[str]:
    return frozenset(f"{XM}.{n}" for n in names)


def needs(ctx, text: str) -> None:
    """Ask for the imports a generated snippet uses."""
    if "torch." in text:
        ctx.need_import("torch")
    if "os.environ" in text:
        ctx.need_import("os")
