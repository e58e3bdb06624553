"""Where a probe's reads land: the kernel block device behind a target, an md array's
members, how busy a device is (/proc/diskstats), and the file target itself.

Sources:
- /sys/dev/block/<major>:<minor> links to the block device of a device number
  (Documentation/ABI/testing/sysfs-dev); a device node's st_rdev, and a file's st_dev
  (its filesystem's device), give that number. A partition's directory lies inside
  its disk's, and has a `partition` attribute.
- md arrays from the snapshot (its `md` part, storpath.readers.md's records): an array's
  level and the members a probe of it locks; never read here.
- /proc/diskstats (Documentation/admin-guide/iostats.rst): after major, minor and name,
  field 10 is "time spent doing I/Os" in ms (io_ticks), which grows at 1000 per
  second while at least one request is in flight.
"""

from __future__ import annotations

import logging
import os
import stat
import time
from typing import Callable, Dict, List, Optional, Tuple

from storpath.base.records import datarecord
from storpath.base import atomicfile, log
from storpath.analysis.throughput import MdShape
from storpath.base.parse import parse_int
from storpath.scrape.probes.targets import pseudo_filesystem_problem
from storpath.base.roots import Roots
from storpath.base.sysfs import WHOLE_FILE, read_attr

LOG = log.get("probes")


# ---- /proc/diskstats ----------------------------------------------------------------

@datarecord(frozen=True)
class DiskStat:
    """One device's line of /proc/diskstats: the sectors it read and its time with I/O in flight."""
    name: str
    sectors_read: int  # 512-byte sectors, whatever the device's block size
    io_ticks_ms: int  # time with at least one request in flight


def parse_diskstats(text: str) -> Dict[str, DiskStat]:
    """Lines of /proc/diskstats by device name; malformed lines are left out."""
    stats: Dict[str, DiskStat] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 14:
            continue
        # The kernel's counters are unsigned: the strict parser takes ASCII digits only, no sign.
        sectors, ticks = parse_int(fields[5], minimum=0), parse_int(fields[12], minimum=0)
        if sectors is None or ticks is None:
            continue
        stats[fields[2]] = DiskStat(name=fields[2], sectors_read=sectors, io_ticks_ms=ticks)
    return stats


def read_diskstats(roots: Roots) -> Optional[Dict[str, DiskStat]]:
    text = read_attr(roots.proc("diskstats"), WHOLE_FILE)
    return parse_diskstats(text) if text is not None else None


def busy_ratio(before: DiskStat, after: DiskStat, seconds: float) -> Optional[float]:
    """Fraction of `seconds` the device had I/O in flight; None when the counter went back
    (the device was replaced meanwhile) or no time passed."""
    if seconds <= 0 or after.io_ticks_ms < before.io_ticks_ms:
        return None
    return (after.io_ticks_ms - before.io_ticks_ms) / (seconds * 1000.0)


def sample_busy(roots: Roots, devices: List[str], seconds: float,
                sleep: Callable[[float], None] = time.sleep) -> Dict[str, Optional[float]]:
    """Busy fraction of each device over `seconds`; None for a device diskstats lacks."""
    start = time.monotonic()
    before = read_diskstats(roots)
    sleep(seconds)
    after = read_diskstats(roots)
    elapsed = max(time.monotonic() - start, seconds)
    result: Dict[str, Optional[float]] = {}
    for name in devices:
        if before is None or after is None or name not in before or name not in after:
            result[name] = None
        else:
            result[name] = busy_ratio(before[name], after[name], elapsed)
    return result


# ---- block devices ------------------------------------------------------------------

def device_of_number(roots: Roots, major: int, minor: int) -> Optional[str]:
    """Kernel name of the block device with this number, via /sys/dev/block/M:m."""
    path = roots.sys("dev", "block", f"{major}:{minor}")
    if not os.path.lexists(path):
        return None
    return os.path.basename(os.path.realpath(path))


def whole_disk(roots: Roots, name: str) -> str:
    """nvme0n1p2 -> nvme0n1, sda1 -> sda; a disk is its own."""
    path = os.path.realpath(roots.sys("class", "block", name))
    if os.path.exists(os.path.join(path, "partition")):
        return os.path.basename(os.path.dirname(path))
    return name


def md_shape(array) -> Optional[MdShape]:
    """Level and member disks of an md array (a readers.md.MdArray), None when it has no
    level. Members that are partitions are given as their disks (the PCIe path is the
    disk's); spares and failed members carry no reads and are left out."""
    if array is None or not array.level:
        return None
    members = tuple(m.disk for m in array.members if m.slot is not None and "faulty" not in m.state)
    return MdShape(name=array.name, level=array.level, members=members)


