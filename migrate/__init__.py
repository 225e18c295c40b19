"""tpu-migrate: move CUDA and torch_xla PyTorch code to the native "tpu" device.

A pure source-to-source tool (libcst); it imports neither torch nor jax.

    >>> from tpu_workbench.migrate import migrate_source
    >>> migrate_source("import torch\\nx = torch.zeros(2, device='cuda')\\n").new_source
    "import torch\\nx = torch.zeros(2, device='tpu')\\n"
"""

from .engine import migrate_paths
from .report import markdown_report
from .results import Diagnostic, FileResult, MigrationResult, RunResult
from .source import UnparsableError, migrate_source

__all__ = [
    "Diagnostic",
    "FileResult",
    "MigrationResult",
    "RunResult",
    "UnparsableError",
    "markdown_report",
    "migrate_paths",
    "migrate_source",
]
