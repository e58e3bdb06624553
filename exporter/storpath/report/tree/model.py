"""The storage topology as a tree of nodes: PCIe hops from each root port down to the
block devices, then the md arrays and ZFS pools built on those devices.

Pure: facts (PCI functions, their link analysis, block devices, arrays) and findings
in, nodes out; no I/O. `storpath tree` (storpath.report.tree.text) and the exporter's landing
page (storpath.http.landing) render the same nodes, so the terminal and the browser show
one picture. Where the facts come from (a `storpath check` run or the exporter's last
scrape) is storpath.report.tree.sources' business.

A link is shown once, on its device end (the endpoint or a switch's upstream port):
current / expected / max, the expectation being storpath.analysis.pcie's (the lower
capability of both ends). A port (root port, switch downstream port) shows its own
maximum. Each hop with a link gets one state, the colour of the picture:

- below-expected: trained slower or narrower than both ends support, or down;
- limited-by-placement: the port cannot reach the device's own capability;
- unverifiable: in a virtual machine the port's numbers are not hardware
  (storpath.analysis.virtual's verdict, `storpath_pcie_link_verifiable`; read in
  `link_verifiable()`, the one place the tree takes it from);
- healthy.

A limiting hop carries less than the devices below it can deliver together: what flows
through a hop is the lesser of its own bandwidth and what flows into it from below, as
storpath.analysis.throughput computes it for the probes, but with the links as they
trained now (the expectation where the current one is unknown), since the tree shows
where throughput is lost today. A switch's x8 uplink above four x4 drives limits them
(read together); a x16 uplink above four x4 drives does not.
"""

from __future__ import annotations

import re
from dataclasses import field, replace
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

from storpath.base.records import datarecord
from storpath.analysis.expectation import which_end
from storpath.analysis.links import drive_phys, expander_capabilities, sas_expectation, sata_expectation
from storpath.readers.pci import DOWNSTREAM_FACING, PciDevice
from storpath.report.findings import Finding, natural_key, pci_kind, severity_rank
from storpath.base.units import human_bits_per_second, human_transfers, pcie_link_bytes_per_second

HEALTHY = "healthy"
BELOW_EXPECTED = "below-expected"
LIMITED_BY_PLACEMENT = "limited-by-placement"
UNVERIFIABLE = "unverifiable"
SUSPENDED = "suspended"  # the device sleeps: its link is not read (storpath.readers.power)
# Worst first: a node shows the first of these that applies (a sleeping device's link is not
# judged now: it shows as suspended whatever it was when last read awake).
LINK_STATES = (SUSPENDED, BELOW_EXPECTED, LIMITED_BY_PLACEMENT, UNVERIFIABLE, HEALTHY)
STATE_TEXT = {BELOW_EXPECTED: "below expected", LIMITED_BY_PLACEMENT: "limited by placement",
              UNVERIFIABLE: "unverifiable (VM)", HEALTHY: "healthy", SUSPENDED: "suspended"}

# Node kinds.
PCI, BLOCK, MD, ZPOOL, MEMBER = "pci", "block", "md", "zpool", "member"
MULTIPATH = "multipath"  # an NVMe subsystem or a dm-multipath map: its paths are its members
RAID = "raid"  # a hardware RAID volume or a drive behind the controller (storpath.report.tree.sources.raid_nodes)


@datarecord(frozen=True)
class Array:
    """An md array or a ZFS pool: a name, what it is, and the block devices it is made of."""

    name: str
    kind: str  # MD or ZPOOL
    detail: str  # "raid1", "raidz2"
    members: Tuple[str, ...]  # block device names as the array names them (partitions allowed)
    # Per member, what the tree says of it beside where it is (a path's HBA and state); for a
    # member that is no block device (an NVMe subsystem's controller), all it says.
    notes: Tuple[str, ...] = ()


@datarecord(frozen=True)
class Link:
    """One hop's numbers, in transfers per second and lanes."""

    current_speed: Optional[float]
    current_width: Optional[int]
    expected_speed: Optional[float]
    expected_width: Optional[int]
    max_speed: Optional[float]
    max_width: Optional[int]
    down: bool = False
    asleep: Optional[str] = None  # the state a sleeping device is in: its link is as last read awake, or unknown
    # A link trained at a Target Link Speed set below both ends' capability (analysis.pcie):
    # the target, and its cause (analysis.pcie.CAP_CAUSES); None where the link is not capped.
    target_speed: Optional[float] = None
    cap_cause: Optional[str] = None


