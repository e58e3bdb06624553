"""Linux software RAID (md) arrays, from /sys/block/md*/md/ and /proc/mdstat.

The kernel's reference is drivers/md/md.c (the attribute show functions) and
Documentation/admin-guide/md.rst. Per array, in /sys/block/<md>/md/:

- array_state: clear, inactive, suspended, readonly, read-auto, clean, active,
  write-pending, active-idle, broken (raid0/linear with a member gone, kernel 5.x+)
- level: the personality ("raid0", "raid1", "raid10", "raid5", "linear"...), empty
  while an array is assembled but not started
- raid_disks: slots in the array; "4 (3)" during a reshape (new, then old count); empty
  when the count is 0 (raid_disks_show: `if (mddev->raid_disks == 0) return 0;`), as for
  an IMSM/DDF container, whose `level` reads "container" (mdadm writes it for external
  metadata; level_show prints mddev->clevel when no personality runs) and whose
  array_state reads "inactive": a container holds the metadata and the member disks,
  never data, and has no redundancy of its own (its volumes are arrays of their own)
- chunk_size: bytes; "524288 (65536)" during a reshape; 0 for levels without chunks
- degraded, sync_action, sync_completed, mismatch_cnt: only for levels that keep
  redundancy (the kernel adds them with the personality's sync thread, so raid0 and
  linear have none of them)
- sync_action: idle, resync, recover, check, repair, reshape, frozen
- sync_completed: "none" when nothing runs, "delayed" while a sync waits for another
  array on the same disks, else "<done> / <total>" in 512-byte sectors
  (sync_completed_show: `if (!test_bit(MD_RECOVERY_RUNNING, &mddev->recovery))
  return sprintf(page, "none\n");` and "delayed\n" for MD_RESYNC_YIELDED/DELAYED)
- mismatch_cnt: sectors found inconsistent by the last check or repair

Per member, /sys/block/<md>/md/dev-<name>/: slot ("none" for spares and failed
members, else the role number), state (comma-separated flags: faulty, in_sync,
journal, write_mostly, blocked, spare, write_error, want_replacement, replacement,
external_bbl, failfast; a member being rebuilt into a slot reads "spare" with a slot
number), and `block`, a link to the member's block device (a disk or a partition).

/proc/mdstat lists every array, also ones whose sysfs directory cannot be read; it
fills in what sysfs does not give. Its layout (md.c, md_seq_show and status_resync):

    md2 : active raid1 vdf[2] vde[0]
          65408 blocks super 1.2 [2/1] [U_]
          [>....................]  recovery =  0.3% (256/65408) finish=16.9min speed=64K/sec

Member flags in mdstat: (F) faulty, (S) spare, (W) write-mostly, (R) replacement,
(J) journal. The number in brackets is the member's descriptor number, not its slot.
Instead of the progress line, status_resync prints `\tresync=DELAYED` while the sync
waits for another array on the same disks (`if (resync < MD_RESYNC_ACTIVE)`), and
`\tresync=PENDING` when no sync runs but the array is not known in sync
(`if (mddev->recovery_cp < MaxSector)`, e.g. an auto-read-only array not yet written).

sysfs is authoritative per array: /proc/mdstat only fills an attribute that the array's
sysfs directory did not give (absent or unreadable); a value sysfs gives, `none`
included, stands.
"""

from __future__ import annotations

import os
import re
from dataclasses import field
from typing import Dict, List, Optional, Set, Tuple

from storpath.base.records import datarecord
from storpath.base.parse import natural_key, parse_int
from storpath.base.problems import Problem
from storpath.base.roots import Roots
from storpath.base.sysfs import WHOLE_FILE, list_dir, read_attr_noting, read_attr_why

# array_state values, md.c array_states[].
ARRAY_STATES = ("clear", "inactive", "suspended", "readonly", "read-auto", "clean", "active",
                "write-pending", "active-idle", "broken")
