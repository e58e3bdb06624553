"""What `ssacli ctrl all show config detail` (HPE Smart Array: hpsa, smartpqi; hpacucli before
it) prints, parsed: a pure function from text to readers.raid.records records, no I/O.

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

Older hpacucli output, as support tools collect it, is instead one command's answer after
another: `controller all show` (every controller's header), `controller slot=N show` (its
fields), `... array A physicaldrive all show` (a summary line per drive: "physicaldrive 2E:1:1
(port 2E:box 1:bay 1, SATA, 2 TB, OK)"), then `physicaldrive 2E:1:1 show` per drive, each
under its own "Smart Array P212 in Slot 2" header and "array A" (lower case). Everything said
of one slot is one controller, of one array name one array, of one drive id one drive: the
detailed fields win over a summary line's.

Write cache: a logical drive with "Caching: Enabled" on a controller whose "Cache Ratio" gives
writes a share is configured write-back; it writes back now only while "Cache Status" is OK
("Temporarily Disabled" with "Cache disabled; low batteries." is the fallback to
write-through).
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

from storpath.readers.raid.records import (Bounds, Fields, RaidController, RaidDrive, RaidInventory, RaidOutputError,
                                           RaidVolume, block_device, clean, fenced, lines, parse_link_rate, parse_size,
                                           parse_strip, progress_ratio, raid_level, split_field, wwn)

TOOL = "ssacli"

# A field's name ends at the first colon followed by a space or the line's end ("PCI Address
# (Domain:Bus:Device.Function): 0000:14:00.0").
_SEPARATOR = re.compile(r":(?:\s|$)")
_SLOT = re.compile(r"[0-9A-Za-z]{1,8}")
_DRIVE_ID = re.compile(r"[0-9A-Za-z:]{1,32}")
_LOGICAL_ID = re.compile(r"[0-9]{1,6}")
_ARRAY_NAME = re.compile(r"[A-Za-z]{1,4}")
_WRITE_SHARE = re.compile(r"(?<![0-9])([0-9]{1,3}) ?% *Write", re.I)
_PCI = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")
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


def _write_share(ratio) -> Optional[bool]:
    """'25% Read / 75% Write' -> True; '100% Read / 0% Write' -> False; else None."""
    match = _WRITE_SHARE.search(ratio) if isinstance(ratio, str) else None
    if match is None or int(match.group(1)) > 100:
        return None
    return int(match.group(1)) > 0


def _pci(text) -> Optional[str]:
    value = clean(text)
    return value.lower() if value and _PCI.fullmatch(value.lower()) else None


def _level(text) -> Optional[str]:
    """'1+0', 'RAID 5', 'RAID 1(+0)', 'ADG' -> raid10, raid5, raid10, raid6."""
    word = text.strip().lower() if isinstance(text, str) else ""
    word = word[4:].strip() if word.startswith("raid") else word
    word = word.replace("(+0)", "+0")
    return _LEVELS.get(word) or raid_level(word)


def _header(line: str) -> Optional[Tuple[str, str]]:
    """'Smart Array P212 in Slot 2    (sn: ...)', 'HPE Smart Array P408i-a SR Gen10 in Slot 0
    (Embedded)' -> (model, slot); None for any other line."""
    if line[:1] in ("", " ", "\t"):
        return None
    model, found, rest = line.partition(" in Slot ")
    slot = rest.split()[0] if found and rest.split() else ""
    if not _SLOT.fullmatch(slot) or not model.strip():
        return None
    return model.strip(), slot


def _array_name(stripped: str) -> Optional[str]:
    """'Array: A', 'array A', 'Array B', 'array A (SATA, Unused Space: 0  MB)' -> A, A, B, A;
    'Unassigned', 'HBA Drives' -> themselves; None for any other line."""
    if stripped.lower() in ("unassigned", "hba drives"):
        return stripped.title() if stripped.lower() == "unassigned" else "HBA Drives"
    if stripped[:5].lower() not in ("array", ):
        return None
    rest = stripped[5:].lstrip(":").strip()
    name = rest.split(" ")[0] if rest else ""
    return name.upper() if _ARRAY_NAME.fullmatch(name) else None


def _summary(rest: str) -> List[str]:
    """'(port 2E:box 1:bay 1, SATA, 2 TB, OK, spare)' -> its comma-separated parts."""
    inner = rest.strip()
    if not (inner.startswith("(") and inner.endswith(")")):
        return []
    return [part.strip() for part in inner[1:-1].split(",")]


