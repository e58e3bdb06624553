"""The Helm chart (deploy/helm/storpath): `helm lint`, `helm template` and the rendered objects
checked strictly by deploy/kubernetes/validate, like the kustomize manifests; rules and dashboards
are those of rules/ and dashboards/, the image tag is the release."""

from __future__ import annotations

import json
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml

from .conftest import REPO, VERSION, make_dist

pytestmark = pytest.mark.integration

CHART = REPO / "deploy" / "helm" / "storpath"
FULL = ["--set", "privileged=true", "--set", "podMonitor.enabled=true", "--set", "webConfig.enabled=true",
        "--set", "webConfig.tlsSecret=storpath-tls", "--set", "serviceMonitor.labels.release=kube-prometheus-stack",
        "--set-json", 'webConfig.content={"tls_server_config":{"cert_file":"/etc/storpath/web/tls.crt",'
                      '"key_file":"/etc/storpath/web/tls.key"}}',
        "--set-json", 'probes={"targets":[{"device":"/dev/md0"}]}']


def run(*argv: str, input: str | None = None) -> str:
    result = subprocess.run(argv, capture_output=True, text=True, input=input, timeout=900)
    assert result.returncode == 0, f"{' '.join(argv)}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout


@pytest.fixture(scope="module")
def helm() -> str:
    run("make", "--no-print-directory", "-C", str(REPO), "chart-files")
    return run(str(REPO / "deploy/helm/build-helm")).strip()


@pytest.fixture(scope="module")
def validate() -> str:
    return run(str(REPO / "deploy/kubernetes/validate/build")).strip()


def render(helm: str, *values: str) -> list:
    text = run(helm, "template", "storpath", str(CHART), "--namespace", "storpath", *values)
    return [d for d in yaml.safe_load_all(text) if d]


@pytest.mark.parametrize("values", [[], FULL], ids=["defaults", "privileged-tls-podmonitor-probes"])
def test_chart_lints_renders_and_validates(helm, validate, values):
    run(helm, "lint", "--strict", str(CHART), *values)
    text = run(helm, "template", "storpath", str(CHART), "--namespace", "storpath", *values)
    result = subprocess.run([validate, "check", "-"], input=text, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "ok: " in result.stderr, result.stdout + result.stderr


def test_chart_carries_the_rules_the_dashboards_and_the_release_tag(helm):
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["version"] == chart["appVersion"] == VERSION
    objects = render(helm)
    (daemonset,) = [o for o in objects if o["kind"] == "DaemonSet"]
    images = {c["image"] for c in daemonset["spec"]["template"]["spec"]["containers"]
              + daemonset["spec"]["template"]["spec"]["initContainers"]}
    assert images == {f"storpath:{VERSION}"}
    pod = daemonset["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == 9866
    assert pod["containers"][0]["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    rules = sorted((o["spec"] for o in objects if o["kind"] == "PrometheusRule"), key=lambda s: s["groups"][0]["name"])
    want = sorted((yaml.safe_load(p.read_text()) for p in (REPO / "rules").glob("*.yml")),
                  key=lambda s: s["groups"][0]["name"])
    assert rules == want
    dashboards = {k: json.loads(v) for o in objects if o["kind"] == "ConfigMap" and "grafana_dashboard" in o["metadata"]["labels"]
                  for k, v in o["data"].items()}
    assert dashboards == {p.name: json.loads(p.read_text()) for p in (REPO / "dashboards").glob("*.json")}


def test_privileged_tls_and_probes_values(helm):
    objects = render(helm, *FULL)
    (daemonset,) = [o for o in objects if o["kind"] == "DaemonSet"]
    pod = daemonset["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert pod["securityContext"]["runAsUser"] == 0 and container["securityContext"]["privileged"] is True
    assert "--web.config.file=/etc/storpath/web/web-config.yml" in container["args"]
    assert container["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"
    (secret,) = [o for o in objects if o["kind"] == "Secret"]
    assert "tls_server_config" in yaml.safe_load(secret["stringData"]["web-config.yml"])
    config = [o for o in objects if o["kind"] == "ConfigMap" and "storpath.yml" in o.get("data", {})][0]
    assert yaml.safe_load(config["data"]["storpath.yml"]) == {"probes": {"targets": [{"device": "/dev/md0"}]}}
    (monitor,) = [o for o in objects if o["kind"] == "ServiceMonitor"]
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert monitor["spec"]["endpoints"][0]["scheme"] == "https"
    assert [o for o in objects if o["kind"] == "PodMonitor"]


def test_packaged_chart_is_the_release(dist_dir, helm):
    make_dist("dist-chart", dist_dir)
    with tarfile.open(dist_dir / f"storpath-{VERSION}.tgz") as tgz:
        chart = yaml.safe_load(tgz.extractfile("storpath/Chart.yaml"))
        names = tgz.getnames()
    assert chart["version"] == VERSION and chart["appVersion"] == VERSION
    assert any(n.startswith("storpath/files/rules/") for n in names)
