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
from storpath.readers.pci import PCI_ADDRESS
from storpath.roots import Roots
from storpath.sysfs import list_dir, read_attr

LOG = log.get("numa")

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


def parse_cpulist(text: Optional[str]) -> Optional[Tuple[int, ...]]:
    """'0-3,8,10-11' -> (0, 1, 2, 3, 8, 10, 11); '' -> (); malformed -> None."""
    if text is None:
        return None
    text = text.strip()
    if not text:
        return ()
    cpus = []
    for part in text.split(","):
        first, dash, last = part.partition("-")
        try:
            start = int(first, 10)
            end = int(last, 10) if dash else start
        except ValueError:
            return None
        if start < 0 or end < start:
            return None
        cpus.extend(range(start, end + 1))
    return tuple(sorted(set(cpus)))


def parse_numa_node(text: Optional[str]) -> Optional[int]:
    """A device's numa_node: a node number or -1; anything else None."""
    if text is None:
        return None
    try:
        value = int(text.strip(), 10)
    except ValueError:
        return None
    return value if value >= -1 else None


def _once(key: tuple, msg: str, **fields) -> None:
    log.once(LOG, logging.WARNING, ("numa",) + key, msg, **fields)


def read_nodes(roots: Roots) -> List[NumaNode]:
    base = roots.sys("devices", "system", "node")
    nodes = []
    for entry in list_dir(base):
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
    for entry in list_dir(base):
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


def read_pci_numa(roots: Roots) -> List[PciNuma]:
    base = roots.sys("bus", "pci", "devices")
    devices = []
    for address in list_dir(base):
        if not PCI_ADDRESS.match(address):
            continue
        path = os.path.join(base, address)
        class_text = read_attr(os.path.join(path, "class"))
        try:
            class_code = int(class_text, 16) if class_text else None
        except ValueError:
            class_code = None
        numa_text = read_attr(os.path.join(path, "numa_node"))
        numa_node = parse_numa_node(numa_text)
        if numa_text is not None and numa_node is None:
            _once((address, "numa_node"), "PCI numa_node not usable, leaving it out", address=address,
                  value=numa_text)
        if class_text is None and numa_text is None and not os.path.isdir(path):
            continue  # removed while it was read
        devices.append(PciNuma(address=address, class_code=class_code, numa_node=numa_node))
    return devices
