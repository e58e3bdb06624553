"""Where data starts on a block device: partitions, md members, and the kernel's own
alignment verdict of every block device (Documentation/ABI/stable/sysfs-block).

- /sys/class/block/<part>/start: the partition's first sector on its disk, in 512-byte
  sectors whatever the logical block size; `partition` is its number. The disk is the
  partition directory's parent.
- <disk>/queue/physical_block_size, queue/optimal_io_size (bytes; optimal 0: none
  stated): the boundaries a write must respect to avoid read-modify-write.
- alignment_offset (bytes) of a disk: how far its first naturally aligned sector is from
  sector 0 (512e disks with a jumper for old partitioning report 3584). Of a partition:
  the kernel's own verdict, queue_limit_alignment_offset() of its start: 0 when aligned,
  the bytes to the next boundary when not. Of a stacked device (md, dm): -1 when stacking
  the members' limits found them misaligned (blk_stack_limits sets `misaligned`).
- /sys/block/mdX/md/dev-<member>/offset: where an md member's data starts on it, in
  512-byte sectors (the 1.x superblock's data offset); its `block` links to the member.
dm tables are not in sysfs: for dm devices only the kernel's alignment_offset is known.

What cannot change while a device instance exists (a partition's start and disk, the
disk's limits) is read once per instance (the inode of its class symlink).
"""

from __future__ import annotations

import os
import re
import threading
from typing import List, Optional, Tuple

from storpath.base.records import datarecord
from storpath.base.parse import parse_int
from storpath.readers.instances import InstanceCache
from storpath.base.roots import Roots
from storpath.base.sysfs import list_dir, list_entries, read_attr

SECTOR = 512

# What this reader reads (storpath capture takes these).
CAPTURE_SYSFS = (
    "class/block/*/{start,partition,alignment_offset}",
    "class/block/*/queue/{physical_block_size,optimal_io_size,logical_block_size}",
    "class/block/*/../queue/{physical_block_size,optimal_io_size,logical_block_size}",
    "class/block/*/../alignment_offset",
    "class/block/md*/md/dev-*/offset",
    "class/block/md*/md/dev-*/block",
    "class/block/md*/md/dev-*/block/{start,partition}",
)

_NVME_PATH_DISK = re.compile(r"^nvme\d+c\d+n\d+$")
_STACKED = re.compile(r"^(md\d+|md_.+|dm-\d+)$")


@datarecord(frozen=True)
class Limits:
    """What a device asks of writes, bytes."""

    logical_block_size: Optional[int]
    physical_block_size: Optional[int]
    optimal_io_size: Optional[int]  # None when 0: no preference stated


@datarecord(frozen=True)
class Partition:
    """One partition: its disk, where it starts, the disk's limits and both alignment offsets."""

    device: str  # sda1, nvme0n1p2
    disk: str  # sda, nvme0n1
    start_bytes: Optional[int]
    disk_limits: Limits
    disk_alignment_offset: Optional[int]  # the disk's own, bytes
    alignment_offset: Optional[int]  # the kernel's verdict on this partition, bytes


@datarecord(frozen=True)
class MdMember:
    """One member of an md array: its disk, where md's data starts on that disk, its limits."""

    array: str  # md0
    member: str  # sda1
    disk: str  # the whole disk under the member
    data_start_bytes: Optional[int]  # the member's start on its disk plus md's data offset
    data_offset_bytes: Optional[int]
    limits: Limits


@datarecord(frozen=True)
class BlockAlignment:
    """One read of the host's alignment: its partitions, md members and stacked devices' offsets."""

    partitions: Tuple[Partition, ...]
    md_members: Tuple[MdMember, ...]
    stacked_offsets: Tuple[Tuple[str, Optional[int]], ...]  # (md/dm device, alignment_offset)


def parse_alignment_offset(text: Optional[str]) -> Optional[int]:
    """alignment_offset: bytes, or -1 (stacked limits misaligned)."""
    return parse_int(text, minimum=-1)


def parse_sectors(text: Optional[str]) -> Optional[int]:
    """A count of 512-byte sectors (start, md offset) in bytes."""
    value = parse_int(text, minimum=0)
    return None if value is None else value * SECTOR


def read_limits(block_dir: str) -> Limits:
    def size(name: str) -> Optional[int]:
        return parse_int(read_attr(os.path.join(block_dir, "queue", name)), minimum=1)

    return Limits(size("logical_block_size"), size("physical_block_size"), size("optimal_io_size"))


def _partition(name: str, path: str) -> Optional[Partition]:
    """A partition's place, read once per instance; None for anything else."""
    if read_attr(os.path.join(path, "partition")) is None:
        return None
    real = os.path.realpath(path)
    disk_dir = os.path.dirname(real)
    return Partition(
        device=name, disk=os.path.basename(disk_dir), start_bytes=parse_sectors(read_attr(os.path.join(real, "start"))),
        disk_limits=read_limits(disk_dir),
        disk_alignment_offset=parse_alignment_offset(read_attr(os.path.join(disk_dir, "alignment_offset"))),
        alignment_offset=parse_alignment_offset(read_attr(os.path.join(real, "alignment_offset"))))


def _md_members(array: str, path: str) -> Tuple[MdMember, ...]:
    members = []
    md_dir = os.path.join(path, "md")
    for entry in list_dir(md_dir):
        if not entry.startswith("dev-"):
            continue
        member_dir = os.path.realpath(os.path.join(md_dir, entry, "block"))
        offset = parse_sectors(read_attr(os.path.join(md_dir, entry, "offset")))
        start: Optional[int] = 0
        disk_dir = member_dir
        if read_attr(os.path.join(member_dir, "partition")) is not None:
            start = parse_sectors(read_attr(os.path.join(member_dir, "start")))
            disk_dir = os.path.dirname(member_dir)
        data_start = start + offset if start is not None and offset is not None else None
        members.append(MdMember(array=array, member=entry[4:], disk=os.path.basename(disk_dir),
                                data_start_bytes=data_start, data_offset_bytes=offset,
                                limits=read_limits(disk_dir)))
    return tuple(members)


class AlignmentReader:
    """Partitions and md members from one listing of /sys/class/block (the scrape's)."""

    def __init__(self, roots: Roots):
        self.roots = roots
        self._partitions = InstanceCache()
        self._lock = threading.Lock()

    def read(self, listing: Optional[List[Tuple[str, int]]] = None) -> BlockAlignment:
        base = self.roots.sys("class", "block")
        if listing is None:
            listing = list_entries(base, self.roots.sysfs)
        entries = [e for e in listing if not _NVME_PATH_DISK.match(e[0])]
        with self._lock:
            found = self._partitions.refresh(base, entries, _partition)
        partitions = tuple(p for _, _, p in found if p is not None)
        members: List[MdMember] = []
        stacked = []
        for name, _ in entries:
            if not _STACKED.match(name):
                continue
            path = os.path.join(base, name)
            stacked.append((name, parse_alignment_offset(read_attr(os.path.join(path, "alignment_offset")))))
            if name.startswith("md"):
                members.extend(_md_members(name, path))
        return BlockAlignment(partitions, tuple(members), tuple(stacked))
