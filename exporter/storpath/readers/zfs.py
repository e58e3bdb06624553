"""ZFS pools: state, vdev tree, error counters, capacity, ashift and scrub/resilver.

Three sources, cheapest first:

- /proc/spl/kstat/zfs/<pool>/state: the pool's state word (ONLINE, DEGRADED, FAULTED,
  OFFLINE, REMOVED, UNAVAIL, SUSPENDED), readable without root (module/os/linux/zfs/
  spa_stats.c, spa_state_data). Cheap: read on every scrape.
- `zpool status`: the vdev tree with read/write/checksum error counts and the last or
  running scan. OpenZFS 2.3 and later print JSON with `-j --json-int`
  (cmd/zpool/zpool_main.c, status_callback_json: {"output_version": {...}, "pools":
  {<name>: {"state", "vdevs": {<pool>: root vdev with nested "vdevs"}, "logs",
  "l2cache", "spares", "special", "dedup", "scan_stats", "error_count"}}}); older
  releases only the text layout of print_status_config, parsed here as well.
- `zpool list -Hp -o name,size,alloc,free,frag,cap,health,ashift`: sizes in bytes,
  fragmentation and capacity in percent ("-" when unknown), ashift (0 when the pool was
  created without one and ZFS chose per vdev).
- `zfs get -Hp -o name,value creation POOL...`: when each pool was created (its root
  dataset's creation time; pools have no such property themselves), so that a pool that
  was never scrubbed can be told from a new one. Asked once per pool name: it does not
  change while the pool exists.

Both commands are run with -L (vdev names resolved to kernel device names: nvme0n1,
sda) so vdevs join to block devices, with LC_ALL=C and TZ=UTC (English words, ctime
dates in UTC), and with a timeout: a pool stuck in I/O makes zpool hang in the kernel, and the exporter must not
hang with it.

Captured outputs (Roots.captured, written by `storpath capture` and by fixtures):

    <captured>/zpool/status.json    zpool status -j --json-int -L
    <captured>/zpool/status.txt     zpool status -p -L        (used when status.json is absent)
    <captured>/zpool/list.txt       zpool list -Hp -o name,size,alloc,free,frag,cap,health,ashift
    <captured>/zpool/creation.txt   zfs get -Hp -o name,value creation POOL...

each made with LC_ALL=C TZ=UTC, as storpath runs them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from typing import Dict, List, NamedTuple, Optional, Tuple

from storpath.base.records import datarecord
from storpath.base import atomicfile
from storpath.base.subprocesses import run_command
from storpath.base.problems import INFO, WARNING, Problem
# The parsers and records of zpool's output (re-exported: the readers' records live here).
from storpath.readers.zpool_output import (ERROR_TYPES, POOL_STATES, SCAN_FUNCTIONS, SCAN_STATES,  # noqa: F401
                                           VDEV_STATES, ScanStatus, Vdev, ZfsPool, ZpoolOutputError, apply_creation,
                                           apply_list, parse_count, parse_creation, parse_ctime, parse_list,
                                           parse_scan_line, parse_status_json, parse_status_text, pool_state,
                                           vdev_state)
from storpath.readers.block import device_physical_block_size
from storpath.base.roots import Roots
from storpath.base.sysfs import WHOLE_FILE, list_dir, read_attr, read_attr_why

# What this reader reads (storpath capture takes these, and capture_commands' output).
# The leaves' physical block sizes come through the block reader.
CAPTURE_SYSFS = ("module/zfs",)
CAPTURE_PROCFS = ("spl/kstat/zfs/*/state",)

STATUS_JSON_ARGS = ["status", "-j", "--json-int", "-L"]
STATUS_TEXT_ARGS = ["status", "-p", "-L"]
LIST_ARGS = ["list", "-Hp", "-o", "name,size,alloc,free,frag,cap,health,ashift"]
CREATION_ARGS = ["get", "-Hp", "-o", "name,value", "creation"]  # + the pool names
CAPTURED_FILES = {"status_json": ("zpool", "status.json"), "status_text": ("zpool", "status.txt"),
                  "list": ("zpool", "list.txt"), "creation": ("zpool", "creation.txt")}


# ---- /proc/spl/kstat/zfs -----------------------------------------------------

def read_kstat_states(roots: Roots) -> Tuple[Dict[str, str], List[Problem]]:
    """Pool name -> state word from /proc/spl/kstat/zfs/<pool>/state, and the pools whose
    state could not be read. Pool names may contain '/'-free characters only, and every
    pool directory has a `state` file; the other entries there (arcstats, dbufstats...)
    are files."""
    base = roots.proc("spl", "kstat", "zfs")
    states = {}
    problems: List[Problem] = []
    for name in list_dir(base, roots.procfs):
        path = os.path.join(base, name, "state")
        text, why = read_attr_why(path)
        if text is None:
            if why:
                problems.append(Problem("cannot read pool state", (("zpool", name), ("err", why))))
            continue
        state = pool_state(text)
        if state is None:
            problems.append(Problem("unknown pool state in kstat", (("zpool", name), ("value", text))))
            continue
        states[name] = state
    return states, problems


def zfs_present(roots: Roots) -> bool:
    """The ZFS module is loaded (a system without ZFS is not a failure)."""
    return os.path.isdir(roots.proc("spl", "kstat", "zfs")) or os.path.isdir(roots.sys("module", "zfs"))


# ---- running zpool ---------------------------------------------------------------

@datarecord
class CommandResult:
    """One zpool or zfs command's run: its output, or why it failed (and a zpool that would not die)."""

    ok: bool
    stdout: str = ""
    reason: Optional[str] = None  # why it failed: missing, timeout, exit status and stderr
    usage_error: bool = False  # exit status 2: an option this zpool does not know
    stuck: Optional[subprocess.Popen] = None  # a zpool that did not die when killed


