"""Platform facts: links that a board or socket wires narrower than both ends advertise.

Some links are narrow by design. Both of their ends advertise more lanes in Link
Capabilities than the socket or board routes between them, so the link trains below
"the lower maximum of both ends" on every host of that platform, and no reseat or BIOS
setting changes it. Such a link is judged against the width the platform wires (its
design), not against its ends' registers, and it is named: `check`, `tree` and
`storpath_pcie_link_design_info` say which design holds it there.

A fact is matched by what sysfs shows of the link's two ends: the vendor and device IDs
of the port end (a root port) and of the device end (a switch's upstream port). Only
facts that the platform's vendor documents belong here; a link that trains the same
narrow width on every host of a model without such a fact is a design to review, and
one that differs from its model's peers is a fault (rules/fleet.yml compares them).
"""

from __future__ import annotations

from typing import FrozenSet, Optional, Tuple

from storpath.base.records import datarecord


@datarecord(frozen=True)
class PlatformFact:
    """One link a platform wires narrow by design: its two ends' IDs, the lanes wired, the source."""

    name: str  # what the label and the reports call the design
    port_ids: FrozenSet[Tuple[str, str]]  # (vendor, device) of the port end, as sysfs spells them ("0x1022")
    device_ids: FrozenSet[Tuple[str, str]]  # (vendor, device) of the device end
    width: int  # lanes the platform wires between the two ends
    source: str  # the vendor's document that says so


FACTS: Tuple[PlatformFact, ...] = (
    # AMD's X570 chipset is attached to an AM4 processor by PCIe 4.0 x4 (AMD, "AMD X570 Chipset"
    # product specifications, amd.com: "PCIe 4.0 lanes ... CPU interface PCIe 4.0 x4"; the AM4
    # socket routes four lanes to the chipset). The chipset's switch upstream port (1022:57ad)
    # and the processor's GPP root port above it (1022:1483 on Matisse and Vermeer, 1022:1634 on
    # Renoir and Cezanne) both advertise x8 in Link Capabilities, so the link reads "x4 of x8".
    PlatformFact(
        name="amd_am4_x570_chipset_x4",
        port_ids=frozenset({("0x1022", "0x1483"), ("0x1022", "0x1634")}),
        device_ids=frozenset({("0x1022", "0x57ad")}),
        width=4,
        source="AMD X570 chipset specifications: CPU interface PCIe 4.0 x4",
    ),
)


def _ids(device) -> Tuple[str, str]:
    return ((device.static.vendor_id or "").lower(), (device.static.device_id or "").lower())


def design_of(port, device) -> Optional[PlatformFact]:
    """The platform fact that describes the link between `port` (its downstream-facing end) and
    `device` (the device end), or None. Both are storpath.readers.pci.PciDevice."""
    if port is None or device is None:
        return None
    port_ids, device_ids = _ids(port), _ids(device)
    for fact in FACTS:
        if port_ids in fact.port_ids and device_ids in fact.device_ids:
            return fact
    return None


def fact_named(name: str) -> Optional[PlatformFact]:
    for fact in FACTS:
        if fact.name == name:
            return fact
    return None
