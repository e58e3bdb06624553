"""Drives behind hardware RAID controllers, as the vendor tools report them: typed records
shared by the parsers of storcli/perccli (readers.raid_storcli), ssacli (raid_ssacli),
arcconf (raid_arcconf), MegaCli (raid_megacli) and smartctl (raid_smartctl), and the small
word helpers they all need. Pure: no I/O.

In RAID mode (megaraid_sas, hpsa, smartpqi, aacraid) the kernel sees only the logical
volumes: no sas_phy, no ata_link, no IDENTIFY of the drives. Only these tools see each
drive's link, so their words are normalised here into one vocabulary:

- a controller is named `<tool>/<the tool's own id>`: storcli/c0, megacli/a0, ssacli/slot5,
  arcconf/1, so two tools on one host never collide;
- a drive's `slot` is the tool's own address: enclosure:slot (storcli, MegaCli),
  port:box:bay (ssacli), channel,device (arcconf);
- rates are bit transfers per second (6e9 for "6.0Gb/s", "6.0Gbps", "SATA 6.0 Gb/s");
- states are the sets below, the tool's own word kept beside them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import List, Optional

from storpath.problems import Problem

DRIVE_STATES = ("online", "hotspare", "unconfigured", "rebuilding", "offline", "failed", "jbod", "other")
VOLUME_STATES = ("optimal", "degraded", "rebuilding", "failed", "other")
BATTERY_STATES = ("ok", "learning", "degraded", "failed", "missing")
TOOLS = ("storcli", "ssacli", "arcconf", "megacli", "smartctl")


@dataclass(frozen=True)
class RaidController:
    name: str  # <tool>/<id>: storcli/c0, ssacli/slot5, arcconf/1, megacli/a0
    tool: str
    model: Optional[str] = None
    firmware: Optional[str] = None
    # PCI function (0000:0a:00.0): joins storpath_pcie_* and the block devices' controller.
    pci_address: Optional[str] = None
    # The fastest rate its drive-side ports do ("Device Interface": "SAS-12G"; arcconf's
    # "Global Max SAS Phy Link Rate"): the controller's end of every drive link. None when
    # the tool does not say (ssacli, MegaCli's drive and volume listings).
    port_rate: Optional[float] = None
    status: Optional[str] = None  # the tool's word: Optimal, OK, Needs Attention
    battery: Optional[str] = None  # one of BATTERY_STATES; None when it has none (or the tool does not say)
    battery_detail: Optional[str] = None  # the tool's words for it
    # ssacli's "Cache Status" (OK, Temporarily Disabled, Permanently Disabled); None elsewhere.
    cache_status: Optional[str] = None


@dataclass(frozen=True)
class RaidDrive:
    controller: str  # RaidController.name
    slot: str  # as the tool names it: 252:0, 2E:1:1, 0,3
    interface: Optional[str] = None  # SAS, SATA, NVMe
    media: Optional[str] = None  # hdd, ssd
    model: Optional[str] = None
    serial: Optional[str] = None
    state: str = "other"  # one of DRIVE_STATES
    state_word: Optional[str] = None  # the tool's own word: Onln, Rbld, Failed, Online, Spun Up
    negotiated_rate: Optional[float] = None  # the rate the tool says the link runs at
    # The drive's own capability where the tool gives it (storcli "Device Speed",
    # storcli2 "Capable Speed", arcconf "Programmed Max Speed"); smartctl may add it later.
    capability: Optional[float] = None
    capability_source: str = ""  # which tool said so: storcli, megacli, arcconf, smartctl
    # The tool's rate is not the drive's own link: it exceeds what the drive can do, so it
    # is the controller-to-expander link the drive sits behind (storcli "Link Speed" 12.0
    # for a 6.0 SATA drive behind an expander; arcconf "Transfer Speed" likewise).
    rate_is_expander_link: bool = False
    volume: Optional[str] = None  # RaidVolume.id on the same controller
    device_id: Optional[int] = None  # storcli DID / MegaCli Device Id: smartctl's megaraid,N


@dataclass(frozen=True)
class RaidVolume:
    controller: str
    id: str  # as the tool names it: 0/0 (DG/VD), 1 (logical drive), 0 (logical device)
    name: Optional[str] = None
    level: Optional[str] = None  # raid0, raid1, raid5, raid6, raid10, raid50, raid60, raid1adm...
    state: str = "other"  # one of VOLUME_STATES
    state_word: Optional[str] = None
    operation: Optional[str] = None  # rebuild, initialization, consistency_check, verify
    progress: Optional[float] = None  # 0..1 of the running operation
    write_back_configured: Optional[bool] = None  # the default/initial write policy is write-back
    write_back_current: Optional[bool] = None  # write-back in force now
    strip_bytes: Optional[int] = None
    size_bytes: Optional[int] = None
    device: Optional[str] = None  # kernel block device (sda) where the tool names it
    wwn: Optional[str] = None  # the volume's NAA id / unique identifier (lower case hex)


@dataclass
class RaidInventory:
    """What one tool's outputs say (or several merged). Problems are what could not be
    understood: a reader never raises on a tool's output."""

    controllers: List[RaidController] = field(default_factory=list)
    drives: List[RaidDrive] = field(default_factory=list)
    volumes: List[RaidVolume] = field(default_factory=list)
    problems: List[Problem] = field(default_factory=list)

    def extend(self, other: "RaidInventory") -> None:
        self.controllers.extend(other.controllers)
        self.drives.extend(other.drives)
        self.volumes.extend(other.volumes)
        self.problems.extend(other.problems)


class RaidOutputError(ValueError):
    """A tool printed something that is not its output at all (not JSON, no controller)."""


# ---- words -------------------------------------------------------------------------

