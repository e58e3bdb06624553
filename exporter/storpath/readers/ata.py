"""SATA links and the disks on them, from /sys/class/ata_link.

Kernel source: drivers/ata/libata-transport.c (the ATA transport class) and
sata_spd_string() in drivers/ata/libata-core.c; Documentation/ABI/testing/sysfs-ata.
Layout below the controller's PCI function:

    ataP/                          an ATA port (print id P)
        linkP/ata_link/linkP/      the port's link: what /sys/class/ata_link/linkP links to
        linkP.M/ata_link/linkP.M/  the links behind a port multiplier, one per PMP port M
        hostH/targetH:C:T/H:C:T:L/block/sdX

Attributes: sata_spd (the speed the link runs at now), hw_sata_spd_limit (the
controller's limit from SControl, lowered by `libata.force=P:3.0Gbps`), sata_spd_limit
(the limit libata applies now: error handling lowers it after link errors, the
"limiting SATA link speed to 3.0 Gbps" message). Spelled "1.5 Gbps", "3.0 Gbps",
"6.0 Gbps", or "<unknown>": for sata_spd no link, for the limits no limit set (the
kernel keeps "all speeds allowed" as an all-ones mask, which has no name).

The drive's own capability comes from its IDENTIFY data, the `id` attribute of the link's
ATA device (linkP/devP.D/ata_device/devP.D/id; readers.ata_identify).

Behind a port multiplier the SCSI channel of a disk is its PMP port (M), so the disk of
link P.M is targetH:M:0; a host link whose port has PMP links carries the multiplier,
not a disk.
"""

from __future__ import annotations

import os
import re
from typing import List, Optional, Tuple

from storpath.base.records import datarecord
from storpath.base.parse import parse_sata_rate
from storpath.base.problems import DEBUG, Problem
from storpath.readers.ata_identify import UNREPORTED, SataCapability, capability_of, parse_id_text
from storpath.readers.block import scsi_target_disks
from storpath.base.roots import Roots
from storpath.base.sysfs import list_dir, read_attr_why

UNKNOWN = "<unknown>"
SPEED_ATTRIBUTES = ("sata_spd", "hw_sata_spd_limit", "sata_spd_limit")

# What this reader reads (storpath capture takes these; see commands/capture.py).
CAPTURE_SYSFS = (
    "class/ata_link/*/{sata_spd,hw_sata_spd_limit,sata_spd_limit}",
    "class/ata_link/*/../../../link*",
    "class/ata_link/*/../../dev*/ata_device/*/id",
    "class/ata_link/*/../../../host*/target*/*/block/*",
)

_LINK = re.compile(r"^link(\d+)(?:\.(\d+))?$", re.ASCII)
_HOST = re.compile(r"^host\d+$")
_TARGET = re.compile(r"^target\d+:(\d+):\d+$")


@datarecord(frozen=True)
class AtaLink:
    """One SATA link: its port, speed and limits, its disks, and the drive's own capability."""

    name: str  # link1, link2.3 (behind a port multiplier)
    port: Optional[str]  # ata1
    speed: Optional[float]  # bit transfers per second the link runs at ("6.0 Gbps" is 6e9); None when down
    hardware_limit: Optional[float]  # None: the controller sets no limit
    limit: Optional[float]  # None: libata applies no limit
    block_devices: Tuple[str, ...]  # sda; empty when nothing is attached
    # The drive's IDENTIFY words 76/77: the fastest generation it supports, the speed it
    # says it negotiated. UNREPORTED when there is no drive or it does not say.
    device_capability: SataCapability = UNREPORTED


def parse_link_speed(text: Optional[str]) -> Tuple[Optional[float], Optional[str]]:
    """(bit transfers per second, problem). '6.0 Gbps' -> (6e9, None); '<unknown>' and a missing
    file -> (None, None); anything else -> (None, 'unrecognised ...')."""
    if text is None:
        return None, None
    text = text.strip()
    if text == UNKNOWN:
        return None, None
    value, _ = parse_sata_rate(text)
    if value is None or value <= 0:
        return None, f"unrecognised SATA speed {text!r}"
    return value, None


