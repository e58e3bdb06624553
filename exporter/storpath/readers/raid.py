"""Drives behind hardware RAID controllers: running the vendor tools (or reading their
captured outputs) into one readers.raid_records.RaidInventory.

A tool runs only where a controller it speaks to is bound in sysfs
(/sys/bus/pci/drivers/<driver>/<PCI address>):

    megaraid_sas       storcli (storcli64, perccli64, perccli, storcli2, perccli2), else MegaCli
    hpsa, smartpqi     ssacli (hpssacli, hpacucli)
    aacraid, smartpqi  arcconf

each with a deadline (storpath.subprocesses: a tool stuck in the kernel is left behind and
none is started while it lives), LC_ALL=C. A tool that is missing, fails, hangs or prints
what its parser does not understand is reported per tool (`ToolStatus`), never raised.

Captured outputs (Roots.captured, written by `storpath capture` and by fixtures), read
whenever present, whatever the replayed sysfs binds:

    <captured>/storcli/controllers.json   storcli /call show all J nolog
    <captured>/storcli/drives.json        storcli /call/eall/sall show all J nolog
    <captured>/storcli/volumes.json       storcli /call/vall show all J nolog
    <captured>/ssacli/config-detail.txt   ssacli ctrl all show config detail
    <captured>/arcconf/<N>-al.txt         arcconf GETCONFIG <N> AL  (or <N>-pd.txt and <N>-ld.txt)
    <captured>/arcconf/<N>-status.txt     arcconf GETSTATUS <N>
    <captured>/megacli/pdlist.txt         MegaCli -PDList -aALL -NoLog
    <captured>/megacli/ldinfo.txt         MegaCli -LdInfo -Lall -aALL -NoLog
    <captured>/megacli/ldpdinfo.txt       MegaCli -LDPDInfo -aALL -NoLog
    <captured>/megacli/bbu.txt            MegaCli -AdpBbuCmd -GetBbuStatus -aALL -NoLog
    <captured>/smartctl/<controller>-<N>.json   smartctl -j -i -d sat+megaraid,N /dev/sdX (or cciss,N)

`<controller>` is the tool's own id of the controller (c0, a0, slot5, 1). Live, smartctl runs
(when installed) for the SATA drives behind a MegaRAID/PERC whose capability or rate storcli
does not give (old firmware says "Unknown"), through a volume's block device on the same
controller: `smartctl -j -i -d sat+megaraid,<DID> /dev/sdX`, IDENTIFY words 76/77 passed
through by the firmware. ssacli's drives have no number smartctl's `cciss,N` is known to
match: their smartctl outputs come from captures only.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, replace
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from storpath import atomicfile
from storpath.problems import INFO, Problem
from storpath.readers import raid_arcconf, raid_megacli, raid_smartctl, raid_ssacli, raid_storcli
from storpath.readers.raid_records import RaidController, RaidDrive, RaidInventory, RaidOutputError
from storpath.roots import Roots
from storpath.subprocesses import run_command
from storpath.sysfs import WHOLE_FILE, list_dir, read_attr

DRIVERS = {"megaraid_sas": ("storcli", "megacli"), "hpsa": ("ssacli",), "smartpqi": ("ssacli", "arcconf"),
           "aacraid": ("arcconf",)}
# The tools' other names, tried in order when the configured one is the default and absent.
ALIASES = {"storcli": ("storcli", "storcli64", "perccli64", "perccli", "storcli2", "perccli2"),
           "smartctl": ("smartctl",),
           "megacli": ("MegaCli", "MegaCli64", "megacli"), "ssacli": ("ssacli", "hpssacli", "hpacucli"),
           "arcconf": ("arcconf",)}
SEARCH = "/usr/sbin:/sbin:/opt/MegaRAID/storcli:/opt/MegaRAID/perccli:/opt/MegaRAID/MegaCli:/opt/lsi/storcli:" \
         "/opt/dell/perccli2:/opt/smartstorageadmin/ssacli/bin:/usr/Arcconf"

STORCLI_ARGS = {"controllers": ["/call", "show", "all", "J", "nolog"],
                "drives": ["/call/eall/sall", "show", "all", "J", "nolog"],
                "volumes": ["/call/vall", "show", "all", "J", "nolog"]}
SSACLI_ARGS = ["ctrl", "all", "show", "config", "detail"]
MEGACLI_ARGS = {"pdlist": ["-PDList", "-aALL", "-NoLog"], "ldinfo": ["-LdInfo", "-Lall", "-aALL", "-NoLog"],
                "bbu": ["-AdpBbuCmd", "-GetBbuStatus", "-aALL", "-NoLog"]}

# What this reader reads of sysfs (storpath capture takes it): the drivers' bound functions.
CAPTURE_SYSFS = tuple(f"bus/pci/drivers/{driver}" for driver in DRIVERS)


REPLAY_WITHOUT_CAPTURE = Problem(
    "RAID tools not run: --path.sysfs replays another machine and --path.captured is not given, so this host's "
    "controllers would be reported as the replayed one's", level=INFO)


@dataclass(frozen=True)
class ToolStatus:
    ok: bool
    reason: Optional[str] = None  # why not: missing, exit status, timeout, unreadable output


@dataclass
class RaidSnapshot:
    """One pass of the tools (or one read of their captured outputs)."""

    inventory: RaidInventory
    tools: Dict[str, ToolStatus]  # tool -> how its run went; only the tools this host needed
    finished_at: float
    source: str  # "live", "captured", "none"
    problems: Tuple[Problem, ...] = ()


def bound_controllers(roots: Roots) -> Dict[str, List[str]]:
    """Driver -> the PCI functions bound to it, for the RAID drivers; absent ones left out."""
    out: Dict[str, List[str]] = {}
    for driver in DRIVERS:
        entries = [e for e in list_dir(roots.sys("bus", "pci", "drivers", driver), roots.sysfs)
                   if re.fullmatch(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", e)]
        if entries:
            out[driver] = sorted(entries)
    return out


def tools_needed(bound: Dict[str, List[str]]) -> List[str]:
    """The tools for the drivers bound: storcli (MegaCli standing in when absent), ssacli, arcconf."""
    out: List[str] = []
    for driver in bound:
        for tool in DRIVERS[driver]:
            if tool != "megacli" and tool not in out:
                out.append(tool)
    return out


def find_tool(tool: str, configured: Optional[str] = None) -> Optional[str]:
    """The tool's path: as configured when it has a '/', else the configured name or (left at
    the default) one of its other names, looked up in PATH and the vendors' folders."""
    if configured and os.sep in configured:
        return configured if os.access(configured, os.X_OK) else None
    names = (configured,) if configured and configured not in ALIASES[tool] else ALIASES[tool]
    for name in names:
        found = shutil.which(name) or shutil.which(name, path=SEARCH)
        if found:
            return found
    return None


