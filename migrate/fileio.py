"""Reading and writing source files without changing what the migration did not touch.

Encoding (PEP 263 cookie), BOM and line endings survive a round trip; writes are atomic (a temporary
file in the same folder, then ``os.replace``) and keep the file mode, so a killed run leaves every file
either old or new.
"""

from __future__ import annotations

import io
import os
import stat
import tempfile
import tokenize
from dataclasses import dataclass

BOM = b"\xef\xbb\xbf"


@dataclass
class SourceFile:
    text: str
    encoding: str
    bom: bool


def decode(data: bytes) -> SourceFile:
    """Bytes -> text, remembering the encoding and BOM. Line endings are kept as they are."""
    bom = data.startswith(BOM)
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError:
        encoding = "utf-8"
    if encoding == "utf-8-sig":
        encoding = "utf-8"
    raw = data[len(BOM):] if bom else data
    return SourceFile(raw.decode(encoding), encoding, bom)


def encode(src: SourceFile, text: str) -> bytes:
    return (BOM if src.bom else b"") + text.encode(src.encoding)


def write_atomic(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically, keeping its permission bits."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        mode = None
    fd, tmp = tempfile.mkstemp(prefix=".tpu-migrate-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