_RATE = re.compile(r"(\d{1,3}(?:\.\d{1,3})?)\s*(?:Gb/s|Gbps|Gbit|GB/s|G\b)", re.I)
_SAS_GEN = re.compile(r"^\s*SAS-?(\d{1,2}(?:\.\d)?)G\s*$", re.I)
# Link rates a SAS or SATA link can run at; anything else is a misread.
PLAUSIBLE_RATES = (1.5e9, 3e9, 6e9, 12e9, 22.5e9, 24e9)


def parse_link_rate(text) -> Optional[float]:
    """'6.0Gb/s', '6.0Gbps', '3.0GBPS', 'SATA 6.0 Gb/s', '12 Gbps', 'PHY enabled - 6 Gbps',
    '6.0Gbps, Unknown' (one entry per PHY: the fastest known) -> bit transfers per second;
    'Unknown', '' or garbage -> None."""
    if not isinstance(text, str):
        return None
    rates = [float(m.group(1)) * 1e9 for m in _RATE.finditer(text)]
    rates = [r for r in rates if r in PLAUSIBLE_RATES]
    return max(rates) if rates else None


def parse_interface_generation(text) -> Optional[float]:
    """storcli's "Device Interface": 'SAS-12G' -> 12e9, 'SAS-6G' -> 6e9."""
    if not isinstance(text, str):
        return None
    match = _SAS_GEN.match(text)
    if not match:
        return None
    rate = float(match.group(1)) * 1e9
    return rate if rate in PLAUSIBLE_RATES else None


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|KB|KiB|MB|MiB|GB|GiB|TB|TiB)?\s*$", re.I)
_SIZE_SCALE = {"b": 1, "kb": 1 << 10, "kib": 1 << 10, "mb": 1 << 20, "mib": 1 << 20, "gb": 1 << 30, "gib": 1 << 30,
               "tb": 1 << 40, "tib": 1 << 40}


def parse_strip(text) -> Optional[int]:
    """A strip size ('256 KB', '64 KiB', '1.000 MB', '128KB') -> bytes; these tools count
    in powers of two whatever the spelling. None for anything else."""
    if not isinstance(text, str):
        return None
    match = _SIZE.match(text)
    if not match:
        return None
    value = float(match.group(1)) * _SIZE_SCALE[(match.group(2) or "b").lower()]
    if not 512 <= value <= 1 << 30:
        return None
    return int(value)


def parse_size(text) -> Optional[int]:
    """A capacity ('58.207 TB', '446.625 GiB', '1906676 MB', '4.55 TB') -> bytes, counted in
    powers of two as the tools do."""
    if not isinstance(text, str):
        return None
    match = _SIZE.match(text.split("[")[0])
    if not match or not match.group(2):
        return None
    value = float(match.group(1)) * _SIZE_SCALE[match.group(2).lower()]
    return int(value) if value < 1 << 60 else None


def raid_level(text) -> Optional[str]:
    """'RAID6', 'RAID10', '1+0', '5', 'Primary-5, Secondary-0, RAID Level Qualifier-3',
    '6 Reed-Solomon', '1ADM' -> raid6, raid10, raid10, raid5, raid5, raid6, raid1adm."""
    if not isinstance(text, str):
        return None
    word = text.strip()
    primary = re.match(r"Primary-(\d+),\s*Secondary-(\d+)", word)
    if primary:
        first, second = primary.groups()
        return f"raid{first}0" if second != "0" and first in ("1", "5", "6") else f"raid{first}"
    word = re.sub(r"^RAID\s*", "", word, flags=re.I)
    word = word.split()[0] if word.split() else ""
    word = word.replace("+", "").lower()
    if re.fullmatch(r"(0|1|5|6|10|50|60|00|1e|1adm|10adm|1triple|10triple|jbod|simple_volume)", word):
        return f"raid{word}"
    return None


def wwn(text) -> Optional[str]:
    """A volume's NAA id or unique identifier as lower-case hex without 0x; None unless it
    is 16 or 32 hex digits."""
    if not isinstance(text, str):
        return None
    value = text.strip().lower()
    value = value[2:] if value.startswith("0x") else value
    return value if re.fullmatch(r"[0-9a-f]{16}|[0-9a-f]{32}", value) else None


def block_device(text) -> Optional[str]:
    """'/dev/sda' -> 'sda'; anything not a plain device name -> None."""
    if not isinstance(text, str):
        return None
    value = text.strip()
    value = value[5:] if value.startswith("/dev/") else value
    return value if re.fullmatch(r"[a-z][a-z0-9!_-]{0,31}", value) else None


def pci_address(domain, bus, device, function) -> Optional[str]:
    """0000:0a:00.0 from its four numbers; None when one is not a number in range."""
    parts = []
    for value, limit in ((domain, 0xFFFF), (bus, 0xFF), (device, 0x1F), (function, 0x7)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= limit:
            return None
        parts.append(value)
    return f"{parts[0]:04x}:{parts[1]:02x}:{parts[2]:02x}.{parts[3]:x}"


def clean(text) -> Optional[str]:
    """A tool's padded string ('ATA     ', '            ZL2PVFA8') trimmed; None when empty or no string."""
    if not isinstance(text, str):
        return None
    value = " ".join(text.split())
    return value or None


def progress_ratio(text) -> Optional[float]:
    """'36%', '11', '90 %' -> 0.36, 0.11, 0.9; None outside 0..100."""
    if isinstance(text, bool):
        return None
    if isinstance(text, (int, float)):
        value = float(text)
    elif isinstance(text, str):
        match = re.search(r"(\d{1,3}(?:\.\d+)?)\s*%?", text)
        if not match:
            return None
        value = float(match.group(1))
    else:
        return None
    return value / 100 if 0 <= value <= 100 else None
