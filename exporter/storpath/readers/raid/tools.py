"""Running the RAID vendor tools: which a host needs, where they are, and one pass of their
commands into the captured layout (readers.raid reads that layout, live or replayed).

A tool runs only where a controller it speaks to is bound in sysfs
(/sys/bus/pci/drivers/<driver>/<PCI address>):

    megaraid_sas       storcli (storcli64, perccli64, perccli, storcli2, perccli2), else MegaCli
    hpsa, smartpqi     ssacli (hpssacli, hpacucli)
    aacraid, smartpqi  arcconf

each command with a deadline (storpath.base.subprocesses: in its own process group, killed at the
deadline), LC_ALL=C. One tool command runs at a time in the whole process, whichever runner
starts it (`ToolRunner`): a reload builds a second runner while the first may still wait on a
hung storcli, and two storcli runs against one controller's firmware must never overlap. No
command starts while a process group an earlier command started still lives (a tool stuck
in the kernel cannot be killed until the kernel lets go of it); `ToolRunner.close` (exporter
stop, reload) kills the groups its commands started, as the probe engine does for fio.

smartctl is run only on a block device node (S_ISBLK under --path.dev) that sysfs places below
the controller's own PCI function: a name from a tool's output alone (`OS Drive Name`
/dev/watchdog) is never opened.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import stat
import subprocess
import threading
import time
from typing import Dict, List, Optional, Sequence, Set, Tuple

from storpath.base.records import datarecord
from storpath.readers.raid.merge import ToolStatus, fill_addresses, parse_storcli
from storpath.readers.raid.records import RaidInventory
from storpath.base import privhelper
from storpath.base.roots import Roots
from storpath.base.subprocesses import kill_group, run_command
from storpath.base.sysfs import list_dir

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
# arcconf numbers controllers from 1; no host has more than a few.
MAX_ARCCONF_CONTROLLERS = 16

# What ToolRunner runs through `storpath helper`: "helper:storcli" (the helper resolves the name).
HELPER_PREFIX = "helper:"

_PCI_ADDRESS = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")

Outputs = Dict[Tuple[str, str], str]  # (folder, file name) in the captured layout -> the command's output


def bound_controllers(roots: Roots) -> Dict[str, List[str]]:
    """Driver -> the PCI functions bound to it, for the RAID drivers; absent ones left out."""
    out: Dict[str, List[str]] = {}
    for driver in DRIVERS:
        entries = [e for e in list_dir(roots.sys("bus", "pci", "drivers", driver), roots.sysfs)
                   if _PCI_ADDRESS.fullmatch(e)]
        if entries:
            out[driver] = sorted(entries)
    return out


def addresses_by_tool(bound: Dict[str, List[str]]) -> Dict[str, List[str]]:
    """Tool -> the PCI functions bound to the drivers it speaks to."""
    out: Dict[str, List[str]] = {}
    for driver, addresses in bound.items():
        for tool in DRIVERS[driver]:
            out.setdefault(tool, []).extend(addresses)
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


def missing(tool: str, paths: Dict[str, str]) -> str:
    configured = paths.get(tool)
    if configured and configured not in ALIASES[tool]:
        return f"{configured} not found"
    return f"{', '.join(ALIASES[tool])} not found (in PATH or {SEARCH})"


def block_device_below(roots: Roots, name: Optional[str], pci_address: Optional[str],
                       node_here: bool = True) -> Optional[str]:
    """The device node of block device `name` when it is one (S_ISBLK) and sysfs places it below
    PCI function `pci_address` (/sys/class/block/<name> resolving under .../<address>/...);
    else None. What a tool names is only a hint: this is what may be opened. `node_here` False:
    the node is opened by `storpath helper`, which checks it is a block device where it runs
    (the serving container may have no host /dev): /dev/<name> once sysfs places it."""
    if not name or not pci_address or not re.fullmatch(r"[a-z][a-z0-9]{0,31}", name):
        return None
    if node_here and not roots.devices:
        return None
    try:
        where = os.path.realpath(roots.sys("class", "block", name))
        if node_here:
            node = roots.devpath(name)
            if not stat.S_ISBLK(os.stat(node).st_mode):
                return None
        else:
            node = f"/dev/{name}"
            os.stat(where)  # (sysfs has it)
    except (OSError, ValueError):
        return None
    devices = os.path.realpath(roots.sys("devices"))
    parts = os.path.relpath(where, devices).split(os.sep)
    if parts[0] == ".." or pci_address not in parts[:-1]:
        return None
    return node


# One tool command at a time in the process, whichever runner starts it (a reload's new runner
# and the old one's hung command included), and the process groups the commands started.
_ONE_AT_A_TIME = threading.Lock()
_GROUPS: Dict[int, subprocess.Popen] = {}  # process group id -> its leader
_GROUPS_LOCK = threading.Lock()


def _group_lives(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def live_groups() -> List[int]:
    """The process groups tool commands started that still have a process (a leader reaped,
    or a zombie not yet waited for, counts as gone only once its group is empty)."""
    with _GROUPS_LOCK:
        for pgid, proc in list(_GROUPS.items()):
            proc.poll()  # reap an exited leader, so that an empty group reads as gone
            if not _group_lives(pgid):
                del _GROUPS[pgid]
        return sorted(_GROUPS)


@datarecord
class Run:
    """One tool command's run: its output, or why it failed."""

    ok: bool
    text: str = ""
    reason: Optional[str] = None


