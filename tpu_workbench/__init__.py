"""tpu-workbench: move PyTorch code from CUDA and torch_xla to the native "tpu" device, and measure the move.

Every module lives under this one distinctive root, so a user's own ``backend``, ``migrate`` or ``workbench``
package never collides with ours (and ours never hijacks ``import torch`` through the autoload entry point).
The repository keeps one folder per part; the build maps folders to packages (setup.py, docs/architecture.md):

    backend/    → tpu_workbench.backend   the "tpu" PyTorch device on JAX/XLA
    migrate/    → tpu_workbench.migrate   tpu-migrate, the codemod (imports neither torch nor jax)
    workbench/  → tpu_workbench.bench     tpu-bench: measurement, projection, cost, plots

This file imports nothing, so ``import tpu_workbench.migrate`` stays free of torch.
"""

__version__ = "0.1.0"
