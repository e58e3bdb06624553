"""A small fleet of fixture machines with known faults behind a real Prometheus, and what a
dashboard panel shows on it.

Each fixture machine runs the real `storpath serve` (one with a real fio probe), Debian's
node_exporter runs on its procfs, and Debian's Prometheus scrapes them all with the rules of
rules/ and 30 days of history backfilled with `promtool tsdb create-blocks-from openmetrics`.
The capacity rules run every 2 s here instead of every 5 minutes, and the history also holds
the month of their inputs they would have recorded (hourly read maxima, pool fill levels).
About 25 s to start on the 2-core development VM.
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
from typing import Dict, List

from unittest import mock

import pytest
import yaml

from tests.conftest import IN_CI, ROOT, require_tool

try:
    import grafana_foundation_sdk  # noqa: F401  dashboards/generate.py builds with it
except ImportError:
    if IN_CI:
        raise
    pytest.skip("grafana-foundation-sdk is not installed (it needs Python 3.11+): scripts/setup-python --test",
                allow_module_level=True)

DASH_DIR = Path(ROOT) / "dashboards"

FLEET = [  # (instance label, machine, variant)
    ("am4-x2", "am4-x570-firecuda", "x2-link"),
    ("am4-gen3", "am4-x570-firecuda", "gen3-port"),
    ("am4-sata", "am4-x570-firecuda", "sata-slowed"),
    ("dell", "dell-r900-sas1068e", "before-fix"),
    ("epyc", "epyc-7443-highpoint", "md-degraded"),
    ("intel", "intel-r2224wft-switches", "zfs-degraded"),
    ("supermicro", "supermicro-x10dri-hyperm2", "healthy"),
    ("am4-hot", "am4-x570-firecuda", "hot-drive"),
    ("intel-misaligned", "intel-r2224wft-switches", "misaligned-partition"),
    ("perc", "dell-r730xd-perc-h730p", "degraded-writethrough"),
    # every path to the data: an NVMe/TCP controller reconnecting, a SAS shelf with a failed
    # dm-multipath path and one with a drive reached through one port only; a GPU
    ("r750-tcp", "dell-r750-nvmeof", "tcp-path-dead"),
    ("shelf-failed", "supermicro-dualport-sas-shelf", "path-failed"),
    ("shelf-missing", "supermicro-dualport-sas-shelf", "path-missing"),
    ("z690-gpu", "desktop-z690-single-socket", "healthy"),
    ("z690-capped", "desktop-z690-single-socket", "capped-thermal"),  # a Target Link Speed cap and its cause
]
HISTORY_DAYS = 30
HISTORY_STEP = 6 * 3600
# Reads in the history: every block device read at this rate for the whole month.
HISTORY_READ_RATE = 2e8
# Pools grew linearly from this fraction of their allocation 30 days ago to what the fixture shows.
HISTORY_POOL_START = 0.8
# Only what the long-range panels (trends over weeks, projections) need a history of;
# everything else is scraped live.
HISTORY_METRICS = {
    "storpath_zfs_pool_allocated_bytes", "storpath_zfs_pool_size_bytes", "storpath_probe_read_bytes_per_second",
    "storpath_probe_expected_read_bytes_per_second", "node_disk_read_bytes_total", "node_disk_written_bytes_total",
    "storpath_block_device_info", "storpath_nvme_controller_info",
    "storpath_pcie_expected_link_bandwidth_bytes_per_second",
}


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def _ages() -> List[int]:
    # Coarse over the month, then one sample a minute over the last two hours (rate() and
    # the hourly maxima need samples in every window); all before Prometheus starts.
    span = HISTORY_DAYS * 86400
    return list(range(span, 2 * 3600, -HISTORY_STEP)) + list(range(2 * 3600, 60, -60))


def _series(name: str, labels: Dict[str, str], values) -> List[str]:
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return [f"{name}{{{inner}}} {v} {ts:.3f}" for ts, v in values]


def _history(prom_text: str, instance: str, job: str, now: float) -> Dict[str, List[str]]:
    """A month of history for the series of one scrape (name -> OpenMetrics lines): gauges keep
    their value, pool allocation grows, counters grow linearly up to the value scraped now;
    plus what the capacity rules would have recorded from them."""
    out: Dict[str, List[str]] = {}
    span = HISTORY_DAYS * 86400
    pools: Dict[str, Dict[str, float]] = {}
    for line in prom_text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$", line)
        if not m:
            continue
        name, value = m.group(1), float(m.group(3))
        if name not in HISTORY_METRICS or value != value:
            continue
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        if name.startswith("storpath_zfs_pool_"):
            pools.setdefault(labels["zpool"], {})[name] = value

        def at(age, value=value, name=name):
            if name == "storpath_zfs_pool_allocated_bytes":
                return value * (HISTORY_POOL_START + (1 - HISTORY_POOL_START) * (1 - age / span))
            if name.endswith("_total"):
                return value - HISTORY_READ_RATE * age
            return value
        points = [(now - age, at(age)) for age in _ages()]
        out.setdefault(name, []).extend(_series(name, {**labels, "instance": instance, "job": job}, points))
        if name == "node_disk_read_bytes_total":
            # The capacity rules' hourly read maximum, as they would have recorded it.
            rule = "instance_device:storpath_block_device_read_bytes:max_rate5m_1h"
            out.setdefault(rule, []).extend(_series(rule, {"instance": instance, "device": labels["device"]},
                                                    [(t, HISTORY_READ_RATE) for t, _ in points]))
    for zpool, values in pools.items():
        rule = "zpool:storpath_zfs_pool_capacity:avg5m"
        ratio = values["storpath_zfs_pool_allocated_bytes"] / values["storpath_zfs_pool_size_bytes"]
        points = [(now - age, ratio * (HISTORY_POOL_START + (1 - HISTORY_POOL_START) * (1 - age / span)))
                  for age in _ages()]
        out.setdefault(rule, []).extend(_series(rule, {"instance": instance, "job": job, "zpool": zpool}, points))
    return out


def pytest_collection_modifyitems(config, items):
    # The fleet is one per pytest process: its tests run alone in the full suite (scripts/test),
    # in one process, instead of each pytest-xdist worker starting a fleet of its own.
    for item in items:
        if "fleet_prometheus" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.alone)


@pytest.fixture(scope="session")
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
        series: Dict[str, List[str]] = {}
        for instance, svc, node in scrapes:
            for job, service in (("storpath", svc), ("node", node)):
                for name, lines in _history(service.get("/metrics")[1], instance, job, now).items():
                    series.setdefault(name, []).extend(lines)
        history = work / "history.om"
        with history.open("w") as handle:
            for name in sorted(series):  # OpenMetrics wants each metric's lines together
                handle.write("\n".join(series[name]) + "\n")
            handle.write("# EOF\n")
        data = work / "prom-data"
        data.mkdir()
        result = subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics",
                                 "--max-block-duration=744h", str(history), str(data)],
                                capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr[-3000:]
        # The rules as a site would render them, with the capacity group evaluated every 2 s.
        rules = work / "rules"
        site = work / "site.yml"
        site.write_text("capacity:\n  evaluation_interval: 2s\n")
        result = subprocess.run([sys.executable, str(Path(ROOT) / "rules" / "generate.py"), "--config", str(site),
                                 "--out", str(rules)], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
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
        # Live data: a few scrapes, the probe's first result, every rule group evaluated,
        # and a link that changes.
        am4_root = machine_tree("am4-x570-firecuda", "x2-link")
        for expr in ('storpath_probe_read_bytes_per_second{instance="am4-x2"}',
                     "instance_device:storpath_block_device_read_peak:link_ratio",
                     'instance_device:storpath_block_device_read_bytes:rate5m{device=~"md.*"}',
                     "zpool:storpath_zfs_pool_capacity_warning:days_left",
                     'target_profile:storpath_probe_read_throughput:ratio{instance="am4-x2"}'):
            deadline = time.time() + 90
            while not prom.query(expr):
                assert time.time() < deadline, f"{expr} never reached Prometheus"
                time.sleep(0.5)
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


def substitute(expr: str, instance: str = ".*") -> str:
    """A panel query with the dashboard's variables set: every job and device, one host or all."""
    # $__rate_interval: what Grafana makes of it for a 15 s scrape interval (four intervals).
    expr = expr.replace("$__rate_interval", "1m")
    expr = expr.replace('job="$job"', 'job="storpath"').replace("$job", ".*").replace("$device", ".*")
    return expr.replace('instance="$instance"', f'instance="{instance}"').replace("$instance", instance)


