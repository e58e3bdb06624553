"""Is data aligned to what the device asks of writes? Pure functions over the records of
storpath.readers.alignment.

A start is misaligned to a boundary (the physical block size, the optimal I/O size) when
it is not a whole number of boundaries past the device's first aligned byte (its
alignment_offset, 0 on almost every device). Misaligned to the physical block, every
write of a physical block touches two and the drive reads, modifies and writes both
(read-modify-write); misaligned to the optimal I/O size (a RAID stripe, an NVMe
indirection unit or preferred write granularity), full-stripe writes become partial ones.
"""

from __future__ import annotations

from typing import List, Optional

from storpath.base.records import datarecord
from storpath.readers.alignment import Limits

PHYSICAL_BLOCK, OPTIMAL_IO = "physical_block", "optimal_io"


@datarecord(frozen=True)
class Verdict:
    """Where one start lies against one boundary the device states: the sizes in bytes and how far off it is."""

    boundary: str  # physical_block | optimal_io
    boundary_bytes: int
    start_bytes: int
    off_by_bytes: int  # 0 when aligned

    @property
    def misaligned(self) -> bool:
        return self.off_by_bytes != 0


def off_by(start_bytes: int, boundary_bytes: int, device_offset: int = 0) -> int:
    """Bytes past the last boundary at or before `start_bytes`."""
    return (start_bytes - device_offset) % boundary_bytes


def judge(start_bytes: Optional[int], limits: Limits, device_offset: Optional[int] = 0) -> List[Verdict]:
    """One verdict per boundary the device states (the physical block size when above the
    logical one: a 512-byte drive cannot be misaligned; the optimal I/O size when stated)."""
    if start_bytes is None:
        return []
    offset = device_offset if device_offset is not None and device_offset > 0 else 0
    verdicts = []
    physical, logical = limits.physical_block_size, limits.logical_block_size or 512
    if physical and physical > logical:
        verdicts.append(Verdict(PHYSICAL_BLOCK, physical, start_bytes, off_by(start_bytes, physical, offset)))
    if limits.optimal_io_size and limits.optimal_io_size > (physical or logical):
        optimal = limits.optimal_io_size
        verdicts.append(Verdict(OPTIMAL_IO, optimal, start_bytes, off_by(start_bytes, optimal, offset)))
    return verdicts
