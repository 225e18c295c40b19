"""``[tool.tpu-migrate]`` in the nearest pyproject.toml: rules, excluded paths and per-file limits."""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field

from .limits import parse_memory, parse_seconds

#: Every key the section may hold, with what it takes (for the message about an unknown key).
KEYS = {
    "select": "rule codes or prefixes",
    "ignore": "rule codes or prefixes",
    "exclude": "gitignore-style patterns",
    "max-file-seconds": "per-file time limit (300, '10m'; 0: none)",
    "max-file-memory": "per-file memory limit ('4G', '512M'; 0: none)",
}


@dataclass
class Config:
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    #: Per-file limits as written (None: not set here); parsed by migrate.limits.
    max_file_seconds: str | None = None
    max_file_memory: str | None = None
    source: str | None = None


def find_pyproject(start: str) -> str | None:
    folder = os.path.abspath(start if os.path.isdir(start) else os.path.dirname(start) or ".")
    while True:
        candidate = os.path.join(folder, "pyproject.toml")
        if os.path.isfile(candidate):
            return candidate
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def load_config(start: str = ".") -> Config:
    """Settings from the first pyproject.toml found walking up from ``start`` (empty if none).

    Raises ValueError (naming the file, the key and what it takes) for anything it cannot use.
    """
    path = find_pyproject(start)
    if path is None:
        return Config()
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML: {exc}") from exc
    section = data.get("tool", {}).get("tpu-migrate", {})
    if not isinstance(section, dict):
        raise ValueError(f"{path}: [tool.tpu-migrate] must be a table")
    unknown = set(section) - set(KEYS)
    if unknown:
        valid = "; ".join(f"{k} ({what})" for k, what in KEYS.items())
        raise ValueError(
            f"{path}: unknown [tool.tpu-migrate] keys: {', '.join(sorted(unknown))}; valid: {valid}"
        )

    def strings(key: str) -> list[str]:
        value = section.get(key, [])
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"{path}: [tool.tpu-migrate] {key} must be a list of strings")
        return value

    def limit(key: str, parse) -> str | None:
        if key not in section:
            return None
        value = section[key]
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise ValueError(f"{path}: [tool.tpu-migrate] {key} must be a number or a string: {KEYS[key]}")
        try:
            parse(value)
        except ValueError as exc:
            raise ValueError(f"{path}: [tool.tpu-migrate] {key}: {exc}") from exc
        return str(value)

    return Config(
        strings("select"),
        strings("ignore"),
        strings("exclude"),
        limit("max-file-seconds", parse_seconds),
        limit("max-file-memory", parse_memory),
        path,
    )