# sync_action values, md.c action_name[].
SYNC_ACTIONS = ("idle", "resync", "recover", "check", "repair", "reshape", "frozen")
# sync_action values while no sync runs.
IDLE_ACTIONS = frozenset({"idle", "frozen"})
# mdstat's words for a running sync (status_resync) -> the sync_action spelling.
# What this reader reads (storpath capture takes these; see commands/capture.py).
CAPTURE_SYSFS = (
    "block/md*",
    "block/md*/md/{array_state,level,raid_disks,chunk_size,degraded,sync_action,sync_completed,mismatch_cnt}",
    "block/md*/md/dev-*/{slot,state,block}",
    "block/md*/md/dev-*/block/partition",
)
CAPTURE_PROCFS = ("mdstat",)

_MDSTAT_ACTIONS = {"resync": "resync", "recovery": "recover", "check": "check", "repair": "repair",
                   "reshape": "reshape"}
_MDSTAT_FLAGS = {"F": "faulty", "S": "spare", "W": "write_mostly", "R": "replacement", "J": "journal"}

_MD_NAME = re.compile(r"^md[0-9a-z_]*$")
_HEADER = re.compile(r"^(?P<name>md\S*)\s*:\s*(?P<rest>.*)$")
# re.ASCII: \d is [0-9] only (int() would read other scripts' digits as numbers too).
_MEMBER = re.compile(r"^(?P<name>[^\[\s]+)\[(?P<desc>\d+)\](?P<flags>(?:\([A-Z]\))*)$", re.ASCII)
_COUNTS = re.compile(r"\[(?P<raid>\d+)/(?P<working>\d+)\]\s+\[(?P<map>[U_]+)\]", re.ASCII)
_BLOCKS = re.compile(r"^(?P<blocks>\d+)\s+blocks\b", re.ASCII)
_PROGRESS = re.compile(r"\b(?P<action>resync|recovery|check|repair|reshape)\s*=\s*(?P<pct>\d+(?:\.\d+)?)%\s*"
                       r"\((?P<done>\d+)/(?P<total>\d+)\)", re.ASCII)
_PENDING = re.compile(r"\b(?P<action>resync|recovery|check|repair|reshape)\s*=\s*(?P<what>DELAYED|PENDING)\b")


@datarecord(frozen=True)
class MdMember:
    """One member (rdev) of an array."""

    name: str  # kernel name of the member's block device: nvme1n1, sda2
    disk: str  # the whole disk it is on: nvme1n1 for nvme1n1 and for nvme1n1p2
    slot: Optional[int]  # role in the array; None for spares and failed members ("none")
    state: Tuple[str, ...]  # the kernel's flags in its order: ("in_sync",), ("in_sync", "write_mostly")
    slot_known: bool = True  # False when there is no slot file (only /proc/mdstat described the member)


@datarecord
class MdArray:
    """One md array as sysfs shows it (/proc/mdstat filling the gaps), with its members."""

    name: str  # md0, md127
    array_state: Optional[str] = None
    level: Optional[str] = None  # raid0, raid1 ... None while not started
    raid_disks: Optional[int] = None
    degraded: Optional[int] = None  # None for levels without redundancy and for containers
    sync_action: Optional[str] = None  # None for levels without a sync thread
    sync_completed: Optional[Tuple[int, int]] = None  # (done, total) sectors while a sync runs
    mismatch_count: Optional[int] = None  # sectors
    chunk_size_bytes: Optional[int] = None  # None for levels without chunks (chunk_size 0)
    members: List[MdMember] = field(default_factory=list)
    # "DELAYED" (sync_completed `delayed`, or mdstat's resync=DELAYED) or "PENDING"
    # (mdstat's resync=PENDING): a sync that waits, not one that runs.
    sync_waiting: Optional[str] = None
    errors: List[str] = field(default_factory=list)  # what could not be read, for the log
    from_sysfs: Set[str] = field(default_factory=set)  # attributes sysfs gave (mdstat leaves them alone)

    @property
    def container(self) -> bool:
        """An IMSM/DDF container (level "container"): metadata and disks, no redundancy."""
        return self.level == "container"


@datarecord(frozen=True)
class MdstatMember:
    """One member of an array as /proc/mdstat lists it: its name, descriptor number and flags."""

    name: str
    descriptor: int
    flags: Tuple[str, ...]


