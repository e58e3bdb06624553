"""What a PCIe device can use of its link, to tell a slot that is a device's bottleneck from a
device placed in a narrower or slower slot that carries all it can use.

A device placed behind a port that cannot reach its own speed or width (analysis.pcie,
`placement_*_limited`) is how many boards are built (an x8 RAID controller in an x4 slot, a
dual-port 1 GbE NIC in an x1 slot): a review item, not a fault. The slot is the device's
bottleneck only when what the device can use is more than the slot's link carries:
- a NIC: the sum of its ports' line rates (/sys/class/net/*/speed of its functions, each
  direction: Ethernet is full duplex, the link's bandwidth is per direction);
- a switch's upstream port (an NVMe switch card, a chipset uplink): the sum of the expected
  bandwidths of the links below its downstream ports;
each capped by the device's own link capability (more than that it cannot move whatever the
slot). Unknown (no demand) for anything else: an HBA or RAID controller, whose drives' links
are not summed here yet, stays a review item.

Demand is a property of the link, which all functions of one device share: it is keyed by the
device end the port's link is judged on (the port's partner, analysis.pcie.link_partner).
Pure functions over the PCI records, the links and the network ports.
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Mapping

from storpath.base.records import datarecord
from storpath.analysis.pcie import PcieLink
from storpath.readers.net import NetPort
from storpath.readers.pci import DOWNSTREAM_FACING, PciDevice

NETWORK_PORTS = "network_ports"  # a NIC: its ports' line rates added up
SWITCH_LINKS = "switch_links"  # a switch's upstream port: the links below its downstream ports added up


@datarecord(frozen=True)
class Demand:
    """What the device below one PCIe link can use per direction, and what was added up to tell."""

    bytes_per_second: float  # what the device can use per direction, at most its own link's capability
    source: str  # NETWORK_PORTS | SWITCH_LINKS
    parts: int  # how many ports or links were added up


def link_demands(devices: Iterable[PciDevice], links: Mapping[str, PcieLink],
                 net_ports: Iterable[NetPort]) -> Dict[str, Demand]:
    """Device end address -> what the device below that link can use, where it is known."""
    children: Dict[str, List[PciDevice]] = {}
    for device in devices:
        if device.static.parent and device.static.has_link:
            children.setdefault(device.static.parent, []).append(device)
    rates: Dict[str, List[float]] = {}
    for port in net_ports:
        if port.speed:
            rates.setdefault(port.pci_address, []).append(port.speed / 8)
    out: Dict[str, Demand] = {}
    for address, link in links.items():
        if not link.faces_downstream or link.partner is None or link.partner not in links:
            continue
        device_end = links[link.partner]
        functions = children.get(address, [])
        line_rates = [rate for f in functions for rate in rates.get(f.address, ())]
        if line_rates:
            parts, total, source = len(line_rates), sum(line_rates), NETWORK_PORTS
        else:
            below = [links[d.address] for d in children.get(link.partner, [])
                     if d.port_type in DOWNSTREAM_FACING and d.address in links]
            below = [down.expected_bandwidth for down in below if down.partner is not None and down.expected_bandwidth]
            if not below:
                continue
            parts, total, source = len(below), sum(below), SWITCH_LINKS
        if device_end.max_bandwidth is not None:
            total = min(total, device_end.max_bandwidth)
        out[link.partner] = Demand(total, source, parts)
    return out


def bottlenecked(link: PcieLink, demand: Demand) -> bool:
    """The slot carries less than the device can use: its link's expected bandwidth is below the demand."""
    return link.expected_bandwidth is not None and link.expected_bandwidth < demand.bytes_per_second
