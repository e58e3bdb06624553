"""What storcli/perccli (Broadcom MegaRAID, Dell PERC) print with `J`, parsed: pure functions
from JSON text to readers.raid_records records, no I/O.

Three commands, one captured file each (readers.raid):

- `/call show all J nolog` (controllers.json): per controller "Basics" (Model, PCI Address),
  "Version" (Firmware Version), "Bus" or "PCI Version" ("Device Interface": "SAS-12G", the
  drive side's rate; Domain ID, Bus/Device/Function Number), "Status", "HwCfg" ("BBU":
  Present/Absent), "BBU_Info" / "Cachevault_Info" (State); an HBA's (mpt3sas) answer also
  holds its drives under "Physical Device Information";
- `/call/eall/sall show all J nolog` (drives.json): "Drive /c0/e252/s0" (the PD LIST row:
  State, Intf, Med, Model, DG) and "Drive /c0/e252/s0 - Detailed Information" with its
  "Device attributes" ("Device Speed": the drive's capability, "Link Speed": negotiated);
  storcli2/perccli2 instead: "Drives List" [{"Drive Information", "Drive Detailed
  Information": {"Capable Speed", "Path Information": [{"Negotiated Speed"}]}}];
- `/call/vall show all J nolog` (volumes.json): "/c0/v0" (DG/VD, TYPE, State, Cache: RWBD is
  read-ahead, write-back, direct), "PDs for VD 0", "VD0 Properties" (Strip Size, "Write
  Cache(initial setting)", "Active Operations", "OS Drive Name", "SCSI NAA Id"); storcli2:
  "Virtual Drives" [{"VD Info": {CurrentCache, DefaultCache: "NR,WB"}, "PDs", "VD Properties"}].

Behind an expander storcli's "Link Speed" is the controller-to-expander link, not the
drive's: a SATA drive rated 6.0Gb/s shows Link Speed 12.0Gb/s there. A negotiated rate
above the drive's own capability cannot be the drive's link, so such a drive's record says
`rate_is_expander_link` and its rate is left out rather than judged.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from storpath import boundedjson
from storpath.problems import Problem
from storpath.readers.raid_records import (RaidController, RaidDrive, RaidInventory, RaidOutputError, RaidVolume,
                                           block_device, clean, parse_interface_generation, parse_link_rate,
                                           parse_size, parse_strip, pci_address, progress_ratio, raid_level, wwn)

TOOL = "storcli"

_DRIVE_KEY = re.compile(r"^Drive /c(\d+)/e(\d+|)/s(\d+)$")
_DRIVE_DETAIL_KEY = re.compile(r"^Drive /c(\d+)/e(\d+|)/s(\d+) - Detailed Information$")
_VD_KEY = re.compile(r"^/c(\d+)/v(\d+)$")

_DRIVE_STATES = {"onln": "online", "online": "online", "conf": "online", "ghs": "hotspare", "dhs": "hotspare",
                 "hotspare": "hotspare", "ugood": "unconfigured", "uconf": "unconfigured",
                 "unconfigured good": "unconfigured", "ubad": "failed", "unconfigured bad": "failed",
                 "rbld": "rebuilding", "rebuild": "rebuilding", "offln": "offline", "offline": "offline",
                 "failed": "failed", "msng": "failed", "missing": "failed", "jbod": "jbod", "cpybck": "online",
                 "copyback": "online"}
_VOLUME_STATES = {"optl": "optimal", "optimal": "optimal", "dgrd": "degraded", "degraded": "degraded",
                  "pdgd": "degraded", "partially degraded": "degraded", "ofln": "failed", "offline": "failed",
                  "failed": "failed", "rec": "rebuilding"}
_BATTERY_STATES = {"optimal": "ok", "ok": "ok", "good": "ok", "learning": "learning", "charging": "learning",
                   "discharging": "learning", "degraded": "degraded", "degraded(charging)": "learning",
                   "failed": "failed", "failure": "failed", "msng": "missing", "missing": "missing",
                   "absent": "missing"}
_OPERATIONS = (("rebuild", "rebuild"), ("consistency check", "consistency_check"), ("bgi", "initialization"),
               ("background initialization", "initialization"), ("initialization", "initialization"),
               ("reconstruction", "reconstruction"))


def _load(text: str, what: str) -> List[Tuple[int, Dict[str, Any]]]:
    """(controller number, its "Response Data") of each controller that answered."""
    try:
        data = boundedjson.loads(text)
    except (ValueError, TypeError) as exc:
        raise RaidOutputError(f"storcli {what}: not JSON ({exc})") from None
    controllers = data.get("Controllers") if isinstance(data, dict) else None
    if not isinstance(controllers, list):
        raise RaidOutputError(f"storcli {what}: no \"Controllers\" list")
    out = []
    for entry in controllers:
        if not isinstance(entry, dict):
            continue
        status = entry.get("Command Status")
        number = _int(status.get("Controller")) if isinstance(status, dict) else None
        response = entry.get("Response Data")
        if number is None or not isinstance(response, dict):
            continue
        out.append((number, response))
    return out


def _int(value) -> Optional[int]:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _dict(value) -> Dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _first_dict(value) -> Dict[str, Any]:
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return value[0]
    return _dict(value)


def battery_state(word) -> Optional[str]:
    if not isinstance(word, str) or not word.strip():
        return None
    return _BATTERY_STATES.get(word.strip().lower(), "degraded")


def drive_state(word) -> str:
    if not isinstance(word, str):
        return "other"
    return _DRIVE_STATES.get(word.strip().lower(), "other")


def write_back(policy) -> Optional[bool]:
    """'RWBD', 'NRWTD', 'AWB', 'NR,WB', 'WriteBack', 'WriteThrough', 'AlwaysWriteBack' -> whether
    writes go to the controller's cache first."""
    if not isinstance(policy, str) or not policy.strip():
        return None
    word = policy.strip().replace(",", "").replace(" ", "").lower()
    if "writeback" in word or "wb" in word:
        return True
    if "writethrough" in word or "wt" in word:
        return False
    return None


