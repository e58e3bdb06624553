"""NUMA findings: storage controllers the firmware did not place on a node of a
multi-node machine (the StorageNumaNodeUnknown alert), and where the storage sits on a
machine with several nodes (the EPYC NPS story: the same four drives gave 7-9 GB/s
read from the far socket and about 28 GB/s from their own node)."""

from __future__ import annotations

from typing import Dict, List

from storpath.analysis.numa import block_device_nodes, nodes_per_socket
from storpath.report.findings import INFO, WARNING, Facts, Finding, Outcome, natural_key, register


@register("numa", collector="numa", order=40)
def check(facts: Facts, out: Outcome) -> None:
    numa = facts.part("numa")
    nodes = numa.nodes
    pci = numa.pci
    with_cpus = [n for n in nodes if n.cpus]
    # Placement is knowable on bare metal only: a vNUMA guest puts every device at -1 and the
    # host's placement is not visible from it (the host findings say so).
    if len(with_cpus) < 2 or facts.host().virtual:
        out.count(len(nodes), "NUMA nodes")
        return
    per_socket = nodes_per_socket(nodes, numa.packages)
    for device in sorted((d for d in pci if d.is_storage and d.numa_node == -1), key=lambda d: d.address):
        blocks = facts.blocks_below(device.address)
        out.add(Finding(
            subject=device.address, severity=WARNING, kind="numa.node_unknown",
            title=f"no NUMA node on a machine with {len(with_cpus)} nodes",
            evidence=f"numa_node reads -1 (the firmware did not describe where {device.address} is attached)",
            impact="the kernel cannot keep its interrupts and buffers near it: I/O may cross the socket link",
            remedy="Update the BIOS (ACPI _PXM for the slot); meanwhile pin the I/O to the socket the slot is "
                   "wired to (the board manual says which).",
            related=tuple(blocks)))
    placed = [(dev, node) for dev, node in block_device_nodes(facts.block_devices(), pci) if node >= 0]
    by_node: Dict[int, List[str]] = {}
    for dev, node in placed:
        by_node.setdefault(node, []).append(dev)
    # Where storage sits is worth a line when it matters which CPUs read it: storage on
    # several nodes, or sockets split into several nodes (NPS2/NPS4, sub-NUMA clustering).
    if placed and (len(by_node) > 1 or (per_socket or 0) > 1):
        where = "; ".join(f"node {node}: {', '.join(sorted(devs, key=natural_key))}"
                          for node, devs in sorted(by_node.items()))
        cpus = {n.node: n.cpulist for n in nodes}
        main = max(by_node, key=lambda n: len(by_node[n]))
        layout = f"{len(with_cpus)} NUMA nodes" + (f", {per_socket:g} per socket" if per_socket else "")
        out.add(Finding(
            subject="numa", severity=INFO, kind="numa.storage_placement",
            title=(f"all storage sits on node {main} of {len(with_cpus)}" if len(by_node) == 1 else
                   f"most storage sits on node {main} ({len(by_node[main])} of {len(placed)} block devices)"),
            evidence=f"{layout}; {where}",
            impact="reads issued from another node cross the inter-socket or inter-die link, which can cap "
                   "several drives together far below what their links give",
            remedy=f"Run the heavy readers on the drives' node (`numactl --cpunodebind={main} --membind={main}`, "
                   f"CPUs {cpus.get(main, '?')}); on AMD EPYC, NPS4 with pinned readers keeps every drive's "
                   "traffic on its own quadrant."))
    out.count(len(with_cpus), "NUMA nodes")
