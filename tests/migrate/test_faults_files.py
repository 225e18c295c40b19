"""--write under file-system faults, as a user meets them: read-only files, other owners, hard links,
extended attributes, a file changed during the run, symlinks named on the command line."""

from __future__ import annotations

import os
import stat
import subprocess

import pytest

from tpu_workbench.migrate import migrate_paths
from tpu_workbench.migrate.cli import EXIT_NOT_MIGRATED, EXIT_OK, EXIT_USAGE, main
from tpu_workbench.migrate.one_file import apply, compute_file
from tpu_workbench.migrate.selection import resolve

OLD = "import torch\nx = torch.zeros(1, device='cuda')\n"
NEW = "import torch\nx = torch.zeros(1, device='tpu')\n"
ROOT = os.geteuid() == 0 if hasattr(os, "geteuid") else False


def test_read_only_file_is_reported_and_left_byte_for_byte(tmp_path, capsys):
    f = tmp_path / "ro.py"
    f.write_text(OLD)
    f.chmod(0o444)
    before = os.stat(f)
    assert main(["--write", str(f)]) == EXIT_NOT_MIGRATED
    err_out = capsys.readouterr()
    assert "not written: the file is read-only" in err_out.out
    assert "1 not writable" in err_out.err
    after = os.stat(f)
    assert f.read_text() == OLD
    assert (after.st_ino, after.st_mode, after.st_mtime_ns) == (
        before.st_ino,
        before.st_mode,
        before.st_mtime_ns,
    )
    assert main([str(f)]) == EXIT_OK  # without --write a read-only file is just shown


def test_hard_link_is_kept_and_both_names_see_the_new_text(tmp_path, capsys):
    f = tmp_path / "a.py"
    f.write_text(OLD)
    link = tmp_path / "b.py"
    os.link(f, link)
    ino = os.stat(f).st_ino
    assert main(["--write", str(f)]) == EXIT_OK
    assert "written in place, not replaced: it has 2 hard links, all kept" in capsys.readouterr().out
    assert os.stat(f).st_ino == os.stat(link).st_ino == ino and os.stat(f).st_nlink == 2
    assert link.read_text() == NEW
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tpu-migrate-")] == []
    f.write_text(OLD)  # both names in one run: one file on disk, migrated once
    res = migrate_paths([str(tmp_path)], write=True)
    assert [r.status for r in res.files] == ["changed"] and link.read_text() == NEW


@pytest.mark.skipif(not ROOT, reason="giving a file another owner needs root")
def test_owner_group_and_mode_are_kept(tmp_path):
    f = tmp_path / "a.py"
    f.write_text(OLD)
    os.chown(f, 4321, 4322)
    f.chmod(0o640)
    assert migrate_paths([str(f)], write=True).files[0].status == "changed"
    st = os.stat(f)
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (4321, 4322, 0o640)
    assert f.read_text() == NEW


def test_extended_attributes_are_kept(tmp_path):
    f = tmp_path / "a.py"
    f.write_text(OLD)
    try:
        os.setxattr(f, "user.origin", b"vendor")
    except (OSError, AttributeError):
        pytest.skip("no user extended attributes on this file system")
    res = migrate_paths([str(f)], write=True).files[0]
    assert res.status == "changed" and "extended attributes" in res.note
    assert os.getxattr(f, "user.origin") == b"vendor" and f.read_text() == NEW


def test_file_changed_during_the_run_is_not_overwritten(tmp_path):
    f = tmp_path / "a.py"
    f.write_text(OLD)
    computed = compute_file(str(f), write=True, rules=resolve())
    f.write_text(OLD + "y = 1  # edited meanwhile\n")
    res = apply(computed)
    assert res.status == "not-writable" and "changed on disk" in res.error
    assert f.read_text().endswith("# edited meanwhile\n")


def test_named_symlink_out_of_the_tree_is_refused_unless_asked(tmp_path, monkeypatch, capsys):
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "o.py"
    target.write_text(OLD)
    tree = tmp_path / "tree"
    tree.mkdir()
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    os.symlink(target, tree / "link.py")
    os.symlink(outside, tree / "linkdir")
    monkeypatch.chdir(tree)
    for named in ("link.py", "linkdir", "linkdir/o.py"):
        assert main(["--write", named]) == EXIT_USAGE
        assert "outside" in capsys.readouterr().err and target.read_text() == OLD
    assert main(["--write", "--follow-symlinks", "link.py"]) == EXIT_OK
    assert target.read_text() == NEW and os.path.islink(tree / "link.py")


def test_named_symlink_inside_the_tree_is_written_through(tmp_path, monkeypatch):
    (tmp_path / "real.py").write_text(OLD)
    os.symlink(tmp_path / "real.py", tmp_path / "alias.py")
    monkeypatch.chdir(tmp_path)
    assert main(["--write", "alias.py"]) == EXIT_OK
    assert (tmp_path / "real.py").read_text() == NEW and os.path.islink(tmp_path / "alias.py")
