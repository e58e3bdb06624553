"""A SAS drive's own PHYs and what they can do, from its Phy Control And Discover mode page.

sysfs says what the HBA's and the expanders' PHYs can do (maximum_linkrate_hw), and for a
SATA drive the IDENTIFY data in vpd_pg89 says what the drive can; for a SAS drive nothing
in sysfs does. The drive says it itself in the Phy Control And Discover mode page (SPL-3
section 9.2.7.5, SPL-4 section 9.2.7.5: mode page 19h, subpage 01h, the SAS protocol-specific
port mode page family), which MODE SENSE(10) reads:

    page header (8 bytes): PS | SPF (1) | PAGE CODE (19h); SUBPAGE CODE (01h);
        PAGE LENGTH (bytes 2-3, big-endian, what follows byte 3); byte 5 bits 3:0 PROTOCOL
        IDENTIFIER (6h: SAS); byte 6 GENERATION CODE; byte 7 NUMBER OF PHYS
    one 48-byte SAS phy mode descriptor per PHY:
        byte 1        PHY IDENTIFIER
        byte 4 6:4    ATTACHED DEVICE TYPE
        byte 5 3:0    NEGOTIATED LOGICAL LINK RATE
        bytes 8-15    SAS ADDRESS (the drive port's)
        bytes 16-23   ATTACHED SAS ADDRESS (the HBA's or expander's PHY at the far end)
        byte 24       ATTACHED PHY IDENTIFIER
        byte 32       PROGRAMMED MINIMUM PHYSICAL LINK RATE (7:4) | HARDWARE MINIMUM PHYSICAL LINK RATE (3:0)
        byte 33       PROGRAMMED MAXIMUM PHYSICAL LINK RATE (7:4) | HARDWARE MAXIMUM PHYSICAL LINK RATE (3:0)

Link rate codes (SPL-4 table "physical link rate"): 8h 1.5 Gbit/s, 9h 3, Ah 6, Bh 12,
Ch 22.5; below 8h a state (0h unknown, 1h disabled...) or reserved, not a rate. The
HARDWARE MAXIMUM PHYSICAL LINK RATE is what the link is judged against. The Protocol-Specific
Port log page (LOG SENSE 18h, SPL-4 section 9.2.8.1) carries the negotiated logical link
rate and the error counters of each PHY, but no hardware maximum: it is not read here.

Reading it sends a SCSI command to the drive: privileged (the device node is root's) and
possibly slow, so `read_drive_phys` is for background tasks only. In order it takes the
data from:
1. Roots.captured, when set (and then nothing else is tried). Layout, written by
   `storpath capture` and fixtures:
       <captured>/sas/<end_device>/mode-19-01.bin   the MODE SENSE(10) response, as
                                                    `sg_modes --page=0x19,0x1 --raw` prints it
   The file's mtime is when the data was read.
2. `sg_modes --page=0x19,0x1 --raw DEVICE` (sg3-utils) on the end device's first SCSI
   device (its sg node, else its block device), with a timeout.
Only SAS end devices whose target port protocols are SSP alone are asked: a SATA drive
behind the HBA answers through the HBA's SCSI/ATA translation, whose answer describes no
drive PHY, and an expander is no SCSI target.
"""

from __future__ import annotations

import os
import shutil
import time
from typing import Dict, List, Optional, Tuple

from storpath.base.records import datarecord
from storpath.base import atomicfile, privhelper
from storpath.readers.block import scsi_devices_below
from storpath.readers.sas import parse_sas_address
from storpath.base.roots import Roots
from storpath.base.subprocesses import run_command
from storpath.base.sysfs import list_dir, read_attr

CAPTURED_DIR = "sas"
CAPTURED_NAME = "mode-19-01.bin"
PAGE_CODE = 0x19
SUBPAGE_CODE = 0x01
PROTOCOL_SAS = 0x6
DESCRIPTOR_BYTES = 48
MODE_SENSE10_HEADER = 8
NO_DEVICES_REASON = "device nodes not opened (--path.sysfs replays another machine; give --path.dev or --path.captured)"

# Link rate codes of SPL-4 (8h 1.5 Gbit/s ... Ch 22.5 Gbit/s), in bit transfers per second.
LINK_RATES = {0x8: 1.5e9, 0x9: 3e9, 0xA: 6e9, 0xB: 12e9, 0xC: 22.5e9}

# What this reader reads (storpath capture takes these, and capture_commands' output).
CAPTURE_SYSFS = (
    "class/sas_device/end_device-*/{target_port_protocols,sas_address}",
    "class/sas_device/end_device-*/../../target*/*/{scsi_generic,block}/*",
)



