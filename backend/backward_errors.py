"""Python errors raised inside backward reach the caller instead of terminating the process.

PyTorch's Python-backend device guard is C++ whose ``noexcept`` stream methods ask Python for the
device type. The autograd engine restores its stream guard while unwinding from a Python error raised in
backward (a tensor or module hook that raises or returns a non-tensor, a saved-tensor unpack hook, an op
this device refuses), and PyTorch leaves that error set in the interpreter while it unwinds. Any call
into Python then fails on the pending error, and a failure inside ``noexcept`` code is
``std::terminate``: the whole interpreter aborts. CUDA's guard never calls Python, so there the same
code raises an ordinary exception.

So the guard's device-type answer (``guard_device_type``) first takes any pending error out of the
interpreter and keeps it here; the engine then finishes unwinding with nothing set and returns an empty
error, which the interpreter reports as a ``SystemError`` from ``run_backward``. The backward entry
point (``torch.autograd._engine_run_backward``, wrapped by the ``backward-errors`` patch) raises the kept
error in its place, so the caller sees the hook's own exception, as on CUDA.
"""

from __future__ import annotations

import ctypes
import functools
import threading
from collections.abc import Callable
from typing import Any

from tpu_workbench.backend import _torch_private as private

# A C-API call flagged as such: ctypes returns NULL when the interpreter holds an error after it, so
# calling it turns a pending error into an ordinary exception in the calling frame.
_probe_pending_error = ctypes.pythonapi.PyErr_Occurred
_probe_pending_error.restype = ctypes.c_void_p
_probe_pending_error.argtypes = ()

_kept: list[tuple[int, BaseException]] = []  # (thread that kept it, error), newest last
_KEEP_AT_MOST = 16
_lock = threading.Lock()


def _keep(error: BaseException) -> None:
    if isinstance(error, SystemError) and isinstance(error.__cause__, BaseException):
        if "returned a result with an exception set" in str(error):
            error = error.__cause__  # the interpreter's wrapper around the pending error
    with _lock:
        _kept.append((threading.get_ident(), error))
        del _kept[:-_KEEP_AT_MOST]


def take_kept() -> BaseException | None:
    """The newest error kept on this thread, else the newest kept on any thread (PyTorch's device threads
    run backward elsewhere), or None; this thread's kept errors are forgotten."""
    me = threading.get_ident()
    with _lock:
        mine = [e for t, e in _kept if t == me]
        error = mine[-1] if mine else (_kept[-1][1] if _kept else None)
        if mine:
            _kept[:] = [(t, e) for t, e in _kept if t != me]
        elif _kept:
            _kept.pop()
    return error


def _forget_mine() -> None:
    me = threading.get_ident()
    with _lock:
        _kept[:] = [(t, e) for t, e in _kept if t != me]


def guard_device_type(_answer: Any = private.DEVICE_TYPE_PRIVATEUSE1) -> Any:
    """The device guard's ``type_``: PrivateUse1, after taking out any error left pending by backward."""
    try:
        _probe_pending_error()
    except BaseException as error:  # noqa: BLE001 - kept and raised again by the backward entry point
        _keep(error)
    return _answer


def reraising_kept_errors(run_backward: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap torch's backward entry point so an error the guard kept is raised in place of the
    interpreter's "returned NULL without setting an exception"."""

    @functools.wraps(run_backward)
    def run(*args: Any, **kwargs: Any) -> Any:
        _forget_mine()  # an error left from an earlier, unrelated unwinding is not this backward's
        try:
            return run_backward(*args, **kwargs)
        except SystemError:
            kept = take_kept()
            if kept is None:
                raise
            raise kept.with_traceback(kept.__traceback__) from None
        finally:
            _forget_mine()

    run.__wrapped_for_backward_errors__ = True  # type: ignore[attr-defined]
    return run
