"""Differential fuzz: random calls of common ops on "tpu" and on the CPU, with one rule: the same value, or
both raise.

Each call is drawn from a seeded generator: an op from ``OPS``, inputs of random shape (0-3 dims, sizes 0-4),
dtype (float32/16, bfloat16, int64/32, bool, complex64) and values (ordinary, large, inf, NaN, -0.0), and
arguments that are sometimes out of range (dims, indices, sizes). Verdicts:

- ``same``: both returned, same shape and dtype, values equal within the dtype's tolerance (NaN where NaN);
- ``both_raise``: both refused;
- ``tpu_refuses``: the CPU returned, "tpu" raised (a gap, honest: an error, never a number);
- ``cpu_dtype_gap``: the CPU kernel lacks the dtype ("not implemented for 'Bool'"), "tpu" computes it (as
  CUDA often does: accepted on purpose);
- ``cpu_only_refusal``: the CPU refuses what CUDA computes (integer division by zero: ZeroDivisionError on
  the CPU, no error on CUDA): "tpu" behaves as CUDA;
- ``tpu_accepts``: the CPU raised otherwise, "tpu" returned (what CUDA refuses, accepted here: to drive to zero);
- ``undefined``: both returned different values where PyTorch defines none: a float -> integer conversion of a
  NaN, an infinity or a value outside the integer type (C++ undefined behaviour; x86 CPUs give the "integer
  indefinite" INT_MIN, arm64 CPUs and CUDA saturate or give 0, XLA saturates; PyTorch's maintainers call it
  undefined in pytorch/pytorch#180159 and PyTorch's own test_float_to_int_undefined_conversion checks only
  the dtype). Counted apart from ``same``, never as an agreement;
- ``wrong``: both returned and the values differ (a silent wrong answer: to drive to zero);
- ``crash``: "tpu" raised an error PyTorch never raises (an internal error: AssertionError, KeyError, a JAX
  error ...), or the process died (``python -m tpu_workbench.backend.fuzz`` runs in its own process).

``python -m tpu_workbench.backend.fuzz --calls 20000 --seed 0`` prints the counts and the non-agreeing calls.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import random
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.bool, torch.complex64)
FLOATS = (torch.float32, torch.float16, torch.bfloat16)
TORCH_ERRORS = (RuntimeError, IndexError, ValueError, TypeError, NotImplementedError, ZeroDivisionError)
VERDICTS = (
    "same",
    "both_raise",
    "cpu_dtype_gap",
    "cpu_only_refusal",
    "tpu_refuses",
    "tpu_accepts",
    "undefined",
    "wrong",
    "crash",
)
AGREEING = ("same", "both_raise", "cpu_dtype_gap", "cpu_only_refusal")
_SHAPES = ((), (3,), (1,), (2, 3), (3, 1), (1, 3), (2, 1, 3), (0,), (2, 0), (4, 4))


@dataclass
class Call:
    """One drawn call: the op's name, a description, and ``run(device)``."""

    op: str
    desc: str
    run: Callable[[str], Any]
    # (cpu result, tpu result) -> why PyTorch defines no value where they differ, or None
    undefined: Callable[[Any, Any], str | None] | None = None


