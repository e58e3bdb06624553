"""The exporter itself: a collector failing, the target down, no target at all, answers older than their scrape."""


COLLECTED = "storpath_scrape_collected_timestamp_seconds"


def rules(c):
    return [
        c.alert(
            "StorpathCollectorFailing",
            "storpath_scrape_collector_success == 0",
            c.cfg.collector_failing_for, "warning",
            "A storpath collector fails on every scrape; its metrics and alerts are blind.",
            f"""Collector {{{{ $labels.collector }}}} of the storpath exporter on {{{{ $labels.instance }}}} has
            failed on every scrape for {c.cfg.collector_failing_for}: the storpath_* metrics it provides are
            missing, so the alerts built on them cannot fire. The exporter's log says why.""",
        ),
        # Prometheus stores the last complete answer as if it were new (it ignores the Age
        # header): the age is in the body, as the time its reading began, and timestamp() is
        # when Prometheus scraped it (docs/serving.md).
        c.alert(
            "StorpathAnswersStale",
            c.expr("timestamp(${collected}) - ${collected} > ${after}", collected=COLLECTED,
                   after=c.seconds(c.cfg.answer_stale_after)),
            c.cfg.answer_stale_for, "warning",
            "A storpath exporter answers its scrapes with data read for an earlier one.",
            f"""The storpath exporter on {{{{ $labels.instance }}}} has answered every scrape for
            {c.cfg.answer_stale_for} with an answer read {{{{ $value | humanizeDuration }}}} before Prometheus
            asked (more than {c.cfg.answer_stale_after}): its scrapes take longer than Prometheus' scrape timeout,
            so every storage alert sees the host that much late.""",
        ),
        c.alert(
            "StorpathTargetDown",
            f"up{{{c.target_selector}}} == 0",
            c.cfg.target_down_for, "warning",
            "Prometheus cannot scrape a storpath exporter.",
            f"""Prometheus has not been able to scrape the storpath exporter {{{{ $labels.instance }}}}
            (job {{{{ $labels.job }}}}) for {c.cfg.target_down_for}: no storage alert can fire for that host.""",
            runbook_via_live_target=True,
        ),
        # A target that is gone from service discovery (the DaemonSet deleted, the monitor not
        # selected, a relabelling that renamed the job) has no `up` series at all, so
        # StorpathTargetDown cannot see it.
        c.alert(
            "StorpathTargetAbsent",
            f"absent(up{{{c.target_selector}}})",
            c.cfg.target_absent_for, "warning",
            "Prometheus has no storpath target at all.",
            f"""Prometheus has found no target of job {{{{ $labels.job }}}} to scrape for
            {c.cfg.target_absent_for}: the exporter is not deployed, its ServiceMonitor or PodMonitor is not
            selected, or its job is named differently from what the rules select. No storage alert can fire.""",
            runbook_via_live_target=True,
        ),
    ]
