"""Reading and writing source files without changing what the migration did not touch.

Encoding (PEP 263 cookie), BOM and line endings survive a round trip. A file is written only if it is
still the file that was read, and only if it may be written: a read-only file (no write bit, or no
permission) is left as it is and reported. The new text replaces the old atomically (a temporary file in
the same folder, then ``os.replace``), so a killed run leaves every file either old or new, keeping
mode, owner and group. Where a rename cannot keep the file what it was (other hard links to it, an
owner or group this process cannot give a new file, extended attributes or ACLs, a folder it may not
create files in), the new text is written into the file itself instead: the links, owner and attributes
stay. That write is not atomic, so the new text is first saved beside it (``.tpu-migrate-copy-NAME-*.tmp``) and
removed once the file is complete; a run killed mid-write leaves that copy behind, and the next run
reports it (:func:`find_leftovers`; temporaries of atomic writes it removes).
"""

from __future__ import annotations

import errno
import io
import os
import stat
import tempfile
import time
import tokenize
from collections.abc import Iterable
from dataclasses import dataclass

BOM = b"\xef\xbb\xbf"
TEMP_PREFIX, TEMP_SUFFIX = ".tpu-migrate-", ".tmp"
#: The safety copy of an in-place write names its file: ``.tpu-migrate-copy-train.py-k3j2.tmp``.
COPY_PREFIX = TEMP_PREFIX + "copy-"
#: A temporary file older than this is a leftover of a killed run, not one a live run is about to rename.
STALE_TEMP_S = 60.0
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


@dataclass
class SourceFile:
    text: str
    encoding: str
    bom: bool


@dataclass(frozen=True)
class Stamp:
    """What a file was when it was read: a write goes ahead only if it still is."""

    dev: int
    ino: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, st: os.stat_result) -> Stamp:
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class NotWritable(Exception):
    """The file must not or cannot be written; it was left as it was (the message says why)."""


def decode(data: bytes) -> SourceFile:
    """Bytes -> text, remembering the encoding and BOM. Line endings are kept as they are."""
    bom = data.startswith(BOM)
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError:
        encoding = "utf-8"
    if encoding == "utf-8-sig":
        encoding = "utf-8"
    raw = data[len(BOM) :] if bom else data
    return SourceFile(raw.decode(encoding), encoding, bom)


def encode(src: SourceFile, text: str) -> bytes:
    return (BOM if src.bom else b"") + text.encode(src.encoding)


def read_file(path: str) -> tuple[bytes, Stamp]:
    """The bytes of ``path`` and its stamp (taken from the open file, so both describe the same file)."""
    with open(path, "rb") as fh:
        st = os.fstat(fh.fileno())
        return fh.read(), Stamp.of(st)


def why_not_writable(path: str) -> str | None:
    """Why ``path`` must not be written (read-only, or no permission), or None when it may be."""
    st = os.stat(path)
    if not st.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
        return "the file is read-only; left untouched (make it writable to migrate it)"
    if not os.access(path, os.W_OK):
        return "no permission to write the file; left untouched"
    return None


def write_back(path: str, data: bytes, stamp: Stamp | None = None) -> str:
    """Write ``data`` over ``path`` (a real file, not a symlink) keeping what the file is; returns a note
    for the user ("" when there is nothing to say). Raises :class:`NotWritable` and leaves the file as it
    was when it is read-only, changed since ``stamp``, or cannot be written."""
    reason = why_not_writable(path)
    if reason:
        raise NotWritable(reason)
    st = os.stat(path)
    if stamp is not None and Stamp.of(st) != stamp:
        raise NotWritable("the file changed on disk while it was being migrated; left as it is now")
    keep = _why_in_place(path, st)
    try:
        if keep is None and write_atomic(path, data, st):
            return ""
        write_in_place(path, data)
    except OSError as exc:
        raise NotWritable(f"cannot write the file ({exc.strerror or exc}); left as it was") from exc
    if keep is None:
        keep = "a new file here could not get its owner and group"
    return f"written in place, not replaced: {keep}"


