"""Block devices and where they hang in the device tree, from /sys/class/block.

/sys/class/block/<dev> links to the device's directory under /sys/devices; walking up
that path finds the controller (nvme0, host0) and the nearest PCI function, which is
the join key from a block device to its PCIe link and NUMA node. Partitions (they
have a `partition` attribute) are left out: they share their disk's path.

With native NVMe multipath (CONFIG_NVME_MULTIPATH, on in Debian's and most distros'
kernels) the namespace's block device lives under
/sys/devices/virtual/nvme-subsystem/nvme-subsysN/nvmeXnY and the per-controller paths
are hidden disks nvmeXcZnY below each controller; the namespace's `multipath/`
directory links to them, and the first path gives the controller and PCI function.
The hidden path disks themselves are left out.
"""

from __future__ import annotations

import os
import re
import threading
from typing import List, Optional, Tuple

from storpath.base.records import datarecord
from storpath.base.parse import parse_int
from storpath.readers.instances import InstanceCache
from storpath.readers.pci import PCI_ADDRESS
from storpath.base.roots import Roots
from storpath.base.sysfs import list_dir, list_entries, read_attr

# What this reader reads (storpath capture takes these; see commands/capture.py).
CAPTURE_SYSFS = (
    "class/block/*",
    "class/block/*/partition",
    "class/block/*/multipath/*",
    "class/block/*/queue/physical_block_size",
)

_CONTROLLER = re.compile(r"^(nvme\d+|host\d+|ata\d+)$")
_NVME_PATH_DISK = re.compile(r"^nvme\d+c\d+n\d+$")
_SCSI_DEVICE = re.compile(r"^\d+:\d+:\d+:\d+$")


@datarecord(frozen=True)
class BlockDevice:
    """One block device (no partition) and where it hangs: its controller and nearest PCI function."""

    name: str  # kernel name: nvme0n1, sda, md0
    real_path: str
    pci_address: Optional[str]  # nearest PCI function above, None for virtual devices
    controller: Optional[str]  # nvme0, host2 ...
    virtual: bool  # md, dm, loop, zram: under /sys/devices/virtual


def locate(name: str, real_path: str) -> BlockDevice:
    parts = real_path.split(os.sep)
    pci_address = controller = None
    for part in parts:
        if PCI_ADDRESS.match(part):
            pci_address = part
        elif _CONTROLLER.match(part) and controller is None:
            controller = part
    return BlockDevice(name=name, real_path=real_path, pci_address=pci_address, controller=controller,
                       virtual="virtual" in parts)


class BlockReader:
    """Reads the block devices, remembering where each device instance sits: the place
    of a device in the tree cannot change while it exists, and resolving it (realpath)
    is the expensive part. A device instance is known by the inode of its class symlink."""

    def __init__(self, roots: Roots):
        self.roots = roots
        self._places = InstanceCache()
        self._lock = threading.Lock()

    def list(self) -> List[Tuple[str, int]]:
        """(name, inode) of every entry of /sys/class/block; RootUnreadable when it cannot be read."""
        return list_entries(self.roots.sys("class", "block"), self.roots.sysfs)

    def read(self, listing: Optional[List[Tuple[str, int]]] = None) -> List[BlockDevice]:
        """Every block device but partitions and hidden NVMe path disks; `listing` is a
        listing of /sys/class/block made this scrape (the snapshot's block_listing), else one is made."""
        base = self.roots.sys("class", "block")
        entries = [e for e in (self.list() if listing is None else listing) if not _NVME_PATH_DISK.match(e[0])]
        with self._lock:
            found = self._places.refresh(base, entries, _locate_path)
        return [device for _, _, device in found if device is not None]


_SCSI_TARGET = re.compile(r"^target\d+:\d+:\d+$")


def scsi_devices_below(end_device_dir: str) -> List[str]:
    """The SCSI devices' directories (targetH:C:T/H:C:T:L) below a SAS end device's
    directory, in order."""
    return [os.path.join(end_device_dir, target, lun)
            for target in sorted(list_dir(end_device_dir)) if _SCSI_TARGET.match(target)
            for lun in sorted(list_dir(os.path.join(end_device_dir, target))) if _SCSI_DEVICE.match(lun)]


def scsi_target_disks(target_dir: str) -> List[str]:
    """Block devices of the SCSI devices (H:C:T:L) below a SCSI target's directory
    (targetH:C:T), as found below an ATA port's SCSI host or a SAS end device."""
    found = []
    for lun in list_dir(target_dir):
        if _SCSI_DEVICE.match(lun):
            found.extend(list_dir(os.path.join(target_dir, lun, "block")))
    return found


def physical_block_size(block_dir: str) -> Optional[int]:
    """queue/physical_block_size of a block device's directory, in bytes
    (Documentation/ABI/stable/sysfs-block); None when absent or not a positive number.
    The one reader of it: NVMe namespaces and ZFS leaves alike."""
    return parse_int(read_attr(os.path.join(block_dir, "queue", "physical_block_size")), minimum=1)


def device_physical_block_size(roots: Roots, device: str) -> Optional[int]:
    """physical_block_size of the block device named `device` (a zpool leaf: nvme0n1, sda)."""
    if "/" in device or device in (".", ".."):
        return None
    return physical_block_size(roots.sys("class", "block", device))


def _locate_path(name: str, path: str) -> Optional[BlockDevice]:
    """None for partitions and devices that vanish while being resolved."""
    if os.path.exists(os.path.join(path, "partition")):
        return None
    try:
        real = os.path.realpath(path)
    except OSError:
        return None
    if not os.path.isdir(real):
        return None
    if "nvme-subsystem" in real:
        paths = list_dir(os.path.join(path, "multipath"))
        if paths:
            first = os.path.realpath(os.path.join(path, "multipath", paths[0]))
            located = locate(name, first)
            return BlockDevice(name=name, real_path=real, pci_address=located.pci_address,
                               controller=located.controller, virtual=False)
    return locate(name, real)