def find_zpool(configured: str = "zpool") -> str:
    """The zpool to run: a path as configured, else the name looked up in PATH and then in
    /usr/sbin and /sbin (where distributions install it, often outside a service's PATH).
    The name itself when not found: running it then says so."""
    if os.sep in configured:
        return configured
    return shutil.which(configured) or shutil.which(configured, path="/usr/sbin:/sbin") or configured


def find_zfs(configured: str, zpool: str) -> str:
    """The zfs command: a path as configured, else the `zfs` beside the zpool in use (the
    two come in one package), else looked up as find_zpool does."""
    if os.sep in configured:
        return configured
    beside = os.path.join(os.path.dirname(zpool), configured)
    if os.path.dirname(zpool) and os.access(beside, os.X_OK):
        return beside
    return find_zpool(configured)


def run_zpool(zpool: str, args: List[str], timeout: float) -> CommandResult:
    """Run zpool (or zfs) with a deadline (storpath.base.subprocesses: a zpool stuck in the kernel is
    left behind as `stuck` rather than waited for)."""
    env = dict(os.environ, LC_ALL="C", LANG="C", TZ="UTC")
    env.pop("ZFS_COLOR", None)  # colour codes only when asked for
    try:
        done = run_command([zpool, *args], timeout, env=env)
    except FileNotFoundError:
        return CommandResult(ok=False, reason=f"{zpool} not found")
    except OSError as exc:
        return CommandResult(ok=False, reason=f"cannot run {zpool}: {exc.strerror}")
    if done.timed_out:
        return CommandResult(ok=False, stuck=done.stuck,
                             reason=f"{zpool} {' '.join(args)} did not finish within {timeout:g} s")
    text = done.stdout.decode("utf-8", "replace")
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return CommandResult(ok=False, stdout=text, usage_error=done.returncode == 2,
                             reason=f"{zpool} {' '.join(args)} exited with {done.returncode}"
                                    + (f": {message[0]}" if message else ""))
    return CommandResult(ok=True, stdout=text)


@datarecord
class ZpoolRun:
    """One run of the zpool commands (or one read of their captured outputs)."""

    pools: List[ZfsPool]
    ok: bool
    reason: Optional[str]  # why the run failed or was partial
    finished_at: float
    source: str  # "json", "text", "captured-json", "captured-text", "none"
    # What the operator should hear of once (logged by the zfs collector's background task, or
    # by the snapshot step when `storpath check` reads zpool now).
    problems: Tuple[Problem, ...] = ()

    @property
    def empty(self) -> bool:
        """Nothing to serve: a replayed machine without ZFS (no pools captured)."""
        return self.source == "none" and self.ok

    @property
    def succeeded_live(self) -> bool:
        """zpool ran on this host and answered (a captured output is no success of this host's)."""
        return self.ok and self.source in ("json", "text")


