"""SAS PHYs and what is attached to them, from /sys/class/sas_phy.

Kernel source: drivers/scsi/scsi_transport_sas.c (the SAS transport class); the
attributes are listed in Documentation/ABI (sas_phy, sas_port, sas_device, sas_end_device
classes). Layout, as the transport class builds it below a SCSI host:

    hostH/phy-H:N/                     a PHY of the HBA (phy-H:E:N on expander E)
        sas_phy/phy-H:N/               its attributes (what /sys/class/sas_phy/phy-H:N links to)
        port -> ../port-H:P            the port the PHY belongs to, only while it has one
    hostH/port-H:P/
        phy-H:N -> ../phy-H:N          one link per PHY of a (wide) port
        end_device-H:P/                the device at the far end (expander-H:X for an expander)
            sas_device/end_device-H:P/ device_type, sas_address, target_port_protocols...
            targetH:0:T/H:0:T:L/block/sdX

PHY attributes: negotiated_linkrate, minimum_linkrate, maximum_linkrate (programmed),
minimum_linkrate_hw, maximum_linkrate_hw, spelled "1.5 Gbit", "3.0 Gbit", "6.0 Gbit",
"12.0 Gbit", "22.5 Gbit", or a state without a rate: "Unknown", "Phy disabled",
"Link Rate failed", "Spin-up hold" (and an empty line for states the kernel has no name
for, such as a port selector or a reset in progress). The four link error counters
(invalid_dword_count, running_disparity_error_count, loss_of_dword_sync_count,
phy_reset_problem_count) are asked from the HBA (or over SMP from an expander) on every
read, so they are read apart (read_errors) and not on every scrape; a driver that cannot
answer returns an error for the read, and the counter is left out.

The far end's capability: an expander's own PHYs are SAS PHYs too
(hostH/port-H:P/expander-H:X/phy-H:X:N, class sas_phy), each with its
maximum_linkrate_hw; `SasPhy.parent` names the device a PHY belongs to. A SATA drive
behind the HBA reports its link capability in the IDENTIFY data that the ATA Information
VPD page carries (the SCSI device's vpd_pg89; readers.ata_identify). A SAS drive's
capability is in its Phy Control And Discover mode page (privileged): readers.sas_pcd,
read by a background task.
"""

from __future__ import annotations

import os
import re
from functools import partial
from typing import Dict, List, Optional, Tuple

from storpath.base.records import datarecord
from storpath.base.parse import parse_identity, parse_int, parse_sas_rate
from storpath.base.problems import DEBUG, INFO, WARNING, Problem
from storpath.readers.ata_identify import UNREPORTED, SataCapability, capability_of, parse_vpd_pg89
from storpath.readers.block import scsi_devices_below
from storpath.base.roots import Roots
from storpath.base.sysfs import list_dir, read_attr_noting, read_bytes

# The kernel's names of link states that carry no rate (sas_linkspeed_names). The empty
# string is what the kernel prints for a state it has no name for.
LINK_STATES = frozenset({"Unknown", "Phy disabled", "Link Rate failed", "Spin-up hold", ""})

RATE_ATTRIBUTES = ("negotiated_linkrate", "minimum_linkrate", "maximum_linkrate", "minimum_linkrate_hw",
                   "maximum_linkrate_hw")
ERROR_COUNTERS = ("invalid_dword_count", "running_disparity_error_count", "loss_of_dword_sync_count",
                  "phy_reset_problem_count")

# What this reader reads (storpath capture takes these; see commands/capture.py).
CAPTURE_SYSFS = (
    "class/sas_phy/*/{negotiated_linkrate,minimum_linkrate,maximum_linkrate,minimum_linkrate_hw,maximum_linkrate_hw,"
    "invalid_dword_count,running_disparity_error_count,loss_of_dword_sync_count,phy_reset_problem_count,sas_address,"
    "device_type,initiator_port_protocols,target_port_protocols,enable}",
    "class/sas_phy/*/../../port",
    "class/sas_phy/*/../../port/{end_device,expander}-*/sas_device/*/{sas_address,device_type,target_port_protocols}",
    "class/sas_phy/*/../../port/end_device-*/target*/*/block/*",
    "class/sas_phy/*/../../port/end_device-*/target*/*/vpd_pg89",
)

