"""Parsing the kernel's spellings of link rates, and formatting them for people.

Kernel sources of the spellings: drivers/pci/pci-sysfs.c (current_link_speed,
max_link_speed: "2.5 GT/s PCIe", older kernels "5 GT/s" or "8 GT/s", "Unknown" or
"Unknown speed" when the field is reserved), drivers/scsi/scsi_transport_sas.c
("1.5 Gbit" ... "22.5 Gbit", or a status such as "Link Rate failed"), and
drivers/ata/libata-transport.c ("1.5 Gbps", "3.0 Gbps", "6.0 Gbps", "<unknown>").
"""

from __future__ import annotations

import re
from typing import Optional, Tuple

_GTS = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*GT/s\b")
_GBIT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gbit\b")
_GBPS = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gbps\b")

# The valid PCIe link widths; anything else (0 for "no link" excepted) is a broken read.
PCIE_WIDTHS = frozenset({1, 2, 4, 8, 12, 16, 32})


def parse_pcie_speed(text: Optional[str]) -> Tuple[Optional[float], Optional[str]]:
    """'16.0 GT/s PCIe' -> (1.6e10, None); 'Unknown' -> (None, 'reason')."""
    if text is None:
        return None, "missing"
    match = _GTS.match(text)
    if not match:
        return None, f"unrecognised link speed {text!r}"
    value = float(match.group(1)) * 1e9
    if value <= 0:
        return None, f"unrecognised link speed {text!r}"
    return value, None


def parse_pcie_width(text: Optional[str], allow_zero: bool) -> Tuple[Optional[int], Optional[str]]:
    """Link width in lanes. 0 means the link is down (allowed for the current width
    only); 255 is what a read of an all-ones config space (a vanished device) gives."""
    if text is None:
        return None, "missing"
    try:
        value = int(text.strip().lstrip("x"), 10)
    except ValueError:
        return None, f"unrecognised link width {text!r}"
    if value == 0 and allow_zero:
        return 0, None
    if value not in PCIE_WIDTHS:
        return None, f"implausible link width {value}"
    return value, None


def parse_sas_rate(text: Optional[str]) -> Tuple[Optional[float], Optional[str]]:
    """'6.0 Gbit' -> (6e9, None). Statuses ('Unknown', 'Phy disabled', 'Link Rate failed',
    'Spin-up hold') carry no rate: (None, status)."""
    if text is None:
        return None, "missing"
    match = _GBIT.match(text)
    if not match:
        return None, text.strip() or "empty"
    return float(match.group(1)) * 1e9, None


def parse_sata_rate(text: Optional[str]) -> Tuple[Optional[float], Optional[str]]:
    """'3.0 Gbps' -> (3e9, None); '<unknown>' -> (None, '<unknown>')."""
    if text is None:
        return None, "missing"
    match = _GBPS.match(text)
    if not match:
        return None, text.strip() or "empty"
    return float(match.group(1)) * 1e9, None


def pcie_lane_bytes_per_second(speed_tps: float) -> float:
    """Usable bytes per second of one lane after line encoding.

    8b/10b up to 5 GT/s (Gen1/2), 128b/130b from 8 to 32 GT/s (Gen3-5), and for
    64 GT/s (Gen6) the FLIT mode, where 242 of every 256 bytes carry TLP/DLLP data
    (the rest is CRC and FEC).
    """
    if speed_tps <= 5.0e9 + 1:
        efficiency = 8 / 10
    elif speed_tps < 64e9 - 1:
        efficiency = 128 / 130
    else:
        efficiency = 242 / 256
    return speed_tps * efficiency / 8


def pcie_link_bytes_per_second(speed_tps: Optional[float], width: Optional[int]) -> Optional[float]:
    if speed_tps is None or width is None:
        return None
    return pcie_lane_bytes_per_second(speed_tps) * width


def human_transfers(tps: Optional[float]) -> str:
    if tps is None:
        return "unknown"
    return f"{tps / 1e9:g} GT/s"


def human_bytes_per_second(bps: Optional[float]) -> str:
    if bps is None:
        return "unknown"
    for unit, scale in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if bps >= scale:
            return f"{bps / scale:.3g} {unit}"
    return f"{bps:.0f} B/s"


def human_bits_per_second(bps: Optional[float]) -> str:
    if bps is None:
        return "unknown"
    return f"{bps / 1e9:g} Gbit/s"


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_DURATION_SCALE = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(value) -> float:
    """Prometheus-style durations ('30s', '1h30m', '500ms') or a plain number of seconds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"negative duration {value}")
        return float(value)
    text = str(value).strip()
    pos, total = 0, 0.0
    for match in _DURATION.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _DURATION_SCALE[match.group(2)]
        pos = match.end()
    if pos != len(text) or not text:
        raise ValueError(f"invalid duration {value!r} (expected e.g. 30s, 5m, 1h)")
    return total


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGTP]i?B?|B)?\s*$", re.IGNORECASE)


def parse_size(value) -> int:
    """Byte sizes: 4096, '4KiB', '1GiB', '10G' (binary multiples, as fio and dd read them)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = _SIZE.match(str(value))
    if not match:
        raise ValueError(f"invalid size {value!r} (expected e.g. 4096, 64MiB, 1GiB)")
    number, unit = float(match.group(1)), (match.group(2) or "B").upper()
    scale = {"B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}[unit[0]]
    return int(number * scale)
