"""Runs the enabled collectors on every scrape, each timed and fenced off from the others."""

from __future__ import annotations

import logging
import threading
import time
from typing import Dict, Iterable, List, Optional

from storpath import buildinfo, deadline, log
from storpath.background import Scheduler
from storpath.collectors import Collector, Context, load_all
from storpath.exposition import SeriesFamily
from storpath.facts import SharedReads
from storpath.families import GAUGE, Family, FamilyTexts, Rows
from storpath.roots import Roots
from storpath.sysfs import RootUnreadable

LOG = log.get("exporter")

BUILD_INFO = Family("storpath_build_info", GAUGE,
                    "storpath version, the git revision and branch it was built from, and the Python it runs on; "
                    "always 1.", ("version", "revision", "branch", "python"),
                    doc="always 1; `version`, `revision` and `branch` of the build (storpath.buildinfo), `python`")
COLLECTOR_SUCCESS = Family(
    "storpath_scrape_collector_success", GAUGE, "Whether a collector succeeded (1) or failed (0) on this scrape.",
    ("collector",), doc="1 if the collector succeeded on this scrape, 0 if it failed (the reason is logged)")
COLLECTOR_DURATION = Family(
    "storpath_scrape_collector_duration_seconds", GAUGE, "How long a collector took on this scrape.",
    ("collector",), "seconds", doc="time the collector took on this scrape")

# The exporter's own families, after every collector's.
FAMILIES = (BUILD_INFO, COLLECTOR_SUCCESS, COLLECTOR_DURATION)


class StorpathExporter:
    """Runs the collectors. One scrape at a time: collectors keep caches and a second scrape
    arriving meanwhile waits rather than reading everything twice (the server's single flight
    hands it the first one's result). Each collector runs under the scrape deadline
    (storpath.deadline): one whose reads block is reported failed."""

    DEFAULT_TIMEOUT = 10.0

    def __init__(self, collectors: List[Collector]):
        self.collectors = collectors
        self._lock = threading.Lock()
        self._facts = {id(c.ctx.facts): c.ctx.facts for c in collectors if c.ctx.facts is not None}
        self.guard = deadline.Guard()
        self._texts = FamilyTexts(FAMILIES)
        build = buildinfo.info()
        self._build = tuple(build[label] for label in BUILD_INFO.labels)

    def _new_scrape(self) -> None:
        for facts in self._facts.values():
            facts.new_scrape()

    def collect(self, timeout: Optional[float] = None) -> Iterable[SeriesFamily]:
        with self._lock:
            end = time.monotonic() + (timeout or self.DEFAULT_TIMEOUT)
            rows = Rows()
            rows.add(BUILD_INFO, self._build, 1)
            reserves = [self.guard.reserve(c.name) for c in self.collectors]
            # Dropping the last scrape's facts takes their lock, which a blocked read may hold.
            fresh = self.guard.run("facts", self._new_scrape, deadline.share(end - time.monotonic(), reserves))
            if not fresh.ok:
                log.kv(LOG, logging.ERROR, "facts of the last scrape not dropped", err=fresh.error)
            for index, collector in enumerate(self.collectors):
                result = self.guard.run(collector.name, lambda c=collector: list(c.collect()),
                                        deadline.share(end - time.monotonic(), reserves[index + 1:]))
                if isinstance(result.exception, RootUnreadable):  # what it would report is unknown, not empty
                    log.once(LOG, logging.ERROR, ("unreadable", collector.name, str(result.exception)),
                             "collector failed: cannot read its root", collector=collector.name,
                             err=str(result.exception))
                elif not result.ok:  # one broken collector must not break the response
                    log.kv(LOG, logging.ERROR, "collector failed", collector=collector.name, err=result.error)
                name = (collector.name,)
                rows.add(COLLECTOR_DURATION, name, result.seconds)
                rows.add(COLLECTOR_SUCCESS, name, 1.0 if result.ok else 0.0)
                yield from result.value or ()
            yield from self._texts.families(rows)
            for facts in self._facts.values():
                facts.end_scrape(time.time())

    def last_scrape(self):
        """What the last finished scrape read (storpath.facts.ScrapeFacts), for the landing
        page; None before the first scrape."""
        for facts in self._facts.values():
            return facts.last_scrape()
        return None


def build_collectors(roots: Roots, config: Dict, scheduler: Scheduler) -> List[Collector]:
    """Instantiate the collectors the config enables, in registry order."""
    specs = load_all()
    facts = SharedReads(roots, hold_dirs=True)
    collectors = []
    for name, spec in specs.items():
        section = config.get("collectors", {}).get(name, {})
        if not section.get("enabled", spec.default_enabled):
            continue
        settings = dict(spec.cls.config_defaults)
        settings.update({k: v for k, v in section.items() if k != "enabled"})
        ctx = Context(roots=roots, config=settings, scheduler=scheduler, full_config=config, facts=facts)
        collectors.append(spec.cls(ctx))
    return collectors


class Registry:
    """What the server asks of a registry: `collect()`. prometheus_client's registry
    would do, but importing prometheus_client costs 13 MB (see storpath.exposition);
    its writer and registry still accept this one (tests hand it to them)."""

    def __init__(self, exporter: StorpathExporter):
        self.exporter = exporter

    def collect(self) -> Iterable[SeriesFamily]:
        return self.exporter.collect()


def make_registry(collectors: List[Collector]) -> Registry:
    return Registry(StorpathExporter(collectors))
