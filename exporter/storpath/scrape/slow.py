"""The slow sources: each declared once, read by one runner, on a schedule or now.

Some parts of the snapshot come from work too slow or too privileged for a scrape: a
command (nvme Identify and SMART, sg_modes, dmsetup, the RAID tools, zpool) or counters the
driver fetches from the hardware (SAS PHY error counters). Each is declared here once, as a
`SlowRead`: which collector enables and configures it, what it needs from the fast sources,
how often it runs and with what bounds, one pass of the work, and what a pass that raised
serves. `SlowRunner` reads them the same way for every command:

- `storpath serve` (a Scheduler given): each runs as a background task on its interval; the
  scrape serves the latest pass (storpath.scrape.snapshot: a `Source` like any other, which never
  blocks on the work). The first scrapes after start wait a little for the first pass
  (`waits`); a scrape whose fast sources show what the last pass did not read (a namespace
  formatted, a SAS drive swapped: `changed`) has the task run early.
- `storpath check`, `tree`, `capture` (no Scheduler): each pass runs now, once, inside the
  snapshot, with the same needs, so a check and a scrape hold the same records.

No collector owns a task, a lock or a refresh: a collector names the snapshot fields it
reads, and enabling it enables the slow sources declared for it (`SlowRunner.enable`).
How a pass is captured and replayed is its reader's (`Roots.captured`).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from functools import partial
from typing import Any, Callable, Dict, Hashable, List, Mapping, Optional, Sequence, Tuple, Type

from storpath.base import log
from storpath.analysis.nvme import Identified, identified
from storpath.analysis.observed import (ChangeCounter, EventCounter, LinkChangeCounts, Observed, Window, sampled,
                                       watched_links)
from storpath.analysis.pcie import analyse
from storpath.base.background import Scheduler, Task, TaskBlocked, TaskFailed
from storpath.base.sysfs import overrun
from storpath.scrape.probes import config as probes_config
from storpath.base.problems import Problem
from storpath.readers.dm_multipath import DmsetupStatus, find_dmsetup, multipath_here, read_dmsetup_status
from storpath.readers.nvme import NvmeController, NvmeNamespace, identify_namespace
from storpath.readers.link_events import TracePipe, instance_dir, unavailable
from storpath.readers.link_samples import shared_reads
from storpath.readers.nvme_subsystem import ControllerStates
from storpath.readers.nvme_health import HealthResult, TemperatureThresholds, read_health
from storpath.base import privhelper
from storpath.readers import pci_targets
from storpath.readers.pci import PciDevice
from storpath.readers.raid import TOOLS as RAID_TOOLS, RaidPass, RaidReader, RaidRun, ToolStatus
from storpath.readers.raid.records import RaidInventory
from storpath.readers.sas import SasPhy, SasReader
from storpath.readers.sas_pcd import DrivePhysResult, read_all
from storpath.readers.zfs import (ZpoolPass, ZpoolReader, ZpoolRun, find_zfs, find_zpool, leaf_block_sizes,
                                  zfs_present)
from storpath.base.roots import Roots
from storpath.scrape.snapshot import BLOCKED_AFTER, ProbeResults, Read, Snapshotter, Source, needed, sysfs_sources

Settings = Mapping[str, Any]


class SlowRead:
    """One slow source. `name` is its Snapshot field, `collector` the collector whose
    settings configure it and whose enabling enables it, `task` the background task's name
    (`storpath_...` logs and the scheduler know it by), `needs` the fast sources one pass
    reads (a one-shot command takes them from its snapshot; a background pass reads them
    itself, and a scrape passes its own to `changed`)."""

    name = ""
    collector = ""
    task = ""
    needs: Tuple[str, ...] = ()
    waits = False  # the first scrapes after start wait `startup_wait` for the first pass
    min_interval = 1.0  # no shorter interval is taken (0 would spin): a shorter one is said once and raised
    interval_key = "interval"
    jitter_cap: Optional[float] = None  # the schedule's jitter: a tenth of the interval, at most this
    deadline_key: Optional[str] = None  # a one-shot command's deadline grows by this setting (a tool's timeout)
    initial: Any = None  # what a scrape serves before the first pass
    changed_message = "what the last pass read has changed, reading again"  # the log line of a pass run early
    read_now = True  # a one-shot command reads it (not a sampler's window, which needs time)
    follows_scrape = False  # a background pass is given the last scrape's needs instead of reading them
    only_when = ""  # where `wanted` limits it, the words README's collectors table says it with

    def __init__(self, roots: Roots, settings: Settings, full_config: Optional[Settings] = None):
        self.roots = roots
        self.settings = settings

    def wanted(self) -> bool:
        """Whether there is anything to read (probes: targets configured)."""
        return True

    def passes(self) -> Sequence[Tuple[str, Callable[[], Any], float, float, float]]:
        """Background tasks of its own instead of the one pass: (task, work, interval,
        jitter, delay before the first run); the probes have one per target."""
        return ()

    def interval(self) -> float:
        return float(self.settings[self.interval_key])

    def read(self, previous: Any, *needs: Any) -> Read:
        """One pass: (the record for the snapshot, the problems met). `previous`: the last
        pass's record (None for the first, and in a one-shot command)."""
        raise NotImplementedError

    def said(self, record: Any) -> Sequence[Problem]:
        """What the background task says of a pass's record besides its problems (a tool that
        failed, drives whose page could not be read): logged once each in serve; a one-shot
        command reports the record itself."""
        return ()

    def changed(self, *needs: Any) -> Optional[Hashable]:
        """What of the needs the pass depends on (a fingerprint); a scrape that sees another
        than the last pass read runs the task early. None: a pass never runs early."""
        return None

    def seen(self, record: Any, *needs: Any) -> Optional[Hashable]:
        """What a pass read, to compare with what a scrape sees (`changed`): by default the
        fingerprint of the needs it was given."""
        return self.changed(*needs)

    def stale(self, seen: Hashable, now: Hashable) -> bool:
        """Whether what a scrape sees (`now`) calls for a pass early, the last pass having seen `seen`."""
        return seen != now

    def failed(self, reason: str, previous: Any, when: Optional[float]) -> Any:
        """What a scrape serves when the latest pass raised (`reason`); by default the
        source fails (its collectors report it)."""
        raise TaskFailed(reason)

    def scraped(self, *needs: Any) -> Any:
        """What a scrape serves that is newer than the last pass, given its needs (a sampler
        taking a first sample of a function new to the tree); None: the last pass."""
        return None

    def close(self) -> None:
        """Stop what a pass runs now (the RAID tools); start nothing again."""


