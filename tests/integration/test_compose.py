"""The compose stack of deploy/compose with the locally built images (docker-compose.local.yml).

Brings the stack up on a fixture sysfs tree with a PCIe link trained below its capability, then checks
that Prometheus scrapes storpath and node_exporter and that the alert for that fault reaches Alertmanager.

Compose implementation: `docker compose` (v2 plugin) when the Docker CLI has it, else `docker-compose`
(v1, Debian bookworm's package docker-compose 1.29, which runs offline against the local engine).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from . import harness
from .conftest import missing

COMPOSE_DIR = harness.REPO / "deploy" / "compose"

def compose_command() -> list[str]:
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    missing("no compose implementation: neither the `docker compose` plugin nor `docker-compose` "
            "(Debian package docker-compose)")


def running_services(project: str) -> list[str]:
    import docker

    containers = docker.from_env().containers.list(filters={"label": f"com.docker.compose.project={project}"})
    return sorted(c.labels["com.docker.compose.service"] for c in containers)


@pytest.fixture
def stack(built_images, require_exporter, sysfs_tree, tmp_path):
    compose = compose_command()
    rules = tmp_path / "rules"
    expected_alerts = harness.copy_rules(rules)
    ports = {k: harness.free_port() for k in ("STORPATH_PORT", "PROMETHEUS_PORT", "ALERTMANAGER_PORT", "GRAFANA_PORT")}
    env = dict(os.environ, COMPOSE_PROJECT_NAME=f"storpath-it-{os.getpid()}",
               STORPATH_SYSFS=str(sysfs_tree), STORPATH_RULES_DIR=str(rules),
               STORPATH_PUBLISH_ADDRESS="127.0.0.1", **{k: str(v) for k, v in ports.items()})
    base = compose + ["-f", "docker-compose.yml", "-f", "docker-compose.local.yml"]

    def run(*args, check=True, timeout=300):
        r = subprocess.run(base + list(args), cwd=COMPOSE_DIR, env=env, capture_output=True, text=True,
                           timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"{' '.join(base + list(args))} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
        return r

    start = time.monotonic()
    try:
        run("up", "-d", "--no-build")
        up_seconds = time.monotonic() - start
        print(f"compose up: {up_seconds:.1f}s")

        def logs() -> str:
            return run("logs", "--no-color", "--tail=60", check=False).stdout[-8000:]

        prometheus = harness.Prometheus("prometheus", ports["PROMETHEUS_PORT"], logs, lambda: None)
        alertmanager = harness.Alertmanager("alertmanager", ports["ALERTMANAGER_PORT"], logs, lambda: None)
        storpath = harness.Service("storpath", ports["STORPATH_PORT"], logs, lambda: None)
        prometheus.wait_ready("/-/ready", 60)
        alertmanager.wait_ready("/-/ready", 60)
        yield {"prometheus": prometheus, "alertmanager": alertmanager, "storpath": storpath,
               "expected_alerts": expected_alerts, "services": running_services(env["COMPOSE_PROJECT_NAME"]),
               "up_seconds": up_seconds}
    finally:
        run("down", "--volumes", "--remove-orphans", "--timeout", "5", check=False)


def test_compose_stack_scrapes_and_alerts(stack):
    prometheus, alertmanager = stack["prometheus"], stack["alertmanager"]
    assert stack["services"] == ["alertmanager", "node-exporter", "prometheus", "storpath"], \
        "the local override runs everything but Grafana"

    targets = prometheus.wait_targets_up(["storpath", "node"], timeout=90)
    by_job = {t["labels"]["job"]: t for t in targets}
    assert by_job["storpath"]["scrapeUrl"] == "http://storpath:9866/metrics"
    assert by_job["node"]["health"] == "up"

    status, body = stack["storpath"].get("/metrics")
    assert status == 200 and "storpath_pcie_current_link_speed_transfers_per_second" in body

    def alert_received():
        for a in alertmanager.alerts():
            if a["labels"].get("alertname") in stack["expected_alerts"]:
                return a
        return None

    alert = harness.wait_until(alert_received, 120, f"one of {sorted(stack['expected_alerts'])} in Alertmanager",
                               interval=1, diagnostics=lambda: str(prometheus.alerts()) + "\n" + prometheus.logs())
    assert alert["labels"].get("job") == "storpath"
    assert alert["labels"].get("address") in ("0000:01:00.0", "0000:00:01.1"), alert["labels"]