@datarecord
class MdstatArray:
    """One array as /proc/mdstat shows it: state, level, members, size and any sync."""

    name: str
    active: bool
    read_only: Optional[str] = None  # "read-only" / "auto-read-only" when shown
    level: Optional[str] = None
    members: List[MdstatMember] = field(default_factory=list)
    blocks: Optional[int] = None  # 1 KiB blocks
    raid_disks: Optional[int] = None
    working_disks: Optional[int] = None
    member_map: Optional[str] = None  # "UU_"
    sync_action: Optional[str] = None  # sync_action spelling of a running sync
    sync_waiting: Optional[str] = None  # "DELAYED" or "PENDING" (resync=DELAYED / resync=PENDING)
    sync_done: Optional[int] = None  # 1 KiB blocks (sectors/2), as mdstat prints them
    sync_total: Optional[int] = None


# ---- pure parsers ------------------------------------------------------------

def parse_mdstat(text: str) -> Dict[str, MdstatArray]:
    """Arrays described in /proc/mdstat's text. Lines it does not know (Personalities,
    bitmap, unused devices) are skipped; a malformed array block yields what it holds."""
    arrays: Dict[str, MdstatArray] = {}
    current: Optional[MdstatArray] = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            current = None
            continue
        header = _HEADER.match(line) if not raw[:1].isspace() else None
        if header and _MD_NAME.match(header.group("name")):
            current = _parse_header(header.group("name"), header.group("rest"))
            arrays[current.name] = current
            continue
        if current is None:
            continue
        blocks = _BLOCKS.match(line)
        if blocks:
            current.blocks = int(blocks.group("blocks"))
        counts = _COUNTS.search(line)
        if counts and int(counts.group("working")) <= int(counts.group("raid")):
            current.raid_disks = int(counts.group("raid"))
            current.working_disks = int(counts.group("working"))
            current.member_map = counts.group("map")
        progress = _PROGRESS.search(line)
        if progress and int(progress.group("done")) <= int(progress.group("total")):
            current.sync_action = _MDSTAT_ACTIONS[progress.group("action")]
            current.sync_done = int(progress.group("done"))
            current.sync_total = int(progress.group("total"))
            continue
        pending = _PENDING.search(line)
        if pending:
            # A waiting sync: status_resync names no action for it (always "resync=").
            current.sync_waiting = pending.group("what")
    return arrays


def _parse_header(name: str, rest: str) -> MdstatArray:
    words = rest.split()
    array = MdstatArray(name=name, active=bool(words) and words[0] == "active")
    index = 1 if words and words[0] in ("active", "inactive") else 0
    if index < len(words) and words[index].startswith("(") and words[index].endswith(")"):
        array.read_only = words[index].strip("()")
        index += 1
    if array.active and index < len(words) and "[" not in words[index]:
        array.level = words[index]
        index += 1
    for word in words[index:]:
        member = _MEMBER.match(word)
        if not member:
            continue
        flags = tuple(_MDSTAT_FLAGS.get(f, f) for f in re.findall(r"\(([A-Z])\)", member.group("flags")))
        array.members.append(MdstatMember(member.group("name"), int(member.group("desc")), flags))
    return array


def parse_first_int(text: Optional[str]) -> Tuple[Optional[int], Optional[str]]:
    """'4' -> 4; '4 (3)' (during a reshape: new, then old) -> 4; anything else -> reason."""
    if text is None:
        return None, None
    word = text.split()[0] if text.split() else ""
    value = parse_int(word)
    if value is None:
        return None, f"not a non-negative number: {text!r}"
    return value, None


def parse_raid_disks(text: Optional[str]) -> Tuple[Optional[int], Optional[str]]:
    """As parse_first_int, and '' -> 0: raid_disks_show prints nothing for a count of 0
    (a container, an array being assembled)."""
    if text == "":
        return 0, None
    return parse_first_int(text)


