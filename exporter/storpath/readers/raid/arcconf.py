"""What arcconf (Microchip/Adaptec: aacraid, smartpqi) prints, parsed: pure functions from
text to readers.raid.records records, no I/O.

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
drive's. The record keeps the rate arcconf gave; storpath.analysis.raid decides.

A field's key ends at the first colon after a space (keys hold colons: "Reported
Channel,Device(T:L)"), found by a split, not a pattern over the line; lines are cut to
MAX_LINE; a field holding what its reader cannot read is a problem naming it.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Dict, List, Optional, Tuple

from storpath.readers.raid.records import (Bounds, Fields, RaidController, RaidDrive, RaidInventory, RaidOutputError,
                                           RaidVolume, clean, fenced, lines, parse_link_rate, parse_size, parse_strip,
                                           progress_ratio, raid_level, split_field, whole_number)

TOOL = "arcconf"

# arcconf pads its keys with spaces before the colon; keys hold colons ("Channel,Device(T:L)").
_SEPARATOR = re.compile(r"\s:")
_LOGICAL = re.compile(r"Logical [Dd](?:evice|rive) number ([0-9]{1,6})\s*")
_DEVICE = re.compile(r"\s+Device #([0-9]{1,6})\s*")
_SEGMENT = re.compile(r"(?:Group [0-9]{1,6}, )?Segment [0-9]{1,6}")
_CHANNEL = re.compile(r"\s*([0-9]{1,6},[0-9]{1,6})")
# On text whose whitespace is single spaces: each optional part a character, so a failed
# match costs a few steps.
_LOCATION = re.compile(r"(Enclosure|Connector|Channel) ?:? ?([0-9]{1,6}) ?, ?(Slot|Device) ?:? ?([0-9]{1,6})", re.I)
_CONTROLLERS_FOUND = re.compile(r"Controllers found: *([0-9]+)")
_OPERATIONS = (("rebuild", "rebuild"), ("build/verify", "verify"), ("verify", "verify"), ("build", "initialization"),
               ("clear", "initialization"), ("initializ", "initialization"), ("expand", "reconstruction"),
               ("migrat", "reconstruction"))


def _field(line: str) -> Optional[Tuple[str, str]]:
    """'   Controller Status        : Optimal' -> ('Controller Status', 'Optimal'); a line
    without leading space is no field."""
    return split_field(line, _SEPARATOR) if line[:1].isspace() else None


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
    lower = " ".join((text or "").lower().split())
    word, percent = lower, None
    opened, _, inner = lower.partition("(")
    inner, closed, _ = inner.partition(")")
    if opened != lower and closed:
        task, colon, amount = inner.rpartition(":")
        number = whole_number(amount.replace("%", "").strip(), maximum=100) if colon else None
        if number is not None:
            word, percent = task.strip(), number
    for prefix, operation in _OPERATIONS:
        if word.strip().startswith(prefix):
            return operation, progress_ratio(percent) if percent is not None else None
    return None, None


def _location(text: Optional[str]) -> Optional[str]:
    match = _LOCATION.search(" ".join((text or "").split()))
    if not match:
        return None
    return f"{match.group(1).lower()} {match.group(2)} {match.group(3).lower()} {match.group(4)}"


def write_back(mode) -> Optional[bool]:
    """'Enabled (write-back)', 'Disabled (write-through)', 'On', 'Off' -> whether writes are
    cached; None for anything else."""
    lower = mode.strip().lower() if isinstance(mode, str) else ""
    if not lower or "not supported" in lower:
        return None
    if "write-back" in lower or lower.startswith(("enabled", "on")):
        return True
    if "write-through" in lower or lower.startswith(("disabled", "off")):
        return False
    return None


def controller_count(text) -> Optional[int]:
    """`arcconf LIST`'s "Controllers found: N"; None when it has none (or an absurd number)."""
    match = _CONTROLLERS_FOUND.search(text) if isinstance(text, str) else None
    return whole_number(match.group(1), maximum=999) if match else None


