"""dm-multipath maps: /sys/block/dm-N whose dm/uuid starts with `mpath-`, their paths
(the map's slaves) and, where `dmsetup status` could be run, which paths the map itself
counts as failed.

sysfs (Documentation/ABI/testing/sysfs-block-dm, drivers/md/dm-sysfs.c):

    /sys/block/dm-5/dm/name        mpatha (the map's name, /dev/mapper/<name>)
    /sys/block/dm-5/dm/uuid        mpath-3600508b1001c...  (multipathd prefixes the WWID with "mpath-")
    /sys/block/dm-5/dm/suspended   0 or 1
    /sys/block/dm-5/size           512-byte sectors
    /sys/block/dm-5/slaves/sdi ->  one link per path device
    /sys/block/sdi/device/state    the SCSI device's state (drivers/scsi/scsi_sysfs.c, sdev_states:
                                   created, running, cancel, deleted, quiesce, offline,
                                   transport-offline, blocked, created-blocked); an NVMe
                                   path's controller state (live, ...) for dm over NVMe
    /sys/block/sdi/dev             major:minor, how dmsetup status names the path

The kernel's own verdict on each path is only in the target's status line
(drivers/md/dm-mpath.c, multipath_status; Documentation/admin-guide/device-mapper/
dm-multipath: "dmsetup status" of a multipath target). Per map, `dmsetup status --target
multipath` prints:

    mpatha: 0 104857600 multipath 2 0 0 0 2 1 A 0 2 0 8:128 A 0 8:144 A 0 E 0 2 0 8:160 F 1 8:176 A 0

    <name>: <start> <length> multipath
    <#features> <feature>...          (the INFO status: "2 <queue_io> <pg_init_count>")
    <#hw handler args> <arg>...
    <#path groups> <next group>
    per group:  <A|E|D> <#group status args> <arg>... <#paths> <#path status args>
       per path: <major:minor> <A|F> <fail count> <path status arg>...

A = active, F = failed (the kernel stopped sending I/O there); groups: A the one in use,
E enabled, D disabled (bypassed). dmsetup needs root and runs in a background task
(collectors.multipath); without it, a path whose device state is not running (or, for
NVMe, live) counts as failed, as node_exporter's dmmultipath collector counts it.
"""

from __future__ import annotations

import os
import shutil
import re
from dataclasses import field
from functools import partial
from typing import Dict, List, Optional, Tuple

from storpath.base.records import datarecord
from storpath.base import atomicfile
from storpath.base.parse import natural_key, parse_int
from storpath.base.problems import Problem
from storpath.base.roots import Roots
from storpath.base import privhelper
from storpath.base.subprocesses import run_command
from storpath.readers.instances import InstanceCache
from storpath.base.sysfs import list_dir, list_entries, read_attr_noting, read_attr_why

CAPTURE_SYSFS = (
    "block/dm-*/{size,dev}",
    "block/dm-*/dm/{name,uuid,suspended}",
    "block/dm-*/slaves/*",
    "block/dm-*/slaves/*/{dev,device/state}",
)
CAPTURED_STATUS = ("dmsetup", "status.txt")  # below Roots.captured
STATUS_ARGS = ("status", "--target", "multipath")

UUID_PREFIX = "mpath-"
# A path device that serves I/O: a SCSI device `running`, an NVMe controller `live`.
SERVING_STATES = frozenset({"running", "live"})
_DM_NAME = re.compile(r"^dm-\d+$", re.ASCII)
_DEVNO = re.compile(r"^\d+:\d+$", re.ASCII)


@datarecord(frozen=True)
class MapPath:
    """One path of a map: a slave block device."""

    device: str  # sdi, nvme0n1
    devno: Optional[str]  # "8:128": how dmsetup status names it
    state: Optional[str]  # device/state; None when there is none or it cannot be read


@datarecord(frozen=True)
class MultipathMap:
    """One dm-multipath map as sysfs shows it: its names, size, whether suspended, its paths."""

    device: str  # dm-5: the kernel's block device name (joins node_disk_*)
    name: Optional[str]  # mpatha
    uuid: str  # mpath-<wwid>
    size_bytes: Optional[int]
    suspended: Optional[bool]
    paths: Tuple[MapPath, ...]


@datarecord(frozen=True)
class StatusPath:
    """One path of a map as `dmsetup status` shows it: active or failed, fail count, its group."""

    devno: str  # "8:128"
    active: bool  # A (True) or F (False)
    fail_count: int  # times the kernel failed this path
    group: int  # 1-based path group
    group_state: str  # A (in use), E (enabled), D (disabled)


