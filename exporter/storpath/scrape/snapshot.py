"""One snapshot of the machine per scrape: every reader run once, each under a deadline.

A scrape starts here. `Snapshotter.take()` runs the readers the enabled collectors need
(the *sources*: the PCI tree, the block devices, NVMe, SAS, md...), one after another on a
long-lived reading thread, times each, and returns a `Snapshot`: an immutable record of
what was read, what could not be read and why, and the problems met on the way. Every
collector, `storpath check`, `storpath tree` and the landing page work from a snapshot;
none of them reads a file.

A sysfs read normally takes microseconds, but an attribute of a device that stopped
answering blocks `open()` or `read()` in the kernel, and a thread blocked there cannot be
interrupted from Python. Slow is not stuck: a source is called blocked only when one of its
reads has been outstanding longer than a server-side bound no client sets (`blocked_after`,
web.read_blocked_after); the reason names that read's file. Its thread is left to return on
its own and a fresh thread reads the rest; until the blocked read returns, the source is not
started again (it fails at once with the same reason), so one stuck file costs one thread,
not one per scrape; reading threads are daemons, so shutdown never waits for one.

A source that is merely slow (a busy CPU, a big tree) is never called blocked. When the
snapshot's deadline (the server's, web.scrape_timeout: never a client's) runs out while it
still reads, it is reported "timed out" for that snapshot and keeps reading; the next
snapshot takes its result, or waits for it, rather than starting it again. An answer's time
is its data's time: a reading taken up that way dates the snapshot by its own start
(`read_from`) and says when it began (`read_at`, exported as each source's age); one that
began before the previous snapshot did (older than the interval between two scrapes: it was
left behind twice) is said once as served old. It is served, not dropped: a source slower
than two deadlines would otherwise never be served at all.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from functools import partial
from dataclasses import field, fields
from typing import (TYPE_CHECKING, Any, Callable, Dict, FrozenSet, Iterable, List, Mapping, NamedTuple, Optional,
                    Sequence, Tuple)

from storpath.base.records import datarecord
from storpath.base import log, sysfs
from storpath.base.background import TaskBlocked
from storpath.analysis.nvme import Identified
from storpath.analysis.observed import LinkChangeCounts, Observed
from storpath.analysis.pcie import InstanceExpectations, PcieLink, expectations
from storpath.base.problems import Problem
from storpath.readers.alignment import AlignmentReader, BlockAlignment
from storpath.readers.ata import AtaLink, AtaReader
from storpath.readers.block import BlockDevice, BlockReader
from storpath.readers.dm_multipath import DmsetupStatus, MultipathMap, MultipathReader
from storpath.readers.host import HostIdentity, read_host
from storpath.readers.inventory import InventoryDevice, InventoryReader
from storpath.readers.md import MdArray, read_md_arrays
from storpath.readers.net import NetPort, NetReader
from storpath.readers.numa import NumaTopology, read_numa
from storpath.readers.nvme import NvmeController, NvmeNamespace, NvmeReader
from storpath.readers.nvme_health import HealthResult, HwmonReader, HwmonSensor
from storpath.readers.nvme_subsystem import NvmeSubsystem, NvmeSubsystemReader
from storpath.readers.pci import PciDevice, PciReader
from storpath.readers.raid import RaidPass
from storpath.readers.sas import SasPhy, SasPhyErrors, SasReader
from storpath.readers.scsi_paths import ScsiDisk, ScsiPathReader
from storpath.readers.sas_pcd import DrivePhysResult
from storpath.readers.zfs import ZpoolPass, read_kstat_states
from storpath.base.roots import Roots

if TYPE_CHECKING:  # `storpath check --lspci` reads a dump; serve never loads its parser
    from storpath.readers.lspci import DumpRecord

LOG = log.get("snapshot")

BLOCKED_AFTER = 5.0  # seconds one read may be outstanding before its source is called blocked (web.read_blocked_after)


class ProbeResults(NamedTuple):
    """The fio probes' latest results (the probes collector's background tasks)."""
    records: Dict  # (target, profile) -> probes.state record
    target_devices: Dict[str, Optional[str]]  # target -> the block device it resolved to
    expected: Dict[Tuple[str, str], Optional[float]]  # (target, profile) -> expected read bytes/s


@datarecord(frozen=True)
class Snapshot:
    """What one scrape read. A source that was not needed, or could not be read, is None
    (`failed` says which and why); an empty list is hardware that is not there."""

    taken_at: float = 0.0  # Unix seconds, when the reading ended
    # Unix seconds, when the oldest reading it holds began where that was before this snapshot
    # started: a read left behind by an earlier scrape's deadline and taken up by this one. 0.0
    # when every reading began within this snapshot. An answer is as old as its oldest reading.
    read_from: float = 0.0
    host: Optional[HostIdentity] = None
    pci: Optional[List[PciDevice]] = None  # with their port types (readers.pci.resolve_port_types)
    pcie_expected: Optional[Dict[str, PcieLink]] = None  # PCI address -> what its link should be
    net_ports: Optional[List[NetPort]] = None  # network interfaces of PCI functions, with their line rate
    block_listing: Optional[List[Tuple[str, int]]] = None  # (name, inode) of /sys/class/block
    blocks: Optional[List[BlockDevice]] = None
    nvme_controllers: Optional[List[NvmeController]] = None
    nvme_namespaces: Optional[List[NvmeNamespace]] = None
    hwmon: Optional[Tuple[List[str], List[HwmonSensor]]] = None  # (controllers with a hwmon, sensors)
    sas_phys: Optional[List[SasPhy]] = None  # without error counters (sas_errors)
    ata_links: Optional[List[AtaLink]] = None
    alignment: Optional[BlockAlignment] = None
    inventory: Optional[List[InventoryDevice]] = None
    md: Optional[List[MdArray]] = None
    nvme_subsystems: Optional[List[NvmeSubsystem]] = None  # native multipath: each subsystem's controller paths
    multipath_maps: Optional[List[MultipathMap]] = None  # dm-multipath maps and their path devices
    scsi_disks: Optional[List[ScsiDisk]] = None  # sd devices' WWIDs: a dual-ported drive seen twice
    numa: Optional[NumaTopology] = None  # with the PCI functions' nodes
    zfs_kstat: Optional[Dict[str, str]] = None  # pool -> state, from /proc/spl/kstat/zfs
    # The slow sources (storpath.scrape.slow): in serve the latest pass of their background tasks,
    # in a one-shot command one pass read now.
    nvme_identify: Optional[Dict[str, Identified]] = None  # namespace -> what Identify said
    nvme_controller_states: Optional[Dict[str, Optional[bytes]]] = None  # controller -> its state as read
    nvme_smart: Optional[Dict[str, HealthResult]] = None  # controller -> its SMART log
    sas_errors: Optional[Tuple[Dict[str, SasPhyErrors], Optional[float]]] = None  # (PHY -> counters, when read)
    sas_drive_phys: Optional[Dict[str, DrivePhysResult]] = None  # end device -> its SAS drive's PHYs
    zpool: Optional[ZpoolPass] = None
    dmsetup: Optional[DmsetupStatus] = None  # which paths each dm-multipath map counts failed
    raid: Optional[RaidPass] = None
    probes: Optional[ProbeResults] = None
    pcie_observed: Optional[Dict[str, Observed]] = None  # GPU/accelerator address -> its link's maxima over the window
    pcie_link_changes: Optional[LinkChangeCounts] = None  # watched functions' link changes, and who counted them
    pcie_targets: Optional[Dict[str, float]] = None  # address -> Target Link Speed the helper read
    # How the reading went.
    failed: Mapping[str, str] = field(default_factory=dict)  # source -> why it could not be read
    seconds: Mapping[str, float] = field(default_factory=dict)  # source -> how long it took
    # source -> Unix seconds its reading began, for a reading left behind by an earlier snapshot
    # and taken up by this one (the others began within this snapshot)
    read_at: Mapping[str, float] = field(default_factory=dict)
    problems: Tuple[Problem, ...] = ()
    blocked: FrozenSet[str] = frozenset()  # sources failed on a read outstanding past the server's bound
    deadline_exceeded: bool = False  # the deadline ran out before every source was read (slow, not stuck)

    def why_missing(self, names: Iterable[str]) -> Optional[str]:
        """Why one of the sources `names` is missing from this snapshot; None when all were read."""
        for name in names:
            if name in self.failed:
                return f"{name}: {self.failed[name]}"
        return None


SOURCE_NAMES = tuple(f.name for f in fields(Snapshot)
                     if f.name not in ("taken_at", "read_from", "failed", "seconds", "read_at", "problems",
                                       "blocked", "deadline_exceeded"))


Read = Tuple[Any, Sequence[Problem]]  # what a source's read returns: (its record, the problems met)


@datarecord(frozen=True)
class Source:
    """One thing a snapshot reads. `read` is called with what the sources named in `needs`
    read, in that order, and returns (the record for the snapshot field of the same name,
    the problems met reading it: logged once each and kept in Snapshot.problems). It raises
    sysfs.RootUnreadable when the directory it reads cannot be read (the source failed,
    not empty). `once`: read at the first success and kept (what cannot change while the
    machine runs)."""

    name: str
    read: Callable[..., Read]
    needs: Tuple[str, ...] = ()
    once: bool = False

    def __post_init__(self) -> None:
        if self.name not in SOURCE_NAMES:
            raise ValueError(f"source {self.name!r} is not a field of Snapshot")


def no_problems(read: Callable[..., Any]) -> Callable[..., Read]:
    """A source's read from a reader whose record has nothing to report besides (or a
    background task's latest result: the task logs its own problems)."""
    return lambda *needs: (read(*needs), ())


