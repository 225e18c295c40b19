"""``tpu-bench assess PATH``: what moving a repository to the "tpu" device needs, whether it then runs, and what
it would cost, in one report (Markdown, HTML, JSON), verdict first.

It works on temporary copies of the repository, never on the user's tree; it runs the user's code (the commands
they name, or candidates they confirm), one subprocess per command and phase, with a timeout.
"""

from __future__ import annotations

from tpu_workbench.bench.assess.options import AssessOptions
from tpu_workbench.bench.assess.pipeline import assess

__all__ = ["AssessOptions", "assess"]