class SasErrors(SlowRead):
    """Every SAS PHY's link error counters, with when they were read: the driver asks the
    HBA for them, which takes tens of milliseconds per PHY on some controllers."""

    name, collector, task = "sas_errors", "sas", "sas-link-errors"
    waits = True
    interval_key = "error_counters_interval"
    initial = ({}, None)
    jitter_cap = 5.0

    def __init__(self, roots: Roots, settings: Settings, full_config: Optional[Settings] = None):
        super().__init__(roots, settings)
        self.reader = SasReader(roots)

    def read(self, previous: Any) -> Read:
        errors, problems = self.reader.read_errors()
        return (errors, time.time()), problems


class SasDrivePhys(SlowRead):
    """Every SAS drive's own PHYs (the Phy Control And Discover mode page, sg_modes as root):
    the far end's capability of a PHY that faces a SAS drive."""

    name, collector, task = "sas_drive_phys", "sas", "sas-drive-phys"
    needs = ("sas_phys",)
    waits = True
    min_interval = 10.0
    interval_key = "drive_phys_interval"
    initial: Dict[str, DrivePhysResult] = {}
    changed_message = "SAS drives changed, reading their PHY capability again"

    follows_scrape = True  # the pass lists the SAS drives itself; the scrape's PHYs only tell when to run early

    def read(self, previous: Any, phys: Optional[List[SasPhy]]) -> Read:
        if phys is not None and not _ssp_drives(phys):
            return {}, ()  # a one-shot command's PHYs face no SAS drive
        return read_all(self.roots, str(self.settings["sg_modes"]), float(self.settings["drive_phys_timeout"])), ()

    def said(self, results: Dict[str, DrivePhysResult]) -> Sequence[Problem]:
        failed: Dict[str, List[str]] = {}
        for end_device, result in sorted(results.items()):
            if result.error is not None:
                failed.setdefault(result.error.replace(end_device, "*"), []).append(end_device)
        return [Problem("SAS drive PHY capability unknown (Phy Control And Discover mode page not read): their "
                        "links stay unverifiable", (("end_devices", _shown(names, "drives")), ("reason", reason)))
                for reason, names in failed.items()]

    def changed(self, phys: List[SasPhy]) -> Hashable:
        return tuple(sorted(_ssp_drives(phys or ()).items()))

    def seen(self, results: Dict[str, DrivePhysResult], *needs: Any) -> Hashable:
        return tuple(sorted((name, result.sas_address) for name, result in results.items()))

    def stale(self, seen: Hashable, now: Hashable) -> bool:
        # A drive the last pass did not read, or read at another address; one removed is no news.
        known = dict(seen)
        return any(known.get(name, "") != address for name, address in now)


