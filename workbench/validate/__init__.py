"""Model-zoo validation: every architecture of the installed ``transformers``, shrunk to a tiny random
model, run forward and backward on the device and compared with the CPU (``tpu-bench validate``).

Modules: ``zoo`` (architectures from the auto mappings), ``shrink`` + ``families`` (tiny configs),
``inputs`` (synthetic inputs), ``runner`` (one architecture, in-process), ``sweep`` (one process per run,
timeouts, crashes), ``classify`` (failure classes), ``report`` (records and markdown), ``orchestrate``
(a whole run), ``cli`` (the subcommand).
"""

from __future__ import annotations

__all__ = ["run_validation"]


def run_validation(*args, **kwargs):
    """See :func:`tpu_workbench.bench.validate.orchestrate.run_validation`."""
    from tpu_workbench.bench.validate.orchestrate import run_validation as impl  # lazy: startup

    return impl(*args, **kwargs)
