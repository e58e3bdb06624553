"""storpath.base.atomicfile.replace_file: the new file or the old one, and never a temporary
file left behind, whatever ends the write."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from storpath.base import atomicfile
from tests.conftest import ROOT


def _names(folder):
    return sorted(os.listdir(folder))


def test_writes_bytes_and_leaves_only_the_file(tmp_path):
    path = tmp_path / "out.json"
    atomicfile.replace_file(str(path), b"new\n", mode=0o600)
    assert path.read_bytes() == b"new\n"
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert _names(tmp_path) == ["out.json"]


def test_writes_through_a_function_and_replaces_the_old_file(tmp_path):
    path = tmp_path / "out.bin"
    path.write_bytes(b"old")
    atomicfile.replace_file(str(path), lambda handle: handle.write(b"x" * 100_000))
    assert path.read_bytes() == b"x" * 100_000
    assert _names(tmp_path) == ["out.bin"]


@pytest.mark.parametrize("error", [RuntimeError("broken mid-write"), KeyboardInterrupt(),
                                   OSError(28, "No space left on device")])
def test_a_failure_mid_write_removes_the_temporary_file_and_keeps_the_old_one(tmp_path, error):
    path = tmp_path / "out.bin"
    path.write_bytes(b"old")
    seen = []

    def write(handle):
        handle.write(b"half" * 10_000)
        handle.flush()
        seen.extend(n for n in os.listdir(tmp_path) if n != "out.bin")  # the temporary file was there
        raise error

    with pytest.raises(type(error)):
        atomicfile.replace_file(str(path), write)
    assert seen, "the write went to a temporary file"
    assert _names(tmp_path) == ["out.bin"]
    assert path.read_bytes() == b"old"


def test_a_file_size_limit_removes_the_temporary_file(tmp_path):
    """EFBIG: RLIMIT_FSIZE below the file's size (Python ignores SIGXFSZ, so the write fails)."""
    script = (
        "import resource, sys\n"
        "from storpath.base import atomicfile\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))\n"
        "try:\n"
        "    atomicfile.replace_file(sys.argv[1], b'x' * 65536)\n"
        "except OSError as exc:\n"
        "    print(exc.errno)\n")
    path = tmp_path / "big.bin"
    result = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=60,
                            env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "exporter")))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(__import__("errno").EFBIG)
    assert _names(tmp_path) == []


def test_a_failed_rename_removes_the_temporary_file(tmp_path):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "inside").write_text("")  # a non-empty folder cannot be renamed over
    with pytest.raises(OSError):
        atomicfile.replace_file(str(tmp_path / "taken"), b"data")
    assert _names(tmp_path) == ["taken"]


def test_relative_to_a_folder_fd(tmp_path):
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        atomicfile.replace_file("state.json", b"{}", dir_fd=fd)
        with pytest.raises(RuntimeError):
            atomicfile.replace_file("state.json", lambda handle: (_ for _ in ()).throw(RuntimeError()), dir_fd=fd)
    finally:
        os.close(fd)
    assert _names(tmp_path) == ["state.json"]
    assert (tmp_path / "state.json").read_bytes() == b"{}"


def test_a_link_at_the_destination_is_replaced_not_followed(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    os.symlink(victim, tmp_path / "out")
    atomicfile.replace_file(str(tmp_path / "out"), b"new")
    assert victim.read_text() == "keep"
    assert not os.path.islink(tmp_path / "out") and (tmp_path / "out").read_bytes() == b"new"


def test_a_fixed_temporary_name_reclaims_a_leftover_and_never_follows_a_link(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    os.symlink(victim, tmp_path / "probe.dat.tmp")  # a leftover, or a planted link
    atomicfile.replace_file(str(tmp_path / "probe.dat"), b"data", temp_name="probe.dat.tmp")
    assert victim.read_text() == "keep"
    assert _names(tmp_path) == ["probe.dat", "victim"]
