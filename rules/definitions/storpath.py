"""The exporter itself: a collector failing, the target down."""


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
    ]