def parse_controllers(text: str) -> RaidInventory:
    """`storcli /call show all J nolog`: the controllers, and the drives an HBA lists there."""
    inventory = RaidInventory()
    for number, data in _load(text, "controllers"):
        name = f"{TOOL}/c{number}"
        basics = _dict(data.get("Basics"))
        version = _dict(data.get("Version"))
        bus = _dict(data.get("Bus")) or _dict(data.get("PCI Version"))
        status = _dict(data.get("Status"))
        address = pci_address(bus.get("Domain ID"), bus.get("Bus Number"), bus.get("Device Number"),
                              bus.get("Function Number"))
        battery = None
        detail = None
        for key in ("Cachevault_Info", "BBU_Info"):
            info = _first_dict(data.get(key))
            if info.get("State") is not None:
                battery = battery_state(info.get("State"))
                detail = clean(f"{info.get('Model') or ''} {info.get('State')}")
                break
        if battery is None and clean(_dict(data.get("HwCfg")).get("BBU")) in ("Present",):
            battery, detail = "degraded", "BBU present, no state"
        inventory.controllers.append(RaidController(
            name=name, tool=TOOL, model=clean(basics.get("Model")), firmware=clean(version.get("Firmware Version")),
            pci_address=address, port_rate=parse_interface_generation(bus.get("Device Interface")),
            status=clean(status.get("Controller Status")), battery=battery, battery_detail=detail))
        inventory.extend(_drives_of(number, _dict(data.get("Physical Device Information")), {}))
    return inventory


def parse_drives(text: str, volumes_of: Optional[Dict[Tuple[str, str], str]] = None) -> RaidInventory:
    """`storcli /call/eall/sall show all J nolog` (storcli/perccli and storcli2/perccli2).
    `volumes_of`: (controller, drive group) -> volume id, from parse_volumes."""
    inventory = RaidInventory()
    for number, data in _load(text, "drives"):
        inventory.extend(_drives_of(number, data, volumes_of or {}))
        listing = data.get("Drives List")
        if isinstance(listing, list):
            inventory.extend(_drives2_of(number, listing, volumes_of or {}))
    return inventory


def _slot(enclosure: str, slot: str) -> str:
    return f"{enclosure}:{slot}" if enclosure else slot


def _drives_of(number: int, data: Dict[str, Any], volumes_of: Dict[Tuple[str, str], str]) -> RaidInventory:
    inventory = RaidInventory()
    name = f"{TOOL}/c{number}"
    for key, value in data.items():
        match = _DRIVE_KEY.match(key)
        if not match:
            continue
        row = _first_dict(value)
        detail = _dict(data.get(f"{key} - Detailed Information"))
        attributes = _dict(detail.get(f"{key} Device attributes"))
        slot = _slot(match.group(2), match.group(3))
        inventory.drives.append(_drive(name, slot, row, clean(attributes.get("SN")),
                                       attributes.get("Link Speed"), attributes.get("Device Speed"), volumes_of))
    return inventory


