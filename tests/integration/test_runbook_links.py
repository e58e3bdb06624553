"""Every alert's runbook_url, as a real Prometheus expands it from the shipped rules, opens its
runbook on a running exporter, from a default install: Prometheus scrapes the exporter by its
address (the target's `instance`, as Prometheus names it without relabelling) and the rules keep
their default `runbook_url_base`.

Each shipped alert is loaded as it is (labels and annotations untouched, `for:` removed) with an
expression that makes it fire on that target the way it fires in life: on the exporter's `up`
series (job and instance, the labels every alert about a host carries), StorpathTargetDown on a
second target of the job that does not answer, StorpathTargetAbsent on no series at all (only the
job as labels). Each firing alert's runbook_url, as Prometheus' API gives it, is fetched: 200, and
the runbook of docs/runbooks/ byte for byte."""

from __future__ import annotations

import urllib.request

import pytest
import yaml

from . import harness

pytestmark = pytest.mark.integration

RUNBOOKS = harness.REPO / "docs" / "runbooks"
JOB = "storpath"


def _trigger(rule: dict) -> str:
    if rule["expr"].startswith("absent("):
        return f'absent(storpath_no_such_series{{job="{JOB}"}})'
    if rule["alert"] == "StorpathTargetDown":
        return rule["expr"]
    return f'up{{job="{JOB}"}} == 1'


def _rules(dest) -> list:
    alerts = []
    for path in sorted((harness.REPO / "rules").glob("*.yml")):
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                if "alert" in rule:
                    alerts.append({"alert": rule["alert"], "expr": _trigger(rule), "labels": rule["labels"],
                                   "annotations": {"runbook_url": rule["annotations"]["runbook_url"]}})
    dest.mkdir()
    (dest / "runbook-links.yml").write_text(yaml.safe_dump({"groups": [{"name": "runbook-links", "rules": alerts}]}))
    return alerts


def _fetch(url: str):
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def test_every_alerts_runbook_url_opens_its_runbook(backend, host_exporter, tmp_path):
    alerts = _rules(tmp_path / "rules")
    assert len(alerts) > 60
    gone = f"127.0.0.1:{harness.free_port()}"  # a target that never answers
    config = harness.prometheus_config({JOB: [host_exporter.address, gone]}, interval="1s", evaluation_interval="1s")
    prometheus = backend.prometheus(config, rules_dir=tmp_path / "rules")
    names = {alert["alert"] for alert in alerts}

    def firing():
        got = [a for a in prometheus.alerts() if a["state"] == "firing"]
        return got if {a["labels"]["alertname"] for a in got} >= names else None

    active = harness.wait_until(firing, 90, "every alert firing", interval=0.5,
                                diagnostics=lambda: prometheus.logs()[-3000:])
    checked = set()
    for alert in active:
        name, url = alert["labels"]["alertname"], alert["annotations"]["runbook_url"]
        assert url.startswith(f"http://{host_exporter.address}/runbooks/"), (name, url)
        status, body = _fetch(url)
        assert status == 200, (name, url, status)
        assert body == (RUNBOOKS / f"{name}.md").read_bytes(), (name, url)
        checked.add(name)
    assert checked == names
    print(f"{len(checked)} alerts' runbook links opened on {host_exporter.address}")
