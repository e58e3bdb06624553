"""The chart on a cluster without prometheus-operator, and with TLS its monitors cannot verify: a
clear failure saying what to set, never an install that fails on "no matches for kind
ServiceMonitor" or a https target that is silently down (templates/_operator.tpl). Rendered with
helm (scripts/go-tool helm) and checked with kubeconform as tests/packaging/test_chart.py does."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from tests.gotools import go_tool

from .conftest import REPO
from .test_chart import CHART, OPERATOR, run

pytestmark = pytest.mark.integration

OPERATOR_KINDS = {"ServiceMonitor", "PodMonitor", "PrometheusRule"}
TLS_CONTENT = ["--set", "webConfig.enabled=true", "--set-json",
               'webConfig.content={"tls_server_config":{"cert_file":"/etc/storpath/web/tls.crt",'
               '"key_file":"/etc/storpath/web/tls.key"}}']
NO_OPERATOR = ["--set", "serviceMonitor.enabled=false", "--set", "prometheusRule.enabled=false"]


@pytest.fixture(scope="module")
def helm() -> str:
    return go_tool("helm")


def template(helm: str, *values: str) -> subprocess.CompletedProcess:
    return subprocess.run([helm, "template", "storpath", str(CHART), "--namespace", "storpath", *values],
                          capture_output=True, text=True, timeout=300)


def kinds(text: str) -> list:
    return [d["kind"] for d in yaml.safe_load_all(text) if d]


@pytest.mark.parametrize("values,what", [
    ([], "serviceMonitor.enabled"),
    (["--set", "serviceMonitor.enabled=false"], "prometheusRule.enabled"),
    (NO_OPERATOR + ["--set", "podMonitor.enabled=true"], "podMonitor.enabled"),
], ids=["defaults", "rules", "podmonitor"])
def test_without_the_operators_api_it_fails_saying_what_to_set(helm, values, what):
    result = template(helm, *values)
    assert result.returncode != 0
    message = result.stderr
    assert f"{what} is on, but this cluster does not serve monitoring.coreos.com/v1" in message, message
    assert "--set serviceMonitor.enabled=false,prometheusRule.enabled=false" in message, message
    assert "--api-versions monitoring.coreos.com/v1" in message, message


def test_without_the_operator_and_its_objects_off_it_renders_the_exporter(helm):
    result = template(helm, *NO_OPERATOR)
    assert result.returncode == 0, result.stderr
    found = kinds(result.stdout)
    assert "DaemonSet" in found and not OPERATOR_KINDS & set(found), found


def test_with_the_operators_api_the_monitor_and_rules_render(helm):
    found = kinds(run(helm, "template", *OPERATOR, "storpath", str(CHART), "--namespace", "storpath"))
    assert "ServiceMonitor" in found and "PrometheusRule" in found, found


@pytest.mark.parametrize("monitor", ["serviceMonitor", "podMonitor"])
def test_tls_the_monitor_cannot_verify_fails(helm, monitor):
    extra = ["--set", "podMonitor.enabled=true", "--set", "serviceMonitor.enabled=false"] \
        if monitor == "podMonitor" else []
    result = template(helm, *OPERATOR, *TLS_CONTENT, *extra)
    assert result.returncode != 0
    kind = monitor[0].upper() + monitor[1:]
    assert f"webConfig serves https, but the {kind} could not verify storpath's certificate" in result.stderr, \
        result.stderr
    assert "set webConfig.tlsSecret" in result.stderr and f"or {monitor}.tlsConfig" in result.stderr


@pytest.mark.parametrize("how", [
    ["--set", "webConfig.tlsSecret=storpath-tls"],
    ["--set-json", 'serviceMonitor.tlsConfig={"ca":{"configMap":{"name":"storpath-ca","key":"ca.crt"}},'
                   '"serverName":"storpath.storpath.svc"}'],
    ["--set", "webConfig.existingSecret=mine", "--set", "webConfig.tlsSecret=storpath-tls"],
], ids=["tls-secret", "own-tls-config", "existing-secret-with-tls-secret"])
def test_tls_with_a_way_to_verify_renders_and_validates(helm, how):
    text = run(helm, "template", *OPERATOR, "storpath", str(CHART), "--namespace", "storpath", *TLS_CONTENT, *how)
    (monitor,) = [d for d in yaml.safe_load_all(text) if d and d["kind"] == "ServiceMonitor"]
    endpoint = monitor["spec"]["endpoints"][0]
    assert endpoint["scheme"] == "https" and endpoint["tlsConfig"], endpoint
    schemas = run(sys.executable, str(REPO / "scripts" / "kubeconform-schemas")).strip()
    out = run(go_tool("kubeconform"), "-strict", "-summary", "-output", "json", "-kubernetes-version", "1.35.4",
              "-schema-location", schemas + "/{{ .ResourceKind }}{{ .KindSuffix }}.json", "-", input=text)
    summary = json.loads(out)["summary"]
    assert summary["invalid"] == summary["errors"] == summary["skipped"] == 0, out


def test_an_existing_secret_without_a_ca_fails_too(helm):
    """A Secret of one's own holds a web config storpath cannot read at render time: TLS is assumed."""
    result = template(helm, *OPERATOR, "--set", "webConfig.enabled=true", "--set", "webConfig.existingSecret=mine")
    assert result.returncode != 0 and "could not verify storpath's certificate" in result.stderr, result.stderr


def test_basic_auth_alone_needs_no_ca(helm):
    text = run(helm, "template", *OPERATOR, "storpath", str(CHART), "--namespace", "storpath",
               "--set", "webConfig.enabled=true", "--set", "webConfig.basicAuthSecret=scrape",
               "--set-json", 'webConfig.content={"basic_auth_users":{"prometheus":"$2y$10$x"}}')
    assert "ServiceMonitor" in kinds(text)
