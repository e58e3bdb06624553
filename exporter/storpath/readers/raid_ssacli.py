"""What `ssacli ctrl all show config detail` (HPE Smart Array: hpsa, smartpqi; hpacucli before
it) prints, parsed: a pure function from text to readers.raid_records records, no I/O.

The layout is indentation: a controller's header at column 0 ("Smart Array P212 in Slot 5",
"HPE Smart Array P408i-a SR Gen10 in Slot 0 (Embedded)"), its fields at 3 spaces ("Controller
Status", "Firmware Version", "PCI Address (Domain:Bus:Device.Function)", "Cache Status",
"Cache Ratio", "Battery/Capacitor Status"), then "Array: A" (or "Unassigned", "HBA Drives") at 3
spaces, each array's "Logical Drive: 1" and "physicaldrive 2E:1:1" at 6 and their fields at 9
("Fault Tolerance", "Strip Size", "Status", "Disk Name", "Unique Identifier"; "Interface Type",
"PHY Transfer Rate: 1.5Gbps" or "6.0Gbps, Unknown" for a dual-port SAS drive).

ssacli gives a drive's negotiated rate but, before the "PHY Maximum Link Rate" field of newer
releases (and "Unknown" there on P410i-era controllers), nothing of the drive's capability, and
nothing of the controller ports' maximum: such a drive's link is unverifiable unless smartctl
(`-d cciss,N`) says what the drive can do.

Write cache: a logical drive with "Caching: Enabled" on a controller whose "Cache Ratio" gives
writes a share is configured write-back; it writes back now only while "Cache Status" is OK
("Temporarily Disabled" with "Cache disabled; low batteries." is the fallback to
write-through).
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional

from storpath.readers.raid_records import (RaidController, RaidDrive, RaidInventory, RaidOutputError, RaidVolume,
                                           clean, parse_link_rate, parse_size, parse_strip, progress_ratio,
                                           raid_level, wwn)

TOOL = "ssacli"

_HEADER = re.compile(r"^(\S.*?) in Slot (\w+)\b")
_FIELD = re.compile(r"^( *)(\S.*?):(?:\s+(.*?))?\s*$")
_DRIVE = re.compile(r"^ {4,8}physicaldrive (\S+)\s*$")
_LOGICAL = re.compile(r"^ {4,8}Logical Drive: (\S+)\s*$")
_LEVELS = {"0": "raid0", "1": "raid1", "1+0": "raid10", "5": "raid5", "6": "raid6", "adg": "raid6",
           "50": "raid50", "60": "raid60", "1adm": "raid1adm", "1+0adm": "raid10adm"}


def _battery(word: Optional[str]) -> Optional[str]:
    if not word:
        return None
    lower = word.lower()
    if lower.startswith("ok"):
        return "ok"
    if "charging" in lower or "recharg" in lower:
        return "learning"
    if "fail" in lower or "replace" in lower:
        return "failed"
    if "not present" in lower or "missing" in lower:
        return "missing"
    return "degraded"


def _drive_state(status: Optional[str], kind: Optional[str]) -> str:
    status = (status or "").lower()
    kind = (kind or "").lower()
    if status.startswith("fail"):
        return "failed"
    if "rebuild" in status:
        return "rebuilding"
    if status.startswith("ok") or status.startswith("predictive"):
        if "spare" in kind:
            return "hotspare"
        if "unassigned" in kind:
            return "unconfigured"
        if "hba" in kind:
            return "jbod"
        return "online"
    return "other"


def _volume_state(status: Optional[str]):
    """'OK', 'Interim Recovery Mode', 'Recovering, 54.28% complete', 'Ready for Rebuild',
    'Failed', 'Transforming, 2% complete' -> (state, operation, progress)."""
    word = (status or "").lower()
    if word.startswith("ok"):
        return "optimal", None, None
    if word.startswith("recovering") or "rebuilding" in word:
        return "rebuilding", "rebuild", progress_ratio(word.split(",", 1)[1]) if "," in word else None
    if "interim recovery" in word or "ready for rebuild" in word or "degraded" in word:
        return "degraded", None, None
    if word.startswith("fail"):
        return "failed", None, None
    return "other", None, None


def _write_share(ratio: Optional[str]) -> Optional[bool]:
    """'25% Read / 75% Write' -> True; '100% Read / 0% Write' -> False."""
    match = re.search(r"(\d+)%\s*Write", ratio or "")
    return int(match.group(1)) > 0 if match else None


def _block(name: Optional[str]) -> Optional[str]:
    """'/dev/sdc' -> 'sdc'; '/dev/cciss/c0d0' -> 'cciss!c0d0' (its name in /sys/block)."""
    if not name or not name.startswith("/dev/"):
        return None
    value = name[5:].replace("/", "!")
    return value if re.fullmatch(r"[a-z][a-z0-9!_-]{0,31}", value) else None


def parse_config_detail(text: str) -> RaidInventory:
    """`ssacli ctrl all show config detail` (and `hpacucli ... show config detail`)."""
    if not isinstance(text, str):
        raise RaidOutputError("ssacli: no text")
    inventory = RaidInventory()
    controllers: List[Dict[str, object]] = []
    current: Optional[Dict[str, object]] = None
    item: Optional[Dict[str, str]] = None
    array: Optional[Dict[str, object]] = None
    for line in text.splitlines():
        if not line.strip():
            continue
        header = _HEADER.match(line)
        if header:
            current = {"model": header.group(1).strip(), "slot": header.group(2), "fields": {}, "arrays": []}
            controllers.append(current)
            item = array = None
            continue
        if current is None:
            continue
        indent = len(line) - len(line.lstrip(" "))
        logical = _LOGICAL.match(line)
        drive = _DRIVE.match(line)
        if indent <= 3:
            item = None
            stripped = line.strip()
            if stripped.startswith("Array:") or stripped in ("Unassigned", "HBA Drives") or stripped.startswith("Array "):
                array = {"name": stripped, "logical": [], "drives": []}
                current["arrays"].append(array)  # type: ignore[union-attr]
                continue
            array = None if indent < 3 else array
            field = _FIELD.match(line)
            if field and indent == 3:
                current["fields"].setdefault(field.group(2).strip(), field.group(3) or "")  # type: ignore[union-attr]
            if not field and indent == 3:
                array = None  # an enclosure, expander, port block: not an array
            continue
        if logical and array is not None:
            item = {"_id": logical.group(1)}
            array["logical"].append(item)  # type: ignore[union-attr]
            continue
        if drive and array is not None:
            item = {"_id": drive.group(1)}
            array["drives"].append(item)  # type: ignore[union-attr]
            continue
        if indent <= 6:
            item = None
            continue
        field = _FIELD.match(line)
        if item is not None and field and indent == 9:
            item.setdefault(field.group(2).strip(), field.group(3) or "")
    if not controllers:
        raise RaidOutputError("ssacli: no controller (no \"... in Slot N\" line)")
    for ctrl in controllers:
        _add_controller(inventory, ctrl)
    return inventory


def _add_controller(inventory: RaidInventory, ctrl: Dict[str, object]) -> None:
    fields: Dict[str, str] = ctrl["fields"]  # type: ignore[assignment]
    name = f"{TOOL}/slot{ctrl['slot']}"
    address = clean(fields.get("PCI Address (Domain:Bus:Device.Function)"))
    if address is not None and not re.fullmatch(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", address.lower()):
        address = None
    count = fields.get("Battery/Capacitor Count")
    battery_word = clean(fields.get("Battery/Capacitor Status"))
    battery = None if count is not None and count.strip() == "0" else _battery(battery_word)
    cache_status = clean(fields.get("Cache Status"))
    inventory.controllers.append(RaidController(
        name=name, tool=TOOL, model=clean(str(ctrl["model"])), firmware=clean(fields.get("Firmware Version")),
        pci_address=address.lower() if address else None, status=clean(fields.get("Controller Status")),
        battery=battery, battery_detail=battery_word, cache_status=cache_status))
    writes_cached = _write_share(fields.get("Cache Ratio"))
    cache_ok = cache_status.lower() == "ok" if cache_status else None
    for array in ctrl["arrays"]:  # type: ignore[union-attr]
        logical = array["logical"]
        for ld in logical:
            state, operation, progress = _volume_state(ld.get("Status"))
            caching = (ld.get("Caching") or "").strip().lower()
            configured = None if writes_cached is None or not caching else (caching == "enabled" and writes_cached)
            current = None if configured is None or cache_ok is None else (configured and cache_ok)
            tolerance = (ld.get("Fault Tolerance") or "").strip().lower()
            inventory.volumes.append(RaidVolume(
                controller=name, id=ld["_id"], name=clean(ld.get("Logical Drive Label")),
                level=_LEVELS.get(tolerance) or raid_level(tolerance), state=state, state_word=clean(ld.get("Status")),
                operation=operation, progress=progress, write_back_configured=configured, write_back_current=current,
                strip_bytes=parse_strip(ld.get("Strip Size")), size_bytes=parse_size(ld.get("Size")),
                device=_block(clean(ld.get("Disk Name"))), wwn=wwn(ld.get("Unique Identifier"))))
        volume = logical[0]["_id"] if len(logical) == 1 else None
        for pd in array["drives"]:
            model = clean(pd.get("Model"))
            if model and model.startswith("ATA "):
                model = model[4:].strip()
            capability = parse_link_rate(pd.get("PHY Maximum Link Rate"))
            interface = clean(pd.get("Interface Type")) or ""
            solid = interface.lower().startswith("solid state ")
            inventory.drives.append(RaidDrive(
                controller=name, slot=pd["_id"], interface=(interface[len("solid state "):] if solid else interface) or None,
                media="ssd" if solid else None,
                model=model, serial=clean(pd.get("Serial Number")),
                state=_drive_state(pd.get("Status"), pd.get("Drive Type") or (
                    "Unassigned Drive" if array["name"] == "Unassigned" else None)), state_word=clean(pd.get("Status")),
                negotiated_rate=parse_link_rate(pd.get("PHY Transfer Rate")), capability=capability,
                capability_source=TOOL if capability is not None else "", volume=volume))
