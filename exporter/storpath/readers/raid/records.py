"""Drives behind hardware RAID controllers, as the vendor tools report them: typed records
shared by the parsers of storcli/perccli (readers.raid.storcli), ssacli (raid.ssacli),
arcconf (raid.arcconf), MegaCli (raid.megacli) and smartctl (raid.smartctl), the small word
helpers they all need, and what makes every parser total: lines cut to MAX_LINE and split
rather than matched by patterns that could backtrack, digit runs bounded before int(), a
Problem per field that holds what its reader cannot read (`Fields`), counts bounded
(`Bounds`), and the fence (`fenced`) that turns any other failure into that tool's
RaidOutputError. Pure: no I/O.

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

import functools
import re
from dataclasses import field
from typing import Any, Callable, Dict, Iterator, List, Optional, Pattern, Set, Tuple, TypeVar, Union

from storpath.base.records import datarecord
from storpath.base import boundedjson
from storpath.base.parse import parse_int
from storpath.base.problems import Problem

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

DRIVE_STATES = ("online", "hotspare", "unconfigured", "rebuilding", "offline", "failed", "jbod", "other")
VOLUME_STATES = ("optimal", "degraded", "rebuilding", "failed", "other")
BATTERY_STATES = ("ok", "learning", "degraded", "failed", "missing")
TOOLS = ("storcli", "ssacli", "arcconf", "megacli", "smartctl")


@datarecord(frozen=True)
class RaidController:
    """One RAID controller as a tool reports it: identity, PCI function, port rate, status, battery, cache."""

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


@datarecord(frozen=True)
class RaidDrive:
    """One drive behind a RAID controller as a tool reports it: slot, identity, state, rates, volume."""

    controller: str  # RaidController.name
    slot: str  # as the tool names it: 252:0, 2E:1:1, 0,3
    interface: Optional[str] = None  # SAS, SATA, NVMe
    media: Optional[str] = None  # hdd, ssd
    model: Optional[str] = None
    serial: Optional[str] = None
    state: str = "other"  # one of DRIVE_STATES
    state_word: Optional[str] = None  # the tool's own word: Onln, Rbld, Failed, Online, Spun Up
    # The rate the tool says the link runs at, as it said it. Behind an expander that is the
    # controller-to-expander link, not the drive's (storcli "Link Speed" 12.0 for a 6.0 SATA
    # drive there; arcconf "Transfer Speed" likewise): storpath.analysis.raid decides which.
    negotiated_rate: Optional[float] = None
    # The drive's own capability where the tool gives it (storcli "Device Speed",
    # storcli2 "Capable Speed", arcconf "Programmed Max Speed"); smartctl may add it later.
    capability: Optional[float] = None
    capability_source: str = ""  # which tool said so: storcli, megacli, arcconf, smartctl
    volume: Optional[str] = None  # RaidVolume.id on the same controller
    device_id: Optional[int] = None  # storcli DID / MegaCli Device Id: smartctl's megaraid,N


@datarecord(frozen=True)
class RaidVolume:
    """One logical volume of a RAID controller: level, state, running operation, cache policy, size."""

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


@datarecord
class RaidInventory:
    """What one tool's outputs say (or several merged). Problems are what could not be
    understood, one per field or block; an output that is not the tool's at all (not JSON, no
    controller, more than the bounds below) is RaidOutputError, the one thing a parser raises."""

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
    """A tool printed something that is not its output at all (not JSON, no controller), or
    more than storpath keeps of one: the task layer makes it that tool's `tool_up 0` with this
    as the reason, and every other tool's inventory stands."""


# ---- bounds --------------------------------------------------------------------------------

# A line longer than this is cut before anything matches it: no tool prints a field that long
# (storcli's longest JSON strings and ssacli's longest lines are under 200 characters), and it
# bounds what any pattern can cost on one line.
MAX_LINE = 4096

# How much of one tool's output is kept. The largest controllers these tools drive address
# 240 physical drives in RAID mode and 1024 devices behind expanders in HBA mode (Broadcom
# SAS3908 / 9500 series; Smart Array and Adaptec fewer), 240 volumes (MegaRAID; Smart Array 64,
# Adaptec 255), and a server holds a handful of controllers. Four times those: a listing beyond
# them is not a controller's (a broken or hostile tool, a replayed capture) and would cost a
# dozen series per drive (130k drives: a million series, 600 MiB). The tool's parse fails with
# the reason instead (`tool_up 0`).
MAX_DRIVES_PER_CONTROLLER = 4096
MAX_VOLUMES_PER_CONTROLLER = 1024
MAX_CONTROLLERS = 64
# All of one tool's controllers together: two full ones' worth.
MAX_DRIVES = 2 * MAX_DRIVES_PER_CONTROLLER
MAX_VOLUMES = 2 * MAX_VOLUMES_PER_CONTROLLER

