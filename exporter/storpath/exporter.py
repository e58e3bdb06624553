"""Runs the enabled collectors on every scrape, each timed and fenced off from the others."""

from __future__ import annotations

import logging
import platform
import threading
import time
from typing import Dict, Iterable, List

from prometheus_client.core import CollectorRegistry, GaugeMetricFamily, Metric

from storpath import __version__, log
from storpath.background import Scheduler
from storpath.collectors import Collector, Context, load_all
from storpath.facts import ScrapeFacts
from storpath.roots import Roots

LOG = log.get("exporter")


class StorpathExporter:
    """A prometheus_client collector. One scrape at a time: collectors keep caches and
    a second scrape arriving meanwhile waits rather than reading everything twice."""

    def __init__(self, collectors: List[Collector]):
        self.collectors = collectors
        self._lock = threading.Lock()
        self._facts = {id(c.ctx.facts): c.ctx.facts for c in collectors if c.ctx.facts is not None}

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            success = GaugeMetricFamily("storpath_scrape_collector_success",
                                        "Whether a collector succeeded (1) or failed (0) on this scrape.",
                                        labels=["collector"])
            duration = GaugeMetricFamily("storpath_scrape_collector_duration_seconds",
                                         "How long a collector took on this scrape.", labels=["collector"])
            for facts in self._facts.values():
                facts.new_scrape()
            for collector in self.collectors:
                start = time.perf_counter()
                try:
                    families = list(collector.collect())
                    ok = 1.0
                except Exception as exc:  # one broken collector must not break the response
                    families, ok = [], 0.0
                    log.kv(LOG, logging.ERROR, "collector failed", collector=collector.name,
                           err=f"{type(exc).__name__}: {exc}")
                    LOG.debug("collector traceback", exc_info=True)
                duration.add_metric([collector.name], time.perf_counter() - start)
                success.add_metric([collector.name], ok)
                yield from families
            build = GaugeMetricFamily("storpath_build_info", "storpath version and the Python it runs on; always 1.",
                                      labels=["version", "python"])
            build.add_metric([__version__, platform.python_version()], 1)
            yield build
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
