"""What arcconf (Microchip/Adaptec: aacraid, smartpqi) prints, parsed: pure functions from
text to readers.raid_records records, no I/O.

- `arcconf GETCONFIG <N> AL` (or its PD and LD parts alone): "Controller information"
  ("Controller Model", "Controller Status", "Firmware", "Global Max SAS Phy Link Rate : 12
  Gbps", and a battery, ZMM or cache backup unit section with its "Status" / "Overall Backup
  Unit Status"), "Logical device number N" blocks ("RAID level", "Status of logical device",
  "Stripe-unit size", "Write-cache mode : Disabled (write-through)", "Write-cache setting :
  Enabled (write-back) when protected by battery/ZMM", newer "Write-cache status : On", the
  segments "Present (Controller:1,Enclosure:0,Slot:2)"), and "Device #N" blocks ("Device is a
  Hard drive", "State", "Transfer Speed : SATA 6.0 Gb/s", "Programmed Max Speed", "Reported
  Channel,Device(T:L) : 0,3(3:0)", "Reported Location : Enclosure 0, Slot 3", newer per-PHY
  "Negotiated Physical Link Rate" and "Maximum Link Rate");
- `arcconf GETSTATUS <N>`: "Logical device : 0", "Current operation : Rebuild", "Percentage
  complete : 1" per running task.

As storcli behind an expander, arcconf's "Transfer Speed" there can exceed the drive's
"Programmed Max Speed" (SATA 12.0 against 6.0): the controller-to-expander link, not the
drive's (`rate_is_expander_link`).
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

from storpath.readers.raid_records import (RaidController, RaidDrive, RaidInventory, RaidOutputError, RaidVolume,
                                           clean, parse_link_rate, parse_size, parse_strip, progress_ratio,
                                           raid_level)

TOOL = "arcconf"

# arcconf pads its keys with spaces before the colon; keys hold colons ("Channel,Device(T:L)").
_FIELD = re.compile(r"^\s+(\S.*?)\s+:\s*(.*?)\s*$")
_LOGICAL = re.compile(r"^Logical [Dd](?:evice|rive) number (\d+)\s*$")
_DEVICE = re.compile(r"^\s+Device #(\d+)\s*$")
_LOCATION = re.compile(r"(Enclosure|Connector|Channel)\s*:?\s*(\d+)\s*,\s*(Slot|Device)\s*:?\s*(\d+)", re.I)
_OPERATIONS = (("rebuild", "rebuild"), ("build/verify", "verify"), ("verify", "verify"), ("build", "initialization"),
               ("clear", "initialization"), ("initializ", "initialization"), ("expand", "reconstruction"),
               ("migrat", "reconstruction"))


def _battery(word: Optional[str]) -> Optional[str]:
    lower = (word or "").strip().lower()
    if not lower or "not installed" in lower or "not present" in lower or lower == "none":
        return None
    if "optimal" in lower or lower.startswith("ok") or lower.startswith("ready"):
        return "ok"
    if "charg" in lower or "learn" in lower:
        return "learning"
    if "fail" in lower:
        return "failed"
    if "missing" in lower:
        return "missing"
    return "degraded"


def _drive_state(word: Optional[str]) -> str:
    lower = (word or "").strip().lower()
    if lower in ("online", "optimal"):
        return "online"
    if "spare" in lower:
        return "hotspare"
    if lower in ("ready", "unconfigured"):
        return "unconfigured"
    if lower.startswith("rebuild"):
        return "rebuilding"
    if lower in ("failed", "defunct"):
        return "failed"
    if lower.startswith("offline"):
        return "offline"
    if lower.startswith("raw") or "pass through" in lower:
        return "jbod"
    return "other"


def _volume_state(word: Optional[str]) -> str:
    lower = (word or "").strip().lower()
    if lower.startswith("optimal"):
        return "optimal"
    if lower.startswith("rebuild"):
        return "rebuilding"
    if lower.startswith(("degraded", "suboptimal", "impacted")):
        return "degraded"
    if lower.startswith(("offline", "failed")):
        return "failed"
    return "other"


def _operation(text: Optional[str]) -> Tuple[Optional[str], Optional[float]]:
    """'Rebuild' / 'Impacted ( Build/Verify with fix : 90 % )' -> (operation, progress or None)."""
    lower = (text or "").lower()
    inner = re.search(r"\(\s*([^:()]+?)\s*:\s*(\d{1,3})\s*%\s*\)", lower)
    word = inner.group(1) if inner else lower
    for prefix, operation in _OPERATIONS:
        if word.strip().startswith(prefix):
            return operation, progress_ratio(inner.group(2)) if inner else None
    return None, None


def _location(text: Optional[str]) -> Optional[str]:
    match = _LOCATION.search(text or "")
    if not match:
        return None
    return f"{match.group(1).lower()} {match.group(2)} {match.group(3).lower()} {match.group(4)}"


def _write_back(mode: Optional[str]) -> Optional[bool]:
    lower = (mode or "").strip().lower()
    if not lower or "not supported" in lower:
        return None
    if "write-back" in lower or lower.startswith(("enabled", "on")):
        return True
    if "write-through" in lower or lower.startswith(("disabled", "off")):
        return False
    return None


def parse_config(text: str, number: int) -> RaidInventory:
    """`arcconf GETCONFIG <number> AL` (or its PD or LD part)."""
    if not isinstance(text, str):
        raise RaidOutputError("arcconf: no text")
    name = f"{TOOL}/{number}"
    controller: Dict[str, str] = {}
    battery: Optional[str] = None
    logical: List[Dict[str, object]] = []
    devices: List[Dict[str, object]] = []
    section = ""
    subsection = ""
    current: Optional[Dict[str, object]] = None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or set(stripped) <= {"-"}:
            continue
        lower = stripped.lower()
        if lower == "controller information":
            section, current = "controller", None
            continue
        if lower.startswith("logical device information") or lower.startswith("logical drive information"):
            section, current = "logical", None
            continue
        if lower.startswith("physical device information"):
            section, current = "physical", None
            continue
        match = _LOGICAL.match(line)
        if match:
            section = "logical"
            current = {"_id": match.group(1), "_segments": []}
            logical.append(current)
            continue
        match = _DEVICE.match(line)
        if match:
            section = "physical"
            current = {"_id": match.group(1), "_phys": {}}
            devices.append(current)
            continue
        field = _FIELD.match(line)
        if field is None:
            if section == "controller":
                subsection = lower
            elif current is not None and section == "physical" and lower.startswith("device is"):
                current["_kind"] = lower
            continue
        key, value = field.group(1), field.group(2)
        if section == "controller":
            if key == "Overall Backup Unit Status" or (key == "Status" and ("battery" in subsection
                                                                            or "zmm" in subsection)):
                battery = battery or value
            controller.setdefault(key, value)
        elif section == "logical" and current is not None:
            if re.match(r"^(Group \d+, )?Segment \d+$", key):
                current["_segments"].append(value)  # type: ignore[union-attr]
            else:
                current.setdefault(key, value)
        elif section == "physical" and current is not None:
            if key in ("Negotiated Physical Link Rate", "Maximum Link Rate"):
                current["_phys"].setdefault(key, []).append(value)  # type: ignore[union-attr]
            else:
                current.setdefault(key, value)
    if not controller and not logical and not devices:
        raise RaidOutputError("arcconf: no controller, logical device or physical device")
    inventory = RaidInventory()
    inventory.controllers.append(RaidController(
        name=name, tool=TOOL, model=clean(controller.get("Controller Model")), firmware=_version(controller.get("Firmware")),
        port_rate=parse_link_rate(controller.get("Global Max SAS Phy Link Rate")),
        status=clean(controller.get("Controller Status")), battery=_battery(battery), battery_detail=clean(battery)))
    member: Dict[str, str] = {}
    for ld in logical:
        status = ld.get("Status of logical device") or ld.get("Status of Logical Device") or \
            ld.get("Status of logical drive")
        operation, progress = _operation(status)  # type: ignore[arg-type]
        state = _volume_state(status)  # type: ignore[arg-type]
        if state == "degraded" and operation is not None:
            # "Impacted ( Build/Verify with fix : 90 % )": redundancy being established, as a rebuild does.
            state = "rebuilding"
        segments = ld["_segments"]
        if state == "degraded" and any(str(s).lower().startswith("rebuilding") for s in segments):  # type: ignore[union-attr]
            state = "rebuilding"
        mode = ld.get("Write-cache status") or ld.get("Write-cache mode")
        setting = ld.get("Write-cache setting")
        for segment in segments:  # type: ignore[union-attr]
            place = _location(segment)
            if place:
                member[place] = str(ld["_id"])
        inventory.volumes.append(RaidVolume(
            controller=name, id=str(ld["_id"]), name=clean(ld.get("Logical device name") or ld.get("Logical Device name")),  # type: ignore[arg-type]
            level=raid_level(ld.get("RAID level") or ld.get("RAID Level")), state=state, state_word=clean(status),  # type: ignore[arg-type]
            operation=operation, progress=progress, write_back_configured=_write_back(setting),  # type: ignore[arg-type]
            write_back_current=_write_back(mode), strip_bytes=parse_strip(ld.get("Stripe-unit size")),  # type: ignore[arg-type]
            size_bytes=parse_size(ld.get("Size"))))  # type: ignore[arg-type]
    for pd in devices:
        kind = str(pd.get("_kind", ""))
        if "enclosure" in kind:
            continue
        transfer = pd.get("Transfer Speed")
        phys = pd["_phys"]
        negotiated = parse_link_rate(transfer) or max(
            (r for r in (parse_link_rate(v) for v in phys.get("Negotiated Physical Link Rate", [])) if r), default=None)  # type: ignore[union-attr]
        capability = parse_link_rate(pd.get("Programmed Max Speed")) or max(
            (r for r in (parse_link_rate(v) for v in phys.get("Maximum Link Rate", [])) if r), default=None)  # type: ignore[union-attr]
        expander_link = negotiated is not None and capability is not None and negotiated > capability
        interface = None
        for word in ("SATA", "SAS", "NVMe"):
            if isinstance(transfer, str) and transfer.strip().upper().startswith(word.upper()):
                interface = word
                break
        channel = re.match(r"\s*(\d+,\d+)", str(pd.get("Reported Channel,Device(T:L)") or pd.get("Reported Channel,Device") or ""))
        slot = channel.group(1) if channel else f"#{pd['_id']}"
        place = _location(str(pd.get("Reported Location") or ""))
        inventory.drives.append(RaidDrive(
            controller=name, slot=slot, interface=interface,
            media="ssd" if "solid state" in kind else ("hdd" if "hard drive" in kind else None),
            model=clean(" ".join(filter(None, (clean(pd.get("Vendor")), clean(pd.get("Model")))))),  # type: ignore[arg-type]
            serial=clean(pd.get("Serial number") or pd.get("Serial Number")),  # type: ignore[arg-type]
            state=_drive_state(pd.get("State")), state_word=clean(pd.get("State")),  # type: ignore[arg-type]
            negotiated_rate=None if expander_link else negotiated, capability=capability,
            capability_source=TOOL if capability is not None else "", rate_is_expander_link=expander_link,
            volume=member.get(place) if place else None))
    return inventory


def _version(text: Optional[str]) -> Optional[str]:
    """'5.2-0 (16343)' -> '5.2-0 (16343)' trimmed."""
    return clean(text)


def parse_status(text: str) -> Dict[str, Tuple[Optional[str], Optional[float]]]:
    """`arcconf GETSTATUS <N>`: logical device -> (operation, progress) of its running task."""
    out: Dict[str, Tuple[Optional[str], Optional[float]]] = {}
    if not isinstance(text, str):
        return out
    device = operation = None
    for line in text.splitlines():
        field = _FIELD.match(line)
        if not field:
            continue
        key, value = field.group(1).lower(), field.group(2)
        if key in ("logical device", "logical drive"):
            device, operation = value.strip(), None
        elif key == "current operation" and device is not None:
            operation, _ = _operation(value)
            out[device] = (operation, None)
        elif key == "percentage complete" and device is not None:
            out[device] = (operation, progress_ratio(value))
    return out


def apply_status(inventory: RaidInventory, number: int, status: Dict[str, Tuple[Optional[str], Optional[float]]]) -> None:
    """A running task's operation and progress onto its logical device (GETCONFIG's word
    is kept where GETSTATUS says nothing)."""
    name = f"{TOOL}/{number}"
    for index, volume in enumerate(inventory.volumes):
        task = status.get(volume.id) if volume.controller == name else None
        if task is None:
            continue
        operation, progress = task
        state = volume.state
        if operation == "rebuild" and state in ("degraded", "other"):
            state = "rebuilding"
        inventory.volumes[index] = RaidVolume(**{**volume.__dict__, "operation": operation or volume.operation,
                                                 "progress": progress if progress is not None else volume.progress,
                                                 "state": state})
