"""ZFS pools: state, vdev errors, capacity, ashift against the devices, scrub and resilver.

Pool state comes from /proc/spl/kstat/zfs on every scrape (no root needed). Everything
else comes from `zpool`, which runs in a background task on its own interval with a
timeout: a scrape never waits for it, and a zpool that is missing, hangs or prints
something unexpected shows as storpath_zfs_zpool_up 0 with the reason in the log.
"""

from __future__ import annotations


from storpath.analysis.zfs import data_leaves, expected_ashift
from storpath.collectors import Collector, register
from storpath.base.config import Duration
from storpath.scrape.families import COUNTER, GAUGE, Family, Rows
from storpath.readers.zfs import ERROR_TYPES, POOL_STATES, SCAN_STATES, VDEV_STATES


ZPOOL_UP = Family(
    "storpath_zfs_zpool_up", GAUGE,
    "Whether the last zpool status and zpool list run succeeded (1) or failed, hung or printed something "
    "unexpected (0); absent without ZFS.", (),
    doc="1 when the last zpool run (or captured read) succeeded, 0 when it failed, hung or printed something "
        "unexpected")
ZPOOL_LAST_SUCCESS = Family(
    "storpath_zfs_zpool_last_success_timestamp_seconds", GAUGE,
    "When zpool last ran successfully; the pool details below are that old. Absent when replaying captured "
    "output.", (), "seconds",
    doc="when zpool last ran successfully (the age of the details); absent when replaying captured output")
POOL_STATE = Family(
    "storpath_zfs_pool_state", GAUGE,
    "Pool state (kstat or zpool status), as a state set.", ("zpool", "state"),
    doc="state set: `online`, `degraded`, `faulted`, `offline`, `removed`, `unavail`, `suspended`")
POOL_SIZE = Family(
    "storpath_zfs_pool_size_bytes", GAUGE,
    "Pool size (zpool list SIZE, raw, parity included for raidz).", ("zpool",), "bytes",
    doc="pool size (`zpool list` SIZE: raw, raidz parity included)")
POOL_ALLOCATED = Family(
    "storpath_zfs_pool_allocated_bytes", GAUGE,
    "Space allocated in the pool (zpool list ALLOC).", ("zpool",), "bytes",
    doc="space allocated (ALLOC); `allocated / size` is the fill level (ZFS slows down past ~70-80 %)")
POOL_FREE = Family(
    "storpath_zfs_pool_free_bytes", GAUGE,
    "Space free in the pool (zpool list FREE).", ("zpool",), "bytes",
    doc="space free (FREE)")
POOL_FRAGMENTATION = Family(
    "storpath_zfs_pool_fragmentation_ratio", GAUGE,
    "Free-space fragmentation (zpool list FRAG) as a ratio.", ("zpool",), "ratio",
    doc="free-space fragmentation (FRAG) as a ratio; absent when zpool prints `-`")
POOL_ASHIFT = Family(
    "storpath_zfs_pool_ashift", GAUGE,
    "The pool's ashift property: log2 of its smallest write; absent when not set at creation (0).", ("zpool",),
    doc="the pool's `ashift` property (log2 of the smallest write); absent when 0 (not set at creation, chosen "
        "per vdev)")
POOL_EXPECTED_ASHIFT = Family(
    "storpath_zfs_pool_expected_ashift", GAUGE,
    "The smallest ashift that covers the largest physical sector size of the pool's data devices.", ("zpool",),
    doc="the smallest ashift covering that sector size (at least 9); `ashift < expected_ashift` means "
        "read-modify-write inside the drives")
POOL_DEVICE_PHYSICAL_BLOCK = Family(
    "storpath_zfs_pool_device_physical_block_bytes", GAUGE,
    "Largest physical sector size among the pool's data devices (queue/physical_block_size), to compare with "
    "2^ashift.", ("zpool",), "bytes",
    doc="largest `queue/physical_block_size` among the pool's data leaves (not cache or spares)")
POOL_CREATION = Family(
    "storpath_zfs_pool_creation_timestamp_seconds", GAUGE,
    "When the pool was created (the creation property of its root dataset, zfs get).", ("zpool",), "seconds",
    doc="when the pool was created (`zfs get creation` of its root dataset); with no scrub on record, a pool "
        "older than the scrub threshold counts as overdue; absent when zfs cannot say")
POOL_DATA_ERRORS = Family(
    "storpath_zfs_pool_data_errors", GAUGE,
    "Blocks with permanent (unrecoverable) errors (zpool status errors:).", ("zpool",),
    doc="blocks with permanent errors (`error_count`, `errors:` line)")
VDEV_STATE = Family(
    "storpath_zfs_vdev_state", GAUGE,
    "Vdev state, as a state set.", ("zpool", "vdev", "state"),
    doc="state set: `online`, `degraded`, `faulted`, `offline`, `removed`, `unavail` (a spare's AVAIL/INUSE read "
        "as `online`)")
VDEV_INFO = Family(
    "storpath_zfs_vdev_info", GAUGE,
    "A vdev's place in the pool: `parent` vdev, `type` (raidz, mirror, disk...), `class` (normal, log, special, "
    "dedup, cache, spare), and for a leaf on a block device its kernel name in `device`; always 1.", ("zpool", "vdev", "parent", "type", "class", "device"),
    doc="tree and role of a vdev: `type` `root`, `raidz`, `mirror`, `draid`, `disk`, `file`; `class` `normal`, "
        "`log`, `special`, `dedup`, `cache`, `spare`; `device` the kernel block device of a leaf (join with "
        "`storpath_block_device_info`), empty when it is none; always 1")
