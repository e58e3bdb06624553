"""The Helm chart (deploy/helm/storpath): `helm lint`, `helm template` and the rendered objects
checked strictly by deploy/kubernetes/validate and by kubeconform -strict (schemas of Kubernetes
1.35 and prometheus-operator, scripts/kubeconform-schemas); rendered from the tree as a clone
has it, with README's command, it carries what kube-prometheus-stack selects by; promtool loads
every alert of the rendered PrometheusRules; a real Prometheus fires the target-health alerts
for the job the chart's monitors give, whatever the release is called."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import require_tool
from tests.gotools import go_tool
from tests.integration import harness

from .conftest import REPO, VERSION, make_dist

pytestmark = pytest.mark.integration

CHART = REPO / "deploy" / "helm" / "storpath"
TLS_AUTH = ["--set", "webConfig.enabled=true", "--set", "webConfig.tlsSecret=storpath-tls",
            "--set", "webConfig.basicAuthSecret=storpath-scrape",
            "--set-json", 'webConfig.content={"tls_server_config":{"cert_file":"/etc/storpath/web/tls.crt",'
                          '"key_file":"/etc/storpath/web/tls.key"},"basic_auth_users":{"prometheus":"$2y$10$x"}}']
FULL = ["--set", "privileged=true", "--set", "podMonitor.enabled=true", *TLS_AUTH,
        "--set", "prometheusSelectorLabels.release=kube-prometheus-stack",
        "--set-json", 'probes={"targets":[{"device":"/dev/md0"}]}']
# The RAID tools' grant (values.yaml `raidTools`), with two of the vendors' directories.
RAID_TOOLS = ["--set", "raidTools.enabled=true",
              "--set-json", 'raidTools.hostPaths=["/opt/MegaRAID/storcli","/opt/smartstorageadmin/ssacli/bin"]']
MONITORS = ("ServiceMonitor", "PodMonitor")
# A cluster with prometheus-operator's CRDs, as `helm template` cannot ask one (templates/_operator.tpl;
# tests/packaging/test_chart_operator.py renders without them).
OPERATOR = ("--api-versions", "monitoring.coreos.com/v1")


def run(*argv: str, input: str | None = None, cwd: Path | None = None) -> str:
    result = subprocess.run(argv, capture_output=True, text=True, input=input, timeout=900, cwd=cwd)
    assert result.returncode == 0, f"{' '.join(argv)}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout


@pytest.fixture(scope="module")
def helm() -> str:
    return go_tool("helm")


@pytest.fixture(scope="module")
def validate() -> str:
    return run(str(REPO / "deploy/kubernetes/validate/build")).strip()


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """The tree a fresh clone has: committed and new files, nothing git ignores (no make step)."""
    dest = tmp_path_factory.mktemp("clone")
    files = run("git", "-C", str(REPO), "ls-files", "-z", "-co", "--exclude-standard")
    tar = subprocess.run(["tar", "--null", "-T", "-", "-c"], input=files.encode(), capture_output=True, cwd=REPO,
                         check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=tar, check=True)
    return dest


def render(helm: str, *values: str, release: str = "storpath", chart: Path = CHART) -> list:
    text = run(helm, "template", *OPERATOR, release, str(chart), "--namespace", "storpath", *values)
    return [d for d in yaml.safe_load_all(text) if d]


def alerts_of(specs) -> list:
    return [r["alert"] for spec in specs for g in spec["groups"] for r in g["rules"] if "alert" in r]


REPO_ALERTS = alerts_of(yaml.safe_load(p.read_text()) for p in sorted((REPO / "rules").glob("*.yml")))


def readme_commands() -> list:
    """README's `helm install` commands, as argument lists."""
    text = (REPO / "README.md").read_text().replace("\\\n", " ")
    commands = [shlex.split(line.strip()) for line in text.splitlines() if line.strip().startswith("helm install ")]
    assert len(commands) == 2, commands
    return commands