class NvmeIdentify(SlowRead):
    """Identify Namespace of every NVMe namespace (an admin command, root): the LBA formats
    it supports and the one in use."""

    name, collector, task = "nvme_identify", "nvme", "nvme-identify"
    needs = ("nvme_namespaces",)
    waits = True
    interval_key = "identify_interval"
    initial: Dict[str, Identified] = {}
    changed_message = "NVMe namespaces changed, reading Identify Namespace again"

    def read(self, previous: Any, namespaces: List[NvmeNamespace]) -> Read:
        cli, timeout = str(self.settings["nvme_cli"]), float(self.settings["identify_timeout"])
        results: Dict[str, Identified] = {}
        for ns in namespaces:
            if ns.controller is not None and ns.nsid is not None:
                results[ns.device] = identified(ns, identify_namespace(self.roots, ns.controller, ns.nsid, cli,
                                                                       timeout))
        return results, ()

    def changed(self, namespaces: List[NvmeNamespace]) -> Hashable:
        return tuple((ns.device, ns.fingerprint) for ns in namespaces or ())


class NvmeControllerStates(SlowRead):
    """Every NVMe controller's `state` (readers.nvme_subsystem.ControllerStates). A local
    drive's subsystem (one PCIe controller) is kept between scrapes while that state reads
    the same; in serve its state is read here, on `collectors.nvme_subsystem.state_interval`,
    so that a scrape reads nothing of it (on a host of 1024 drives, 1024 files a scrape). A
    local controller found resetting or dead is then served by the next scrape after this
    pass (a subsystem with its path down: StoragePathLost), within the interval. Subsystems of
    more than one path or of fabrics controllers have every state read each scrape."""

    name, collector, task = "nvme_controller_states", "nvme_subsystem", "nvme-controller-states"
    min_interval = 10.0
    interval_key = "state_interval"
    jitter_cap = 1.0

    def __init__(self, roots: Roots, settings: Settings, full_config: Optional[Settings] = None):
        super().__init__(roots, settings)
        self.reader = ControllerStates(roots)

    def read(self, previous: Any) -> Read:
        return self.reader.read(), ()

    def failed(self, reason: str, previous: Any, when: Optional[float]) -> None:
        return None  # the scrape reads the local drives' states itself, as before the first pass


class NvmeSmart(SlowRead):
    """Every NVMe controller's SMART / Health log (and once per drive its temperature
    thresholds from Identify Controller)."""

    name, collector, task = "nvme_smart", "nvme_health", "nvme-smart"
    needs = ("nvme_controllers",)
    waits = True
    min_interval = 10.0
    interval_key = "smart_interval"
    initial: Dict[str, HealthResult] = {}

    def __init__(self, roots: Roots, settings: Settings, full_config: Optional[Settings] = None):
        super().__init__(roots, settings)
        # (controller, serial) -> its thresholds: fixed per drive, read once.
        self._thresholds: Dict[Tuple[str, Optional[str]], TemperatureThresholds] = {}

    def read(self, previous: Any, controllers: List[NvmeController]) -> Read:
        cli, timeout = str(self.settings["nvme_cli"]), float(self.settings["smart_timeout"])
        results: Dict[str, HealthResult] = {}
        for ctrl in controllers:
            key = (ctrl.name, ctrl.serial)
            result = read_health(self.roots, ctrl.name, cli, timeout, self._thresholds.get(key))
            if result.thresholds is not None:
                self._thresholds[key] = result.thresholds
            results[ctrl.name] = result
        return results, ()

    def said(self, results: Dict[str, HealthResult]) -> Sequence[Problem]:
        failed: Dict[str, List[str]] = {}
        for name, result in sorted(results.items()):
            if result.error is not None:
                failed.setdefault(result.error.replace(name, "nvme*"), []).append(name)
        return [Problem("NVMe SMART log unknown: exporting the hwmon temperatures only",
                        (("controllers", _shown(names, "controllers")), ("reason", reason)))
                for reason, names in failed.items()]


class Dmsetup(SlowRead):
    """`dmsetup status --target multipath` (device-mapper's ioctls, root): which paths each
    map counts failed. Not run where dm_multipath is not loaded."""

    name, collector, task = "dmsetup", "multipath", "dmsetup"
    jitter_cap = 3.0

    def __init__(self, roots: Roots, settings: Settings, full_config: Optional[Settings] = None):
        super().__init__(roots, settings)
        self.dmsetup = find_dmsetup(str(settings["dmsetup_path"]))

    def read(self, previous: Any) -> Read:
        if not multipath_here(self.roots):
            return None, ()
        status = read_dmsetup_status(self.roots, self.dmsetup, float(self.settings["timeout"]))
        if status.ok and status.source == "none":
            return None, ()  # a replay without a captured dmsetup status: nothing was run or read
        return status, ()

    def said(self, status: Optional[DmsetupStatus]) -> Sequence[Problem]:
        return [Problem("dmsetup status failed", (("reason", status.reason),))] \
            if status is not None and not status.ok else []

    def failed(self, reason: str, previous: Any, when: Optional[float]) -> DmsetupStatus:
        return DmsetupStatus({}, ok=False, reason=reason)