VDEV_ERRORS = Family(
    "storpath_zfs_vdev_errors", COUNTER,
    "I/O errors ZFS counted on a vdev since import or the last zpool clear, by type (read, write, checksum).", ("zpool", "vdev", "type"),
    doc="I/O errors ZFS counted, `type` `read`, `write`, `checksum`; reset by `zpool clear` and export/import")
SCAN_STATE = Family(
    "storpath_zfs_scan_state", GAUGE,
    "The last or running scan (scrub, resilver, error_scrub), as a state set of scanning, paused, finished, "
    "canceled.", ("zpool", "function", "state"),
    doc="the last or running scan as a state set: `scanning`, `paused`, `finished`, `canceled`; absent when none "
        "ever ran")
SCAN_START = Family(
    "storpath_zfs_scan_start_timestamp_seconds", GAUGE,
    "When the last or running scan started.", ("zpool", "function"), "seconds",
    doc="when the last or running scan started")
SCAN_END = Family(
    "storpath_zfs_scan_end_timestamp_seconds", GAUGE,
    "When the last scan finished or was canceled.", ("zpool", "function"), "seconds",
    doc="when the last scan finished or was canceled")
SCAN_PROGRESS = Family(
    "storpath_zfs_scan_progress_ratio", GAUGE,
    "Fraction done of the running or paused scan.", ("zpool", "function"), "ratio",
    doc="fraction done of a running or paused scan (issued / (to examine - skipped), zpool's \"% done\")")
SCAN_ERRORS = Family(
    "storpath_zfs_scan_errors", GAUGE,
    "Errors the last or running scan found.", ("zpool", "function"),
    doc="errors the last or running scan found")


FAMILIES = (ZPOOL_UP, ZPOOL_LAST_SUCCESS, POOL_STATE, POOL_SIZE, POOL_ALLOCATED, POOL_FREE, POOL_FRAGMENTATION,
            POOL_ASHIFT, POOL_EXPECTED_ASHIFT, POOL_DEVICE_PHYSICAL_BLOCK, POOL_CREATION, POOL_DATA_ERRORS, VDEV_STATE, VDEV_INFO,
            VDEV_ERRORS, SCAN_STATE, SCAN_START, SCAN_END, SCAN_PROGRESS, SCAN_ERRORS)


@register("zfs", default=True)
class ZfsCollector(Collector):
    """ZFS pools and vdevs: state, errors, capacity, ashift, scrub/resilver (zpool runs in the background)."""

    families = FAMILIES
    reads = ("zfs_kstat", "zpool")
    config_defaults = {
        "interval": Duration(60),  # how often zpool status and zpool list run
        "timeout": Duration(10),  # a zpool taking longer is killed and reported
        "zpool_path": "zpool",  # looked up in PATH, then /usr/sbin and /sbin
        "zfs_path": "zfs",  # for the pools' creation time: beside zpool, else looked up as zpool is
    }

    def values(self, found) -> Rows:
        kstat = found.zfs_kstat
        run, block_sizes, last_success = found.zpool
        rows = Rows()
        if run is not None:
            rows.add(ZPOOL_UP, (), 1.0 if run.ok else 0.0)
        rows.add(ZPOOL_LAST_SUCCESS, (), last_success)

        pools = {p.name: p for p in (run.pools if run else [])}
        for name in sorted(set(pools) | set(kstat)):
            pool = pools.get(name)
            state = kstat.get(name) or (pool.state if pool else None)
            if state is not None:
                for value in POOL_STATES:
                    rows.add(POOL_STATE, (name, value), 1.0 if value == state else 0.0)
            if pool is None:
                continue
            key = (name,)
            for family, value in ((POOL_SIZE, pool.size_bytes), (POOL_ALLOCATED, pool.allocated_bytes),
                                  (POOL_FREE, pool.free_bytes), (POOL_FRAGMENTATION, pool.fragmentation_ratio),
                                  (POOL_ASHIFT, pool.ashift), (POOL_CREATION, pool.created_at),
                                  (POOL_DATA_ERRORS, pool.data_errors)):
                rows.add(family, key, value)
            sizes = block_sizes.get(name, {})
            known = [sizes.get(v.name) for v in data_leaves(pool.vdevs) if sizes.get(v.name)]
            if known:
                rows.add(POOL_DEVICE_PHYSICAL_BLOCK, key, max(known))
                rows.add(POOL_EXPECTED_ASHIFT, key, expected_ashift(known))
            for vdev in pool.vdevs:
                if vdev.state is not None:
                    for value in VDEV_STATES:
                        rows.add(VDEV_STATE, (name, vdev.name, value), 1.0 if value == vdev.state else 0.0)
                device = vdev.name if sizes.get(vdev.name) else ""
                rows.add(VDEV_INFO, (name, vdev.name, vdev.parent or "", vdev.type or "", vdev.vdev_class, device), 1)
                for kind, count in zip(ERROR_TYPES, (vdev.read_errors, vdev.write_errors, vdev.checksum_errors)):
                    rows.add(VDEV_ERRORS, (name, vdev.name, kind), count)
            scan = pool.scan
            if scan is not None:
                labels = (name, scan.function)
                for value in SCAN_STATES:
                    rows.add(SCAN_STATE, (name, scan.function, value), 1.0 if value == scan.state else 0.0)
                for family, value in ((SCAN_START, scan.start_time), (SCAN_END, scan.end_time),
                                      (SCAN_PROGRESS, scan.progress), (SCAN_ERRORS, scan.errors)):
                    rows.add(family, labels, value)
        return rows
