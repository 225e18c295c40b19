"""tpu-migrate --write under injected faults (issue 34): a SIGKILL between the temporary file and its rename,
a full disk, a rename across file systems, a report that cannot be written, a symlink out of its folder.
Each fault leaves the target byte-identical (or migrated, never half-written), no partial temporary file,
and a summary that names the files not written."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time

import pytest

from tpu_workbench.migrate import fileio
from tpu_workbench.migrate.cli import EXIT_NOT_MIGRATED, EXIT_OK, EXIT_USAGE, main

OLD = "import torch\nx = torch.zeros(1, device='cuda')\n"
NEW = "import torch\nx = torch.zeros(1, device='tpu')\n"


def _temps(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(fileio.TEMP_PREFIX))


def _age(path, seconds: float = 2 * fileio.STALE_TEMP_S) -> None:
    past = time.time() - seconds
    os.utime(path, (past, past))


KILL_AT_RENAME = """
import os, signal, sys
from tpu_workbench.migrate.cli import main
os.replace = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)  # killed between temp file and rename
sys.exit(main(["--write", "-j", "1", sys.argv[1]]))
"""


def test_sigkill_during_write_leaves_a_temp_the_next_run_removes(tmp_path, capsys):
    (tmp_path / "a.py").write_text(OLD)
    proc = subprocess.run(
        [sys.executable, "-c", KILL_AT_RENAME, str(tmp_path)], capture_output=True, timeout=120
    )
    assert proc.returncode == -9
    assert (tmp_path / "a.py").read_text() == OLD  # old, not half-written
    left = _temps(tmp_path)
    assert len(left) == 1  # what a SIGKILL leaves; the next run must deal with it
    assert main([str(tmp_path)]) == EXIT_OK  # so young it could be a live run's: left alone
    assert "temporary" not in capsys.readouterr().err and _temps(tmp_path) == left
    _age(tmp_path / left[0])
    assert main([str(tmp_path)]) == EXIT_OK  # without --write: reported, not removed
    assert "a temporary file of a killed run (--write removes it)" in capsys.readouterr().err
    assert _temps(tmp_path) == left
    assert main(["--write", str(tmp_path)]) == EXIT_OK
    err = capsys.readouterr().err
    assert "removed 1 temporary file(s) an interrupted run left" in err
    assert _temps(tmp_path) == [] and (tmp_path / "a.py").read_text() == NEW


def test_a_live_runs_fresh_temp_is_left_alone(tmp_path, capsys):
    (tmp_path / "a.py").write_text(OLD)
    fresh = tmp_path / f"{fileio.TEMP_PREFIX}abc{fileio.TEMP_SUFFIX}"
    fresh.write_text("another run's")
    assert main(["--write", str(tmp_path)]) == EXIT_OK
    assert fresh.exists() and "temporary" not in capsys.readouterr().err


def test_an_in_place_safety_copy_is_reported_never_removed(tmp_path, capsys):
    (tmp_path / "a.py").write_text(OLD)
    copy = tmp_path / f"{fileio.COPY_PREFIX}a.py-x1y2{fileio.TEMP_SUFFIX}"
    copy.write_text(NEW)
    _age(copy)
    assert main(["--write", str(tmp_path)]) == EXIT_OK
    err = capsys.readouterr().err
    assert "the new text of a.py from an interrupted in-place write" in err
    assert copy.read_text() == NEW


def _disk_full(*_a, **_k):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize("hard_link", [False, True], ids=["atomic", "hard-linked"])
def test_disk_full_leaves_the_target_identical_and_the_summary_says_so(
    tmp_path, monkeypatch, capsys, hard_link
):
    f = tmp_path / "a.py"
    f.write_text(OLD)
    if hard_link:
        os.link(f, tmp_path / "b.py.bak")  # written in place (the link kept), with a safety copy first
    before = f.read_bytes()
    monkeypatch.setattr(fileio.os, "fsync", _disk_full)  # the first fsync: the temp file or the copy
    assert main(["--write", str(f)]) == EXIT_NOT_MIGRATED
    out, err = capsys.readouterr()
    assert f.read_bytes() == before
    assert _temps(tmp_path) == []  # no partial temp file or copy
    assert "No space left on device" in out and "1 not writable" in err and "100.0% converted" not in err


def test_disk_full_when_growing_a_hard_linked_file_in_place(tmp_path, monkeypatch, capsys):
    f = tmp_path / "a.py"
    f.write_text("import torch\nx = torch.zeros(1).cuda()\n")  # grows: .to("tpu")
    os.link(f, tmp_path / "link.py.bak")
    before = f.read_bytes()
    monkeypatch.setattr(fileio.os, "posix_fallocate", _disk_full, raising=False)
    assert main(["--write", str(f)]) == EXIT_NOT_MIGRATED
    assert f.read_bytes() == before and _temps(tmp_path) == []
    assert "1 not writable" in capsys.readouterr().err


def test_rename_across_file_systems_fails_cleanly(tmp_path, monkeypatch, capsys):
    f = tmp_path / "a.py"
    f.write_text(OLD)

    def exdev(*_a, **_k):
        raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))

    monkeypatch.setattr(fileio.os, "replace", exdev)
    assert main(["--write", str(f)]) == EXIT_NOT_MIGRATED
    assert f.read_text() == OLD and _temps(tmp_path) == []
    assert "Invalid cross-device link" in capsys.readouterr().out


@pytest.mark.parametrize(
    "report, why",
    [
        ("nodir/r.md", "does not exist"),
        ("afile/r.md", "does not exist"),
        (".", "is a folder"),
        ("/dev/null", "is not a regular file"),
    ],
)
def test_a_report_that_cannot_be_written_is_refused_before_any_file_is(
    tmp_path, monkeypatch, capsys, report, why
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text(OLD)
    (tmp_path / "afile").write_text("x")
    with pytest.raises(SystemExit) as exc:
        main(["--write", "--report", report, "a.py"])
    assert exc.value.code == EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--report" in err[0] and why in err[0]
    assert (tmp_path / "a.py").read_text() == OLD


def test_a_report_write_failing_at_the_end_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text(OLD)

    real = fileio.write_atomic

    def full_for_the_report(path, data, st=None):
        if str(path).endswith(".md"):
            _disk_full()
        return real(path, data, st)

    monkeypatch.setattr(fileio, "write_atomic", full_for_the_report)
    assert main(["--write", "--report", "r.md", "a.py"]) == EXIT_NOT_MIGRATED
    assert "the report r.md was not written" in capsys.readouterr().err
    assert not (tmp_path / "r.md").exists()


def test_a_named_symlink_out_of_its_folder_is_not_written_through(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # inside the current folder, outside the link's own folder
    (tmp_path / "src").mkdir()
    (tmp_path / "other.py").write_text(OLD)
    os.symlink("../other.py", tmp_path / "src" / "l.py")
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "x.py").write_text(OLD)
    os.symlink("../real", tmp_path / "src" / "sub")
    for named in ("src/l.py", "src/sub/x.py"):
        assert main(["--write", named]) == EXIT_USAGE
        assert "not followed" in capsys.readouterr().err
    assert (tmp_path / "other.py").read_text() == OLD and (tmp_path / "real" / "x.py").read_text() == OLD
    assert main(["--write", "src"]) == EXIT_OK  # the walk does not follow it either
    assert (tmp_path / "other.py").read_text() == OLD
    assert main(["--write", "--follow-symlinks", "src/l.py"]) == EXIT_OK
    assert (tmp_path / "other.py").read_text() == NEW
