"""The Host board's throughput panels find the node's node_exporter on both Kubernetes stacks'
defaults, with a real Prometheus (Debian's 2.x and Prometheus 3) scraping a real node_exporter:

- kube-prometheus-stack: node-exporter's instance stays `<pod ip>:9100` (hostNetwork: the node's
  address); only its node_uname_info's nodename names the node;
- kube-prometheus: its ServiceMonitor relabels instance to the node's name.

storpath's monitors set its instance to the node's name, which is what the board's `$instance`
holds. node_exporter runs on this machine, so the node's name is this machine's host name."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.gotools import go_tool

from . import harness
from .conftest import missing

HOST_BOARD = harness.REPO / "dashboards" / "storpath-host.json"
NODE = os.uname().nodename
# What prometheus-operator's ServiceMonitor config gives every endpoint target, and the node's
# name as the Kubernetes service discovery reports it (a meta label: dropped after relabelling).
OPERATOR_LABELS = {"namespace": "monitoring", "service": "node-exporter", "endpoint": "http-metrics",
                   "pod": "node-exporter-abcde", "container": "node-exporter",
                   "__meta_kubernetes_pod_node_name": NODE}
STACKS = {
    # prometheus-community/kube-prometheus-stack: no relabelling of instance
    "kube-prometheus-stack": [],
    # prometheus-operator/kube-prometheus: components/node-exporter's ServiceMonitor
    "kube-prometheus": [{"source_labels": ["__meta_kubernetes_pod_node_name"], "target_label": "instance",
                         "regex": "(.*)", "replacement": "$1", "action": "replace"}],
}


def throughput_queries() -> dict:
    board = json.loads(HOST_BOARD.read_text())
    found = {}
    for panel in board["panels"]:
        if panel["title"].startswith(("Read throughput", "Write throughput")):
            found[panel["title"]] = panel["targets"][0]["expr"]
    assert len(found) == 2, sorted(found)
    return found


def prometheus_binary(version: str) -> str:
    if version == "2":
        path = harness.BINARIES["prometheus"]
        if not os.access(path, os.X_OK):
            missing(f"{path} (Debian's prometheus) is not installed")
        return path
    return go_tool("prometheus")


@pytest.mark.parametrize("version", ["2", "3"], ids=["prometheus-2", "prometheus-3"])
@pytest.mark.parametrize("stack", sorted(STACKS))
def test_host_board_throughput_finds_node_exporter(tmp_path, stack, version):
    if not os.access(harness.BINARIES["node-exporter"], os.X_OK):
        missing("Debian's prometheus-node-exporter is not installed")
    binary = prometheus_binary(version)
    backend = harness.ProcessBackend(tmp_path, {"prometheus": binary})
    try:
        node = backend.node_exporter(["--collector.disable-defaults", "--collector.diskstats", "--collector.uname"])
        config = harness.prometheus_config({})
        config["scrape_configs"] = [{
            "job_name": "node-exporter",
            "static_configs": [{"targets": [node.address], "labels": OPERATOR_LABELS}],
            "relabel_configs": STACKS[stack],
        }]
        prom = backend.prometheus(config)
        # the stack's instance label, as the premise says
        harness.wait_until(lambda: prom.query("node_uname_info"), 60, "node_uname_info scraped")
        (uname,) = prom.query("node_uname_info")
        assert uname["metric"]["nodename"] == NODE
        expected_instance = NODE if stack == "kube-prometheus" else node.address
        assert uname["metric"]["instance"] == expected_instance
        for title, expr in throughput_queries().items():
            expr = expr.replace("$instance", NODE).replace("$device", ".*").replace("$__rate_interval", "1m")
            deadline = time.time() + 60
            while not (result := prom.query(expr)):
                assert time.time() < deadline, f"{stack}, Prometheus {version}: {title!r} returns nothing:\n{expr}"
                time.sleep(0.5)
            # one series per device: found once, not twice where both ways find it
            devices = [r["metric"]["device"] for r in result]
            assert len(devices) == len(set(devices)), result
    finally:
        backend.close()
