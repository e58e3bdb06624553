"""Dashboards: valid Grafana models, generated from code, and every query proven
against a real Prometheus.

The query test builds a small fleet of fixture machines with faults, runs the real
`storpath serve` on each (one with a real fio probe), Debian's node_exporter on a
fixture's procfs, and Debian's Prometheus with the recording rules from rules/ and 30
days of history backfilled with `promtool tsdb create-blocks-from openmetrics`. Every
panel query, variable query and annotation of every dashboard must then return data.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path
from unittest import mock

import pytest
import yaml

from tests.conftest import ROOT, require_tool

DASH_DIR = Path(ROOT) / "dashboards"
DASHBOARDS = sorted(DASH_DIR.glob("*.json"))
UIDS = {"storpath-fleet.json": "storpath-fleet", "storpath-host.json": "storpath-host",
        "storpath-capacity.json": "storpath-capacity"}


def load(path):
    return json.loads(path.read_text())


def all_targets(dash):
    for p in dash["panels"]:
        for t in p.get("targets", []):
            yield p, t


# ---- structure -------------------------------------------------------------------
def test_generated_dashboards_are_current():
    result = subprocess.run([sys.executable, str(DASH_DIR / "generate.py"), "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert {p.name for p in DASHBOARDS} == set(UIDS)


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_dashboard_model_is_valid(path):
    dash = load(path)
    assert dash["uid"] == UIDS[path.name]
    assert dash["schemaVersion"] >= 36 and dash["title"].startswith("storpath / ")
    assert "storpath" in dash["tags"]
    names = [v["name"] for v in dash["templating"]["list"]]
    assert names[:3] == ["datasource", "job", "instance"]
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    cells = {}
    for p in dash["panels"]:
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24 and g["h"] > 0, p["title"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"{p['title']!r} overlaps {cells[(x, y)]!r}"
                cells[(x, y)] = p["title"]
        if p["type"] == "text":
            continue
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert p["targets"], p["title"]
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs)) and all(refs)
        for t in p["targets"]:
            assert t["expr"].strip() and t["datasource"]["uid"] == "${datasource}"
    for panel, t in all_targets(dash):
        used = set(re.findall(r"\$(\w+)", t["expr"]))
        assert used <= set(names), f"{panel['title']}: unknown variables {used - set(names)}"


def test_throughput_panels_use_byte_units():
    for path in DASHBOARDS:
        for p in load(path)["panels"]:
            exprs = " ".join(t["expr"] for t in p.get("targets", []))
            if p["type"] == "timeseries" and "bytes" in exprs and "/" not in exprs.split("bytes", 1)[1][:3]:
                if "ratio" not in p["title"].lower() and "/ expected" not in p["title"] and "%" not in p["title"] \
                        and "Headroom" not in p["title"] and "capacity" not in p["title"].lower():
                    assert p["fieldConfig"]["defaults"]["unit"] in ("Bps", "bytes", "percentunit"), p["title"]


# ---- queries against a real Prometheus -------------------------------------------------
FLEET = [  # (instance label, machine, variant)
    ("am4-x2", "am4-x570-firecuda", "x2-link"),
    ("am4-gen3", "am4-x570-firecuda", "gen3-port"),
    ("am4-sata", "am4-x570-firecuda", "sata-slowed"),
    ("dell", "dell-r900-sas1068e", "before-fix"),
    ("epyc", "epyc-7443-highpoint", "md-degraded"),
    ("intel", "intel-r2224wft-switches", "zfs-degraded"),
    ("supermicro", "supermicro-x10dri-hyperm2", "healthy"),
]
HISTORY_DAYS = 30
HISTORY_STEP = 6 * 3600
# Only what the long-range panels (trends over weeks, projections) need a history of;
# everything else is scraped live.
HISTORY_METRICS = {
    "storpath_zfs_pool_allocated_bytes", "storpath_zfs_pool_size_bytes", "storpath_probe_read_bytes_per_second",
    "storpath_probe_expected_read_bytes_per_second", "node_disk_read_bytes_total", "node_disk_written_bytes_total",
    "storpath_block_device_info", "storpath_nvme_controller_info",
    "storpath_pcie_expected_link_bandwidth_bytes_per_second",
}


def substitute(expr: str) -> str:
    return expr.replace("$job", ".*").replace("$instance", ".*").replace("$device", ".*")


def _history(prom_text: str, instance: str, job: str, now: float) -> str:
    """A month of history for the series of one scrape: gauges keep their value,
    except pool allocation that grows; counters grow linearly."""
    out = []
    for line in prom_text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$", line)
        if not m:
            continue
        name, labels, value = m.group(1), m.group(2) or "{}", float(m.group(3))
        if name not in HISTORY_METRICS or value != value:
            continue
        inner = labels[1:-1]
        inner = f'{inner},instance="{instance}",job="{job}"' if inner else f'instance="{instance}",job="{job}"'
        points = []
        span = HISTORY_DAYS * 86400
        # Coarse over the month, then one sample a minute over the last two hours (rate()
        # and subqueries need two samples in every window); all before Prometheus starts.
        ages = list(range(span, 2 * 3600, -HISTORY_STEP)) + list(range(2 * 3600, 60, -60))
        for age in ages:
            ts = now - age
            v = value
            if name == "storpath_zfs_pool_allocated_bytes":
                v = value * (0.8 + 0.2 * (1 - age / span))
            elif name.endswith("_total"):
                v = value + 2e8 * (span - age)  # reads at 200 MB/s
            points.append(f"{name}{{{inner}}} {v} {ts:.3f}")
        out.append((name, points))
    out.sort(key=lambda item: item[0])
    lines = []
    for _, points in out:
        lines.extend(points)
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def fleet_prometheus(tmp_path_factory, machine_tree):
    from tests.integration import harness

    promtool = require_tool("promtool", "prometheus")
    require_tool("prometheus", "prometheus")
    require_tool("prometheus-node-exporter", "prometheus-node-exporter")
    require_tool("fio", "fio")
    work = tmp_path_factory.mktemp("dash")
    backend = harness.ProcessBackend(work)
    try:
        jobs_storpath, jobs_node, scrapes = [], [], []
        for instance, machine, variant in FLEET:
            root = machine_tree(machine, variant)
            extra = ["--path.captured=" + os.path.join(root, "captured")]
            if instance == "am4-x2":
                config = work / "probe.yml"
                config.write_text(yaml.safe_dump({"probes": {
                    "runtime": "1s", "interval": "1h", "jitter": "0s", "file_size": "16MiB",
                    "state_file": str(work / "probes.json"),
                    "targets": [{"file": str(work / "probe-target"), "profiles": ["seqread"],
                                 "expected_read_bytes_per_second": "2GB/s"}]}}))
                extra.append(f"--config.file={config}")
            with mock.patch.dict(os.environ, {"STATE_DIRECTORY": str(work)}):  # where the state file may be
                svc = backend.host_exporter(Path(root) / "sys", Path(root) / "proc", extra_args=extra)
            jobs_storpath.append({"targets": [f"127.0.0.1:{svc.port}"], "labels": {"instance": instance}})
            node = backend.node_exporter([f"--path.procfs={root}/proc", f"--path.sysfs={root}/sys",
                                          "--collector.disable-defaults", "--collector.diskstats"])
            jobs_node.append({"targets": [f"127.0.0.1:{node.port}"], "labels": {"instance": instance}})
            scrapes.append((instance, svc, node))
        now = time.time()
        history = work / "history.om"
        with history.open("w") as handle:
            for instance, svc, node in scrapes:
                handle.write(_history(svc.get("/metrics")[1], instance, "storpath", now))
                handle.write(_history(node.get("/metrics")[1], instance, "node", now))
            handle.write("# EOF\n")
        data = work / "prom-data"
        data.mkdir()
        result = subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics",
                                 "--max-block-duration=744h", str(history), str(data)],
                                capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr[-3000:]
        rules = work / "rules"
        rules.mkdir()
        for path in (Path(ROOT) / "rules").glob("*.yml"):
            (rules / path.name).write_text(path.read_text())
        config = {"global": {"scrape_interval": "2s", "evaluation_interval": "2s", "scrape_timeout": "2s"},
                  "rule_files": [str(rules / "*.yml")],
                  "scrape_configs": [{"job_name": "storpath", "static_configs": jobs_storpath},
                                     {"job_name": "node", "static_configs": jobs_node}]}
        (work / "prometheus.yml").write_text(yaml.safe_dump(config))
        port = harness.free_port()
        prom = harness._start_process("prometheus", [
            harness.BINARIES["prometheus"], f"--config.file={work / 'prometheus.yml'}",
            f"--storage.tsdb.path={data}", "--storage.tsdb.retention.time=90d",
            f"--web.listen-address=127.0.0.1:{port}"], work, port, harness.Prometheus)
        backend._stops.append(prom.stop)
        prom.wait_ready("/-/ready", 120)
        # Live data: a few scrapes, the probe's first result, and a link that changes.
        am4_root = machine_tree("am4-x570-firecuda", "x2-link")
        deadline = time.time() + 90
        while not prom.query('storpath_probe_read_bytes_per_second{instance="am4-x2"}'):
            assert time.time() < deadline, "the probe result never reached Prometheus"
            time.sleep(1)
        width = Path(am4_root) / "sys/bus/pci/devices/0000:05:00.0/current_link_width"
        original = width.read_text().strip()
        for value in ("1", original):  # the link retrains to x1, then back
            width.write_text(value + "\n")
            selector = f'storpath_pcie_current_link_width{{instance="am4-x2", address="0000:05:00.0"}} == {value}'
            deadline = time.time() + 60
            while not prom.query(selector):
                assert time.time() < deadline, f"Prometheus never saw the link at x{value}"
                time.sleep(0.5)
        yield prom
    finally:
        backend.close()


def _query(prom, expr: str, endpoint: str = "query", **params):
    url = f"{prom.url}/api/v1/{endpoint}?" + urllib.parse.urlencode({"query": expr, **params})
    import requests

    body = requests.get(url, timeout=60).json()
    assert body["status"] == "success", f"{expr}\n{body}"
    return body["data"]["result"]


@pytest.mark.integration
@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_every_panel_query_returns_data(fleet_prometheus, path):
    dash = load(path)
    empty = []
    for panel, t in all_targets(dash):
        expr = substitute(t["expr"])
        if not _query(fleet_prometheus, expr):
            empty.append(f"{panel['title']} [{t['refId']}]: {expr}")
        if panel["type"] == "timeseries":
            end = time.time()
            _query(fleet_prometheus, expr, "query_range", start=end - 1800, end=end, step=60)
    assert not empty, "queries without data on a fleet that has it:\n" + "\n".join(empty)


@pytest.mark.integration
@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_every_variable_resolves(fleet_prometheus, path):
    import requests

    for var in load(path)["templating"]["list"]:
        if var["type"] != "query":
            continue
        m = re.match(r"label_values\((.+), (\w+)\)$", var["query"]["query"])
        assert m, var["query"]
        selector, label = substitute(m.group(1)), m.group(2)
        body = requests.get(f"{fleet_prometheus.url}/api/v1/series",
                            params={"match[]": selector}, timeout=30).json()
        values = {s.get(label) for s in body["data"]} - {None}
        assert values, f"variable {var['name']} has no values ({selector})"


@pytest.mark.integration
def test_link_change_annotation_finds_the_change(fleet_prometheus):
    host = load(DASH_DIR / "storpath-host.json")
    queries = [a for a in host["annotations"]["list"] if "expr" in a]
    assert queries
    for annotation in queries:
        result = _query(fleet_prometheus, substitute(annotation["expr"]))
        assert {r["metric"].get("address") for r in result} >= {"0000:05:00.0"}, result