class ZpoolPass(NamedTuple):
    """The zfs collector's background task's last zpool run, as the snapshot carries it."""

    run: Optional[ZpoolRun]  # None: no ZFS here
    block_sizes: Dict[str, Dict[str, Optional[int]]]  # pool -> leaf -> physical block bytes
    last_success: Optional[float]  # Unix seconds


def leaf_block_sizes(roots: Roots, pools: List[ZfsPool]) -> Dict[str, Dict[str, Optional[int]]]:
    """Pool -> leaf vdev -> its device's physical block size in bytes (None: not a block
    device here), for the ashift a pool's devices call for."""
    return {pool.name: {v.name: device_physical_block_size(roots, v.name) for v in pool.vdevs if v.leaf}
            for pool in pools}


REPLAY_WITHOUT_CAPTURE = Problem(
    "zpool not run: --path.sysfs replays another machine and --path.captured is not given, so this host's pools "
    "would be reported as the replayed one's", level=INFO)
NO_JSON = Problem("zpool has no JSON output (OpenZFS < 2.3): using the text layout", level=INFO)


class ZpoolReader:
    """Runs (or replays) zpool status, zpool list and zfs get creation. Remembers that a
    zpool older than 2.3 rejects -j, so it is not asked again, and each pool's creation
    time, so zfs runs only when a pool name is new."""

    def __init__(self, roots: Roots, zpool: str = "zpool", timeout: float = 10.0, zfs: Optional[str] = None):
        self.roots = roots
        self.zpool = zpool
        self.zfs = zfs or find_zfs("zfs", zpool)
        self.timeout = timeout
        self.json_supported: Optional[bool] = None
        self._stuck: List[subprocess.Popen] = []
        self._created: Dict[str, float] = {}  # pool name -> creation time, for the pools present

    def _run(self, args: List[str], binary: Optional[str] = None) -> CommandResult:
        result = run_zpool(binary or self.zpool, args, self.timeout)
        if result.stuck is not None:
            self._stuck.append(result.stuck)
        return result

    def read(self) -> ZpoolRun:
        if self.roots.captured:
            return self._read_captured()
        if not self.roots.devices:
            # --path.sysfs replays another machine (storpath.base.roots): this host's pools are not
            # its pools. Its kstat still gives their states; zpool's details need --path.captured.
            return ZpoolRun(pools=[], ok=True, reason=None, finished_at=time.time(), source="none",
                                 problems=(REPLAY_WITHOUT_CAPTURE,))
        self._stuck = [p for p in self._stuck if p.poll() is None]
        if self._stuck:
            # A zpool hung in the kernel (a pool stuck in I/O) would hang every new one
            # too: start no more until it is gone.
            pids = ",".join(str(p.pid) for p in self._stuck)
            return ZpoolRun(pools=[], ok=False, reason=f"an earlier zpool (pid {pids}) is still hung",
                                 finished_at=time.time(), source="none")
        status = None
        source = "json"
        problems: List[Problem] = []
        if self.json_supported is not False:
            status = self._run(STATUS_JSON_ARGS)
            if not status.ok and status.usage_error:
                self.json_supported = False
                problems.append(NO_JSON)
            elif status.ok:
                self.json_supported = True
        if self.json_supported is False:
            status = self._run(STATUS_TEXT_ARGS)
            source = "text"
        assert status is not None
        if not status.ok:
            return ZpoolRun(pools=[], ok=False, reason=status.reason, finished_at=time.time(), source=source,
                                 problems=tuple(problems))
        try:
            pools = parse_status_json(status.stdout) if source == "json" else parse_status_text(status.stdout)
        except ZpoolOutputError as exc:
            return ZpoolRun(pools=[], ok=False, reason=str(exc), finished_at=time.time(), source=source,
                                 problems=tuple(problems))
        listing = self._run(LIST_ARGS)
        reason = None
        if listing.ok:
            try:
                apply_list(pools, parse_list(listing.stdout))
            except ZpoolOutputError as exc:
                reason = str(exc)
        else:
            reason = listing.reason
        creation = self._add_creation(pools)
        if creation is not None:
            problems.append(creation)
        return ZpoolRun(pools=pools, ok=reason is None, reason=reason, finished_at=time.time(), source=source,
                             problems=tuple(problems))

    def _add_creation(self, pools: List[ZfsPool]) -> Optional[Problem]:
        """Each pool's creation time, from zfs for the pools not asked before. A failing
        zfs leaves the times out (nothing else depends on them) and is the problem returned."""
        names = {p.name for p in pools}
        self._created = {name: when for name, when in self._created.items() if name in names}
        new = sorted(names - set(self._created))
        reason = None
        if new:
            # zfs exits 1 when one of the pools cannot be opened, printing the others: take
            # what it printed either way.
            result = self._run([*CREATION_ARGS, *new], self.zfs)
            reason = None if result.ok else result.reason
            try:
                self._created.update(parse_creation(result.stdout))
            except ZpoolOutputError as exc:
                reason = reason or str(exc)
        apply_creation(pools, self._created)
        return Problem("pool creation time unknown", (("reason", reason),), WARNING) if reason else None

    def _read_captured(self) -> ZpoolRun:
        paths = {key: self.roots.captured_path(*parts) for key, parts in CAPTURED_FILES.items()}
        json_text = read_attr(paths["status_json"], WHOLE_FILE)
        text = read_attr(paths["status_text"], WHOLE_FILE) if json_text is None else None
        if json_text is None and text is None:
            return ZpoolRun(pools=[], ok=True, reason="no captured zpool output", finished_at=time.time(),
                                 source="none")
        try:
            if json_text is not None:
                pools, source = parse_status_json(json_text), "captured-json"
            else:
                pools, source = parse_status_text(text or ""), "captured-text"
            listing = read_attr(paths["list"], WHOLE_FILE)
            if listing is not None:
                apply_list(pools, parse_list(listing))
            creation = read_attr(paths["creation"], WHOLE_FILE)
            if creation is not None:
                apply_creation(pools, parse_creation(creation))
        except ZpoolOutputError as exc:
            return ZpoolRun(pools=[], ok=False, reason=f"captured zpool output: {exc}", finished_at=time.time(),
                                 source="captured")
        return ZpoolRun(pools=pools, ok=True, reason=None, finished_at=time.time(), source=source)


