"""A scrape: one snapshot of the machine, then every enabled collector's rows from it."""

from __future__ import annotations

import logging
import time
from typing import Dict, List, Optional

from storpath.base import buildinfo, log
from storpath.base.background import Scheduler
from storpath.collectors import Collector, Context, load_all
from storpath.scrape.exposition import FamilyTexts, SeriesFamily
from storpath.scrape.families import GAUGE, Family, Rows
from storpath.base.roots import Roots
from storpath.scrape.slow import SlowRunner
from storpath.scrape.snapshot import BLOCKED_AFTER, Snapshot, snapshotter_for

LOG = log.get("exporter")

BUILD_INFO = Family("storpath_build_info", GAUGE,
                    "storpath version, the git revision and branch it was built from, and the Python it runs on; "
                    "always 1.", ("version", "revision", "branch", "python"),
                    doc="always 1; `version`, `revision` and `branch` of the build (storpath.base.buildinfo), `python`")
SOURCE_SUCCESS = Family(
    "storpath_scrape_source_success", GAUGE,
    "Whether a part of the machine was read (1) or could not be (0) on this scrape.", ("source",),
    doc="1 if the source (the PCI tree, the block devices, md...) was read on this scrape, 0 if it could not be "
        "(blocked, see `storpath_scrape_source_blocked`; still reading when the scrape's deadline ran out, see "
        "`storpath_scrape_deadline_exceeded`; its directory unreadable: the reason is logged); the collectors "
        "that need it report success 0")
SOURCE_BLOCKED = Family(
    "storpath_scrape_source_blocked", GAUGE,
    "Whether a part of the machine is not read because one of its reads has been outstanding longer than "
    "web.read_blocked_after (1), or not (0).", ("source",),
    doc="1 while one read of the source (a file's open and read, a directory listing) has been outstanding longer "
        "than `web.read_blocked_after` (default 5 s, set by the server only): a device that stopped answering. The "
        "source is not read again until that read returns; the log names the file. For a source a background task "
        "reads (NVMe SMART, the SAS error counters, the controller states...), one read of the task's run in progress: "
        "its last pass is then not served as current. A busy CPU or a big tree never sets it")
DEADLINE_EXCEEDED = Family(
    "storpath_scrape_deadline_exceeded", GAUGE,
    "Whether this scrape's deadline (web.scrape_timeout) ran out before every part of the machine was read (1) or "
    "not (0).", (),
    doc="1 when the server's scrape deadline (`web.scrape_timeout`, never a client's header) ran out while a source "
        "was still reading or before its turn: the machine is slow, not stuck. Such a source keeps reading and the "
        "next scrape takes its result")
COLLECTED = Family(
    "storpath_scrape_collected_timestamp_seconds", GAUGE,
    "When the reading of the machine for this answer began, in Unix seconds: an answer handed out again to a "
    "client whose deadline ended before the scrape in progress says how old it is.", (),
    doc="Unix time the reading of the machine for this answer began (for a read left behind by an earlier "
        "scrape's deadline and taken up by this one, when that read began: an answer is as old as its oldest "
        "data). Every answer carries the time of its own "
        "reading, so the last complete answer given to a client whose deadline ended before the scrape in progress "
        "(docs/serving.md) says its age in the body, which Prometheus stores (it ignores the `Age` header): "
        "`timestamp(storpath_scrape_collected_timestamp_seconds) - storpath_scrape_collected_timestamp_seconds` is "
        "how old the answer was when Prometheus scraped it: about 0 when it was read for that scrape, about a scrape "
        "interval or more when it is the last complete one (StorpathAnswersStale)")
SOURCE_DURATION = Family(
    "storpath_scrape_source_duration_seconds", GAUGE, "How long reading a part of the machine took on this scrape.",
    ("source",), "seconds", doc="time reading the source took on this scrape")
SOURCE_AGE = Family(
    "storpath_scrape_source_age_seconds", GAUGE,
    "How old the reading of a part of the machine served in this answer was when the answer's reading began.",
    ("source",), "seconds",
    doc="only for a source whose reading was left behind by an earlier scrape's deadline (a source slower than "
        "the deadline) and is served in this answer: the seconds since that reading began, its data that old (no "
        "series for a source read for this answer). Above a scrape interval, the source has been slower than two "
        "deadlines; the answer's `storpath_scrape_collected_timestamp_seconds` is the oldest reading's start "
        "(StorpathAnswersStale)")
COLLECTOR_SUCCESS = Family(
    "storpath_scrape_collector_success", GAUGE, "Whether a collector succeeded (1) or failed (0) on this scrape.",
    ("collector",), doc="1 if the collector succeeded on this scrape, 0 if it failed (the reason is logged)")
COLLECTOR_DURATION = Family(
    "storpath_scrape_collector_duration_seconds", GAUGE,
    "How long a collector took to make its series from this scrape's snapshot.",
    ("collector",), "seconds", doc="time the collector took to make its series from the scrape's snapshot (the "
                                   "reading is `storpath_scrape_source_duration_seconds`)")

# The exporter's own families, after every collector's.
FAMILIES = (BUILD_INFO, SOURCE_SUCCESS, SOURCE_BLOCKED, SOURCE_DURATION, SOURCE_AGE, DEADLINE_EXCEEDED, COLLECTED,
            COLLECTOR_SUCCESS, COLLECTOR_DURATION)

