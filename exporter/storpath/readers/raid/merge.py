"""Merging the RAID tools' outputs (in the captured layout, live or replayed) into one
readers.raid.records.RaidInventory: each tool's parse fenced, records named twice kept once
(the worst state), smartctl's IDENTIFY words laid onto the drives they name, PCI functions and
block devices filled in from sysfs, and a failed tool's last successful inventory kept.

Captured layout (written by `storpath capture` and by fixtures):

    storcli/controllers.json   storcli /call show all J nolog
    storcli/drives.json        storcli /call/eall/sall show all J nolog
    storcli/volumes.json       storcli /call/vall show all J nolog
    ssacli/config-detail.txt   ssacli ctrl all show config detail
    arcconf/<N>-al.txt         arcconf GETCONFIG <N> AL  (or <N>-pd.txt and <N>-ld.txt)
    arcconf/<N>-status.txt     arcconf GETSTATUS <N>
    megacli/pdlist.txt         MegaCli -PDList -aALL -NoLog
    megacli/ldinfo.txt         MegaCli -LdInfo -Lall -aALL -NoLog
    megacli/ldpdinfo.txt       MegaCli -LDPDInfo -aALL -NoLog
    megacli/bbu.txt            MegaCli -AdpBbuCmd -GetBbuStatus -aALL -NoLog
    smartctl/<controller>-<N>.json   smartctl -j -i -d sat+megaraid,N /dev/sdX (or cciss,N)
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Sequence, Tuple, TypeVar

from storpath.base.records import datarecord
from storpath.base.problems import WARNING, Problem
from storpath.readers.raid.records import (BATTERY_STATES, DRIVE_STATES, VOLUME_STATES, RaidController,
                                           RaidInventory)
from storpath.base.roots import Roots
from storpath.base.sysfs import list_dir

if TYPE_CHECKING:
    from storpath.readers.raid.smartctl import SmartctlDrive

STORCLI_FILES = ("controllers", "drives", "volumes")
MEGACLI_FILES = ("pdlist", "ldinfo", "ldpdinfo", "bbu")

# A tool's parser (storpath.readers.raid.<tool>) is imported where that tool's output is first
# parsed: a host without the tool, and a scrape-only exporter's start, never load it.

# The most records one tool's outputs may give before they are taken for garbage (a tool
# printing a loop, a corrupted listing): far above the largest real hosts (a PERC with four
# 60-bay JBODs is 240 drives per controller), far below what would take the exporter past
# its memory limit (130k drives: 1M series, 600 MiB). Beyond them the tool is down with the
# reason and none of its records is exported.
MAX_CONTROLLERS = 64
MAX_VOLUMES = 2048
MAX_DRIVES = 8192


@datarecord(frozen=True)
class ToolStatus:
    """How one RAID tool's run went: ok, or why not."""

    ok: bool
    reason: Optional[str] = None  # why not: missing, exit status, timeout, unreadable output


@datarecord(frozen=True)
class Kept:
    """A tool's inventory from its last successful pass, and when that pass ended."""

    inventory: RaidInventory
    at: float


def parse_storcli(controllers: Optional[str], drives: Optional[str], volumes: Optional[str]) -> RaidInventory:
    from storpath.readers.raid import storcli as raid_storcli

    out = RaidInventory()
    if volumes is not None:
        out.extend(raid_storcli.parse_volumes(volumes))
    groups = raid_storcli.volume_groups(out)
    found = RaidInventory()
    if controllers is not None:
        found.extend(raid_storcli.parse_controllers(controllers))
    if drives is not None:
        found.extend(raid_storcli.parse_drives(drives, groups))
    out.controllers.extend(found.controllers)
    out.problems.extend(found.problems)
    seen = set()
    # drives.json's records first (they know their volumes), an HBA's from controllers.json after
    for drive in sorted(found.drives, key=lambda d: d.volume is None):
        if (drive.controller, drive.slot) not in seen:
            seen.add((drive.controller, drive.slot))
            out.drives.append(drive)
    return out


def parse_megacli(pdlist: Optional[str], ldinfo: Optional[str], ldpdinfo: Optional[str],
                  bbu: Optional[str]) -> RaidInventory:
    from storpath.readers.raid import megacli as raid_megacli

    out = RaidInventory()
    combined = raid_megacli.parse_listing(ldpdinfo) if ldpdinfo is not None else RaidInventory()
    listed = raid_megacli.parse_listing(pdlist) if pdlist is not None else RaidInventory()
    volumes = raid_megacli.parse_listing(ldinfo) if ldinfo is not None else RaidInventory()
    out.volumes = combined.volumes or volumes.volumes
    if listed.drives:
        membership = {(d.controller, d.slot): d.volume for d in combined.drives}
        out.drives = [replace(d, volume=membership.get((d.controller, d.slot), d.volume)) for d in listed.drives]
    else:
        out.drives = combined.drives
    out.controllers = raid_megacli.controllers(out, raid_megacli.parse_bbu(bbu) if bbu is not None else {})
    out.problems = combined.problems + listed.problems + volumes.problems
    return out


