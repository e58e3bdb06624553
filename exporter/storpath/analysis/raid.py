"""Drives behind hardware RAID controllers, judged with the one link vocabulary
(storpath.analysis.expectation: the port is the controller's, the far end the drive): a
drive's link should run at the lower of the controller port's capability and the drive's own.

The ends, from whatever source gives them (readers.raid.records):
- the controller's: storcli's "Device Interface" (SAS-12G), arcconf's "Global Max SAS Phy
  Link Rate"; ssacli and MegaCli's listings name none;
- the drive's: storcli "Device Speed" / storcli2 "Capable Speed", MegaCli "Device Speed",
  arcconf "Programmed Max Speed" or per-PHY "Maximum Link Rate", newer ssacli "PHY Maximum
  Link Rate", and smartctl's IDENTIFY word 76 through the controller for a SATA drive.

`basis`, as for SAS PHYs: both_ends (verifiable: a rate below expected is a fault),
device_only (the drive's capability is known, the controller's is not: a rate below it may
be the controller's limit, so it is not called slow: MegaCli's 8704ELP holds 6 Gb/s SAS
drives at 3 Gb/s by design), none (the drive's capability is unknown: ssacli's P212 shelf
at 1.5 Gbit/s is reported with its rate and "capability unknown", not as a fault).

Behind an expander the tools' rate is the controller-to-expander link: storcli shows Link
Speed 12.0Gb/s for a 6.0Gb/s SATA drive there (arcconf's Transfer Speed likewise). A rate above
the drive's own capability cannot be the drive's link: it is decided here, from the records'
measured rate and capability (whichever source gave it, smartctl included), and the drive's own
link is then unknown (reason RATE_IS_EXPANDER_LINK): neither a fault nor used as the drive's
rate (`own_link_rate`). The records keep the rate the tool gave.
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Tuple

from storpath.analysis.expectation import (BOTH_ENDS, DEVICE_ONLY, FAR_END_UNKNOWN, NONE, PORT_LIMIT_UNKNOWN,
                                          RATE_IS_EXPANDER_LINK, LinkExpectation, lower_of)
from storpath.readers.raid.records import RaidController, RaidDrive, RaidVolume

__all__ = ["BOTH_ENDS", "DEVICE_ONLY", "NONE", "FAR_END_UNKNOWN", "PORT_LIMIT_UNKNOWN", "RATE_IS_EXPANDER_LINK",
           "rate_is_expander_link", "own_link_rate", "drive_expectation", "below_expected", "cache_fell_back", "volume_members",
           "unverifiable_reason", "judged", "controllers_by_name", "off_strip"]


def rate_is_expander_link(drive: RaidDrive) -> bool:
    """The tool's rate exceeds what the drive can do: it is the controller-to-expander link
    the drive sits behind, not the drive's own."""
    return drive.negotiated_rate is not None and drive.capability is not None \
        and drive.negotiated_rate > drive.capability


def own_link_rate(drive: RaidDrive) -> Optional[float]:
    """The rate of the drive's own link: the tool's rate unless it is the expander's link."""
    return None if rate_is_expander_link(drive) else drive.negotiated_rate


def drive_expectation(drive: RaidDrive, controller: Optional[RaidController]) -> LinkExpectation:
    """The rate `drive`'s link should run at: the lower of its controller's port rate and
    its own capability."""
    port = controller.port_rate if controller is not None else None
    far_end = drive.capability
    if rate_is_expander_link(drive):
        # Link Speed > Device Speed: the drive sits behind an expander whose own link to the
        # drive is not reported; the expected rate is still the lower of the ends known.
        expected = min(port, far_end) if port is not None and far_end is not None else far_end
        return LinkExpectation(expected, port, far_end, NONE, RATE_IS_EXPANDER_LINK)
    return lower_of(port, far_end, PORT_LIMIT_UNKNOWN)


def below_expected(drive: RaidDrive, expectation: LinkExpectation) -> bool:
    """The drive's link runs below what both ends can do (verifiable only)."""
    rate = own_link_rate(drive)
    return expectation.verifiable and rate is not None and expectation.expected is not None \
        and rate < expectation.expected


def unverifiable_reason(drive: RaidDrive, expectation: LinkExpectation) -> str:
    """What is unknown about a drive whose link cannot be judged, in words for `check`."""
    if expectation.reason == RATE_IS_EXPANDER_LINK:
        return "behind an expander: the reported rate is the controller-to-expander link, the drive's own is unknown"
    if expectation.reason == FAR_END_UNKNOWN:
        return "the drive's capability is unknown (the tool gives none; smartctl through the controller could)"
    if expectation.reason == PORT_LIMIT_UNKNOWN:
        return "the controller port's maximum is unknown (the tool names none)"
    return expectation.reason


def cache_fell_back(volume: RaidVolume) -> bool:
    """Configured write-back, writing through now: the battery or CacheVault is failed,
    missing or relearning (writes several times slower)."""
    return volume.write_back_configured is True and volume.write_back_current is False


def off_strip(start_bytes: Optional[int], strip_bytes: Optional[int]) -> bool:
    """A partition on a RAID volume that does not start on a strip boundary: writes the size of
    a strip span two drives, and a full-stripe write on parity RAID becomes a read-modify-write
    (the partition alignment storpath checks against the disk's physical block, here against
    the volume's strip)."""
    return bool(start_bytes is not None and strip_bytes and start_bytes % strip_bytes)


def volume_members(volume: RaidVolume, drives: Iterable[RaidDrive]) -> List[RaidDrive]:
    return [d for d in drives if d.controller == volume.controller and d.volume == volume.id]


def controllers_by_name(controllers: Iterable[RaidController]) -> Dict[str, RaidController]:
    return {c.name: c for c in controllers}


def judged(drives: Iterable[RaidDrive], controllers: Iterable[RaidController]
           ) -> List[Tuple[RaidDrive, Optional[RaidController], LinkExpectation]]:
    """Every drive with its controller and expectation (the collector's and check's one pass)."""
    table = controllers_by_name(controllers)
    out = []
    for drive in drives:
        controller = table.get(drive.controller)
        out.append((drive, controller, drive_expectation(drive, controller)))
    return out
