"""Every path to the data: NVMe subsystems and dm-multipath maps that lost a path, or all of
them; namespaces without an optimized ANA path; paths spread over NUMA nodes under a policy
that ignores them; maps over paths of different link rates; dual-ported drives missing a path.

What "fewer paths" compares with (storpath.analysis.paths): the paths the kernel lists now
(a path listed but not live: StoragePathsDegraded, none live: StoragePathLost), and the
subsystem's or map's own maximum over `missing_window` for a path gone from sysfs altogether
(StoragePathsMissing). Peers on the host are not compared: a LUN mapped through one path on
purpose is no fault.

A map's history is kept by its WWID (the `wwid` label every map family carries): device-mapper
numbers maps in creation order, so after a reboot dm-5 may be another LUN. A map path whose
state dmsetup could not tell is unknown (storpath_multipath_paths_unknown), neither active nor
failed: a map's StoragePathsDegraded or StoragePathLost, once raised, stays raised while its
paths are unknown (it does not resolve because dmsetup stopped answering), and
StorageMultipathStateUnknown says the states cannot be read.
"""

NVME_PATHS, NVME_LIVE = "storpath_nvme_subsystem_paths", "storpath_nvme_subsystem_paths_live"
MAP_PATHS, MAP_ACTIVE = "storpath_multipath_paths", "storpath_multipath_paths_active"
MAP_FAILED, MAP_UNKNOWN = "storpath_multipath_paths_failed", "storpath_multipath_paths_unknown"
MAP_INFO = "storpath_multipath_device_info"
# A subsystem's paths by its NQN, which a reboot does not renumber (nvme-subsysN may change).
BY_NQN = "instance_nqn:storpath_nvme_subsystem_paths:max"
# A map's paths by its WWID, which a reboot does not renumber (dm-N follows creation order).
BY_WWID = "instance_wwid:storpath_multipath_paths:max"


def what(c) -> str:
    """Which thing an alert names: NVMe series carry `subsystem` (or `nqn`), a dm-multipath
    map its /dev/mapper name (from the info series, by WWID: a rename shows the new name), WWID
    and kernel device; a series without `wwid` (an older exporter) its device."""
    name = c.show(MAP_INFO, ("wwid",), field=".Labels.name", join=", ")
    return ("{{ if $labels.subsystem }}NVMe subsystem {{ $labels.subsystem }}"
            "{{ else if $labels.nqn }}NVMe subsystem {{ $labels.nqn }}"
            "{{ else if $labels.wwid }}multipath map " + name + " (WWID {{ $labels.wwid }}"
            "{{ if $labels.device }}, {{ $labels.device }}{{ end }})"
            "{{ else }}multipath map {{ $labels.device }}{{ end }}")


def held(c, alert: str, value: str) -> str:
    """`value` of a map whose paths are unknown now while `alert` was already raised (pending or
    firing) on it: a verdict that dmsetup stopped giving is not taken back."""
    return c.expr("""
        ${value} and ${dm} ${unknown} > 0
        and ${dm} ALERTS{alertname="${alert}"}
    """, value=value, dm=c.on("device"), unknown=MAP_UNKNOWN, alert=alert)