def fenced(tool: str, parse: Callable[[], RaidInventory], tools: Dict[str, ToolStatus]) -> RaidInventory:
    """One tool's outputs parsed, or an empty inventory and the tool's status saying why:
    whatever a parser raises (an OverflowError from a 400-digit number, a RecursionError, a
    bug) charges that tool only, and a count past the bounds above is the tool's failure too."""
    try:
        inventory = parse()
    except Exception as exc:  # noqa: BLE001: any parser failure is this tool's, never the other tools'
        tools[tool] = ToolStatus(False, _reason(exc))
        return RaidInventory()
    for what, records, bound in (("controllers", inventory.controllers, MAX_CONTROLLERS),
                                 ("volumes", inventory.volumes, MAX_VOLUMES),
                                 ("drives", inventory.drives, MAX_DRIVES)):
        if len(records) > bound:
            tools[tool] = ToolStatus(False, f"{len(records)} {what} listed, more than the {bound} believed: "
                                            "none exported")
            return RaidInventory()
    tools.setdefault(tool, ToolStatus(True))
    return inventory


def _reason(exc: BaseException) -> str:
    text = str(exc)
    text = text if len(text) <= 300 else text[:300] + "..."
    return text if type(exc).__name__ in ("RaidOutputError",) else f"{type(exc).__name__}: {text}"


def parse_outputs(read: Callable[[str, str], Optional[str]], names: Callable[[str], List[str]],
                  tools: Dict[str, ToolStatus]) -> RaidInventory:
    """Every tool's outputs in the captured layout (`read(folder, name)`: the text or None;
    `names(folder)`: the files there), parsed into one inventory; each tool's status goes into
    `tools` (a tool already failed there stays failed)."""
    inventory = RaidInventory()
    storcli = {key: read("storcli", f"{key}.json") for key in STORCLI_FILES}
    if any(v is not None for v in storcli.values()):
        inventory.extend(fenced("storcli", lambda: parse_storcli(*(storcli[k] for k in STORCLI_FILES)), tools))
    ssacli = read("ssacli", "config-detail.txt")
    if ssacli is not None:
        from storpath.readers.raid import ssacli as raid_ssacli

        inventory.extend(fenced("ssacli", lambda: raid_ssacli.parse_config_detail(ssacli), tools))
    arcconf = RaidInventory()
    for number in sorted({int(m.group(1)) for m in (re.match(r"^(\d{1,3})-(al|pd|ld|status)\.txt$", n)
                                                    for n in names("arcconf")) if m}):
        texts = [t for t in (read("arcconf", f"{number}-{part}.txt") for part in ("al", "ld", "pd")) if t is not None]
        status = read("arcconf", f"{number}-status.txt")
        from storpath.readers.raid import arcconf as raid_arcconf

        arcconf.extend(fenced("arcconf", lambda: raid_arcconf.parse_config("\n".join(texts), number, status), tools))
    if tools.get("arcconf") is not None and not tools["arcconf"].ok:
        arcconf = RaidInventory()  # one controller's garbage: the tool is down, as for the others
    inventory.extend(arcconf)
    megacli = {key: read("megacli", f"{key}.txt") for key in MEGACLI_FILES}
    if any(megacli[key] is not None for key in ("pdlist", "ldinfo", "ldpdinfo")):
        inventory.extend(fenced("megacli", lambda: parse_megacli(**megacli), tools))
    documents = {}
    for name in names("smartctl"):
        match = re.match(r"^([A-Za-z0-9]{1,16})-(\d{1,4})\.json$", name)
        text = read("smartctl", name) if match else None
        if match is None or text is None:
            continue
        try:
            from storpath.readers.raid import smartctl as raid_smartctl

            document = raid_smartctl.parse_smartctl(text, f"smartctl/{name}")
        except Exception as exc:  # noqa: BLE001: smartctl's failure, never the tool's inventory
            tools["smartctl"] = ToolStatus(False, f"{name}: {_reason(exc)}")
            continue
        documents[(match.group(1), int(match.group(2)))] = document
        inventory.problems.extend(document.problems)
    if documents:
        tools.setdefault("smartctl", ToolStatus(True))
        inventory = apply_smartctl(inventory, documents)
    return inventory