def parse_link_name(name: str) -> Optional[Tuple[int, Optional[int]]]:
    """'link3' -> (3, None); 'link3.1' -> (3, 1); anything else None."""
    match = _LINK.match(name)
    if not match:
        return None
    return int(match.group(1)), (int(match.group(2)) if match.group(2) is not None else None)


class AtaReader:
    """Reads every ATA link. Holds no state; one broken link never hides the others."""

    def __init__(self, roots: Roots):
        self.roots = roots

    def read(self) -> Tuple[List[AtaLink], List[Problem]]:
        """Every ATA link, and the attributes that could not be used."""
        base = self.roots.sys("class", "ata_link")
        links: List[AtaLink] = []
        problems: List[Problem] = []
        for name in list_dir(base, self.roots.sysfs):
            try:
                link = self._read_link(name, os.path.join(base, name), problems)
            except OSError as exc:
                problems.append(Problem("ATA link vanished while reading it", (("link", name), ("err", str(exc))),
                                        DEBUG))
                continue
            if link is not None:
                links.append(link)
        return links, problems

    def _read_link(self, name: str, class_link: str, problems: List[Problem]) -> Optional[AtaLink]:
        attrs = os.path.realpath(class_link)
        if not os.path.isdir(attrs):
            return None
        values = {}
        for attr in SPEED_ATTRIBUTES:
            text, why = read_attr_why(os.path.join(attrs, attr))
            if why is not None:
                problems.append(_problem(name, attr, why))
            values[attr], problem = parse_link_speed(text)
            if problem:
                problems.append(_problem(name, attr, problem))
        # linkP/ata_link/linkP -> the link device linkP, whose parent is the port ataP.
        port_dir = os.path.dirname(os.path.dirname(os.path.dirname(attrs)))
        port = os.path.basename(port_dir)
        link = AtaLink(name=name, port=port if port.startswith("ata") else None,
                       speed=values["sata_spd"], hardware_limit=values["hw_sata_spd_limit"],
                       limit=values["sata_spd_limit"],
                       block_devices=tuple(disks_of_link(name, port_dir)) if port.startswith("ata") else (),
                       device_capability=_device_capability(name, os.path.dirname(os.path.dirname(attrs)),
                                                            problems))
        if not os.path.isdir(attrs):
            return None
        return link


def _device_capability(link: str, link_dir: str, problems: List[Problem]) -> SataCapability:
    """The capability the first ATA device of the link reports in its IDENTIFY data
    (devP.0; devP.1 is a PATA slave, and a SATA link carries one device)."""
    for entry in sorted(e for e in list_dir(link_dir) if e.startswith("dev")):
        text, why = read_attr_why(os.path.join(link_dir, entry, "ata_device", entry, "id"))
        if why is not None:
            problems.append(_problem(link, f"{entry}/id", why))
            continue
        words, problem = parse_id_text(text)
        if problem:
            problems.append(_problem(link, f"{entry}/id", problem))
        if words is not None:
            return capability_of(words)
    return UNREPORTED


def _problem(link: str, attribute: str, reason: str) -> Problem:
    return Problem("ATA link attribute not usable, leaving it out",
                   (("link", link), ("attribute", attribute), ("reason", reason)))


def disks_of_link(link: str, port_dir: str) -> List[str]:
    """Block devices on `link`, found below the SCSI host of its ATA port."""
    parsed = parse_link_name(link)
    if parsed is None:
        return []
    _, pmp = parsed
    entries = list_dir(port_dir)
    has_pmp_links = any(parsed_entry is not None and parsed_entry[1] is not None
                        for parsed_entry in map(parse_link_name, entries))
    if pmp is None and has_pmp_links:
        return []  # the host link carries the port multiplier itself
    found = []
    for host in entries:
        if not _HOST.match(host):
            continue
        host_dir = os.path.join(port_dir, host)
        for target in list_dir(host_dir):
            match = _TARGET.match(target)
            if not match or (pmp is not None and int(match.group(1)) != pmp):
                continue
            found.extend(scsi_target_disks(os.path.join(host_dir, target)))
    return sorted(found)
