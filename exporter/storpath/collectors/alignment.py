"""Partition and stack alignment: where each partition and each md member's data starts,
against the physical block size and optimal I/O size of the disk below, and the
kernel's own alignment verdict. From the scrape's one listing of /sys/class/block;
what cannot change while a partition exists is read once per instance.
"""

from __future__ import annotations

from storpath.analysis.alignment import judge
from storpath.collectors import Collector, register
from storpath.scrape.families import GAUGE, Family, Rows
from storpath.readers.alignment import BlockAlignment

PARTITION_START = Family(
    "storpath_block_partition_start_bytes", GAUGE,
    "Where a partition starts on its disk (start, 512-byte sectors x 512).", ("device", "disk"), "bytes",
    doc="the partition's first byte on its disk (`start` is in 512-byte sectors whatever the block size)")
ALIGNMENT_OFFSET = Family(
    "storpath_block_alignment_offset_bytes", GAUGE,
    "The kernel's alignment_offset of a partition or stacked device: 0 aligned, -1 stacked limits misaligned.",
    ("device",), "bytes",
    doc="the kernel's own verdict (`alignment_offset`): for a partition, the bytes from its start to the next "
        "boundary (0: aligned); for md and dm devices, -1 when stacking found a member misaligned")
PARTITION_MISALIGNED = Family(
    "storpath_block_partition_misaligned", GAUGE,
    "1 if the partition's start is not on a boundary of its disk (physical block or optimal I/O size), else 0.",
    ("device", "disk", "boundary"),
    doc="1 when the start is not a multiple of the boundary past the disk's alignment_offset, else 0. `boundary` "
        "is `physical_block` (only on disks whose physical block is larger than the logical one; misaligned, every "
        "write is a read-modify-write) or `optimal_io` (only when the disk states one)")
MD_DATA_OFFSET = Family(
    "storpath_md_member_data_offset_bytes", GAUGE,
    "Where md data starts on a member device (md/dev-*/offset, 512-byte sectors x 512).", ("array", "member"),
    "bytes", doc="md's data offset on the member (the 1.x superblock's), from `md/dev-<member>/offset`")
MD_DATA_MISALIGNED = Family(
    "storpath_md_member_data_misaligned", GAUGE,
    "1 if an md member's data does not start on a boundary of the disk below (partition start plus data offset).",
    ("array", "member", "boundary"),
    doc="as storpath_block_partition_misaligned, for where the array's data starts on the disk: the member "
        "partition's start plus md's data offset")

FAMILIES = (PARTITION_START, ALIGNMENT_OFFSET, PARTITION_MISALIGNED, MD_DATA_OFFSET, MD_DATA_MISALIGNED)


def alignment_rows(found: BlockAlignment) -> Rows:
    rows = Rows()
    for p in found.partitions:
        rows.add(PARTITION_START, (p.device, p.disk), p.start_bytes)
    for p in found.partitions:
        rows.add(ALIGNMENT_OFFSET, (p.device,), p.alignment_offset)
    for device, offset in found.stacked_offsets:
        rows.add(ALIGNMENT_OFFSET, (device,), offset)
    for p in found.partitions:
        for v in judge(p.start_bytes, p.disk_limits, p.disk_alignment_offset):
            rows.add(PARTITION_MISALIGNED, (p.device, p.disk, v.boundary), int(v.misaligned))
    for m in found.md_members:
        rows.add(MD_DATA_OFFSET, (m.array, m.member), m.data_offset_bytes)
    for m in found.md_members:
        for v in judge(m.data_start_bytes, m.limits):
            rows.add(MD_DATA_MISALIGNED, (m.array, m.member, v.boundary), int(v.misaligned))
    return rows


@register("alignment", default=True)
class AlignmentCollector(Collector):
    """Partitions and md data against the physical block and optimal I/O size of the disk below."""

    families = FAMILIES
    reads = ("alignment",)

    def values(self, snapshot) -> Rows:
        return alignment_rows(snapshot.alignment)