def apply_smartctl(inventory: RaidInventory,
                   documents: Dict[Tuple[str, int], SmartctlDrive]) -> RaidInventory:
    """A SATA drive's own capability (IDENTIFY word 76) and link (word 77) from smartctl,
    onto the drive it names: by serial number, else by the controller's id and the drive's
    device id (storcli DID, MegaCli Device Id: megaraid,N). What the tool gave stays (a rate
    it measured is kept even where it is the expander's link: analysis.raid decides that)."""
    by_serial = {d.serial: d for d in documents.values() if d.serial}
    drives = []
    for drive in inventory.drives:
        doc = by_serial.get(drive.serial) if drive.serial else None
        if doc is None and drive.device_id is not None:
            own_id = drive.controller.split("/", 1)[-1]
            doc = documents.get((own_id, drive.device_id))
        changes = {}
        if doc is not None and drive.capability is None and doc.maximum is not None:
            changes.update(capability=doc.maximum, capability_source="smartctl")
        if doc is not None and drive.negotiated_rate is None and doc.current is not None:
            changes["negotiated_rate"] = doc.current
        drives.append(replace(drive, **changes) if changes else drive)
    return replace(inventory, drives=drives)


def fill_addresses(inventory: RaidInventory, addresses: Dict[str, List[str]]) -> RaidInventory:
    """A controller whose tool names no PCI function gets the one its driver is bound to,
    where its tool speaks to a single bound function (MegaCli and arcconf list none).
    `addresses`: tool -> the PCI functions bound to drivers it speaks to."""
    controllers = []
    for ctrl in inventory.controllers:
        found = sorted(set(addresses.get(ctrl.tool, ())))
        same_tool = [c for c in inventory.controllers if c.tool == ctrl.tool]
        if not ctrl.pci_address and len(found) == 1 and len(same_tool) == 1:
            ctrl = replace(ctrl, pci_address=found[0])
        controllers.append(ctrl)
    return replace(inventory, controllers=controllers)


# Where a driver puts its logical volumes in the SCSI address space: megaraid_sas on channel 2
# with the virtual drive's number as the target (drivers/scsi/megaraid/megaraid_sas.h,
# MEGASAS_MAX_PD_CHANNELS), aacraid on channel 0 with the container's number.
_VOLUME_CHANNEL = {"storcli": 2, "megacli": 2, "arcconf": 0}
_HCTL = re.compile(r"^(\d{1,9}):(\d{1,9}):(\d{1,9}):(\d{1,9})$")


def fill_devices(inventory: RaidInventory, roots: Roots) -> RaidInventory:
    """A volume whose tool names no block device gets the kernel's: the SCSI disk below its
    controller's PCI function at the channel and target its driver gives volumes (MegaCli's
    "Target Id", storcli's VD number, arcconf's logical device number), LUN 0."""
    by_address = {c.name: c.pci_address for c in inventory.controllers if c.pci_address}
    found: Dict[Tuple[str, int, int], str] = {}  # (PCI address, channel, target) -> block device
    for address in set(by_address.values()):
        base = roots.sys("bus", "pci", "devices", address)
        for host in (h for h in list_dir(base, roots.sysfs) if h.startswith("host")):
            for target in (t for t in list_dir(os.path.join(base, host), roots.sysfs) if t.startswith("target")):
                for hctl in list_dir(os.path.join(base, host, target), roots.sysfs):
                    match = _HCTL.match(hctl)
                    disks = list_dir(os.path.join(base, host, target, hctl, "block"), roots.sysfs) if match else []
                    if match and match.group(4) == "0" and len(disks) == 1:
                        found[(address, int(match.group(2)), int(match.group(3)))] = disks[0]
    volumes = []
    for volume in inventory.volumes:
        tool = volume.controller.split("/", 1)[0]
        number = volume.id.split("/")[-1]
        if not volume.device and tool in _VOLUME_CHANNEL and number.isdigit() and len(number) < 10:
            device = found.get((by_address.get(volume.controller, ""), _VOLUME_CHANNEL[tool], int(number)))
            if device:
                volume = replace(volume, device=device)
        volumes.append(volume)
    return replace(inventory, volumes=volumes)


# ---- one record per identity ------------------------------------------------------------

# Worst first: where a tool names one volume, drive or battery twice with two states, the
# worse one is kept, so a duplicate can never hide a degraded volume behind an optimal one.
_VOLUME_WORST = ("failed", "degraded", "rebuilding", "other", "optimal")
_DRIVE_WORST = ("failed", "offline", "rebuilding", "other", "unconfigured", "hotspare", "jbod", "online")
_BATTERY_WORST = ("failed", "missing", "degraded", "learning", "ok")
_GOOD_CONTROLLER = ("optimal", "ok")
assert set(_VOLUME_WORST) == set(VOLUME_STATES) and set(_DRIVE_WORST) == set(DRIVE_STATES) \
    and set(_BATTERY_WORST) == set(BATTERY_STATES)

