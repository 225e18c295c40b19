"""Rule families. Importing this package registers every rule (see :func:`base.all_rules`)."""

from . import (  # noqa: F401  (each family module registers its rules on import)
    amp,
    cuda_api,
    cuda_device,
    distributed,
    foreign_devices,
    frameworks,
    workers,
    xla_flag_only,
    xla_loader,
    xla_model,
    xla_runtime,
    xla_spawn,
)
from .base import Context, Rule, all_rules, register, select_rules

__all__ = ["Context", "Rule", "all_rules", "register", "select_rules"]
