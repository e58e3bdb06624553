"""Read-only fio probes: measured read throughput next to what the path should give.

Probes run in background tasks (one per target, on the `probes:` schedule: the `probes` slow
source, storpath.scrape.slow.Probes); a scrape only copies their latest results, so it is as fast during a probe as without one.
With no `probes.targets` configured the collector exports nothing.
"""

from __future__ import annotations

from typing import Optional

from storpath.collectors import Collector, register
from storpath.scrape.families import COUNTER, GAUGE, SUMMARY, Family, Rows
from storpath.scrape.probes import config as probes_config
from storpath.scrape.probes.config import FAILURE_REASONS, SKIP_REASONS



# A summary of the latest probe's completion latencies: quantiles only, as fio gives them;
# no _sum/_count, which would read as counters across probes.
READ_BYTES = Family(
    "storpath_probe_read_bytes_per_second", GAUGE,
    "Read throughput the latest successful probe measured (fio bw_bytes).", ("target", "profile"), "bytes_per_second",
    doc="read throughput of the latest successful probe (fio `bw_bytes`)")
READ_IOPS = Family(
    "storpath_probe_read_operations_per_second", GAUGE,
    "Read I/O operations per second the latest successful probe measured (fio iops).", ("target", "profile"),
    "operations_per_second",
    doc="read I/O operations per second (IOPS) of the latest successful probe (fio `iops`)")
READ_LATENCY = Family(
    "storpath_probe_read_latency_seconds", SUMMARY,
    "Completion latency quantiles (0.5, 0.99, 0.999) of the latest successful probe (fio clat_ns percentiles).", ("target", "profile", "quantile"), "seconds",
    doc="completion latency (fio `clat_ns` percentiles) of the latest successful probe, `quantile` `0.5`, `0.99`,"
        " `0.999`; a quantile fio did not report is left out. A summary because promtool allows `quantile` on "
        "summaries only; it has no `_sum`/`_count`, which would read as counters across probes")
EXPECTED_READ_BYTES = Family(
    "storpath_probe_expected_read_bytes_per_second", GAUGE,
    "Read throughput the target should reach: the configured value, else what its PCIe path allows (large-block "
    "profiles only).", ("target", "profile"), "bytes_per_second",
    doc="what the target should read: the configured `expected_read_bytes_per_second`, else (profiles with blocks"
        " of 32 KiB and more) what its PCIe path allows: the lowest expected link bandwidth on a disk's path, for"
        " an md raid0/raid10 the sum over its members capped by shared upstream links (a switch uplink), "
        "raid4/5/6 less parity, raid1/linear the best member. Absent when neither is known (a file on ZFS, a "
        "virtual disk, 4 KiB profiles without a configured value)")
LAST_RUN = Family(
    "storpath_probe_last_run_timestamp_seconds", GAUGE,
    "When the latest probe run started, successful or not.", ("target", "profile"), "seconds",
    doc="when the latest probe run started, successful or not (skips are not runs)")
LAST_SUCCESS = Family(
    "storpath_probe_last_success_timestamp_seconds", GAUGE,
    "When the latest successful probe run started.", ("target", "profile"), "seconds",
    doc="when the latest successful probe started; the result metrics are from that run")
DURATION = Family(
    "storpath_probe_duration_seconds", GAUGE,
    "Wall time of the latest probe run (fio start to exit).", ("target", "profile"), "seconds",
    doc="wall time of the latest run (fio start to exit; about runtime + 0.5 s)")
RUNS = Family(
    "storpath_probe_runs", COUNTER,
    "Probe runs (fio started), successful or not.", ("target", "profile"),
    doc="fio runs, successful or failed")
FAILURES = Family(
    "storpath_probe_failures", COUNTER,
    "Probe runs that gave no result, by reason.", ("target", "profile", "reason"),
    doc="runs without a result: `fio_missing`, `timeout` (hung, process group killed), `crashed` (killed by a "
        "signal), `fio_error` (non-zero exit or job error), `bad_output` (JSON missing or unparsable), "
        "`target_unusable`; every reason is exported from 0")
SKIPPED = Family(
    "storpath_probe_skipped", COUNTER,
    "Probes not run, by reason (busy device, I/O budget spent, another probe of the device still running).", ("target", "profile", "reason"),
    doc="probes not run: `busy` (/proc/diskstats: device busier than `busy_threshold`), `budget` "
        "(`io_budget_per_hour` spent), `concurrent_probe`; every reason is exported from 0")
TARGET_INFO = Family(
    "storpath_probe_target_info", GAUGE,
    "A probe target and the block device its reads go to (join with storpath_block_device_info on `device`); "
    "always 1.", ("target", "kind", "device"),
    doc="a probe target, `kind` `device` or `file`, and the disk or array its reads go to (`device`, empty when "
        "there is none, e.g. a file on ZFS): join with `storpath_block_device_info` and node_exporter's "
        "`node_disk_*`; always 1")


FAMILIES = (READ_BYTES, READ_IOPS, READ_LATENCY, EXPECTED_READ_BYTES, LAST_RUN, LAST_SUCCESS, DURATION, RUNS, FAILURES,
            SKIPPED, TARGET_INFO)


@register("probes", default=True)
class ProbesCollector(Collector):
    """Read-only fio probes of configured targets: throughput, IOPS, latency against expectation."""

    families = FAMILIES
    def __init__(self, ctx):
        super().__init__(ctx)
        self.probes = probes_config.from_full_config(ctx.full_config)
        if self.probes.targets:
            self.reads = ("probes",)  # the `probes` slow source (storpath.scrape.slow.Probes)

    def values(self, snapshot) -> Optional[Rows]:
        if not self.probes.targets:
            return None  # no targets configured: nothing at all, not even empty families
        rows = Rows()
        found = snapshot.probes
        records = found.records
        for target in self.probes.targets:
            if target.name in found.target_devices:
                rows.add(TARGET_INFO, (target.name, target.kind, found.target_devices[target.name] or ""), 1)
            for profile in target.profiles:
                key = (target.name, profile)
                rows.add(EXPECTED_READ_BYTES, key, found.expected[key])
                rec = records.get((target.name, profile))
                if rec is None:
                    rec_runs, rec_failures, rec_skipped = 0, {}, {}
                else:
                    rec_runs, rec_failures, rec_skipped = rec.runs, rec.failures, rec.skipped
                rows.add(RUNS, key, rec_runs)
                for reason in sorted(set(FAILURE_REASONS) | set(rec_failures)):
                    rows.add(FAILURES, key + (reason,), rec_failures.get(reason, 0))
                for reason in sorted(set(SKIP_REASONS) | set(rec_skipped)):
                    rows.add(SKIPPED, key + (reason,), rec_skipped.get(reason, 0))
                if rec is None:
                    continue
                rows.add(LAST_RUN, key, rec.last_run)
                rows.add(LAST_SUCCESS, key, rec.last_success)
                rows.add(DURATION, key, rec.duration)
                if rec.result is not None:
                    rows.add(READ_BYTES, key, rec.result.read_bytes_per_second)
                    rows.add(READ_IOPS, key, rec.result.read_iops)
                    for quantile, seconds in rec.result.latency_seconds:
                        rows.add(READ_LATENCY, key + (quantile,), seconds)
        return rows