def _drives2_of(number: int, listing: List[Any], volumes_of: Dict[Tuple[str, str], str]) -> RaidInventory:
    inventory = RaidInventory()
    name = f"{TOOL}/c{number}"
    for entry in listing:
        entry = _dict(entry)
        row = _dict(entry.get("Drive Information"))
        detail = _dict(entry.get("Drive Detailed Information"))
        slot = clean(row.get("EID:Slt"))
        if not slot:
            inventory.problems.append(Problem("storcli drive without EID:Slt", (("source", "raid"),
                                                                               ("controller", name))))
            continue
        paths = [p for p in detail.get("Path Information") or [] if isinstance(p, dict)]
        negotiated = next((p.get("Negotiated Speed") for p in paths if clean(p.get("Path")) == "Primary"),
                          paths[0].get("Negotiated Speed") if paths else None)
        state = row.get("Status") if row.get("State") in ("Conf", "UConf", None) else row.get("State")
        if row.get("State") == "UConf" and clean(row.get("Status")) in (None, "Online", "Good"):
            state = "UConf"
        inventory.drives.append(_drive(name, slot, {**row, "State": state}, clean(detail.get("Serial Number")),
                                       negotiated, detail.get("Capable Speed"), volumes_of))
    return inventory


def _drive(controller: str, slot: str, row: Dict[str, Any], serial: Optional[str], link, device,
           volumes_of: Dict[Tuple[str, str], str]) -> RaidDrive:
    negotiated = parse_link_rate(link)
    capability = parse_link_rate(device)
    expander_link = negotiated is not None and capability is not None and negotiated > capability
    group = row.get("DG")
    volume = volumes_of.get((controller, str(group))) if _int(group) is not None else None
    media = clean(row.get("Med"))
    return RaidDrive(
        controller=controller, slot=slot, interface=clean(row.get("Intf")),
        media=media.lower() if media in ("HDD", "SSD") else None, model=clean(row.get("Model")), serial=serial,
        state=drive_state(row.get("State")), state_word=clean(row.get("State")),
        negotiated_rate=None if expander_link else negotiated, capability=capability,
        capability_source=TOOL if capability is not None else "", rate_is_expander_link=expander_link,
        volume=volume, device_id=_int(row.get("DID", row.get("PID"))))


def parse_volumes(text: str) -> RaidInventory:
    """`storcli /call/vall show all J nolog` (storcli/perccli and storcli2/perccli2)."""
    inventory = RaidInventory()
    for number, data in _load(text, "volumes"):
        name = f"{TOOL}/c{number}"
        for key, value in data.items():
            match = _VD_KEY.match(key)
            if not match:
                continue
            vd = match.group(2)
            inventory.volumes.append(_volume(name, _first_dict(value), _dict(data.get(f"VD{vd} Properties")),
                                             data.get(f"PDs for VD {vd}"), storcli2=False))
        listing = data.get("Virtual Drives")
        if isinstance(listing, list):
            for entry in listing:
                entry = _dict(entry)
                info = _dict(entry.get("VD Info"))
                if info:
                    inventory.volumes.append(_volume(name, info, _dict(entry.get("VD Properties")),
                                                     entry.get("PDs"), storcli2=True))
    return inventory


def _volume(controller: str, row: Dict[str, Any], props: Dict[str, Any], drives, storcli2: bool) -> RaidVolume:
    volume_id = clean(row.get("DG/VD")) or "?"
    word = clean(row.get("State"))
    state = _VOLUME_STATES.get((word or "").lower(), "other")
    members = [_first_dict(d) for d in drives] if isinstance(drives, list) else []
    if state == "degraded" and any(drive_state(d.get("Status") if storcli2 else d.get("State")) == "rebuilding"
                                   for d in members):
        state = "rebuilding"
    operation, progress = _operation(props.get("Active Operations"))
    if storcli2:
        current = write_back(row.get("CurrentCache"))
        configured = write_back(row.get("DefaultCache"))
    else:
        current = write_back(row.get("Cache"))
        configured = write_back(props.get("Write Cache(initial setting)"))
    return RaidVolume(
        controller=controller, id=volume_id, name=clean(row.get("Name")), level=raid_level(row.get("TYPE")),
        state=state, state_word=word, operation=operation, progress=progress, write_back_configured=configured,
        write_back_current=current, strip_bytes=parse_strip(props.get("Strip Size")),
        size_bytes=parse_size(row.get("Size")), device=block_device(props.get("OS Drive Name")),
        wwn=wwn(props.get("SCSI NAA Id")))


def _operation(text) -> Tuple[Optional[str], Optional[float]]:
    """'Consistency Check (36%)', 'Rebuild (11%)', 'None' -> (operation, progress)."""
    if not isinstance(text, str):
        return None, None
    word = text.strip().lower()
    for prefix, operation in _OPERATIONS:
        if word.startswith(prefix):
            match = re.search(r"\((\d{1,3})\s*%\)", word)
            return operation, progress_ratio(match.group(1)) if match else None
    return None, None


def volume_groups(inventory: RaidInventory) -> Dict[Tuple[str, str], str]:
    """(controller, drive group) -> volume id (DG/VD 0/0 -> group 0), for parse_drives."""
    return {(v.controller, v.id.split("/")[0]): v.id for v in inventory.volumes if "/" in v.id}
