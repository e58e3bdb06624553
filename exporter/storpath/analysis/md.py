"""Where an md array's members sit: the NUMA nodes behind them.

An array whose members hang off different NUMA nodes makes every stripe cross the
inter-socket link for part of its I/O; the operator sees it as one number per array.
Pure functions: the collector passes in what the readers found.
"""

from __future__ import annotations

from typing import Dict, FrozenSet, Iterable, Mapping, Optional

from storpath.base.records import datarecord
from storpath.readers.md import MdArray


@datarecord(frozen=True)
class MemberPlacement:
    """Where one md array's members sit: the NUMA nodes behind them, and how many have no known node."""

    numa_nodes: FrozenSet[int]  # nodes of the members whose PCI function reports one
    unplaced: int  # members with no known node (virtual disks, no PCI function, numa_node -1)


def member_placement(arrays: Iterable[MdArray], disk_address: Mapping[str, Optional[str]],
                     address_node: Mapping[str, Optional[int]]) -> Dict[str, MemberPlacement]:
    """Per array, the NUMA nodes of its members' PCI functions.

    disk_address: whole-disk name -> PCI address (storpath.readers.block);
    address_node: PCI address -> numa_node (-1 or None when the firmware did not say).
    Faulty members are left out: they carry no I/O.
    """
    result = {}
    for array in arrays:
        nodes = set()
        unplaced = 0
        for member in array.members:
            if "faulty" in member.state:
                continue
            address = disk_address.get(member.disk)
            node = address_node.get(address) if address else None
            if node is None or node < 0:
                unplaced += 1
            else:
                nodes.add(node)
        result[array.name] = MemberPlacement(numa_nodes=frozenset(nodes), unplaced=unplaced)
    return result
