"""The PCI tree's shape: the walk from a device up to its root port, and port types.

Port types come from each device's PCI Express capability where config space was
readable (storpath.readers.pci), otherwise from the device's place in the tree.
"""

from __future__ import annotations

from typing import Iterator, List, Mapping, Optional, Tuple

from storpath.readers.pci import PciDevice

# Ports whose link leads away from the root complex, to the device below them.
DOWNSTREAM_FACING = frozenset({"root_port", "downstream_port", "pci_to_pcie_bridge"})

PCI_CLASS_BRIDGE_PCI = 0x0604

MAX_DEPTH = 64  # deeper than any PCI tree: a guard against a loop in a broken one


def path_to_root(device: Optional[PciDevice], by_address: Mapping[str, PciDevice]) -> Iterator[PciDevice]:
    """`device` and every device above it (its bridge, that bridge's bridge...), nearest
    first, up to the last one below a host bridge. The one walk up the PCI tree."""
    node, hops = device, 0
    while node is not None and hops < MAX_DEPTH:
        yield node
        hops += 1
        parent = node.static.parent
        node = by_address.get(parent) if parent else None


def resolve_port_types(devices: List[PciDevice]) -> None:
    """Port type from config space where it was readable, otherwise from the topology:
    a bridge straight below a host bridge is a root port, a bridge below a
    downstream-facing port is a switch's upstream port, and a bridge below an upstream
    port is a switch's downstream port. Everything else is an endpoint."""
    by_address = {d.address: d for d in devices}

    def depth(d: PciDevice) -> int:
        return sum(1 for _ in path_to_root(d, by_address))

    for device in sorted(devices, key=depth):
        static = device.static
        if static.config_port_type:
            device.port_type = static.config_port_type
            continue
        if static.class_code is not None and static.class_code >> 8 == PCI_CLASS_BRIDGE_PCI:
            parent = by_address.get(static.parent) if static.parent else None
            if parent is None:
                device.port_type = "root_port"
            elif parent.port_type in DOWNSTREAM_FACING:
                device.port_type = "upstream_port"
            elif parent.port_type == "upstream_port":
                device.port_type = "downstream_port"
            else:
                device.port_type = "unknown"
        else:
            device.port_type = "endpoint"


def with_port_types(read: Tuple[List[PciDevice], list]) -> Tuple[List[PciDevice], list]:
    """A PCI read (devices, problems) with the devices' port types filled in."""
    resolve_port_types(read[0])
    return read