@fenced("arcconf")
def parse_config(text: str, number: int, status: Optional[str] = None) -> RaidInventory:
    """`arcconf GETCONFIG <number> AL` (or its PD or LD part), with `arcconf GETSTATUS
    <number>`'s running tasks where given."""
    if not isinstance(text, str):
        raise RaidOutputError("arcconf: no text")
    name = f"{TOOL}/{number}"
    controller: Dict[str, str] = {}
    battery: Optional[str] = None
    logical: List[Dict[str, object]] = []
    devices: List[Dict[str, object]] = []
    bounds = Bounds(TOOL)
    fields = Fields(TOOL)
    section = ""
    subsection = ""
    current: Optional[Dict[str, object]] = None
    for line in lines(text):
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
        match = _LOGICAL.fullmatch(line)
        if match:
            bounds.volume(name)
            section = "logical"
            current = {"_id": match.group(1), "_segments": []}
            logical.append(current)
            continue
        match = _DEVICE.fullmatch(line)
        if match:
            bounds.drive(name)
            section = "physical"
            current = {"_id": match.group(1), "_phys": {}}
            devices.append(current)
            continue
        field = _field(line)
        if field is None:
            if section == "controller":
                subsection = lower
            elif current is not None and section == "physical" and lower.startswith("device is"):
                current["_kind"] = lower
            continue
        key, value = field
        if section == "controller":
            if key == "Overall Backup Unit Status" or (key == "Status" and ("battery" in subsection
                                                                            or "zmm" in subsection)):
                battery = battery or value
            controller.setdefault(key, value)
        elif section == "logical" and current is not None:
            if _SEGMENT.fullmatch(key):
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
    inventory = RaidInventory(problems=fields.problems)
    inventory.controllers.append(RaidController(
        name=name, tool=TOOL, model=clean(controller.get("Controller Model")), firmware=clean(controller.get("Firmware")),
        port_rate=fields.read(name, "Global Max SAS Phy Link Rate", controller.get("Global Max SAS Phy Link Rate"),
                              parse_link_rate),
        status=clean(controller.get("Controller Status")), battery=_battery(battery), battery_detail=clean(battery)))
    member: Dict[str, str] = {}
    for ld in logical:
        where = f"{name} volume {ld['_id']}"
        status_word = ld.get("Status of logical device") or ld.get("Status of Logical Device") or \
            ld.get("Status of logical drive")
        operation, progress = _operation(status_word)  # type: ignore[arg-type]
        state = _volume_state(status_word)  # type: ignore[arg-type]
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
            controller=name, id=str(ld["_id"]), name=clean(ld.get("Logical device name") or ld.get("Logical Device name")),
            level=fields.read(where, "RAID level", ld.get("RAID level") or ld.get("RAID Level"), raid_level),
            state=state, state_word=clean(status_word), operation=operation, progress=progress,
            write_back_configured=fields.read(where, "Write-cache setting", setting, write_back),
            write_back_current=fields.read(where, "Write-cache status" if ld.get("Write-cache status") else
                                           "Write-cache mode", mode, write_back),
            strip_bytes=fields.read(where, "Stripe-unit size", ld.get("Stripe-unit size"), parse_strip),
            size_bytes=fields.read(where, "Size", ld.get("Size"), parse_size)))
    for pd in devices:
        kind = str(pd.get("_kind", ""))
        if "enclosure" in kind:
            continue
        channel = _CHANNEL.match(str(pd.get("Reported Channel,Device(T:L)") or pd.get("Reported Channel,Device") or ""))
        slot = channel.group(1) if channel else f"#{pd['_id']}"
        where = f"{name} {slot}"
        transfer = pd.get("Transfer Speed")
        phys: Dict[str, List[str]] = pd["_phys"]  # type: ignore[assignment]
        negotiated = fields.read(where, "Transfer Speed", transfer, parse_link_rate) or max(
            (r for r in (fields.read(where, "Negotiated Physical Link Rate", v, parse_link_rate)
                         for v in phys.get("Negotiated Physical Link Rate", [])) if r), default=None)
        capability = fields.read(where, "Programmed Max Speed", pd.get("Programmed Max Speed"), parse_link_rate) or max(
            (r for r in (fields.read(where, "Maximum Link Rate", v, parse_link_rate)
                         for v in phys.get("Maximum Link Rate", [])) if r), default=None)
        interface = None
        for word in ("SATA", "SAS", "NVMe"):
            if isinstance(transfer, str) and transfer.strip().upper().startswith(word.upper()):
                interface = word
                break
        place = _location(str(pd.get("Reported Location") or ""))
        inventory.drives.append(RaidDrive(
            controller=name, slot=slot, interface=interface,
            media="ssd" if "solid state" in kind else ("hdd" if "hard drive" in kind else None),
            model=clean(" ".join(filter(None, (clean(pd.get("Vendor")), clean(pd.get("Model")))))),  # type: ignore[arg-type]
            serial=clean(pd.get("Serial number") or pd.get("Serial Number")),  # type: ignore[arg-type]
            state=_drive_state(pd.get("State")), state_word=clean(pd.get("State")),  # type: ignore[arg-type]
            negotiated_rate=negotiated, capability=capability,
            capability_source=TOOL if capability is not None else "",
            volume=member.get(place) if place else None))
    return apply_status(inventory, number, parse_status(status)) if status is not None else inventory


@fenced("arcconf GETSTATUS")
def parse_status(text: str) -> Dict[str, Tuple[Optional[str], Optional[float]]]:
    """`arcconf GETSTATUS <N>`: logical device -> (operation, progress) of its running task."""
    out: Dict[str, Tuple[Optional[str], Optional[float]]] = {}
    if not isinstance(text, str):
        return out
    device = operation = None
    for line in lines(text):
        field = _field(line)
        if not field:
            continue
        key, value = field[0].lower(), field[1]
        if key in ("logical device", "logical drive"):
            number = whole_number(value, maximum=999999)
            device, operation = (str(number) if number is not None else None), None
        elif key == "current operation" and device is not None:
            operation, _ = _operation(value)
            out[device] = (operation, None)
        elif key == "percentage complete" and device is not None:
            out[device] = (operation, progress_ratio(value))
    return out


def apply_status(inventory: RaidInventory, number: int,
                 status: Dict[str, Tuple[Optional[str], Optional[float]]]) -> RaidInventory:
    """The inventory with a running task's operation and progress on its logical device
    (GETCONFIG's word kept where GETSTATUS says nothing); `inventory` is left as it was."""
    name = f"{TOOL}/{number}"
    volumes = []
    for volume in inventory.volumes:
        task = status.get(volume.id) if volume.controller == name else None
        if task is not None:
            operation, progress = task
            state = "rebuilding" if operation == "rebuild" and volume.state in ("degraded", "other") else volume.state
            volume = replace(volume, operation=operation or volume.operation,
                             progress=progress if progress is not None else volume.progress, state=state)
        volumes.append(volume)
    return RaidInventory(controllers=list(inventory.controllers), drives=list(inventory.drives), volumes=volumes,
                         problems=list(inventory.problems))
