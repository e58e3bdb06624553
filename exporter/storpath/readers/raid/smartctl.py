"""What `smartctl -j` says of a SATA drive behind a RAID controller (`-d sat+megaraid,N`,
`-d cciss,N`, `-d aacraid,H,L,N`), parsed: the drive's own link capability, the one thing
ssacli and old storcli firmware do not give. Pure: no I/O.

smartctl's "interface_speed" is IDENTIFY DEVICE words 76 and 77, passed through by the RAID
firmware: {"max": {"units_per_second": 60, "bits_per_unit": 100000000, "string": "6.0 Gb/s"},
"current": {...}} (smartmontools ataprint.cpp, print_sata_speeds). A SAS drive (`-d megaraid,N`)
has no such field: its link rate is not in smartctl's JSON, and the record says so (None).

Every number is checked before arithmetic: JSON integers of any length are kept as their digits
when longer than any rate (readers.raid.records.load_json), so 10**400 in a field is a problem
naming that field, never an OverflowError.

Captured as smartctl/<controller>-<N>.json (readers.raid): `<controller>` the tool's own id
of the controller (c0, a0, slot5, 1), `<N>` the drive's number for smartctl.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from storpath.base.records import datarecord
from storpath.base.problems import Problem
from storpath.readers.raid.records import PLAUSIBLE_RATES, Fields, RaidOutputError, clean, fenced, load_json

# smartctl's own numbers for these rates: units_per_second up to a few hundred, bits_per_unit
# 100000000 (ataprint.cpp); anything above these bounds is no SATA generation.
_MAX_UNITS = 10_000
_MAX_BITS_PER_UNIT = 10 ** 9


@datarecord(frozen=True)
class SmartctlDrive:
    """What smartctl says of one drive behind a RAID controller: its identity, protocol, link rates, problems."""

    serial: Optional[str]
    model: Optional[str]
    protocol: Optional[str]  # ATA, SCSI
    maximum: Optional[float]  # IDENTIFY word 76: the fastest generation the drive supports, bits/s
    current: Optional[float]  # IDENTIFY word 77: the rate the drive says its link runs at
    problems: Tuple[Problem, ...] = ()  # fields that hold something that is not what they should


def _rate(entry: Any) -> Optional[float]:
    """{"units_per_second": 60, "bits_per_unit": 100000000} -> 6e9; None for anything that is not
    two integers within smartctl's bounds giving a SATA rate."""
    if not isinstance(entry, dict):
        return None
    units, bits = entry.get("units_per_second"), entry.get("bits_per_unit")
    if isinstance(units, bool) or isinstance(bits, bool) or not isinstance(units, int) or not isinstance(bits, int):
        return None
    if not (0 < units <= _MAX_UNITS and 0 < bits <= _MAX_BITS_PER_UNIT):
        return None
    rate = float(units * bits)
    return rate if rate in PLAUSIBLE_RATES else None


@fenced("smartctl")
def parse_smartctl(text: str, where: str = "smartctl") -> SmartctlDrive:
    """One `smartctl -j` document (`where`: which, for its problems). Raises RaidOutputError
    for text that is not smartctl's JSON."""
    data = load_json(text, "smartctl")
    if not isinstance(data, dict) or not isinstance(data.get("smartctl"), dict):
        raise RaidOutputError("smartctl: no \"smartctl\" object")
    fields = Fields("smartctl")
    speed: Dict[str, Any] = data.get("interface_speed") if isinstance(data.get("interface_speed"), dict) else {}
    device = data.get("device") if isinstance(data.get("device"), dict) else {}
    serial = clean(data.get("serial_number"))
    return SmartctlDrive(serial=serial if serial != "REDACTED" else None,
                         model=clean(data.get("model_name") or data.get("scsi_model_name")),
                         protocol=clean(device.get("protocol")),
                         maximum=fields.read(where, "interface_speed.max", speed.get("max"), _rate),
                         current=fields.read(where, "interface_speed.current", speed.get("current"), _rate),
                         problems=tuple(fields.problems))
