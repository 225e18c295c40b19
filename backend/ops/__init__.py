"""Lowerings by family; importing this package fills ``backend.ops.registry.REGISTRY``."""

from backend.ops import (  # noqa: F401
    factory,
    foreach,
    indexing,
    linalg,
    misc,
    nn,
    pointwise,
    random,
    reduction,
    shape,
)
