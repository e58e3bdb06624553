"""NUMA nodes, how finely the sockets are split, and the NUMA node of storage."""

from __future__ import annotations

from typing import Iterable, List, Tuple

from prometheus_client.core import GaugeMetricFamily, Metric

from storpath.analysis.numa import block_device_nodes, nodes_per_socket
from storpath.collectors import Collector, register
from storpath.exposition import SeriesFamily
from storpath.readers.numa import pci_numa, read_cpu_packages, read_nodes
from storpath.sysfs import read_attr, same_objects


@register("numa", default=True)
class NumaCollector(Collector):
    """NUMA nodes and their CPUs, nodes per socket, and the NUMA node of storage controllers and block devices."""

    _topology_key = None
    _topology_value = None
    # What the placement families were rendered from (the readers' per-instance records)
    # and their lines: a host with thousands of devices renders them again only when a
    # device comes or goes.
    _placement_key: Tuple[List[object], List[object]] = ([], [])
    _placement_lines: Tuple[str, str] = ("", "")

    def _topology(self):
        """NUMA nodes and CPU sockets change only when CPUs or nodes go on- or offline:
        re-read them when the kernel's online lists change, not on every scrape (a
        256-CPU host has 256 topology files)."""
        key = (read_attr(self.roots.sys("devices", "system", "node", "online")),
               read_attr(self.roots.sys("devices", "system", "cpu", "online")))
        if key != self._topology_key or self._topology_value is None:
            self._topology_value = (read_nodes(self.roots), read_cpu_packages(self.roots))
            self._topology_key = key
        return self._topology_value

    def collect(self) -> Iterable[Metric]:
        nodes, packages = self._topology()
        node_info = GaugeMetricFamily(
            "storpath_numa_node_info", "A NUMA node and its CPUs (cpulist, empty for a memory-only node); always 1.",
            labels=["node", "cpulist"])
        for node in nodes:
            node_info.add_metric([str(node.node), node.cpulist], 1)
        per_socket = GaugeMetricFamily(
            "storpath_numa_nodes_per_socket",
            "NUMA nodes with CPUs divided by CPU sockets (4 for an EPYC in NPS4, 1 in NPS1, 0.5 in NPS0).")
        value = nodes_per_socket(nodes, packages)
        if value is not None:
            per_socket.add_metric([], value)
        controller = SeriesFamily(
            "storpath_numa_storage_controller_node",
            "NUMA node of a storage controller (PCI class 01: NVMe, AHCI, SAS, RAID) from its numa_node; "
            "-1 when the firmware did not say.", ("address",))
        block = SeriesFamily(
            "storpath_block_device_numa_node",
            "NUMA node of the PCI function a block device sits behind; -1 when the firmware did not say.",
            ("device",))
        devices, blocks = self.ctx.facts.pci(), self.ctx.facts.blocks()
        key = ([d.static for d in devices], blocks)
        if not (same_objects(key[0], self._placement_key[0]) and same_objects(key[1], self._placement_key[1])):
            pci = pci_numa(devices)
            for device in pci:
                if device.is_storage and device.numa_node is not None:
                    controller.add((device.address,), device.numa_node)
            for name, node in block_device_nodes(blocks, pci):
                block.add((name,), node)
            self._placement_key = key
            self._placement_lines = ("".join(controller.lines), "".join(block.lines))
        texts = self._placement_lines
        controller.set_text(self._placement_key, lambda: texts[0])
        block.set_text(self._placement_key, lambda: texts[1])
        return [node_info, per_socket, controller, block]
