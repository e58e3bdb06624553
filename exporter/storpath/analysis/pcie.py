"""What each PCIe link should train to, and where a device's path is limited.

A link joins a downstream-facing port (root port, switch downstream port) and the one
device below it (an endpoint or a switch's upstream port); the attributes of both ends
describe that one link. So a link is expected to train to the lower capability of its
two ends, and that expectation is the same seen from either end.

Two situations are kept apart:
- trained below expectation (current < expected): a fault of the link (signal, riser,
  BIOS forcing a lower generation, bifurcation);
- expectation below the device's own capability (expected < device max): a placement
  problem, e.g. a Gen4 drive in a Gen3 slot runs at half its speed. Only the device
  (upstream) end of a link is judged for placement: a Gen4 port above a Gen3 drive is fine.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Dict, List, Optional, Tuple

from storpath.base.records import datarecord
from storpath.analysis import platform, virtual
from storpath.analysis.expectation import BOTH_ENDS, NONE, LinkExpectation
from storpath.readers.pci import DOWNSTREAM_FACING, PciDevice, path_to_root
from storpath.base.units import pcie_link_bytes_per_second


@datarecord(frozen=True)
class PcieLink:
    """What one end's PCIe link should be: depends only on what cannot change while devices
    exist. `speed` is the link's expectation in the one vocabulary of analysis.expectation
    (the port's and the device's maximum speed; what the verdict rests on: both_ends on bare
    metal, device_only behind an emulated port, none when there is nothing storpath can
    verify, analysis.virtual); the width follows the same basis."""

    address: str
    partner: Optional[str]  # the other end of this device's link, when it is known
    faces_downstream: bool  # this end is the port side of the link
    speed: LinkExpectation
    expected_width: Optional[int]
    expected_bandwidth: Optional[float]
    max_bandwidth: Optional[float]  # what this end alone could carry
    placement_speed_limited: bool  # device end only: the port cannot reach the device's speed
    placement_width_limited: bool
    bottleneck: Optional[str]  # device end only: the device end of the hop with the lowest expected bandwidth up to the root
    bottleneck_bandwidth: Optional[float]
    root_port: Optional[str]
    design: Optional[str] = None  # a platform fact wires this link narrower than its ends (analysis.platform)


@datarecord(frozen=True)
class LinkAnalysis(PcieLink):
    """A link's expectation (the fields it inherits) together with how it is doing now."""

    current_bandwidth: Optional[float] = None
    speed_below_expected: bool = False
    width_below_expected: bool = False
    link_down: bool = False  # a partner exists but the link reports width 0
    target_speed: Optional[float] = None  # the port end's Target Link Speed, where read (links below capability)
    capped: bool = False  # trained at a Target Link Speed set below both ends' capability: not a fault
    cap_cause: Optional[str] = None  # CAP_CAUSES, when capped


def _min(a, b):
    """The lower of both ends' capabilities; with one end unreadable, the other end's
    (the best knowledge: a link never trains above it). Pinned by test_pcie_analysis."""
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


def speed_capability(end: PciDevice, device_end: PciDevice) -> Optional[float]:
    """The highest speed `end` supports: its max_link_speed, or the speed its link runs at now
    where that is higher (`device_end` is the link's device end; its Link Status is the link's).

    What the kernel writes to max_link_speed changed in 6.13 (drivers/pci/pci.c,
    pcie_get_supported_speeds(), commit d2bd39c0456b; masked in 3202ca221578 "PCI: Honor Max Link
    Speed when determining supported speeds", also in 6.12.43). Before, it was the highest speed
    of the Supported Link Speeds vector of Link Capabilities 2 (the Max Link Speed field of Link
    Capabilities only without that register); since, that vector masked by the Max Link Speed
    field. Ports whose two registers disagree (a Dell R330's root ports: Link Capabilities 2.5 GT/s,
    the vector 2.5-8 GT/s) read 8.0 GT/s before and 2.5 GT/s since, and their links train at
    8 GT/s on both kernels: a link up at a speed is proof both ends support it. Taking the higher
    of the two judges the same hardware the same way on every kernel."""
    maximum = end.static.max_link_speed
    running = device_end.current_link_speed if device_end.current_link_width else None
    if maximum is None or running is None:
        return maximum
    return max(maximum, running)


