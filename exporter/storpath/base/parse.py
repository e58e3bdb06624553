"""Parsing what the kernel prints: integers as sysfs attributes spell them, PCIe link
speeds and widths, SAS and SATA link rates, identity strings. Strict: an implausible value is None with the
reason, never a guess.

Kernel sources of the spellings: drivers/pci/pci-sysfs.c (current_link_speed,
max_link_speed: "2.5 GT/s PCIe", older kernels "5 GT/s" or "8 GT/s", "Unknown" or
"Unknown speed" when the field is reserved), drivers/scsi/scsi_transport_sas.c
("1.5 Gbit" ... "22.5 Gbit", or a status such as "Link Rate failed"), and
drivers/ata/libata-transport.c ("1.5 Gbps", "3.0 Gbps", "6.0 Gbps", "<unknown>").
"""

from __future__ import annotations

import re
from typing import Optional, Tuple


# Longest decimal a sysfs attribute prints (a 64-bit counter has 20 digits); longer is garbage.
_INT_DIGITS = 20


def parse_int(text, minimum: Optional[int] = None, maximum: Optional[int] = None) -> Optional[int]:
    """A decimal integer attribute (str or the raw bytes of a read, whitespace around it
    allowed) within [minimum, maximum]; None when absent, unparsable or out of range.

    Strict where Python's int() is lenient: ASCII digits only (no '1_6', no '+4', no
    Unicode digits), at most 20 of them, and a leading '-' only when `minimum` is
    negative (the caller expects negative values, such as numa_node's -1)."""
    if text is None:
        return None
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("ascii", "replace")
    text = text.strip()
    digits = text[1:] if text[:1] == "-" and minimum is not None and minimum < 0 else text
    if not 0 < len(digits) <= _INT_DIGITS or not digits.isascii() or not digits.isdigit():
        return None
    value = int(text, 10)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        return None
    return value


# The most NUMA nodes a Linux kernel supports (1 << CONFIG_NODES_SHIFT, at most 10).
MAX_NUMA_NODES = 1024


def parse_numa_node(text: Optional[str]) -> Optional[int]:
    """A device's numa_node: a node number or -1; anything else None."""
    return parse_int(text, minimum=-1, maximum=MAX_NUMA_NODES - 1)


# [0-9], not \d: \d also matches other scripts' digits, which float() reads as numbers.
_GTS = re.compile(r"^\s*([0-9]{1,3}(?:\.[0-9]{1,3})?)\s*GT/s\b")
_GBIT = re.compile(r"^\s*([0-9]{1,3}(?:\.[0-9]{1,3})?)\s*Gbit\b")
_GBPS = re.compile(r"^\s*([0-9]{1,3}(?:\.[0-9]{1,3})?)\s*Gbps\b")


# The valid PCIe link widths; anything else (0 for "no link" excepted) is a broken read.
PCIE_WIDTHS = frozenset({1, 2, 4, 8, 12, 16, 32})


# Transfer rates of the PCIe generations 1 to 7, the only values the kernel prints.
PCIE_SPEEDS = frozenset({2.5e9, 5e9, 8e9, 16e9, 32e9, 64e9, 128e9})


# What current_link_speed and max_link_speed print (drivers/pci/pci-sysfs.c,
# pci_speed_string() since 4.17: "16.0 GT/s PCIe"; before it "16 GT/s"), looked up first:
# a host of thousands of devices reads a few of these spellings on every scrape.
_PCIE_SPEED_TEXT = {f"{rate:g} GT/s": rate * 1e9 for rate in (2.5, 5, 8, 16, 32, 64, 128)}
_PCIE_SPEED_TEXT.update({f"{rate:.1f} GT/s PCIe": rate * 1e9 for rate in (2.5, 5, 8, 16, 32, 64, 128)})


_PCIE_WIDTH_TEXT = {str(width): width for width in PCIE_WIDTHS}

# The same spellings as the files hold them, newline included, for the attributes read every
# scrape: a match needs neither decoding nor cut_text (parse_pcie_speed_raw, parse_pcie_width_raw).
_PCIE_SPEED_RAW = {f"{text}\n".encode(): rate for text, rate in _PCIE_SPEED_TEXT.items()}
_PCIE_WIDTH_RAW = {f"{text}\n".encode(): width for text, width in _PCIE_WIDTH_TEXT.items()}


def parse_pcie_speed(text: Optional[str]) -> Tuple[Optional[float], Optional[str]]:
    """'16.0 GT/s PCIe' -> (1.6e10, None); 'Unknown' -> (None, 'reason')."""
    if text is None:
        return None, "missing"
    known = _PCIE_SPEED_TEXT.get(text)
    if known is not None:
        return known, None
    match = _GTS.match(text)
    if not match:
        return None, f"unrecognised link speed {text!r}"
    value = float(match.group(1)) * 1e9
    if value not in PCIE_SPEEDS:
        return None, f"implausible link speed {text!r} (not a PCIe generation's rate)"
    return value, None


