"""NUMA nodes, how finely the sockets are split, and the NUMA node of storage."""

from __future__ import annotations

from storpath.analysis.numa import block_device_nodes, nodes_per_socket
from storpath.collectors import Collector, register
from storpath.scrape.families import GAUGE, Family, Rows

NODE_INFO = Family(
    "storpath_numa_node_info", GAUGE,
    "A NUMA node and its CPUs (cpulist, empty for a memory-only node); always 1.", ("numa_node", "cpulist"),
    doc="a NUMA node and its CPUs as the kernel lists them (`0-23,48-71`; empty for a memory-only node); always 1. "
        "`count(storpath_numa_node_info)` is the number of nodes")
NODES_PER_SOCKET = Family(
    "storpath_numa_nodes_per_socket", GAUGE,
    "NUMA nodes with CPUs divided by CPU sockets (4 for an EPYC in NPS4, 1 in NPS1, 0.5 in NPS0).",
    doc="NUMA nodes with online CPUs divided by sockets (distinct `physical_package_id`): 4 on an EPYC in NPS4, 1 "
        "in NPS1, 0.5 in NPS0, 0.25 on a four-socket front-side-bus machine; absent when some online CPU is in no "
        "readable node")
CONTROLLER_NODE = Family(
    "storpath_numa_storage_controller_node", GAUGE,
    "NUMA node of a storage controller (PCI class 01: NVMe, AHCI, SAS, RAID) from its numa_node; "
    "-1 when the firmware did not say.", ("address",),
    doc="NUMA node of every storage controller (PCI base class 01: NVMe, AHCI, SAS, RAID); -1 when the firmware "
        "did not say")
BLOCK_DEVICE_NODE = Family(
    "storpath_block_device_numa_node", GAUGE,
    "NUMA node of the PCI function a block device sits behind; -1 when the firmware did not say.", ("device",),
    doc="NUMA node of the PCI function a block device sits behind (NVMe namespaces with native multipath: the "
        "first path's controller); -1 when the firmware did not say; virtual devices (md, dm) have none")

FAMILIES = (NODE_INFO, NODES_PER_SOCKET, CONTROLLER_NODE, BLOCK_DEVICE_NODE)


@register("numa", default=True)
class NumaCollector(Collector):
    """NUMA nodes and their CPUs, nodes per socket, and the NUMA node of storage controllers and block devices."""

    families = FAMILIES
    reads = ("numa", "pci", "blocks")

    def values(self, snapshot) -> Rows:
        numa = snapshot.numa
        rows = Rows()
        for node in numa.nodes:
            rows.add(NODE_INFO, (str(node.node), node.cpulist), 1)
        rows.add(NODES_PER_SOCKET, (), nodes_per_socket(numa.nodes, numa.packages))
        pci = numa.pci
        for device in pci:
            if device.is_storage:
                rows.add(CONTROLLER_NODE, (device.address,), device.numa_node)
        for name, node in block_device_nodes(snapshot.blocks, pci):
            rows.add(BLOCK_DEVICE_NODE, (name,), node)
        return rows
