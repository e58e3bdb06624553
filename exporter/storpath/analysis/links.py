"""What a SAS PHY's or SATA link's rate should be: the lower of its two ends' capability.

As for PCIe (analysis.pcie), a link trains to the fastest rate both ends support, so the
rate to expect is the lower of the local port's hardware maximum and the far end's. The far
end's capability is known for a SATA drive (IDENTIFY word 76, readers.ata_identify) and an
expander (its own PHYs' maximum_linkrate_hw) and for a SAS drive whose Phy Control And Discover
mode page a background task read (readers.sas_pcd: the HARDWARE MAXIMUM PHYSICAL LINK RATE of
the drive PHY attached to this one); without that page a SAS drive's link has no expected
rate: it is unverifiable, not slow.

The verdict is an analysis.expectation.LinkExpectation: device_only for a SATA port whose
SControl speed field is 0 (hw_sata_spd_limit `<unknown>`: port_limit_unset), none when the
far end's capability (far_end_unknown) or the PHY's own limit (port_limit_unknown) is not
known.
"""

from __future__ import annotations

from typing import Dict, Iterable, Mapping, Optional, Sequence

from storpath.analysis.expectation import NONE, PORT_LIMIT_UNKNOWN, PORT_LIMIT_UNSET, LinkExpectation, lower_of
from storpath.readers.ata import AtaLink
from storpath.readers.sas import SasPhy
from storpath.readers.sas_pcd import DrivePhy, DrivePhysResult


def sata_expectation(link: AtaLink) -> LinkExpectation:
    """The rate a SATA link should run at: the lower of the port's hardware limit
    (hw_sata_spd_limit) and the drive's fastest generation (IDENTIFY word 76)."""
    return lower_of(link.hardware_limit, link.device_capability.maximum, PORT_LIMIT_UNSET)


def expander_capabilities(phys: Iterable[SasPhy]) -> Dict[str, float]:
    """Expander (expander-H:X) -> the highest maximum_linkrate_hw of its own PHYs."""
    out: Dict[str, float] = {}
    for phy in phys:
        if phy.parent and phy.parent.startswith("expander-") and phy.hardware_maximum_rate is not None:
            out[phy.parent] = max(out.get(phy.parent, 0.0), phy.hardware_maximum_rate)
    return out


def drive_phys(phys: Iterable[SasPhy], results: Optional[Mapping[str, DrivePhysResult]]) -> Dict[str, Sequence[DrivePhy]]:
    """End device -> its SAS drive's PHYs (Phy Control And Discover page), for the drives
    whose page was read and whose end device still has the address it had then (a drive
    swapped in under the same end device name is not judged by its predecessor's page)."""
    if not results:
        return {}
    out: Dict[str, Sequence[DrivePhy]] = {}
    for phy in phys:
        remote = phy.attached
        if remote is None or remote.name in out:
            continue
        result = results.get(remote.name)
        if result is not None and result.phys and result.sas_address == remote.sas_address:
            out[remote.name] = result.phys
    return out


def drive_capability(phy: SasPhy, phys: Optional[Sequence[DrivePhy]]) -> Optional[float]:
    """The HARDWARE MAXIMUM PHYSICAL LINK RATE of the drive PHY at the far end of `phy`:
    the one whose ATTACHED SAS ADDRESS is this PHY's own (a dual-port drive's other PHY
    faces another HBA or expander); when none names it, the drive's PHYs' common maximum
    if they agree, else unknown."""
    if not phys:
        return None
    facing = [p.hardware_maximum_rate for p in phys
              if phy.sas_address is not None and p.attached_sas_address == phy.sas_address]
    rates = facing or [p.hardware_maximum_rate for p in phys]
    known = {r for r in rates if r is not None}
    if len(known) != 1 or (not facing and None in rates):
        return None
    return known.pop()


def sas_expectation(phy: SasPhy, expanders: Dict[str, float],
                    drives: Optional[Mapping[str, Sequence[DrivePhy]]] = None) -> Optional[LinkExpectation]:
    """The rate a SAS PHY with something attached should negotiate: the lower of its
    maximum_linkrate_hw and the attached device's capability (an expander's PHYs, a SATA
    drive's IDENTIFY word 76, a SAS drive's Phy Control And Discover page: `drives`, from
    drive_phys). None when nothing is attached."""
    remote = phy.attached
    if remote is None:
        return None
    if remote.name.startswith("expander-"):
        far_end = expanders.get(remote.name)
    else:
        far_end = remote.sata_capability.maximum
        if far_end is None and drives:
            far_end = drive_capability(phy, drives.get(remote.name))
    if far_end is not None and phy.hardware_maximum_rate is None:
        return LinkExpectation(None, None, far_end, NONE, PORT_LIMIT_UNKNOWN)
    return lower_of(phy.hardware_maximum_rate, far_end, PORT_LIMIT_UNKNOWN)


def at_lowered_minimum(phy: SasPhy) -> bool:
    """The PHY stepped down to a programmed minimum below its hardware maximum: a fault
    whatever the far end does (the Dell R900 backplane)."""
    return (phy.attached is not None and phy.negotiated_rate is not None and phy.minimum_rate is not None
            and phy.hardware_maximum_rate is not None and phy.negotiated_rate <= phy.minimum_rate
            and phy.minimum_rate < phy.hardware_maximum_rate)