class _Controller:
    """What the output says of one slot's controller, however many times it names it."""

    def __init__(self, model: str, slot: str):
        self.model = model
        self.slot = slot
        self.fields: Dict[str, str] = {}
        self.arrays: Dict[str, Dict[str, Dict[str, Dict[str, str]]]] = {}

        self.loose: Dict[str, Dict[str, Dict[str, str]]] = {"logical": {}, "drives": {}}

    def array(self, name: str) -> Dict[str, Dict[str, Dict[str, str]]]:
        return self.arrays.setdefault(name, {"logical": {}, "drives": {}})

    def settle(self) -> None:
        """What was said of a drive outside any array goes to that drive in its array (what the
        array's block said wins); a drive no array names is kept, in no array, when its own
        detailed block was seen (not only an enclosure's summary line of it)."""
        for kind, items in self.loose.items():
            for number, record in items.items():
                target = next((a[kind][number] for a in self.arrays.values() if number in a[kind]), None)
                if target is not None:
                    for key, value in record.items():
                        target.setdefault(key, value)
                elif any(not key.startswith("_") for key in record):
                    self.array("")[kind][number] = record
        self.loose = {"logical": {}, "drives": {}}


@fenced("ssacli")
def parse_config_detail(text: str) -> RaidInventory:
    """`ssacli ctrl all show config detail` (and `hpacucli ... show config detail`), and
    hpacucli's per-command answers one after another (controller, array, logical drive and
    physical drive `show`s)."""
    if not isinstance(text, str):
        raise RaidOutputError("ssacli: no text")
    fields = Fields(TOOL)
    bounds = Bounds(TOOL)
    controllers: Dict[str, _Controller] = {}
    current: Optional[_Controller] = None
    item: Optional[Dict[str, str]] = None
    array: Optional[Dict[str, Dict[str, Dict[str, str]]]] = None
    for line in lines(text):
        if not line.strip():
            continue
        header = _header(line)
        if header:
            model, slot = header
            if slot not in controllers:
                bounds.controller(f"{TOOL}/slot{slot}")
                controllers[slot] = _Controller(model, slot)
            current, item, array = controllers[slot], None, None
            continue
        if current is None:
            continue
        indent = len(line) - len(line.lstrip(" "))
        stripped = line.strip()
        if indent <= 3:
            item = None
            name = _array_name(stripped)
            if name is not None and indent == 3:
                array = current.array(name)
                continue
            array = None if indent < 3 else array
            field = split_field(line, _SEPARATOR)
            if field and indent == 3:
                current.fields.setdefault(*field)
            if not field and indent == 3:
                array = None  # an enclosure, expander, port block: not an array
            continue
        if indent <= 8:
            found = _item(stripped, current, array, bounds)
            if found is not None:
                item = found
                continue
        if indent <= 6:
            item = None
            continue
        field = split_field(line, _SEPARATOR)
        if item is not None and field and indent == 9:
            item.setdefault(*field)
    if not controllers:
        raise RaidOutputError("ssacli: no controller (no \"... in Slot N\" line)")
    inventory = RaidInventory()
    for ctrl in controllers.values():
        ctrl.settle()
        _add_controller(inventory, ctrl, fields)
    inventory.problems.extend(fields.problems)
    return inventory


def _item(stripped: str, ctrl: _Controller, array, bounds: Bounds) -> Optional[Dict[str, str]]:
    """The logical or physical drive a line starts (its detailed block or its summary line),
    the same record each time the output names it; None for any other line. Outside an array
    (an enclosure's "Physical Drives" summary lines; hpacucli's `physicaldrive X show` of a
    spare) it is held aside until the end (_Controller.settle)."""
    name = f"{TOOL}/slot{ctrl.slot}"
    lower = stripped.lower()
    if lower.startswith("logical drive:"):
        number, rest, kind = stripped[len("logical drive:"):].strip(), "", "logical"
    elif lower.startswith("logicaldrive "):
        number, _, rest = stripped[len("logicaldrive "):].partition(" ")
        kind = "logical"
    elif lower.startswith("physicaldrive "):
        number, _, rest = stripped[len("physicaldrive "):].partition(" ")
        kind = "drives"
    else:
        return None
    if not (_LOGICAL_ID if kind == "logical" else _DRIVE_ID).fullmatch(number):
        return None
    items = (array or ctrl.loose)[kind]
    if number not in items:
        (bounds.volume if kind == "logical" else bounds.drive)(name)
        items[number] = {"_id": number}
    record = items[number]
    parts = _summary(rest)
    if kind == "logical" and len(parts) >= 3:
        # (18.2 TB, RAID 5, OK) or (1.9 TB, RAID 1+0, Recovering, 54% complete)
        record.setdefault("_size", parts[0])
        record.setdefault("_level", parts[1])
        record.setdefault("_status", ", ".join(parts[2:]))
    elif kind == "drives" and len(parts) >= 4:
        # (port 2E:box 1:bay 1, SATA, 2 TB, OK) or (..., OK, spare)
        record.setdefault("_interface", parts[1])
        record.setdefault("_size", parts[2])
        record.setdefault("_status", parts[3])
        if any("spare" in p.lower() for p in parts[4:]):
            record.setdefault("_kind", "Spare Drive")
    return record


