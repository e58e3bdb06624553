"""Read-only fio probes: measured read throughput next to what the path should give.

Probes run in background tasks (one per target, on the `probes:` schedule); a scrape
only copies their latest results, so it is as fast during a probe as without one.
With no `probes.targets` configured the collector exports nothing.
"""

from __future__ import annotations

import logging
from typing import Iterable, List

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from storpath import log
from storpath.collectors import Collector, register
from storpath.probes import config as probes_config
from storpath.probes.engine import FAILURE_REASONS, SKIP_REASONS, ProbeEngine

# How often what each target's path allows is read again (links can retrain, drives be swapped).
EXPECTATION_INTERVAL = 600.0


@register("probes", default=True)
class ProbesCollector(Collector):
    """Read-only fio probes of configured targets: throughput, IOPS, latency against expectation."""

    def __init__(self, ctx):
        super().__init__(ctx)
        self.probes = probes_config.from_full_config(ctx.full_config)
        self.engine = None
        if not self.probes.targets:
            return
        self.engine = ProbeEngine(self.probes, self.roots)
        ctx.scheduler.add("probes-expectation", self.engine.refresh_expectations, EXPECTATION_INTERVAL)
        for target in self.probes.targets:
            delay = self.engine.initial_delay(target)
            ctx.scheduler.add(f"probe:{target.name}", lambda t=target: self.engine.run_target(t),
                              self.probes.interval, self.probes.jitter, initial_delay=delay)
            log.kv(self.log, logging.INFO, "probe scheduled", target=target.name, profiles=",".join(target.profiles),
                   first_in_seconds=round(delay, 1))

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()

    def collect(self) -> Iterable[Metric]:
        if self.engine is None:
            return []
        records = self.engine.snapshot()
        labels = ["target", "profile"]

        def gauge(name: str, doc: str, extra: List[str] = ()) -> GaugeMetricFamily:
            return GaugeMetricFamily(f"storpath_probe_{name}", doc, labels=labels + list(extra))

        bw = gauge("read_bytes_per_second", "Read throughput the latest successful probe measured (fio bw_bytes).")
        iops = gauge("read_iops", "Read I/O operations per second the latest successful probe measured.")
        # A summary of the latest probe's completion latencies: quantiles only, as fio gives
        # them; no _sum/_count, which would read as counters across probes.
        latency = Metric("storpath_probe_read_latency_seconds", "Completion latency quantiles (0.5, 0.99, 0.999) "
                         "of the latest successful probe (fio clat_ns percentiles).", "summary")
        expected = gauge("expected_read_bytes_per_second", "Read throughput the target should reach: the configured "
                         "value, else what its PCIe path allows (large-block profiles only).")
        last_run = gauge("last_run_timestamp_seconds", "When the latest probe run started, successful or not.")
        last_ok = gauge("last_success_timestamp_seconds", "When the latest successful probe run started.")
        duration = gauge("duration_seconds", "Wall time of the latest probe run (fio start to exit).")
        runs = CounterMetricFamily("storpath_probe_runs", "Probe runs (fio started), successful or not.", labels=labels)
        failures = CounterMetricFamily("storpath_probe_failures", "Probe runs that gave no result, by reason.",
                                       labels=labels + ["reason"])
        skipped = CounterMetricFamily("storpath_probe_skipped", "Probes not run, by reason (busy device, I/O "
                                      "budget spent, another probe of the device still running).",
                                      labels=labels + ["reason"])
        info = GaugeMetricFamily("storpath_probe_target_info", "A probe target and the block device its reads go to "
                                 "(join with storpath_block_device_info on `device`); always 1.",
                                 labels=["target", "kind", "device"])

        for target in self.probes.targets:
            if target.name in self.engine.target_devices:
                info.add_metric([target.name, target.kind, self.engine.target_devices[target.name] or ""], 1)
            for profile in target.profiles:
                key = [target.name, profile]
                value, _ = self.engine.expected(target, profile)
                if value is not None:
                    expected.add_metric(key, value)
                rec = records.get((target.name, profile))
                if rec is None:
                    rec_runs, rec_failures, rec_skipped = 0, {}, {}
                else:
                    rec_runs, rec_failures, rec_skipped = rec.runs, rec.failures, rec.skipped
                runs.add_metric(key, rec_runs)
                for reason in sorted(set(FAILURE_REASONS) | set(rec_failures)):
                    failures.add_metric(key + [reason], rec_failures.get(reason, 0))
                for reason in sorted(set(SKIP_REASONS) | set(rec_skipped)):
                    skipped.add_metric(key + [reason], rec_skipped.get(reason, 0))
                if rec is None:
                    continue
                for family, stamp in ((last_run, rec.last_run), (last_ok, rec.last_success), (duration, rec.duration)):
                    if stamp is not None:
                        family.add_metric(key, stamp)
                if rec.result is not None:
                    bw.add_metric(key, rec.result.read_bytes_per_second)
                    iops.add_metric(key, rec.result.read_iops)
                    for quantile, seconds in rec.result.latency_seconds:
                        latency.add_sample("storpath_probe_read_latency_seconds",
                                           {"target": target.name, "profile": profile, "quantile": quantile}, seconds)
        return [bw, iops, latency, expected, last_run, last_ok, duration, runs, failures, skipped, info]