def _why_in_place(path: str, st: os.stat_result) -> str | None:
    """Why a rename would change what the file is (so it must be written in place), or None."""
    if st.st_nlink > 1:
        return f"it has {st.st_nlink} hard links, all kept"
    try:
        if os.listxattr(path):
            return "it has extended attributes or ACLs, all kept"
    except (AttributeError, OSError):  # no xattr support here (macOS, some file systems)
        pass
    if not os.access(os.path.dirname(os.path.abspath(path)), os.W_OK | os.X_OK):
        return "no permission to create a file in its folder"
    return None


def write_atomic(path: str, data: bytes, st: os.stat_result | None = None) -> bool:
    """Replace ``path`` with ``data`` atomically, keeping its mode, owner and group. Returns False (and
    changes nothing) when the new file cannot be given the old one's owner and group."""
    folder = os.path.dirname(os.path.abspath(path))
    if st is None:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            st = None
    fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=TEMP_SUFFIX, dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if st is not None:
                mine = os.fstat(fh.fileno())
                if (mine.st_uid, mine.st_gid) != (st.st_uid, st.st_gid):
                    try:
                        os.fchown(fh.fileno(), st.st_uid, st.st_gid)
                    except PermissionError:
                        os.unlink(tmp)
                        return False
                os.fchmod(fh.fileno(), stat.S_IMODE(st.st_mode))  # after chown, which clears set-id bits
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        return True
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_in_place(path: str, data: bytes) -> None:
    """Overwrite the file itself (same inode: hard links, owner and attributes stay), with a copy of the
    new text saved beside it until the write is complete (when the folder allows it)."""
    copy = None
    try:
        fd, copy = tempfile.mkstemp(
            prefix=f"{COPY_PREFIX}{os.path.basename(path)}-",
            suffix=TEMP_SUFFIX,
            dir=os.path.dirname(os.path.abspath(path)),
        )
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        if copy is not None:
            os.unlink(copy)  # a partial copy (disk full) is no copy
        if exc.errno in _DISK_FULL:
            raise  # no room for the copy: no room to write the file safely either
        copy = None  # a read-only folder: no safety copy, the write below is still a single pass
    started = False
    try:
        fd = os.open(path, os.O_WRONLY)
        try:
            if len(data) > os.fstat(fd).st_size and hasattr(os, "posix_fallocate"):
                try:
                    os.posix_fallocate(fd, 0, len(data))  # fail now (disk full), before any byte changes
                except OSError as exc:
                    if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):  # the file system cannot: go on
                        raise
            view = memoryview(data)
            done = 0
            started = True
            while done < len(data):
                done += os.pwrite(fd, view[done:], done)
            os.ftruncate(fd, len(data))
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        if copy is not None and not started:
            os.unlink(copy)  # nothing changed: no copy to keep
        raise
    if copy is not None:
        os.unlink(copy)


@dataclass
class Leftovers:
    """Temporary files of an earlier run that was killed (see :func:`find_leftovers`): those removed, and
    those kept with the reason."""

    removed: list[str]
    kept: list[tuple[str, str]]


def find_leftovers(folders: Iterable[str], *, remove: bool) -> Leftovers:
    """``.tpu-migrate-*.tmp`` files a killed run left in ``folders`` (older than :data:`STALE_TEMP_S`, so
    not a live run's). A temporary of an atomic write was never renamed over its file, which is therefore
    the old one: it is removed when ``remove`` (``--write``). A safety copy of an in-place write holds the
    complete new text of a file that may be half-written: it is kept and reported, never removed."""
    out = Leftovers([], [])
    now = time.time()
    for folder in sorted(set(folders)):
        try:
            names = [n for n in os.listdir(folder) if n.startswith(TEMP_PREFIX) and n.endswith(TEMP_SUFFIX)]
        except OSError:
            continue
        for name in sorted(names):
            path = os.path.join(folder, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode) or now - st.st_mtime < STALE_TEMP_S:
                continue
            if name.startswith(COPY_PREFIX):
                target = name[len(COPY_PREFIX) :].rsplit("-", 1)[0]
                out.kept.append(
                    (
                        path,
                        f"the new text of {target} from an interrupted in-place write; {target} may be "
                        "incomplete: compare the two, then remove this copy",
                    )
                )
                continue
            if not remove:
                out.kept.append((path, "a temporary file of a killed run (--write removes it)"))
                continue
            try:
                os.unlink(path)
                out.removed.append(path)
            except OSError as exc:
                out.kept.append((path, f"a temporary file of a killed run; cannot remove it: {exc.strerror}"))
    return out