@dataclass
class Run:
    ok: bool
    text: str = ""
    reason: Optional[str] = None
    stuck: Optional[subprocess.Popen] = None


def run_tool(binary: str, args: Sequence[str], timeout: float) -> Run:
    env = dict(os.environ, LC_ALL="C", LANG="C")
    try:
        done = run_command([binary, *args], timeout, env=env)
    except FileNotFoundError:
        return Run(False, reason=f"{binary} not found")
    except OSError as exc:
        return Run(False, reason=f"cannot run {binary}: {exc.strerror}")
    if done.timed_out:
        return Run(False, stuck=done.stuck, reason=f"{binary} {' '.join(args)} did not finish within {timeout:g} s")
    text = done.stdout.decode("utf-8", "replace")
    # storcli and MegaCli exit non-zero when one controller of several answers a command
    # with "not supported": what they printed is still their output; a tool that printed
    # nothing failed.
    if done.returncode != 0 and not text.strip():
        return Run(False, reason=f"{binary} {' '.join(args)} exited with {done.returncode}"
                                 + (f": {done.first_error_line()}" if done.first_error_line() else ""))
    return Run(True, text=text)


def _parse(tool: str, parse: Callable[[], RaidInventory], tools: Dict[str, ToolStatus],
           inventory: RaidInventory) -> None:
    """One tool's outputs parsed into `inventory`, or its status says why not."""
    try:
        inventory.extend(parse())
    except (RaidOutputError, RecursionError) as exc:
        tools[tool] = ToolStatus(False, str(exc))
        return
    tools.setdefault(tool, ToolStatus(True))


def parse_storcli(controllers: Optional[str], drives: Optional[str], volumes: Optional[str]) -> RaidInventory:
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


