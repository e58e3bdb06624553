"""ZFS pools: state, vdev errors, capacity, ashift against the devices, scrub and resilver.

Pool state comes from /proc/spl/kstat/zfs on every scrape (no root needed). Everything
else comes from `zpool`, which runs in a background task on its own interval with a
timeout: a scrape never waits for it, and a zpool that is missing, hangs or prints
something unexpected shows as storpath_zfs_zpool_up 0 with the reason in the log.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from typing import Dict, Iterable, List, Optional

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from storpath import log
from storpath.analysis.zfs import data_leaves, expected_ashift
from storpath.collectors import Collector, register
from storpath.config import Duration
from storpath.readers.zfs import (ERROR_TYPES, POOL_STATES, SCAN_STATES, VDEV_STATES, ZpoolReader, ZpoolSnapshot,
                                  physical_block_bytes, read_kstat_states, zfs_present)


@register("zfs", default=True)
class ZfsCollector(Collector):
    """ZFS pools and vdevs: state, errors, capacity, ashift, scrub/resilver (zpool runs in the background)."""

    config_defaults = {
        "interval": Duration(60),  # how often zpool status and zpool list run
        "timeout": Duration(10),  # a zpool taking longer is killed and reported
        "zpool_path": "zpool",  # looked up in PATH, then /usr/sbin and /sbin
    }

    def __init__(self, ctx):
        super().__init__(ctx)
        self.reader = ZpoolReader(self.roots, zpool=self._zpool_path(), timeout=float(self.config["timeout"]))
        self._lock = threading.Lock()
        self._snapshot: Optional[ZpoolSnapshot] = None
        self._block_sizes: Dict[str, Dict[str, Optional[int]]] = {}  # pool -> leaf -> physical block bytes
        self._last_success: Optional[float] = None
        interval = float(self.config["interval"])
        self.task = ctx.scheduler.add("zpool", self.refresh, interval=interval, jitter=min(5.0, interval / 10))

    def _zpool_path(self) -> str:
        configured = self.config["zpool_path"]
        if os.sep in configured:
            return configured
        found = shutil.which(configured) or shutil.which(configured, path="/usr/sbin:/sbin")
        return found or configured

    def refresh(self) -> None:
        """The background task: one zpool run (or one read of captured output)."""
        if not self.roots.captured and not zfs_present(self.roots):
            log.once(self.log, logging.DEBUG, ("zfs-absent",), "no ZFS module loaded: zpool not run")
            with self._lock:
                self._snapshot = None
            return
        snapshot = self.reader.read()
        if snapshot.source == "none" and snapshot.ok:
            with self._lock:
                self._snapshot = None  # a replayed machine without ZFS
            return
        sizes: Dict[str, Dict[str, Optional[int]]] = {}
        for pool in snapshot.pools:
            sizes[pool.name] = {v.name: physical_block_bytes(self.roots, v.name) for v in pool.vdevs if v.leaf}
        if not snapshot.ok:
            # The details of a failed run are left out rather than served stale: the pool
            # state still comes from kstat on every scrape, and the last success
            # timestamp says how old the last good details were.
            log.once(self.log, logging.WARNING, ("zpool", snapshot.reason), "zpool failed", reason=snapshot.reason)
        with self._lock:
            self._snapshot = snapshot
            self._block_sizes = sizes
            if snapshot.ok and not self.roots.captured:
                self._last_success = snapshot.finished_at

    def collect(self) -> Iterable[Metric]:
        kstat = read_kstat_states(self.roots)
        with self._lock:
            snapshot, block_sizes, last_success = self._snapshot, self._block_sizes, self._last_success

        def gauge(name, doc, labels=("zpool",)):
            return GaugeMetricFamily(f"storpath_zfs_{name}", doc, labels=list(labels))

        up = GaugeMetricFamily("storpath_zfs_zpool_up", "Whether the last zpool status and zpool list run succeeded "
                               "(1) or failed, hung or printed something unexpected (0); absent without ZFS.")
        last_ok = GaugeMetricFamily("storpath_zfs_zpool_last_success_timestamp_seconds",
                                    "When zpool last ran successfully; the pool details below are that old. Absent "
                                    "when replaying captured output.")
        pool_state = gauge("pool_state", "Pool state (kstat or zpool status), as a state set.", ("zpool", "state"))
        size = gauge("pool_size_bytes", "Pool size (zpool list SIZE, raw, parity included for raidz).")
        alloc = gauge("pool_allocated_bytes", "Space allocated in the pool (zpool list ALLOC).")
        free = gauge("pool_free_bytes", "Space free in the pool (zpool list FREE).")
        frag = gauge("pool_fragmentation_ratio", "Free-space fragmentation (zpool list FRAG) as a ratio.")
        ashift = gauge("pool_ashift", "The pool's ashift property: log2 of its smallest write; absent when not set "
                       "at creation (0).")
        expected = gauge("pool_expected_ashift", "The smallest ashift that covers the largest physical sector size "
                         "of the pool's data devices.")
        phys = gauge("pool_device_physical_block_bytes", "Largest physical sector size among the pool's data "
                     "devices (queue/physical_block_size), to compare with 2^ashift.")
        data_errors = gauge("pool_data_errors", "Blocks with permanent (unrecoverable) errors (zpool status errors:).")
        vdev_state = gauge("vdev_state", "Vdev state, as a state set.", ("zpool", "vdev", "state"))
        vdev_info = gauge("vdev_info", "A vdev's place in the pool: `parent` vdev, `type` (raidz, mirror, disk...), "
                          "`class` (normal, log, special, dedup, cache, spare), and for a leaf on a block device its "
                          "kernel name in `device`; always 1.", ("zpool", "vdev", "parent", "type", "class", "device"))
        errors = CounterMetricFamily("storpath_zfs_vdev_errors", "I/O errors ZFS counted on a vdev since import or the "
                                     "last zpool clear, by type (read, write, checksum).", labels=["zpool", "vdev", "type"])
        scan_state = gauge("scan_state", "The last or running scan (scrub, resilver, error_scrub), as a state set of "
                           "scanning, paused, finished, canceled.", ("zpool", "function", "state"))
        scan_start = gauge("scan_start_timestamp_seconds", "When the last or running scan started.",
                           ("zpool", "function"))
        scan_end = gauge("scan_end_timestamp_seconds", "When the last scan finished or was canceled.",
                         ("zpool", "function"))
        scan_progress = gauge("scan_progress_ratio", "Fraction done of the running or paused scan.",
                              ("zpool", "function"))
        scan_errors = gauge("scan_errors", "Errors the last or running scan found.", ("zpool", "function"))
        families: List[Metric] = [up, last_ok, pool_state, size, alloc, free, frag, ashift, expected, phys,
                                  data_errors, vdev_state, vdev_info, errors, scan_state, scan_start, scan_end,
                                  scan_progress, scan_errors]

        if snapshot is not None:
            up.add_metric([], 1.0 if snapshot.ok else 0.0)
        if last_success is not None:
            last_ok.add_metric([], last_success)

        pools = {p.name: p for p in (snapshot.pools if snapshot else [])}
        for name in sorted(set(pools) | set(kstat)):
            pool = pools.get(name)
            state = kstat.get(name) or (pool.state if pool else None)
            if state is not None:
                for value in POOL_STATES:
                    pool_state.add_metric([name, value], 1.0 if value == state else 0.0)
            if pool is None:
                continue
            for family, value in ((size, pool.size_bytes), (alloc, pool.allocated_bytes), (free, pool.free_bytes),
                                  (frag, pool.fragmentation_ratio), (ashift, pool.ashift),
                                  (data_errors, pool.data_errors)):
                if value is not None:
                    family.add_metric([name], value)
            sizes = block_sizes.get(name, {})
            known = [sizes.get(v.name) for v in data_leaves(pool.vdevs) if sizes.get(v.name)]
            if known:
                phys.add_metric([name], max(known))
                expected.add_metric([name], expected_ashift(known))
            for vdev in pool.vdevs:
                if vdev.state is not None:
                    for value in VDEV_STATES:
                        vdev_state.add_metric([name, vdev.name, value], 1.0 if value == vdev.state else 0.0)
                device = vdev.name if sizes.get(vdev.name) else ""
                vdev_info.add_metric([name, vdev.name, vdev.parent or "", vdev.type or "", vdev.vdev_class, device], 1)
                for kind, count in zip(ERROR_TYPES, (vdev.read_errors, vdev.write_errors, vdev.checksum_errors)):
                    if count is not None:
                        errors.add_metric([name, vdev.name, kind], count)
            scan = pool.scan
            if scan is not None:
                labels = [name, scan.function]
                for value in SCAN_STATES:
                    scan_state.add_metric([name, scan.function, value], 1.0 if value == scan.state else 0.0)
                for family, value in ((scan_start, scan.start_time), (scan_end, scan.end_time),
                                      (scan_progress, scan.progress), (scan_errors, scan.errors)):
                    if value is not None:
                        family.add_metric(labels, value)
        return families
