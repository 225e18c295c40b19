"""Rule families. Importing this package registers every rule (see :func:`base.all_rules`)."""

from .base import Rule, all_rules, register, select_rules

__all__ = ["Rule", "all_rules", "register", "select_rules"]


def _families() -> None:
    from . import (  # noqa: F401
        amp,
        cuda_api,
        cuda_device,
        distributed,
        frameworks,
        xla_flag_only,
        xla_loader,
        xla_model,
        xla_runtime,
        xla_spawn,
    )


class _LoadAll:
    loaded = False


def __getattr__(name: str):  # lazy: `from . import _load_all` triggers the family imports once
    if name == "_load_all":
        if not _LoadAll.loaded:
            _LoadAll.loaded = True
            _families()
        return True
    raise AttributeError(name)