def link_partner(device: PciDevice, by_address: Dict[str, PciDevice], children: Dict[str, List[PciDevice]]) -> Optional[PciDevice]:
    if device.port_type in DOWNSTREAM_FACING:
        below = [c for c in children.get(device.address, []) if c.static.has_link]
        return below[0] if below else None  # functions of one device share one link
    parent = by_address.get(device.static.parent) if device.static.parent else None
    if parent is not None and parent.static.has_link and parent.port_type in DOWNSTREAM_FACING:
        return parent
    return None


def expectations(devices: List[PciDevice], guest: bool = False) -> Dict[str, PcieLink]:
    """`guest`: the host is a virtual machine (its PCIe ports are the hypervisor's)."""
    by_address = {d.address: d for d in devices}
    children: Dict[str, List[PciDevice]] = {}
    for d in sorted(devices, key=lambda d: d.address):
        if d.static.parent:
            children.setdefault(d.static.parent, []).append(d)

    expected: Dict[str, tuple] = {}
    designs: Dict[str, platform.PlatformFact] = {}
    partners: Dict[str, Optional[PciDevice]] = {}
    for d in devices:
        if not d.static.has_link:
            continue
        partners[d.address] = link_partner(d, by_address, children)
    trust = virtual.link_trust(devices, partners, guest)
    for address, partner in partners.items():
        d = by_address[address]
        if partner is None:
            expected[d.address] = (None, None)
            continue
        if not (d.static.complete and partner.static.complete):  # an end slept since it was first seen:
            expected[d.address] = (None, None)  # its capability is not read (storpath.readers.power)
            continue
        if not trust[address].use_partner:  # the partner's numbers are not hardware
            expected[address] = (d.static.max_link_speed, d.static.max_link_width)
            continue
        device_end = partner if d.port_type in DOWNSTREAM_FACING else d
        if trust[address].basis == BOTH_ENDS:  # bare metal: a link up at a speed is proof of it
            speeds = (speed_capability(d, device_end), speed_capability(partner, device_end))
        else:
            speeds = (d.static.max_link_speed, partner.static.max_link_speed)
        width = _min(d.static.max_link_width, partner.static.max_link_width)
        fact = (platform.design_of(d, partner) if d.port_type in DOWNSTREAM_FACING
                else platform.design_of(partner, d))
        if fact is not None and width is not None and fact.width < width:
            width = fact.width  # the platform wires fewer lanes than both ends advertise
            designs[address] = fact
        expected[d.address] = (_min(*speeds), width)

    def root_and_bottleneck(d: PciDevice):
        """Walk up from a device end; every device end of a link on the way is a hop."""
        best_addr, best_bw, root = None, None, None
        for node in path_to_root(d, by_address):
            if node.port_type == "root_port":
                root = node.address
            if (node.address in expected and node.port_type not in DOWNSTREAM_FACING
                    and trust[node.address].basis != NONE):
                speed, width = expected[node.address]
                bw = pcie_link_bytes_per_second(speed, width)
                if bw is not None and (best_bw is None or bw < best_bw):
                    best_addr, best_bw = node.address, bw
        return root, best_addr, best_bw

    result: Dict[str, PcieLink] = {}
    for d in devices:
        if not d.static.has_link:
            continue
        partner = partners[d.address]
        exp_speed, exp_width = expected[d.address]
        faces_down = d.port_type in DOWNSTREAM_FACING
        root, bottleneck, bottleneck_bw = root_and_bottleneck(d)
        device_end = partner is not None and not faces_down
        own_speed = d.static.max_link_speed
        partner_speed = partner.static.max_link_speed if partner is not None else None
        if partner is not None and trust[d.address].basis == BOTH_ENDS:
            own_speed = speed_capability(d, partner if faces_down else d)
            partner_speed = speed_capability(partner, partner if faces_down else d)
        port_speed, device_speed = (own_speed, partner_speed) if faces_down else (partner_speed, own_speed)
        design = designs.get(d.address)
        result[d.address] = PcieLink(
            address=d.address,
            partner=partner.address if partner else None,
            faces_downstream=faces_down,
            speed=LinkExpectation(exp_speed, port_speed, device_speed, trust[d.address].basis, trust[d.address].reason),
            expected_width=exp_width,
            expected_bandwidth=pcie_link_bytes_per_second(exp_speed, exp_width),
            max_bandwidth=pcie_link_bytes_per_second(d.static.max_link_speed, d.static.max_link_width),
            placement_speed_limited=(device_end and exp_speed is not None and d.static.max_link_speed is not None
                                     and exp_speed < d.static.max_link_speed),
            placement_width_limited=(device_end and design is None and exp_width is not None
                                     and d.static.max_link_width is not None and exp_width < d.static.max_link_width),
            bottleneck=bottleneck if device_end else None,
            bottleneck_bandwidth=bottleneck_bw if device_end else None,
            root_port=root,
            design=design.name if design is not None else None,
        )
    return result