# What a RaidOutputError says when a parser itself failed (a bug or an input it did not
# foresee), caught by `fenced`: the tests assert no input ever reaches it.
PARSER_FAILED = "parser failed"


class Bounds:
    """Counts one tool's controllers, drives and volumes as a parse meets them; past a bound the
    parse stops (RaidOutputError naming the bound), before the rest is built."""

    def __init__(self, tool: str):
        self.tool = tool
        self._per: Dict[Tuple[str, str], int] = {}
        self._all: Dict[str, int] = {}
        self._controllers: Set[str] = set()

    def controller(self, name: str) -> None:
        self._controllers.add(name)
        if len(self._controllers) > MAX_CONTROLLERS:
            raise RaidOutputError(f"{self.tool}: more than {MAX_CONTROLLERS} controllers, the most storpath reads "
                                  "from one tool (MAX_CONTROLLERS)")

    def drive(self, controller: str) -> None:
        self._count("drive", controller, MAX_DRIVES_PER_CONTROLLER, MAX_DRIVES)

    def volume(self, controller: str) -> None:
        self._count("volume", controller, MAX_VOLUMES_PER_CONTROLLER, MAX_VOLUMES)

    def _count(self, what: str, controller: str, per_controller: int, in_all: int) -> None:
        self.controller(controller)
        key = (what, controller)
        self._per[key] = self._per.get(key, 0) + 1
        self._all[what] = self._all.get(what, 0) + 1
        if self._per[key] > per_controller:
            raise RaidOutputError(f"{self.tool}: more than {per_controller} {what}s on {controller}, the most storpath "
                                  f"reads from one controller (MAX_{what.upper()}S_PER_CONTROLLER)")
        if self._all[what] > in_all:
            raise RaidOutputError(f"{self.tool}: more than {in_all} {what}s, the most storpath reads from one tool "
                                  f"(MAX_{what.upper()}S)")


def fenced(what: str) -> Callable[[F], F]:
    """A tool's parse as the task layer calls it: whatever its input, it returns or raises
    RaidOutputError. Any other exception (a parser bug, an input nobody foresaw: OverflowError,
    RecursionError, ...) becomes RaidOutputError naming it, so it charges that tool only."""

    def wrap(parse: F) -> F:
        @functools.wraps(parse)
        def fenced_parse(*args, **kwargs):
            try:
                return parse(*args, **kwargs)
            except RaidOutputError:
                raise
            except Exception as exc:  # noqa: BLE001 - the fence: anything else is this tool's failure only
                raise RaidOutputError(f"{what}: {PARSER_FAILED} on this output "
                                      f"({type(exc).__name__}: {str(exc)[:200]})") from None
        return fenced_parse  # type: ignore[return-value]
    return wrap


def lines(text: str) -> Iterator[str]:
    """The text's lines, each cut to MAX_LINE characters."""
    for line in text.splitlines():
        yield line[:MAX_LINE]


def split_field(line: str, separator: Union[str, Pattern[str]] = ":") -> Optional[Tuple[str, str]]:
    """'Key   : value ' -> ('Key', 'value') at the first `separator` (a string, or a pattern of a
    fixed few characters); None when the line has none or no key. A split, not a pattern over
    the whole line: linear in the line whatever it holds."""
    if isinstance(separator, str):
        key, found, value = line.partition(separator)
    else:
        match = separator.search(line)
        found = match is not None
        key, value = (line[:match.start()], line[match.end():]) if match else (line, "")
    key = key.strip()
    if not found or not key:
        return None
    return key, value.strip()


def load_json(text, what: str) -> Any:
    """A tool's JSON (storpath.base.boundedjson: size and nesting bounded). An integer longer than
    a number any tool prints stays its digits (a string), NaN and Infinity their words: the
    field holding it is then not understood, a problem for that field, not for the document."""
    if not isinstance(text, str):
        raise RaidOutputError(f"{what}: no text")
    try:
        return boundedjson.loads(text, parse_int=_json_int, parse_constant=str)
    except (ValueError, TypeError) as exc:
        raise RaidOutputError(f"{what}: not JSON ({str(exc)[:200]})") from None


