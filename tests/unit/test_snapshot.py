"""The snapshot step: each source under its share of the deadline, a blocked one reported
with the file it blocks on and not started again, its needs respected, problems logged once."""

import logging
import os
import threading
import time

import pytest

from storpath import sysfs
from storpath.problems import Problem
from storpath.snapshot import Snapshotter, Source, needed


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
        Source("pci", lambda _: (sysfs.read_bytes(fifo), []), with_problems=True),
        Source("md", lambda _: ["md0"]),
    ])
    start = time.monotonic()
    first = snapshotter.take(timeout=1.0)
    assert time.monotonic() - start < 1.5
    assert first.md == ["md0"] and first.pci is None
    assert first.failed["pci"] == f"blocked reading {fifo}; not started again until that read returns"
    assert first.why_missing(("md", "pci")).startswith("pci: blocked reading")
    assert first.why_missing(("md",)) is None

    second = snapshotter.take(timeout=1.0)  # not started again: fails at once
    assert second.failed["pci"] == first.failed["pci"] and second.md == ["md0"]  # the same: logged once
    assert "pci" in snapshotter.blocked()

    _unblock(fifo)
    deadline = time.monotonic() + 5
    while snapshotter.blocked() and time.monotonic() < deadline:
        time.sleep(0.01)
    os.unlink(fifo)
    with open(fifo, "w") as handle:
        handle.write("16.0 GT/s PCIe\n")
    third = snapshotter.take(timeout=1.0)
    assert third.pci == b"16.0 GT/s PCIe\n" and not third.failed
    snapshotter.close()


def test_a_source_whose_need_failed_is_not_read():
    calls = []

    def broken(_):
        raise sysfs.RootUnreadable("/sys/class/block: Permission denied")

    snapshotter = Snapshotter(needed({
        "block_listing": Source("block_listing", broken),
        "blocks": Source("blocks", lambda got: calls.append(got) or [], needs=("block_listing",)),
        "md": Source("md", lambda _: []),
    }, ["blocks", "md"]))
    assert [s.name for s in snapshotter.sources] == ["block_listing", "blocks", "md"]
    snap = snapshotter.take(1.0)
    assert snap.failed == {"block_listing": "cannot read its root: /sys/class/block: Permission denied",
                           "blocks": "needs block_listing, which was not read"}
    assert calls == [] and snap.md == []


def test_a_source_that_raises_fails_alone():
    snapshotter = Snapshotter([Source("md", lambda _: 1 / 0), Source("ata_links", lambda _: [])])
    snap = snapshotter.take(1.0)
    assert snap.failed["md"].startswith("ZeroDivisionError") and snap.ata_links == []


def test_once_sources_are_read_once():
    calls = []
    snapshotter = Snapshotter([Source("host", lambda _: calls.append(1) or "host", once=True)])
    assert [snapshotter.take(1.0).host for _ in range(3)] == ["host"] * 3
    assert calls == [1]


def test_problems_are_logged_once(caplog):
    problem = Problem("PCI attribute not usable, leaving it out", (("address", "0000:01:00.0"),))
    snapshotter = Snapshotter([Source("pci", lambda _: ([], [problem]), with_problems=True)])
    with caplog.at_level(logging.WARNING, logger="storpath"):
        for _ in range(3):
            assert snapshotter.take(1.0).problems == (problem,)
    assert sum("PCI attribute not usable" in r.getMessage() for r in caplog.records) == 1


def test_a_source_must_name_a_snapshot_field():
    with pytest.raises(ValueError, match="not a field of Snapshot"):
        Source("pci_tree", lambda _: [])


def test_sources_that_need_each_other_are_refused():
    with pytest.raises(ValueError, match="need each other"):
        Snapshotter([Source("blocks", lambda _: [], needs=("block_listing",)),
                     Source("block_listing", lambda _: [], needs=("blocks",))])


def test_a_blocked_read_leaves_no_thread_per_scrape(tmp_path):
    fifo = _fifo(tmp_path)
    snapshotter = Snapshotter([Source("md", lambda _: sysfs.read_bytes(fifo)), Source("ata_links", lambda _: [])])
    before = threading.active_count()
    for _ in range(5):
        snapshotter.take(0.3)
    assert threading.active_count() <= before + 2  # the blocked reader and one fresh lane
    _unblock(fifo)
    snapshotter.close()


def test_sources_past_a_spent_deadline_are_not_started_nor_called_blocked():
    calls = []
    snapshotter = Snapshotter([Source("md", lambda _: calls.append("md") or []),
                               Source("ata_links", lambda _: calls.append("ata") or [])])
    snapshot = snapshotter.take(timeout=0.0)
    assert all("deadline was spent" in snapshot.failed[name] for name in ("md", "ata_links")), snapshot.failed
    assert calls == [] and snapshotter.blocked() == {}
    snapshot = snapshotter.take(timeout=2)
    assert not snapshot.failed and calls == ["md", "ata"]
