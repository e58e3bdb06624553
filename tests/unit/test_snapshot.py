"""The snapshot step: slow is not stuck. A source is blocked only when one read has been
outstanding past the server's bound (reported with that file, not started again until the
read returns); a slow one is never called blocked, and one still reading at the deadline is
"timed out" and taken up by the next snapshot. Needs respected, problems logged once."""

import logging
import os
import threading
import time

import pytest

from storpath.base import sysfs
from storpath.base.problems import Problem
from storpath.scrape.snapshot import Snapshotter, Source, needed, no_problems


def _plain(name, read, **kwargs):
    """A source whose read has no problems to report."""
    return Source(name, no_problems(read), **kwargs)


def _fifo(tmp_path):
    path = str(tmp_path / "current_link_speed")
    os.mkfifo(path)
    return path


def _unblock(path):
    """Open the FIFO for writing, which lets a blocked open for reading return."""
    fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    os.close(fd)


def test_a_blocked_source_fails_with_its_file_and_the_others_are_read(tmp_path):
    fifo = _fifo(tmp_path)
    snapshotter = Snapshotter([
        Source("pci", lambda *_: (sysfs.read_bytes(fifo), [])),
        _plain("md", lambda *_: ["md0"]),
    ], blocked_after=0.3)
    start = time.monotonic()
    first = snapshotter.take(timeout=5.0)
    assert time.monotonic() - start < 1.5  # called blocked at the bound, not at the deadline
    assert first.md == ["md0"] and first.pci is None
    assert first.failed["pci"] == (f"blocked reading {fifo} (outstanding longer than 0.3 s); "
                                   "not started again until that read returns")
    assert first.blocked == {"pci"} and not first.deadline_exceeded
    assert first.why_missing(("md", "pci")).startswith("pci: blocked reading")
    assert first.why_missing(("md",)) is None

    start = time.monotonic()
    second = snapshotter.take(timeout=5.0)  # not started again: fails at once
    assert time.monotonic() - start < 0.2
    assert second.failed["pci"] == first.failed["pci"] and second.md == ["md0"]  # the same: logged once
    assert second.blocked == {"pci"}

    _unblock(fifo)
    assert snapshotter._behind["pci"].done.wait(5)  # the blocked read returned
    os.unlink(fifo)
    with open(fifo, "w") as handle:
        handle.write("16.0 GT/s PCIe\n")
    third = snapshotter.take(timeout=1.0)  # what the blocked read returned is old: read afresh
    assert third.pci == b"16.0 GT/s PCIe\n" and not third.failed and not third.blocked
    snapshotter.close()


def _many_reads(path, count, pause):
    """A source that is slow but never stuck: `count` quick reads with a pause between."""
    def read():
        for _ in range(count):
            sysfs.read_bytes(path)
            time.sleep(pause)
        return count
    return read


def test_a_slow_source_is_never_called_blocked(tmp_path):
    path = str(tmp_path / "attr")
    with open(path, "w") as handle:
        handle.write("1\n")
    # 1.2 s of reading in all, each read quick: four times the bound, never blocked.
    snapshotter = Snapshotter([_plain("md", _many_reads(path, 60, 0.02))], blocked_after=0.3)
    snapshot = snapshotter.take(timeout=10.0)
    assert snapshot.md == 60 and not snapshot.failed and not snapshot.blocked
    assert snapshot.seconds["md"] > 1.0
    snapshotter.close()


def test_a_busy_cpu_with_no_read_outstanding_is_not_blocked():
    def spin():
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            pass
        return []
    snapshotter = Snapshotter([_plain("md", spin)], blocked_after=0.2)
    snapshot = snapshotter.take(timeout=10.0)
    assert snapshot.md == [] and not snapshot.failed and not snapshot.blocked
    snapshotter.close()