def sysfs_sources(roots: Roots) -> Dict[str, Source]:
    """The sources every collector may need: what sysfs and procfs hold."""
    # One reader per source: a source whose read blocks holds its reader, and must not hold
    # another source's.
    pci = PciReader(roots)
    pcie_expected = InstanceExpectations()
    block = BlockReader(roots)
    nvme_controllers, nvme_namespaces = NvmeReader(roots), NvmeReader(roots)
    hwmon = HwmonReader(roots)
    sas = SasReader(roots)
    ata = AtaReader(roots)
    alignment = AlignmentReader(roots)
    inventory = InventoryReader(roots)
    net = NetReader(roots)
    table = (
        Source("host", no_problems(partial(read_host, roots)), once=True),
        Source("pci", pci.read),
        Source("pcie_expected", no_problems(lambda devices, host: pcie_expected(devices, host.virtual)),
               needs=("pci", "host")),
        Source("net_ports", net.read),
        Source("block_listing", no_problems(block.list)),
        Source("blocks", no_problems(block.read), needs=("block_listing",)),
        Source("nvme_controllers", no_problems(nvme_controllers.controllers)),
        Source("nvme_namespaces", no_problems(nvme_namespaces.namespaces), needs=("block_listing",)),
        Source("hwmon", no_problems(hwmon.read)),
        Source("sas_phys", sas.read),
        Source("ata_links", ata.read),
        Source("alignment", no_problems(alignment.read), needs=("block_listing",)),
        Source("inventory", no_problems(inventory.read), needs=("pci", "blocks", "block_listing")),
        Source("md", partial(read_md_arrays, roots)),
        # storpath serve reads the controllers' states on their own schedule (storpath.scrape.slow);
        # elsewhere the reader reads them itself.
        Source("nvme_controller_states", no_problems(lambda: None)),
        Source("nvme_subsystems", NvmeSubsystemReader(roots).read, needs=("block_listing", "nvme_controller_states")),
        Source("multipath_maps", MultipathReader(roots).read),
        Source("scsi_disks", ScsiPathReader(roots).read),
        Source("numa", partial(read_numa, roots), needs=("pci",)),
        Source("zfs_kstat", partial(read_kstat_states, roots)),
    )
    return {source.name: source for source in table}