def parse_pcie_width(text: Optional[str], allow_zero: bool) -> Tuple[Optional[int], Optional[str]]:
    """Link width in lanes. 0 means the link is down (allowed for the current width
    only); 255 is what a read of an all-ones config space (a vanished device) gives."""
    if text is None:
        return None, "missing"
    known = _PCIE_WIDTH_TEXT.get(text)
    if known is not None:
        return known, None
    stripped = text.strip()
    value = parse_int(stripped[1:] if stripped.startswith("x") else stripped)
    if value is None:
        return None, f"unrecognised link width {text!r}"
    if value == 0 and allow_zero:
        return 0, None
    if value not in PCIE_WIDTHS:
        return None, f"implausible link width {value}"
    return value, None


def parse_pcie_speed_raw(raw: Optional[bytes]) -> Tuple[Optional[float], Optional[str]]:
    """parse_pcie_speed of a link speed file's bytes as read (None: absent or unreadable):
    the kernel's spellings are looked up as they are, anything else is decoded, cut
    (cut_text) and parsed."""
    known = _PCIE_SPEED_RAW.get(raw)
    if known is not None:
        return known, None
    if raw is None:
        return None, "missing"
    return parse_pcie_speed(attribute_text(raw))


def parse_pcie_width_raw(raw: Optional[bytes], allow_zero: bool) -> Tuple[Optional[int], Optional[str]]:
    """parse_pcie_width of a link width file's bytes as read (None: absent or unreadable)."""
    known = _PCIE_WIDTH_RAW.get(raw)
    if known is not None:
        return known, None
    if raw is None:
        return None, "missing"
    return parse_pcie_width(attribute_text(raw), allow_zero)


def _link_rate(text: Optional[str], pattern: "re.Pattern[str]") -> Tuple[Optional[float], Optional[str]]:
    """A rate in Gbit/s as `pattern` spells it -> (bits/s, None); anything else -> (None, the text)."""
    if text is None:
        return None, "missing"
    match = pattern.match(text)
    if not match:
        return None, text.strip() or "empty"
    return float(match.group(1)) * 1e9, None


def parse_sas_rate(text: Optional[str]) -> Tuple[Optional[float], Optional[str]]:
    """'6.0 Gbit' -> (6e9, None). Statuses ('Unknown', 'Phy disabled', 'Link Rate failed',
    'Spin-up hold') carry no rate: (None, status)."""
    return _link_rate(text, _GBIT)


def parse_sata_rate(text: Optional[str]) -> Tuple[Optional[float], Optional[str]]:
    """'3.0 Gbps' -> (3e9, None); '<unknown>' -> (None, '<unknown>')."""
    return _link_rate(text, _GBPS)


# Around an identity string: the spaces older kernels pad NVMe's fixed-width model, serial
# and firmware fields with (and SCSI's vendor and model), sysfs's newline, and the NULs a
# copy of sysfs made with tar can pad a file with: cut_text removes them all.


def cut_text(text: str) -> str:
    """A string read from a file as a label may take it: the text before the first NUL (after
    any NULs it starts with), without the whitespace around it. The one place every sysfs string
    that becomes a label passes (sysfs.read_attr_why, parse_identity): a copy of sysfs made with
    tar pads a file that shrank while it was read with NULs after the kernel's newline (libnvme's
    published tree of an Apple NVMe controller: `apple-nvme\n` and 4085 NULs), and what follows a
    NUL is never part of a text attribute."""
    return text.lstrip("\x00").partition("\x00")[0].strip()


def attribute_text(raw: Optional[bytes]) -> Optional[str]:
    """The text sysfs.read_attr gives for an attribute's bytes as read (sysfs.read_many,
    read_bytes): decoded with U+FFFD for what is not UTF-8, then cut_text; None stays None."""
    return cut_text(raw.decode("utf-8", "replace")) if raw is not None else None


def parse_identity(text: Optional[str]) -> Optional[str]:
    """A model, serial, firmware revision, vendor or DMI name, or any name-like attribute (a
    SAS PHY's device_type, an NVMe controller's transport), without the padding around it
    (what is inside stays as the device wrote it); None when absent or nothing is left."""
    if text is None:
        return None
    return cut_text(text) or None


_PCI_ADDRESS_PARTS = re.compile(r"^([0-9a-f]{4,8}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$")
_DIGIT_RUNS = re.compile(r"(\d+)")


def natural_key(text: str):
    """nvme2n1 before nvme10n1, md2 before md10; 0000:08:00.0 before 0000:0a:00.0 (a PCI
    address's groups are hex numbers). Keys alternate text and numbers, so any two compare."""
    match = _PCI_ADDRESS_PARTS.match(text)
    if match:
        domain, bus, device, function = (int(g, 16) for g in match.groups())
        return ["", domain, ":", bus, ":", device, ".", function, ""]
    # Every other part is a run of digits (re.split with a group): no test per part.
    parts = _DIGIT_RUNS.split(text)
    for index in range(1, len(parts), 2):
        parts[index] = int(parts[index])
    return parts