class InstanceExpectations:
    """`expectations()` for a long-running reader of the PCI tree: they follow from the
    devices' static records (capabilities, place in the tree, port types) and, for whether a
    port's numbers are hardware (virtual.ends_disagree), the links' current speed and width;
    so they are derived again only when a device instance comes, goes or is replaced, or a
    link retrains. Measured on the benchmark's 2048-device host: 8 ms a scrape derived anew,
    a tenth of the scrape (docs/performance.md)."""

    def __init__(self) -> None:
        self._key: Optional[Tuple] = None
        self._value: Dict[str, PcieLink] = {}

    def __call__(self, devices: List[PciDevice], guest: bool) -> Dict[str, PcieLink]:
        key = (guest, [(d.static, d.current_link_speed, d.current_link_width) for d in devices])
        if key != self._key:
            self._value = expectations(devices, guest)
            self._key = key
        return self._value


def current_bandwidth(device: PciDevice, exp: PcieLink) -> Optional[float]:
    """Usable bandwidth of the link as trained; 0 for a link that is down."""
    if exp.partner is not None and device.current_link_width == 0:
        return 0.0
    return pcie_link_bytes_per_second(device.current_link_speed, device.current_link_width)


# Why a link's Target Link Speed is below both ends' capability.
CAP_BANDWIDTH_CONTROLLER = "bandwidth_controller"  # its thermal cooling device changed the speed (stats)
CAP_UNKNOWN = "unknown"  # firmware, a driver, a tool (setpci) or a kernel quirk: sysfs does not say which
CAP_CAUSES = (CAP_BANDWIDTH_CONTROLLER, CAP_UNKNOWN)


def port_end(device: PciDevice, exp: PcieLink, by_address: Dict[str, PciDevice]) -> Optional[PciDevice]:
    """The downstream-facing end of `device`'s link: the one whose Target Link Speed limits it."""
    if exp.faces_downstream:
        return device
    return by_address.get(exp.partner) if exp.partner else None


def cap_cause(port: PciDevice) -> str:
    cooling = port.link_cooling
    if cooling is not None and getattr(cooling, "changed", False):
        return CAP_BANDWIDTH_CONTROLLER
    return CAP_UNKNOWN


def judge(device: PciDevice, exp: PcieLink, port: Optional[PciDevice] = None) -> LinkAnalysis:
    """`port`: the link's downstream-facing end (port_end), whose Target Link Speed, where it
    was read, tells a link trained as it was told (capped) from one trained below it (a fault)."""
    link_down = exp.partner is not None and device.current_link_width == 0
    target = port.target_link_speed if port is not None else None
    below = (not link_down and exp.speed.expected is not None and device.current_link_speed is not None
             and device.current_link_speed < exp.speed.expected)
    capped = below and target is not None and target < exp.speed.expected and device.current_link_speed >= target
    return LinkAnalysis(
        **{f.name: getattr(exp, f.name) for f in fields(PcieLink)},
        current_bandwidth=current_bandwidth(device, exp),
        speed_below_expected=below and not capped,
        width_below_expected=(not link_down and exp.expected_width is not None
                              and device.current_link_width is not None
                              and 0 < device.current_link_width < exp.expected_width),
        link_down=link_down,
        target_speed=target,
        capped=capped,
        cap_cause=cap_cause(port) if capped else None,
    )


def analyse(devices: List[PciDevice], guest: bool = False,
            expected: Optional[Dict[str, PcieLink]] = None) -> Dict[str, LinkAnalysis]:
    """Every link of `devices` judged against `expected` (a scrape's `pcie_expected`), or
    against the expectations derived now for a host that is a guest or not."""
    if expected is None:
        expected = expectations(devices, guest)
    by_address = {d.address: d for d in devices}
    return {d.address: judge(d, expected[d.address], port_end(d, expected[d.address], by_address))
            for d in devices if d.address in expected}
