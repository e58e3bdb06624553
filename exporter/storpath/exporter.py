"""Runs the enabled collectors on every scrape, each timed and fenced off from the others."""

from __future__ import annotations

import logging
import platform
import threading
import time
from typing import Dict, Iterable, List

from storpath import __version__, log
from storpath.background import Scheduler
from storpath.collectors import Collector, Context, load_all
from storpath.exposition import SeriesFamily
from storpath.facts import SharedReads
from storpath.families import GAUGE, Family, FamilyTexts, Rows
from storpath.roots import Roots
from storpath.sysfs import RootUnreadable

LOG = log.get("exporter")

BUILD_INFO = Family("storpath_build_info", GAUGE, "storpath version and the Python it runs on; always 1.",
                    ("version", "python"))
COLLECTOR_SUCCESS = Family(
    "storpath_scrape_collector_success", GAUGE, "Whether a collector succeeded (1) or failed (0) on this scrape.",
    ("collector",), doc="1 if the collector succeeded on this scrape, 0 if it failed (the reason is logged)")
COLLECTOR_DURATION = Family(
    "storpath_scrape_collector_duration_seconds", GAUGE, "How long a collector took on this scrape.",
    ("collector",), "seconds", doc="time the collector took on this scrape")

# The exporter's own families, after every collector's.
FAMILIES = (BUILD_INFO, COLLECTOR_SUCCESS, COLLECTOR_DURATION)


class StorpathExporter:
    """Runs the collectors. One scrape at a time: collectors keep caches and
    a second scrape arriving meanwhile waits rather than reading everything twice."""

    def __init__(self, collectors: List[Collector]):
        self.collectors = collectors
        self._lock = threading.Lock()
        self._facts = {id(c.ctx.facts): c.ctx.facts for c in collectors if c.ctx.facts is not None}
        self._texts = FamilyTexts(FAMILIES)
        self._build = (__version__, platform.python_version())

    def collect(self) -> Iterable[SeriesFamily]:
        with self._lock:
            rows = Rows()
            rows.add(BUILD_INFO, self._build, 1)
            for facts in self._facts.values():
                facts.new_scrape()
            for collector in self.collectors:
                start = time.perf_counter()
                try:
                    families = list(collector.collect())
                    ok = 1.0
                except RootUnreadable as exc:  # what it would report is unknown, not empty
                    families, ok = [], 0.0
                    log.once(LOG, logging.ERROR, ("unreadable", collector.name, str(exc)),
                             "collector failed: cannot read its root", collector=collector.name, err=str(exc))
                except Exception as exc:  # one broken collector must not break the response
                    families, ok = [], 0.0
                    log.kv(LOG, logging.ERROR, "collector failed", collector=collector.name,
                           err=f"{type(exc).__name__}: {exc}")
                    LOG.debug("collector traceback", exc_info=True)
                name = (collector.name,)
                rows.add(COLLECTOR_DURATION, name, time.perf_counter() - start)
                rows.add(COLLECTOR_SUCCESS, name, ok)
                yield from families
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
