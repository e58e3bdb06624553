"""The probe state file: round trip, atomic replacement, broken files ignored."""

from __future__ import annotations

import os

import pytest

from storpath.probes import state
from storpath.probes.fio import FioResult

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