def test_a_source_still_reading_at_the_deadline_times_out_and_the_next_snapshot_takes_its_result(tmp_path):
    path = str(tmp_path / "attr")
    with open(path, "w") as handle:
        handle.write("1\n")
    calls = []

    def slow():
        calls.append(1)
        return _many_reads(path, 40, 0.02)()  # about 0.8 s

    snapshotter = Snapshotter([_plain("md", slow), _plain("ata_links", lambda *_: ["link1"])], blocked_after=5.0)
    before_first = time.time()
    first = snapshotter.take(timeout=0.3)
    assert first.md is None and first.failed["md"].startswith("timed out: still reading")
    assert "blocked" not in first.failed["md"].split(":")[0]
    assert first.deadline_exceeded and not first.blocked
    assert first.failed["ata_links"].startswith("not started")
    time.sleep(0.1)
    before_second = time.time()
    second = snapshotter.take(timeout=5.0)
    assert second.md == 40 and second.ata_links == ["link1"] and not second.failed
    assert calls == [1]  # taken up, not started again
    assert not second.deadline_exceeded
    # The md record was read from the first snapshot's time on: the second is dated by it, not by its own start.
    assert first.read_from == 0.0 and before_first <= second.read_from < before_second
    assert snapshotter.take(timeout=5.0).read_from == 0.0  # read afresh: dated by its own reading
    snapshotter.close()


def test_a_reading_left_behind_twice_is_served_with_its_age_not_as_current(tmp_path):
    # A source slower than two deadlines: the first snapshot starts it, the second waits and
    # times out again, the third finds it done, begun before the second snapshot: its data
    # is older than the interval between two scrapes. It is served (nothing fresher exists, and
    # reading afresh would never end in time) with when its reading began, and said once.
    path = str(tmp_path / "attr")
    with open(path, "w") as handle:
        handle.write("1\n")
    calls = []

    def slow():
        calls.append(1)
        return _many_reads(path, 30, 0.02)()  # about 0.6 s

    snapshotter = Snapshotter([_plain("md", slow), _plain("ata_links", lambda *_: ["link1"])], blocked_after=5.0)
    before_first = time.time()
    first = snapshotter.take(timeout=0.2)
    second = snapshotter.take(timeout=0.2)
    assert first.failed["md"].startswith("timed out") and second.failed["md"].startswith("timed out")
    assert snapshotter._behind["md"].done.wait(5)
    third = snapshotter.take(timeout=5.0)
    assert calls == [1] and third.md == 30 and not third.failed
    assert before_first <= third.read_at["md"] == third.read_from < second.taken_at
    assert "ata_links" not in third.read_at  # read within this snapshot
    old = [p for p in third.problems if p.message.startswith("a reading left behind")]
    assert len(old) == 1 and dict(old[0].fields)["source"] == "md"
    assert dict(old[0].fields)["age_seconds"] >= 0.3  # begun before the second snapshot (0.2 s each)
    fourth = snapshotter.take(timeout=5.0)
    assert fourth.read_at == {} and fourth.read_from == 0.0  # read afresh: dated by its own reading
    snapshotter.close()


def test_the_answer_exports_each_sources_age(tmp_path):
    """storpath_scrape_source_age_seconds: for a source taken up from an earlier scrape, the
    seconds since its reading began; no series for one read for this answer."""
    from storpath.base.roots import Roots
    from storpath.report.exporter import StorpathExporter

    path = str(tmp_path / "attr")
    with open(path, "w") as handle:
        handle.write("1\n")
    snapshotter = Snapshotter([_plain("md", _many_reads(path, 30, 0.02)),
                               _plain("ata_links", lambda *_: ["link1"])], blocked_after=5.0)
    exporter = StorpathExporter([], roots=Roots(sysfs=str(tmp_path), procfs=str(tmp_path), dev=""))
    exporter.snapshotter.close()
    exporter.snapshotter = snapshotter  # these two sources, one slower than two deadlines
    answers = []
    for timeout in (0.6, 0.6, 5.0, 5.0):
        families = exporter.collect(timeout)
        answers.append({s.labels["source"]: s.value for f in families
                        if f.name == "storpath_scrape_source_age_seconds" for s in f.samples})
    taken_up = [ages for ages in answers if ages]
    assert len(taken_up) == 1 and list(taken_up[0]) == ["md"] and taken_up[0]["md"] >= 0.2, answers
    assert answers[-1] == {}  # read afresh for the last answer: no age series
    snapshotter.close()