class Raid(SlowRead):
    """The RAID controllers' tools (storcli/perccli, ssacli, arcconf, MegaCli), or their
    captured outputs: controllers, volumes and drives, with when every tool last succeeded."""

    name, collector, task = "raid", "raid", "raid"
    waits = True
    min_interval = 10.0
    jitter_cap = 30.0
    deadline_key = "timeout"
    initial = RaidPass(None, None)

    def __init__(self, roots: Roots, settings: Settings, full_config: Optional[Settings] = None):
        super().__init__(roots, settings)
        paths = {tool: str(settings[f"{tool}_path"]) for tool in RAID_TOOLS}
        self.reader = RaidReader(roots, paths, timeout=float(settings["timeout"]))

    def read(self, previous: Optional[RaidPass]) -> Read:
        run = self.reader.read()
        last = previous.last_success if previous is not None else None
        return RaidPass(None if run.empty else run, run.finished_at if run.all_succeeded else last), run.problems

    def said(self, found: RaidPass) -> Sequence[Problem]:
        # Keyed without the reason: it names pids and parse errors, new on every run.
        return [Problem("RAID tool failed", (("tool", tool), ("reason", status.reason)))
                for tool, status in sorted(found.run.tools.items()) if not status.ok] if found.run else []

    def failed(self, reason: str, previous: Optional[RaidPass], when: Optional[float]) -> RaidPass:
        """Every tool failed (`tool_up 0`), the last pass's records and their age kept, as
        for a tool that failed."""
        run = previous.run if previous is not None else None
        tools = {t: ToolStatus(False, reason) for t in (run.tools if run else {"storcli": None})}
        failed = RaidRun(run.inventory, tools, when or 0.0, run.source, succeeded=run.succeeded) \
            if run is not None else RaidRun(RaidInventory(), tools, when or 0.0, "none")
        return RaidPass(failed, previous.last_success if previous is not None else None)

    def close(self) -> None:
        self.reader.close()


class Zpool(SlowRead):
    """`zpool status` and `zpool list` (and `zfs get creation`), or their captures: the
    pools' vdevs, errors, scans and sizes, with when a live run last succeeded."""

    name, collector, task = "zpool", "zfs", "zpool"
    jitter_cap = 5.0
    deadline_key = "timeout"
    initial = ZpoolPass(None, {}, None)

    def __init__(self, roots: Roots, settings: Settings, full_config: Optional[Settings] = None):
        super().__init__(roots, settings)
        zpool = find_zpool(str(settings["zpool_path"]))
        self.reader = ZpoolReader(roots, zpool=zpool, timeout=float(settings["timeout"]),
                                  zfs=find_zfs(str(settings["zfs_path"]), zpool))

    def read(self, previous: Optional[ZpoolPass]) -> Read:
        last = previous.last_success if previous is not None else None
        if not self.roots.captured and not zfs_present(self.roots):
            return ZpoolPass(None, {}, last), ()  # no ZFS module loaded: zpool is not run
        run = self.reader.read()
        if run.empty:
            return ZpoolPass(None, {}, last), run.problems  # a replayed machine without ZFS
        # A failed run is served with its failure, never the last good details as current: the
        # pool state still comes from kstat on every scrape, and the last success timestamp says
        # how old the last good details were.
        return ZpoolPass(run, leaf_block_sizes(self.roots, run.pools),
                         run.finished_at if run.succeeded_live else last), run.problems

    def said(self, found: ZpoolPass) -> Sequence[Problem]:
        # Keyed without the reason: it names pids and parse errors, new on every run.
        return [Problem("zpool failed", (("reason", found.run.reason),))] \
            if found.run is not None and not found.run.ok else []

    def failed(self, reason: str, previous: Optional[ZpoolPass], when: Optional[float]) -> ZpoolPass:
        """A failed zpool run (`zpool_up 0`), not the pass before it served as current."""
        run = ZpoolRun(pools=[], ok=False, reason=reason, finished_at=when or 0.0, source="none")
        return ZpoolPass(run, {}, previous.last_success if previous is not None else None)