_REMOTE = re.compile(r"^(end_device|expander)-\d+:\d+(?::\d+)?$")
VPD_PG89_BYTES = 1024  # the page is 572 bytes


@datarecord(frozen=True)
class SasRemote:
    """The device at the far end of a PHY's port: an end device or an expander."""

    name: str  # end_device-0:3, expander-0:0
    device_type: Optional[str]  # "end device", "edge expander", "fanout expander"
    sas_address: Optional[str]  # 0x4433221103000000
    target_port_protocols: Optional[str]  # "ssp", "sata", "smp", "none"
    block_devices: Tuple[str, ...]  # sdd; empty for an expander or a device without a disk
    # A SATA drive's IDENTIFY words 76/77 from vpd_pg89; UNREPORTED for a SAS drive, an
    # expander, or a kernel or HBA that gives no ATA Information VPD page.
    sata_capability: SataCapability = UNREPORTED


@datarecord(frozen=True)
class SasPhyErrors:
    """The link error counters of one PHY (None: the driver did not answer)."""

    invalid_dwords: Optional[int]
    running_disparity_errors: Optional[int]
    loss_of_dword_sync: Optional[int]
    phy_reset_problems: Optional[int]


NO_ERRORS_READ = SasPhyErrors(None, None, None, None)


@datarecord(frozen=True)
class SasPhy:
    """One SAS PHY (an HBA's or an expander's): its address, protocols, link rates, port, far end."""

    name: str  # phy-0:3, phy-0:1:12 (a PHY of expander 1)
    sas_address: Optional[str]  # the PHY's own address (the HBA's or the expander's)
    device_type: Optional[str]  # the PHY's own device type: "end device" on an HBA, "edge expander"...
    initiator_port_protocols: Optional[str]
    target_port_protocols: Optional[str]
    # Physical link rates in bit transfers per second ("3.0 Gbit" is 3e9). None when the
    # attribute holds a state or is missing; the state is kept for the negotiated rate.
    negotiated_rate: Optional[float]
    negotiated_state: Optional[str]  # "Link Rate failed" ...; None when a rate was negotiated
    minimum_rate: Optional[float]  # programmed minimum
    maximum_rate: Optional[float]  # programmed maximum
    hardware_minimum_rate: Optional[float]
    hardware_maximum_rate: Optional[float]
    enabled: Optional[bool]  # the `enable` attribute, present when the driver can switch PHYs
    port: Optional[str]  # port-0:3; None while the PHY is in no port
    attached: Optional[SasRemote]
    parent: Optional[str] = None  # the device the PHY belongs to: host0, expander-0:1

    @property
    def link_up(self) -> bool:
        return self.negotiated_rate is not None


def parse_phy_link_rate(text: Optional[str]) -> Tuple[Optional[float], Optional[str], Optional[str]]:
    """(rate in bits/s, state, problem) of one link rate attribute.

    '6.0 Gbit' -> (6e9, None, None); 'Link Rate failed' -> (None, 'Link Rate failed', None);
    garbage -> (None, None, 'unrecognised ...'); missing -> (None, None, None)."""
    if text is None:
        return None, None, None
    text = text.strip()
    rate, _ = parse_sas_rate(text)
    if rate is not None:
        if rate <= 0:
            return None, None, f"unrecognised link rate {text!r}"
        return rate, None, None
    if text in LINK_STATES:
        return None, text, None
    return None, None, f"unrecognised link rate {text!r}"


def parse_counter(text: Optional[str]) -> Optional[int]:
    """A link error counter: the kernel prints an unsigned 32-bit number."""
    return parse_int(text, minimum=0, maximum=0xFFFFFFFF)


