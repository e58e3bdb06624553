"""What MegaCli (older LSI MegaRAID and Dell PERC, where storcli is absent) prints, parsed:
pure functions from text to readers.raid.records records, no I/O. Key: value lines, one
block per drive or volume:

- `MegaCli -PDList -aALL -NoLog` (pdlist.txt): "Adapter #0", then per drive "Enclosure Device
  ID", "Slot Number", "Drive's position: DiskGroup: 0, Span: 0, Arm: 0", "Device Id", "PD
  Type: SATA", "Firmware state: Online, Spun Up" (Rebuild, Failed, Unconfigured(good),
  Hotspare...), "Inquiry Data" (vendor, model and serial run together), "Device Speed: 6.0Gb/s"
  (the drive's capability), "Link Speed: 3.0Gb/s" (negotiated), "Media Type";
- `MegaCli -LdInfo -Lall -aALL -NoLog` (ldinfo.txt): "Adapter 0 -- Virtual Drive Information:",
  "Virtual Drive: 0 (Target Id: 0)", "RAID Level: Primary-5, Secondary-0, RAID Level
  Qualifier-3", "Size", "State", "Strip Size", "Default Cache Policy: WriteBack, ..." against
  "Current Cache Policy: WriteThrough, ..." (the fallback when the battery goes bad);
- `MegaCli -LDPDInfo -aALL -NoLog` (ldpdinfo.txt): both, each volume followed by its drives
  ("PD: 0 Information");
- `MegaCli -AdpBbuCmd -GetBbuStatus -aALL -NoLog` (bbu.txt): "BBU status for Adapter: 0",
  "Battery State", "Battery Pack Missing", "Battery Replacement required", "Learn Cycle
  Active", "isSOHGood".

MegaCli's listings name no controller port rate: a drive whose link is below its own
"Device Speed" may be held by the controller (a 3 Gb/s SAS1078) and is not called slow.

Every line is split at its first colon (no pattern that could backtrack on a long line) and
cut to MAX_LINE first; numbers are bounded digit runs; a field holding what its reader cannot
read is a problem naming it; more drives or volumes than readers.raid.records' bounds is the
tool's failure.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

from storpath.readers.raid.records import (Bounds, Fields, RaidController, RaidDrive, RaidInventory, RaidOutputError,
                                           RaidVolume, clean, fenced, lines, parse_link_rate, parse_size, parse_strip,
                                           raid_level, split_field, whole_number)

TOOL = "megacli"

# Anchored, each quantifier followed by a literal it cannot match: linear on any line.
_ADAPTER = re.compile(r"\s*(?:Adapter\s*(?:#\s*)?([0-9]+)\b|BBU status for Adapter:\s*([0-9]+))")
_VD = re.compile(r"\s*Virtual (?:Drive|Disk):\s*([0-9]+)")
_POSITION = re.compile(r"DiskGroup: *([0-9]{1,9})(?![0-9])")


def _name(adapter: int) -> str:
    return f"{TOOL}/a{adapter}"


def drive_state(word: Optional[str]) -> str:
    lower = (word or "").lower()
    if lower.startswith("online"):
        return "online"
    if lower.startswith("rebuild"):
        return "rebuilding"
    if "hotspare" in lower or "hot spare" in lower:
        return "hotspare"
    if lower.startswith("unconfigured(good)") or lower.startswith("unconfigured good"):
        return "unconfigured"
    if lower.startswith("unconfigured(bad)") or lower.startswith("failed"):
        return "failed"
    if lower.startswith("offline"):
        return "offline"
    if lower.startswith("jbod"):
        return "jbod"
    if lower.startswith("copyback"):
        return "online"
    return "other"


def volume_state(word: Optional[str]) -> str:
    lower = (word or "").lower()
    if lower.startswith("optimal"):
        return "optimal"
    if "degraded" in lower:
        return "degraded"
    if lower.startswith("offline") or lower.startswith("failed"):
        return "failed"
    return "other"


def write_back(policy) -> Optional[bool]:
    """'WriteBack, ReadAhead, Direct, ...' -> True; 'WriteThrough, ...' -> False; else None."""
    first = policy.split(",")[0].strip().lower() if isinstance(policy, str) else ""
    if first in ("writeback", "always writeback"):
        return True
    if first == "writethrough":
        return False
    return None


def _adapter(line: str, fields: Fields) -> Tuple[bool, Optional[int]]:
    """(whether the line starts an adapter's section, its number: None when unreadable)."""
    match = _ADAPTER.match(line)
    if not match:
        return False, None
    digits = match.group(1) or match.group(2)
    number = whole_number(digits, maximum=9999)
    if number is None:
        fields.unreadable("megacli", "adapter number", digits)
    return True, number


def _blocks(text: str, fields: Fields) -> List[Dict[str, str]]:
    """The text's key/value blocks, each started by "Adapter", "Virtual Drive" or "Enclosure
    Device ID" lines, with `_adapter`, `_kind` (vd, pd) and `_vd` (the volume a PD follows in
    -LDPDInfo). An adapter whose number cannot be read is skipped, up to the next adapter."""
    blocks: List[Dict[str, str]] = []
    adapter: Optional[int] = None
    current: Optional[Dict[str, str]] = None
    last_vd: Optional[str] = None
    for line in lines(text):
        starts, number = _adapter(line, fields)
        if starts:
            adapter, current, last_vd = number, None, None
            continue
        if adapter is None:
            continue
        match = _VD.match(line)
        if match:
            number = whole_number(match.group(1), maximum=999999)
            if number is None:
                fields.unreadable(_name(adapter), "Virtual Drive", match.group(1))
                current = last_vd = None
                continue
            last_vd = str(number)
            current = {"_adapter": str(adapter), "_kind": "vd", "_id": last_vd}
            blocks.append(current)
            continue
        field = split_field(line)
        if field is None:
            continue
        key, value = field
        if key == "Enclosure Device ID":
            current = {"_adapter": str(adapter), "_kind": "pd", "_vd": last_vd or ""}
            blocks.append(current)
        if current is not None:
            current.setdefault(key, value)
    return blocks


def _drive(block: Dict[str, str], fields: Fields) -> Optional[RaidDrive]:
    name = _name(int(block["_adapter"]))
    enclosure = clean(block.get("Enclosure Device ID")) or ""
    slot_number = whole_number(block.get("Slot Number"), maximum=999999)
    if slot_number is None:
        fields.unreadable(name, "Slot Number", block.get("Slot Number"))
        return None
    slot = str(slot_number)
    if enclosure and enclosure.upper() != "N/A":
        number = whole_number(enclosure, maximum=999999)
        if number is None:
            fields.unreadable(name, "Enclosure Device ID", enclosure)
            return None
        slot = f"{number}:{slot}"
    where = f"{name} {slot}"
    position = _POSITION.search(block.get("Drive's position") or "")
    media = (block.get("Media Type") or "").lower()
    capability = fields.read(where, "Device Speed", block.get("Device Speed"), parse_link_rate)
    return RaidDrive(
        controller=name, slot=slot, interface=clean(block.get("PD Type")),
        media="ssd" if "solid state" in media else ("hdd" if "hard disk" in media else None),
        model=clean(block.get("Inquiry Data")), state=drive_state(block.get("Firmware state")),
        state_word=clean(block.get("Firmware state")),
        negotiated_rate=fields.read(where, "Link Speed", block.get("Link Speed"), parse_link_rate),
        capability=capability, capability_source=TOOL if capability is not None else "",
        volume=block.get("_vd") or (position.group(1) if position else None),
        device_id=fields.read(where, "Device Id", block.get("Device Id"), lambda v: whole_number(v, maximum=65535)))


def _volume(block: Dict[str, str], members: List[RaidDrive], fields: Fields) -> RaidVolume:
    name = _name(int(block["_adapter"]))
    where = f"{name} volume {block['_id']}"
    state = volume_state(block.get("State"))
    if state == "degraded" and any(d.state == "rebuilding" for d in members):
        state = "rebuilding"
    return RaidVolume(
        controller=name, id=block["_id"], name=clean(block.get("Name")),
        level=fields.read(where, "RAID Level", block.get("RAID Level"), raid_level), state=state,
        state_word=clean(block.get("State")), operation="rebuild" if state == "rebuilding" else None,
        write_back_configured=fields.read(where, "Default Cache Policy", block.get("Default Cache Policy"), write_back),
        write_back_current=fields.read(where, "Current Cache Policy", block.get("Current Cache Policy"), write_back),
        strip_bytes=fields.read(where, "Strip Size", block.get("Strip Size"), parse_strip),
        size_bytes=fields.read(where, "Size", block.get("Size"), parse_size))


@fenced("MegaCli")
def parse_listing(text: str) -> RaidInventory:
    """-PDList, -LdInfo or -LDPDInfo output: the drives and volumes it holds."""
    if not isinstance(text, str):
        raise RaidOutputError("MegaCli: no text")
    fields = Fields(TOOL)
    blocks = _blocks(text, fields)
    if not blocks:
        raise RaidOutputError("MegaCli: no adapter with drives or virtual drives")
    bounds = Bounds("MegaCli")
    drives = []
    for block in blocks:
        if block["_kind"] == "pd":
            bounds.drive(_name(int(block["_adapter"])))
            drive = _drive(block, fields)
            if drive is not None:
                drives.append(drive)
    volumes = []
    seen = set()
    for block in blocks:
        if block["_kind"] == "vd":
            key = (block["_adapter"], block["_id"])
            if key in seen:  # -LdInfo pasted twice: the first
                continue
            seen.add(key)
            name = _name(int(block["_adapter"]))
            bounds.volume(name)
            members = [d for d in drives if d.controller == name and d.volume == block["_id"]]
            volumes.append(_volume(block, members, fields))
    return RaidInventory(drives=drives, volumes=volumes, problems=fields.problems)


@fenced("MegaCli -AdpBbuCmd")
def parse_bbu(text: str) -> Dict[str, Optional[str]]:
    """-AdpBbuCmd -GetBbuStatus: controller name -> battery state (BATTERY_STATES), None
    where the adapter has none."""
    out: Dict[str, Optional[str]] = {}
    if not isinstance(text, str):
        return out
    adapter: Optional[int] = None
    values_of: Dict[int, Dict[str, str]] = {}
    ignored = Fields(TOOL)  # an unreadable adapter number is the listings' problem to report
    for line in lines(text):
        starts, number = _adapter(line, ignored)
        if starts:
            adapter = number
            if adapter is not None:
                values_of.setdefault(adapter, {})
        if adapter is None:
            continue
        if "get bbu status failed" in line.lower() or "not present" in line.lower():
            values_of[adapter]["_absent"] = "yes"  # "Adapter 0: Get BBU Status Failed." on the adapter's own line
            continue
        field = split_field(line) if not starts else None
        if field:
            values_of[adapter].setdefault(field[0].lower(), field[1].lower())
    for adapter, values in values_of.items():
        name = _name(adapter)
        if values.get("_absent") or values.get("battery pack missing") == "yes":
            out[name] = "missing" if values.get("battery pack missing") == "yes" else None
        elif values.get("battery replacement required") == "yes" or values.get("issohgood") == "no" \
                or values.get("battery state", "").startswith("fail"):
            out[name] = "failed"
        elif values.get("learn cycle active") == "yes" or values.get("charging status") in ("charging", "discharging") \
                and values.get("battery state", "") != "optimal":
            out[name] = "learning"
        elif values.get("battery state", "optimal") in ("optimal", "") or values.get("remaining capacity low") == "no":
            out[name] = "ok"
        else:
            out[name] = "degraded"
    return out


def controllers(inventory: RaidInventory, batteries: Dict[str, Optional[str]]) -> List[RaidController]:
    """One controller per adapter the listings or the battery status name (MegaCli's
    listings give no model or firmware)."""
    names = sorted({d.controller for d in inventory.drives} | {v.controller for v in inventory.volumes}
                   | set(batteries))
    return [RaidController(name=name, tool=TOOL, battery=batteries.get(name),
                           battery_detail=None) for name in names]