@datarecord(frozen=True)
class Node:
    """One node of the tree (a PCI function, block device, array, pool or member): its link, state and findings."""

    id: str  # PCI address, block device, md array, pool; members are "<array>/<device>"
    kind: str  # PCI, BLOCK, MD, ZPOOL, MEMBER
    what: str  # "root port", "NVMe controller nvme0", "md raid1", "ZFS pool raidz2"
    model: str = ""  # as the hardware names itself (NVMe model): untrusted text
    numa_node: Optional[int] = None  # shown where it differs from the parent's
    port: bool = False  # a downstream-facing port: `link` is its own maximum only
    empty: bool = False  # a port with nothing below it
    link: Optional[Link] = None
    state: Optional[str] = None  # one of LINK_STATES for a node with a link, else None
    limits: Tuple[str, ...] = ()  # block devices whose path this hop limits
    member_of: Tuple[str, ...] = ()  # block device: the arrays and pools it is in
    disk_link: str = ""  # block device: its SAS PHY or SATA link, the expected rate and which end limits it
    findings: Tuple[Finding, ...] = ()  # worst first
    children: Tuple["Node", ...] = ()

    @property
    def severity(self) -> Optional[str]:
        return self.findings[0].severity if self.findings else None

    def walk(self) -> Iterable["Node"]:
        yield self
        for child in self.children:
            yield from child.walk()


@datarecord(frozen=True)
class Topology:
    """The whole tree: the PCI trees, then the arrays and pools, and the findings about no node of it."""

    roots: Tuple[Node, ...]  # PCI trees, then arrays and pools
    elsewhere: Tuple[Finding, ...] = ()  # findings about no node of the tree (NUMA, the host)

    def find(self, node_id: str) -> Optional[Node]:
        for root in self.roots:
            for node in root.walk():
                if node.id == node_id:
                    return node
        return None


@datarecord
class TreeInput:
    """What the tree is built from; storpath.report.tree.sources fills it."""

    pci: List[PciDevice]
    links: Dict[str, object]  # address -> storpath.analysis.pcie.LinkAnalysis
    blocks: List[object]  # storpath.readers.block.BlockDevice
    models: Dict[str, str] = field(default_factory=dict)  # PCI address -> model the hardware reports
    arrays: List[Array] = field(default_factory=list)
    findings: List[Finding] = field(default_factory=list)
    groups: Dict[str, str] = field(default_factory=dict)  # finding subject -> node it belongs to
    disk_links: Dict[str, str] = field(default_factory=dict)  # block device -> disk_link_texts' line
    # PCI address or block device -> nodes shown below it that sysfs does not have (a RAID
    # controller's volumes and drives, from the vendor tools)
    extra_children: Dict[str, Tuple["Node", ...]] = field(default_factory=dict)


def _gbit(rate: Optional[float]) -> str:
    return "?" if rate is None else human_bits_per_second(rate)


def disk_link_texts(sas_phys: Sequence, ata_links: Sequence, drive_results=None) -> Dict[str, str]:
    """Block device -> 'SAS phy-0:2 3 Gbit/s, expected 6 Gbit/s (the drive limits)': the link it
    sits on, the rate to expect from both ends (storpath.analysis.links) and which end sets it.
    A drive behind an expander shows the expander PHY it hangs from. `drive_results`: the
    SAS drives' own PHYs (snapshot.sas_drive_phys), when read."""
    out: Dict[str, str] = {}
    expanders = expander_capabilities(sas_phys)
    drives = drive_phys(sas_phys, drive_results)
    by_disk: Dict[str, List] = {}
    for phy in sas_phys:
        if phy.attached is not None and phy.negotiated_rate is not None:
            for disk in phy.attached.block_devices:
                by_disk.setdefault(disk, []).append(phy)
    for disk, phys in by_disk.items():
        phys = sorted(phys, key=lambda p: natural_key(p.name))
        fastest = max(phys, key=lambda p: p.negotiated_rate)
        expectation = sas_expectation(fastest, expanders, drives)
        names = phys[0].name if len(phys) == 1 else f"{phys[0].name} … {phys[-1].name}"
        expected = f", expected {_gbit(expectation.expected)}" if expectation.expected is not None else ""
        out[disk] = (f"SAS {names} {_gbit(fastest.negotiated_rate)}{expected} "
                     f"({which_end(expectation)})")
    for link in ata_links:
        if link.speed is None:
            continue
        expectation = sata_expectation(link)
        expected = f", expected {_gbit(expectation.expected)}" if expectation.verifiable else ""
        for disk in link.block_devices:
            out[disk] = f"SATA {link.name} {_gbit(link.speed)}{expected} ({which_end(expectation)})"
    return out