def test_a_source_whose_need_failed_is_not_read():
    calls = []

    def broken():
        raise sysfs.RootUnreadable("/sys/class/block: Permission denied")

    snapshotter = Snapshotter(needed({
        "block_listing": _plain("block_listing", broken),
        "blocks": _plain("blocks", lambda *got: calls.append(got) or [], needs=("block_listing",)),
        "md": _plain("md", lambda *_: []),
    }, ["blocks", "md"]))
    assert [s.name for s in snapshotter.sources] == ["block_listing", "blocks", "md"]
    snap = snapshotter.take(1.0)
    assert snap.failed == {"block_listing": "cannot read its root: /sys/class/block: Permission denied",
                           "blocks": "needs block_listing, which was not read"}
    assert calls == [] and snap.md == []


def test_a_source_that_raises_fails_alone():
    snapshotter = Snapshotter([_plain("md", lambda *_: 1 / 0), _plain("ata_links", lambda *_: [])])
    snap = snapshotter.take(1.0)
    assert snap.failed["md"].startswith("ZeroDivisionError") and snap.ata_links == []


def test_once_sources_are_read_once():
    calls = []
    snapshotter = Snapshotter([_plain("host", lambda *_: calls.append(1) or "host", once=True)])
    assert [snapshotter.take(1.0).host for _ in range(3)] == ["host"] * 3
    assert calls == [1]


def test_problems_are_logged_once(caplog):
    problem = Problem("PCI attribute not usable, leaving it out", (("address", "0000:01:00.0"),))
    snapshotter = Snapshotter([Source("pci", lambda *_: ([], [problem]))])
    with caplog.at_level(logging.WARNING, logger="storpath"):
        for _ in range(3):
            assert snapshotter.take(1.0).problems == (problem,)
    assert sum("PCI attribute not usable" in r.getMessage() for r in caplog.records) == 1


def test_a_source_must_name_a_snapshot_field():
    with pytest.raises(ValueError, match="not a field of Snapshot"):
        Source("pci_tree", lambda *_: [])


def test_sources_that_need_each_other_are_refused():
    with pytest.raises(ValueError, match="need each other"):
        Snapshotter([_plain("blocks", lambda *_: [], needs=("block_listing",)),
                     _plain("block_listing", lambda *_: [], needs=("blocks",))])


def test_a_blocked_read_leaves_no_thread_per_scrape(tmp_path):
    fifo = _fifo(tmp_path)
    snapshotter = Snapshotter([_plain("md", lambda *_: sysfs.read_bytes(fifo)), _plain("ata_links", lambda *_: [])],
                              blocked_after=0.1)
    before = threading.active_count()
    for _ in range(5):
        snapshotter.take(1.0)
    assert threading.active_count() <= before + 2  # the blocked reader and one fresh lane
    _unblock(fifo)
    snapshotter.close()


def test_sources_past_a_spent_deadline_are_not_started_nor_called_blocked():
    calls = []
    snapshotter = Snapshotter([_plain("md", lambda *_: calls.append("md") or []),
                               _plain("ata_links", lambda *_: calls.append("ata") or [])])
    snapshot = snapshotter.take(timeout=0.0)
    assert all("deadline was spent" in snapshot.failed[name] for name in ("md", "ata_links")), snapshot.failed
    assert calls == [] and not snapshot.blocked
    snapshot = snapshotter.take(timeout=2)
    assert not snapshot.failed and calls == ["md", "ata"]