def test_readme_installs_with_kube_prometheus_stacks_selector_labels():
    packaged, checkout = readme_commands()
    assert packaged[4:] == checkout[4:], "both README commands set the same values"
    assert checkout[3] == "deploy/helm/storpath" and packaged[3] == f"./storpath-{VERSION}.tgz"
    assert "prometheusSelectorLabels.release=kube-prometheus-stack" in checkout


def test_readme_command_from_a_clean_clone_gives_kube_prometheus_stack_everything(helm, clone):
    """kube-prometheus-stack's Prometheus selects ServiceMonitors, PodMonitors and PrometheusRules
    by `release: <its release>` (its ...SelectorNilUsesHelmValues defaults); its Grafana's sidecar
    loads ConfigMaps labelled grafana_dashboard: "1"."""
    (_, _, release, chart, *values) = readme_commands()[1]
    selected = {m.group(1): m.group(2) for v in values if (m := re.fullmatch(r"prometheusSelectorLabels\.([^=]+)=(.*)", v))}
    assert selected == {"release": "kube-prometheus-stack"}
    for extra in ([], ["--set", "podMonitor.enabled=true"]):
        text = run(helm, "template", *OPERATOR, release, chart, *values, *extra, cwd=clone)
        objects = [d for d in yaml.safe_load_all(text) if d]
        kinds = [o["kind"] for o in objects]
        rules = [o for o in objects if o["kind"] == "PrometheusRule"]
        monitors = [o for o in objects if o["kind"] in MONITORS]
        dashboards = [o for o in objects if o["kind"] == "ConfigMap" and "grafana_dashboard" in o["metadata"]["labels"]]
        assert len(rules) == len(list((REPO / "rules").glob("*.yml"))), kinds
        assert len(monitors) == (2 if extra else 1), kinds
        assert len(dashboards) == len(list((REPO / "dashboards").glob("*.json"))), kinds
        for obj in rules + monitors:
            assert obj["metadata"]["labels"].items() >= selected.items(), obj["metadata"]
        for obj in dashboards:
            assert obj["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert sorted(alerts_of(o["spec"] for o in rules)) == sorted(REPO_ALERTS)


@pytest.mark.parametrize("version", ["2", "3"], ids=["promtool-2", "promtool-3"])
def test_promtool_loads_every_alert_of_the_rendered_rules(helm, tmp_path, version):
    promtool = require_tool("promtool", "prometheus") if version == "2" else go_tool("promtool")
    rules = [o for o in render(helm, *readme_commands()[1][4:]) if o["kind"] == "PrometheusRule"]
    paths = []
    for obj in rules:
        path = tmp_path / f"{obj['metadata']['name']}.yml"
        path.write_text(yaml.safe_dump(obj["spec"]))
        paths.append(str(path))
    out = run(promtool, "check", "rules", *paths)
    found = sum(int(n) for n in re.findall(r"SUCCESS: (\d+) rules found", out))
    recording = sum(1 for o in rules for g in o["spec"]["groups"] for r in g["rules"] if "record" in r)
    assert found == len(REPO_ALERTS) + recording, out
    assert len(REPO_ALERTS) >= 46


def test_rules_with_the_default_values_are_the_rules(helm):
    rules = sorted((o["spec"] for o in render(helm) if o["kind"] == "PrometheusRule"),
                   key=lambda s: s["groups"][0]["name"])
    want = sorted((yaml.safe_load(p.read_text()) for p in (REPO / "rules").glob("*.yml")),
                  key=lambda s: s["groups"][0]["name"])
    assert rules == want


def test_rule_values_in_kube_prometheus_stacks_manner(helm):
    objects = render(helm, "--set", "prometheusRule.groups.zfs=false", "--set", "prometheusRule.disabled.NvmeIdentifyUnavailable=true",
                     "--set", "prometheusRule.customRules.ZfsScrubOverdue.for=2d",
                     "--set", "prometheusRule.customRules.ZfsScrubOverdue.severity=info",
                     "--set", "prometheusRule.groups.md=false",
                     "--set", "prometheusRule.additionalRuleLabels.team=storage",
                     "--set", "prometheusRule.additionalRuleAnnotations.dashboard=https://grafana.example/d/storpath-host",
                     "--set", "prometheusRule.runbookUrl=https://runbooks.example/storpath/",
                     "--set", "prometheusRule.labels.role=alert-rules", "--set", "prometheusSelectorLabels.release=kps")
    rules = [o for o in objects if o["kind"] == "PrometheusRule"]
    names = {o["metadata"]["name"] for o in rules}
    assert "storpath-zfs" not in names and "storpath-md" not in names and "storpath-pcie" in names
    alerts = {r["alert"]: r for o in rules for g in o["spec"]["groups"] for r in g["rules"] if "alert" in r}
    assert "NvmeIdentifyUnavailable" not in alerts and "NvmeNamespaceLbaFormatNotBest" in alerts
    off = alerts_of(yaml.safe_load((REPO / "rules" / f"{g}.yml").read_text()) for g in ("zfs", "md"))
    assert off and not set(off) & set(alerts)
    for name, rule in alerts.items():
        assert rule["labels"]["team"] == "storage" and rule["labels"]["severity"]
        assert rule["annotations"]["runbook_url"] == f"https://runbooks.example/storpath/{name}.md"
        assert rule["annotations"]["dashboard"].startswith("https://grafana.example/")
    for obj in rules:
        assert obj["metadata"]["labels"]["role"] == "alert-rules" and obj["metadata"]["labels"]["release"] == "kps"
    records = [r for o in rules for g in o["spec"]["groups"] for r in g["rules"] if "record" in r]
    assert records and not any("labels" in r or "annotations" in r for r in records)
    custom = render(helm, "--set", "prometheusRule.customRules.ZfsScrubOverdue.for=2d",
                    "--set", "prometheusRule.customRules.ZfsScrubOverdue.severity=info")
    (scrub,) = [r for o in custom if o["kind"] == "PrometheusRule" for g in o["spec"]["groups"] for r in g["rules"]
                if r.get("alert") == "ZfsScrubOverdue"]
    assert scrub["for"] == "2d" and scrub["labels"]["severity"] == "info"


def test_a_sites_thresholds_through_rule_files(helm, tmp_path):
    """A site's thresholds rendered by rules/generate.py replace a shipped file (--set-file)."""
    site = tmp_path / "site.yml"
    site.write_text("zfs:\n  capacity_warning_ratio: 0.8\n")
    run(sys.executable, str(REPO / "rules" / "generate.py"), "--config", str(site), "--out", str(tmp_path / "site-rules"))
    objects = render(helm, "--set-file", f"prometheusRule.ruleFiles.zfs={tmp_path / 'site-rules' / 'zfs.yml'}",
                     "--set", "prometheusRule.additionalRuleLabels.team=storage")
    alerts = {r["alert"]: r for o in objects if o["kind"] == "PrometheusRule" for g in o["spec"]["groups"]
              for r in g["rules"] if "alert" in r}
    assert "> 0.8" in alerts["ZfsPoolCapacityHigh"]["expr"] and "80 %" in alerts["ZfsPoolCapacityHigh"]["annotations"]["description"]
    assert alerts["ZfsPoolCapacityHigh"]["labels"]["team"] == "storage"
    assert sorted(alerts) == sorted(REPO_ALERTS)


def operator_job(objects: list, namespace: str = "storpath") -> str:
    """The job label prometheus-operator gives the targets of the rendered monitor: the value of
    the Service's (PodMonitor: the pod's) label named by jobLabel, else the Service's name
    (PodMonitor: <namespace>/<name>)."""
    (monitor,) = [o for o in objects if o["kind"] in MONITORS]
    label = monitor["spec"].get("jobLabel")
    if monitor["kind"] == "ServiceMonitor":
        (service,) = [o for o in objects if o["kind"] == "Service"]
        return service["metadata"]["labels"].get(label) or service["metadata"]["name"]
    (daemonset,) = [o for o in objects if o["kind"] == "DaemonSet"]
    return daemonset["spec"]["template"]["metadata"]["labels"].get(label) or f"{namespace}/{monitor['metadata']['name']}"


def target_selectors(objects: list) -> set:
    return {m for o in objects if o["kind"] == "PrometheusRule" for g in o["spec"]["groups"] for r in g["rules"]
            if r.get("alert") in ("StorpathTargetDown", "StorpathTargetAbsent")
            for m in re.findall(r"up\{([^}]*)\}", r["expr"])}


@pytest.mark.parametrize("values, job", [
    ([], "storpath"),
    (["--set", "job=node-storage"], "node-storage"),
    (["--set", "serviceMonitor.jobLabel="], "prod-storage-storpath"),
    (["--set", "serviceMonitor.enabled=false", "--set", "podMonitor.enabled=true"], "storpath"),
    (["--set", "serviceMonitor.enabled=false", "--set", "podMonitor.enabled=true", "--set", "podMonitor.jobLabel="],
     "storpath/prod-storage-storpath"),
], ids=["default", "job-value", "service-name", "podmonitor", "podmonitor-name"])
def test_target_health_selects_the_job_the_monitors_give(helm, values, job):
    objects = render(helm, *values, release="prod-storage")
    assert operator_job(objects) == job
    assert target_selectors(objects) == {f'job="{job}"'}


@pytest.mark.parametrize("version", ["2", "3"], ids=["prometheus-2", "prometheus-3"])
def test_target_health_alerts_fire_for_a_release_not_named_storpath(helm, tmp_path, version):
    """A real Prometheus with the rendered PrometheusRules, storpath's target as prometheus-operator
    would label it (job from the monitor's jobLabel, instance the node's name) and down:
    StorpathTargetDown fires for it; with no such target, StorpathTargetAbsent fires."""
    binary = harness.BINARIES["prometheus"] if version == "2" else go_tool("prometheus")
    objects = render(helm, "--set", "prometheusRule.customRules.StorpathTargetDown.for=0s",
                     "--set", "prometheusRule.customRules.StorpathTargetAbsent.for=0s", release="prod-storage")
    job = operator_job(objects)
    rules = tmp_path / "rules"
    rules.mkdir()
    for obj in objects:
        if obj["kind"] == "PrometheusRule":
            (rules / f"{obj['metadata']['name']}.yml").write_text(yaml.safe_dump(obj["spec"]))
    down = f"127.0.0.1:{harness.free_port()}"  # nothing listens there
    relabel = [{"target_label": "job", "replacement": job}, {"target_label": "instance", "replacement": "node-1"}]
    scrape = {"job_name": "serviceMonitor/storpath/prod-storage-storpath/0",
              "static_configs": [{"targets": [down]}], "relabel_configs": relabel}
    for scrape_configs, fires, silent in (([scrape], "StorpathTargetDown", "StorpathTargetAbsent"),
                                          ([], "StorpathTargetAbsent", "StorpathTargetDown")):
        backend = harness.ProcessBackend(tmp_path / f"{fires}-{version}", {"prometheus": binary})
        (tmp_path / f"{fires}-{version}").mkdir()
        try:
            config = harness.prometheus_config({})
            config["scrape_configs"] = scrape_configs
            prom = backend.prometheus(config, rules_dir=rules)

            def firing():
                return [a for a in prom.alerts() if a["state"] == "firing" and a["labels"]["alertname"] == fires]
            alerts = harness.wait_until(firing, 60, f"{fires} firing (Prometheus {version})")
            assert all(a["labels"]["job"] == job for a in alerts), alerts
            if fires == "StorpathTargetDown":
                assert [a["labels"]["instance"] for a in alerts] == ["node-1"]

            def silent_alerts():
                return [a for a in prom.alerts() if a["labels"]["alertname"] == silent]
            # An evaluation before the first scrape fires StorpathTargetAbsent (`for: 0s`, no `up`
            # yet); its group's next evaluation, a second later, resolves it. It must not stay.
            harness.wait_until(lambda: not silent_alerts(), 15, f"{silent} not firing (Prometheus {version})",
                               diagnostics=lambda: repr(silent_alerts()))
        finally:
            backend.close()


@pytest.mark.parametrize("values", [[], FULL, RAID_TOOLS],
                         ids=["defaults", "privileged-tls-basic-auth-podmonitor-probes", "raid-tools"])
def test_chart_lints_renders_and_validates(helm, validate, values):
    run(helm, "lint", "--strict", str(CHART), *values)
    text = run(helm, "template", *OPERATOR, "storpath", str(CHART), "--namespace", "storpath", *values)
    result = subprocess.run([validate, "check", "-"], input=text, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "ok: " in result.stderr, result.stdout + result.stderr


@pytest.fixture(scope="module")
def kubeconform_schemas() -> str:
    return run(sys.executable, str(REPO / "scripts" / "kubeconform-schemas")).strip()


@pytest.mark.parametrize("values", [[], FULL, RAID_TOOLS],
                         ids=["defaults", "privileged-tls-basic-auth-podmonitor-probes", "raid-tools"])
def test_kubeconform_strict(helm, kubeconform_schemas, values):
    kubeconform = go_tool("kubeconform")
    text = run(helm, "template", *OPERATOR, "storpath", str(CHART), "--namespace", "storpath", *values)
    out = run(kubeconform, "-strict", "-summary", "-output", "json", "-kubernetes-version", "1.35.4",
              "-schema-location", kubeconform_schemas + "/{{ .ResourceKind }}{{ .KindSuffix }}.json", "-",
              input=text)
    summary = json.loads(out)["summary"]
    kinds = [d["kind"] for d in yaml.safe_load_all(text) if d]
    assert summary["valid"] == len(kinds) and summary["invalid"] == summary["errors"] == summary["skipped"] == 0, out


def test_kubeconform_catches_what_the_schemas_forbid(kubeconform_schemas):
    """The schemas are strict: an unknown field in a monitor's endpoint is an error."""
    kubeconform = go_tool("kubeconform")
    wrong = yaml.safe_dump({"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
                            "metadata": {"name": "x"},
                            "spec": {"selector": {}, "endpoints": [{"port": "metrics", "tlsConfg": {}}]}})
    result = subprocess.run([kubeconform, "-strict", "-schema-location",
                             kubeconform_schemas + "/{{ .ResourceKind }}{{ .KindSuffix }}.json", "-"],
                            input=wrong, capture_output=True, text=True)
    assert result.returncode != 0 and "tlsConfg" in result.stdout + result.stderr


def test_tls_and_basic_auth_reach_the_monitors(helm):
    objects = render(helm, *FULL)
    for monitor in (o for o in objects if o["kind"] in MONITORS):
        (endpoint,) = monitor["spec"].get("endpoints") or monitor["spec"]["podMetricsEndpoints"]
        assert endpoint["scheme"] == "https"
        assert endpoint["tlsConfig"] == {"ca": {"secret": {"name": "storpath-tls", "key": "ca.crt"}},
                                         "serverName": "storpath.storpath.svc"}
        assert endpoint["basicAuth"] == {"username": {"name": "storpath-scrape", "key": "username"},
                                         "password": {"name": "storpath-scrape", "key": "password"}}
    own = render(helm, *TLS_AUTH, "--set-json", 'serviceMonitor.tlsConfig={"insecureSkipVerify":true}')
    (monitor,) = [o for o in own if o["kind"] == "ServiceMonitor"]
    assert monitor["spec"]["endpoints"][0]["tlsConfig"] == {"insecureSkipVerify": True}


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
    dashboards = {k: json.loads(v) for o in objects if o["kind"] == "ConfigMap" and "grafana_dashboard" in o["metadata"]["labels"]
                  for k, v in o["data"].items()}
    assert dashboards == {p.name: json.loads(p.read_text()) for p in (REPO / "dashboards").glob("*.json")}
    moved = render(helm, "--set", "dashboards.namespace=monitoring", "--set", "dashboards.labels.team=storage")
    for o in moved:
        if o["kind"] == "ConfigMap" and "grafana_dashboard" in o["metadata"]["labels"]:
            assert o["metadata"]["namespace"] == "monitoring" and o["metadata"]["labels"]["team"] == "storage"


def test_monitor_relabelings_from_values(helm):
    objects = render(helm, "--set", "podMonitor.enabled=true", "--set-json",
                     'serviceMonitor.relabelings=[{"targetLabel":"cluster","replacement":"eu-1"}]',
                     "--set-json", 'serviceMonitor.metricRelabelings=[{"action":"labeldrop","regex":"python"}]',
                     "--set-json", 'podMonitor.relabelings=[{"targetLabel":"cluster","replacement":"eu-1"}]')
    for monitor in (o for o in objects if o["kind"] in MONITORS):
        (endpoint,) = monitor["spec"].get("endpoints") or monitor["spec"]["podMetricsEndpoints"]
        assert endpoint["relabelings"][0] == {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "instance"}
        assert endpoint["relabelings"][-1] == {"targetLabel": "cluster", "replacement": "eu-1"}
        assert monitor["spec"]["jobLabel"] == "jobLabel"
    (service_monitor,) = [o for o in objects if o["kind"] == "ServiceMonitor"]
    assert service_monitor["spec"]["endpoints"][0]["metricRelabelings"] == [{"action": "labeldrop", "regex": "python"}]


def test_notes_say_what_is_selected(helm, tmp_path):
    # `helm install --dry-run` wants a cluster: NOTES.txt's define rendered into a document of its own.
    chart = tmp_path / "storpath"
    shutil.copytree(CHART, chart)
    (chart / "templates" / "notes.yaml").write_text('notes: {{ include "storpath.notes" . | toJson }}\n')

    def notes(*values):
        text = run(helm, "template", *OPERATOR, "storpath", str(chart), "--namespace", "storpath",
                   "--show-only", "templates/notes.yaml", *values)
        return yaml.safe_load(text)["notes"]
    text = notes()
    assert "prometheusSelectorLabels is empty" in text and 'job="storpath"' in text
    text = notes(*readme_commands()[1][4:])
    assert "prometheusSelectorLabels is empty" not in text and "release=kube-prometheus-stack" in text
    # the default runbook links reach a node's storpath only with hostNetwork: said, until a base is set
    assert "prometheusRule.runbookUrl=" in notes()
    assert "prometheusRule.runbookUrl=" not in notes("--set", "hostNetwork=true")
    assert "prometheusRule.runbookUrl=" not in notes("--set", "prometheusRule.runbookUrl=https://wiki/rb/")


def test_privileged_tls_and_probes_values(helm):
    objects = render(helm, *FULL)
    (daemonset,) = [o for o in objects if o["kind"] == "DaemonSet"]
    pod = daemonset["spec"]["template"]["spec"]
    container, helper = pod["containers"]
    # privileged: the helper container's (test_chart_raid_tools.py); the exporter stays uid 9866 without any
    assert pod["securityContext"]["runAsUser"] == 9866 and "privileged" not in container["securityContext"]
    assert helper["name"] == "storpath-helper" and helper["securityContext"]["privileged"] is True
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