class GpuLinks(SlowRead):
    """GPUs' and accelerators' links, sampled every `sample_interval` over a window: their links
    train down when idle, so a verdict rests on the highest link seen while they work. A pass
    samples the functions the last scrape's PCI tree named (it never lists the tree itself); a
    scrape that names a new one samples it at once (two small reads), so that its first scrape
    already has its link."""

    name, collector, task = "pcie_observed", "gpu", "gpu-link-samples"
    needs = ("pci",)
    min_interval = 0.0  # the config's Duration holds it at 0.1 s at least
    interval_key = "sample_interval"
    jitter_cap = 0.0
    read_now = False
    follows_scrape = True
    initial: Dict[str, Observed] = {}

    def __init__(self, roots: Roots, settings: Settings, full_config: Optional[Settings] = None):
        super().__init__(roots, settings)
        self._lock = threading.Lock()  # the task samples while a scrape names the functions
        self._paths: Dict[str, str] = {}  # what a pass samples: set from each scrape's PCI tree
        self._window = Window(float(settings["window"]))
        self._reads = shared_reads(roots).reader()  # a GPU's link, read once for this and LinkChanges

    def read(self, previous: Any, devices: Optional[List[PciDevice]]) -> Read:
        with self._lock:
            paths = dict(self._paths)
        samples = self._reads.read(paths, self.interval())
        with self._lock:
            self._window.add(time.monotonic(), samples, self._paths)
            return self._window.observed(), ()

    def scraped(self, devices: Optional[List[PciDevice]]) -> Dict[str, Observed]:
        paths = sampled(devices or [])
        with self._lock:
            new = {a: p for a, p in paths.items() if a not in self._paths}
        first = self._reads.read(new, self.interval()) if new else {}
        with self._lock:
            self._paths = paths
            if first:
                self._window.add(time.monotonic(), first, paths)
            return self._window.observed()


class LinkChanges(SlowRead):
    """Changes of the watched links' speed or width, counted between scrapes, for each
    function of the classes in `link_sample_classes` (storage, network, GPUs by default), from
    one of two sources (`link_change_source`):

    - `sampler` (the default): a pass reads current_link_speed and current_link_width of each
      watched function every `link_sample_interval` and counts each change from the sample
      before (analysis.observed.ChangeCounter);
    - `tracepoint`: a pass reads the kernel's pcie_link_event events from the tracefs instance
      `link_trace_instance` (readers.link_events: never blocking, at most `link_trace_max_bytes`
      a pass) and counts each change with the kernel's cause (analysis.observed.EventCounter);
      where the instance cannot be read (no root, an older kernel, the event not enabled) it
      says why once and samples instead. `auto` is the same.

    A link that drops and retrains between two scrapes shows in the count, not in the gauges. A
    pass takes the functions the last scrape's PCI tree named; the scrape reads nothing, it
    serves the latest counts (a function new to the tree starts at 0)."""

    name, collector, task = "pcie_link_changes", "pcie", "link-change-samples"
    needs = ("pci",)
    min_interval = 0.0  # the config's Duration holds it at 0.1 s at least
    interval_key = "link_sample_interval"
    jitter_cap = 0.0
    read_now = False
    follows_scrape = True
    SOURCES = ("sampler", "tracepoint", "auto")

    def __init__(self, roots: Roots, settings: Settings, full_config: Optional[Settings] = None):
        super().__init__(roots, settings)
        self._lock = threading.Lock()  # the task samples while a scrape names the functions
        self._paths: Dict[str, str] = {}
        self._counter = ChangeCounter()
        self._reads = shared_reads(roots).reader()  # a GPU's link, read once for this and GpuLinks
        self._events = EventCounter()
        self._pipe: Optional[TracePipe] = None
        self._said: List[Problem] = []  # why the tracepoint is not read, said by the first pass
        wanted = settings.get("link_change_source", "sampler")
        if wanted not in self.SOURCES:
            self._said.append(Problem("collectors.pcie.link_change_source is not one of "
                                      f"{', '.join(self.SOURCES)}: sampling the links instead",
                                      (("configured", str(wanted)),)))
        elif wanted != "sampler":
            tracefs = roots.tracing()
            instance = str(settings.get("link_trace_instance", "storpath"))
            why = unavailable(tracefs, instance)
            if why is None:
                self._pipe = TracePipe(os.path.join(instance_dir(tracefs, instance), "trace_pipe"),
                                       int(settings.get("link_trace_max_bytes", 1 << 20)))
            else:
                self._said.append(Problem("the pcie_link_event tracepoint cannot be read, sampling the links "
                                          "instead", (("why", why),)))
        self.source = "none" if not settings["link_sample_classes"] else (
            "tracepoint" if self._pipe is not None else "sampler")
        self.initial = LinkChangeCounts({}, self.source, {})

    def read(self, previous: Any, devices: Optional[List[PciDevice]]) -> Read:
        problems, self._said = self._said, []
        if self._pipe is not None:
            with self._lock:
                try:
                    events, bad, full = self._pipe.read()
                except OSError as exc:
                    self._pipe.close()
                    self._pipe = None  # the next passes sample; the count goes on from here
                    self.source = "sampler"
                    problems.append(Problem("reading the pcie_link_event tracepoint failed, sampling the links "
                                            "instead", (("path", exc.filename or "trace_pipe"),
                                                        ("error", exc.strerror or str(exc)))))
                    events, bad, full = [], 0, False
                self._events.add(events)
                if bad:
                    problems.append(Problem("trace_pipe lines that are not pcie_link_event events in the kernel's "
                                            "format were skipped (another event enabled in the instance?)",
                                            (("lines", bad),)))
                if full:
                    problems.append(Problem("more link events are waiting than one pass reads "
                                            "(collectors.pcie.link_trace_max_bytes): the next passes read them",
                                            level=logging.INFO))
                if self._pipe is not None:
                    return self._record(), problems
        with self._lock:
            paths = dict(self._paths)
        samples = self._reads.read(paths, self.interval())
        with self._lock:
            self._counter.add(samples)
            return self._record(), problems

    def _record(self) -> LinkChangeCounts:
        """The counts so far (the caller holds the lock): the tracepoint's added to the sampler's
        where a source changed while serving (the counter only grows)."""
        counts = self._counter.counts()
        for address, count in self._events.counts().items():
            if address in counts:  # a function still watched
                counts[address] += count
        causes = {key: n for key, n in self._events.causes().items() if key[0] in counts}
        return LinkChangeCounts(counts, self.source, causes)

    def scraped(self, devices: Optional[List[PciDevice]]) -> LinkChangeCounts:
        paths = watched_links(devices or [], self.settings["link_sample_classes"])
        with self._lock:
            self._paths = paths if self._pipe is None else {}
            self._counter.watch(paths)
            if self._pipe is not None:  # the sampler's scrape does no more than name the functions
                self._events.watch(devices or [], paths)
            return self._record()

    def close(self) -> None:
        with self._lock:
            if self._pipe is not None:
                self._pipe.close()


