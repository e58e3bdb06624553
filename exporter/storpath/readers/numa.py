"""NUMA nodes, the CPU topology and the NUMA node of PCI devices.

Sources (Documentation/ABI/stable/sysfs-devices-node, Documentation/ABI/stable/
sysfs-devices-system-cpu, Documentation/ABI/testing/sysfs-bus-pci):
- /sys/devices/system/node/nodeN/cpulist: the CPUs of node N as a range list
  ("0-23,48-71"; empty for a node with memory only). No node folder at all on a kernel
  built without NUMA support.
- /sys/devices/system/cpu/cpuN/topology/physical_package_id: the socket of CPU N (only
  present while the CPU is online).
- /sys/bus/pci/devices/*/numa_node: the node the firmware placed the device on, -1 when
  the firmware did not say (no _PXM in ACPI); missing without NUMA support.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from storpath import log
from storpath.roots import Roots
from storpath.sysfs import list_dir, parse_int, parse_numa_node, read_attr  # noqa: F401 (parse_numa_node re-exported)

LOG = log.get("numa")

# What this reader reads (storpath capture takes these). The online lists tell the numa
# collector when to read the topology again; numa_node and class come through the PCI reader.
CAPTURE_SYSFS = (
    "devices/system/node/node*/cpulist",
    "devices/system/cpu/cpu*/topology/physical_package_id",
    "devices/system/node/online",
    "devices/system/cpu/online",
)

_NODE = re.compile(r"^node(\d+)$")
_CPU = re.compile(r"^cpu(\d+)$")


@dataclass(frozen=True)
class NumaNode:
    node: int
    cpulist: str  # the kernel's text, "0-23,48-71"; "" for a memory-only node
    cpus: Tuple[int, ...]


@dataclass(frozen=True)
class PciNuma:
    address: str
    class_code: Optional[int]  # 24-bit PCI class code
    numa_node: Optional[int]  # -1: the firmware did not say; None: not readable

    @property
    def is_storage(self) -> bool:
        """Mass storage controllers (PCI base class 0x01): NVMe, SATA/AHCI, SAS, RAID."""
        return self.class_code is not None and self.class_code >> 16 == 0x01


# The most CPUs a Linux kernel supports (NR_CPUS of MAXSMP builds): a list beyond is garbage.
MAX_CPUS = 8192


def parse_cpulist(text: Optional[str]) -> Optional[Tuple[int, ...]]:
    """'0-3,8,10-11' -> (0, 1, 2, 3, 8, 10, 11); '' -> (); malformed -> None."""
    if text is None:
        return None
    text = text.strip()
    if not text:
        return ()
    cpus = set()  # a set: a list repeating one range stays small
    for part in text.split(","):
        first, dash, last = part.partition("-")
        start = parse_int(first, maximum=MAX_CPUS - 1)
        end = parse_int(last, maximum=MAX_CPUS - 1) if dash else start
        if start is None or end is None or end < start:
            return None
        cpus.update(range(start, end + 1))
    return tuple(sorted(set(cpus)))


def _once(key: tuple, msg: str, **fields) -> None:
    log.once(LOG, logging.WARNING, ("numa",) + key, msg, **fields)


def read_online(roots: Roots) -> Tuple[Optional[str], Optional[str]]:
    """The kernel's lists of online NUMA nodes and CPUs: the topology changes only with them."""
    return (read_attr(roots.sys("devices", "system", "node", "online")),
            read_attr(roots.sys("devices", "system", "cpu", "online")))


def read_nodes(roots: Roots) -> List[NumaNode]:
    base = roots.sys("devices", "system", "node")
    nodes = []
    for entry in list_dir(base, roots.sysfs):
        match = _NODE.match(entry)
        if not match:
            continue
        text = read_attr(os.path.join(base, entry, "cpulist"))
        cpus = parse_cpulist(text)
        if cpus is None:
            if text is not None:
                _once((entry, "cpulist"), "NUMA node cpulist not usable, leaving the node out", node=entry,
                      value=text)
            continue
        nodes.append(NumaNode(node=int(match.group(1)), cpulist=text.strip(), cpus=cpus))
    return sorted(nodes, key=lambda n: n.node)


def read_cpu_packages(roots: Roots) -> Dict[int, int]:
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
            _once((entry, "physical_package_id"), "CPU socket id not usable, leaving the CPU out", cpu=entry,
                  value=text)
            continue
        if package >= 0:
            packages[int(match.group(1))] = package
    return packages


def pci_numa(devices) -> List[PciNuma]:
    """NUMA node and class of every PCI function, from the PCI reader's records (which
    read `numa_node` and `class` once per device instance and log a bad value once)."""
    return [PciNuma(address=d.address, class_code=d.static.class_code, numa_node=d.static.numa_node)
            for d in devices]


def read_pci_numa(roots: Roots) -> List[PciNuma]:
    """One-shot read, for callers without a PCI read at hand."""
    from storpath.readers.pci import PciReader

    return pci_numa(PciReader(roots).read())