T = TypeVar("T")


def _rank(order: Sequence[str], state: Optional[str]) -> int:
    return order.index(state) if state in order else -1 if state is None else len(order)


def _worse_controller(a: RaidController, b: RaidController) -> RaidController:
    worse = b if (a.status or "").lower() in _GOOD_CONTROLLER and (b.status or "").lower() not in \
        _GOOD_CONTROLLER and b.status else a
    batteries = [c.battery for c in (a, b) if c.battery is not None]
    if batteries:
        battery = min(batteries, key=lambda s: _rank(_BATTERY_WORST, s))
        if battery != worse.battery:
            source = a if a.battery == battery else b
            worse = replace(worse, battery=battery, battery_detail=source.battery_detail)
    return worse


def _one_each(records: Sequence[T], key: Callable[[T], tuple], worse: Callable[[T, T], T]) -> Tuple[List[T], List]:
    kept: Dict[tuple, T] = {}
    twice = []
    for record in records:
        k = key(record)
        if k in kept:
            twice.append(k)
            kept[k] = worse(kept[k], record)
        else:
            kept[k] = record
    return list(kept.values()), twice


def deduplicated(inventory: RaidInventory) -> RaidInventory:
    """One controller per name, one volume per (controller, id), one drive per (controller,
    slot), each with the worst state any of its listings gave; a problem (logged once) names
    what was listed twice."""
    controllers, twice_c = _one_each(inventory.controllers, lambda c: (c.name,), _worse_controller)
    volumes, twice_v = _one_each(inventory.volumes, lambda v: (v.controller, v.id),
                                 lambda a, b: b if _rank(_VOLUME_WORST, b.state) < _rank(_VOLUME_WORST, a.state)
                                 else a)
    drives, twice_d = _one_each(inventory.drives, lambda d: (d.controller, d.slot),
                                lambda a, b: b if _rank(_DRIVE_WORST, b.state) < _rank(_DRIVE_WORST, a.state)
                                else a)
    problems = list(inventory.problems)
    for what, twice in (("controller", twice_c), ("volume", twice_v), ("drive", twice_d)):
        for name in sorted(set(twice)):
            problems.append(Problem(f"RAID {what} listed more than once: one kept, with the worst state listed",
                                    (("source", "raid"), ("path", "/".join(name))), level=WARNING))
    return RaidInventory(controllers, drives, volumes, problems)


# ---- a failed tool's last successful inventory ------------------------------------------------

def tool_of(name: str) -> str:
    """The tool a record belongs to: the part of its controller's name before the `/`."""
    return name.split("/", 1)[0]


def of_tool(inventory: RaidInventory, tool: str) -> RaidInventory:
    return RaidInventory([c for c in inventory.controllers if c.tool == tool],
                         [d for d in inventory.drives if tool_of(d.controller) == tool],
                         [v for v in inventory.volumes if tool_of(v.controller) == tool])


def with_last_known(inventory: RaidInventory, tools: Dict[str, ToolStatus], finished_at: float,
                    kept: Dict[str, Kept]) -> Tuple[RaidInventory, Dict[str, Kept]]:
    """This pass's inventory, with each failed tool's records from its last successful pass
    in place of the nothing it gave now (so a degraded volume stays degraded until a pass
    that succeeds says otherwise), and what to keep for the next pass: every tool that
    succeeded now, its records from now. A tool that never succeeded adds nothing."""
    # A failed tool's part output (its first command answered, the second hung) gives way to
    # its last whole pass.
    stale = {t for t, s in tools.items() if not s.ok and t in kept}
    out = RaidInventory([c for c in inventory.controllers if c.tool not in stale],
                        [d for d in inventory.drives if tool_of(d.controller) not in stale],
                        [v for v in inventory.volumes if tool_of(v.controller) not in stale],
                        list(inventory.problems))
    keep: Dict[str, Kept] = {}
    for tool, status in tools.items():
        if status.ok:
            keep[tool] = Kept(of_tool(inventory, tool), finished_at)
        elif tool in kept:
            keep[tool] = kept[tool]
            out.extend(replace(kept[tool].inventory, problems=[]))
    return out, keep


__all__ = ["ToolStatus", "Kept", "parse_outputs", "parse_storcli", "parse_megacli", "apply_smartctl",
           "fill_addresses", "fill_devices", "deduplicated", "with_last_known", "fenced", "of_tool"]