def query(prom, expr: str, endpoint: str = "query", **params) -> list:
    import requests

    url = f"{prom.url}/api/v1/{endpoint}?" + urllib.parse.urlencode({"query": expr, **params})
    body = requests.get(url, timeout=60).json()
    assert body["status"] == "success", f"{expr}\n{body}"
    return body["data"]["result"]


def table_rows(prom, panel: dict, instance: str = ".*") -> List[dict]:
    """The rows a table panel shows: its instant queries merged on their common labels (Grafana's
    `merge`), then its `organize` transformation (values renamed, hidden columns dropped)."""
    single = len(panel["targets"]) == 1
    rows: List[dict] = []
    for target in panel["targets"]:
        column = "Value" if single else f"Value #{target['refId']}"
        for sample in query(prom, substitute(target["expr"], instance)):
            row = {**sample["metric"], column: float(sample["value"][1])}
            for existing in rows:
                common = set(existing) & set(row) - {column}
                if all(existing[k] == row[k] for k in common if not k.startswith("Value")):
                    existing.update(row)
                    break
            else:
                rows.append(row)
    organize = next(t["options"] for t in panel["transformations"] if t["id"] == "organize")
    shown = []
    for row in rows:
        shown.append({organize["renameByName"].get(k, k): v for k, v in row.items()
                      if not organize["excludeByName"].get(k)})
    return shown


def panel(dashboard: str, title: str) -> dict:
    panels = load(DASH_DIR / dashboard)["panels"]
    found = [p for p in panels if p["title"] == title] or [p for p in panels if p["title"].startswith(title)]
    assert len(found) == 1, f"{dashboard}: {len(found)} panels titled {title!r}"
    return found[0]