def apply_smartctl(inventory: RaidInventory, documents: Dict[Tuple[str, int], raid_smartctl.SmartctlDrive]) -> None:
    """A SATA drive's own capability (IDENTIFY word 76) and link (word 77) from smartctl,
    onto the drive it names: by serial number, else by the controller's id and the drive's
    device id (storcli DID, MegaCli Device Id: megaraid,N). What the tool gave stays; a rate
    that is the expander's link is not replaced by the drive's."""
    by_serial = {d.serial: d for d in documents.values() if d.serial}
    for index, drive in enumerate(inventory.drives):
        doc = by_serial.get(drive.serial) if drive.serial else None
        if doc is None and drive.device_id is not None:
            own_id = drive.controller.split("/", 1)[1]
            doc = documents.get((own_id, drive.device_id))
        if doc is None:
            continue
        changes = {}
        if drive.capability is None and doc.maximum is not None:
            changes.update(capability=doc.maximum, capability_source="smartctl")
        if drive.negotiated_rate is None and doc.current is not None:
            changes["negotiated_rate"] = doc.current
        if changes:
            inventory.drives[index] = replace(drive, **changes)


def fill_addresses(inventory: RaidInventory, bound: Dict[str, List[str]]) -> None:
    """A controller whose tool names no PCI function gets the one its driver is bound to,
    where its tool speaks to a single bound function (MegaCli and arcconf list none)."""
    for index, ctrl in enumerate(inventory.controllers):
        if ctrl.pci_address:
            continue
        addresses = sorted({a for driver, tools in DRIVERS.items() if ctrl.tool in tools
                            for a in bound.get(driver, [])})
        same_tool = [c for c in inventory.controllers if c.tool == ctrl.tool]
        if len(addresses) == 1 and len(same_tool) == 1:
            inventory.controllers[index] = replace(ctrl, pci_address=addresses[0])


# Where a driver puts its logical volumes in the SCSI address space: megaraid_sas on channel 2
# with the virtual drive's number as the target (drivers/scsi/megaraid/megaraid_sas.h,
# MEGASAS_MAX_PD_CHANNELS), aacraid on channel 0 with the container's number.
_VOLUME_CHANNEL = {"storcli": 2, "megacli": 2, "arcconf": 0}
_HCTL = re.compile(r"^(\d+):(\d+):(\d+):(\d+)$")


def fill_devices(inventory: RaidInventory, roots: Roots) -> None:
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
    for index, volume in enumerate(inventory.volumes):
        tool = volume.controller.split("/", 1)[0]
        number = volume.id.split("/")[-1]
        if volume.device or tool not in _VOLUME_CHANNEL or not number.isdigit():
            continue
        device = found.get((by_address.get(volume.controller, ""), _VOLUME_CHANNEL[tool], int(number)))
        if device:
            inventory.volumes[index] = replace(volume, device=device)


def _read(path: Optional[str]) -> Optional[str]:
    return read_attr(path, WHOLE_FILE) if path else None


Outputs = Dict[Tuple[str, str], str]  # (folder, file name) in the captured layout -> the command's output


def parse_outputs(read: Callable[[str, str], Optional[str]], names: Callable[[str], List[str]],
                  tools: Dict[str, ToolStatus]) -> RaidInventory:
    """Every tool's outputs in the captured layout (`read(folder, name)`: the text or None;
    `names(folder)`: the files there), parsed into one inventory; each tool's status goes into
    `tools` (a tool already failed there stays failed)."""
    inventory = RaidInventory()
    storcli = {key: read("storcli", f"{key}.json") for key in STORCLI_ARGS}
    if any(v is not None for v in storcli.values()):
        _parse("storcli", lambda: parse_storcli(storcli["controllers"], storcli["drives"], storcli["volumes"]),
               tools, inventory)
    ssacli = read("ssacli", "config-detail.txt")
    if ssacli is not None:
        _parse("ssacli", lambda: raid_ssacli.parse_config_detail(ssacli), tools, inventory)
    for number in sorted({int(m.group(1)) for m in (re.match(r"^(\d{1,3})-(al|pd|ld|status)\.txt$", n)
                                                    for n in names("arcconf")) if m}):
        texts = [t for t in (read("arcconf", f"{number}-{part}.txt") for part in ("al", "ld", "pd")) if t is not None]
        status = read("arcconf", f"{number}-status.txt")
        _parse("arcconf", lambda: raid_arcconf.parse_config("\n".join(texts), number, status), tools, inventory)
    megacli = {key: read("megacli", f"{key}.txt") for key in ("pdlist", "ldinfo", "ldpdinfo", "bbu")}
    if any(megacli[key] is not None for key in ("pdlist", "ldinfo", "ldpdinfo")):
        _parse("megacli", lambda: parse_megacli(**megacli), tools, inventory)
    documents = {}
    for name in names("smartctl"):
        match = re.match(r"^([A-Za-z0-9]{1,16})-(\d{1,4})\.json$", name)
        text = read("smartctl", name) if match else None
        if match is None or text is None:
            continue
        try:
            document = raid_smartctl.parse_smartctl(text, f"smartctl/{name}")
        except (RaidOutputError, RecursionError) as exc:
            tools["smartctl"] = ToolStatus(False, f"{name}: {exc}")
            continue
        documents[(match.group(1), int(match.group(2)))] = document
        inventory.problems.extend(document.problems)
    if documents:
        tools.setdefault("smartctl", ToolStatus(True))
        apply_smartctl(inventory, documents)
    return inventory