class Draw:
    """The random choices of one call (seeded per call, so any call can be replayed by its seed)."""

    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)
        self.g = torch.Generator().manual_seed(seed)

    def shape(self, max_dims: int = 3) -> tuple[int, ...]:
        """A shape from a small set (each new shape costs XLA compilations: few shapes keep a wide run fast)."""
        return self.r.choice([s for s in _SHAPES if len(s) <= max_dims])

    def dtype(self, among: tuple = DTYPES) -> torch.dtype:
        return self.r.choice(among)

    def tensor(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        if dtype == torch.bool:
            return torch.rand(shape, generator=self.g) < 0.5
        if not (dtype.is_floating_point or dtype.is_complex):
            hi = self.r.choice((3, 10, 1000))
            return torch.randint(-hi, hi, shape, generator=self.g, dtype=dtype)
        scale = self.r.choice((1.0, 1.0, 1.0, 100.0, 1e4, 1e-3))
        t = (
            torch.randn(shape, generator=self.g, dtype=torch.complex64 if dtype.is_complex else torch.float32)
            * scale
        )
        if t.numel() and self.r.random() < 0.2:
            flat = t.view(-1)
            flat[self.r.randrange(flat.numel())] = self.r.choice((math.inf, -math.inf, math.nan, -0.0))
        return t.to(dtype)

    def dim(self, ndim: int) -> int:
        n = max(ndim, 1)
        return self.r.randint(-n - 1, n) if self.r.random() < 0.1 else self.r.randint(-n, n - 1)

    def index(self, size: int, shape: tuple[int, ...]) -> torch.Tensor:
        lo, hi = (-size - 2, size + 2) if self.r.random() < 0.15 else (0, max(size, 1))
        return torch.randint(lo, hi, shape, generator=self.g)

    def scalar(self) -> Any:
        return self.r.choice((0, 1, 2, -1, 0.5, -2.5, 300, 1e30, True))


def _unary(name: str, fn: Callable[[torch.Tensor], Any], dtypes: tuple = DTYPES) -> Callable[[Draw], Call]:
    def make(d: Draw) -> Call:
        x = d.tensor(d.shape(), d.dtype(dtypes))
        return Call(name, f"{name}({_t(x)})", lambda dev: fn(_on(x, dev)))

    return make


def _binary(name: str, fn: Callable[[Any, Any], Any]) -> Callable[[Draw], Call]:
    def make(d: Draw) -> Call:
        s = d.shape()
        x = d.tensor(s, d.dtype())
        if d.r.random() < 0.3:
            y: Any = d.scalar()
            return Call(name, f"{name}({_t(x)}, {y!r})", lambda dev: fn(_on(x, dev), y))
        s2 = s[d.r.randint(0, len(s)) :] if d.r.random() < 0.7 else d.shape()
        y = d.tensor(s2, d.dtype() if d.r.random() < 0.3 else x.dtype)
        return Call(name, f"{name}({_t(x)}, {_t(y)})", lambda dev: fn(_on(x, dev), _on(y, dev)))

    return make


def _inplace(name: str) -> Callable[[Draw], Call]:
    def make(d: Draw) -> Call:
        x = d.tensor(d.shape(), d.dtype())
        if d.r.random() < 0.2 and x.dim():
            x = x[..., :1].expand(*x.shape[:-1], 3)
        y = d.scalar() if d.r.random() < 0.5 else d.tensor(x.shape[d.r.randint(0, x.dim()) :], d.dtype())

        def run(dev: str) -> Any:
            xx = _on(x, dev) if x.is_contiguous() else x.contiguous()[..., :1].to(dev).expand(*x.shape)
            yy = _on(y, dev) if isinstance(y, torch.Tensor) else y
            return getattr(xx, name)(yy)

        desc = f"{_t(x)}.{name}({_t(y) if isinstance(y, torch.Tensor) else repr(y)})"
        return Call(
            name, desc, run, (lambda c, t: _float_to_int_undefined(y, c, t)) if name == "copy_" else None
        )

    return make


def _reduce(name: str, fn: Callable[..., Any], dtypes: tuple = DTYPES) -> Callable[[Draw], Call]:
    def make(d: Draw) -> Call:
        x = d.tensor(d.shape(), d.dtype(dtypes))
        dim = d.dim(x.dim()) if d.r.random() < 0.8 else None
        keep = d.r.random() < 0.3
        return Call(
            name, f"{name}({_t(x)}, dim={dim}, keepdim={keep})", lambda dev: fn(_on(x, dev), dim, keep)
        )

    return make


def _embedding(d: Draw) -> Call:
    w = d.tensor((d.r.randint(1, 5), d.r.randint(1, 3)), d.dtype(FLOATS))
    i = d.index(w.shape[0], d.shape(2))
    return Call(
        "embedding", f"embedding({_t(i)}, {_t(w)})", lambda dev: F.embedding(_on(i, dev), _on(w, dev))
    )


def _index_op(name: str) -> Callable[[Draw], Call]:
    def make(d: Draw) -> Call:
        x = d.tensor(d.shape() or (3,), d.dtype(FLOATS + (torch.int64,)))
        dim = d.dim(x.dim())
        size = x.shape[dim] if x.dim() and -x.dim() <= dim < x.dim() else 1
        i = d.index(size, (d.r.randint(0, 3),))

        def run(dev: str) -> Any:
            xx, ii = _on(x, dev), _on(i, dev)
            if name == "index_select":
                return xx.index_select(dim, ii)
            if name == "index_fill_":
                return xx.index_fill_(dim, ii, 1)
            src_shape = list(xx.shape) if xx.dim() else [1]
            if xx.dim():
                src_shape[dim] = ii.numel()
            src = (
                torch.ones(src_shape, dtype=xx.dtype, device=dev)
                if xx.dim()
                else torch.ones((), dtype=xx.dtype, device=dev)
            )
            return getattr(xx, name)(dim, ii, src)

        return Call(name, f"{_t(x)}.{name}({dim}, {i.tolist()})", run)

    return make


def _gather(d: Draw) -> Call:
    x = d.tensor(d.shape() or (3,), d.dtype())
    dim = d.dim(x.dim())
    size = x.shape[dim] if x.dim() and -x.dim() <= dim < x.dim() else 1
    i = d.index(size, x.shape)
    return Call(
        "gather",
        f"gather({_t(x)}, {dim}, {i.tolist()})",
        lambda dev: torch.gather(_on(x, dev), dim, _on(i, dev)),
    )


def _take(d: Draw) -> Call:
    x = d.tensor(d.shape(), d.dtype())
    i = d.index(x.numel(), d.shape(2))
    return Call("take", f"take({_t(x)}, {i.tolist()})", lambda dev: _on(x, dev).take(_on(i, dev)))


def _one_hot(d: Draw) -> Call:
    n = d.r.choice((-1, 2, 3, 5))
    i = d.index(max(n, 3), d.shape(2))
    return Call("one_hot", f"one_hot({i.tolist()}, {n})", lambda dev: F.one_hot(_on(i, dev), n))


def _mask(d: Draw) -> Call:
    x = d.tensor(d.shape() or (3,), d.dtype())
    ms = tuple(x.shape[: d.r.randint(1, x.dim())]) if x.dim() else ()
    if ms and d.r.random() < 0.2:
        ms = (ms[0] + 1,) + ms[1:]
    m = torch.rand(ms, generator=d.g) < 0.5
    return Call("mask", f"{_t(x)}[mask {list(ms)}]", lambda dev: _on(x, dev)[_on(m, dev)])


def _where(d: Draw) -> Call:
    s = d.shape()
    c = d.tensor(s, d.r.choice((torch.bool, torch.bool, torch.int64, torch.uint8 if False else torch.bool)))
    x, y = d.tensor(s, d.dtype()), d.tensor(s, d.dtype())
    return Call(
        "where",
        f"where({_t(c)}, {_t(x)}, {_t(y)})",
        lambda dev: torch.where(_on(c, dev), _on(x, dev), _on(y, dev)),
    )


def _fill(d: Draw) -> Call:
    x = d.tensor(
        d.shape(), d.dtype((torch.int8, torch.int16, torch.int32, torch.int64, torch.float32, torch.bool))
    )
    v = d.r.choice((0, 1, -1, 127, 128, 300, -129, 2**31, 1.5, -0.5))
    return Call("fill_", f"{_t(x)}.fill_({v!r})", lambda dev: _on(x, dev).fill_(v))


def _multinomial(d: Draw) -> Call:
    p = d.tensor((d.r.randint(1, 3), d.r.randint(1, 4)), torch.float32).abs()
    if d.r.random() < 0.3:
        p = p * d.r.choice((-1.0, 0.0, math.inf))
    return Call(
        "multinomial", f"multinomial({_t(p)}, 1)", lambda dev: torch.multinomial(_on(p, dev), 1).shape
    )


def _repeat_interleave(d: Draw) -> Call:
    x = d.tensor((3,), d.dtype())
    r = torch.randint(-1 if d.r.random() < 0.2 else 0, 3, (3,), generator=d.g)
    return Call(
        "repeat_interleave",
        f"repeat_interleave({_t(x)}, {r.tolist()})",
        lambda dev: torch.repeat_interleave(_on(x, dev), _on(r, dev)),
    )


def _conv(d: Draw) -> Call:
    L, k = d.r.randint(1, 5), d.r.randint(1, 5)
    x, w = d.tensor((1, 2, L), torch.float32), d.tensor((3, 2, k), torch.float32)
    pad = d.r.randint(0, 1)
    return Call(
        "conv1d",
        f"conv1d(L={L}, k={k}, pad={pad})",
        lambda dev: F.conv1d(_on(x, dev), _on(w, dev), padding=pad),
    )


def _pool(d: Draw) -> Call:
    L, k = d.r.randint(1, 5), d.r.randint(1, 5)
    x = d.tensor((1, 2, L, L), torch.float32)
    fn = d.r.choice((F.max_pool2d, F.avg_pool2d))
    return Call(fn.__name__, f"{fn.__name__}(L={L}, k={k})", lambda dev: fn(_on(x, dev), k))


def _shape_op(d: Draw) -> Call:
    x = d.tensor(d.shape(), d.dtype())
    n = x.dim()
    choice = d.r.choice(
        (
            "transpose",
            "flip",
            "roll",
            "squeeze",
            "unsqueeze",
            "narrow",
            "select",
            "cat",
            "stack",
            "reshape",
            "permute",
        )
    )
    a, b, u = d.dim(n), d.dim(n), d.r.randint(-n - 2, n + 1)
    bad_permute = d.r.random() < 0.2
    fns = {
        "transpose": lambda t: t.transpose(a, b),
        "flip": lambda t: t.flip(a),
        "roll": lambda t: t.roll(2, a),
        "squeeze": lambda t: t.squeeze(a),
        "unsqueeze": lambda t: t.unsqueeze(u),
        "narrow": lambda t: t.narrow(a, 1, 1),
        "select": lambda t: t.select(a, -1),
        "cat": lambda t: torch.cat([t, t], a),
        "stack": lambda t: torch.stack([t, t], a),
        "reshape": lambda t: t.reshape(-1, 2),
        "permute": lambda t: t.permute(0, 0) if bad_permute else t.permute(*reversed(range(n))),
    }
    fn = fns[choice]
    return Call(choice, f"{choice}({_t(x)}, {a}, {b})", lambda dev: fn(_on(x, dev)))


def _factory(d: Draw) -> Call:
    n = d.r.choice((-1, 0, 3))
    name = d.r.choice(("randperm", "empty", "zeros", "full", "arange"))
    fns = {
        "randperm": lambda dev: torch.randperm(n, device=dev).shape,
        "empty": lambda dev: torch.empty(n, 2, device=dev).shape,
        "zeros": lambda dev: torch.zeros(2, n, device=dev),
        "full": lambda dev: torch.full((2,), 300 if n < 0 else n, dtype=torch.int8, device=dev),
        "arange": lambda dev: torch.arange(0, n, 0.5, device=dev),
    }
    return Call(name, f"{name}({n})", fns[name])


def _sort(d: Draw) -> Call:
    x = d.tensor(d.shape(), d.dtype(FLOATS + (torch.int64,)))
    dim = d.dim(x.dim())
    return Call("sort", f"sort({_t(x)}, {dim})", lambda dev: _on(x, dev).sort(dim, stable=True))


def _softmax(d: Draw) -> Call:
    x = d.tensor(d.shape(), d.dtype(FLOATS))
    dim = d.dim(x.dim())
    fn = d.r.choice((F.softmax, F.log_softmax))
    return Call(fn.__name__, f"{fn.__name__}({_t(x)}, {dim})", lambda dev: fn(_on(x, dev), dim))


def _cross_entropy(d: Draw) -> Call:
    n, c = d.r.randint(1, 4), d.r.randint(1, 4)
    x = d.tensor((n, c), torch.float32)
    t = d.index(c, (n,))
    return Call(
        "cross_entropy",
        f"cross_entropy({_t(x)}, {t.tolist()})",
        lambda dev: F.cross_entropy(_on(x, dev), _on(t, dev)),
    )


def _float_to_int_undefined(src: Any, cpu: Any, tpu: Any) -> str | None:
    """Why a copy of float ``src`` into an integer tensor has no defined value where the results differ, or None
    (also None when they differ at an element whose conversion is defined: that is a wrong answer)."""
    if not isinstance(cpu, torch.Tensor) or not isinstance(tpu, torch.Tensor) or cpu.shape != tpu.shape:
        return None
    dtype = cpu.dtype
    s = torch.as_tensor(src)
    if dtype == torch.bool or dtype.is_floating_point or dtype.is_complex or not s.is_floating_point():
        return None
    s = s.double()
    info = torch.iinfo(dtype)
    bad = (~torch.isfinite(s) | (s.trunc() < info.min) | (s.trunc() > info.max)).expand(cpu.shape)
    if not bool(bad.any()) or not torch.equal(cpu[~bad], tpu[~bad]):
        return None
    name = str(dtype).replace("torch.", "")
    return f"float -> {name} of a NaN/inf/out-of-range value (undefined in PyTorch)"


def _on(x: torch.Tensor, dev: str) -> torch.Tensor:
    """The input on ``dev``: a copy on the CPU too, so an in-place op on one device leaves the other's alone."""
    return x.clone() if dev == "cpu" else x.to(dev)


def _t(x: torch.Tensor) -> str:
    return f"{str(x.dtype).replace('torch.', '')}{list(x.shape)}"


OPS: dict[str, Callable[[Draw], Call]] = {
    **{n: _unary(n, getattr(torch, n)) for n in ("abs", "neg", "exp", "log", "sqrt", "sigmoid", "tanh", "floor", "ceil", "round", "sign", "reciprocal", "rsqrt", "sin", "erf", "isnan", "isfinite", "logical_not", "bitwise_not", "relu", "square", "trunc", "frac", "exp2", "log1p", "expm1")},
    **{n: _binary(n, getattr(torch, n)) for n in ("add", "sub", "mul", "div", "pow", "maximum", "minimum", "remainder", "fmod", "atan2", "eq", "lt", "logical_and", "bitwise_and", "floor_divide", "hypot")},
    **{n: _inplace(n) for n in ("add_", "sub_", "mul_", "div_", "clamp_min_", "sigmoid_", "abs_", "copy_", "pow_", "floor_divide_")},
    "sum": _reduce("sum", lambda x, d, k: x.sum(d, keepdim=k) if d is not None else x.sum()),
    "mean": _reduce("mean", lambda x, d, k: x.mean(d, keepdim=k) if d is not None else x.mean(), FLOATS + (torch.complex64,)),
    "prod": _reduce("prod", lambda x, d, k: x.prod(d, keepdim=k) if d is not None else x.prod()),
    "amax": _reduce("amax", lambda x, d, k: x.amax(d if d is not None else (), keepdim=k)),
    "amin": _reduce("amin", lambda x, d, k: x.amin(d if d is not None else (), keepdim=k)),
    "argmax": _reduce("argmax", lambda x, d, k: x.argmax(d, keepdim=k)),
    "std": _reduce("std", lambda x, d, k: x.std(d, keepdim=k) if d is not None else x.std(), FLOATS + (torch.complex64,)),
    "var": _reduce("var", lambda x, d, k: x.var(d, keepdim=k) if d is not None else x.var(), FLOATS + (torch.complex64,)),
    "norm": _reduce("norm", lambda x, d, k: torch.linalg.vector_norm(x, dim=d, keepdim=k), FLOATS + (torch.complex64,)),
    "logsumexp": _reduce("logsumexp", lambda x, d, k: x.logsumexp(d if d is not None else 0, keepdim=k), FLOATS),
    "cumsum": _reduce("cumsum", lambda x, d, k: x.cumsum(d if d is not None else 0)),
    "any": _reduce("any", lambda x, d, k: x.any(d, keepdim=k) if d is not None else x.any()),
    "max.dim": _reduce("max.dim", lambda x, d, k: x.max(d if d is not None else 0, keepdim=k).values, FLOATS + (torch.int64,)),
    "normalize": _reduce("normalize", lambda x, d, k: F.normalize(x, dim=d if d is not None else 1), FLOATS),
    "embedding": _embedding,
    **{n: _index_op(n) for n in ("index_select", "index_add_", "index_copy_", "index_fill_")},
    "gather": _gather,
    "take": _take,
    "one_hot": _one_hot,
    "mask": _mask,
    "where": _where,
    "fill_": _fill,
    "multinomial": _multinomial,
    "repeat_interleave": _repeat_interleave,
    "conv1d": _conv,
    "pool2d": _pool,
    "shape": _shape_op,
    "factory": _factory,
    "sort": _sort,
    "softmax": _softmax,
    "cross_entropy": _cross_entropy,
}  # fmt: skip


def _tol(dtype: torch.dtype) -> tuple[float, float]:
    if dtype in (torch.float16, torch.bfloat16):
        return 2e-2, 2e-2
    return 1e-4, 1e-4


def _equal(c: Any, t: Any) -> bool:
    if isinstance(c, torch.Tensor):
        if not isinstance(t, torch.Tensor) or t.shape != c.shape or t.dtype != c.dtype:
            return False
        t = t.detach().cpu()
        c = c.detach()
        if c.is_floating_point() or c.is_complex():
            rtol, atol = _tol(c.dtype)
            return bool(
                torch.isclose(
                    t,
                    c,
                    rtol=rtol,
                    atol=atol * max(1.0, float(c.abs().nan_to_num(0, 0, 0).max()) if c.numel() else 1.0),
                    equal_nan=True,
                ).all()
            )
        return bool(torch.equal(t, c))
    if isinstance(c, (list, tuple)):
        return (
            isinstance(t, (list, tuple))
            and len(c) == len(t)
            and all(_equal(a, b) for a, b in zip(c, t, strict=True))
        )
    return c == t


def judge(call: Call) -> tuple[str, str]:
    """(verdict, detail) for one call."""
    try:
        cpu = call.run("cpu")
        cpu_err = None
    except Exception as exc:  # noqa: BLE001 - the verdict is the point
        cpu, cpu_err = None, exc
    try:
        tpu = call.run("tpu")
        if isinstance(tpu, torch.Tensor):
            tpu = tpu.detach().cpu()
        elif isinstance(tpu, (list, tuple)):
            tpu = type(tpu)(v.detach().cpu() if isinstance(v, torch.Tensor) else v for v in tpu)
        tpu_err = None
    except TORCH_ERRORS as exc:
        if type(exc).__module__.startswith("jax") or "jax" in type(exc).__name__.lower():
            return "crash", f"{type(exc).__name__}: {exc}"[:200]
        tpu, tpu_err = None, exc
    except Exception as exc:  # noqa: BLE001 - an internal error is a crash
        return "crash", f"{type(exc).__name__}: {exc}"[:200]
    if cpu_err is not None and tpu_err is not None:
        return "both_raise", ""
    if (
        cpu_err is not None
        and isinstance(cpu_err, NotImplementedError)
        and "not implemented for '" in str(cpu_err)
    ):
        return "cpu_dtype_gap", str(cpu_err)[:100]
    if cpu_err is not None and "ZeroDivisionError" in str(cpu_err):
        return "cpu_only_refusal", str(cpu_err)[:100]
    if cpu_err is not None:
        return "tpu_accepts", f"cpu: {type(cpu_err).__name__}: {str(cpu_err)[:100]}"
    if tpu_err is not None:
        return "tpu_refuses", f"tpu: {type(tpu_err).__name__}: {str(tpu_err)[:100]}"
    if _is_random(call.op) or _equal(cpu, tpu):
        return "same", ""
    reason = call.undefined(cpu, tpu) if call.undefined else None
    if reason:
        return "undefined", f"{reason}: cpu {_brief(cpu)} tpu {_brief(tpu)}"
    return "wrong", f"cpu {_brief(cpu)} tpu {_brief(tpu)}"


def _is_random(op: str) -> bool:
    return op in ("multinomial", "randperm", "empty")


def _brief(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        return f"{_t(x)} {x.flatten()[:4].tolist()}"
    return repr(x)[:80]


@dataclass
class Report:
    counts: collections.Counter = field(default_factory=collections.Counter)
    by_op: dict = field(default_factory=lambda: collections.defaultdict(collections.Counter))
    examples: list = field(default_factory=list)
    seconds: float = 0.0


def _judge_seed(s: int, names: list[str], rep: Report, keep: int, progress: int) -> None:
    d = Draw(s)
    name = d.r.choice(names)
    try:
        call = OPS[name](d)
    except Exception:  # noqa: BLE001 - the generator built an input the CPU cannot even make
        rep.counts["skipped"] += 1
        return
    verdict, detail = judge(call)
    rep.counts[verdict] += 1
    rep.by_op[name][verdict] += 1
    if verdict not in AGREEING and len(rep.examples) < keep:
        rep.examples.append({"seed": s, "op": name, "verdict": verdict, "call": call.desc, "detail": detail})
        if progress:
            print(f"  [{verdict}] seed {s} {call.desc}  {detail}", file=sys.stderr, flush=True)


def replay(seeds: list[int], ops: list[str] | None = None) -> Report:
    """Judge the calls of the given per-call seeds again (as drawn by ``fuzz`` over the same ``ops``): a fix is
    checked against the calls that found the bug in seconds, not a wide run."""
    names = ops or sorted(OPS)
    rep = Report()
    t0 = time.perf_counter()
    for s in seeds:
        _judge_seed(s, names, rep, keep=len(seeds), progress=0)
    rep.seconds = time.perf_counter() - t0
    return rep


def fuzz(
    calls: int, seed: int = 0, ops: list[str] | None = None, keep: int = 200, progress: int = 0
) -> Report:
    """Draw and judge ``calls`` calls; call i uses seed ``seed * 1_000_003 + i``. ``progress``: print the running
    counts to stderr every that many calls (a long run stopped early still leaves its figures)."""
    names = ops or sorted(OPS)
    rep = Report()
    t0 = time.perf_counter()
    for i in range(calls):
        _judge_seed(seed * 1_000_003 + i, names, rep, keep, progress)
        if progress and (i + 1) % progress == 0:
            print(
                f"{i + 1} calls, {time.perf_counter() - t0:.0f} s: {dict(rep.counts)}",
                file=sys.stderr,
                flush=True,
            )
    rep.seconds = time.perf_counter() - t0
    return rep


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true")
    p.add_argument("--progress", type=int, default=0, help="print running counts every N calls")
    p.add_argument("--replay", type=int, nargs="+", help="judge only these per-call seeds again")
    a = p.parse_args(argv)
    warnings.simplefilter("ignore")
    rep = replay(a.replay) if a.replay else fuzz(a.calls, a.seed, progress=a.progress)
    if a.replay:
        a.calls = len(a.replay)
    out = {"calls": a.calls, "seed": a.seed, "seconds": round(rep.seconds, 1), "counts": dict(rep.counts),
           "examples": rep.examples}  # fmt: skip
    if a.json:
        print(json.dumps(out, indent=1))
    else:
        print(
            f"{a.calls} calls, seed {a.seed}, {rep.seconds:.0f} s: "
            + ", ".join(f"{k} {rep.counts.get(k, 0)}" for k in VERDICTS)
        )
        for e in rep.examples:
            print(f"  [{e['verdict']}] seed {e['seed']} {e['call']}  {e['detail']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
