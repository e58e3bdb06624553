"""scripts/install's `storpath` link: a file or a link of another program at
$STORPATH_BIN_DIR/storpath is refused and left as it is; a storpath checkout's link is replaced.
The script runs from a copy of scripts/ whose setup-system and setup-python only record that
they ran (the apt and venv work is test_readme's), so a refusal is seen to come before them."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from .conftest import REPO


def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    shutil.copy2(REPO / "scripts" / "install", root / "scripts" / "install")
    for name in ("setup-system", "setup-python"):
        stub = root / "scripts" / name
        stub.write_text(f'#!/bin/sh\necho {name} >> "$(dirname "$0")/../ran"\n')
        stub.chmod(0o755)
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / ".venv" / "bin" / "storpath").write_text("#!/bin/sh\n")
    return root


def install(root: Path, bin_dir: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, STORPATH_BIN_DIR=str(bin_dir), PATH=f"{bin_dir}:{os.environ['PATH']}")
    return subprocess.run([str(root / "scripts" / "install")], env=env, capture_output=True, text=True, timeout=60)


def test_a_link_to_another_program_is_refused_and_kept(tmp_path):
    root, bin_dir = checkout(tmp_path), tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "storpath").symlink_to("/opt/other/bin/storpath")
    done = install(root, bin_dir)
    assert done.returncode == 1, done
    assert "links to /opt/other/bin/storpath" in done.stderr and "left as it is" in done.stderr
    assert os.readlink(bin_dir / "storpath") == "/opt/other/bin/storpath"
    assert not (root / "ran").exists()  # refused before anything was set up


def test_a_file_is_refused_and_kept(tmp_path):
    root, bin_dir = checkout(tmp_path), tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "storpath").write_text("other\n")
    done = install(root, bin_dir)
    assert done.returncode == 1 and "is not a link" in done.stderr, done
    assert (bin_dir / "storpath").read_text() == "other\n"


def test_a_checkouts_link_is_replaced_by_this_checkouts(tmp_path):
    root, bin_dir = checkout(tmp_path), tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "storpath").symlink_to("/home/old/storpath/.venv/bin/storpath")
    done = install(root, bin_dir)
    assert done.returncode == 0, done
    assert os.readlink(bin_dir / "storpath") == str(root / ".venv" / "bin" / "storpath")
    assert (root / "ran").read_text().split() == ["setup-system", "setup-python"]
    # and again, over its own link
    assert install(root, bin_dir).returncode == 0