class PcieTargets(SlowRead):
    """Target Link Speed of the links trained below their maximum, read by `storpath helper`
    (storpath.readers.pci_targets): a serving process without CAP_SYS_ADMIN reads only config
    space's first 64 bytes, not Link Control 2. A pass asks for the links the last scrape found
    below their maximum with no target of their own; a scrape gives its devices the targets
    the last pass read (it never asks the helper), and one that finds another link below its
    maximum runs the pass early. Only with a helper: without one the PCI reader reads the
    target itself where it may."""

    name, collector, task = "pcie_targets", "pcie", "pcie-target-speeds"
    needs = ("pci",)
    interval_key = "target_speed_interval"
    min_interval = 10.0
    follows_scrape = True
    initial: Dict[str, float] = {}
    changed_message = "another link runs below its maximum, asking the helper for its Target Link Speed"
    read_now = False  # a one-shot command (check, tree, capture) runs as root and reads config space itself
    only_when = "with `--helper.socket`"

    def __init__(self, roots: Roots, settings: Settings, full_config: Optional[Settings] = None):
        super().__init__(roots, settings)
        self._lock = threading.Lock()  # the task's pass sets what a scrape fills in
        self._targets: Dict[str, float] = {}  # the last pass's: address -> Target Link Speed

    def wanted(self) -> bool:
        return privhelper.configured() is not None

    def read(self, previous: Any, devices: Optional[List[PciDevice]]) -> Read:
        wanted = [d.address for d in devices or () if pci_targets.wants_target(d)]
        targets, unknown = pci_targets.read_targets(wanted, float(self.settings["target_speed_timeout"]))
        with self._lock:
            self._targets = targets
        by_reason: Dict[str, List[str]] = {}
        for address, reason in sorted(unknown.items()):
            by_reason.setdefault(reason, []).append(address)
        problems = [Problem("Target Link Speed unknown (the helper could not read config space): a capped link "
                            "is judged as trained below expected", (("addresses", _shown(names, "functions")),
                                                                    ("reason", reason)))
                    for reason, names in by_reason.items()]
        return targets, problems

    def changed(self, devices: Optional[List[PciDevice]]) -> Hashable:
        return tuple(sorted((d.address, d.current_link_speed) for d in devices or () if pci_targets.wants_target(d)))

    def stale(self, seen: Hashable, now: Hashable) -> bool:
        return bool(set(now) - set(seen))  # a link newly below its maximum (or at another speed); one back is no news

    def scraped(self, devices: Optional[List[PciDevice]]) -> None:
        with self._lock:
            targets = self._targets
        pci_targets.fill_in(devices or [], targets)
        return None


