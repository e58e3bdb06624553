"""Inventory verdicts: the declared layout against what is present, and a root port much
wider than the one storage controller below it (a multi-drive carrier in a slot that is
not bifurcated). Pure functions over records."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

from storpath.base.records import datarecord
from storpath.base.log import describe
from storpath.readers.inventory import KINDS, storage_kind
from storpath.readers.pci import PciDevice

# A port at least this many times wider than the device below it, and at least x8.
WIDE_PORT_RATIO = 4
WIDE_PORT_MIN_WIDTH = 8


def parse_expected(value: Any) -> Tuple[Dict[str, int], List[str]]:
    """`collectors.inventory.expected` ({kind: count}) and what is wrong with it: an
    unknown kind or a count that is not a whole number >= 0 is left out and named."""
    expected: Dict[str, int] = {}
    problems: List[str] = []
    if not isinstance(value, Mapping):
        return expected, [f"expected a mapping of kind to count, got {describe(value)}"]
    for kind, count in value.items():
        if kind not in KINDS:
            problems.append(f"unknown kind {describe(kind)} (known: {', '.join(KINDS)})")
        elif isinstance(count, bool) or not isinstance(count, int) or count < 0:
            problems.append(f"{kind}: expected a whole number of devices, got {describe(count)}")
        else:
            expected[kind] = count
    return expected, problems


def shortfalls(expected: Mapping[str, int], present: Mapping[str, int]) -> Dict[str, Tuple[int, int]]:
    """kind -> (present, expected) where fewer are present than declared."""
    return {k: (present.get(k, 0), n) for k, n in expected.items() if present.get(k, 0) < n}


@datarecord(frozen=True)
class WidePort:
    """A root port much wider than the one storage controller below it, and that controller."""

    port: PciDevice
    device: PciDevice  # the one storage controller below it


def wide_ports(devices: List[PciDevice]) -> List[WidePort]:
    """Root ports with exactly one function below them, a storage controller whose own
    maximum width is a quarter of the port's or less (x16 port, one x4 NVMe): the
    signature of a passive multi-drive carrier in a slot that is not bifurcated."""
    below: Dict[str, List[PciDevice]] = {}
    for device in devices:
        if device.static.parent:
            below.setdefault(device.static.parent, []).append(device)
    found = []
    for port in devices:
        if port.port_type != "root_port":
            continue
        children = below.get(port.address, [])
        functions = {c.address[:-2] for c in children}  # one device, whatever its functions
        if len(functions) != 1 or len(children) != 1:
            continue
        child = children[0]
        port_width: Optional[int] = port.static.max_link_width
        child_width: Optional[int] = child.static.max_link_width
        if storage_kind(child) is None or not port_width or not child_width:
            continue
        if port_width >= WIDE_PORT_MIN_WIDTH and port_width >= WIDE_PORT_RATIO * child_width:
            found.append(WidePort(port, child))
    return found