class RaidReader:
    """Runs (or replays) the RAID tools. `paths`: tool -> configured path or name."""

    def __init__(self, roots: Roots, paths: Optional[Dict[str, str]] = None, timeout: float = 30.0):
        self.roots = roots
        self.paths = paths or {}
        self.timeout = timeout
        self._stuck: List[subprocess.Popen] = []

    def read(self) -> RaidSnapshot:
        bound = bound_controllers(self.roots)
        tools: Dict[str, ToolStatus] = {}
        if self.roots.captured:
            path = self.roots.captured_path
            inventory = parse_outputs(lambda folder, name: _read(path(folder, name)),
                                      lambda folder: _listing(path(folder)), tools)
            source = "captured" if tools else "none"
        elif not bound:
            return RaidSnapshot(RaidInventory(), {}, time.time(), "none")
        elif not self.roots.devices:
            # --path.sysfs replays another machine (storpath.roots): this host's controllers are
            # not its controllers. Its tools' outputs need --path.captured.
            return RaidSnapshot(RaidInventory(), {}, time.time(), "none", (REPLAY_WITHOUT_CAPTURE,))
        else:
            outputs, tools = self.run_tools(bound)
            inventory = parse_outputs(lambda folder, name: outputs.get((folder, name)),
                                      lambda folder: sorted(n for f, n in outputs if f == folder), tools)
            source = "live"
        fill_addresses(inventory, bound)
        fill_devices(inventory, self.roots)
        return RaidSnapshot(inventory, tools, time.time(), source, tuple(inventory.problems))

    def run_tools(self, bound: Dict[str, List[str]]) -> Tuple[Outputs, Dict[str, ToolStatus]]:
        """The commands for the bound controllers' tools, their outputs in the captured layout,
        and the tools that could not be run or failed (with the reason)."""
        outputs: Outputs = {}
        failed: Dict[str, ToolStatus] = {}
        self._stuck = [p for p in self._stuck if p.poll() is None]
        if self._stuck:
            # A tool hung in the kernel would hang every new one too: start none until it is gone.
            pids = ",".join(str(p.pid) for p in self._stuck)
            reason = f"an earlier run (pid {pids}) is still hung"
            return outputs, {t: ToolStatus(False, reason) for t in tools_needed(bound)}
        for tool in tools_needed(bound):
            if tool == "storcli":
                storcli = find_tool("storcli", self.paths.get("storcli"))
                megacli = None if storcli else find_tool("megacli", self.paths.get("megacli"))
                if storcli:
                    if self._commands("storcli", storcli, [(a, f"{k}.json") for k, a in STORCLI_ARGS.items()],
                                      outputs, failed):
                        self._run_smartctl(outputs, failed)
                elif megacli:
                    self._commands("megacli", megacli, [(a, f"{k}.txt") for k, a in MEGACLI_ARGS.items()],
                                   outputs, failed, optional=("bbu.txt",))
                else:
                    failed["storcli"] = ToolStatus(False, _missing("storcli", self.paths) + " (nor MegaCli)")
            elif tool == "ssacli":
                ssacli = find_tool("ssacli", self.paths.get("ssacli"))
                if ssacli:
                    self._commands("ssacli", ssacli, [(SSACLI_ARGS, "config-detail.txt")], outputs, failed)
                else:
                    failed["ssacli"] = ToolStatus(False, _missing("ssacli", self.paths))
            elif tool == "arcconf":
                self._run_arcconf(outputs, failed)
        return outputs, failed

    def _commands(self, tool: str, binary: str, commands: Sequence[Tuple[Sequence[str], str]], outputs: Outputs,
                  failed: Dict[str, ToolStatus], optional: Sequence[str] = ()) -> bool:
        """Run each command into outputs[(tool, name)]; the first that fails (unless optional)
        fails the tool and stops its run."""
        for args, name in commands:
            run = run_tool(binary, args, self.timeout)
            if run.stuck is not None:
                self._stuck.append(run.stuck)
            if run.ok:
                outputs[(tool, name)] = run.text
            elif name not in optional:
                failed[tool] = ToolStatus(False, run.reason)
                return False
        return True

    def _run_smartctl(self, outputs: Outputs, failed: Dict[str, ToolStatus]) -> None:
        """smartctl for the SATA drives storcli gives no capability or rate of, through a
        volume's block device on the same controller (none without smartctl, or a volume the
        kernel names)."""
        smartctl = find_tool("smartctl", self.paths.get("smartctl"))
        if smartctl is None or not self.roots.devices:
            return
        try:
            inventory = parse_storcli(*(outputs.get(("storcli", f"{k}.json")) for k in STORCLI_ARGS))
        except (RaidOutputError, RecursionError):
            return  # storcli's own status says so when its outputs are parsed
        through = {}
        for volume in inventory.volumes:
            if volume.device and os.path.exists(self.roots.devpath(volume.device)):
                through.setdefault(volume.controller, self.roots.devpath(volume.device))
        for drive in inventory.drives:
            device = through.get(drive.controller)
            if device is None or drive.device_id is None or (drive.interface or "").upper() != "SATA" \
                    or (drive.capability is not None and drive.negotiated_rate is not None):
                continue
            own_id = drive.controller.split("/", 1)[1]
            name = f"{own_id}-{drive.device_id}.json"
            run = run_tool(smartctl, ["-j", "-i", "-d", f"sat+megaraid,{drive.device_id}", device], self.timeout)
            if run.stuck is not None:
                self._stuck.append(run.stuck)
            # smartctl's exit status is a bit mask (bit 2 and up: SMART findings): its JSON is the answer.
            if run.text.strip():
                outputs[("smartctl", name)] = run.text
            elif not run.ok:
                failed["smartctl"] = ToolStatus(False, run.reason)

    def _run_arcconf(self, outputs: Outputs, failed: Dict[str, ToolStatus]) -> None:
        arcconf = find_tool("arcconf", self.paths.get("arcconf"))
        if arcconf is None:
            failed["arcconf"] = ToolStatus(False, _missing("arcconf", self.paths))
            return
        listing: Outputs = {}
        if not self._commands("arcconf", arcconf, [(["LIST"], "list.txt")], listing, failed):
            return
        count = raid_arcconf.controller_count(listing[("arcconf", "list.txt")])
        if count is None:
            failed["arcconf"] = ToolStatus(False, "arcconf LIST: no \"Controllers found\" line")
            return
        for number in range(1, min(count, 16) + 1):
            if not self._commands("arcconf", arcconf, [(["GETCONFIG", str(number), "AL"], f"{number}-al.txt"),
                                                       (["GETSTATUS", str(number)], f"{number}-status.txt")],
                                  outputs, failed, optional=(f"{number}-status.txt",)):
                return


def _missing(tool: str, paths: Dict[str, str]) -> str:
    configured = paths.get(tool)
    if configured and configured not in ALIASES[tool]:
        return f"{configured} not found"
    return f"{', '.join(ALIASES[tool])} not found (in PATH or {SEARCH})"


def _listing(folder: Optional[str]) -> List[str]:
    if not folder or not os.path.isdir(folder):
        return []
    try:
        return sorted(os.listdir(folder))
    except OSError:
        return []


def capture_commands(roots: Roots, folder: str) -> List[str]:
    """The RAID tools' outputs, as the reader runs them, into captured/<tool>/ (the layout a
    replay reads). Run only where a controller they speak to is bound."""
    bound = bound_controllers(roots)
    if not bound:
        return []
    outputs, failed = RaidReader(roots, timeout=120.0).run_tools(bound)
    for (tool, name), text in outputs.items():
        path = os.path.join(folder, tool, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        atomicfile.replace_file(path, text.encode("utf-8"))
    return [f"{tool}: {status.reason}" for tool, status in sorted(failed.items())]


__all__ = ["RaidReader", "RaidSnapshot", "ToolStatus", "RaidController", "RaidDrive", "bound_controllers",
           "capture_commands", "find_tool", "tools_needed"]
