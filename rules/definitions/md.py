"""md RAID: degraded, faulty member, resync/recovery stalled, mismatches after a check.

Levels without redundancy (raid0, linear) have no `degraded` attribute and no sync actions,
so they never match here.
"""

SYNCING = "resync|recover|reshape|check|repair"


def rules(c):
    cfg = c.cfg
    on = c.on("device")
    level = c.show("storpath_md_level_info", ("device",), field=".Labels.level")
    return [
        c.record("instance:storpath_md_arrays_degraded:count", c.expr("""
            count ${by} (storpath_md_degraded_disks > 0)
            or ${on_target}
            0 * count ${by} (storpath_md_degraded_disks)
        """, by=c.by(), on_target=c.on())),
        c.alert(
            "MdArrayDegraded",
            "storpath_md_degraded_disks > 0",
            cfg.degraded_for, "critical",
            "An md array is degraded: it runs without part of its redundancy.",
            f"""{{{{ $labels.device }}}} ({level}) is missing {{{{ printf "%.0f" $value }}}} of its
            {c.show('storpath_md_raid_disks', ('device',), fmt='%.0f')} disks. Another failure may lose
            data; reads are slower while degraded.""",
        ),
        c.alert(
            "MdMemberFaulty",
            'storpath_md_member_info{state=~"(.*,)?faulty(,.*)?"} == 1',
            cfg.member_faulty_for, "warning",
            "An md array member is marked faulty.",
            """Member {{ $labels.member }} of {{ $labels.device }} (slot {{ $labels.slot }}) is marked
            faulty: md stopped using it. Replace the device and add the new one to the array.""",
        ),
        c.alert(
            "MdSyncStalled",
            c.expr("""
                storpath_md_sync_action{action=~"${syncing}"} == 1
                and ${on}
                changes(storpath_md_sync_completed_ratio[${window}]) == 0
            """, syncing=SYNCING, on=on, window=cfg.sync_stalled_window),
            cfg.sync_stalled_for, "warning",
            "An md resync, recovery, reshape or check makes no progress.",
            f"""{{{{ $labels.device }}}} has been in {{{{ $labels.action }}}} without progress for
            {cfg.sync_stalled_window}, stuck at {c.show('storpath_md_sync_completed_ratio', ('device',), pipe='humanizePercentage')}.""",
        ),
        c.alert(
            "MdMismatchCountHigh",
            c.expr("""
                storpath_md_mismatch_bytes > ${threshold}
                and ${on}
                storpath_md_sync_action{action="idle"} == 1
            """, threshold=str(cfg.mismatch_threshold), on=on),
            cfg.mismatch_for, "warning",
            "An md array found mismatched blocks between its copies or parity.",
            f"""{{{{ $labels.device }}}} ({level}) counted {{{{ printf "%.0f" $value }}}} bytes of mismatched blocks in its
            last check or repair (threshold {cfg.mismatch_threshold} bytes): its copies or parity disagree.""",
        ),
    ]
