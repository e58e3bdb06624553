"""The probe state file: round trip, atomic replacement, broken files ignored."""

from __future__ import annotations

import os
import threading

import pytest

from storpath.scrape.probes import state
from storpath.scrape.probes.fio import FioResult
from tests.conftest import require_root

RESULT = FioResult(read_bytes_per_second=7.1e9, read_iops=6771.5, io_bytes=35_500_000_000, runtime_seconds=5.0,
                   latency_seconds=(("0.5", 0.0023), ("0.99", 0.0041), ("0.999", 0.0097)))


def _state() -> state.ProbeState:
    s = state.ProbeState()
    rec = s.record("/dev/md0", "seqread")
    rec.result, rec.last_run, rec.last_success, rec.duration, rec.runs = RESULT, 1700000000.5, 1699990000.0, 5.6, 7
    rec.failures = {"timeout": 1}
    rec.skipped = {"busy": 3}
    rec.last_error = "fio still running after 35s: killed"
    s.record("/dev/md0", "randread").skipped = {"budget": 1}
    s.io["md0"] = [(1700000000.5, 35_500_000_000)]
    s.last_attempt["/dev/md0"] = 1700000000.5
    return s


def test_round_trip():
    original = _state()
    restored = state.from_json(state.to_json(original))
    assert restored.records == original.records
    assert restored.io == original.io
    assert restored.last_attempt == original.last_attempt


def test_save_and_load(tmp_path):
    path = str(tmp_path / "sub" / "probes.json")
    assert state.save(path, _state()) is None
    assert state.load(path).records == _state().records
    assert os.listdir(tmp_path / "sub") == ["probes.json"]  # no temporary file left behind


def test_save_replaces_atomically(tmp_path):
    path = str(tmp_path / "probes.json")
    state.save(path, _state())
    inode = os.stat(path).st_ino
    empty = state.ProbeState()
    state.save(path, empty)
    assert os.stat(path).st_ino != inode  # a new file renamed over the old one, never rewritten in place
    assert state.load(path).records == {}


@pytest.mark.parametrize("text", ["", "{", "[]", '{"version": 99}', '{"version": 1, "probes": {"t": {"p": 5}}}',
                                  '{"version": 1, "io": {"md0": [[1]]}}'])
def test_broken_files_are_ignored(tmp_path, text):
    path = tmp_path / "probes.json"
    path.write_text(text)
    with pytest.raises(ValueError):
        state.from_json(text)
    assert state.load(str(path)).records == {}


def test_missing_file_is_an_empty_state(tmp_path):
    assert state.load(str(tmp_path / "none.json")).records == {}


def test_unwritable_folder_is_reported_not_raised(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    problem = state.save(str(blocker / "probes.json"), _state())
    assert problem is not None and str(blocker) in problem


@pytest.mark.parametrize("content", [b"root:x:0:0:root:/root:/bin/bash\n", b'{"version": 2}', b"\xff\xfe"])
def test_a_file_that_is_not_a_state_file_is_never_replaced(tmp_path, content):
    """Before: probes.state_file pointed at any existing file replaced it with JSON."""
    path = tmp_path / "passwd"
    path.write_bytes(content)
    problem = state.save(str(path), _state())
    assert "is not a storpath probe state file: left alone" in problem
    assert path.read_bytes() == content
    assert not [p for p in os.listdir(tmp_path) if p != "passwd"]  # no temporary file left either


def test_a_state_file_is_replaced_and_so_is_an_empty_file(tmp_path):
    path = tmp_path / "probes.json"
    path.write_bytes(b"")
    assert state.save(str(path), _state()) is None
    assert state.save(str(path), state.ProbeState()) is None
    assert state.load(str(path)).records == {}


def test_a_state_path_that_is_a_folder_or_a_link_to_a_device_is_left_alone(tmp_path):
    (tmp_path / "dir").mkdir()
    assert "not a regular file" in state.save(str(tmp_path / "dir"), _state())
    os.symlink("/dev/null", tmp_path / "link")
    assert "not a regular file" in state.save(str(tmp_path / "link"), _state())
    assert os.path.islink(tmp_path / "link")


@pytest.mark.parametrize("text", ['{"version": 1, "io": {"md0": [[1, 1e400]]}}',
                                  '{"version": 1, "probes": {"t": {"p": {"runs": 1e400}}}}'])
def test_overflowing_numbers_in_a_state_file_are_a_broken_file(text):
    """Found by the property tests: int(1e400) raised OverflowError, not the parser's ValueError."""
    with pytest.raises(ValueError, match="malformed probe state"):
        state.from_json(text)


def test_a_state_file_that_is_not_utf8_is_ignored(tmp_path):
    path = tmp_path / "probes.json"
    path.write_bytes(b'{"version": 1, "last_attempt": {"\xff": 1}}')
    assert state.load(str(path)).records == {}


def test_a_state_file_planted_as_a_link_is_neither_read_nor_written_through(tmp_path):
    """Before: load() followed the link (root's `storpath probe` read whatever it pointed at)."""
    elsewhere = tmp_path / "elsewhere.json"
    state.save(str(elsewhere), _state())
    before = elsewhere.read_bytes()
    os.symlink(elsewhere, tmp_path / "probes.json")
    assert state.load(str(tmp_path / "probes.json")).records == {}
    assert "symbolic link" in state.save(str(tmp_path / "probes.json"), state.ProbeState())
    assert elsewhere.read_bytes() == before and os.path.islink(tmp_path / "probes.json")
    os.symlink(tmp_path / "missing.json", tmp_path / "dangling.json")
    assert state.save(str(tmp_path / "dangling.json"), _state()) is not None
    assert not os.path.lexists(tmp_path / "missing.json")


def test_a_fifo_planted_as_the_state_file_does_not_block_the_start(tmp_path):
    """Before: open() of a FIFO waited for a writer forever, and the exporter never started."""
    os.mkfifo(tmp_path / "probes.json")
    loaded = []
    reader = threading.Thread(target=lambda: loaded.append(state.load(str(tmp_path / "probes.json"))), daemon=True)
    reader.start()
    reader.join(30)
    assert loaded and loaded[0].records == {}


def test_a_state_file_of_another_user_is_left_alone(tmp_path):
    require_root("giving a file to another user")
    path = tmp_path / "probes.json"
    state.save(str(path), _state())
    os.chown(path, 65534, 65534)
    assert state.load(str(path)).records == {}
    assert "owned by uid 65534" in state.save(str(path), state.ProbeState())
