"""How many bytes per second the PCIe path of a block device (or an md array) allows.

A device's reads cross every link from its PCI function up to its root port, so one
device gets at most the lowest expected bandwidth on that path. Devices that share an
upstream link (drives behind one switch, namespaces or SAS disks behind one controller)
share that link's bandwidth. For an array, the links form a tree: what flows through a
link is the lesser of its own bandwidth and what flows into it from below, and the
array gets what flows out of the top links, added up.

Expected link bandwidths (the lower capability of both ends, after line encoding) are
used, not the trained ones: a link that trained low must show as a probe far below
expectation, not as a lower expectation.

What reads can use by md level:
- raid0, raid10: every member streams at once: the tree sum;
- raid4/5/6: every member streams, but one (raid4/5) or two (raid6) stripe units in each
  stripe are parity the reader skips: the tree sum times (members - parity) / members;
- raid1, linear: one stream is served by one member at a time: the best member's path.
Other levels have no expectation.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from storpath.base.records import datarecord
from storpath.analysis.pcie import LinkAnalysis
from storpath.readers.pci import PciDevice, path_to_root
from storpath.readers.block import BlockDevice


@datarecord(frozen=True)
class MdShape:
    """One md array: its name, its level and the member disks its reads go to."""

    name: str
    level: str  # as /sys/block/mdX/md/level spells it: raid0, raid1, raid10, raid5, linear ...
    members: Tuple[str, ...]  # member disks (kernel names)


@datarecord(frozen=True)
class PathExpectation:
    """What the PCIe path lets one disk or md array read per second, and the links that set it (or why unknown)."""

    device: str
    bytes_per_second: Optional[float]
    limited_by: Tuple[str, ...] = ()  # device ends (PCI addresses) of the links that set the value
    members: Tuple[str, ...] = ()
    reason: Optional[str] = None  # why there is no value


_PARITY = {"raid4": 1, "raid5": 1, "raid6": 2}
_STRIPED = {"raid0", "raid10"}
_ONE_AT_A_TIME = {"raid1", "linear"}


def path_hops(address: str, pci: Mapping[str, PciDevice],
              links: Mapping[str, LinkAnalysis]) -> List[Tuple[str, float]]:
    """(device end address, expected bandwidth) of every link from `address` up to its
    root port, nearest first. A link whose bandwidth is unknown is left out."""
    hops: List[Tuple[str, float]] = []
    for node in path_to_root(pci.get(address), pci):
        link = links.get(node.address)
        if link is not None and not link.faces_downstream and link.partner is not None \
                and link.expected_bandwidth is not None:
            hops.append((node.address, link.expected_bandwidth))
    return hops


def shared_tree_bandwidth(paths: Sequence[Sequence[Tuple[str, float]]]) -> Tuple[float, Tuple[str, ...]]:
    """Bandwidth of several devices read at once, each given by its hops (nearest first).

    Returns the total and the links that set it: on each branch the link nearest the root
    whose own bandwidth capped what flowed into it. A device with no hops is unbounded:
    callers leave such out."""
    bandwidth: Dict[str, float] = {}
    children: Dict[Optional[str], List[str]] = {}
    leaves: Dict[str, int] = {}  # hop -> devices directly below it
    for hops in paths:
        if not hops:
            continue
        leaves[hops[0][0]] = leaves.get(hops[0][0], 0) + 1
        for i, (address, bw) in enumerate(hops):
            bandwidth[address] = bw
            parent = hops[i + 1][0] if i + 1 < len(hops) else None
            siblings = children.setdefault(parent, [])
            if address not in siblings:
                siblings.append(address)
    def flow(address: str) -> Tuple[float, List[str]]:
        """What flows out of this link, and the links that set it (this one when it caps)."""
        below = [flow(child) for child in children.get(address, [])]
        inflow = float("inf") if leaves.get(address) else sum(value for value, _ in below)
        if bandwidth[address] <= inflow:
            return bandwidth[address], [address]
        return inflow, [limit for _, limits in below for limit in limits]

    total, limits = 0.0, []
    for top in children.get(None, []):
        value, top_limits = flow(top)
        total += value
        limits.extend(top_limits)
    return total, tuple(limits)


def expected_read_bandwidth(device: str, block: Mapping[str, BlockDevice], pci: Mapping[str, PciDevice],
                            links: Mapping[str, LinkAnalysis], md: Mapping[str, MdShape]) -> PathExpectation:
    """What the PCIe path lets `device` (a disk or an md array) read, per second."""
    shape = md.get(device)
    if shape is None:
        dev = block.get(device)
        if dev is None:
            return PathExpectation(device, None, reason=f"no block device {device}")
        if dev.pci_address is None:
            return PathExpectation(device, None, reason=f"{device} is not behind a PCI device")
        hops = path_hops(dev.pci_address, pci, links)
        if not hops:
            return PathExpectation(device, None, reason=f"the PCIe link of {dev.pci_address} is unknown")
        total, limits = shared_tree_bandwidth([hops])
        return PathExpectation(device, total, limits)

    if not shape.members:
        return PathExpectation(device, None, reason=f"{device} has no members")
    member_hops = []
    for member in shape.members:
        dev = block.get(member)
        if member in md:  # an array of arrays: its members' paths count
            nested = md[member]
            for inner in nested.members:
                inner_dev = block.get(inner)
                hops = path_hops(inner_dev.pci_address, pci, links) if inner_dev and inner_dev.pci_address else []
                if not hops:
                    return PathExpectation(device, None, members=shape.members,
                                           reason=f"no PCIe path for member {inner} of {member}")
                member_hops.append(hops)
            continue
        hops = path_hops(dev.pci_address, pci, links) if dev is not None and dev.pci_address else []
        if not hops:
            return PathExpectation(device, None, members=shape.members, reason=f"no PCIe path for member {member}")
        member_hops.append(hops)

    level = shape.level
    if level in _STRIPED or level in _PARITY:
        total, limits = shared_tree_bandwidth(member_hops)
        if level in _PARITY:
            count = len(shape.members)
            parity = _PARITY[level]
            if count <= parity:
                return PathExpectation(device, None, members=shape.members,
                                       reason=f"{level} with {count} members has no data members")
            total *= (count - parity) / count
        return PathExpectation(device, total, limits, members=shape.members)
    if level in _ONE_AT_A_TIME:
        best = max((shared_tree_bandwidth([hops]) for hops in member_hops), key=lambda item: item[0])
        return PathExpectation(device, best[0], best[1], members=shape.members)
    return PathExpectation(device, None, members=shape.members, reason=f"no expectation for md level {level!r}")
