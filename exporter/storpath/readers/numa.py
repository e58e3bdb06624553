"""NUMA nodes, the CPU topology and the NUMA node of PCI devices.

Sources (Documentation/ABI/stable/sysfs-devices-node, Documentation/ABI/stable/
sysfs-devices-system-cpu, Documentation/ABI/testing/sysfs-bus-pci):
- /sys/devices/system/node/nodeN/cpulist: the CPUs of node N as a range list
  ("0-23,48-71"; empty for a node with memory only). No node folder at all on a kernel
  built without NUMA support.
- /sys/devices/system/cpu/possible: every CPU this boot can ever bring online ("0-95");
  a node's cpulist naming a CPU beyond it is garbage.
- /sys/devices/system/cpu/cpuN/topology/physical_package_id: the socket of CPU N (only
  present while the CPU is online).
- /sys/bus/pci/devices/*/numa_node: the node the firmware placed the device on, -1 when
  the firmware did not say (no _PXM in ACPI); missing without NUMA support.
"""

from __future__ import annotations

import os
import re
from typing import Dict, List, Mapping, Optional, Tuple

from storpath.base.records import datarecord
from storpath.base.parse import parse_int, parse_numa_node  # noqa: F401 (parse_numa_node re-exported)
from storpath.base.problems import Problem
from storpath.base.roots import Roots
from storpath.base.sysfs import list_dir, read_attr

# What this reader reads (storpath capture takes these; the online lists too, for whoever reads
# the archive); numa_node and class come through the PCI reader.
CAPTURE_SYSFS = (
    "devices/system/node/node*/cpulist",
    "devices/system/cpu/cpu*/topology/physical_package_id",
    "devices/system/node/online",
    "devices/system/cpu/online",
    "devices/system/cpu/possible",
)

_NODE = re.compile(r"^node(\d+)$")
_CPU = re.compile(r"^cpu(\d+)$")


@datarecord(frozen=True)
class NumaNode:
    """One NUMA node and its CPUs."""

    node: int
    cpulist: str  # the kernel's text, "0-23,48-71"; "" for a memory-only node
    cpus: Tuple[int, ...]


@datarecord(frozen=True)
class PciNuma:
    """One PCI function's class code and the NUMA node the firmware placed it on."""

    address: str
    class_code: Optional[int]  # 24-bit PCI class code
    numa_node: Optional[int]  # -1: the firmware did not say; None: not readable

    @property
    def is_storage(self) -> bool:
        """Mass storage controllers (PCI base class 0x01): NVMe, SATA/AHCI, SAS, RAID."""
        return self.class_code is not None and self.class_code >> 16 == 0x01


# The most CPUs a Linux kernel supports (NR_CPUS of MAXSMP builds): a list beyond is garbage.
MAX_CPUS = 8192


def parse_cpulist(text: Optional[str], cpus_possible: int = MAX_CPUS) -> Optional[Tuple[int, ...]]:
    """'0-3,8,10-11' -> (0, 1, 2, 3, 8, 10, 11); '' -> (); malformed, or naming a CPU at
    or beyond `cpus_possible`, -> None."""
    if text is None:
        return None
    text = text.strip()
    if not text:
        return ()
    cpus = set()  # a set: a list repeating one range stays small
    for part in text.split(","):
        first, dash, last = part.partition("-")
        start = parse_int(first, maximum=cpus_possible - 1)
        end = parse_int(last, maximum=cpus_possible - 1) if dash else start
        if start is None or end is None or end < start:
            return None
        cpus.update(range(start, end + 1))
    return tuple(sorted(set(cpus)))


def _note(problems: Optional[List[Problem]], msg: str, **fields) -> None:
    """A problem met, for the caller that keeps them (`problems` None: left out unsaid)."""
    if problems is not None:
        problems.append(Problem(msg, tuple(fields.items())))


def read_cpus_possible(roots: Roots) -> int:
    """How many CPUs this boot can have (the highest in cpu/possible, plus one); MAX_CPUS
    when the list is missing or unusable."""
    cpus = parse_cpulist(read_attr(roots.sys("devices", "system", "cpu", "possible")))
    return cpus[-1] + 1 if cpus else MAX_CPUS