def link_verifiable(link) -> bool:
    """Whether a link's numbers are hardware: storpath.analysis.virtual's verdict (a
    LinkAnalysis's `speed.verifiable`, `storpath_pcie_link_verifiable`)."""
    return link.speed.verifiable


def link_state(link) -> str:
    """The state of a device end's link (a storpath.analysis.pcie.LinkAnalysis)."""
    if link.link_down or link.speed_below_expected or link.width_below_expected:
        return BELOW_EXPECTED
    if not link_verifiable(link):
        return UNVERIFIABLE
    if link.placement_speed_limited or link.placement_width_limited:
        return LIMITED_BY_PLACEMENT
    return HEALTHY


def link_text(speed: Optional[float], width: Optional[int]) -> str:
    """'16 GT/s x4', '8 GT/s', 'x4', '?'."""
    parts = []
    if speed is not None:
        parts.append(human_transfers(speed))
    if width is not None:
        parts.append(f"x{width}")
    return " ".join(parts) or "?"


def hop_text(link: Link, port: bool) -> str:
    """A hop's numbers in one line: 'link 16 GT/s x2 (expected 16 GT/s x4, max 16 GT/s x4)',
    'port max 16 GT/s x4' for a port (its link is shown on the device below it)."""
    maximum = link_text(link.max_speed, link.max_width)
    if port:
        return f"port max {maximum}"
    if link.asleep:
        last = link_text(link.current_speed, link.current_width)
        current = f"not read: asleep in {link.asleep}" + (f", {last} when last read awake" if last != "?" else "")
    else:
        current = "down" if link.down else link_text(link.current_speed, link.current_width)
    if link.expected_speed is None and link.expected_width is None:
        if link.asleep:
            return f"link {current} (its capability is read when it wakes)"
        return f"link {current} (max {maximum}; no port above to compare with)"
    return f"link {current} (expected {link_text(link.expected_speed, link.expected_width)}, max {maximum})"


def _storage(device: PciDevice, blocks_at: Dict[str, List[str]]) -> bool:
    code = device.static.class_code
    return device.address in blocks_at or (code is not None and code >> 16 == 0x01)


_PARTITION = re.compile(r"^(nvme\d+n\d+)p\d+$|^((?:sd|vd|xvd|hd)[a-z]+)\d+$")


def whole_disk(name: str) -> str:
    """nvme0n1p2 -> nvme0n1, sda1 -> sda; ZFS and md may name a partition."""
    match = _PARTITION.match(name)
    return (match.group(1) or match.group(2)) if match else name


