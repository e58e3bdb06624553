"""fio probes: measured throughput far below what the path should give, probes failing, stale results."""

READ = "storpath_probe_read_bytes_per_second"
EXPECTED = "storpath_probe_expected_read_bytes_per_second"
LAST_RUN = "storpath_probe_last_run_timestamp_seconds"
LAST_SUCCESS = "storpath_probe_last_success_timestamp_seconds"
FAILURES = "storpath_probe_failures_total"
RATIO = "target_profile:storpath_probe_read_throughput:ratio"


def rules(c):
    cfg = c.cfg
    keys = ("target", "profile")
    on = c.on(*keys)
    window = cfg.consecutive_window
    return [
        c.record(RATIO, c.expr("${read} / ${on} (${expected} > 0)", read=READ, expected=EXPECTED, on=on)),
        c.alert(
            "ProbeThroughputBelowExpected",
            # Both the latest probe and the one before it: the window spans the latest result and,
            # across the last successful run, the previous one, which must have existed already.
            c.expr("""
                max_over_time(${ratio}[${window}]) < ${threshold}
                and ${on}
                changes(${last_success}[${window}]) >= 1
                and ${on}
                ${ratio} offset ${window}
            """, ratio=RATIO, window=window, threshold=str(cfg.throughput_ratio_threshold), on=on,
                last_success=LAST_SUCCESS),
            "0s", cfg.throughput_severity,
            "Measured read throughput is far below what the storage path should give.",
            f"""Probe {{{{ $labels.profile }}}} of {{{{ $labels.target }}}} read {c.gbytes(READ, *keys)} where
            {c.gbytes(EXPECTED, *keys)} is expected; the last two probes reached at most
            {{{{ $value | humanizePercentage }}}} of it (threshold {cfg.throughput_ratio_threshold * 100:.0f} %).""",
        ),
        c.alert(
            "ProbeFailing",
            c.expr("""
                sum ${by} (increase(${failures}[${window}])) > 0
                unless ${on}
                changes(${last_success}[${window}]) > 0
            """, by=c.by("target", "profile", "reason"), failures=FAILURES, window=cfg.failing_window, on=on,
                last_success=LAST_SUCCESS),
            cfg.failing_for, "warning",
            "A storage probe keeps failing.",
            f"""Probe {{{{ $labels.profile }}}} of {{{{ $labels.target }}}} failed {{{{ printf "%.0f" $value }}}}
            times ({{{{ $labels.reason }}}}) in the last {cfg.failing_window} without a single success.""",
        ),
        c.alert(
            "ProbeResultsStale",
            c.expr("time() - ${last_success} > ${after}", last_success=LAST_SUCCESS,
                   after=c.seconds(cfg.stale_after)),
            cfg.stale_for, "warning",
            "A storage probe's latest result is old.",
            f"""The latest successful probe {{{{ $labels.profile }}}} of {{{{ $labels.target }}}} is
            {{{{ $value | humanizeDuration }}}} old (more than {cfg.stale_after}): dashboards and the
            throughput alert show old data.""",
        ),
    ]