@datarecord(frozen=True)
class DrivePhy:
    """One PHY of a SAS drive, as its Phy Control And Discover mode page describes it.
    Rates in bit transfers per second; None for a code that is no rate."""

    phy_identifier: int
    sas_address: str  # the drive port's, 0x5000cca0...
    attached_sas_address: str  # the far end's: the HBA's or expander's PHY
    negotiated_rate: Optional[float]  # NEGOTIATED LOGICAL LINK RATE
    hardware_minimum_rate: Optional[float]
    hardware_maximum_rate: Optional[float]
    programmed_minimum_rate: Optional[float]
    programmed_maximum_rate: Optional[float]


@datarecord(frozen=True)
class DrivePhysResult:
    """What one read of a drive's page gave: its PHYs, or why they are unknown."""

    sas_address: Optional[str]  # the end device's address when read: served only while it still is
    phys: Optional[Tuple[DrivePhy, ...]]
    source: Optional[str]  # captured, sg_modes
    error: Optional[str]
    read_at: float


def _rate(code: int) -> Optional[float]:
    return LINK_RATES.get(code)


def _address(data: bytes) -> str:
    return "0x%016x" % int.from_bytes(data, "big")


def parse_phy_control_discover(data: Optional[bytes]) -> Tuple[Optional[Tuple[DrivePhy, ...]], Optional[str]]:
    """(PHYs, problem) of a MODE SENSE(10) response holding the Phy Control And Discover
    mode page (19h/01h): the 8-byte mode parameter header, BLOCK DESCRIPTOR LENGTH
    (bytes 6-7) bytes of block descriptors, then the page. A response that is not that
    page, or too short for what it says it holds, gives (None, why)."""
    if not data:
        return None, "empty response"
    if len(data) < MODE_SENSE10_HEADER:
        return None, f"{len(data)} bytes: shorter than the MODE SENSE(10) header"
    mode_data_length = int.from_bytes(data[0:2], "big")
    end = min(len(data), mode_data_length + 2)  # the length counts the bytes after itself
    page = MODE_SENSE10_HEADER + int.from_bytes(data[6:8], "big")
    if page + 8 > end:
        return None, f"{len(data)} bytes: no room for the page after the header and block descriptors"
    page_code, subpage = data[page] & 0x3F, data[page + 1]
    if page_code != PAGE_CODE or not data[page] & 0x40 or subpage != SUBPAGE_CODE:
        return None, f"page {page_code:#04x} subpage {subpage:#04x}, not the Phy Control And Discover page (0x19/0x01)"
    protocol = data[page + 5] & 0x0F
    if protocol != PROTOCOL_SAS:
        return None, f"protocol identifier {protocol:#x}, not SAS (0x6)"
    page_end = min(end, page + 4 + int.from_bytes(data[page + 2:page + 4], "big"))
    count = data[page + 7]
    first = page + 8
    if first + count * DESCRIPTOR_BYTES > page_end:
        return None, (f"truncated: {count} PHY descriptors need {count * DESCRIPTOR_BYTES} bytes, "
                      f"{max(0, page_end - first)} given")
    phys = []
    for index in range(count):
        d = data[first + index * DESCRIPTOR_BYTES:first + (index + 1) * DESCRIPTOR_BYTES]
        phys.append(DrivePhy(
            phy_identifier=d[1],
            sas_address=_address(d[8:16]),
            attached_sas_address=_address(d[16:24]),
            negotiated_rate=_rate(d[5] & 0x0F),
            hardware_minimum_rate=_rate(d[32] & 0x0F),
            hardware_maximum_rate=_rate(d[33] & 0x0F),
            programmed_minimum_rate=_rate(d[32] >> 4),
            programmed_maximum_rate=_rate(d[33] >> 4),
        ))
    return tuple(phys), None


# ---- which drives, and their device nodes ------------------------------------------

@datarecord(frozen=True)
class SasDrive:
    """One SAS drive (an end device speaking SSP alone): its address and the node MODE SENSE goes to."""

    end_device: str  # end_device-0:3
    sas_address: Optional[str]
    node: Optional[str]  # sg3, sdd: the first SCSI device's sg node, else its disk; None when neither


def _protocols(text: Optional[str]) -> frozenset:
    return frozenset(p.strip() for p in (text or "").split(",") if p.strip())


def ssp_drives(roots: Roots) -> List[SasDrive]:
    """The SAS end devices whose target port protocols are SSP alone (a SAS drive, not a
    SATA one behind STP), with the device node a SCSI command would go to."""
    base = roots.sys("class", "sas_device")
    found = []
    for name in list_dir(base, roots.sysfs):
        if not name.startswith("end_device-"):
            continue
        attrs = os.path.join(base, name)
        if _protocols(read_attr(os.path.join(attrs, "target_port_protocols"))) != {"ssp"}:
            continue
        address = read_attr(os.path.join(attrs, "sas_address"))
        # sas_device/end_device-H:P is two levels below the end device's own folder.
        end_device_dir = os.path.dirname(os.path.dirname(os.path.realpath(attrs)))
        found.append(SasDrive(name, parse_sas_address(address), _node(end_device_dir)))
    return found