def parse_sync_completed(text: Optional[str]) -> Tuple[Optional[Tuple[int, int]], Optional[str]]:
    """'1024 / 130816' -> ((1024, 130816), None); 'none' and 'delayed' -> (None, None)."""
    if text is None or text in ("none", "delayed"):
        return None, None
    match = re.match(r"^(\d+)\s*/\s*(\d+)$", text)
    if not match:
        return None, f"unrecognised sync_completed {text!r}"
    done, total = int(match.group(1)), int(match.group(2))
    if total == 0 or done > total:
        return None, f"implausible sync_completed {text!r}"
    return (done, total), None


def parse_member_state(text: Optional[str]) -> Tuple[str, ...]:
    """'in_sync,write_mostly' -> ('in_sync', 'write_mostly'); '' -> ()."""
    if not text:
        return ()
    return tuple(flag.strip() for flag in text.split(",") if flag.strip())


def parse_slot(text: Optional[str]) -> Tuple[Optional[int], Optional[str]]:
    if text is None or text == "none":
        return None, None
    slot = parse_int(text)
    return (slot, None) if slot is not None else (None, f"unrecognised slot {text!r}")


# ---- reading -----------------------------------------------------------------

# An attribute that could not be read, as MdArray.errors says it: "<attribute>: <why>".
_unreadable = "{}: {}".format


def _known(base: str, name: str, values: Tuple[str, ...], errors: List[str]) -> Optional[str]:
    """An attribute that takes one of a fixed set of words; anything else is an error."""
    value = read_attr_noting(base, name, errors, _unreadable)
    if value is not None and value not in values:
        errors.append(f"{name}: unknown value {value!r}")
        return None
    return value


def _member_device(base: str, entry: str) -> Tuple[str, str]:
    """(member, whole disk) from dev-<name>/block, a link into the member's block
    device directory; a partition's directory sits inside its disk's and has a
    `partition` attribute."""
    link = os.path.join(base, "block")
    try:
        real = os.path.realpath(link) if os.path.islink(link) else None
    except OSError:
        real = None
    if not real:
        name = entry[len("dev-"):]  # the kernel names the directory after the member
        return name, name
    name = os.path.basename(real)
    if os.path.exists(os.path.join(real, "partition")):
        return name, os.path.basename(os.path.dirname(real))
    return name, name


def _read_members(md_dir: str, errors: List[str]) -> List[MdMember]:
    members = []
    for entry in list_dir(md_dir):
        if not entry.startswith("dev-"):
            continue
        base = os.path.join(md_dir, entry)
        name, disk = _member_device(base, entry)
        slot_text = read_attr_noting(base, "slot", errors, _unreadable)
        slot, why = parse_slot(slot_text)
        if why:
            errors.append(f"{entry}/slot: {why}")
        state_text = read_attr_noting(base, "state", errors, _unreadable)
        if state_text is None and not os.path.isdir(base):
            continue  # member removed while we read
        # No slot file: the role is unknown, not "none" (slot_show prints "none" itself).
        members.append(MdMember(name=name, disk=disk, slot=slot, state=parse_member_state(state_text),
                                slot_known=slot_text is not None))
    members.sort(key=lambda m: (m.slot is None, m.slot if m.slot is not None else 0, m.name))
    return members


