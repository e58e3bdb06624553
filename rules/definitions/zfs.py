"""ZFS pools and vdevs: not online, errors rising, too full, ashift too small, scrub overdue."""

BAD_POOL = "degraded|faulted|offline|removed|unavail|suspended"
BAD_VDEV = "degraded|faulted|offline|removed|unavail"
ALLOC = "storpath_zfs_pool_allocated_bytes"
SIZE = "storpath_zfs_pool_size_bytes"
ASHIFT = "storpath_zfs_pool_ashift"
EXPECTED_ASHIFT = "storpath_zfs_pool_expected_ashift"
SECTOR = "storpath_zfs_pool_device_physical_block_bytes"
# zpool status only reports the last scan: after a resilver, the scrub time is unknown (no series);
# the pool's creation time stands in when no scan ran within the threshold.
SCRUB_END = 'storpath_zfs_scan_end_timestamp_seconds{function="scrub"}'
CREATED = "storpath_zfs_pool_creation_timestamp_seconds"


def rules(c):
    cfg = c.cfg
    on = c.on("zpool")
    capacity = c.expr("${alloc} / ${on} ${size}", alloc=ALLOC, size=SIZE, on=on)
    used = (f"{c.show(ALLOC, ('zpool',), pipe='humanize1024')}B of "
            f"{c.show(SIZE, ('zpool',), pipe='humanize1024')}B")
    return [
        c.record("zpool:storpath_zfs_pool_capacity:ratio", capacity),
        c.alert(
            "ZfsZpoolCommandFailing",
            "storpath_zfs_zpool_up == 0",
            cfg.zpool_failing_for, "warning",
            "ZFS details cannot be read from zpool.",
            """The zpool command keeps failing on {{ $labels.instance }}: pool state still comes from the
            kernel, but vdev states, errors, capacity and scrub results are not exported, so their alerts
            cannot fire. The exporter's log line "zpool failed" gives the reason.""",
        ),
        c.alert(
            "ZfsPoolNotOnline",
            f'storpath_zfs_pool_state{{state=~"{BAD_POOL}"}} == 1',
            cfg.pool_not_online_for, "critical",
            "A ZFS pool is not online.",
            """Pool {{ $labels.zpool }} is {{ $labels.state | toUpper }}: it runs without part of its
            redundancy, or cannot serve I/O at all.""",
        ),
        c.alert(
            "ZfsVdevNotOnline",
            # The root vdev (named like the pool) mirrors the pool's state: ZfsPoolNotOnline says it.
            c.expr("""
                storpath_zfs_vdev_state{state=~"${bad}"} == 1
                unless ${on}
                storpath_zfs_vdev_info{type="root"}
            """, bad=BAD_VDEV, on=c.on("zpool", "vdev")),
            cfg.vdev_not_online_for, "warning",
            "A ZFS vdev is not online.",
            """vdev {{ $labels.vdev }} of pool {{ $labels.zpool }} is {{ $labels.state | toUpper }}.""",
        ),
        c.alert(
            "ZfsVdevErrorsRising",
            f"increase(storpath_zfs_vdev_errors_total[{cfg.vdev_errors_window}]) > 0",
            cfg.vdev_errors_for, "warning",
            "A ZFS vdev is counting read, write or checksum errors.",
            f"""vdev {{{{ $labels.vdev }}}} of pool {{{{ $labels.zpool }}}} counted {{{{ printf "%.0f" $value }}}}
            {{{{ $labels.type }}}} errors in the last {cfg.vdev_errors_window}.""",
            keep_firing_for=cfg.vdev_errors_keep_firing_for,
        ),
        c.alert(
            "ZfsPoolCapacityHigh",
            c.expr("${capacity} > ${warn}\nunless ${on}\n${capacity} > ${crit}", capacity=capacity, on=on,
                   warn=str(cfg.capacity_warning_ratio), crit=str(cfg.capacity_critical_ratio)),
            cfg.capacity_for, "warning",
            "A ZFS pool is full enough to slow down.",
            f"""Pool {{{{ $labels.zpool }}}} is {{{{ $value | humanizePercentage }}}} full ({used}). Above
            {cfg.capacity_warning_ratio * 100:.0f} % allocation gets slower and fragments free space.""",
        ),
        c.alert(
            "ZfsPoolCapacityCritical",
            c.expr("${capacity} > ${crit}", capacity=capacity, crit=str(cfg.capacity_critical_ratio)),
            cfg.capacity_for, "critical",
            "A ZFS pool is nearly full.",
            f"""Pool {{{{ $labels.zpool }}}} is {{{{ $value | humanizePercentage }}}} full ({used}). Writes
            slow down sharply and will fail when it is full.""",
        ),
        c.alert(
            "ZfsPoolAshiftBelowSectorSize",
            # expected_ashift: the smallest ashift covering the largest physical sector size of
            # the pool's data devices (the exporter's analysis).
            c.expr("${ashift} < ${on} ${expected}", ashift=ASHIFT, expected=EXPECTED_ASHIFT, on=on),
            cfg.ashift_for, "warning",
            "A ZFS pool writes blocks smaller than its devices' physical sectors.",
            f"""Pool {{{{ $labels.zpool }}}} has ashift {{{{ printf "%.0f" $value }}}}
            ({{{{ range query (printf "2 ^ {ASHIFT}{{job=%q,instance=%q,zpool=%q}}" $labels.job $labels.instance $labels.zpool) }}}}{{{{ printf "%.0f" .Value }}}}{{{{ end }}}}-byte
            blocks) on devices with {c.show(SECTOR, ('zpool',), fmt='%.0f-byte')} physical sectors (ashift
            {c.show(EXPECTED_ASHIFT, ('zpool',), fmt='%.0f')} needed): every small write is a read-modify-write
            inside the drive. ashift is fixed when a vdev is created.""",
        ),
        c.alert(
            "ZfsScrubOverdue",
            # A pool with no scrub on record counts from its creation, unless a scan ran within
            # the threshold or is running (zpool status keeps only the last scan: after a
            # resilver, the last scrub's time is gone).
            c.expr("""
                time() - ${end} > ${after}
                or
                (
                  time() - ${created} > ${after}
                  unless ${on} storpath_zfs_scan_state{function="scrub"}
                  unless ${on} (time() - storpath_zfs_scan_end_timestamp_seconds <= ${after})
                  unless ${on} (storpath_zfs_scan_state{state=~"scanning|paused"} == 1)
                )
            """, end=SCRUB_END, created=CREATED, after=c.seconds(cfg.scrub_overdue_after), on=on),
            cfg.scrub_overdue_for, "warning",
            "A ZFS pool has not been scrubbed for too long.",
            f"""{{{{ if $labels.function }}}}Pool {{{{ $labels.zpool }}}} finished its last scrub {{{{ $value |
            humanizeDuration }}}} ago{{{{ else }}}}Pool {{{{ $labels.zpool }}}} has no scrub on record and was
            created {{{{ $value | humanizeDuration }}}} ago{{{{ end }}}} (more than {cfg.scrub_overdue_after}):
            latent errors are not being found while redundancy could still repair them.""",
        ),
    ]
