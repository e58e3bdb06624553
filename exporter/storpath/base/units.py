"""Units: the bandwidth a PCIe link carries, rates and sizes for people, and the
durations, sizes and rates a config file spells."""

from __future__ import annotations

import math
import re
from typing import Optional

from storpath.base.log import describe


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


def _float(number) -> float:
    """A YAML number as a float; an integer too large for one (10**400) is infinite."""
    try:
        return float(number)
    except OverflowError:
        return math.inf if number > 0 else -math.inf


_DURATION = re.compile(r"([0-9]{1,20}(?:\.[0-9]{1,9})?)(ms|s|m|h|d|w)")
_DURATION_SCALE = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
# The longest duration any setting takes: longer is a typo, and a timer that long (or
# infinite) overflows the thread waits that run the schedule.
MAX_DURATION = 366 * 86400.0


def parse_duration(value) -> float:
    """Prometheus-style durations ('30s', '1h30m', '500ms') or a plain number of seconds;
    finite, 0 to 366 days. Raises ValueError."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        total = _float(value)
    else:
        text = str(value).strip()
        pos, total = 0, 0.0
        for match in _DURATION.finditer(text):
            if match.start() != pos:
                break
            total += float(match.group(1)) * _DURATION_SCALE[match.group(2)]
            pos = match.end()
        if pos != len(text) or not text:
            raise ValueError(f"invalid duration {describe(value)} (expected e.g. 30s, 5m, 1h)")
    if not math.isfinite(total):
        raise ValueError(f"invalid duration {describe(value)}: not a finite number")
    if total < 0:
        raise ValueError(f"negative duration {describe(value)}")
    if total > MAX_DURATION:
        raise ValueError(f"duration {describe(value)} is longer than 366 days")
    return total


_SIZE = re.compile(r"^\s*([0-9]{1,20}(?:\.[0-9]{1,9})?)\s*([KMGTP]i?B?|B)?\s*$", re.IGNORECASE)
# The largest size any setting takes (1 EiB): larger is a typo.
MAX_SIZE = 1 << 60


def parse_size(value) -> int:
    """Byte sizes: 4096, '4KiB', '1GiB', '10G' (binary multiples, as fio and dd read them),
    up to 1 EiB. Raises ValueError."""
    if isinstance(value, int) and not isinstance(value, bool):
        size = value
    else:
        match = _SIZE.match(str(value))
        if not match:
            raise ValueError(f"invalid size {describe(value)} (expected e.g. 4096, 64MiB, 1GiB)")
        number, unit = float(match.group(1)), (match.group(2) or "B").upper()
        scale = {"B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}[unit[0]]
        if number * scale > MAX_SIZE:
            raise ValueError(f"size {describe(value)} is larger than 1 EiB")
        size = int(number * scale)
    if size > MAX_SIZE:
        raise ValueError(f"size {describe(value)} is larger than 1 EiB")
    return size


_RATE = re.compile(r"^\s*([0-9]{1,20}(?:\.[0-9]{1,9})?(?:[eE][0-9]{1,2})?)\s*([kKMGT]i?B/s|[kKMGT]B/s|B/s)?\s*$")
_RATE_SCALE = {"B/s": 1, "kB/s": 1e3, "KB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9, "TB/s": 1e12,
               "KiB/s": 1 << 10, "kiB/s": 1 << 10, "MiB/s": 1 << 20, "GiB/s": 1 << 30, "TiB/s": 1 << 40}
# The highest throughput a setting takes (1 PB/s): far above any host's storage, so
# anything higher is a typo.
MAX_RATE = 1e15


def parse_rate(value) -> float:
    """Bytes per second: 7300000000, '7.3GB/s', '7300 MB/s', '6.8GiB/s' (as data sheets write
    them); above 0, at most 1 PB/s. Raises ValueError."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = _float(value)
    else:
        match = _RATE.match(str(value))
        if not match or (match.group(2) and match.group(2) not in _RATE_SCALE):
            raise ValueError(f"invalid throughput {describe(value)} "
                             f"(expected e.g. 7.3GB/s, 3500MB/s or bytes per second)")
        number = float(match.group(1)) * _RATE_SCALE[match.group(2) or "B/s"]
    if not math.isfinite(number) or number <= 0:
        raise ValueError(f"throughput must be above 0, got {describe(value)}")
    if number > MAX_RATE:
        raise ValueError(f"throughput {describe(value)} is above 1 PB/s")
    return number
