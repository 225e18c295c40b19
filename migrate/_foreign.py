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

#: Folders above a file searched for the project's own modules (a repository's layout rarely nests deeper).
_PROJECT_DEPTH = 4


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
    for _ in range(_PROJECT_DEPTH):
        # (``src/<package>``: the src layout, where tests import the package from beside ``src``)
        for base in (folder, os.path.join(folder, "src")):
            if os.path.isfile(os.path.join(base, root + ".py")) or os.path.isdir(os.path.join(base, root)):
                return True
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return False
