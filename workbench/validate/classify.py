"""Failure classes: one short key per cause, so the report can rank causes by how many architectures each
blocks. A missing operator is named (``missing op aten::histc``); other messages are normalised (numbers,
shapes, quoted names and addresses replaced) so that the same cause in two models gives the same class.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_OP = re.compile(r"operator '([\w:.]+)' is not implemented")
_ATEN = re.compile(r"\b(aten::\w+(?:\.\w+)?|prims::\w+)")
_DTYPE_NOT_IMPL = re.compile(r"\"(\w+)\" not implemented for '(\w+)'")


def _normalise(message: str) -> str:
    text = message.strip().splitlines()[0] if message.strip() else ""
    text = re.sub(r"0x[0-9a-fA-F]+", "0x…", text)
    text = re.sub(r"'[^']{1,80}'", "'…'", text)
    text = re.sub(r"\"[^\"]{1,80}\"", '"…"', text)
    text = re.sub(r"\[[\d, ]+\]|\([\d, ]+\)", "[…]", text)
    text = re.sub(r"\d+(\.\d+)?(e-?\d+)?", "N", text)
    return text[:140]


# (predicate on (error_type, message), class label). First match wins.
Rule = tuple[Callable[[str, str], str | None], str]


def _missing_op(kind: str, msg: str) -> str | None:
    m = _OP.search(msg)
    return f"missing op {m.group(1)}" if m else None


def _dtype_kernel(kind: str, msg: str) -> str | None:
    m = _DTYPE_NOT_IMPL.search(msg)
    return f"{m.group(1)} refuses dtype {m.group(2)}" if m else None


def _same_device(kind: str, msg: str) -> str | None:
    return (
        "mixed devices: a CPU tensor reaches a tpu op"
        if "Expected all tensors to be on the same device" in msg
        else None
    )


def _crash(kind: str, msg: str) -> str | None:
    if kind == "crash":
        m = re.search(r"\((SIG\w+|exit status -?\d+|signal \d+)\)", msg)
        stage = re.search(r"during stage '(\w+)'", msg)
        return f"process died ({m.group(1) if m else 'unknown'}) in {stage.group(1) if stage else '?'}"
    return None


def _timeout(kind: str, msg: str) -> str | None:
    if kind == "timeout":
        stage = re.search(r"during stage '(\w+)'", msg)
        return f"timeout in {stage.group(1) if stage else '?'}"
    return None


def _not_implemented_named(kind: str, msg: str) -> str | None:
    if kind == "NotImplementedError":
        m = _ATEN.search(msg)
        if m:
            return f"not implemented: {m.group(1)}"
    return None


RULES: tuple[Callable[[str, str], str | None], ...] = (
    _crash,
    _timeout,
    _missing_op,
    _dtype_kernel,
    _same_device,
    _not_implemented_named,
)


def classify_error(error_type: str, message: str) -> str:
    """Class label for one error (type name and message)."""
    for rule in RULES:
        label = rule(error_type or "", message or "")
        if label:
            return label
    return f"{error_type}: {_normalise(message or '')}"


def classify(result: dict) -> str | None:
    """The failure class of one run's result, or None when it passed (tier 2, or tier 1 when that is
    all that was asked)."""
    status = result.get("status")
    if status == "pass":
        return None
    rescued = result.get("cpu_rescued") or {}
    if rescued.get("rescues"):
        ops = ", ".join(sorted(rescued["rescues"]))
        return f"backward op re-run on the CPU: {ops}"
    if rescued.get("fallbacks"):
        ops = ", ".join(sorted(rescued["fallbacks"]))
        return f"CPU fallback: {ops}"
    if status == "tier1":
        agreement = result.get("agreement") or {}
        parts = [k for k in ("forward", "gradients") if not (agreement.get(k) or {}).get("ok", True)]
        what = " and ".join(parts) or "unknown"
        if result.get("random_draws"):  # the CPU and the device generators differ (as the CPU and CUDA do)
            return f"random draws in the forward ({', '.join(sorted(result['random_draws']))}): not comparable ({what})"
        details = [m.get("detail", "") for k in parts for m in (agreement.get(k) or {}).get("mismatches", [])]
        if details and all("ill-conditioned" in d for d in details):
            return f"ill-conditioned outputs: CPU float32 and float64 disagree too ({what})"
        return f"numerical mismatch vs CPU ({what})"
    return classify_error(result.get("error_type", ""), result.get("error", ""))


def check_class(check: dict | None) -> str | None:
    """Class of a generate/compile check (None when it passed or was not run)."""
    if not check or check.get("status") in (None, "pass"):
        return None
    if check.get("status") == "harness":
        return "harness: " + classify_error("", check.get("error", ""))
    if "error" in check:
        return classify_error(check.get("error_type", ""), check.get("error", ""))
    if check.get("tokens_equal") is False:
        return "generated tokens differ from the CPU"
    agreement = check.get("agreement") or {}
    if agreement and not agreement.get("ok", True):
        return "compiled outputs differ from the CPU"
    return "failed"
