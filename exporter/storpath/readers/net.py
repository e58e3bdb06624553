"""Network interfaces of PCI functions and their line rate, from /sys/class/net/*.

Attributes (Documentation/ABI/testing/sysfs-class-net):
- `device`: a link to the interface's parent device; a PCI function's directory for a NIC
  port (interfaces without one, or on another bus, are virtual or USB: left out);
- `speed`: the link's speed in Mbit/s as the driver reports it to ethtool (net-sysfs.c:
  speed_show). `-1` (SPEED_UNKNOWN) or EINVAL while the link is down or the driver cannot
  say: no speed, which is not a problem.

What a NIC can use of its PCIe link is the sum of its ports' line rates (analysis.demand).
"""

from __future__ import annotations

import os
from typing import List, Optional, Tuple

from storpath.base.records import datarecord
from storpath.base.parse import parse_int
from storpath.base.problems import Problem
from storpath.readers.pci import PCI_ADDRESS
from storpath.base.roots import Roots
from storpath.base.sysfs import list_dir, read_attr_why

# What this reader reads (storpath capture takes these).
CAPTURE_SYSFS = ("class/net/*", "class/net/*/{device,speed}")

MBIT = 1e6


@datarecord(frozen=True)
class NetPort:
    """One network interface of a PCI function and its line rate."""

    name: str  # eno1, enp4s0f0
    pci_address: str  # the PCI function the port belongs to
    speed: Optional[float]  # line rate in bits per second; None while the link is down or unknown


def parse_net_speed(text: Optional[str]) -> Tuple[Optional[float], Optional[str]]:
    """`speed` ("10000", Mbit/s) -> (bits/s, None); "-1", empty or absent -> (None, None);
    anything else -> (None, why)."""
    if text is None or text in ("", "-1"):
        return None, None
    value = parse_int(text, minimum=0)
    if value is None:
        return None, f"unrecognised speed {text!r}"
    return (value * MBIT if value else None), None


class NetReader:
    def __init__(self, roots: Roots):
        self.roots = roots

    def read(self) -> Tuple[List[NetPort], List[Problem]]:
        """Every interface whose device is a PCI function, with its line rate."""
        base = self.roots.sys("class", "net")
        ports: List[NetPort] = []
        problems: List[Problem] = []
        for name in list_dir(base):
            device = os.path.join(base, name, "device")
            if not os.path.islink(device):  # virtual interfaces (lo, bridges, bonds) have none
                continue
            address = os.path.basename(os.path.realpath(device))
            if not PCI_ADDRESS.match(address):  # USB, platform devices
                continue
            # EINVAL while the link is down (speed_show) reads as an error: no speed, no problem.
            text, _ = read_attr_why(os.path.join(base, name, "speed"))
            speed, why = parse_net_speed(text)
            if why:
                problems.append(Problem("network interface speed not usable, leaving it out",
                                        (("device", name), ("attribute", "speed"), ("reason", why))))
            ports.append(NetPort(name=name, pci_address=address, speed=speed))
        return ports, problems
