"""SCSI disks as paths: each sd device's WWID, model and state, so a dual-ported drive
reached through two HBAs or two expanders is known as one drive seen twice.

drivers/scsi/scsi_sysfs.c gives every SCSI device (Documentation/ABI/testing/sysfs-bus-scsi):

    /sys/class/block/sdX/device/wwid      "naa.5000c500a1b2c3d4": the logical unit's designator from
                                          VPD page 0x83, the same through every port of the drive
    /sys/class/block/sdX/device/vendor    "SEAGATE " (space-padded)
    /sys/class/block/sdX/device/model     "ST4000NM0025    "
    /sys/class/block/sdX/device/state     running, offline, blocked, ...
    /sys/class/block/sdX/device/sas_address   the target port's SAS address (mpt3sas, SAS drives):
                                          differs per port of a dual-ported drive

A drive without VPD page 0x83 (many SATA drives behind an HBA give a t10 name made of
vendor, model and serial, which is unique too) or without a `wwid` attribute (old
kernels) cannot be grouped and is left out.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import List, Optional, Tuple

from storpath.parse import natural_key
from storpath.problems import Problem
from storpath.roots import Roots
from storpath.sysfs import list_dir, read_attr_why

CAPTURE_SYSFS = ("class/block/sd*/device/{wwid,vendor,model,state,sas_address}",)

_SD = re.compile(r"^sd[a-z]+$", re.ASCII)


@dataclass(frozen=True)
class ScsiDisk:
    name: str  # sdX
    wwid: Optional[str]
    vendor: Optional[str]
    model: Optional[str]
    state: Optional[str]
    sas_address: Optional[str]  # of the target port this sd device reaches


class ScsiPathReader:
    def __init__(self, roots: Roots):
        self.roots = roots

    def read(self) -> Tuple[List[ScsiDisk], List[Problem]]:
        problems: List[Problem] = []
        disks = []
        base = self.roots.sys("class", "block")
        for name in sorted(list_dir(base, self.roots.sysfs), key=natural_key):
            if not _SD.match(name):
                continue
            values = {}
            for attr in ("wwid", "vendor", "model", "state", "sas_address"):
                value, why = read_attr_why(os.path.join(base, name, "device", attr))
                if why is not None:
                    problems.append(Problem("SCSI device attribute unreadable",
                                            (("device", name), ("attribute", attr), ("err", why))))
                values[attr] = value.strip() or None if value is not None else None
            disks.append(ScsiDisk(name=name, **values))
        return disks, problems
