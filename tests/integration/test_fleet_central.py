"""The central side of a fleet on real engines: what docs/fleet-scale.md tells an operator to run.

Two storpath exporters on fixture machines make a small fleet: am4-x570-firecuda `x2-link` (four
FireCuda 530, one trained at x2: PcieLinkWidthBelowExpected on its host, and half the link of its
three siblings: NvmeLinkBandwidthBelowModelPeers in the fleet) and supermicro-x10dri-hyperm2
(four Samsung 970 EVO, healthy). A reference Prometheus scrapes both directly with every rule
loaded: what a single Prometheus would answer. Then:

* remote_write: an edge Prometheus in agent mode writes to VictoriaMetrics (Debian's
  victoria-metrics, single node) with the documented keep-list, and vmalert evaluates every
  shipped rule over VictoriaMetrics and sends to a real Alertmanager;
* federation: a full edge Prometheus with the rules, and a central Prometheus that federates it
  with the documented job (its match[] list verbatim) and evaluates rules/fleet.yml.

On the central side the alerts are the reference's, and every dashboard panel query answers what
the reference answers (every panel of every dashboard through remote_write, which keeps all
series; the fleet dashboard's panels through federation, which keeps the fleet view only). The
remote_write and federation configurations are read from docs/fleet-scale.md, so the doc is what
is proven. Rules are rendered with `--for 0s`, everything scrapes and evaluates every second.
All engines run as local processes in either STORPATH_IT_MODE (see fleet_engines.py).
"""

from __future__ import annotations

import importlib.util
import json
import re
import time
from contextlib import ExitStack
from pathlib import Path

import pytest
import yaml

from . import fleet_engines, harness
from .conftest import missing

pytestmark = pytest.mark.integration

DOC = harness.REPO / "docs" / "fleet-scale.md"
FLEET = [("am4-x570-firecuda", "x2-link"), ("supermicro-x10dri-hyperm2", "healthy")]
FLEET_DASHBOARD = "storpath-fleet"

# From the machines' READMEs: the x2 link on its host, its drive against its three FireCuda siblings.
OUTLIER = ("NvmeLinkBandwidthBelowModelPeers", "0000:05:00.0")
HOST_FAULT = ("PcieLinkWidthBelowExpected", "0000:05:00.0")
OUTLIER_DESCRIPTION = ["nvme1 (Seagate FireCuda 530 ZP2000GM30023, firmware SU6SM003) at 0000:05:00.0",
                       "has a link of 3.94 GB/s per direction, 50% of the median of its siblings",
                       "7.88 GB/s over 4 drives"]


def _doc_yaml(marker: str):
    """The YAML block of docs/fleet-scale.md that contains ``marker``."""
    for block in re.findall(r"```yaml\n(.*?)```", DOC.read_text(), re.S):
        if marker in block:
            return yaml.safe_load(block)
    raise AssertionError(f"docs/fleet-scale.md has no yaml block with {marker!r}")


def _render_rules(dest: Path) -> list[Path]:
    spec = importlib.util.spec_from_file_location("storpath_rules_generate", harness.REPO / "rules" / "generate.py")
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    config = generate.load_config()
    # The capacity group runs every 5 minutes in production; here every rule must have run within seconds.
    config["capacity"]["evaluation_interval"] = "1s"
    # vmalert 1.79 (Debian's) refuses `keep_firing_for` (VictoriaMetrics added it in 1.90): a site
    # on it renders the rules with the hold at 0s, as docs/fleet-scale.md says.
    config["pcie"]["counter_alerts_keep_firing_for"] = "0s"
    config["zfs"]["vdev_errors_keep_firing_for"] = "0s"
    return [Path(p) for p in generate.write(str(dest), config=config, for_override="0s")]


def _key(labels: dict) -> tuple:
    for name in ("address", "device", "phy", "zpool", "target", "collector"):
        if name in labels:
            return labels["alertname"], labels[name]
    return labels["alertname"], labels.get("instance", "")


def _firing(alerts: list) -> set:
    return {_key(a["labels"]) for a in alerts if a["state"] == "firing"}


@pytest.fixture
def engines(tmp_path):
    try:
        fleet_engines.require(fleet_engines.PROMETHEUS, fleet_engines.VICTORIA_METRICS, fleet_engines.VMALERT,
                              harness.BINARIES["alertmanager"])
    except harness.Missing as e:
        missing(str(e))
    e = fleet_engines.Engines(tmp_path / "engines")
    yield e
    e.close()


@pytest.fixture
def fleet(exporter_on):
    """The two exporters' scrape addresses."""
    with ExitStack() as stack:
        yield [f"127.0.0.1:{stack.enter_context(exporter_on(m, v)).port}" for m, v in FLEET]


def _scrape_config(targets: list) -> dict:
    return harness.prometheus_config({"storpath": targets}, interval="1s", evaluation_interval="1s")


def _reference(engines, targets, rules) -> fleet_engines.CentralPrometheus:
    """One Prometheus scraping the fleet directly with every rule: the answers to match."""
    prometheus = engines.prometheus(_scrape_config(targets), rules=rules)
    prometheus.wait_targets_up(["storpath"])
    harness.wait_until(lambda: {OUTLIER, HOST_FAULT} <= _firing(prometheus.alerts()), 60,
                       "the reference Prometheus to fire its alerts", diagnostics=prometheus.logs)
    return prometheus


