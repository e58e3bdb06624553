"""Where a probe's reads land: /proc/diskstats, target resolution, the file target."""

from __future__ import annotations

import os
import stat

import pytest

from storpath.scrape.probes import devices
from storpath.base.roots import Roots

# Format of Documentation/admin-guide/iostats.rst (kernel 5.5+: 17 fields after the name).
DISKSTATS = """\
 259       0 nvme0n1 913245 0 150371234 181245 3213 12 403120 2311 0 234567 183556 0 0 0 0 12 45
 259       1 nvme0n1p1 913000 0 150370000 181200 3213 12 403120 2311 0 234500 183511 0 0 0 0 0 0
   9       0 md0 20 0 160 0 0 0 0 0 0 0 0 0 0 0 0 0 0
   8       0 sda 1 2 3
 bad line
   7       0 loop0 0 0 0 0 0 0 0 0 0 x 0 0 0 0 0 0 0
"""


def test_parse_diskstats():
    stats = devices.parse_diskstats(DISKSTATS)
    assert sorted(stats) == ["md0", "nvme0n1", "nvme0n1p1"]  # short and malformed lines left out
    assert stats["nvme0n1"].io_ticks_ms == 234567
    assert stats["nvme0n1"].sectors_read == 150371234


def test_busy_ratio():
    before = devices.DiskStat("nvme0n1", 0, 1000)
    assert devices.busy_ratio(before, devices.DiskStat("nvme0n1", 0, 1700), 1.0) == pytest.approx(0.7)
    assert devices.busy_ratio(before, devices.DiskStat("nvme0n1", 0, 10), 1.0) is None  # counter went back
    assert devices.busy_ratio(before, before, 0.0) is None


def test_sample_busy_reads_diskstats_twice(tmp_path):
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "diskstats").write_text(DISKSTATS)

    def one_busy_second(seconds):
        # What the kernel does meanwhile: nvme0n1 had I/O in flight for 800 of 1000 ms.
        (proc / "diskstats").write_text(DISKSTATS.replace(" 234567 ", f" {234567 + 800} "))

    ratios = devices.sample_busy(Roots(procfs=str(proc)), ["nvme0n1", "md0", "sdz"], 1.0, one_busy_second)
    assert ratios["nvme0n1"] == pytest.approx(0.8, abs=0.05)
    assert ratios["md0"] == 0.0
    assert ratios["sdz"] is None


def test_resolve_a_file_on_a_real_filesystem(tmp_path):
    target = tmp_path / "probe.dat"
    resolved = devices.resolve(Roots(), "file", str(target))
    assert resolved.problem is None and resolved.fio_path == str(target)
    number = os.stat(tmp_path).st_dev
    if os.major(number) == 0:  # tmpfs, overlay: no block device, and that is no error
        assert resolved.device is None
    else:
        assert resolved.device == os.path.basename(os.path.realpath(f"/sys/dev/block/{os.major(number)}:"
                                                                    f"{os.minor(number)}"))


def test_resolve_refuses_a_device_node_or_link_as_file(tmp_path):
    link = tmp_path / "probe.dat"
    link.symlink_to("/dev/null")
    resolved = devices.resolve(Roots(), "file", str(link))
    assert "(really /dev/null) is under /dev" in resolved.problem
    elsewhere = tmp_path / "elsewhere.dat"
    elsewhere.write_bytes(b"x")
    other = tmp_path / "other.dat"
    other.symlink_to(elsewhere)
    assert "not a regular file" in devices.resolve(Roots(), "file", str(other)).problem


def test_resolve_a_device_target_that_is_not_a_block_device(tmp_path):
    assert "not a block device" in devices.resolve(Roots(), "device", "/dev/null").problem
    assert "cannot open" in devices.resolve(Roots(), "device", "/dev/no-such-disk").problem


def test_dev_paths_follow_path_dev(tmp_path):
    resolved = devices.resolve(Roots(dev=str(tmp_path)), "device", "/dev/nvme0n1")
    assert resolved.fio_path == str(tmp_path / "nvme0n1")


def test_ensure_file_creates_once_with_incompressible_data(tmp_path):
    path = str(tmp_path / "probe.dat")
    size, problem = devices.ensure_file(path, 3 << 20)
    assert (size, problem) == (3 << 20, None)
    with open(path, "rb") as handle:
        data = handle.read()
    assert len(data) == 3 << 20
    assert len(set(data[:65536])) > 200  # random bytes, not zeros a compressing filesystem would fold away
    before = os.stat(path)
    assert devices.ensure_file(path, 8 << 20) == (3 << 20, None)  # reused as it is
    assert os.stat(path).st_mtime_ns == before.st_mtime_ns
    assert stat.S_IMODE(before.st_mode) == 0o600
    assert sorted(os.listdir(tmp_path)) == ["probe.dat"]


def test_ensure_file_refuses_what_is_not_a_regular_file(tmp_path):
    link = tmp_path / "probe.dat"
    link.symlink_to("/dev/null")
    size, problem = devices.ensure_file(str(link), 1 << 20)
    assert size == 0 and "not a regular file" in problem
    empty = tmp_path / "empty.dat"
    empty.write_bytes(b"")
    assert "empty" in devices.ensure_file(str(empty), 1 << 20)[1]
    assert "cannot reach" in devices.ensure_file(str(tmp_path / "no" / "dir" / "x"), 1 << 20)[1]
