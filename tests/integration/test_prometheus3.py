"""Prometheus 3 (the server of github.com/prometheus/prometheus v0.316.0, built by scripts/go-tool)
scrapes a running storpath with every rule of rules/ loaded: the target is up, every rule
evaluates without error, and the fixture tree's fault (an NVMe link trained at 8 GT/s where both
ends support 16) fires its alert. Debian's Prometheus 2 does the same in test_alerts.py."""

from __future__ import annotations

from tests.gotools import go_tool

from . import harness


def test_prometheus_3_scrapes_storpath_and_runs_every_rule(tmp_path, sysfs_tree, require_exporter):
    binary = go_tool("prometheus")
    backend = harness.ProcessBackend(tmp_path / "services", {"prometheus": binary})
    (tmp_path / "services").mkdir()
    try:
        exporter = backend.host_exporter(sysfs_tree)
        rules = tmp_path / "rules"
        link_alerts = harness.copy_rules(rules)
        prom = backend.prometheus(harness.prometheus_config({"storpath": [exporter.address]}), rules_dir=rules)
        assert prom.get_json("/api/v1/status/buildinfo")["data"]["version"].startswith("3."), \
            prom.get_json("/api/v1/status/buildinfo")
        prom.wait_targets_up(["storpath"], timeout=60)

        def firing():
            names = {a["labels"]["alertname"] for a in prom.alerts() if a["state"] == "firing"}
            return names if link_alerts & names else None
        names = harness.wait_until(firing, 60, f"one of {sorted(link_alerts)} firing", diagnostics=prom.logs)
        assert "StorpathTargetDown" not in names and "StorpathTargetAbsent" not in names
        harness.wait_until(lambda: prom.query("count_over_time(up{job=\"storpath\"}[1m]) >= 5"), 60,
                           "five scrapes", diagnostics=prom.logs)
        groups = prom.get_json("/api/v1/rules")["data"]["groups"]
        assert len(groups) == len(list((harness.REPO / "rules").glob("*.yml")))
        for group in groups:
            for rule in group["rules"]:
                assert rule["health"] == "ok", f"{rule['name']}: {rule.get('lastError')}"
    finally:
        backend.close()
