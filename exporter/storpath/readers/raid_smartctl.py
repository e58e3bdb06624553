"""What `smartctl -j` says of a SATA drive behind a RAID controller (`-d sat+megaraid,N`,
`-d cciss,N`, `-d aacraid,H,L,N`), parsed: the drive's own link capability, the one thing
ssacli and old storcli firmware do not give. Pure: no I/O.

smartctl's "interface_speed" is IDENTIFY DEVICE words 76 and 77, passed through by the RAID
firmware: {"max": {"units_per_second": 60, "bits_per_unit": 100000000, "string": "6.0 Gb/s"},
"current": {...}} (smartmontools ataprint.cpp, print_sata_speeds). A SAS drive (`-d megaraid,N`)
has no such field: its link rate is not in smartctl's JSON, and the record says so (None).

Captured as smartctl/<controller>-<N>.json (readers.raid): `<controller>` the tool's own id
of the controller (c0, a0, slot5, 1), `<N>` the drive's number for smartctl.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional

from storpath import boundedjson
from storpath.readers.raid_records import PLAUSIBLE_RATES, RaidOutputError, clean


@dataclass(frozen=True)
class SmartctlDrive:
    serial: Optional[str]
    model: Optional[str]
    protocol: Optional[str]  # ATA, SCSI
    maximum: Optional[float]  # IDENTIFY word 76: the fastest generation the drive supports, bits/s
    current: Optional[float]  # IDENTIFY word 77: the rate the drive says its link runs at


def _rate(entry: Any) -> Optional[float]:
    if not isinstance(entry, dict):
        return None
    units, bits = entry.get("units_per_second"), entry.get("bits_per_unit")
    if isinstance(units, bool) or isinstance(bits, bool) or not isinstance(units, int) or not isinstance(bits, int):
        return None
    rate = float(units * bits)
    return rate if rate in PLAUSIBLE_RATES else None


def parse_smartctl(text: str) -> SmartctlDrive:
    """One `smartctl -j` document. Raises RaidOutputError for text that is not smartctl's JSON."""
    try:
        data = boundedjson.loads(text)
    except (ValueError, TypeError) as exc:
        raise RaidOutputError(f"smartctl: not JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("smartctl"), dict):
        raise RaidOutputError("smartctl: no \"smartctl\" object")
    speed: Dict[str, Any] = data.get("interface_speed") if isinstance(data.get("interface_speed"), dict) else {}
    device = data.get("device") if isinstance(data.get("device"), dict) else {}
    serial = clean(data.get("serial_number"))
    return SmartctlDrive(serial=serial if serial != "REDACTED" else None,
                         model=clean(data.get("model_name") or data.get("scsi_model_name")),
                         protocol=clean(device.get("protocol")), maximum=_rate(speed.get("max")),
                         current=_rate(speed.get("current")))