@datarecord(frozen=True)
class DmsetupStatus:
    """The latest `dmsetup status --target multipath`: map name -> its paths, or why not."""

    maps: Dict[str, Tuple[StatusPath, ...]]
    ok: bool
    reason: Optional[str] = None
    source: str = "dmsetup"  # dmsetup, captured, none

    # Every path dmsetup named, by its device number: a block device is a path of one map at
    # most (dm-mpath holds it), so a map is found by its paths even when its name changed
    # between dmsetup's run and the read of sysfs (`dmsetup rename`). Made with the record.
    by_devno: Dict[str, StatusPath] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        found: Dict[str, StatusPath] = {}
        for paths in self.maps.values():
            for path in paths:
                found.setdefault(path.devno, path)
        object.__setattr__(self, "by_devno", found)


class StatusFormatError(ValueError):
    pass


# ---- pure parsers ------------------------------------------------------------

def parse_status_line(words: List[str]) -> Tuple[StatusPath, ...]:
    """The paths of one multipath status line, from the word after `multipath`."""
    it = iter(words)

    def take_int() -> int:
        try:
            word = next(it)
        except StopIteration:
            raise StatusFormatError("status line ends early") from None
        value = parse_int(word)
        if value is None:
            raise StatusFormatError(f"expected a count, found {word!r}")
        return value

    def skip(count: int) -> None:
        for _ in range(count):
            if next(it, None) is None:
                raise StatusFormatError("status line ends early")

    skip(take_int())  # features
    skip(take_int())  # hardware handler
    groups = take_int()
    take_int()  # the next group to use
    paths: List[StatusPath] = []
    for group in range(1, groups + 1):
        state = next(it, None)
        if state not in ("A", "E", "D"):
            raise StatusFormatError(f"path group {group}: state {state!r} is not A, E or D")
        skip(take_int())  # the group's selector status
        count, per_path = take_int(), take_int()
        for _ in range(count):
            devno, flag = next(it, None), next(it, None)
            if devno is None or not _DEVNO.match(devno) or flag not in ("A", "F"):
                raise StatusFormatError(f"path group {group}: bad path {devno!r} {flag!r}")
            paths.append(StatusPath(devno=devno, active=flag == "A", fail_count=take_int(), group=group,
                                    group_state=state))
            skip(per_path)
    return tuple(paths)


def parse_dmsetup_status(text: str) -> Dict[str, Tuple[StatusPath, ...]]:
    """Every multipath map of `dmsetup status --target multipath` output. "No devices
    found" is no maps; a line of another target is skipped; a map of several segments keeps
    the paths of all, in the order printed (one list per map, joined once at the end: a name
    printed again and again costs no more than as many names)."""
    maps: Dict[str, List[StatusPath]] = {}
    for line in text.splitlines():
        name, sep, rest = line.partition(": ")
        words = rest.split()
        if not sep or len(words) < 3 or words[2] != "multipath":
            continue
        try:
            paths = parse_status_line(words[3:])
        except StatusFormatError as exc:
            raise StatusFormatError(f"{name}: {exc}") from None
        maps.setdefault(name, []).extend(paths)
    return {name: tuple(paths) for name, paths in maps.items()}


# ---- reading -----------------------------------------------------------------

def _unreadable(device: str, attribute: str, why: str) -> Problem:
    return Problem("dm attribute unreadable", (("device", device), ("attribute", attribute), ("err", why)))


