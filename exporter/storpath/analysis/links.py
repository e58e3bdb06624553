"""What a SAS PHY's or SATA link's rate should be: the lower of its two ends' capability.

As for PCIe (analysis.pcie), a link trains to the fastest rate both ends support, so the
rate to expect is the lower of the local port's hardware maximum and the far end's. The far
end's capability is known for a SATA drive (IDENTIFY word 76, readers.ata_identify) and an
expander (its own PHYs' maximum_linkrate_hw); for a SAS drive it is not (LOG SENSE page 0x18
needs privilege), and such a link has no expected rate: it is unverifiable, not slow.

`basis` says what the verdict rests on:
- both_ends: the port's limit and the far end's capability are known (verifiable).
- device_only: the drive's capability is known but the port sets no limit (a SATA port
  whose SControl speed field is 0: hw_sata_spd_limit `<unknown>`); the expected rate is the
  drive's, but a slower port cannot be ruled out, so it is not verifiable.
- none: nothing to judge against; `reason` says why (far_end_unknown, port_limit_unknown).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, Optional

from storpath.readers.ata import AtaLink
from storpath.readers.sas import SasPhy

BOTH_ENDS = "both_ends"
DEVICE_ONLY = "device_only"
NONE = "none"

FAR_END_UNKNOWN = "far_end_unknown"
PORT_LIMIT_UNSET = "port_limit_unset"
PORT_LIMIT_UNKNOWN = "port_limit_unknown"


@dataclass(frozen=True)
class LinkExpectation:
    expected: Optional[float]  # bit transfers per second; None when nothing bounds it
    far_end: Optional[float]  # the attached device's (or expander's) capability; None unknown
    basis: str
    reason: str = ""

    @property
    def verifiable(self) -> bool:
        return self.basis == BOTH_ENDS

    def limited_by(self, port: Optional[float]) -> str:
        """Which end sets the expected rate: "port", "device", "both" (they agree), "" unknown."""
        if port is None or self.far_end is None:
            return "device" if self.basis == DEVICE_ONLY else ""
        if port == self.far_end:
            return "both"
        return "port" if port < self.far_end else "device"


def _lower(port: Optional[float], far_end: Optional[float], unset_reason: str) -> LinkExpectation:
    if far_end is None:
        return LinkExpectation(None, None, NONE, FAR_END_UNKNOWN)
    if port is None:
        return LinkExpectation(far_end, far_end, DEVICE_ONLY, unset_reason)
    return LinkExpectation(min(port, far_end), far_end, BOTH_ENDS)


def sata_expectation(link: AtaLink) -> LinkExpectation:
    """The rate a SATA link should run at: the lower of the port's hardware limit
    (hw_sata_spd_limit) and the drive's fastest generation (IDENTIFY word 76)."""
    return _lower(link.hardware_limit, link.device_capability.maximum, PORT_LIMIT_UNSET)


def expander_capabilities(phys: Iterable[SasPhy]) -> Dict[str, float]:
    """Expander (expander-H:X) -> the highest maximum_linkrate_hw of its own PHYs."""
    out: Dict[str, float] = {}
    for phy in phys:
        if phy.parent and phy.parent.startswith("expander-") and phy.hardware_maximum_rate is not None:
            out[phy.parent] = max(out.get(phy.parent, 0.0), phy.hardware_maximum_rate)
    return out


def sas_expectation(phy: SasPhy, expanders: Dict[str, float]) -> Optional[LinkExpectation]:
    """The rate a SAS PHY with something attached should negotiate: the lower of its
    maximum_linkrate_hw and the attached device's capability (an expander's PHYs, a SATA
    drive's IDENTIFY word 76). None when nothing is attached."""
    remote = phy.attached
    if remote is None:
        return None
    if remote.name.startswith("expander-"):
        far_end = expanders.get(remote.name)
    else:
        far_end = remote.sata_capability.maximum
    if far_end is not None and phy.hardware_maximum_rate is None:
        return LinkExpectation(None, far_end, NONE, PORT_LIMIT_UNKNOWN)
    return _lower(phy.hardware_maximum_rate, far_end, PORT_LIMIT_UNKNOWN)


def at_lowered_minimum(phy: SasPhy) -> bool:
    """The PHY stepped down to a programmed minimum below its hardware maximum: a fault
    whatever the far end does (the Dell R900 backplane)."""
    return (phy.attached is not None and phy.negotiated_rate is not None and phy.minimum_rate is not None
            and phy.hardware_maximum_rate is not None and phy.negotiated_rate <= phy.minimum_rate
            and phy.minimum_rate < phy.hardware_maximum_rate)