def snapshotter_for(roots: Roots, names: Iterable[str], extra: Iterable[Source] = (),
                    blocked_after: float = BLOCKED_AFTER) -> Snapshotter:
    """The one way to a Snapshotter, for the scrape, `storpath check`, `tree`, `probe` and the
    tests alike: the sysfs sources, with `extra` (the slow sources of storpath.scrape.slow, a
    sampler's window, the probes' results) in place of those of the same name, limited to
    `names` and what they need."""
    table = sysfs_sources(roots)
    table.update({source.name: source for source in extra})
    return Snapshotter(needed(table, names), blocked_after=blocked_after)


def take_once(roots: Roots, names: Optional[Iterable[str]] = None, extra: Iterable[Source] = (),
              timeout: float = 30.0) -> Snapshot:
    """One snapshot for a one-shot command: `names` (by default every sysfs source and `extra`)."""
    extra = tuple(extra)
    if names is None:
        names = [*sysfs_sources(roots), *(s.name for s in extra)]
    snapshotter = snapshotter_for(roots, names, extra)
    try:
        return snapshotter.take(timeout)
    finally:
        snapshotter.close()


def from_lspci(record: DumpRecord, problems: Sequence[Problem] = ()) -> Snapshot:
    """A snapshot of the machine an lspci dump describes (readers.lspci): its PCI tree and the
    links' expectations, judged by the same analysis as a machine read through sysfs. The
    dump holds no block device, so the block sources are empty (the report says a dump
    cannot show them); md arrays where the archive kept /proc/mdstat; every other source is
    left unread. Logs each problem once."""
    devices = record.dump.devices
    for problem in problems:
        Snapshotter._log_once(problem)
    return Snapshot(taken_at=time.time(), host=record.host, pci=devices,
                    pcie_expected=expectations(devices, record.host.virtual), blocks=[], block_listing=[],
                    md=record.md, problems=tuple(problems))


