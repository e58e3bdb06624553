"""deploy/kubernetes: generated files are current; kustomize output decodes strictly into the typed
Kubernetes and prometheus-operator structs (deploy/kubernetes/validate, a Go program built here)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from . import harness
from .conftest import missing

K8S = harness.REPO / "deploy" / "kubernetes"
GENERATE = K8S / "generate"

SAMPLE_RULES = {"groups": [{"name": "storpath-sample", "rules": [
    {"record": "instance:storpath_pcie_link_below_expected:count",
     "expr": "count by (instance) (\n  storpath_pcie_current_link_speed_transfers_per_second\n"
             "  < storpath_pcie_expected_link_speed_transfers_per_second\n)"},
    {"alert": "SampleLinkSlow", "expr": "instance:storpath_pcie_link_below_expected:count > 0", "for": "5m",
     "labels": {"severity": "warning"},
     "annotations": {"summary": "sample", "description": "{{ $labels.instance }} has {{ $value }} slow links"}},
]}]}
SAMPLE_DASHBOARD = {"uid": "storpath-sample", "title": "Sample", "panels": [], "schemaVersion": 39}


@pytest.fixture(scope="module")
def validator() -> Path:
    """deploy/kubernetes/validate built by its build script (Go from PATH, /usr/local/go or the module proxy)."""
    for tool in ("curl", "python3"):
        if not shutil.which(tool):
            missing(f"{tool} is needed to build deploy/kubernetes/validate")
    r = subprocess.run([str(K8S / "validate" / "build")], capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        pytest.fail(f"deploy/kubernetes/validate/build failed:\n{r.stderr[-4000:]}", pytrace=False)
    return Path(r.stdout.strip().splitlines()[-1])


def validate(validator: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(validator), *args], capture_output=True, text=True)


def test_generated_files_are_current():
    r = subprocess.run([sys.executable, str(GENERATE), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr + "\nrun deploy/kubernetes/generate and commit the result"


@pytest.mark.parametrize("kustomization", [".", "overlays/nvme-identify", "overlays/tls"])
def test_kustomization_validates(validator, kustomization):
    r = validate(validator, "kustomize", str(K8S / kustomization))
    assert r.returncode == 0, r.stderr
    assert "1 DaemonSet" in r.stderr and "1 ServiceMonitor" in r.stderr and "1 Service," in r.stderr, r.stderr


def test_rendered_objects(validator):
    rendered = validate(validator, "build", str(K8S))
    assert rendered.returncode == 0, rendered.stderr
    docs = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(rendered.stdout) if d}
    ds = docs[("DaemonSet", "storpath")]
    assert ds["metadata"]["namespace"] == "storpath"
    pod = ds["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    host_paths = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    # None of the node's device nodes: the exporter opens none (the helper of overlays/nvme-identify does).
    assert host_paths == {"sys": "/sys", "proc": "/proc", "state": "/var/lib/storpath"}
    assert "--path.dev=/dev" in container["args"]
    # The host's sys and proc are read-only; only the state directory is written.
    assert all(m["readOnly"] for m in container["volumeMounts"] if m["name"] in ("sys", "proc"))
    assert not any(m.get("readOnly") for m in container["volumeMounts"] if m["name"] == "state")
    init = pod["initContainers"][0]
    assert init["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN"]}
    assert [m["name"] for m in init["volumeMounts"]] == ["state"]

    assert [c["name"] for c in pod["containers"]] == ["storpath"]

    # NVMe Identify: the grant is the storpath-helper container's; the exporter is as in the base and asks it.
    nvme = validate(validator, "build", str(K8S / "overlays" / "nvme-identify"))
    ds = next(d for d in yaml.safe_load_all(nvme.stdout) if d and d["kind"] == "DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    exporter, helper = pod["containers"]
    assert pod["securityContext"]["runAsUser"] == 9866 and pod["securityContext"]["runAsNonRoot"] is True
    assert exporter["securityContext"] == container["securityContext"]
    assert "privileged" not in exporter["securityContext"] and "runAsUser" not in exporter["securityContext"]
    assert "--helper.socket=/run/storpath-helper/helper.sock" in exporter["args"]
    assert helper["name"] == "storpath-helper" and helper["image"] == exporter["image"]
    assert helper["args"] == ["helper", "--helper.socket=/run/storpath-helper/helper.sock", "--helper.socket-mode=0660"]
    context = helper["securityContext"]
    assert context["capabilities"] == {"drop": ["ALL"], "add": ["SYS_ADMIN"]}
    assert (context["runAsUser"], context["runAsGroup"], context["privileged"]) == (0, 9866, True)
    volumes = {v["name"]: v for v in pod["volumes"]}
    for c in (exporter, helper):
        (mount,) = [m for m in c["volumeMounts"] if m["mountPath"] == "/run/storpath-helper"]
        assert "emptyDir" in volumes[mount["name"]]
    assert not [m for m in exporter["volumeMounts"] if volumes[m["name"]].get("hostPath", {}).get("path") == "/dev"]


def test_generated_rules_and_dashboards_validate(validator, tmp_path):
    """With rule files and dashboards present (whether or not rules/ has any yet), the output still validates."""
    tree = tmp_path / "kubernetes"
    shutil.copytree(K8S, tree, ignore=shutil.ignore_patterns("validate"))
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "sample.yml").write_text(yaml.safe_dump(SAMPLE_RULES, sort_keys=False))
    (tmp_path / "dashboards").mkdir()
    (tmp_path / "dashboards" / "sample-host.json").write_text(json.dumps(SAMPLE_DASHBOARD, indent=2))
    r = subprocess.run([sys.executable, str(GENERATE), "--rules", str(tmp_path / "rules"),
                        "--dashboards", str(tmp_path / "dashboards"), "--out", str(tree / "base")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = validate(validator, "kustomize", str(tree))
    assert r.returncode == 0, r.stderr
    assert "1 PrometheusRule" in r.stderr and "1 ConfigMap" in r.stderr, r.stderr
    docs = [d for d in yaml.safe_load_all(validate(validator, "build", str(tree)).stdout) if d]
    rule = next(d for d in docs if d["kind"] == "PrometheusRule")
    assert rule["spec"]["groups"] == SAMPLE_RULES["groups"]
    cm = next(d for d in docs if d["kind"] == "ConfigMap")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(cm["data"]["sample-host.json"]) == SAMPLE_DASHBOARD


@pytest.mark.parametrize("file,old,new,complaint", [
    ("base/daemonset.yaml", "imagePullPolicy: IfNotPresent", "imagePullPolicyy: IfNotPresent", "imagePullPolicyy"),
    ("base/servicemonitor.yaml", "scrapeTimeout: 10s", "scrapeTimeOut: 10s", "scrapeTimeOut"),
    ("base/service.yaml", "targetPort: metrics", "targetPort: metricz", "metricz"),
    ("base/servicemonitor.yaml", "- port: metrics", "- port: http", '"http"'),
], ids=["unknown-field-daemonset", "unknown-field-servicemonitor", "service-port", "servicemonitor-port"])
def test_validator_rejects_broken_manifests(validator, tmp_path, file, old, new, complaint):
    tree = tmp_path / "kubernetes"
    shutil.copytree(K8S, tree, ignore=shutil.ignore_patterns("validate"))
    text = (tree / file).read_text()
    assert old in text
    (tree / file).write_text(text.replace(old, new, 1))
    r = validate(validator, "kustomize", str(tree))
    assert r.returncode != 0 and complaint in r.stderr, r.stderr


@pytest.mark.parametrize("kustomization", [".", "overlays/nvme-identify", "overlays/tls"])
def test_kustomization_passes_kubeconform_strict(validator, kustomization):
    """The same manifests through kubeconform -strict, against Kubernetes 1.35's and
    prometheus-operator's schemas made offline (scripts/kubeconform-schemas)."""
    from tests.gotools import go_tool

    kubeconform = go_tool("kubeconform")
    schemas = subprocess.run([sys.executable, str(harness.REPO / "scripts" / "kubeconform-schemas")],
                             capture_output=True, text=True, check=True).stdout.strip()
    rendered = validate(validator, "build", str(K8S / kustomization))
    assert rendered.returncode == 0, rendered.stderr
    r = subprocess.run([kubeconform, "-strict", "-summary", "-output", "json",
                        "-schema-location", schemas + "/{{ .ResourceKind }}{{ .KindSuffix }}.json", "-"],
                       input=rendered.stdout, capture_output=True, text=True)
    summary = json.loads(r.stdout)["summary"]
    count = len([d for d in yaml.safe_load_all(rendered.stdout) if d])
    assert r.returncode == 0 and summary["valid"] == count and not summary["skipped"], r.stdout + r.stderr
