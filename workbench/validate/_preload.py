"""Imported once by the sweep's forkserver, so that every run process starts with the heavy, shared modules
loaded (transformers' modeling and generation utilities take tens of seconds to import on a busy host) and
the zoo already walked."""

import transformers.generation.utils  # noqa: F401
import transformers.modeling_utils  # noqa: F401

from tpu_workbench.bench.validate import runner, zoo  # noqa: F401

zoo.architectures()
