"""NUMA spread: how many nodes a socket is split into, and where storage sits."""

from __future__ import annotations

from typing import Dict, Iterable, List, Optional

from storpath.readers.block import BlockDevice
from storpath.readers.numa import NumaNode, PciNuma


def nodes_per_socket(nodes: Iterable[NumaNode], cpu_packages: Dict[int, int]) -> Optional[float]:
    """NUMA nodes with CPUs divided by sockets: 4 on an EPYC in NPS4, 1 in NPS1, 0.5 when
    two sockets share one node (NPS0), 0.25 on a four-socket front-side-bus machine.
    Only online CPUs count. None when either side is unknown, or when an online CPU is
    in no node that could be read (a partial count would be a wrong one)."""
    nodes = list(nodes)
    sockets = set(cpu_packages.values())
    online = set(cpu_packages)
    with_cpus = [n for n in nodes if online.intersection(n.cpus)]
    if not sockets or not with_cpus:
        return None
    if online - {cpu for n in nodes for cpu in n.cpus}:
        return None
    return len(with_cpus) / len(sockets)


def block_device_nodes(devices: Iterable[BlockDevice], pci: Iterable[PciNuma]) -> List[tuple]:
    """(block device, NUMA node of the PCI function it sits behind), for devices behind a
    PCI function whose numa_node is readable. -1 (firmware did not say) is kept."""
    node_of = {d.address: d.numa_node for d in pci if d.numa_node is not None}
    return [(d.name, node_of[d.pci_address]) for d in devices
            if d.pci_address is not None and d.pci_address in node_of]