class ToolRunner:
    """Runs the bound controllers' tools. `paths`: tool -> configured path or name."""

    def __init__(self, roots: Roots, paths: Optional[Dict[str, str]] = None, timeout: float = 30.0):
        self.roots = roots
        self.paths = paths or {}
        self.timeout = timeout
        self._mine: Set[int] = set()  # the process groups this runner started
        self._closed = threading.Event()

    def close(self) -> None:
        """Start nothing more; kill the process groups this runner's commands started."""
        self._closed.set()
        for pgid in list(self._mine):
            with _GROUPS_LOCK:
                proc = _GROUPS.get(pgid)
            if proc is not None:
                _kill(proc)

    def run_tools(self, bound: Dict[str, List[str]]) -> Tuple[Outputs, Dict[str, ToolStatus]]:
        """The commands for the bound controllers' tools, their outputs in the captured layout,
        and the tools that could not be run or failed (with the reason). Waits for a command
        another runner has running (at most until this runner is closed)."""
        outputs: Outputs = {}
        failed: Dict[str, ToolStatus] = {}
        needed = tools_needed(bound)
        while not _ONE_AT_A_TIME.acquire(timeout=0.25):
            if self._closed.is_set():
                return outputs, {t: ToolStatus(False, "stopped") for t in needed}
        try:
            if self._closed.is_set():
                return outputs, {t: ToolStatus(False, "stopped") for t in needed}
            self._end_finished_groups()
            alive = live_groups()
            if alive:
                # A tool hung in the kernel would hang every new one too: start none until it is gone.
                reason = f"an earlier run (process group {','.join(map(str, alive))}) is still there"
                return outputs, {t: ToolStatus(False, reason) for t in needed}
            self._run(needed, bound, outputs, failed)
        finally:
            _ONE_AT_A_TIME.release()
            self._mine.intersection_update(live_groups())  # what ended is forgotten: no growth over months
        return outputs, failed

    def _end_finished_groups(self) -> None:
        """What a finished command left behind in its group (a daemon it forked) goes."""
        with _GROUPS_LOCK:
            leftovers = [p for p in _GROUPS.values() if p.poll() is not None]
        for proc in leftovers:
            _kill(proc)

    def _run(self, needed: Sequence[str], bound: Dict[str, List[str]], outputs: Outputs,
             failed: Dict[str, ToolStatus]) -> None:
        for tool in needed:
            if tool == "storcli":
                storcli = self._find("storcli")
                megacli = None if storcli else self._find("megacli")
                if storcli:
                    if self._commands("storcli", storcli, [(a, f"{k}.json") for k, a in STORCLI_ARGS.items()],
                                      outputs, failed):
                        self._run_smartctl(outputs, failed, bound)
                elif megacli:
                    self._commands("megacli", megacli, [(a, f"{k}.txt") for k, a in MEGACLI_ARGS.items()],
                                   outputs, failed, optional=("bbu.txt",))
                else:
                    failed["storcli"] = ToolStatus(False, missing("storcli", self.paths) + " (nor MegaCli)")
            elif tool == "ssacli":
                ssacli = self._find("ssacli")
                if ssacli:
                    self._commands("ssacli", ssacli, [(SSACLI_ARGS, "config-detail.txt")], outputs, failed)
                else:
                    failed["ssacli"] = ToolStatus(False, missing("ssacli", self.paths))
            elif tool == "arcconf":
                self._run_arcconf(outputs, failed)

    def _find(self, tool: str) -> Optional[str]:
        """The tool's path here, or with `storpath helper` (storpath.base.privhelper) the tool's
        name: the helper finds it where it runs."""
        if privhelper.configured():
            return HELPER_PREFIX + tool
        return find_tool(tool, self.paths.get(tool))

    def _ask_helper(self, tool: str, args: Sequence[str]):
        if tool == "smartctl":  # -j -i -d sat+megaraid,ID DEVICE
            request = {"cmd": "smartctl", "device_id": int(args[3].rsplit(",", 1)[1]), "device": args[4]}
        else:
            request = {"cmd": "raid", "tool": tool, "args": list(args)}
        return privhelper.ask_command(dict(request, timeout=self.timeout), self.timeout)

    def run(self, binary: str, args: Sequence[str]) -> Run:
        """One command: its output, or why it failed. Never started once the runner is closed;
        its process group is tracked until it is gone."""
        if self._closed.is_set():
            return Run(False, reason="stopped")
        env = dict(os.environ, LC_ALL="C", LANG="C")
        try:
            if binary.startswith(HELPER_PREFIX):
                done = self._ask_helper(binary[len(HELPER_PREFIX):], args)
            else:
                done = run_command([binary, *args], self.timeout, env=env, started=self._track)
        except FileNotFoundError:
            return Run(False, reason=f"{binary} not found")
        except OSError as exc:
            return Run(False, reason=f"cannot run {binary}: {exc.strerror}")
        if done.timed_out:
            return Run(False, reason=f"{binary} {' '.join(args)} did not finish within {self.timeout:g} s")
        if self._closed.is_set() and done.returncode is not None and done.returncode < 0:
            return Run(False, reason="stopped")
        text = done.stdout.decode("utf-8", "replace")
        # storcli and MegaCli exit non-zero when one controller of several answers a command
        # with "not supported": what they printed is still their output; a tool that printed
        # nothing failed.
        if done.returncode != 0 and not text.strip():
            return Run(False, reason=f"{binary} {' '.join(args)} exited with {done.returncode}"
                                     + (f": {done.first_error_line()}" if done.first_error_line() else ""))
        return Run(True, text=text)

    def _track(self, proc: subprocess.Popen) -> None:
        with _GROUPS_LOCK:
            _GROUPS[proc.pid] = proc  # start_new_session: the leader's pid is the group's id
        self._mine.add(proc.pid)
        if self._closed.is_set():
            _kill(proc)

    def _commands(self, tool: str, binary: str, commands: Sequence[Tuple[Sequence[str], str]], outputs: Outputs,
                  failed: Dict[str, ToolStatus], optional: Sequence[str] = ()) -> bool:
        """Run each command into outputs[(tool, name)]; the first that fails (unless optional)
        fails the tool and stops its run."""
        for args, name in commands:
            run = self.run(binary, args)
            if run.ok:
                outputs[(tool, name)] = run.text
            elif name not in optional:
                failed[tool] = ToolStatus(False, run.reason)
                return False
        return True

    def _run_smartctl(self, outputs: Outputs, failed: Dict[str, ToolStatus], bound: Dict[str, List[str]]) -> None:
        """smartctl for the SATA drives storcli gives no capability or rate of, through a
        volume's block device on the same controller: only a block device node that sysfs
        places below that controller's PCI function (none without smartctl)."""
        smartctl = self._find("smartctl")
        by_helper = privhelper.configured() is not None
        if smartctl is None or not (self.roots.devices or by_helper):
            return
        try:
            inventory = parse_storcli(*(outputs.get(("storcli", f"{k}.json")) for k in STORCLI_ARGS))
        except Exception:  # storcli's own status says so when its outputs are parsed
            return
        inventory = fill_addresses(inventory, addresses_by_tool(bound))
        address = {c.name: c.pci_address for c in inventory.controllers}
        through: Dict[str, str] = {}
        for volume in inventory.volumes:
            node = block_device_below(self.roots, volume.device, address.get(volume.controller), not by_helper)
            if node is not None:
                through.setdefault(volume.controller, node)
        for drive in _smartctl_wanted(inventory):
            device = through.get(drive.controller)
            if device is None:
                continue
            own_id = drive.controller.split("/", 1)[1]
            run = self.run(smartctl, ["-j", "-i", "-d", f"sat+megaraid,{drive.device_id}", device])
            # smartctl's exit status is a bit mask (bit 2 and up: SMART findings): its JSON is the answer.
            if run.text.strip():
                outputs[("smartctl", f"{own_id}-{drive.device_id}.json")] = run.text
            elif not run.ok:
                failed["smartctl"] = ToolStatus(False, run.reason)

    def _run_arcconf(self, outputs: Outputs, failed: Dict[str, ToolStatus]) -> None:
        arcconf = self._find("arcconf")
        if arcconf is None:
            failed["arcconf"] = ToolStatus(False, missing("arcconf", self.paths))
            return
        listing: Outputs = {}
        if not self._commands("arcconf", arcconf, [(["LIST"], "list.txt")], listing, failed):
            return
        from storpath.readers.raid import arcconf as raid_arcconf  # its parser only where arcconf runs

        count = raid_arcconf.controller_count(listing[("arcconf", "list.txt")][:1 << 20])
        if count is None:
            failed["arcconf"] = ToolStatus(False, "arcconf LIST: no \"Controllers found\" line")
            return
        for number in range(1, min(count, MAX_ARCCONF_CONTROLLERS) + 1):
            if not self._commands("arcconf", arcconf, [(["GETCONFIG", str(number), "AL"], f"{number}-al.txt"),
                                                       (["GETSTATUS", str(number)], f"{number}-status.txt")],
                                  outputs, failed, optional=(f"{number}-status.txt",)):
                return


def _smartctl_wanted(inventory: RaidInventory):
    """SATA drives with a device id whose capability, or rate, the tool does not give."""
    for drive in inventory.drives:
        if drive.device_id is None or (drive.interface or "").upper() != "SATA":
            continue
        if drive.capability is not None and drive.negotiated_rate is not None:
            continue
        yield drive


def _kill(proc: subprocess.Popen, grace: float = 1.0) -> None:
    """The whole process group `proc` leads, its leader gone or not: SIGTERM, then SIGKILL,
    waiting at most `grace` after each for the group to be empty (a process the leader forked
    is reaped by init, not by us)."""
    if proc.poll() is None and not kill_group(proc):
        return  # stuck in the kernel: live_groups() keeps saying so
    for sig in (signal.SIGTERM, signal.SIGKILL):
        end = time.monotonic() + grace
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        while time.monotonic() < end:
            if not _group_lives(proc.pid):
                return
            time.sleep(0.02)


__all__ = ["ToolRunner", "ToolStatus", "Outputs", "bound_controllers", "tools_needed", "find_tool", "missing",
           "block_device_below", "live_groups", "addresses_by_tool"]