# Kept from the scrape deadline for making and sending the answer once the reading is done.
RENDER_MARGIN = 0.25


def send_margin(deadline: float) -> float:
    """What a scraper with `deadline` seconds keeps for the answer to be sent: a tenth, at most
    half a second. The reading ends this much before the server's deadline, and a request waits
    this much less than its own (storpath.http.server.client_wait)."""
    return min(0.5, deadline / 10)


class StorpathExporter:
    """Takes a snapshot and runs the collectors on it. One scrape at a time (the HTTP
    side's single flight hands a scrape to every request that arrives meanwhile)."""

    DEFAULT_TIMEOUT = 10.0

    def __init__(self, collectors: List[Collector], roots: Optional[Roots] = None,
                 blocked_after: float = BLOCKED_AFTER):
        self.collectors = collectors
        roots = roots or (collectors[0].roots if collectors else Roots())
        self.snapshotter = snapshotter_for(roots, [name for c in collectors for name in c.reads + c.enriches],
                                           [s for c in collectors for s in c.sources()], blocked_after)
        self._texts = FamilyTexts(FAMILIES)
        build = buildinfo.info()
        self._build = tuple(build[label] for label in BUILD_INFO.labels)
        self._failing: Dict[str, str] = {}  # collector -> the reason it failed last, logged once

    def collect(self, timeout: Optional[float] = None) -> List[SeriesFamily]:
        timeout = timeout or self.DEFAULT_TIMEOUT
        # Done reading in time for a client with the same deadline to get the answer: it keeps
        # send_margin for sending, this RENDER_MARGIN more for making it.
        reading = timeout - send_margin(timeout) - RENDER_MARGIN
        started = time.time()
        snapshot = self.snapshotter.take(max(reading, timeout / 2))
        rows = Rows()
        rows.add(BUILD_INFO, self._build, 1)
        for source in self.snapshotter.sources:
            if source.name in snapshot.seconds or source.name in snapshot.failed:
                key = (source.name,)
                rows.add(SOURCE_SUCCESS, key, 0.0 if source.name in snapshot.failed else 1.0)
                rows.add(SOURCE_BLOCKED, key, 1.0 if source.name in snapshot.blocked else 0.0)
                rows.add(SOURCE_DURATION, key, snapshot.seconds.get(source.name, 0.0))
                began = snapshot.read_at.get(source.name)
                if began is not None:  # only a reading taken up from an earlier scrape: no series else
                    rows.add(SOURCE_AGE, key, max(0.0, started - began))
        rows.add(DEADLINE_EXCEEDED, (), 1.0 if snapshot.deadline_exceeded else 0.0)
        # When the reading began, not when it ended: a fresh answer is then about as old as
        # Prometheus' own scrape (its age about 0), the last complete answer handed out again
        # about as old as the time since the scrape before (docs/serving.md). A value of its
        # own each scrape: its one line is rendered again each time, the other families' kept
        # text is not (FamilyTexts), and the flight's text, made once, carries it to every
        # client that gets this answer, later ones included.
        # A read left behind by an earlier scrape's deadline and taken up now dates the answer
        # by its own start: never newer than its oldest data.
        rows.add(COLLECTED, (), min(started, snapshot.read_from or started))
        out: List[SeriesFamily] = []
        for collector in self.collectors:
            start = time.perf_counter()
            why = snapshot.why_missing(collector.reads)
            if why is None:
                try:
                    values = collector.values(snapshot)
                    if values is not None:  # None: nothing to export here, not even family headers
                        out.extend(collector.texts.families(values))
                except Exception as exc:  # one broken collector must not break the response
                    why = f"{type(exc).__name__}: {exc}"
            self._report(collector.name, why)
            name = (collector.name,)
            rows.add(COLLECTOR_DURATION, name, time.perf_counter() - start)
            rows.add(COLLECTOR_SUCCESS, name, 1.0 if why is None else 0.0)
        out.extend(self._texts.families(rows))
        return out

    def complete(self) -> bool:
        """Whether every collector succeeded in the last scrape."""
        return not self._failing

    def _report(self, collector: str, why: Optional[str]) -> None:
        """Log a collector's failure when it starts failing or fails for another reason,
        and its recovery."""
        before = self._failing.get(collector)
        if why == before:
            return
        if why is None:
            del self._failing[collector]
            log.kv(LOG, logging.INFO, "collector recovered", collector=collector)
            return
        self._failing[collector] = why
        log.kv(LOG, logging.ERROR, "collector failed", collector=collector, err=why)

    def last_snapshot(self) -> Optional[Snapshot]:
        """The last scrape's snapshot, for the landing page; None before the first scrape."""
        return self.snapshotter.last

    def close(self) -> None:
        self.snapshotter.close()


def build_collectors(roots: Roots, config: Dict, scheduler: Scheduler,
                     slow: Optional[SlowRunner] = None) -> List[Collector]:
    """Instantiate the collectors the config enables, in registry order, sharing one runner
    of the slow sources they enable (`slow`, or one over `scheduler`)."""
    slow = slow or SlowRunner(roots, scheduler, config)
    specs = load_all()
    collectors = []
    for name, spec in specs.items():
        section = config.get("collectors", {}).get(name, {})
        if not section.get("enabled", spec.default_enabled):
            continue
        ctx = Context(roots=roots, config=section, scheduler=scheduler, full_config=config, slow=slow)
        collectors.append(spec.cls(ctx))
    return collectors