def build(facts: TreeInput) -> Topology:
    by_address = {d.address: d for d in facts.pci}
    children: Dict[Optional[str], List[PciDevice]] = {}
    for device in facts.pci:
        parent = device.static.parent if device.static.parent in by_address else None
        children.setdefault(parent, []).append(device)
    blocks_at: Dict[str, List[str]] = {}
    block_address: Dict[str, str] = {}
    for block in facts.blocks:
        if block.pci_address and not block.virtual and block.pci_address in by_address:
            blocks_at.setdefault(block.pci_address, []).append(block.name)
            block_address[block.name] = block.pci_address
    block_names = {b.name for b in facts.blocks}
    controllers_at: Dict[str, Set[str]] = {}  # PCI address -> the controllers of its block devices
    for block in facts.blocks:
        if block.controller:
            controllers_at.setdefault(block.pci_address, set()).add(block.controller)
    member_of: Dict[str, List[str]] = {}
    for array in facts.arrays:
        for member in array.members:
            member_of.setdefault(whole_disk(member), []).append(array.name)

    limits = _limiting_hops(facts, by_address, blocks_at)
    findings = _findings_by_node(facts, by_address, block_address)

    def extra(node_id: str) -> Tuple[Node, ...]:
        return tuple(_attach(n, findings) for n in facts.extra_children.get(node_id, ()))

    def has_storage(device: PciDevice) -> bool:
        """Storage, or a link storpath judges (a NIC, GPU, accelerator or switch: check's
        `watched` classes), or anything of those below it."""
        return (_storage(device, blocks_at) or _judged_link(device, facts.links.get(device.address))
                or device.address in facts.extra_children
                or any(has_storage(c) for c in children.get(device.address, [])))

    def pci_node(device: PciDevice, parent_numa: Optional[int]) -> Node:
        kids = [c for c in children.get(device.address, []) if has_storage(c) or _empty_port(c, children)]
        numa = device.static.numa_node if device.static.numa_node is not None and device.static.numa_node >= 0 \
            else None
        block_nodes = [Node(id=name, kind=BLOCK, what="", member_of=tuple(member_of.get(name, ())),
                            disk_link=facts.disk_links.get(name, ""), findings=findings.get(name, ()),
                            children=extra(name))
                       for name in sorted(blocks_at.get(device.address, ()), key=natural_key)]
        link = facts.links.get(device.address)
        port = device.port_type in DOWNSTREAM_FACING
        shown: Optional[Link] = None
        state = None
        if device.static.has_link and port:
            shown = Link(None, None, None, None, device.static.max_link_speed, device.static.max_link_width)
        elif link is not None and link.partner is not None:
            shown = Link(device.current_link_speed, device.current_link_width, link.speed.expected,
                         link.expected_width, device.static.max_link_speed, device.static.max_link_width,
                         down=link.link_down and not device.asleep, asleep=device.asleep,
                         target_speed=link.target_speed if link.capped else None,
                         cap_cause=link.cap_cause if link.capped else None)
            state = SUSPENDED if device.asleep else link_state(link)
        elif device.static.has_link:  # no port above it that storpath can see
            shown = Link(device.current_link_speed, device.current_link_width, None, None,
                         device.static.max_link_speed, device.static.max_link_width, asleep=device.asleep)
            state = SUSPENDED if device.asleep else (
                UNVERIFIABLE if link is not None and not link_verifiable(link) else None)
        return Node(
            id=device.address, kind=PCI, what=_what(device, controllers_at), model=facts.models.get(device.address, ""),
            numa_node=numa if numa != parent_numa else None, port=port, empty=port and not kids,
            link=shown, state=state, limits=tuple(sorted(limits.get(device.address, ()), key=natural_key)),
            findings=findings.get(device.address, ()),
            children=tuple(pci_node(c, numa) for c in sorted(kids, key=lambda d: d.address))
            + tuple(block_nodes) + extra(device.address))

    roots = [pci_node(d, None) for d in sorted(children.get(None, []), key=lambda d: d.address)
             if has_storage(d)]
    for array in sorted(facts.arrays, key=lambda a: (a.kind != MD, natural_key(a.name))):
        members = []
        for member in array.members:
            disk = whole_disk(member)
            address = block_address.get(disk)
            device = by_address.get(address) if address else None
            numa = device.static.numa_node if device is not None else None
            where = address or ("not on a PCI device" if disk in block_names else "no such block device")
            note = array.notes[len(members)] if len(array.notes) > len(members) else ""
            if note:
                where = f"{address} · {note}" if address else note
            members.append(Node(id=f"{array.name}/{member}", kind=MEMBER, what=where,
                                numa_node=numa if numa is not None and numa >= 0 else None,
                                findings=findings.get(disk, ()) if disk == member else ()))
        what = {MD: "md ", ZPOOL: "ZFS pool ", MULTIPATH: ""}[array.kind] + array.detail
        roots.append(Node(id=array.name, kind=array.kind, what=what.strip(), findings=findings.get(array.name, ()),
                          children=tuple(members)))
    shown_ids = {n.id for r in roots for n in r.walk()}
    elsewhere = tuple(f for node_id, found in findings.items() if node_id not in shown_ids for f in found)
    return Topology(roots=tuple(roots), elsewhere=_worst_first(elsewhere))


def _attach(node: Node, findings: Dict[str, Tuple[Finding, ...]]) -> Node:
    return replace(node, findings=findings.get(node.id, ()), children=tuple(_attach(c, findings) for c in node.children))


# Device ends whose links the tree shows though no storage sits below them: network (0x02),
# display (0x03) and accelerator (0x12) controllers, and switches (their upstream ports), the
# links `storpath check` and the rules judge besides storage (report.findings.pcie.watched).
JUDGED_BASE_CLASSES = (0x02, 0x03, 0x12)