class _Lane:
    """A long-lived thread that runs reads one after another. When a read is left behind
    (blocked, or still going when a scrape's deadline ran out), the lane is given up
    (`stop()`): it finishes that read on its own and then ends."""

    def __init__(self) -> None:
        self._jobs: "queue.SimpleQueue[Optional[_Job]]" = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._loop, name="snapshot-reader", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        """Run each job given: its source's read, with what it needs; its value or error,
        then done (what the snapshot waits on)."""
        while True:
            job = self._jobs.get()
            if job is None:
                return
            job.thread_id = threading.get_ident()
            job.started = time.monotonic()  # queued behind nothing: the lane is free when a job is given
            job.began = time.time()
            try:
                job.value = job.source.read(*job.needs)
            except BaseException as exc:  # handed to the snapshot, which reports it
                job.error = exc
            finally:
                job.done.set()

    def submit(self, job: "_Job") -> None:
        self._jobs.put(job)

    def stop(self) -> None:
        self._jobs.put(None)


class _Job:
    """One source's read, given to a lane: what it needs, and once done its value or error."""

    def __init__(self, source: Source, needs: Sequence[Any]):
        self.source = source
        self.needs = needs
        self.done = threading.Event()
        self.started = time.monotonic()
        self.began = time.time()  # Unix seconds: what the reading is dated by
        self.value: Any = None
        self.error: Optional[BaseException] = None
        self.thread_id: Optional[int] = None
        self.blocked_on: Optional[str] = None  # the file whose read overran the bound, once it has


