"""Random lowerings: each call takes a fresh key from ``tpu_workbench.backend.random.next_key()`` (or from a CPU
``torch.Generator`` passed explicitly, which it advances, so seeded generators repeat)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import torch

from tpu_workbench.backend import random as _rng
from tpu_workbench.backend.ops._util import aten, float_of, jdt
from tpu_workbench.backend.ops.registry import lower


def _key(generator: Any) -> Any:
    if generator is None:
        return _rng.next_key()
    seed = int(torch.randint(0, 2**62, (1,), generator=generator).item())
    _rng.draws += 1
    return jax.random.key(seed)


def _float_dt(x: Any) -> Any:
    return x.dtype if jnp.issubdtype(x.dtype, jnp.floating) else jnp.float32


@lower(aten.uniform_.default)
def uniform_(x: Any, from_: float = 0.0, to: float = 1.0, *, generator: Any = None) -> Any:
    dt = _float_dt(x)
    wide = jnp.float32 if dt in (jnp.bfloat16, jnp.float16) else dt
    return jax.random.uniform(_key(generator), x.shape, wide, from_, to).astype(x.dtype)


@lower(aten.normal_.default)
def normal_(x: Any, mean: float = 0.0, std: float = 1.0, *, generator: Any = None) -> Any:
    dt = _float_dt(x)
    wide = jnp.float32 if dt in (jnp.bfloat16, jnp.float16) else dt
    return (jax.random.normal(_key(generator), x.shape, wide) * std + mean).astype(x.dtype)


@lower(aten.normal.Tensor_float, aten.normal.float_Tensor, aten.normal.Tensor_Tensor)
def normal(mean: Any, std: Any = 1.0, *, generator: Any = None) -> Any:
    shape = jnp.broadcast_shapes(jnp.shape(mean), jnp.shape(std))
    dt = mean.dtype if hasattr(mean, "dtype") else std.dtype
    return (jax.random.normal(_key(generator), shape, jnp.float32) * std + mean).astype(dt)


@lower(aten.normal.float_float)
def normal_ff(
    mean: float,
    std: float,
    size: Any,
    *,
    generator: Any = None,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: Any = None,
) -> Any:
    return (jax.random.normal(_key(generator), tuple(size), jnp.float32) * std + mean).astype(jdt(dtype))


@lower(aten.bernoulli_.float)
def bernoulli_f(x: Any, p: float = 0.5, *, generator: Any = None) -> Any:
    return jax.random.bernoulli(_key(generator), p, x.shape).astype(x.dtype)


@lower(aten.bernoulli_.Tensor)
def bernoulli_t(x: Any, p: Any, *, generator: Any = None) -> Any:
    return jax.random.bernoulli(_key(generator), jnp.broadcast_to(p, x.shape).astype(jnp.float32)).astype(
        x.dtype
    )


@lower(aten.bernoulli.default)
def bernoulli(p: Any, *, generator: Any = None) -> Any:
    return jax.random.bernoulli(_key(generator), p.astype(jnp.float32)).astype(p.dtype)


@lower(aten.bernoulli.p)
def bernoulli_p(x: Any, p: float, *, generator: Any = None) -> Any:
    return jax.random.bernoulli(_key(generator), p, x.shape).astype(x.dtype)


@lower(aten.exponential_.default)
def exponential_(x: Any, lambd: float = 1.0, *, generator: Any = None) -> Any:
    return (jax.random.exponential(_key(generator), x.shape, _float_dt(x)) / lambd).astype(x.dtype)


@lower(aten.geometric_.default)
def geometric_(x: Any, p: float, *, generator: Any = None) -> Any:
    u = jax.random.uniform(_key(generator), x.shape, jnp.float64, minval=jnp.finfo(jnp.float64).tiny)
    return jnp.ceil(jnp.log(u) / jnp.log1p(-p)).astype(x.dtype)


@lower(aten.log_normal_.default)
def log_normal_(x: Any, mean: float = 1.0, std: float = 2.0, *, generator: Any = None) -> Any:
    return jnp.exp(jax.random.normal(_key(generator), x.shape, _float_dt(x)) * std + mean).astype(x.dtype)


@lower(aten.cauchy_.default)
def cauchy_(x: Any, median: float = 0.0, sigma: float = 1.0, *, generator: Any = None) -> Any:
    return (jax.random.cauchy(_key(generator), x.shape, _float_dt(x)) * sigma + median).astype(x.dtype)


@lower(getattr(aten.random_, "from"))
def random_from(x: Any, from_: int, to: int | None, *, generator: Any = None) -> Any:
    if to is None:
        to = (
            2**63 - 1
            if x.dtype == jnp.int64
            else int(jnp.iinfo(x.dtype).max) + 1
            if jnp.issubdtype(x.dtype, jnp.integer)
            else 2 ** jnp.finfo(x.dtype).nmant + 1
        )
    return jax.random.randint(_key(generator), x.shape, from_, to, jnp.int64).astype(x.dtype)


@lower(aten.random_.to)
def random_to(x: Any, to: int, *, generator: Any = None) -> Any:
    return random_from(x, 0, to, generator=generator)


@lower(aten.random_.default)
def random_default(x: Any, *, generator: Any = None) -> Any:
    if x.dtype == jnp.bool_:
        return random_from(x, 0, 2, generator=generator)
    hi = (
        int(jnp.iinfo(x.dtype).max) + 1
        if jnp.issubdtype(x.dtype, jnp.integer)
        else 2 ** (jnp.finfo(x.dtype).nmant + 1) + 1
    )
    return random_from(x, 0, min(hi, 2**63 - 1), generator=generator)


@lower(aten.randperm.default, aten.randperm.generator)
def randperm(
    n: int,
    *,
    generator: Any = None,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: Any = None,
) -> Any:
    return jax.random.permutation(_key(generator), n).astype(jdt(dtype, jnp.int64))


@lower(aten.multinomial.default)
def multinomial(p: Any, num_samples: int, replacement: bool = False, *, generator: Any = None) -> Any:
    logits = jnp.log(float_of(p))
    key = _key(generator)
    if replacement:
        shape = (num_samples,) + p.shape[:-1]
        out = jax.random.categorical(key, logits, axis=-1, shape=shape)
        return jnp.moveaxis(out, 0, -1).astype(jnp.int64)
    g = jax.random.gumbel(key, p.shape, logits.dtype)
    return jnp.argsort(-(logits + g), axis=-1)[..., :num_samples].astype(jnp.int64)


@lower(aten.rand.default, aten.rand.generator)
def rand(
    size: Any,
    *,
    generator: Any = None,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: Any = None,
) -> Any:
    dt = jdt(dtype)
    wide = jnp.float32 if dt in (jnp.bfloat16, jnp.float16) else dt
    return jax.random.uniform(_key(generator), tuple(size), wide).astype(dt)


@lower(aten.randn.default, aten.randn.generator)
def randn(
    size: Any,
    *,
    generator: Any = None,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: Any = None,
) -> Any:
    dt = jdt(dtype)
    wide = jnp.float32 if dt in (jnp.bfloat16, jnp.float16) else dt
    return jax.random.normal(_key(generator), tuple(size), wide).astype(dt)


@lower(aten.randint.low, aten.randint.low_generator)
def randint_low(
    low: int,
    high: int,
    size: Any,
    *,
    generator: Any = None,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: Any = None,
) -> Any:
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    return jax.random.randint(_key(generator), tuple(size), low, high, jnp.int64).astype(
        jdt(dtype, jnp.int64)
    )


@lower(aten.randint.default, aten.randint.generator)
def randint(
    high: int,
    size: Any,
    *,
    generator: Any = None,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: Any = None,
) -> Any:
    return randint_low(0, high, size, generator=generator, dtype=dtype)


@lower(aten.rand_like.default)
def rand_like(
    x: Any,
    *,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: Any = None,
    memory_format: Any = None,
) -> Any:
    dt = x.dtype if dtype is None else jdt(dtype)
    wide = jnp.float32 if dt in (jnp.bfloat16, jnp.float16) else dt
    return jax.random.uniform(_rng.next_key(), x.shape, wide).astype(dt)


@lower(aten.randn_like.default)
def randn_like(
    x: Any,
    *,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: Any = None,
    memory_format: Any = None,
) -> Any:
    dt = x.dtype if dtype is None else jdt(dtype)
    wide = jnp.float32 if dt in (jnp.bfloat16, jnp.float16) else dt
    return jax.random.normal(_rng.next_key(), x.shape, wide).astype(dt)


@lower(aten.randint_like.default, aten.randint_like.low_dtype)
def randint_like(
    x: Any,
    *args: Any,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: Any = None,
    memory_format: Any = None,
) -> Any:
    low, high = (0, args[0]) if len(args) == 1 else args
    dt = x.dtype if dtype is None else jdt(dtype)
    return jax.random.randint(_rng.next_key(), x.shape, low, high, jnp.int64).astype(dt)
