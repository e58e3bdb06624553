"""One snapshot of the machine per scrape: every reader run once, each under a deadline.

A scrape starts here. `Snapshotter.take()` runs the readers the enabled collectors need
(the *sources*: the PCI tree, the block devices, NVMe, SAS, md...), one after another on a
long-lived reading thread, times each, and returns a `Snapshot`: an immutable record of
what was read, what could not be read and why, and the problems met on the way. Every
collector, `storpath check`, `storpath tree` and the landing page work from a snapshot;
none of them reads a file.

A sysfs read normally takes microseconds, but an attribute of a device that stopped
answering blocks `open()` or `read()` in the kernel, and a thread blocked there cannot be
interrupted from Python. So each source gets a share of the scrape deadline; one that
overruns is reported failed ("blocked reading <file>"), its thread is left to return on
its own and a fresh thread reads the rest. Until the blocked read returns, the source is
not started again (it fails at once with the same reason), so one stuck file costs one
thread, not one per scrape; reading threads are daemons, so shutdown never waits for one.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from storpath import log, sysfs
from storpath.analysis.pcie import InstanceExpectations
from storpath.analysis.topology import with_port_types
from storpath.problems import Problem
from storpath.readers.alignment import AlignmentReader
from storpath.readers.ata import AtaReader
from storpath.readers.block import BlockReader
from storpath.readers.host import read_host
from storpath.readers.inventory import InventoryReader
from storpath.readers.md import read_md_arrays_with_problems
from storpath.readers.numa import read_numa_with_problems
from storpath.readers.nvme import NvmeReader
from storpath.readers.nvme_health import HwmonReader
from storpath.readers.pci import PciReader
from storpath.readers.sas import SasReader
from storpath.readers.zfs import read_kstat_states_with_problems
from storpath.roots import Roots

LOG = log.get("snapshot")

MIN_SHARE = 0.1  # seconds kept for a source still to run (sysfs reads take milliseconds)


@dataclass(frozen=True)
class Snapshot:
    """What one scrape read. A source that was not needed, or could not be read, is None
    (`failed` says which and why); an empty list is hardware that is not there."""

    taken_at: float = 0.0  # Unix seconds, when the reading ended
    host: Any = None  # readers.host.HostIdentity
    pci: Any = None  # [readers.pci.PciDevice]
    pcie_expected: Any = None  # address -> analysis.pcie.LinkExpectation
    block_listing: Any = None  # [(name, inode)] of /sys/class/block
    blocks: Any = None  # [readers.block.BlockDevice]
    nvme_controllers: Any = None  # [readers.nvme.NvmeController]
    nvme_namespaces: Any = None  # [readers.nvme.NvmeNamespace]
    hwmon: Any = None  # ([controller], [readers.nvme_health.HwmonSensor])
    sas_phys: Any = None  # [readers.sas.SasPhy], without error counters
    ata_links: Any = None  # [readers.ata.AtaLink]
    alignment: Any = None  # readers.alignment.BlockAlignment
    inventory: Any = None  # [readers.inventory.InventoryDevice]
    md: Any = None  # [readers.md.MdArray]
    numa: Any = None  # readers.numa.NumaTopology, with the PCI functions' nodes
    zfs_kstat: Any = None  # pool -> state, from /proc/spl/kstat/zfs
    # The latest results of background tasks (slow or privileged work on its own schedule).
    nvme_identify: Any = None  # collectors.nvme.IdentifyPass
    nvme_smart: Any = None  # collectors.nvme_health.HealthPass
    sas_errors: Any = None  # PHY name -> readers.sas.SasPhyErrors
    sas_drive_phys: Any = None  # end device -> readers.sas_pcd.DrivePhysResult
    zpool: Any = None  # collectors.zfs.ZpoolPass
    probes: Any = None  # probes.engine.ProbeEngine's state
    # How the reading went.
    failed: Mapping[str, str] = field(default_factory=dict)  # source -> why it could not be read
    seconds: Mapping[str, float] = field(default_factory=dict)  # source -> how long it took
    problems: Tuple["Problem", ...] = ()

    def why_missing(self, names: Iterable[str]) -> Optional[str]:
        """Why one of the sources `names` is missing from this snapshot; None when all were read."""
        for name in names:
            if name in self.failed:
                return f"{name}: {self.failed[name]}"
        return None


SOURCE_NAMES = tuple(f.name for f in fields(Snapshot) if f.name not in ("taken_at", "failed", "seconds", "problems"))


@dataclass(frozen=True)
class Source:
    """One thing a snapshot reads. `read` gets what the sources named in `needs` read
    (by name) and returns the record for the snapshot field of the same name, or a
    (record, problems) pair when `with_problems`. It raises sysfs.RootUnreadable when the
    directory it reads cannot be read (the source failed, not empty). `once`: read at the
    first success and kept (what cannot change while the machine runs)."""

    name: str
    read: Callable[[Mapping[str, Any]], Any]
    needs: Tuple[str, ...] = ()
    once: bool = False
    with_problems: bool = False

    def __post_init__(self) -> None:
        if self.name not in SOURCE_NAMES:
            raise ValueError(f"source {self.name!r} is not a field of Snapshot")


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
    table = (
        Source("host", lambda _: read_host(roots), once=True),
        Source("pci", lambda _: with_port_types(pci.read_with_problems()), with_problems=True),
        Source("pcie_expected", lambda got: pcie_expected(got["pci"], got["host"].virtual), needs=("pci", "host")),
        Source("block_listing", lambda _: block.list()),
        Source("blocks", lambda got: block.read(got["block_listing"]), needs=("block_listing",)),
        Source("nvme_controllers", lambda _: nvme_controllers.controllers()),
        Source("nvme_namespaces", lambda got: nvme_namespaces.namespaces(got["block_listing"]),
               needs=("block_listing",)),
        Source("hwmon", lambda _: hwmon.read()),
        Source("sas_phys", lambda _: sas.read_with_problems(errors=False), with_problems=True),
        Source("ata_links", lambda _: ata.read_with_problems(), with_problems=True),
        Source("alignment", lambda got: alignment.read(got["block_listing"]), needs=("block_listing",)),
        Source("inventory", lambda got: inventory.read(got["pci"], got["blocks"], got["block_listing"]),
               needs=("pci", "blocks", "block_listing")),
        Source("md", lambda _: read_md_arrays_with_problems(roots), with_problems=True),
        Source("numa", lambda got: read_numa_with_problems(roots, got["pci"]), needs=("pci",), with_problems=True),
        Source("zfs_kstat", lambda _: read_kstat_states_with_problems(roots), with_problems=True),
    )
    return {source.name: source for source in table}


class _Lane:
    """A long-lived thread that runs reads one after another. When a read overruns its
    share, the lane is given up (`stop()`): it finishes that read on its own and then ends."""

    def __init__(self) -> None:
        self._jobs: "queue.SimpleQueue[Optional[_Job]]" = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._loop, name="snapshot-reader", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            job.run()

    def submit(self, job: "_Job") -> None:
        self._jobs.put(job)

    def stop(self) -> None:
        self._jobs.put(None)


class _Job:
    def __init__(self, source: Source, got: Mapping[str, Any]):
        self.source = source
        self.got = got
        self.done = threading.Event()
        self.started = time.monotonic()
        self.value: Any = None
        self.error: Optional[BaseException] = None
        self.reason = ""  # why the snapshot gave up on it
        self.thread_id: Optional[int] = None

    def run(self) -> None:
        self.thread_id = threading.get_ident()
        sysfs.reading_clear()
        try:
            self.value = self.source.read(self.got)
        except BaseException as exc:  # handed to the snapshot, which reports it
            self.error = exc
        finally:
            self.done.set()

    def where(self) -> str:
        """The file the blocked read is on, as far as the reader said."""
        path = sysfs.reading(self.thread_id) if self.thread_id is not None else None
        return path or "its first file"


class Snapshotter:
    """Takes snapshots of the machine from a fixed set of sources. One snapshot at a time
    (the HTTP side's single flight makes concurrent scrapes share one)."""

    def __init__(self, sources: Sequence[Source]):
        self.sources = _in_order(sources)
        self._lane: Optional[_Lane] = None
        self._blocked: Dict[str, _Job] = {}  # source -> its run that is still blocked
        self._kept: Dict[str, Any] = {}  # `once` sources, read
        self._last_seconds: Dict[str, float] = {}
        self._lock = threading.Lock()
        self.last: Optional[Snapshot] = None

    def take(self, timeout: float = 10.0) -> Snapshot:
        with self._lock:
            return self._take(timeout)

    def _take(self, timeout: float) -> Snapshot:
        end = time.monotonic() + timeout
        got: Dict[str, Any] = {}
        failed: Dict[str, str] = {}
        seconds: Dict[str, float] = {}
        problems: List[Problem] = []
        for index, source in enumerate(self.sources):
            name = source.name
            if name in self._kept:
                got[name] = self._kept[name]
                seconds[name] = 0.0  # read once, earlier
                continue
            why = self._why_not_started(source, failed)
            if why is not None:
                failed[name] = why
                continue
            remaining = end - time.monotonic()
            if remaining <= 0:
                # Not a blocked read: nothing was started, and the next scrape reads it as usual.
                failed[name] = "not started: the scrape's deadline was spent before its turn"
                continue
            later = [max(MIN_SHARE, 2 * self._last_seconds.get(s.name, 0.0)) for s in self.sources[index + 1:]]
            share = max(remaining - sum(later), remaining / (len(later) + 1), 0.0)
            job = _Job(source, {need: got[need] for need in source.needs})
            if self._lane is None:
                self._lane = _Lane()
            self._lane.submit(job)
            if not job.done.wait(share):
                self._lane.stop()  # it ends once the read returns
                self._lane = None
                # The same reason on every scrape until the read returns: logged once.
                job.reason = f"blocked reading {job.where()}; not started again until that read returns"
                self._blocked[name] = job
                failed[name] = job.reason
                seconds[name] = time.monotonic() - job.started
                continue
            seconds[name] = self._last_seconds[name] = time.monotonic() - job.started
            if job.error is not None:
                failed[name] = _describe(job.error)
                continue
            value = job.value
            if source.with_problems:
                value, found = value
                problems.extend(found)
            got[name] = value
            if source.once:
                self._kept[name] = value
        for name, why in failed.items():
            self._log_once(Problem("source not read", (("source", name), ("err", why)), logging.ERROR))
        for problem in problems:
            self._log_once(problem)
        snapshot = Snapshot(taken_at=time.time(), failed=failed, seconds=seconds, problems=tuple(problems),
                            **got)
        self.last = snapshot
        return snapshot

    def _why_not_started(self, source: Source, failed: Mapping[str, str]) -> Optional[str]:
        blocked = self._blocked.get(source.name)
        if blocked is not None:
            if not blocked.done.is_set():
                return blocked.reason
            del self._blocked[source.name]
            log.kv(LOG, logging.INFO, "blocked read returned", source=source.name,
                   seconds=round(time.monotonic() - blocked.started, 1))
        for need in source.needs:
            if need in failed:
                return f"needs {need}, which was not read"
        return None

    @staticmethod
    def _log_once(problem: Problem) -> None:
        log.once(LOG, problem.level, problem.key, problem.message, **dict(problem.fields))

    def blocked(self) -> Dict[str, float]:
        """Sources whose read is still blocked: name -> seconds since it started."""
        now = time.monotonic()
        return {name: now - job.started for name, job in self._blocked.items() if not job.done.is_set()}

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