class Snapshotter:
    """Takes snapshots of the machine from a fixed set of sources. One snapshot at a time
    (the HTTP side's single flight makes concurrent scrapes share one).

    `blocked_after`: the server-side bound that tells slow from stuck. A source is called
    blocked only when one of its reads (a file's open and read, a directory listing) has
    been outstanding longer than this; no client sets it. A source still reading when a
    snapshot's deadline runs out, with no read outstanding that long, is slow: it is
    reported "timed out" for that snapshot, keeps reading in the background, and the next
    snapshot takes its result (or waits for it) instead of starting it again."""

    def __init__(self, sources: Sequence[Source], blocked_after: float = 5.0):
        self.sources = _in_order(sources)
        self.blocked_after = blocked_after
        self._lane: Optional[_Lane] = None
        self._behind: Dict[str, _Job] = {}  # source -> its run left behind by an earlier snapshot
        self._kept: Dict[str, Any] = {}  # `once` sources, read
        self._lock = threading.Lock()
        self.last: Optional[Snapshot] = None
        self._last_began: Optional[float] = None  # Unix seconds, when the previous snapshot began

    def take(self, timeout: float = 10.0) -> Snapshot:
        end = time.monotonic() + timeout
        with self._lock:
            got: Dict[str, Any] = {}
            failed: Dict[str, str] = {}
            seconds: Dict[str, float] = {}
            problems: List[Problem] = []
            blocked: List[str] = []
            exceeded = False
            began = time.time()
            previous_began, self._last_began = self._last_began, began
            read_from = 0.0
            read_at: Dict[str, float] = {}
            for source in self.sources:
                name = source.name
                if name in self._kept:
                    got[name] = self._kept[name]
                    seconds[name] = 0.0  # read once, earlier
                    continue
                job = self._behind.pop(name, None)
                if job is not None and job.blocked_on is not None and job.done.is_set():
                    # What a read that blocked for so long returned is no reading of now: read afresh.
                    log.kv(LOG, logging.INFO, "blocked read returned", source=name, file=job.blocked_on,
                           seconds=round(time.monotonic() - job.started, 1))
                    job = None
                if job is not None and job.done.is_set() and previous_began is not None \
                        and job.began < previous_began:
                    # Left behind twice: its reading is older than the interval between two
                    # scrapes. Served with its age (the answer's read_at, its timestamp), never as current.
                    problems.append(Problem(
                        "a reading left behind by the scrape deadline is older than the last scrape: served with "
                        "its age", (("source", name), ("age_seconds", round(began - job.began, 1))),
                        logging.WARNING))
                if job is None:
                    why = self._why_not_started(source, failed)
                    if why is not None:
                        failed[name] = why
                        continue
                    if end - time.monotonic() <= 0:
                        # Not a blocked read: nothing was started, and the next scrape reads it as usual.
                        failed[name] = "not started: the scrape's deadline was spent before its turn"
                        exceeded = True
                        continue
                    job = _Job(source, [got[need] for need in source.needs])
                    if self._lane is None:
                        self._lane = _Lane()
                    self._lane.submit(job)
                elif not job.done.is_set() and job.blocked_on is None:
                    log.kv(LOG, logging.DEBUG, "waiting for a slow read left by the last scrape", source=name,
                           seconds=round(time.monotonic() - job.started, 1))
                why = self._wait(job, end)
                seconds[name] = time.monotonic() - job.started
                if why is not None:
                    failed[name] = why
                    self._behind[name] = job
                    if job.blocked_on is not None:
                        blocked.append(name)
                    else:
                        exceeded = True
                    continue
                if job.error is not None:
                    failed[name] = _describe(job.error)
                    if isinstance(job.error, TaskBlocked):  # the background task behind it is blocked in a read
                        blocked.append(name)
                    continue
                value, found = job.value
                problems.extend(found)
                got[name] = value
                if job.began < began:  # left behind by an earlier snapshot: its reading is that old
                    read_from = min(read_from or job.began, job.began)
                    read_at[name] = job.began
                if source.once:
                    self._kept[name] = value
            for name, why in failed.items():
                self._log_once(Problem("source not read", (("source", name), ("err", why)), logging.ERROR))
            for problem in problems:
                self._log_once(problem)
            snapshot = Snapshot(taken_at=time.time(), read_from=read_from, failed=failed, seconds=seconds,
                                read_at=read_at, problems=tuple(problems),
                                blocked=frozenset(blocked), deadline_exceeded=exceeded, **got)
            self.last = snapshot
            return snapshot

    def _wait(self, job: _Job, end: float) -> Optional[str]:
        """Wait for `job` until it is done (None), one of its reads has been outstanding past
        `blocked_after` (blocked), or the snapshot's deadline `end` comes (timed out). A job
        not done is left behind: its lane is given up, so the sources after it get a fresh one."""
        while not job.done.is_set():
            now = time.monotonic()
            if job.blocked_on is None:
                path, look_again = sysfs.overrun(job.thread_id, now, self.blocked_after)
                if path is not None:
                    job.blocked_on = path
            if job.blocked_on is not None:
                why = (f"blocked reading {job.blocked_on} (outstanding longer than {self.blocked_after:g} s); "
                       "not started again until that read returns")
            elif now >= end:
                why = (f"timed out: still reading when the scrape's deadline ran out, no read outstanding longer "
                       f"than {self.blocked_after:g} s (slow, not blocked); the next scrape takes its result")
            else:
                job.done.wait(max(min(end, look_again) - now, 0.001))
                continue
            self._give_up_lane(job)
            return why
        return None

    def _give_up_lane(self, job: _Job) -> None:
        if self._lane is not None and job.thread_id in (None, self._lane.thread.ident):
            self._lane.stop()  # it ends once the read returns
            self._lane = None

    def _why_not_started(self, source: Source, failed: Mapping[str, str]) -> Optional[str]:
        for need in source.needs:
            if need in failed:
                return f"needs {need}, which was not read"
        return None

    @staticmethod
    def _log_once(problem: Problem) -> None:
        log.once(LOG, problem.level, problem.key, problem.message, **dict(problem.fields))

    def close(self) -> None:
        """Stop the reading thread (a blocked one is left to return on its own)."""
        if self._lane is not None:
            self._lane.stop()
            self._lane = None


def _describe(exc: BaseException) -> str:
    if isinstance(exc, sysfs.RootUnreadable):
        return f"cannot read its root: {exc}"
    return f"{type(exc).__name__}: {exc}"


def _in_order(sources: Sequence[Source]) -> Tuple[Source, ...]:
    """Each source after the ones it needs, otherwise in the order given."""
    by_name = {s.name: s for s in sources}
    ordered: List[Source] = []
    placed: set = set()

    def place(source: Source, path: Tuple[str, ...]) -> None:
        if source.name in placed:
            return
        if source.name in path:
            raise ValueError(f"sources need each other: {' -> '.join(path + (source.name,))}")
        for need in source.needs:
            if need not in by_name:
                raise ValueError(f"source {source.name!r} needs {need!r}, which is not among the sources")
            place(by_name[need], path + (source.name,))
        placed.add(source.name)
        ordered.append(source)

    for source in sources:
        place(source, ())
    return tuple(ordered)


def needed(table: Mapping[str, Source], names: Iterable[str]) -> List[Source]:
    """The sources of `table` named in `names`, and what they need."""
    out: Dict[str, Source] = {}

    def add(name: str) -> None:
        if name in out:
            return
        source = table[name]
        for need in source.needs:
            add(need)
        out[name] = source

    for name in names:
        add(name)
    return list(out.values())
