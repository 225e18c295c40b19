"""``tpu-migrate --write`` killed with SIGKILL at random moments, over many runs (issue 34: one run in 13 left a
``.tpu-migrate-*.tmp`` that no later run cleaned). After every kill each file is either its old or its new text,
never a mix, and nothing but tpu-migrate's own temporary files is left beside them; the next ``--write`` run
(once the temporaries are older than a live run's could be) removes them, says so, and migrates the rest."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tpu_workbench.migrate import fileio

BIN = Path(sys.executable).parent / "tpu-migrate"
OLD = "import torch\n" + "".join(f"x{i} = torch.zeros({i + 1}).cuda()\n" for i in range(20))
NEW = OLD.replace(".cuda()", '.to("tpu")')
FILES = [f"pkg{d}/m{i}.py" for d in range(4) for i in range(10)]  # 40 files: a run of ~2 s here
KILLS = 24


def _tree(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
    for name in FILES:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(OLD)


def _temps(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob(f"{fileio.TEMP_PREFIX}*") if p.name.endswith(fileio.TEMP_SUFFIX))


def _write(root: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [str(BIN), "--write", "-q", "-j", "2", str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
def test_sigkill_at_random_moments_never_leaves_a_mix_and_the_next_run_cleans_up(tmp_path):
    root = tmp_path / "src"
    _tree(root)
    started = time.monotonic()
    full = _write(root)
    _, err = full.communicate(timeout=300)
    whole = time.monotonic() - started
    assert full.returncode == 0, err
    assert all((root / n).read_text() == NEW for n in FILES) and not _temps(root)
    rng = random.Random(34)
    left_by_kill, killed_mid_write = [], 0
    for _ in range(KILLS):
        _tree(root)
        proc = _write(root)
        time.sleep(rng.uniform(0.0, 1.1 * whole))
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        texts = [(root / n).read_text() for n in FILES]
        assert all(t in (OLD, NEW) for t in texts), "a file holds neither its old nor its new text"
        strays = [p for p in root.rglob("*") if p.is_file() and p.suffix != ".py" and p not in _temps(root)]
        assert not strays, strays
        killed_mid_write += 0 < sum(t == NEW for t in texts) < len(FILES)
        temps = _temps(root)
        left_by_kill.append(len(temps))
        past = time.time() - 2 * fileio.STALE_TEMP_S  # the next run comes later than a live run's rename
        for p in temps:
            os.utime(p, (past, past))
        nxt = subprocess.run(
            [str(BIN), "--write", str(root)],  # not -q: it says what it removed
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
        )
        assert nxt.returncode == 0, nxt.stderr
        assert not _temps(root), "the next --write run left a killed run's temporary file"
        if temps:
            assert f"removed {len(temps)} temporary file(s) an interrupted run left" in nxt.stderr
        assert all((root / n).read_text() == NEW for n in FILES)
    print(
        f"\n{KILLS} kills (uniform in 0-{1.1 * whole:.1f} s; a whole run {whole:.1f} s): {killed_mid_write} "
        f"between the first and last file written; temporaries left per kill: {left_by_kill}"
    )
    assert killed_mid_write >= 3, "the kills missed the writes: the test proves nothing"