def rules(c):
    cfg = c.cfg
    nvme, dm = c.on("subsystem"), c.on("device")
    WHAT = what(c)
    return [
        # The exporter shows a subsystem of one PCIe path as the drive it is (analysis.paths.multipathed):
        # a dual-ported drive that loses one port leaves the families, so its paths are kept by NQN here
        # for StoragePathsMissing to compare with.
        c.record(BY_NQN, c.expr("""
            max ${by_nqn} (
              ${nvme_paths} * ${on_subsystem} group_left(nqn) storpath_nvme_subsystem_info
            )
        """, by_nqn=c.by("nqn"), nvme_paths=NVME_PATHS, on_subsystem=c.on("subsystem"))),
        # A map's paths by WWID, for StoragePathsMissing to compare a map with its own history
        # whatever dm-N it had before a reboot.
        c.record(BY_WWID, c.expr("""
            max ${by_wwid} (${map_paths}{wwid!=""})
        """, by_wwid=c.by("wwid"), map_paths=MAP_PATHS)),
        c.alert(
            "StoragePathLost",
            c.expr("""
                (${nvme_live} == 0 and ${nvme} ${nvme_paths} > 0)
                or
                (${map_active} == 0 and ${dm} (${map_failed} >= ${dm} ${map_paths}) and ${dm} ${map_paths} > 0)
                or
                (${held})
            """, nvme_live=NVME_LIVE, nvme_paths=NVME_PATHS, map_active=MAP_ACTIVE, map_paths=MAP_PATHS,
                   map_failed=MAP_FAILED, nvme=nvme, dm=dm,
                   held=held(c, "StoragePathLost", f"{MAP_ACTIVE} == 0")),
            cfg.lost_for, "critical",
            "A multipath device has no working path left.",
            f"""{WHAT} has no working path of the
            {{{{ if $labels.subsystem }}}}{c.show(NVME_PATHS, ("subsystem",), fmt="%.0f")}{{{{ else
            }}}}{c.show(MAP_PATHS, ("device",), fmt="%.0f")}{{{{ end }}}} the kernel lists: I/O to it
            queues or fails.""",
        ),
        c.alert(
            "StoragePathsDegraded",
            c.expr("""
                (${nvme_live} < ${nvme} ${nvme_paths} and ${nvme_live} > 0)
                or
                (${map_active} and ${dm} ${map_failed} > 0 and ${dm} (${map_failed} < ${dm} ${map_paths}))
                or
                (${held})
            """, nvme_live=NVME_LIVE, nvme_paths=NVME_PATHS, map_active=MAP_ACTIVE, map_paths=MAP_PATHS,
                   map_failed=MAP_FAILED, nvme=nvme, dm=dm,
                   held=held(c, "StoragePathsDegraded", MAP_ACTIVE)),
            cfg.degraded_for, "warning",
            "A multipath device runs on fewer paths than it has.",
            f"""{WHAT} runs on {{{{ printf "%.0f" $value }}}} of its
            {{{{ if $labels.subsystem }}}}{c.show(NVME_PATHS, ("subsystem",), fmt="%.0f")}{{{{ else
            }}}}{c.show(MAP_PATHS, ("device",), fmt="%.0f")}{{{{ end }}}} paths: less throughput on
            active/active paths and less redundancy.""",
        ),
        c.alert(
            "StoragePathsMissing",
            c.expr("""
                max_over_time(${nvme_paths}[${window}]) > ${nvme_paths}
                or
                max_over_time(${by_wwid}[${window}]) > ${by_wwid}
                or
                (
                  max_over_time(${by_nqn}[${window}]) > 1
                  unless ${on_nqn} ${by_nqn}
                )
                and ${on_target} storpath_scrape_collector_success{collector="nvme_subsystem"} == 1
            """, nvme_paths=NVME_PATHS, map_paths=MAP_PATHS, window=cfg.missing_window, by_nqn=BY_NQN, by_wwid=BY_WWID,
                   on_nqn=c.on("nqn"), on_target=c.on()),
            cfg.missing_for, "warning",
            "A multipath device has fewer paths than it had.",
            f"""{WHAT} had {{{{ printf "%.0f" $value }}}} paths in the last {cfg.missing_window} and
            has fewer now: a path was removed altogether (a controller deleted after ctrl_loss_tmo, a
            SCSI device gone, one port of a dual-ported drive lost).""",
        ),
        c.alert(
            "StorageMultipathStateUnknown",
            c.expr("""
                (
                  storpath_multipath_dmsetup_up == 0
                  and ${on_target} count ${by_target} (storpath_multipath_paths) > 0
                )
                or
                count ${by_target} (${map_unknown} > 0) > 0
            """, on_target=c.on(), by_target=c.by(), map_unknown=MAP_UNKNOWN),
            cfg.state_unknown_for, "warning",
            "The dm-multipath maps' own path states cannot be read on this host.",
            """`dmsetup status` has failed on {{ $labels.instance }} for a while, or left maps unjudged (it
            hangs, fails, is not installed or lacks the privilege device-mapper needs): the paths whose device
            says running are of unknown state (a path dm-mpath failed is not seen), so a new path failure
            raises no StoragePathsDegraded or StoragePathLost (one already raised stays).""",
        ),
        c.alert(
            "StorageNoOptimizedPath",
            "storpath_nvme_namespace_optimized_paths == 0",
            cfg.no_optimized_for, "warning",
            "An NVMe namespace has no live path in ANA state optimized.",
            """Namespace {{ $labels.device }} of {{ $labels.subsystem }} has no live optimized path: its I/O
            goes through a non-optimized controller or waits for an ANA transition.""",
        ),
        c.alert(
            "StoragePathsCrossNuma",
            c.expr("""
                storpath_nvme_subsystem_numa_crossing == 1
                or
                storpath_multipath_numa_nodes > 1
            """),
            cfg.numa_crossing_for, "info",
            "A multipath device spreads I/O over paths on several NUMA nodes.",
            f"""{WHAT} sends I/O over paths on several NUMA nodes whatever CPU submits it: part of it
            crosses the interconnect though a near path exists.""",
        ),
        c.alert(
            "StorageMultipathMixedLinkRates",
            "storpath_multipath_link_rates > 1",
            cfg.mixed_link_rates_for, "warning",
            "A multipath map runs over paths of different link rates.",
            f"""The working paths of {WHAT} negotiated {{{{ printf "%.0f" $value }}}}
            different SAS link rates: the selector spreads I/O evenly, so the fast paths wait for the slow
            one.""",
        ),
        c.alert(
            "StorageDrivePathMissing",
            c.expr("""
                storpath_scsi_drive_paths
                < ${on} storpath_scsi_drive_paths_expected
            """, on=c.on("wwid", "model")),
            cfg.drive_path_missing_for, "warning",
            "A dual-ported drive is reached through fewer paths than its peers.",
            f"""Drive {{{{ $labels.wwid }}}} ({{{{ $labels.model }}}}) is reached through {{{{ printf "%.0f"
            $value }}}} path(s) where drives of the same model on this host have
            {c.show("storpath_scsi_drive_paths_expected", ("wwid", "model"), fmt="%.0f")}: its other port's
            cable, expander or HBA port is gone.""",
        ),
    ]