def node_bound(roots: Roots) -> Optional[int]:
    """One past the highest NUMA node present (the node count when node ids are dense,
    as they are but on odd firmware); None on a kernel without NUMA (no node folder)."""
    nodes = [int(m.group(1)) for m in map(_NODE.match, list_dir(roots.sys("devices", "system", "node"))) if m]
    return max(nodes) + 1 if nodes else None


def read_nodes(roots: Roots, problems: Optional[List[Problem]] = None) -> List[NumaNode]:
    base = roots.sys("devices", "system", "node")
    nodes = []
    possible = None
    for entry in list_dir(base, roots.sysfs):
        match = _NODE.match(entry)
        if not match:
            continue
        text = read_attr(os.path.join(base, entry, "cpulist"))
        if possible is None:
            possible = read_cpus_possible(roots)
        cpus = parse_cpulist(text, possible)
        if cpus is None:
            if text is not None:
                _note(problems, "NUMA node cpulist not usable (malformed or naming CPUs beyond cpu/possible), "
                      "leaving the node out", node=entry, value=text, cpus_possible=possible)
            continue
        nodes.append(NumaNode(node=int(match.group(1)), cpulist=text.strip(), cpus=cpus))
    return sorted(nodes, key=lambda n: n.node)


def read_cpu_packages(roots: Roots, problems: Optional[List[Problem]] = None) -> Dict[int, int]:
    """Online CPU -> its socket (physical_package_id)."""
    base = roots.sys("devices", "system", "cpu")
    packages = {}
    for entry in list_dir(base, roots.sysfs):
        match = _CPU.match(entry)
        if not match:
            continue
        text = read_attr(os.path.join(base, entry, "topology", "physical_package_id"))
        if text is None:
            continue  # offline CPU
        try:
            package = int(text, 10)
        except ValueError:
            _note(problems, "CPU socket id not usable, leaving the CPU out", cpu=entry, value=text)
            continue
        if package >= 0:
            packages[int(match.group(1))] = package
    return packages


def plausible_node(address: str, node: Optional[int], nodes: Optional[int],
                   problems: Optional[List[Problem]] = None) -> Optional[int]:
    """A device's numa_node if it names a node present (below `nodes`, from node_bound);
    -1 (the firmware did not say) as it is; a node beyond those present None, with a
    problem. Without a node count (a kernel without NUMA) the value is taken as read."""
    if node is None or nodes is None or node < nodes:
        return node
    _note(problems, "PCI numa_node names a NUMA node that is not present, leaving it out",
          device=address, value=node, nodes=nodes)
    return None


def pci_numa(devices, nodes: Optional[int] = None, problems: Optional[List[Problem]] = None) -> List[PciNuma]:
    """NUMA node and class of every PCI function, from the PCI reader's records (which
    read `numa_node` and `class` once per device instance and report a bad value);
    with `nodes` (node_bound) a node beyond those present is left out (plausible_node)."""
    return [PciNuma(address=d.address, class_code=d.static.class_code,
                    numa_node=plausible_node(d.address, d.static.numa_node, nodes, problems))
            for d in devices]


@datarecord(frozen=True)
class NumaTopology:
    """The NUMA nodes with their CPUs, each online CPU's socket, the node bound, and the
    node of every PCI function (given the PCI reader's records)."""

    nodes: Tuple[NumaNode, ...]
    packages: Mapping[int, int]  # online CPU -> socket
    bound: Optional[int]  # node_bound()
    pci: Tuple[PciNuma, ...] = ()  # pci_numa(), with numa_node checked against `bound`


def read_numa(roots: Roots, pci_devices=()) -> Tuple[NumaTopology, List[Problem]]:
    """The topology, with the NUMA node of each of `pci_devices` (readers.pci.PciDevice),
    and what could not be used (left out of the topology, said in the problems)."""
    problems: List[Problem] = []
    nodes = tuple(read_nodes(roots, problems))
    packages = read_cpu_packages(roots, problems)
    bound = node_bound(roots)
    return NumaTopology(nodes, packages, bound, tuple(pci_numa(pci_devices, bound, problems))), problems
