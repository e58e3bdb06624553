"""SCSI disks as paths: each sd device's WWID and model, so a dual-ported drive
reached through two HBAs or two expanders is known as one drive seen twice.

drivers/scsi/scsi_sysfs.c gives every SCSI device (Documentation/ABI/testing/sysfs-bus-scsi):

    /sys/class/block/sdX/device/wwid      "naa.5000c500a1b2c3d4": the logical unit's designator from
                                          VPD page 0x83, the same through every port of the drive
    /sys/class/block/sdX/device/vendor    "SEAGATE " (space-padded)
    /sys/class/block/sdX/device/model     "ST4000NM0025    "
    /sys/class/block/sdX/device/sas_address   the target port's SAS address (mpt3sas, SAS drives):
                                          differs per port of a dual-ported drive

None of these changes while the sd device exists: each is read once per device instance
(readers.instances.InstanceCache), as the PCI reader does with a device's identity. A
device whose wwid could not be read when it appeared keeps None until it is re-created.

A drive without VPD page 0x83 (many SATA drives behind an HBA give a t10 name made of
vendor, model and serial, which is unique too) or without a `wwid` attribute (old
kernels) cannot be grouped and is left out.
"""

from __future__ import annotations

import os
import re
from typing import List, Optional, Tuple

from storpath.base.records import datarecord
from storpath.base.parse import natural_key
from storpath.base.problems import Problem
from storpath.base.roots import Roots
from storpath.readers.instances import InstanceCache
from storpath.base.sysfs import list_entries, read_attr_why

CAPTURE_SYSFS = ("class/block/sd*/device/{wwid,vendor,model,sas_address}",)

_SD = re.compile(r"^sd[a-z]+$", re.ASCII)


@datarecord(frozen=True)
class ScsiDisk:
    """One sd device as a path: the drive's WWID, vendor and model, and the target port it reaches."""

    name: str  # sdX
    wwid: Optional[str]
    vendor: Optional[str]
    model: Optional[str]
    sas_address: Optional[str]  # of the target port this sd device reaches


class ScsiPathReader:
    def __init__(self, roots: Roots):
        self.roots = roots
        self._instances = InstanceCache()

    def read(self) -> Tuple[List[ScsiDisk], List[Problem]]:
        problems: List[Problem] = []
        base = self.roots.sys("class", "block")
        entries = [(name, inode) for name, inode in list_entries(base, self.roots.sysfs) if _SD.match(name)]

        def derive(name: str, path: str) -> ScsiDisk:
            values = {}
            for attr in ("wwid", "vendor", "model", "sas_address"):
                value, why = read_attr_why(os.path.join(path, "device", attr))
                if why is not None:
                    problems.append(Problem("SCSI device attribute unreadable",
                                            (("device", name), ("attribute", attr), ("err", why))))
                values[attr] = (value.strip() or None) if value is not None else None
            return ScsiDisk(name=name, **values)

        disks = [disk for _, _, disk in self._instances.refresh(base, entries, derive)]
        return sorted(disks, key=lambda d: natural_key(d.name)), problems
