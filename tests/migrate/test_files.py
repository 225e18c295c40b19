"""Discovery (.gitignore, venvs, symlinks) and file safety (encoding, BOM, endings, mode, atomicity)."""

from __future__ import annotations

import os
import stat

import pytest

from tpu_workbench.migrate import markdown_report, migrate_paths
from tpu_workbench.migrate.discover import discover
from tpu_workbench.migrate.fileio import write_atomic

SRC = "import torch\nx = torch.zeros(1, device='cuda')\n"


def _names(files, root):
    return sorted(os.path.relpath(f, root) for f in files)


def test_discovery_skips_ignored_and_tooling_folders(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "hook.py").write_text(SRC)
    (tmp_path / ".gitignore").write_text("generated/\n*_pb2.py\n")
    for d in ("generated", "venv_custom", "build", "site-packages", "node_modules", "pkg", ".venv"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "m.py").write_text(SRC)
    (tmp_path / "venv_custom" / "pyvenv.cfg").write_text("home = /usr\n")
    (tmp_path / "pkg" / "x_pb2.py").write_text(SRC)
    (tmp_path / "pkg" / ".gitignore").write_text("local.py\n")
    (tmp_path / "pkg" / "local.py").write_text(SRC)
    (tmp_path / "pkg" / "nb.ipynb").write_text("{}")
    (tmp_path / "pkg" / "notes.txt").write_text(SRC)
    assert _names(discover([str(tmp_path)]), tmp_path) == ["pkg/m.py", "pkg/nb.ipynb"]


def test_symlinks_out_of_the_tree_are_not_followed(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "o.py").write_text(SRC)
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "in.py").write_text(SRC)
    os.symlink(outside, tree / "linkdir")
    os.symlink(outside / "o.py", tree / "link.py")
    os.symlink(tree / "in.py", tree / "alias.py")
    assert _names(discover([str(tree)]), tree) == ["in.py"]
    migrate_paths([str(tree)], write=True)
    assert (outside / "o.py").read_text() == SRC


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            b"\xef\xbb\xbfimport torch\r\nx = torch.zeros(1, device='cuda')\r\n",
            b"\xef\xbb\xbfimport torch\r\nx = torch.zeros(1, device='tpu')\r\n",
        ),
        (
            "# -*- coding: latin-1 -*-\nimport torch\ns = 'caf\xe9'\nd = 'cuda'\n".encode("latin-1"),
            "# -*- coding: latin-1 -*-\nimport torch\ns = 'caf\xe9'\nd = 'tpu'\n".encode("latin-1"),
        ),
        (b"import torch\nd = 'cuda'", b"import torch\nd = 'tpu'"),
    ],
)
def test_encoding_bom_line_endings_preserved(tmp_path, data, expected):
    f = tmp_path / "m.py"
    f.write_bytes(data)
    os.chmod(f, 0o750)
    res = migrate_paths([str(f)], write=True)
    assert res.files[0].status == "changed"
    assert f.read_bytes() == expected
    assert stat.S_IMODE(os.stat(f).st_mode) == 0o750


def test_unchanged_and_skipped_files_are_not_rewritten(tmp_path):
    a = tmp_path / "a.py"
    a.write_text("x = 1\n")
    b = tmp_path / "b.py"
    b.write_text("# mentions cuda only in a comment\ncudnn_version = 1\n")
    before = (os.stat(a).st_mtime_ns, os.stat(b).st_mtime_ns)
    res = migrate_paths([str(tmp_path)], write=True)
    assert {f.path.rsplit("/", 1)[1]: f.status for f in res.files} == {"a.py": "skipped", "b.py": "unchanged"}
    assert (os.stat(a).st_mtime_ns, os.stat(b).st_mtime_ns) == before


def test_atomic_write_leaves_old_file_on_failure(tmp_path, monkeypatch):
    f = tmp_path / "m.py"
    f.write_text("old\n")

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        write_atomic(str(f), b"new\n")
    assert f.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["m.py"]  # no temp file left behind


def test_undecodable_file_is_unparsable_not_a_crash(tmp_path):
    f = tmp_path / "m.py"
    f.write_bytes(b"x = '\xff\xfe cuda'\n")
    res = migrate_paths([str(f)], write=True)
    assert res.files[0].status == "unparsable"
    assert f.read_bytes() == b"x = '\xff\xfe cuda'\n"


def test_run_result_api(tmp_path):
    (tmp_path / "a.py").write_text(SRC)
    (tmp_path / "f.py").write_text("import torch\nm = torch.cuda.mem_get_info()\n")
    res = migrate_paths([str(tmp_path)])
    assert 0 < res.converted_percent < 100
    assert "tpu-migrate report" in markdown_report(res)
    a = next(f for f in res.files if f.path.endswith("a.py"))
    assert a.status == "changed" and a.diff.startswith("---")
