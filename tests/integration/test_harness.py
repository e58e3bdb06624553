"""The harness other integration tests build on, in the selected mode (STORPATH_IT_MODE):
Prometheus with the repository's rules scrapes a host-side storpath exporter and node_exporter,
and the alert for the fixture tree's slow PCIe link reaches Alertmanager."""

from __future__ import annotations

from . import harness


def test_prometheus_scrapes_exporter_and_alerts(backend, host_exporter, tmp_path):
    link_alerts = harness.copy_rules(tmp_path / "rules")
    node = backend.node_exporter(["--collector.disable-defaults", "--collector.diskstats", "--collector.time"])
    alertmanager = backend.alertmanager()
    prometheus = backend.prometheus(
        harness.prometheus_config({"storpath": [host_exporter.address], "node": [node.address]},
                                  alertmanagers=[alertmanager.address]),
        rules_dir=tmp_path / "rules")

    targets = prometheus.wait_targets_up(["storpath", "node"], timeout=60)
    assert {t["labels"]["job"] for t in targets} == {"storpath", "node"}
    assert prometheus.query("storpath_pcie_current_link_speed_transfers_per_second")

    rule_groups = prometheus.get_json("/api/v1/rules")["data"]["groups"]
    assert rule_groups, "the rules were loaded"
    assert all(r["health"] == "ok" for g in rule_groups for r in g["rules"]), \
        [(r["name"], r.get("lastError")) for g in rule_groups for r in g["rules"] if r["health"] != "ok"]

    def received():
        return [a for a in alertmanager.alerts() if a["labels"].get("alertname") in link_alerts]

    alerts = harness.wait_until(received, 60, f"one of {sorted(link_alerts)} in Alertmanager", interval=0.5,
                                diagnostics=lambda: str(prometheus.alerts()) + "\n" + prometheus.logs())
    assert any(a["labels"].get("address") in ("0000:01:00.0", "0000:00:01.1") for a in alerts), alerts