class Probes(SlowRead):
    """The read-only fio probes of the configured targets (the `probes:` section): one
    background task per target on the probes' schedule (storpath.scrape.probes.engine runs fio); a
    scrape takes what they found so far, and what each target's links allow on its snapshot
    (the links judged as the pcie collector judges them, a guest's included). Nothing without
    targets."""

    name, collector, task = "probes", "probes", "probe"
    only_when = "per target, once configured"
    needs = ("pci", "pcie_expected", "blocks", "md")
    read_now = False  # `storpath probe` runs them when asked
    follows_scrape = True

    def __init__(self, roots: Roots, settings: Settings, full_config: Optional[Settings] = None):
        super().__init__(roots, settings)
        self.config = probes_config.from_full_config(full_config or {})
        self.engine = None
        if self.config.targets:
            from storpath.scrape.probes.engine import ProbeEngine  # fio's machinery only where targets are configured

            self.engine = ProbeEngine(self.config, roots)

    def wanted(self) -> bool:
        return self.engine is not None

    def passes(self) -> Sequence[Tuple[str, Callable[[], Any], float, float, float]]:
        engine = self.engine
        out = []
        for target in self.config.targets:
            delay = engine.initial_delay(target)
            out.append((f"probe:{target.name}", partial(engine.run_target, target), self.config.interval,
                        self.config.jitter, delay))
            log.kv(log.get(self.collector), logging.INFO, "probe scheduled", target=target.name,
                   profiles=",".join(target.profiles), first_in_seconds=round(delay, 1))
        return out

    def scraped(self, pci, expected, blocks, md) -> ProbeResults:
        engine = self.engine
        engine.refresh_expectations(pci, analyse(pci, expected=expected), blocks, md)
        expected = {(t.name, p): engine.expected(t, p)[0] for t in self.config.targets for p in t.profiles}
        return ProbeResults(engine.snapshot(), dict(engine.target_devices), expected)

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()  # kills a running fio


# Every slow source, in the order a snapshot reads them.
SLOW: Tuple[Type[SlowRead], ...] = (SasErrors, SasDrivePhys, NvmeIdentify, NvmeControllerStates, NvmeSmart, Dmsetup, Raid, Zpool, GpuLinks,
                                    LinkChanges, PcieTargets, Probes)
# The collectors whose slow sources a one-shot command reads now.
COLLECTORS = tuple(dict.fromkeys(cls.collector for cls in SLOW if cls.read_now))


def _ssp_drives(phys: Sequence[SasPhy]) -> Dict[str, Optional[str]]:
    """End device -> SAS address of the SAS (SSP) drives the PHYs face."""
    return {p.attached.name: p.attached.sas_address for p in phys
            if p.attached is not None and p.attached.target_port_protocols == "ssp"}


def _shown(names: List[str], what: str) -> str:
    return ",".join(names[:8]) + (f",... ({len(names)} {what})" if len(names) > 8 else "")


class _Scheduled:
    """A slow source in `storpath serve`: its background task, its latest pass, and the
    Source through which a scrape takes that pass."""

    def __init__(self, slow: SlowRead, scheduler: Scheduler, blocked_after: float = BLOCKED_AFTER):
        self.slow = slow
        self.log = log.get(slow.collector)
        self._lock = threading.Lock()
        self._record: Any = slow.initial
        self._seen: Optional[Hashable] = None  # what the last pass's needs were (SlowRead.changed)
        self._triggered_for: Optional[Hashable] = None
        self._needs: Optional[Snapshotter] = None  # the pass's own reading of its needs
        self._blocked_after = blocked_after  # the server's bound (web.read_blocked_after), as a scrape's
        self._scrape_needs: Optional[Sequence[Any]] = None  # the last scrape's (SlowRead.follows_scrape)
        own = slow.passes()
        if own:
            self.tasks = [scheduler.add(name, work, interval=interval, jitter=jitter, initial_delay=delay)
                          for name, work, interval, jitter, delay in own]
        else:
            interval = slow.interval()
            if interval < slow.min_interval:
                log.kv(self.log, logging.WARNING, f"{slow.interval_key} below the minimum, using the minimum",
                       configured=f"{interval:g}s", minimum=f"{slow.min_interval:g}s")
                interval = slow.min_interval
            jitter = interval / 10 if slow.jitter_cap is None else min(slow.jitter_cap, interval / 10)
            self.tasks = [scheduler.add(slow.task, self.run, interval=interval, jitter=jitter)]
        self.task: Task = self.tasks[0]

    def run(self) -> None:
        """One pass (the task's work): its needs read now, the work done, the problems
        logged once each (the pass runs outside the snapshot step)."""
        needs = self._read_needs()
        with self._lock:
            previous = self._record
        record, problems = self.slow.read(previous, *needs)
        for problem in (*problems, *self.slow.said(record)):
            log.once(self.log, problem.level, problem.key, problem.message, **dict(problem.fields))
        with self._lock:
            self._record = record
            self._seen = self.slow.seen(record, *needs)

    def _read_needs(self) -> Sequence[Any]:
        if not self.slow.needs:
            return []
        if self.slow.follows_scrape:
            with self._lock:
                return self._scrape_needs or [None] * len(self.slow.needs)
        if self._needs is None:
            self._needs = Snapshotter(needed(sysfs_sources(self.slow.roots), self.slow.needs),
                                      blocked_after=self._blocked_after)
        snapshot = self._needs.take(float(self.slow.settings.get("timeout", 30.0)))
        why = snapshot.why_missing(self.slow.needs)
        if why is not None:
            raise TaskFailed(f"cannot read what the pass needs: {why}")
        return [getattr(snapshot, need) for need in self.slow.needs]

    def latest(self, *needs: Any) -> Read:
        """The source's read in a scrape: the latest pass, never the work itself."""
        slow = self.slow
        if slow.waits:
            self.task.wait_first_run(float(slow.settings["startup_wait"]))
        self._maybe_trigger(needs)
        if slow.follows_scrape:
            with self._lock:
                self._scrape_needs = needs
        for task in self.tasks:
            # A run blocked in a read now (in the task's own thread) is no more a pass than one
            # that raised: the source fails as then, and is reported blocked.
            blocked, _ = overrun(task.thread_id, time.monotonic(), self._blocked_after)
            if blocked is None and task.last_error is None:
                continue
            with self._lock:
                record = self._record
            if blocked is None:
                return slow.failed(f"background task {task.name} failed: {task.last_error}", record,
                                   task.last_run_end), ()
            why = f"background task {task.name} blocked reading {blocked} (outstanding longer than " \
                  f"{self._blocked_after:g} s)"
            try:
                return slow.failed(why, record, task.last_run_end), ()
            except TaskFailed:
                raise TaskBlocked(why) from None
        fresh = slow.scraped(*needs)
        with self._lock:
            return (self._record if fresh is None else fresh), ()

    def _maybe_trigger(self, needs: Sequence[Any]) -> None:
        now = self.slow.changed(*needs)
        if now is None:
            return
        with self._lock:
            seen = self._seen
            if seen is None or now == self._triggered_for or not self.slow.stale(seen, now):
                return
            self._triggered_for = now
        log.kv(self.log, logging.INFO, self.slow.changed_message, task=self.task.name)
        self.task.trigger()

    def close(self) -> None:
        self.slow.close()
        if self._needs is not None:
            self._needs.close()