def capture_commands(roots: Roots, folder: str) -> List[str]:
    """zpool status (JSON where OpenZFS >= 2.3, else text), zpool list and zfs get creation,
    as the zfs reader runs them, into captured/zpool/."""
    if not zfs_present(roots):
        return []
    binary = find_zpool()
    notes = []
    outputs = {}
    status = run_zpool(binary, STATUS_JSON_ARGS, 30.0)
    if status.ok:
        outputs["status_json"] = status.stdout
    else:
        text = run_zpool(binary, STATUS_TEXT_ARGS, 30.0)
        if text.ok:
            outputs["status_text"] = text.stdout
        else:
            notes.append(f"zpool status: {text.reason}")
    listing = run_zpool(binary, LIST_ARGS, 30.0)
    if listing.ok:
        outputs["list"] = listing.stdout
        try:
            names = sorted(parse_list(listing.stdout))
        except ZpoolOutputError:
            names = []
        if names:
            creation = run_zpool(find_zfs("zfs", binary), [*CREATION_ARGS, *names], 30.0)
            if creation.stdout:
                outputs["creation"] = creation.stdout
            if not creation.ok:
                notes.append(f"zfs get creation: {creation.reason}")
    else:
        notes.append(f"zpool list: {listing.reason}")
    for key, text in outputs.items():
        path = os.path.join(folder, *CAPTURED_FILES[key])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        atomicfile.replace_file(path, text.encode("utf-8"))
    return notes


__all__ = ["leaf_block_sizes", "ZfsPool", "Vdev", "ScanStatus", "ZpoolReader", "ZpoolRun", "ZpoolOutputError", "read_kstat_states",
           "zfs_present", "parse_status_json", "parse_status_text", "parse_list",
           "parse_scan_line", "parse_ctime", "parse_creation", "find_zpool", "find_zfs", "run_zpool"]