def _json_int(digits: str):
    return int(digits) if len(digits.lstrip("-")) <= MAX_DIGITS else digits


# Longest number any of these tools prints (a 64-bit value has 20 digits; their ids, counts and
# sizes far fewer): a longer run of digits is garbage, never handed to int().
MAX_DIGITS = 18


def whole_number(value, maximum: int = 10 ** MAX_DIGITS - 1) -> Optional[int]:
    """A tool's non-negative integer: a JSON integer or up to MAX_DIGITS ASCII digits, at most
    `maximum`; None for anything else (signs, other scripts' digits, longer runs, booleans)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 <= value <= maximum else None
    if not isinstance(value, str) or len(value.strip()) > MAX_DIGITS:
        return None
    return parse_int(value, minimum=0, maximum=maximum)


# Words the tools print for "nothing here", and the states a drive without a link shows in its
# rate field (arcconf "Transfer Speed : Defunct"): no problem when a field holds one of these.
NOT_GIVEN = frozenset({"", "unknown", "n/a", "na", "-", "--", "none", "not available", "not applicable",
                       "not supported", "not set", "defunct", "failed", "offline", "missing"})


def given(value) -> bool:
    """Whether a field holds something (not absent, not blank, not one of NOT_GIVEN)."""
    if value is None:
        return False
    if isinstance(value, str):
        return " ".join(value.split()).lower() not in NOT_GIVEN
    return True


class Fields:
    """Reads the fields of one tool's output into values: a field that holds something (see
    `given`) its reader cannot make sense of becomes None in the record and a Problem naming the
    tool, the place and the field, with what it held. Absent and "Unknown" are not problems."""

    def __init__(self, tool: str):
        self.tool = tool
        self.problems: List[Problem] = []

    def read(self, where: str, name: str, value, parse: Callable[[Any], Optional[T]]) -> Optional[T]:
        if not given(value):
            return None
        result = parse(value)
        if result is None:
            self.unreadable(where, name, value)
        return result

    def unreadable(self, where: str, name: str, value) -> None:
        shown = value if isinstance(value, str) else repr(value)
        self.problems.append(Problem(
            f"{self.tool} printed a field storpath cannot read",
            (("source", "raid"), ("device", where), ("attribute", name),
             ("value", shown[:60] + ("..." if len(shown) > 60 else "")))))


# ---- words -------------------------------------------------------------------------

# [0-9], not \d (other scripts' digits), and bounded runs: a match costs a few steps, and
# float() of what it captures is always finite.
_RATE = re.compile(r"([0-9]{1,3}(?:\.[0-9]{1,3})?) ?(?:Gb/s|Gbps|Gbit|GB/s|G\b)", re.I)
_SAS_GEN = re.compile(r"SAS-?([0-9]{1,2}(?:\.[0-9])?)G", re.I)
# Link rates a SAS or SATA link can run at; anything else is a misread.
PLAUSIBLE_RATES = (1.5e9, 3e9, 6e9, 12e9, 22.5e9, 24e9)


def parse_link_rate(text) -> Optional[float]:
    """'6.0Gb/s', '6.0Gbps', '3.0GBPS', 'SATA 6.0 Gb/s', '12 Gbps', 'PHY enabled - 6 Gbps',
    '6.0Gbps, Unknown' (one entry per PHY: the fastest known) -> bit transfers per second;
    'Unknown', '' or garbage -> None."""
    if not isinstance(text, str):
        return None
    rates = [float(m.group(1)) * 1e9 for m in _RATE.finditer(" ".join(text[:MAX_LINE].split()))]
    rates = [r for r in rates if r in PLAUSIBLE_RATES]
    return max(rates) if rates else None


def parse_interface_generation(text) -> Optional[float]:
    """storcli's "Device Interface": 'SAS-12G' -> 12e9, 'SAS-6G' -> 6e9."""
    if not isinstance(text, str):
        return None
    match = _SAS_GEN.fullmatch(text.strip())
    if not match:
        return None
    rate = float(match.group(1)) * 1e9
    return rate if rate in PLAUSIBLE_RATES else None