def read_md_array(roots: Roots, name: str) -> Optional[MdArray]:
    """One array from /sys/block/<name>/md/, or None when it has no md directory."""
    md_dir = roots.sys("block", name, "md")
    if not os.path.isdir(md_dir):
        return None
    array = MdArray(name=name)
    errors = array.errors
    given = array.from_sysfs
    array.array_state = _known(md_dir, "array_state", ARRAY_STATES, errors)
    level = read_attr_noting(md_dir, "level", errors, _unreadable)
    array.level = level or None
    if level is not None:
        given.add("level")
    for attr, target in (("raid_disks", "raid_disks"), ("degraded", "degraded"), ("mismatch_cnt", "mismatch_count"),
                         ("chunk_size", "chunk_size_bytes")):
        text, why = read_attr_why(os.path.join(md_dir, attr))
        if why is not None:
            errors.append(_unreadable(attr, why))
        value, why = (parse_raid_disks if attr == "raid_disks" else parse_first_int)(text)
        if why:
            errors.append(f"{attr}: {why}")
        elif text is not None:
            given.add(target)
        setattr(array, target, value)
    if array.chunk_size_bytes == 0:
        array.chunk_size_bytes = None  # raid1 and linear have no chunks
    array.sync_action = _known(md_dir, "sync_action", SYNC_ACTIONS, errors)
    if array.sync_action is not None:
        given.add("sync_action")
    completed_text = read_attr_noting(md_dir, "sync_completed", errors, _unreadable)
    completed, why = parse_sync_completed(completed_text)
    if why:
        errors.append(f"sync_completed: {why}")
    elif completed_text is not None:
        given.add("sync_completed")
        if completed_text == "delayed":
            array.sync_waiting = "DELAYED"
    if array.sync_action in IDLE_ACTIONS:
        # Older kernels print done/total here whatever runs (sync_completed_show without
        # its MD_RECOVERY_RUNNING test): an idle array's figure is no sync's progress.
        completed = None
    array.sync_completed = completed
    array.members = _read_members(md_dir, errors)
    if array.array_state is not None:
        given.add("array_state")
    return array


def merge_mdstat(array: MdArray, stat: MdstatArray) -> None:
    """Fill what sysfs did not give from /proc/mdstat: an attribute in `array.from_sysfs`
    stands as sysfs gave it (`none` in sync_completed included)."""
    given = array.from_sysfs
    if "array_state" not in given:
        array.array_state = None if stat.active else "inactive"
    if "level" not in given and stat.level:
        array.level = stat.level
    if "raid_disks" not in given:
        array.raid_disks = stat.raid_disks
    if "degraded" not in given and stat.raid_disks is not None and stat.working_disks is not None \
            and stat.level not in (None, "raid0", "linear"):
        array.degraded = stat.raid_disks - stat.working_disks
    if "sync_action" not in given and stat.sync_action is not None:
        array.sync_action = stat.sync_action
    if "sync_completed" not in given:
        if stat.sync_done is not None and stat.sync_total:
            array.sync_completed = (stat.sync_done * 2, stat.sync_total * 2)
        elif stat.sync_waiting is not None:
            array.sync_waiting = stat.sync_waiting
    elif array.sync_completed is None and array.sync_waiting is None and stat.sync_waiting == "PENDING":
        # sysfs reads "none" while a resync is pending (MD_RECOVERY_RUNNING clear); only
        # mdstat tells it from an array in sync.
        array.sync_waiting = "PENDING"
    if not array.members:
        array.members = [MdMember(name=m.name, disk=m.name, slot=None, state=m.flags, slot_known=False)
                         for m in stat.members]


def read_md_arrays(roots: Roots) -> Tuple[List[MdArray], List[Problem]]:
    """Every md array the kernel knows: those in /proc/mdstat and those with an md
    directory in sysfs, and what could not be read. No md driver loaded means an empty
    list, not an error."""
    mdstat_path = roots.proc("mdstat")
    stats: Dict[str, MdstatArray] = {}
    problems: List[Problem] = []
    text, why = read_attr_why(mdstat_path, WHOLE_FILE)
    if text is not None:
        stats = parse_mdstat(text)
    elif why is not None:
        problems.append(Problem("cannot read /proc/mdstat", (("path", mdstat_path), ("err", why))))
    names = set(stats)
    for name in list_dir(roots.sys("block"), roots.sysfs):
        if _MD_NAME.match(name) and os.path.isdir(roots.sys("block", name, "md")):
            names.add(name)
    arrays = []
    for name in sorted(names, key=natural_key):
        array = read_md_array(roots, name) or MdArray(name=name)
        if name in stats:
            merge_mdstat(array, stats[name])
        if array.container:
            # The one place of the container rule: metadata and disks, no redundancy of its
            # own, so no degraded count whatever sysfs or mdstat say (collectors.md, findings.md).
            array.degraded = None
        for error in array.errors:
            problems.append(Problem("md attribute unreadable", (("device", name), ("err", error))))
        arrays.append(array)
    return arrays, problems


