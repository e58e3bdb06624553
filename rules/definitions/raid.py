"""Drives behind hardware RAID controllers (the raid collector: storcli/perccli, ssacli, arcconf,
MegaCli): a drive link below both ends, a volume degraded, rebuilding or failed, a write cache
that fell from write-back to write-through, a failed battery or CacheVault, a tool that keeps
failing.

As for SAS PHYs, a drive's link is judged only where both ends' capability is known
(storpath_raid_drive_link_verifiable == 1): behind an expander storcli's Link Speed is the
controller-to-expander link (never exported as the drive's rate), and ssacli and MegaCli name no
controller port rate, so those drives never alert as slow.
"""

R = "storpath_raid_"
NEG = R + "drive_negotiated_link_rate_transfers_per_second"
EXPECTED = R + "drive_expected_link_rate_transfers_per_second"
MAX = R + "drive_max_link_rate_transfers_per_second"
PORT = R + "controller_port_max_link_rate_transfers_per_second"
VERIFIABLE = R + "drive_link_verifiable"
STATE = R + "volume_state"
WRITE_BACK = R + "volume_write_back"


def rules(c):
    cfg = c.cfg
    drive = c.on("controller", "slot")
    volume = c.on("controller", "volume")
    model = c.show(R + "drive_info", ("controller", "slot"), field=".Labels.model")
    device = c.show(R + "volume_info", ("controller", "volume"), inner="{{ with .Labels.device }} ({{ . }}){{ end }}")
    level = c.show(R + "volume_info", ("controller", "volume"), field=".Labels.level")
    return [
        c.record("instance:storpath_raid_drives_below_expected:count", c.expr("""
            count ${by} (${neg} < ${on} ${expected} and ${on} ${verifiable} == 1)
            or ${on_target}
            0 * count ${by} (${verifiable})
        """, neg=NEG, expected=EXPECTED, verifiable=VERIFIABLE, on=drive, by=c.by(), on_target=c.on())),
        c.alert(
            "RaidDriveLinkBelowExpected",
            c.expr("""
                ${neg} < ${on} ${expected}
                and ${on}
                ${verifiable} == 1
            """, neg=NEG, expected=EXPECTED, verifiable=VERIFIABLE, on=drive),
            cfg.link_rate_for, "warning",
            "A drive behind a RAID controller negotiated below the rate both of its ends support.",
            f"""Drive {{{{ $labels.slot }}}} ({model}) on {{{{ $labels.controller }}}} runs at
            {c.gbits(NEG, 'controller', 'slot')} though the drive does {c.gbits(MAX, 'controller', 'slot')} and the
            controller's ports {c.gbits(PORT, 'controller')} (expected {c.gbits(EXPECTED, 'controller', 'slot')}).
            Both ends can do more: reseat the drive, suspect its slot, backplane or cable.""",
        ),
        c.alert(
            "RaidVolumeDegraded",
            f'{STATE}{{state=~"degraded|failed"}} == 1',
            cfg.volume_degraded_for, "critical",
            "A hardware RAID volume is degraded or failed: it runs without part of its redundancy.",
            f"""Volume {{{{ $labels.volume }}}}{device} ({level}) on {{{{ $labels.controller }}}} is
            {{{{ $labels.state }}}}. Another drive failure may lose data; reads of the missing drive's data are
            rebuilt from the others. Replace the failed drive.""",
        ),
        c.alert(
            "RaidVolumeRebuilding",
            f'{STATE}{{state="rebuilding"}} == 1',
            cfg.volume_rebuilding_for, "warning",
            "A hardware RAID volume is rebuilding.",
            f"""Volume {{{{ $labels.volume }}}}{device} ({level}) on {{{{ $labels.controller }}}} is rebuilding
            ({c.show(R + 'volume_operation_progress_ratio', ('controller', 'volume'), pipe='humanizePercentage',
                     default='progress unknown')} done): redundancy is not back yet and the rebuild takes
            the drives' bandwidth.""",
        ),
        c.alert(
            "RaidCacheFellToWriteThrough",
            c.expr("""
                max without (policy) (${wb}{policy="configured"}) == 1
                and ${on}
                ${wb}{policy="current"} == 0
            """, wb=WRITE_BACK, on=volume),
            cfg.write_through_for, "warning",
            "A RAID volume configured write-back is writing through: its cache fell back.",
            f"""Volume {{{{ $labels.volume }}}}{device} on {{{{ $labels.controller }}}} is configured write-back but
            writes through now: every write waits for the drives (several times slower for small writes). The
            controller does this when its battery or CacheVault fails, is missing or relearns.""",
        ),
        c.alert(
            "RaidBatteryFailed",
            f'{R}battery_state{{state=~"failed|missing"}} == 1',
            cfg.battery_failed_for, "warning",
            "A RAID controller's cache battery or CacheVault failed.",
            """The cache battery (or CacheVault) of {{ $labels.controller }} is {{ $labels.state }}: the
            controller writes through (no write-back cache) until it is replaced.""",
        ),
        c.alert(
            "RaidToolFailing",
            f"{R}tool_up == 0",
            cfg.tool_failing_for, "warning",
            "A hardware RAID tool keeps failing: the drives behind that controller are not judged afresh.",
            """{{ $labels.tool }} keeps failing on {{ $labels.instance }}: the drives, volumes, cache and battery
            behind its controllers are those of its last successful pass (if it ever had one), so a change since
            cannot show. The exporter's log line "RAID tool failed" gives the reason (not installed, not root,
            hung, unreadable output).""",
        ),
        c.alert(
            "RaidToolResultsStale",
            f"time() - {R}tool_last_success_timestamp_seconds > {c.seconds(cfg.results_stale_after)}",
            cfg.results_stale_for, "warning",
            "A hardware RAID tool's last successful pass is old: its volumes and drives are shown as they were then.",
            """{{ $labels.tool }} on {{ $labels.instance }} last succeeded {{ $value | humanizeDuration }} ago:
            the volume, drive and battery states exported for its controllers are from then (a degraded volume
            stays degraded until a pass says otherwise, but nothing newer can show). The exporter's log line "RAID
            tool failed" gives the reason.""",
        ),
    ]
