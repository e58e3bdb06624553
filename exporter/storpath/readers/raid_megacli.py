"""What MegaCli (older LSI MegaRAID and Dell PERC, where storcli is absent) prints, parsed:
pure functions from text to readers.raid_records records, no I/O. Key: value lines, one
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
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional

from storpath.readers.raid_records import (RaidController, RaidDrive, RaidInventory, RaidOutputError, RaidVolume,
                                           clean, parse_link_rate, parse_size, parse_strip, raid_level)

TOOL = "megacli"

_ADAPTER = re.compile(r"^\s*(?:Adapter\s*#?\s*(\d+)\b|BBU status for Adapter:\s*(\d+))")
_VD = re.compile(r"^\s*Virtual (?:Drive|Disk):\s*(\d+)")
_FIELD = re.compile(r"^\s*([^:]+?)\s*:\s*(.*?)\s*$")
_POSITION = re.compile(r"DiskGroup:\s*(\d+)")


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


def _write_back(policy: Optional[str]) -> Optional[bool]:
    first = (policy or "").split(",")[0].strip().lower()
    if first in ("writeback", "always writeback"):
        return True
    if first == "writethrough":
        return False
    return None


def _blocks(text: str) -> List[Dict[str, str]]:
    """The text's key/value blocks, each started by "Adapter", "Virtual Drive" or "Enclosure
    Device ID" lines, with `_adapter`, `_kind` (vd, pd) and `_vd` (the volume a PD follows in
    -LDPDInfo)."""
    blocks: List[Dict[str, str]] = []
    adapter: Optional[str] = None
    current: Optional[Dict[str, str]] = None
    last_vd: Optional[str] = None
    for line in text.splitlines():
        match = _ADAPTER.match(line)
        if match:
            adapter = match.group(1) or match.group(2)
            current, last_vd = None, None
            continue
        if adapter is None:
            continue
        match = _VD.match(line)
        if match:
            last_vd = match.group(1)
            current = {"_adapter": adapter, "_kind": "vd", "_id": last_vd}
            blocks.append(current)
            continue
        field = _FIELD.match(line)
        if field is None:
            continue
        key, value = field.group(1), field.group(2)
        if key == "Enclosure Device ID":
            current = {"_adapter": adapter, "_kind": "pd", "_vd": last_vd or ""}
            blocks.append(current)
        if current is not None:
            current.setdefault(key, value)
    return blocks


def _drive(block: Dict[str, str]) -> RaidDrive:
    name = _name(int(block["_adapter"]))
    enclosure = (block.get("Enclosure Device ID") or "").strip()
    slot = (block.get("Slot Number") or "").strip()
    if enclosure and enclosure.upper() != "N/A":
        slot = f"{enclosure}:{slot}"
    negotiated = parse_link_rate(block.get("Link Speed"))
    capability = parse_link_rate(block.get("Device Speed"))
    expander_link = negotiated is not None and capability is not None and negotiated > capability
    position = _POSITION.search(block.get("Drive's position") or "")
    device_id = (block.get("Device Id") or "").strip()
    media = (block.get("Media Type") or "").lower()
    return RaidDrive(
        controller=name, slot=slot, interface=clean(block.get("PD Type")),
        media="ssd" if "solid state" in media else ("hdd" if "hard disk" in media else None),
        model=clean(block.get("Inquiry Data")), state=drive_state(block.get("Firmware state")),
        state_word=clean(block.get("Firmware state")), negotiated_rate=None if expander_link else negotiated,
        capability=capability, capability_source=TOOL if capability is not None else "",
        rate_is_expander_link=expander_link, volume=block.get("_vd") or (position.group(1) if position else None),
        device_id=int(device_id) if device_id.isdigit() else None)


def _volume(block: Dict[str, str], members: List[RaidDrive]) -> RaidVolume:
    state = volume_state(block.get("State"))
    if state == "degraded" and any(d.state == "rebuilding" for d in members):
        state = "rebuilding"
    return RaidVolume(
        controller=_name(int(block["_adapter"])), id=block["_id"], name=clean(block.get("Name")),
        level=raid_level(block.get("RAID Level")), state=state, state_word=clean(block.get("State")),
        operation="rebuild" if state == "rebuilding" else None,
        write_back_configured=_write_back(block.get("Default Cache Policy")),
        write_back_current=_write_back(block.get("Current Cache Policy")), strip_bytes=parse_strip(block.get("Strip Size")),
        size_bytes=parse_size(block.get("Size")))


def parse_listing(text: str) -> RaidInventory:
    """-PDList, -LdInfo or -LDPDInfo output: the drives and volumes it holds."""
    if not isinstance(text, str):
        raise RaidOutputError("MegaCli: no text")
    blocks = _blocks(text)
    if not blocks:
        raise RaidOutputError("MegaCli: no adapter with drives or virtual drives")
    inventory = RaidInventory()
    drives = [_drive(b) for b in blocks if b["_kind"] == "pd"]
    inventory.drives.extend(drives)
    seen = set()
    for block in blocks:
        if block["_kind"] == "vd":
            key = (block["_adapter"], block["_id"])
            if key in seen:  # -LdInfo pasted twice: the first
                continue
            seen.add(key)
            name = _name(int(block["_adapter"]))
            members = [d for d in drives if d.controller == name and d.volume == block["_id"]]
            inventory.volumes.append(_volume(block, members))
    return inventory


def parse_bbu(text: str) -> Dict[str, Optional[str]]:
    """-AdpBbuCmd -GetBbuStatus: controller name -> battery state (BATTERY_STATES), None
    where the adapter has none."""
    out: Dict[str, Optional[str]] = {}
    if not isinstance(text, str):
        return out
    adapter: Optional[str] = None
    fields: Dict[str, Dict[str, str]] = {}
    for line in text.splitlines():
        match = _ADAPTER.match(line)
        if match:
            adapter = match.group(1) or match.group(2)
            fields.setdefault(adapter, {})
        if adapter is None:
            continue
        if "get bbu status failed" in line.lower() or "not present" in line.lower():
            fields[adapter]["_absent"] = "yes"
            continue
        field = _FIELD.match(line) if not match else None
        if field:
            fields[adapter].setdefault(field.group(1).lower(), field.group(2).lower())
    for adapter, values in fields.items():
        name = _name(int(adapter))
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
