"""What storcli/perccli (Broadcom MegaRAID, Dell PERC) print with `J`, parsed: pure functions
from JSON text to readers.raid.records records, no I/O.

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
drive's: a SATA drive rated 6.0Gb/s shows Link Speed 12.0Gb/s there. The record keeps the rate
storcli gave; storpath.analysis.raid decides that it is not the drive's own link.

A field holding what its reader cannot read is a problem naming it (the record's value None);
more controllers, drives or volumes than readers.raid.records' bounds is the tool's failure.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from storpath.base.problems import Problem
from storpath.readers.raid.records import (MAX_CONTROLLERS, Bounds, Fields, RaidController, RaidDrive, RaidInventory,
                                           RaidOutputError, RaidVolume, block_device, clean, fenced, load_json,
                                           parse_interface_generation, parse_link_rate, parse_size, parse_strip,
                                           pci_address, progress_ratio, raid_level, whole_number, wwn)

TOOL = "storcli"

# Keys of storcli's JSON: anchored, digit runs bounded (a longer one is no drive of a controller).
_DRIVE_KEY = re.compile(r"Drive /c([0-9]{1,4})/e([0-9]{1,5}|)/s([0-9]{1,5})")
_VD_KEY = re.compile(r"/c([0-9]{1,4})/v([0-9]{1,5})")
_PROGRESS = re.compile(r"\(([0-9]{1,3}) ?%\)")

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


def _load(text: str, what: str, fields: Fields) -> List[Tuple[int, Dict[str, Any]]]:
    """(controller number, its "Response Data") of each controller that answered."""
    data = load_json(text, f"storcli {what}")
    controllers = data.get("Controllers") if isinstance(data, dict) else None
    if not isinstance(controllers, list):
        raise RaidOutputError(f"storcli {what}: no \"Controllers\" list")
    if len(controllers) > MAX_CONTROLLERS:
        raise RaidOutputError(f"storcli {what}: {len(controllers)} controllers, more than the {MAX_CONTROLLERS} "
                              "storpath reads from one tool (MAX_CONTROLLERS)")
    out = []
    for entry in controllers:
        if not isinstance(entry, dict):
            continue
        status = entry.get("Command Status")
        response = entry.get("Response Data")
        if not isinstance(status, dict) or not isinstance(response, dict):
            continue  # a controller that answered "not supported": nothing of it here
        number = fields.read(f"storcli {what}", "Controller", status.get("Controller"), _number)
        if number is not None:
            out.append((number, response))
    return out


def _number(value) -> Optional[int]:
    """A controller's or a drive group's number."""
    return whole_number(value, maximum=9999)


def _device_id(value) -> Optional[int]:
    return whole_number(value, maximum=65535)


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


@fenced("storcli controllers")
def parse_controllers(text: str) -> RaidInventory:
    """`storcli /call show all J nolog`: the controllers, and the drives an HBA lists there."""
    fields = Fields(TOOL)
    bounds = Bounds(TOOL)
    controllers: List[RaidController] = []
    drives: List[RaidDrive] = []
    for number, data in _load(text, "controllers", fields):
        name = f"{TOOL}/c{number}"
        bounds.controller(name)
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
                detail = clean(f"{clean(info.get('Model')) or ''} {clean(info.get('State')) or ''}")
                break
        if battery is None and clean(_dict(data.get("HwCfg")).get("BBU")) in ("Present",):
            battery, detail = "degraded", "BBU present, no state"
        controllers.append(RaidController(
            name=name, tool=TOOL, model=clean(basics.get("Model")), firmware=clean(version.get("Firmware Version")),
            pci_address=address, port_rate=fields.read(name, "Device Interface", bus.get("Device Interface"),
                                                       parse_interface_generation),
            status=clean(status.get("Controller Status")), battery=battery, battery_detail=detail))
        drives.extend(_drives_of(number, _dict(data.get("Physical Device Information")), {}, fields, bounds))
    return RaidInventory(controllers=controllers, drives=drives, problems=fields.problems)


@fenced("storcli drives")
def parse_drives(text: str, volumes_of: Optional[Dict[Tuple[str, str], str]] = None) -> RaidInventory:
    """`storcli /call/eall/sall show all J nolog` (storcli/perccli and storcli2/perccli2).
    `volumes_of`: (controller, drive group) -> volume id, from parse_volumes."""
    fields = Fields(TOOL)
    bounds = Bounds(TOOL)
    drives: List[RaidDrive] = []
    for number, data in _load(text, "drives", fields):
        drives.extend(_drives_of(number, data, volumes_of or {}, fields, bounds))
        listing = data.get("Drives List")
        if isinstance(listing, list):
            drives.extend(_drives2_of(number, listing, volumes_of or {}, fields, bounds))
    return RaidInventory(drives=drives, problems=fields.problems)


def _slot(enclosure: str, slot: str) -> str:
    return f"{enclosure}:{slot}" if enclosure else slot


def _drives_of(number: int, data: Dict[str, Any], volumes_of: Dict[Tuple[str, str], str], fields: Fields,
               bounds: Bounds) -> List[RaidDrive]:
    out = []
    name = f"{TOOL}/c{number}"
    for key, value in data.items():
        match = _DRIVE_KEY.fullmatch(key)
        if not match:
            continue
        bounds.drive(name)
        row = _first_dict(value)
        detail = _dict(data.get(f"{key} - Detailed Information"))
        attributes = _dict(detail.get(f"{key} Device attributes"))
        slot = _slot(match.group(2), match.group(3))
        out.append(_drive(name, slot, row, clean(attributes.get("SN")), ("Link Speed", attributes.get("Link Speed")),
                          ("Device Speed", attributes.get("Device Speed")), volumes_of, fields))
    return out


def _drives2_of(number: int, listing: List[Any], volumes_of: Dict[Tuple[str, str], str], fields: Fields,
                bounds: Bounds) -> List[RaidDrive]:
    out = []
    name = f"{TOOL}/c{number}"
    for entry in listing:
        entry = _dict(entry)
        row = _dict(entry.get("Drive Information"))
        detail = _dict(entry.get("Drive Detailed Information"))
        bounds.drive(name)
        slot = clean(row.get("EID:Slt"))
        if not slot or len(slot) > 16:
            fields.problems.append(Problem("storcli drive without EID:Slt", (("source", "raid"),
                                                                              ("controller", name))))
            continue
        paths = detail.get("Path Information")
        paths = [p for p in paths if isinstance(p, dict)] if isinstance(paths, list) else []
        negotiated = next((p.get("Negotiated Speed") for p in paths if clean(p.get("Path")) == "Primary"),
                          paths[0].get("Negotiated Speed") if paths else None)
        state = row.get("Status") if row.get("State") in ("Conf", "UConf", None) else row.get("State")
        if row.get("State") == "UConf" and clean(row.get("Status")) in (None, "Online", "Good"):
            state = "UConf"
        out.append(_drive(name, slot, {**row, "State": state}, clean(detail.get("Serial Number")),
                          ("Negotiated Speed", negotiated), ("Capable Speed", detail.get("Capable Speed")),
                          volumes_of, fields))
    return out


def _drive(controller: str, slot: str, row: Dict[str, Any], serial: Optional[str], link: Tuple[str, Any],
           device: Tuple[str, Any], volumes_of: Dict[Tuple[str, str], str], fields: Fields) -> RaidDrive:
    """One drive; `link` and `device`: (the field's name, what it holds) of the negotiated rate
    and the drive's capability."""
    where = f"{controller} {slot}"
    capability = fields.read(where, device[0], device[1], parse_link_rate)
    group = fields.read(where, "DG", row.get("DG"), _number)
    media = clean(row.get("Med"))
    return RaidDrive(
        controller=controller, slot=slot, interface=clean(row.get("Intf")),
        media=media.lower() if media in ("HDD", "SSD") else None, model=clean(row.get("Model")), serial=serial,
        state=drive_state(row.get("State")), state_word=clean(row.get("State")),
        negotiated_rate=fields.read(where, link[0], link[1], parse_link_rate), capability=capability,
        capability_source=TOOL if capability is not None else "",
        volume=volumes_of.get((controller, str(group))) if group is not None else None,
        device_id=fields.read(where, "DID", row.get("DID", row.get("PID")), _device_id))


@fenced("storcli volumes")
def parse_volumes(text: str) -> RaidInventory:
    """`storcli /call/vall show all J nolog` (storcli/perccli and storcli2/perccli2)."""
    fields = Fields(TOOL)
    bounds = Bounds(TOOL)
    volumes: List[RaidVolume] = []
    for number, data in _load(text, "volumes", fields):
        name = f"{TOOL}/c{number}"
        for key, value in data.items():
            match = _VD_KEY.fullmatch(key)
            if not match:
                continue
            bounds.volume(name)
            vd = match.group(2)
            volumes.append(_volume(name, _first_dict(value), _dict(data.get(f"VD{vd} Properties")),
                                   data.get(f"PDs for VD {vd}"), False, fields))
        listing = data.get("Virtual Drives")
        if isinstance(listing, list):
            for entry in listing:
                entry = _dict(entry)
                info = _dict(entry.get("VD Info"))
                if info:
                    bounds.volume(name)
                    volumes.append(_volume(name, info, _dict(entry.get("VD Properties")), entry.get("PDs"), True,
                                           fields))
    return RaidInventory(volumes=volumes, problems=fields.problems)


def _volume_id(value) -> Optional[str]:
    """'0/0' (drive group/virtual drive), '0/239' -> itself; anything else None."""
    parts = value.strip().split("/") if isinstance(value, str) else []
    numbers = [whole_number(p, maximum=9999) for p in parts]
    return "/".join(map(str, numbers)) if len(numbers) == 2 and None not in numbers else None


def _volume(controller: str, row: Dict[str, Any], props: Dict[str, Any], drives, storcli2: bool,
            fields: Fields) -> RaidVolume:
    volume_id = fields.read(controller, "DG/VD", row.get("DG/VD"), _volume_id) or "?"
    where = f"{controller} volume {volume_id}"
    word = clean(row.get("State"))
    state = _VOLUME_STATES.get((word or "").lower(), "other")
    members = [_first_dict(d) for d in drives] if isinstance(drives, list) else []
    if state == "degraded" and any(drive_state(d.get("Status") if storcli2 else d.get("State")) == "rebuilding"
                                   for d in members):
        state = "rebuilding"
    operation, progress = _operation(props.get("Active Operations"))
    current_key, configured_key = ("CurrentCache", "DefaultCache") if storcli2 else ("Cache", None)
    current = fields.read(where, current_key, row.get(current_key), write_back)
    if configured_key:
        configured = fields.read(where, configured_key, row.get(configured_key), write_back)
    else:
        configured = fields.read(where, "Write Cache(initial setting)", props.get("Write Cache(initial setting)"),
                                 write_back)
    return RaidVolume(
        controller=controller, id=volume_id, name=clean(row.get("Name")),
        level=fields.read(where, "TYPE", row.get("TYPE"), raid_level), state=state, state_word=word,
        operation=operation, progress=progress, write_back_configured=configured, write_back_current=current,
        strip_bytes=fields.read(where, "Strip Size", props.get("Strip Size"), parse_strip),
        size_bytes=fields.read(where, "Size", row.get("Size"), parse_size),
        device=fields.read(where, "OS Drive Name", props.get("OS Drive Name"), block_device),
        wwn=fields.read(where, "SCSI NAA Id", props.get("SCSI NAA Id"), wwn))


def _operation(text) -> Tuple[Optional[str], Optional[float]]:
    """'Consistency Check (36%)', 'Rebuild (11%)', 'None' -> (operation, progress)."""
    if not isinstance(text, str):
        return None, None
    word = text.strip().lower()
    for prefix, operation in _OPERATIONS:
        if word.startswith(prefix):
            match = _PROGRESS.search(word)
            return operation, progress_ratio(match.group(1)) if match else None
    return None, None


def volume_groups(inventory: RaidInventory) -> Dict[Tuple[str, str], str]:
    """(controller, drive group) -> volume id (DG/VD 0/0 -> group 0), for parse_drives."""
    return {(v.controller, v.id.split("/")[0]): v.id for v in inventory.volumes if "/" in v.id}