def parse_sas_address(text: Optional[str]) -> Optional[str]:
    """'0x500605b0000272b0' -> the same, lower case with 16 digits; anything else None."""
    if text is None:
        return None
    text = text.strip().lower()
    if not re.fullmatch(r"0x[0-9a-f]{1,16}", text):  # int(, 16) would take '_' and other scripts' digits
        return None
    return "0x%016x" % int(text, 16)


def parse_enable(text: Optional[str]) -> Optional[bool]:
    if text is None:
        return None
    text = text.strip()
    if text in ("0", "1"):
        return text == "1"
    return None


def _problem(phy: str, attribute: str, reason: str, level: int = WARNING) -> Problem:
    return Problem("SAS PHY attribute not usable, leaving it out",
                   (("phy", phy), ("attribute", attribute), ("reason", reason)), level)


def _unreadable(phy: str, attribute: str, reason: str) -> Problem:
    # Link error counters are fetched from the HBA on each read; drivers refuse
    # (EINVAL, EIO...) for PHYs they cannot ask, which is not worth a warning.
    return _problem(phy, attribute, reason, INFO if attribute in ERROR_COUNTERS else WARNING)


class SasReader:
    """Reads every SAS PHY. Holds no state; one broken PHY never hides the others."""

    def __init__(self, roots: Roots):
        self.roots = roots

    def read_errors(self) -> Tuple[Dict[str, SasPhyErrors], List[Problem]]:
        """The link error counters of every PHY, and the counters that could not be read.
        Each read of a counter makes the driver ask the HBA (a config page) or, for an
        expander's PHY, send an SMP request over the SAS link: slow enough to belong in a
        background task, not in a scrape."""
        base = self.roots.sys("class", "sas_phy")
        errors: Dict[str, SasPhyErrors] = {}
        problems: List[Problem] = []
        for name in list_dir(base, self.roots.sysfs):
            attrs = os.path.realpath(os.path.join(base, name))
            if not os.path.isdir(attrs):
                continue
            phy_errors = self._errors(name, attrs, problems)
            if os.path.isdir(attrs):
                errors[name] = phy_errors
        return errors, problems

    def _errors(self, name: str, attrs: str, problems: List[Problem]) -> SasPhyErrors:
        counters = {}
        unreadable = partial(_unreadable, name)
        for attr in ERROR_COUNTERS:
            text = read_attr_noting(attrs, attr, problems, unreadable)
            counters[attr] = parse_counter(text)
            if text is not None and counters[attr] is None:
                problems.append(_problem(name, attr, f"not a counter: {text!r}"))
        return SasPhyErrors(invalid_dwords=counters["invalid_dword_count"],
                            running_disparity_errors=counters["running_disparity_error_count"],
                            loss_of_dword_sync=counters["loss_of_dword_sync_count"],
                            phy_reset_problems=counters["phy_reset_problem_count"])

    def read(self) -> Tuple[List[SasPhy], List[Problem]]:
        """Every PHY with its rates, port and attached device (cheap: the kernel answers
        these from what the driver stored; the link error counters are slow: read_errors,
        which the exporter runs in the background), and the attributes that could not be
        used."""
        base = self.roots.sys("class", "sas_phy")
        phys: List[SasPhy] = []
        problems: List[Problem] = []
        for name in list_dir(base, self.roots.sysfs):
            try:
                phy = self._read_phy(name, os.path.join(base, name), problems)
            except OSError as exc:  # a PHY removed while it was read
                problems.append(Problem("SAS PHY vanished while reading it", (("phy", name), ("err", str(exc))),
                                        DEBUG))
                continue
            if phy is not None:
                phys.append(phy)
        return phys, problems

    def _read_phy(self, name: str, class_link: str, problems: List[Problem]) -> Optional[SasPhy]:
        attrs = os.path.realpath(class_link)
        if not os.path.isdir(attrs):
            return None  # removed between listing and reading
        unreadable = partial(_unreadable, name)
        read = lambda attr: read_attr_noting(attrs, attr, problems, unreadable)  # noqa: E731
        rates = {}
        negotiated_state = None
        for attr in RATE_ATTRIBUTES:
            rate, state, problem = parse_phy_link_rate(read(attr))
            if problem:
                problems.append(_problem(name, attr, problem))
            rates[attr] = rate
            if attr == "negotiated_linkrate":
                negotiated_state = state
        sas_address_text = read("sas_address")
        sas_address = parse_sas_address(sas_address_text)
        if sas_address_text is not None and sas_address is None:
            problems.append(_problem(name, "sas_address", f"unrecognised {sas_address_text!r}"))
        # The PHY's device is two levels above its attribute folder (phy-H:N/sas_phy/phy-H:N).
        device_dir = os.path.dirname(os.path.dirname(attrs))
        port_dir = None
        port_link = os.path.join(device_dir, "port")
        if os.path.islink(port_link):
            resolved = os.path.realpath(port_link)
            if os.path.isdir(resolved):
                port_dir = resolved
        phy = SasPhy(
            name=name,
            sas_address=sas_address,
            device_type=parse_identity(read("device_type")),
            initiator_port_protocols=parse_identity(read("initiator_port_protocols")),
            target_port_protocols=parse_identity(read("target_port_protocols")),
            negotiated_rate=rates["negotiated_linkrate"],
            negotiated_state=negotiated_state,
            minimum_rate=rates["minimum_linkrate"],
            maximum_rate=rates["maximum_linkrate"],
            hardware_minimum_rate=rates["minimum_linkrate_hw"],
            hardware_maximum_rate=rates["maximum_linkrate_hw"],
            enabled=parse_enable(read("enable")),
            port=os.path.basename(port_dir) if port_dir else None,
            attached=self._remote(name, port_dir, problems) if port_dir else None,
            parent=os.path.basename(os.path.dirname(device_dir)) or None,
        )
        if not os.path.isdir(attrs):
            return None  # vanished mid-read: what was read may be half of it
        return phy

    def _remote(self, phy: str, port_dir: str, problems: List[Problem]) -> Optional[SasRemote]:
        remotes = [entry for entry in list_dir(port_dir) if _REMOTE.match(entry)]
        if not remotes:
            return None
        remote = remotes[0]
        remote_dir = os.path.join(port_dir, remote)
        attrs = os.path.join(remote_dir, "sas_device", remote)
        unreadable = partial(_unreadable, phy)
        address_text = read_attr_noting(attrs, "sas_address", problems, unreadable)
        luns = scsi_devices_below(remote_dir) if remote.startswith("end_device") else []
        return SasRemote(
            name=remote,
            device_type=parse_identity(read_attr_noting(attrs, "device_type", problems, unreadable)),
            sas_address=parse_sas_address(address_text),
            target_port_protocols=parse_identity(read_attr_noting(attrs, "target_port_protocols", problems, unreadable)),
            block_devices=tuple(sorted(disk for lun in luns for disk in list_dir(os.path.join(lun, "block")))),
            sata_capability=sata_capability_below(phy, luns, problems),
        )


def sata_capability_below(phy: str, luns: List[str], problems: List[Problem]) -> SataCapability:
    """The SATA link capability the first of an end device's SCSI devices (`luns`:
    block.scsi_devices_below) reports in its vpd_pg89 (UNREPORTED when none has the page:
    a SAS drive, or an older kernel)."""
    for lun_dir in luns:
        words, problem = parse_vpd_pg89(read_bytes(os.path.join(lun_dir, "vpd_pg89"), VPD_PG89_BYTES))
        if problem:
            problems.append(_problem(phy, f"{os.path.basename(lun_dir)}/vpd_pg89", problem, INFO))
        if words is not None:
            return capability_of(words)
    return UNREPORTED