def _node(end_device_dir: str) -> Optional[str]:
    for lun_dir in scsi_devices_below(end_device_dir):
        for kind in ("scsi_generic", "block"):
            names = sorted(list_dir(os.path.join(lun_dir, kind)))
            if names:
                return names[0]
    return None


# ---- reading: captured, sg_modes ------------------------------------------------------

def sg_modes_command(binary: str, node_path: str) -> List[str]:
    return [binary, "--page=0x19,0x1", "--raw", node_path]


def mode_sense(roots: Roots, node: str, sg_modes: str = "sg_modes", timeout: float = 10.0) -> Tuple[Optional[bytes], str]:
    """(the MODE SENSE(10) response of page 19h/01h, None) or (None, why not). With `storpath
    helper` configured (storpath.base.privhelper) sg_modes runs there, as its `sg-modes`
    command: opening the SCSI node for MODE SENSE needs root."""
    if privhelper.configured():
        cmd = sg_modes_command("sg_modes", f"/dev/{node}")  # as the helper runs it (for the messages)
        try:
            done = privhelper.ask_command({"cmd": "sg-modes", "node": node, "timeout": timeout}, timeout)
        except OSError as exc:
            return None, f"helper: {exc}"
    else:
        binary = shutil.which(sg_modes)
        if binary is None:
            return None, f"sg3-utils not installed ({sg_modes!r} not found)"
        cmd = sg_modes_command(binary, roots.devpath(node))
        try:
            done = run_command(cmd, timeout)
        except OSError as exc:
            return None, f"cannot run {binary}: {exc.strerror}"
    if done.timed_out:
        return None, f"`{' '.join(cmd)}` did not finish within {timeout:g} s"
    if done.returncode != 0:
        # sg3-utils: 5 illegal request (the drive has no such page), 15 cannot open (no privilege)
        return None, f"`{' '.join(cmd)}` exited {done.returncode}: {done.first_error_line() or 'no output'}"
    return done.stdout, ""


def captured_path(roots: Roots, end_device: str) -> str:
    path = roots.captured_path(CAPTURED_DIR, end_device, CAPTURED_NAME)
    if path is None:
        raise ValueError("Roots.captured is not set")
    return path


def _from_captured(roots: Roots, drive: SasDrive) -> DrivePhysResult:
    path = captured_path(roots, drive.end_device)
    try:
        with open(path, "rb") as handle:
            data = handle.read(1 << 16)
        read_at = os.stat(path).st_mtime
    except FileNotFoundError:
        return DrivePhysResult(drive.sas_address, None, "captured", f"no captured mode page ({path})", time.time())
    except OSError as exc:
        return DrivePhysResult(drive.sas_address, None, "captured", f"captured data: {path}: {exc.strerror}",
                               time.time())
    phys, problem = parse_phy_control_discover(data)
    return DrivePhysResult(drive.sas_address, phys, "captured", f"{path}: {problem}" if problem else None, read_at)


def read_drive_phys(roots: Roots, drive: SasDrive, sg_modes: str = "sg_modes", timeout: float = 10.0) -> DrivePhysResult:
    """A SAS drive's PHYs from its Phy Control And Discover page, or why they are unknown.
    Privileged and possibly slow: call from a background task only."""
    if roots.captured:
        return _from_captured(roots, drive)
    now = time.time()
    if not roots.devices:
        return DrivePhysResult(drive.sas_address, None, None, NO_DEVICES_REASON, now)
    if drive.node is None:
        return DrivePhysResult(drive.sas_address, None, None, "no SCSI device node below the end device", now)
    data, why = mode_sense(roots, drive.node, sg_modes, timeout)
    if data is None:
        return DrivePhysResult(drive.sas_address, None, "sg_modes", why, now)
    phys, problem = parse_phy_control_discover(data)
    return DrivePhysResult(drive.sas_address, phys, "sg_modes", f"{drive.node}: {problem}" if problem else None, now)


def read_all(roots: Roots, sg_modes: str = "sg_modes", timeout: float = 10.0) -> Dict[str, DrivePhysResult]:
    """End device -> its drive's PHYs, for every SAS (SSP) drive."""
    return {drive.end_device: read_drive_phys(roots, drive, sg_modes, timeout) for drive in ssp_drives(roots)}


def capture_commands(roots: Roots, folder: str) -> List[str]:
    """The Phy Control And Discover page of every SAS drive, into the layout read_drive_phys
    reads back."""
    if not roots.devices:
        return [f"SAS drive PHYs: {NO_DEVICES_REASON}"]
    notes = []
    for drive in ssp_drives(roots):
        if drive.node is None:
            notes.append(f"{drive.end_device}: no SCSI device node")
            continue
        data, why = mode_sense(roots, drive.node)
        if data is None:
            notes.append(f"{drive.end_device}: {why}")
            continue
        target = os.path.join(folder, CAPTURED_DIR, drive.end_device)
        os.makedirs(target, exist_ok=True)
        atomicfile.replace_file(os.path.join(target, CAPTURED_NAME), data)
    return notes