class MultipathReader:
    """Reads the multipath maps of /sys/block on each call. A map's uuid cannot change while
    its dm device exists (a rename makes a new uevent but keeps the uuid): read once per
    instance (readers.instances.InstanceCache), with which devices are no multipath map at
    all; the name (`dmsetup rename` changes it under the same instance), size, suspension,
    slaves and their states every call."""

    def __init__(self, roots: Roots):
        self.roots = roots
        self._instances = InstanceCache()

    def read(self) -> Tuple[List[MultipathMap], List[Problem]]:
        problems: List[Problem] = []
        base = self.roots.sys("block")

        def derive(name: str, path: str) -> Optional[str]:
            if not _DM_NAME.match(name):
                return None
            uuid, _ = read_attr_why(os.path.join(path, "dm", "uuid"))
            if uuid is None or not uuid.startswith(UUID_PREFIX):
                return None  # LVM, crypt, a partition map (part1-mpath-...): not a multipath map
            return uuid

        maps = []
        for name, _, uuid in self._instances.refresh(base, list_entries(base, self.roots.sysfs), derive):
            if uuid is not None:
                dm_name = read_attr_noting(self.roots.sys("block", name), "dm/name", problems,
                                           partial(_unreadable, name))
                maps.append(self._map(name, uuid, dm_name, problems))
        return sorted(maps, key=lambda m: natural_key(m.device)), problems

    def _map(self, device: str, uuid: str, name: Optional[str], problems: List[Problem]) -> MultipathMap:
        base = self.roots.sys("block", device)
        unreadable = partial(_unreadable, device)
        size = parse_int(read_attr_noting(base, "size", problems, unreadable))
        suspended = read_attr_noting(base, "dm/suspended", problems, unreadable)
        paths = tuple(self._path(device, slave, problems) for slave in sorted(list_dir(os.path.join(base, "slaves")),
                                                                      key=natural_key))
        return MultipathMap(device=device, name=name or None, uuid=uuid,
                            size_bytes=None if size is None else size * 512,
                            suspended=None if suspended not in ("0", "1") else suspended == "1", paths=paths)

    def _path(self, device: str, slave: str, problems: List[Problem]) -> MapPath:
        # slaves/<slave> links to the path device's folder (a disk or a partition); a tree
        # that keeps it as a plain folder (node_exporter's fixtures) has the device in /sys/block.
        folder = os.path.join(self.roots.sys("block", device), "slaves", slave)
        if not os.path.exists(os.path.join(folder, "dev")) and not os.path.isdir(os.path.join(folder, "device")):
            folder = self.roots.sys("block", slave)
        devno, _ = read_attr_why(os.path.join(folder, "dev"))
        state, why = read_attr_why(os.path.join(folder, "device", "state"))
        if why is not None:
            problems.append(Problem("multipath path state unreadable", (("device", slave), ("err", why))))
        return MapPath(device=slave, devno=devno if devno and _DEVNO.match(devno) else None, state=state or None)


def find_dmsetup(configured: str) -> str:
    """The configured dmsetup as found in PATH, else in /usr/sbin or /sbin (a service's PATH
    may lack the sbin folders), else as configured (its run then says it is missing)."""
    return shutil.which(configured) or shutil.which(configured, path="/usr/sbin:/sbin") or configured


def multipath_here(roots: Roots) -> bool:
    """Whether dmsetup has anything to say: dm_multipath loaded here, or a replay (its capture)."""
    return bool(roots.captured) or os.path.isdir(roots.sys("module", "dm_multipath"))


def read_dmsetup_status(roots: Roots, dmsetup: str, timeout: float) -> DmsetupStatus:
    """`dmsetup status --target multipath`, or its capture when replaying (Roots.captured).
    Not run at all when --path.sysfs replays another machine without a capture: this host's
    maps would be taken for the replayed one's."""
    if roots.captured:
        path = roots.captured_path(*CAPTURED_STATUS)
        text, why = read_attr_why(path, 1 << 20)
        if text is None:
            return DmsetupStatus({}, ok=why is None, reason=why or "no captured dmsetup status", source="none")
        return _parsed(text, "captured")
    if not roots.devices:
        return DmsetupStatus({}, ok=True, reason="replaying another machine without a captured dmsetup status",
                         source="none")
    try:
        if privhelper.configured():
            done = privhelper.ask_command({"cmd": "dmsetup-status", "timeout": timeout}, timeout)
        else:
            done = run_command([dmsetup, *STATUS_ARGS], timeout)
    except OSError as exc:
        return DmsetupStatus({}, ok=False, reason=f"cannot run {dmsetup}: {exc.strerror}")
    if done.timed_out:
        return DmsetupStatus({}, ok=False, reason=f"{dmsetup} status did not finish within {timeout:g} s")
    if done.returncode != 0:
        return DmsetupStatus({}, ok=False, reason=f"{dmsetup} status exited {done.returncode}: "
                                                  f"{done.first_error_line() or 'no output'}")
    return _parsed(done.stdout.decode("utf-8", "replace"), "dmsetup")


def _parsed(text: str, source: str) -> DmsetupStatus:
    try:
        return DmsetupStatus(parse_dmsetup_status(text), ok=True, source=source)
    except StatusFormatError as exc:
        return DmsetupStatus({}, ok=False, reason=f"dmsetup status: {exc}", source=source)


def capture_commands(roots: Roots, folder: str) -> List[str]:
    """`dmsetup status --target multipath` into captured/dmsetup/status.txt, where there are maps."""
    maps, _ = MultipathReader(roots).read()
    if not maps:
        return []
    try:
        done = run_command(["dmsetup", *STATUS_ARGS], 30.0)
    except OSError as exc:
        return [f"dmsetup status: {exc.strerror}"]
    if done.timed_out or done.returncode != 0:
        return [f"dmsetup status: {done.first_error_line() or 'timed out or failed'}"]
    target = os.path.join(folder, *CAPTURED_STATUS)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    atomicfile.replace_file(target, done.stdout)
    return []
