"""ZFS pool checks that need no I/O: the ashift a pool's devices call for.

ashift is the log2 of the smallest block ZFS writes to a vdev, fixed when the vdev is
created. Below the devices' physical sector size every small write becomes a
read-modify-write inside the drive (512-byte writes to a 4 KiB-sector disk); ZFS
picks it from what the disk reports, which many SSDs under-report, hence pools
created by hand with `-o ashift=12` or 13.
"""

from __future__ import annotations

from typing import Iterable, Optional

from storpath.readers.zfs import Vdev


def expected_ashift(physical_block_sizes: Iterable[Optional[int]]) -> Optional[int]:
    """The smallest ashift that covers the largest physical sector size among the
    devices, at least 9 (512 bytes, ZFS's minimum). None when no size is known."""
    sizes = [s for s in physical_block_sizes if s]
    if not sizes:
        return None
    largest = max(sizes)
    return max(9, (largest - 1).bit_length())


def data_leaves(vdevs: Iterable[Vdev]):
    """Leaf vdevs that hold pool data (normal, special, dedup and log classes): cache
    devices are read by L2ARC with their own block sizes, spares hold nothing yet."""
    return [v for v in vdevs if v.leaf and v.vdev_class not in ("cache", "spare")]
