"""The one vocabulary for what a link should do, whatever carries it: a PCIe link, a SAS PHY,
a SATA link, a drive behind a RAID controller.

A link joins two ends: the *port* (the side that faces the device: a root or switch
downstream port, an HBA's or expander's PHY, a SATA port, a RAID controller's port) and the
*far end* (the device: an endpoint, a drive, an expander's PHYs). It trains to the fastest
rate both support, so the rate to expect is the lower of the two capabilities. What the
verdict rests on is its `basis`:

- both_ends: both capabilities are known and are hardware's: the link is verifiable.
- device_only: only the far end's capability counts (the port sets no limit, or its numbers
  are a hypervisor's); the expected rate is the far end's, but a slower port cannot be
  ruled out: not verifiable.
- none: nothing to judge against.

and its `reason` one of the words below. Readers fill in the capabilities; analysis.pcie,
analysis.links (SAS, SATA), analysis.raid and analysis.virtual decide basis and reason with
these words; collectors export them as the `basis` and `reason` labels of the
*_link_verifiable families; findings and the tree word which end limits with `which_end`.
"""

from __future__ import annotations

from typing import Optional

from storpath.base.records import datarecord

# What a verdict rests on.
BOTH_ENDS = "both_ends"
DEVICE_ONLY = "device_only"
NONE = "none"

# Why it rests on less than both ends.
FAR_END_UNKNOWN = "far_end_unknown"  # the device's capability is not known (a SAS drive's page unread)
PORT_LIMIT_UNSET = "port_limit_unset"  # the port sets no limit (a SATA port's SControl speed 0)
PORT_LIMIT_UNKNOWN = "port_limit_unknown"  # the port's limit could not be read
EMULATED_PORT = "emulated_port"  # the port is a hypervisor's: its numbers are not hardware
EMULATED_DEVICE = "emulated_device"  # the device is a hypervisor's: its link is not hardware
ENDS_DISAGREE = "ends_disagree"  # the device runs wider than the port's maximum
NO_PARTNER = "no_partner"  # nothing at the other end (an empty slot, an integrated endpoint)
RATE_IS_EXPANDER_LINK = "rate_is_expander_link"  # a RAID tool's rate is the expander's link, not the drive's


@datarecord(frozen=True)
class LinkExpectation:
    """What one link should run at, in the unit of its rate (PCIe: transfers per second;
    SAS, SATA: bits per second)."""

    expected: Optional[float]  # None when nothing bounds it
    port: Optional[float]  # the port end's capability; None unknown or unset
    far_end: Optional[float]  # the device end's capability; None unknown
    basis: str = BOTH_ENDS
    reason: str = ""

    @property
    def verifiable(self) -> bool:
        return self.basis == BOTH_ENDS

    def limited_by(self) -> str:
        """Which end sets the expected rate: "port", "device", "both" (they agree), or ""
        (one is unknown)."""
        if self.basis == DEVICE_ONLY:
            return "device"
        if self.port is None or self.far_end is None:
            return ""
        if self.port == self.far_end:
            return "both"
        return "port" if self.port < self.far_end else "device"


def lower_of(port: Optional[float], far_end: Optional[float], unset_reason: str) -> LinkExpectation:
    """The expectation of a link whose port's limit is `port` and whose far end does
    `far_end`; `unset_reason` says why a port without a limit leaves only the far end."""
    if far_end is None:
        return LinkExpectation(None, port, None, NONE, FAR_END_UNKNOWN)
    if port is None:
        return LinkExpectation(far_end, None, far_end, DEVICE_ONLY, unset_reason)
    return LinkExpectation(min(port, far_end), port, far_end, BOTH_ENDS)


_LIMITS = {"port": "the port limits", "device": "the drive limits", "both": "both ends alike", "": "one end unknown"}


def which_end(expectation: LinkExpectation) -> str:
    """Which end sets the expected rate, in the words of `storpath check` and the tree (a
    drive's link: the far end is the drive, or the expander it hangs from)."""
    if expectation.basis == BOTH_ENDS:
        return _LIMITS[expectation.limited_by()]
    if expectation.basis == DEVICE_ONLY:
        return "unverifiable: port sets no limit"
    return "unverifiable: far end unknown"