def _judged_link(device: PciDevice, link) -> bool:
    if link is None or link.partner is None or device.port_type in DOWNSTREAM_FACING:
        return False
    code = device.static.class_code
    return device.port_type == "upstream_port" or (code is not None and code >> 16 in JUDGED_BASE_CLASSES)


def _empty_port(device: PciDevice, children: Dict[Optional[str], List[PciDevice]]) -> bool:
    """An empty slot of a switch: shown, as a card's unused ports tell how it is wired."""
    return device.port_type == "downstream_port" and not children.get(device.address)


def _what(device: PciDevice, controllers_at: Dict[str, Set[str]]) -> str:
    kind = pci_kind(device)
    controllers = sorted(controllers_at.get(device.address, ()), key=natural_key)
    if controllers and controllers[0].startswith("nvme"):
        return ", ".join(controllers)  # as `storpath check` names a drive: nvme0 says what it is
    return kind


def _worst_first(found: Sequence[Finding]) -> Tuple[Finding, ...]:
    return tuple(sorted(found, key=lambda f: (severity_rank(f.severity), natural_key(f.subject), f.kind)))


def _findings_by_node(facts: TreeInput, by_address: Dict[str, PciDevice],
                      block_address: Dict[str, str]) -> Dict[str, Tuple[Finding, ...]]:
    """Each finding on the node it is about: its subject when the subject is a node of
    the tree, else the node its subsystem grouped it with (a SAS PHY with its HBA)."""
    nodes: Set[str] = set(by_address) | set(block_address) | {a.name for a in facts.arrays} \
        | {n.id for kids in facts.extra_children.values() for kid in kids for n in kid.walk()}
    attached: Dict[str, List[Finding]] = {}
    for finding in facts.findings:
        node = finding.subject
        if node not in nodes:
            node = facts.groups.get(node, node)
        attached.setdefault(node, []).append(finding)
    return {node: _worst_first(found) for node, found in attached.items()}


def _bandwidth(device: PciDevice, link) -> Optional[float]:
    if link.link_down:
        return 0.0
    now = pcie_link_bytes_per_second(device.current_link_speed, device.current_link_width)
    return now if now is not None else link.expected_bandwidth


def _limiting_hops(facts: TreeInput, by_address: Dict[str, PciDevice],
                   blocks_at: Dict[str, List[str]]) -> Dict[str, Set[str]]:
    """address of a hop -> the block devices it limits (see the module's doc). What flows
    through a hop is the lesser of what it carries and what flows into it from the hops
    below (a device's own link at the bottom); a hop that carries less than flows into
    it limits every device below it."""
    below: Dict[str, Set[str]] = {}  # hop -> the hops straight below it on some device's path
    carries: Dict[str, float] = {}
    devices_below: Dict[str, Set[str]] = {}
    tops: Set[str] = set()
    for address, names in blocks_at.items():
        child, node, steps = None, address, 0
        while node in by_address and steps < 64:
            steps += 1
            device = by_address[node]
            link = facts.links.get(node)
            if link is not None and link.partner is not None and device.port_type not in DOWNSTREAM_FACING:
                bandwidth = _bandwidth(device, link)
                if bandwidth is not None:
                    carries[node] = bandwidth
                    devices_below.setdefault(node, set()).update(names)
                    if child is not None:
                        below.setdefault(node, set()).add(child)
                    child = node
            node = device.static.parent
        if child is not None:
            tops.add(child)
    limits: Dict[str, Set[str]] = {}

    def flow(hop: str) -> float:
        inflow = sum(flow(c) for c in below[hop]) if hop in below else None
        if inflow is None or hop in blocks_at:  # a device's own link: it is the start of the flow
            return carries[hop]
        if carries[hop] < inflow:
            limits[hop] = devices_below[hop]
            return carries[hop]
        return inflow

    for top in tops:
        flow(top)
    return limits


__all__ = ["Array", "Link", "Node", "Topology", "TreeInput", "build", "hop_text", "link_state", "link_text", "link_verifiable",
           "whole_disk", "HEALTHY", "BELOW_EXPECTED", "LIMITED_BY_PLACEMENT", "UNVERIFIABLE",
           "LINK_STATES", "STATE_TEXT", "PCI", "BLOCK", "MD", "ZPOOL", "MEMBER"]