def _settled(central, series: str) -> float:
    """A moment to compare at: once the central side has held ``series`` for a few seconds."""
    harness.wait_until(lambda: central.query(series), 30, f"{series} on the central side",
                       diagnostics=central.logs)
    time.sleep(3)
    return time.time() - 1


def _compare_panels(central, reference, queries, at: float) -> tuple[list, list]:
    """(differences, panels with data): every query answered at ``at`` by both."""
    differences, answered = [], []
    for uid, title, expr in queries:
        want = fleet_engines.samples(reference.query_at(expr, at))
        got = fleet_engines.samples(central.query_at(expr, at))
        if not fleet_engines.same_samples(want, got):
            differences.append(f"{uid}: {title}: {expr}\n  reference: {sorted(want.items())[:5]}"
                               f"\n  central:   {sorted(got.items())[:5]}")
        elif want:
            answered.append((uid, title))
    return differences, answered


def test_remote_write_to_victoria_metrics_with_vmalert(engines, fleet, tmp_path):
    rules = _render_rules(tmp_path / "rules")
    reference = _reference(engines, fleet, rules)
    alertmanager = harness.ProcessBackend(tmp_path / "am")
    try:
        am = alertmanager.alertmanager()
        vm = engines.victoria_metrics()
        vmalert = engines.vmalert(vm, rules, notifier=am)

        remote_write = _doc_yaml("remote_write:")["remote_write"]
        for destination in remote_write:
            destination["url"] = f"{vm.url}/api/v1/write"
            destination["queue_config"] = {"batch_send_deadline": "1s", "min_backoff": "100ms"}
        edge = engines.prometheus({**_scrape_config(fleet), "remote_write": remote_write}, agent=True)

        def diagnostics() -> str:
            return "\n".join(s.logs() for s in (edge, vm, vmalert, am))

        # Every rule file loads in vmalert and every rule evaluates without an error.
        harness.wait_until(lambda: all(r.get("lastError", "") == "" and r.get("lastEvaluation", "").startswith("2")
                                       for g in vmalert.groups() for r in g["rules"]),
                           60, "vmalert to evaluate every rule", diagnostics=diagnostics)
        groups = vmalert.groups()
        assert sorted(g["name"] for g in groups) == sorted(
            g["name"] for g in reference.get_json("/api/v1/rules")["data"]["groups"])

        # The same alerts fire centrally as in one Prometheus, and reach Alertmanager.
        want = _firing(reference.alerts())
        harness.wait_until(lambda: _firing(vmalert.alerts()) == want, 60,
                           f"vmalert to fire {sorted(want)}",
                           diagnostics=lambda: f"{sorted(_firing(vmalert.alerts()))}\n{diagnostics()}")
        received = {_key(a["labels"]): a for a in
                    harness.wait_until(lambda: [a for a in am.alerts() if _key(a["labels"]) == OUTLIER] and am.alerts(),
                                       60, f"{OUTLIER} in Alertmanager", diagnostics=diagnostics)}
        description = received[OUTLIER]["annotations"]["description"]
        for part in OUTLIER_DESCRIPTION:
            assert part in description, description

        # Every panel of every dashboard answers what the reference answers.
        queries = fleet_engines.panel_queries()
        at = _settled(vm, "storpath_scrape_collector_success")
        differences, answered = _compare_panels(vm, reference, queries, at)
        assert not differences, "\n".join(differences)
        assert {uid for uid, _ in answered} >= {"storpath-fleet", "storpath-host"}, answered
    finally:
        alertmanager.close()


def test_federation_to_a_central_prometheus(engines, fleet, tmp_path):
    rules = _render_rules(tmp_path / "rules")
    edge = _reference(engines, fleet, rules)

    job = _doc_yaml("job_name: storpath-federate")[0]
    job["static_configs"] = [{"targets": [edge.address]}]
    job["scrape_interval"] = job["scrape_timeout"] = "1s"
    config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"}, "scrape_configs": [job]}
    central = engines.prometheus(config, rules=[p for p in rules if p.name == "fleet.yml"])
    central.wait_targets_up(["storpath-federate"])

    def diagnostics() -> str:
        return (f"central alerts: {json.dumps(central.alerts())[:3000]}\n"
                f"central ALERTS: {central.query('ALERTS')}\n{central.logs()}")

    # The fleet outlier is evaluated centrally; the edge's own alerts arrive as its ALERTS series.
    harness.wait_until(lambda: OUTLIER in _firing(central.alerts()), 60, f"{OUTLIER} on the central side",
                       diagnostics=diagnostics)
    edge_firing = _firing(edge.alerts()) - {OUTLIER}
    harness.wait_until(
        lambda: {_key(s["metric"]) for s in central.query('ALERTS{alertstate="firing"}')} >= edge_firing,
        30, f"the edge's alerts {sorted(edge_firing)} federated", diagnostics=diagnostics)
    for group in central.get_json("/api/v1/rules")["data"]["groups"]:
        for rule in group["rules"]:
            assert rule["health"] == "ok", f"{rule['name']}: {rule.get('lastError')}"

    # The fleet dashboard answers on the central side what it answers at the edge: the
    # documented match[] list carries every series it reads.
    queries = [q for q in fleet_engines.panel_queries() if q[0] == FLEET_DASHBOARD]
    assert queries, f"no dashboard {FLEET_DASHBOARD} in dashboards/"
    at = _settled(central, "storpath_scrape_collector_success")
    differences, answered = _compare_panels(central, edge, queries, at)
    assert not differences, "the federation match[] of docs/fleet-scale.md misses series:\n" + "\n".join(differences)
    assert len(answered) >= len(queries) // 2, answered