def md_shapes(arrays) -> Dict[str, MdShape]:
    """name -> shape, of a snapshot's md arrays."""
    return {a.name: shape for a in arrays for shape in (md_shape(a),) if shape is not None}


@datarecord(frozen=True)
class Resolved:
    """What a target is on this machine right now."""
    fio_path: str  # what fio opens
    device: Optional[str]  # kernel name the reads go to (nvme0n1p2, md0, loop3), None when unknown (ZFS, tmpfs)
    disk: Optional[str]  # whole disk or array of `device`
    problem: Optional[str] = None  # why the target cannot be probed now


def _host_path(roots: Roots, path: str) -> str:
    """A /dev path of the config, under --path.dev (so a fixture machine can be replayed)."""
    if path.startswith("/dev/") and roots.dev and roots.dev != "/dev":
        return roots.devpath(os.path.relpath(path, "/dev"))
    return path


def resolve(roots: Roots, kind: str, path: str, device_name: Optional[str] = None) -> Resolved:
    fio_path = _host_path(roots, path)
    if kind == "device" and not roots.devices:
        return Resolved(fio_path, device_name, device_name,
                        problem=f"{path} not opened: --path.sysfs replays another machine and --path.dev is not given")
    if kind == "device":
        try:
            info = os.stat(fio_path)
        except OSError as exc:
            return Resolved(fio_path, device_name, device_name, problem=f"cannot open {path}: {exc.strerror}")
        if not stat.S_ISBLK(info.st_mode):
            return Resolved(fio_path, device_name, device_name, problem=f"{path} is not a block device")
        name = device_name or device_of_number(roots, os.major(info.st_rdev), os.minor(info.st_rdev))
        if name is None:
            name = os.path.basename(os.path.realpath(fio_path))
        return Resolved(fio_path, name, whole_disk(roots, name))
    # A file target: the filesystem's device (or the folder's, before the file exists).
    # Its folders may have become symlinks since the config was loaded: judge the real path.
    problem = pseudo_filesystem_problem(fio_path)
    if problem:
        return Resolved(fio_path, device_name, device_name, problem=problem)
    probe = fio_path if os.path.lexists(fio_path) else os.path.dirname(fio_path)
    try:
        info = os.lstat(probe)
    except OSError as exc:
        return Resolved(fio_path, device_name, device_name, problem=f"cannot reach {probe}: {exc.strerror}")
    if probe == fio_path and not stat.S_ISREG(info.st_mode):
        return Resolved(fio_path, device_name, device_name,
                        problem=f"{path} is not a regular file (a file target is never a device node or a link)")
    if device_name:
        return Resolved(fio_path, device_name, whole_disk(roots, device_name))
    # Anonymous device numbers (major 0: ZFS, btrfs subvolumes, tmpfs, overlay) have no block device.
    name = device_of_number(roots, os.major(info.st_dev), os.minor(info.st_dev)) if os.major(info.st_dev) else None
    return Resolved(fio_path, name, whole_disk(roots, name) if name else None)


# ---- the file target ----------------------------------------------------------------

_CHUNK = 1 << 20
# A file target is only created while the filesystem keeps this share of its space free.
MIN_FREE_SHARE = 0.10


def ensure_file(path: str, size: int) -> Tuple[int, Optional[str]]:
    """Create the file target once, filled with random (incompressible) data so that a
    compressing filesystem (ZFS with compression=lz4) cannot answer from a few blocks.
    An existing regular file is reused as it is. Returns (size, problem)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        return 0, f"cannot reach {path}: {exc.strerror}"
    if info is not None:
        if not stat.S_ISREG(info.st_mode):
            return 0, f"{path} is not a regular file (a file target is never a device node or a link)"
        if info.st_size == 0:
            return 0, f"{path} is empty"
        return info.st_size, None
    try:
        fs = os.statvfs(os.path.dirname(path) or ".")
    except OSError as exc:
        return 0, f"cannot reach {os.path.dirname(path)}: {exc.strerror}"
    free, total = fs.f_bavail * fs.f_frsize, fs.f_blocks * fs.f_frsize
    if free - size < total * MIN_FREE_SHARE:
        return 0, (f"not creating {path} ({size} bytes): the filesystem has {free} bytes free and must keep "
                   f"{MIN_FREE_SHARE:.0%} of its {total} bytes free (lower file_size)")
    log.kv(LOG, logging.INFO, "creating probe file", path=path, size=size)

    def fill(handle) -> None:
        written = 0
        while written < size:
            written += handle.write(os.urandom(min(_CHUNK, size - written)))

    try:
        # A fixed temporary name: what an interrupted creation left is reused, not piled up.
        atomicfile.replace_file(path, fill, mode=0o600, temp_name=f"{os.path.basename(path)}.storpath-tmp")
    except OSError as exc:
        return 0, f"cannot create {path}: {exc.strerror or exc}"
    return size, None