# An amount and its unit: '256 KB', '58.207 TB', '128KB', '1906676 MB'. Bounded digit runs (a
# capacity in bytes has at most 20 digits), one run of spaces: linear, and float() finite.
_AMOUNT = re.compile(r"([0-9]{1,15}(?:\.[0-9]{1,9})?) *([A-Za-z]{1,3})?")
_SIZE_SCALE = {"b": 1, "kb": 1 << 10, "kib": 1 << 10, "mb": 1 << 20, "mib": 1 << 20, "gb": 1 << 30, "gib": 1 << 30,
               "tb": 1 << 40, "tib": 1 << 40}


def _amount(text, unit_needed: bool) -> Optional[float]:
    if not isinstance(text, str):
        return None
    match = _AMOUNT.fullmatch(text.strip()[:64])
    if not match or (unit_needed and not match.group(2)):
        return None
    scale = _SIZE_SCALE.get((match.group(2) or "b").lower())
    return float(match.group(1)) * scale if scale else None


def parse_strip(text) -> Optional[int]:
    """A strip size ('256 KB', '64 KiB', '1.000 MB', '128KB') -> bytes; these tools count
    in powers of two whatever the spelling. None for anything else."""
    value = _amount(text, unit_needed=False)
    return int(value) if value is not None and 512 <= value <= 1 << 30 else None


def parse_size(text) -> Optional[int]:
    """A capacity ('58.207 TB', '446.625 GiB', '1906676 MB', '4.55 TB') -> bytes, counted in
    powers of two as the tools do."""
    value = _amount(text.split("[")[0] if isinstance(text, str) else None, unit_needed=True)
    return int(value) if value is not None and value < 1 << 60 else None


_LEVELS = frozenset({"0", "1", "5", "6", "10", "50", "60", "00", "1e", "1adm", "10adm", "1triple", "10triple", "jbod",
                     "simple_volume", "spanned_volume"})
_PRIMARY = re.compile(r"Primary-([0-9]{1,2}), *Secondary-([0-9]{1,2})")


def raid_level(text) -> Optional[str]:
    """'RAID6', 'RAID10', '1+0', '5', 'Primary-5, Secondary-0, RAID Level Qualifier-3',
    '6 Reed-Solomon', '1ADM' -> raid6, raid10, raid10, raid5, raid5, raid6, raid1adm."""
    if not isinstance(text, str):
        return None
    word = text.strip()[:MAX_LINE]
    primary = _PRIMARY.match(word)
    if primary:
        first, second = primary.groups()
        level = f"{first}0" if second != "0" and first in ("1", "5", "6") else first
        return f"raid{level}" if level in _LEVELS else None
    if word[:4].upper() == "RAID":
        word = word[4:]
    words = word.split()
    word = words[0].replace("+", "").lower() if words else ""
    return f"raid{word}" if word in _LEVELS else None


_HEX_ID = re.compile(r"[0-9a-f]{16}|[0-9a-f]{32}")


def wwn(text) -> Optional[str]:
    """A volume's NAA id or unique identifier as lower-case hex without 0x; None unless it
    is 16 or 32 hex digits."""
    if not isinstance(text, str):
        return None
    value = text.strip().lower()
    value = value[2:] if value.startswith("0x") else value
    return value if _HEX_ID.fullmatch(value) else None


_DEVICE_NAME = re.compile(r"[a-z][a-z0-9!_-]{0,31}")


def block_device(text) -> Optional[str]:
    """'/dev/sda' -> 'sda'; '/dev/cciss/c0d0' -> 'cciss!c0d0' (its name in /sys/block);
    anything not a plain device name -> None."""
    if not isinstance(text, str):
        return None
    value = text.strip()
    value = value[5:].replace("/", "!") if value.startswith("/dev/") else value
    return value if _DEVICE_NAME.fullmatch(value) else None


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
    value = " ".join(text[:MAX_LINE].split())
    return value or None


# A percentage: up to three digits not part of a longer number ('1000' is none).
_PERCENT = re.compile(r"(?<![0-9.])([0-9]{1,3}(?:\.[0-9]{1,6})?)(?![0-9])")


def progress_ratio(text) -> Optional[float]:
    """'36%', '11', '90 %' -> 0.36, 0.11, 0.9; None outside 0..100."""
    if isinstance(text, bool):
        return None
    if isinstance(text, int):
        return text / 100 if 0 <= text <= 100 else None  # before float(): 10**400 overflows it
    if isinstance(text, float):
        value = text
    elif isinstance(text, str):
        match = _PERCENT.search(text[:MAX_LINE])
        if not match:
            return None
        value = float(match.group(1))
    else:
        return None
    return value / 100 if 0 <= value <= 100 else None
