"""The scrape benchmark measures the tree the current code builds, and leaves no logs behind."""

from __future__ import annotations

import os

import pytest

from benchmarks import scrape


def test_host_tree_is_built_once_and_again_when_the_code_that_built_it_differs(tmp_path):
    root = str(tmp_path / "host-ports-2")
    devices = scrape.host_tree(root, 2, "ports")
    assert devices == 4 and len(os.listdir(os.path.join(root, "sys/bus/pci/devices"))) == 4
    marker = os.path.join(root, "left-by-this-build")
    open(marker, "w").close()
    assert scrape.host_tree(root, 2, "ports") == 4 and os.path.exists(marker)  # reused
    with open(os.path.join(root, scrape.STAMP), "w") as stamp:
        stamp.write("another builder\n")
    assert scrape.host_tree(root, 2, "ports") == 4 and not os.path.exists(marker)  # built again
    os.remove(os.path.join(root, scrape.STAMP))  # a tree from before the stamp
    open(marker, "w").close()
    assert scrape.host_tree(root, 2, "ports") == 4 and not os.path.exists(marker)


def test_a_directory_that_is_no_host_tree_is_left_alone(tmp_path):
    root = tmp_path / "host-ports-2"
    root.mkdir()
    (root / "notes.txt").write_text("mine")
    with pytest.raises(SystemExit, match="no host tree"):
        scrape.host_tree(str(root), 2, "ports")
    assert (root / "notes.txt").read_text() == "mine"


def test_logs_are_removed_after_a_good_measurement_and_kept_after_a_failed_one(tmp_path):
    with scrape._logs(str(tmp_path)) as logs:
        open(os.path.join(logs, "storpath.log"), "w").close()
    assert not os.path.exists(logs)
    with pytest.raises(RuntimeError):
        with scrape._logs(str(tmp_path)) as logs:
            raise RuntimeError("exporter did not answer")
    assert os.path.isdir(logs)


def test_the_bare_reads_are_the_files_every_scrape_reads(tmp_path):
    """The ratio's floor reads what a scrape reads of the host's devices, no file more or fewer:
    every file a scrape of `storpath serve` opens below sys/devices (after the first, which
    also reads what never changes), and each PCI device's `driver` link (read, not opened). A
    read added to the scrape path without its bare twin fails here."""
    from tests.architecture.recorder import recording
    from tests.architecture.served import Served

    root = str(tmp_path / "host-ports-4")
    devices = scrape.host_tree(root, 4, "ports")
    with Served(root, "--log.level=error") as served:
        served.scrape()
        with recording() as events:
            served.scrape()
    opened = sorted(e.target for e in events if e.event == "open" and "/sys/devices/" in e.target
                    and not e.thread.startswith("task-"))  # a background pass may run meanwhile
    # The local drives' controller states are the nvme-controller-states task's, between scrapes.
    assert not any("/state'" in target for target in opened)
    _, files = scrape.bare_reads(root, runs=1)
    assert len(opened) + devices == files, opened
