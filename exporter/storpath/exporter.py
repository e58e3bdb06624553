"""Runs the enabled collectors on every scrape, each timed and fenced off from the others."""

from __future__ import annotations

import logging
import threading
import time
from typing import Dict, Iterable, List, Optional

from prometheus_client.core import CollectorRegistry, GaugeMetricFamily, Metric

from storpath import buildinfo, deadline, log
from storpath.background import Scheduler
from storpath.collectors import Collector, Context, load_all
from storpath.facts import ScrapeFacts
from storpath.roots import Roots

LOG = log.get("exporter")


class StorpathExporter:
    """A prometheus_client collector. One scrape at a time: collectors keep caches and
    a second scrape arriving meanwhile waits rather than reading everything twice (the
    server's single flight hands it the first one's result). Each collector runs under
    the scrape deadline (storpath.deadline): one whose reads block is reported failed."""

    DEFAULT_TIMEOUT = 10.0

    def __init__(self, collectors: List[Collector]):
        self.collectors = collectors
        self._lock = threading.Lock()
        self._facts = {id(c.ctx.facts): c.ctx.facts for c in collectors if c.ctx.facts is not None}
        self.guard = deadline.Guard()

    def _new_scrape(self) -> None:
        for facts in self._facts.values():
            facts.new_scrape()

    def collect(self, timeout: Optional[float] = None) -> Iterable[Metric]:
        with self._lock:
            end = time.monotonic() + (timeout or self.DEFAULT_TIMEOUT)
            success = GaugeMetricFamily("storpath_scrape_collector_success",
                                        "Whether a collector succeeded (1) or failed (0) on this scrape.",
                                        labels=["collector"])
            duration = GaugeMetricFamily("storpath_scrape_collector_duration_seconds",
                                         "How long a collector took on this scrape.", labels=["collector"])
            reserves = [self.guard.reserve(c.name) for c in self.collectors]
            # Dropping the last scrape's facts takes their lock, which a blocked read may hold.
            fresh = self.guard.run("facts", self._new_scrape, deadline.share(end - time.monotonic(), reserves))
            if not fresh.ok:
                log.kv(LOG, logging.ERROR, "facts of the last scrape not dropped", err=fresh.error)
            for index, collector in enumerate(self.collectors):
                result = self.guard.run(collector.name, lambda c=collector: list(c.collect()),
                                        deadline.share(end - time.monotonic(), reserves[index + 1:]))
                if not result.ok:  # one broken collector must not break the response
                    log.kv(LOG, logging.ERROR, "collector failed", collector=collector.name, err=result.error)
                duration.add_metric([collector.name], result.seconds)
                success.add_metric([collector.name], 1.0 if result.ok else 0.0)
                yield from result.value or ()
            yield buildinfo.family()
            yield success
            yield duration


def build_collectors(roots: Roots, config: Dict, scheduler: Scheduler) -> List[Collector]:
    """Instantiate the collectors the config enables, in registry order."""
    specs = load_all()
    facts = ScrapeFacts(roots, hold_dirs=True)
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


def make_registry(collectors: List[Collector]) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StorpathExporter(collectors))
    return registry