class SlowRunner:
    """Reads the slow sources of the enabled collectors: with a Scheduler (`storpath serve`)
    each on its own schedule, the scrape serving the latest pass; without one (a one-shot
    command) each pass now, once, inside the snapshot."""

    def __init__(self, roots: Roots, scheduler: Optional[Scheduler] = None, full_config: Optional[Settings] = None):
        self.roots = roots
        self.scheduler = scheduler
        self.full_config = full_config or {}  # the whole configuration (the probes' targets)
        self._enabled: Dict[str, List[SlowRead]] = {}  # collector -> its slow sources
        self._scheduled: Dict[str, _Scheduled] = {}  # source -> its task (serve)

    def enable(self, collector: str, settings: Settings) -> None:
        """Read the slow sources declared for `collector`, configured by its `settings`."""
        if collector in self._enabled:
            return
        made = (cls(self.roots, settings, self.full_config) for cls in SLOW if cls.collector == collector)
        reads = [slow for slow in made if slow.wanted()]
        self._enabled[collector] = reads
        if self.scheduler is not None:
            for slow in reads:
                blocked_after = self.full_config.get("web", {}).get("read_blocked_after", BLOCKED_AFTER)
                self._scheduled[slow.name] = _Scheduled(slow, self.scheduler, float(blocked_after))

    def task(self, name: str) -> Task:
        """The background task of the slow source `name` (serve)."""
        return self._scheduled[name].task

    def sources(self, collector: Optional[str] = None) -> Tuple[Source, ...]:
        """The snapshot's sources for the enabled slow sources (of `collector`, or all)."""
        out = []
        for name, reads in self._enabled.items():
            if collector is not None and name != collector:
                continue
            for slow in reads:
                if self.scheduler is not None:
                    out.append(Source(slow.name, self._scheduled[slow.name].latest, needs=slow.needs))
                elif slow.read_now:
                    out.append(Source(slow.name, _now(slow), needs=slow.needs))
        return tuple(out)

    def deadline(self) -> float:
        """What a one-shot command adds to its deadline: the enabled tools' own timeouts (a
        check waits for a slow tool as the exporter's task would)."""
        return sum(float(slow.settings[slow.deadline_key]) for reads in self._enabled.values() for slow in reads
                   if slow.deadline_key is not None)

    def close(self) -> None:
        """Stop what the slow sources run now (fio, the RAID tools) and start nothing again."""
        for reads in self._enabled.values():
            for slow in reads:
                scheduled = self._scheduled.get(slow.name)
                if scheduled is not None:
                    scheduled.close()
                else:
                    slow.close()


def _now(slow: SlowRead):
    """A one-shot command's read of `slow`: one pass, now."""
    return lambda *needs: slow.read(None, *needs)
