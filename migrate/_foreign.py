"""Whether a called name belongs to a third-party library (not torch, not the standard library, not the
project's own code): a device string handed to one is that library's own vocabulary.

isaacgym's ``sim_device="cuda:0"``, transformers' ``device_map="cuda"``: renaming 'cuda' to 'tpu' there does
not move anything to the TPU; the library refuses the name or silently does something else. Such arguments
are flagged, not rewritten (see rules/_literal.py and flow.py).
"""

from __future__ import annotations

import os
import sys
from functools import lru_cache

#: Without a project marker above a file, the folders above it searched for the project's own modules.
_PROJECT_DEPTH = 4
#: The most folders walked up looking for a project's root (a deep file in a big repository: Megatron's
#: ``megatron/core/transformer/moe/`` is five below the root that holds ``megatron/``).
_MAX_DEPTH = 16
#: What marks a project's root; ``.git`` ends the walk (a repository's own root), the others mark candidates.
_MARKERS = (".git", "pyproject.toml", "setup.py", "setup.cfg")


@lru_cache(maxsize=4096)
def search_folders(folder: str) -> tuple[str, ...]:
    """The folders above ``folder`` (itself first) where the project's own top-level modules can live: up to
    the repository's root (the nearest ``.git``), else the outermost folder holding a ``pyproject.toml``,
    ``setup.py`` or ``setup.cfg``; with no marker at all, :data:`_PROJECT_DEPTH` folders (a fixed depth
    took Megatron's own ``megatron.core.transformer.cuda_graphs`` for a compiled CUDA extension)."""
    chain, marked, here = [], 0, os.path.abspath(folder)
    for _ in range(_MAX_DEPTH):
        chain.append(here)
        if os.path.exists(os.path.join(here, ".git")):
            return tuple(chain)
        if any(os.path.isfile(os.path.join(here, m)) for m in _MARKERS[1:]):
            marked = len(chain)
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    return tuple(chain[: marked or _PROJECT_DEPTH])


def third_party(qname: str | None, path: str | None) -> bool:
    """``qname`` (an imported name, ``isaacgymenvs.make``) is a third-party library's.

    torch and its family (``torch*``: torchvision, torchaudio ...) and the standard library are not; a module
    found beside the file or in a folder above it (``from models import build`` in a repository), or in the
    ``src/`` folder of one of those (``from nanotron.nn import X`` in ``tests/``), is the project's own. Relative imports never reach here (they resolve to no qualified name).
    """
    if not qname:
        return False
    root = qname.split(".")[0]
    if root.startswith("torch") or root in sys.stdlib_module_names or root == "__main__":
        return False
    if path and os.path.isfile(path):
        return not _project_module(os.path.dirname(os.path.abspath(path)), root)
    return True


@lru_cache(maxsize=4096)
def _project_module(folder: str, root: str) -> bool:
    for base_folder in search_folders(folder):
        # (``src/<package>``: the src layout, where tests import the package from beside ``src``)
        for base in (base_folder, os.path.join(base_folder, "src")):
            if os.path.isfile(os.path.join(base, root + ".py")) or os.path.isdir(os.path.join(base, root)):
                return True
    return False
