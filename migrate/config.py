"""``[tool.tpu-migrate]`` in the nearest pyproject.toml: select, ignore, exclude."""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field


@dataclass
class Config:
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
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
    """Settings from the first pyproject.toml found walking up from ``start`` (empty if none)."""
    path = find_pyproject(start)
    if path is None:
        return Config()
    with open(path, "rb") as fh:
        data = tomllib.load(fh)
    section = data.get("tool", {}).get("tpu-migrate", {})
    unknown = set(section) - {"select", "ignore", "exclude"}
    if unknown:
        raise ValueError(f"{path}: unknown [tool.tpu-migrate] keys: {', '.join(sorted(unknown))}")

    def strings(key: str) -> list[str]:
        value = section.get(key, [])
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"{path}: [tool.tpu-migrate] {key} must be a list of strings")
        return value

    return Config(strings("select"), strings("ignore"), strings("exclude"), path)