def _add_controller(inventory: RaidInventory, ctrl: _Controller, fields: Fields) -> None:
    values = ctrl.fields
    name = f"{TOOL}/slot{ctrl.slot}"
    count = values.get("Battery/Capacitor Count")
    battery_word = clean(values.get("Battery/Capacitor Status"))
    battery = None if count is not None and count.strip() == "0" else _battery(battery_word)
    cache_status = clean(values.get("Cache Status"))
    inventory.controllers.append(RaidController(
        name=name, tool=TOOL, model=clean(ctrl.model), firmware=clean(values.get("Firmware Version")),
        pci_address=fields.read(name, "PCI Address", values.get("PCI Address (Domain:Bus:Device.Function)"), _pci),
        status=clean(values.get("Controller Status")), battery=battery, battery_detail=battery_word,
        cache_status=cache_status))
    writes_cached = fields.read(name, "Cache Ratio", values.get("Cache Ratio"), _write_share)
    cache_ok = cache_status.lower() == "ok" if cache_status else None
    for array_name, array in ctrl.arrays.items():
        logical = list(array["logical"].values())
        for ld in logical:
            where = f"{name} volume {ld['_id']}"
            status = ld.get("Status") or ld.get("_status")
            state, operation, progress = _volume_state(status)
            caching = (ld.get("Caching") or "").strip().lower()
            configured = None if writes_cached is None or not caching else (caching == "enabled" and writes_cached)
            current = None if configured is None or cache_ok is None else (configured and cache_ok)
            inventory.volumes.append(RaidVolume(
                controller=name, id=ld["_id"], name=clean(ld.get("Logical Drive Label")),
                level=fields.read(where, "Fault Tolerance", ld.get("Fault Tolerance") or ld.get("_level"), _level),
                state=state, state_word=clean(status), operation=operation, progress=progress,
                write_back_configured=configured, write_back_current=current,
                strip_bytes=fields.read(where, "Strip Size", ld.get("Strip Size"), parse_strip),
                size_bytes=fields.read(where, "Size", ld.get("Size") or ld.get("_size"), parse_size),
                device=fields.read(where, "Disk Name", ld.get("Disk Name"), block_device),
                wwn=fields.read(where, "Unique Identifier", ld.get("Unique Identifier"), wwn)))
        volume = logical[0]["_id"] if len(logical) == 1 else None
        for pd in array["drives"].values():
            where = f"{name} {pd['_id']}"
            model = clean(pd.get("Model"))
            if model and model.startswith("ATA "):
                model = model[4:].strip()
            capability = fields.read(where, "PHY Maximum Link Rate", pd.get("PHY Maximum Link Rate"), parse_link_rate)
            interface = clean(pd.get("Interface Type") or pd.get("_interface")) or ""
            solid = interface.lower().startswith("solid state ")
            status = pd.get("Status") or pd.get("_status")
            kind = pd.get("Drive Type") or pd.get("_kind") or ("Unassigned Drive" if array_name == "Unassigned" else None)
            inventory.drives.append(RaidDrive(
                controller=name, slot=pd["_id"], interface=(interface[len("solid state "):] if solid else interface) or None,
                media="ssd" if solid else None, model=model, serial=clean(pd.get("Serial Number")),
                state=_drive_state(status, kind), state_word=clean(status),
                negotiated_rate=fields.read(where, "PHY Transfer Rate", pd.get("PHY Transfer Rate"), parse_link_rate),
                capability=capability, capability_source=TOOL if capability is not None else "", volume=volume))
