"""The exporter itself: a collector failing, the target down, no target at all."""


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
        c.alert(
            "StorpathTargetDown",
            f"up{{{c.target_selector}}} == 0",
            c.cfg.target_down_for, "warning",
            "Prometheus cannot scrape a storpath exporter.",
            f"""Prometheus has not been able to scrape the storpath exporter {{{{ $labels.instance }}}}
            (job {{{{ $labels.job }}}}) for {c.cfg.target_down_for}: no storage alert can fire for that host.""",
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
        ),
    ]
