"""The rules bundle: rendered from its config, valid for promtool, unit-tested with promtool,
and every alert carrying what an operator needs (severity, summary, a description in human
units, a runbook that exists)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import require_tool
from tests.gotools import go_tool

pytestmark = pytest.mark.promtool

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "rules"
TESTS = Path(__file__).resolve().parent
RUNBOOKS = REPO / "docs" / "runbooks"


def _load_generator():
    spec = importlib.util.spec_from_file_location("storpath_rules_generate", RULES / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


generate = _load_generator()
RULE_FILES = [RULES / f"{name}.yml" for name in generate.SUBSYSTEMS]
TEST_FILES = sorted(TESTS.glob("*.test.yml"))


def _alerts():
    for path in RULE_FILES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                if "alert" in rule:
                    yield path, rule


ALERTS = {rule["alert"]: rule for _, rule in _alerts()}


@pytest.fixture(params=[pytest.param("2", id="promtool-2", marks=pytest.mark.promtool2),
                        pytest.param("3", id="promtool-3")], scope="module")
def promtool(request) -> str:
    """Debian's promtool (2.x) and Prometheus 3's, built from the Go module (scripts/go-tool):
    the rules must load and their tests pass on both (3.x leaves a sample on a range's start out,
    which moves extrapolated counts). The inner loop (`make test-fast`) runs 3's only."""
    if request.param == "2":
        return require_tool("promtool", "prometheus")
    return go_tool("promtool")


def test_rule_files_are_rendered_from_the_config():
    assert generate.stale_files() == [], "run: python3 rules/generate.py"
    # Only rendered rule files in rules/: Prometheus and the compose stack load rules/*.yml.
    assert sorted(RULES.glob("*.y*ml")) == sorted(RULE_FILES)


def test_promtool_check_rules(promtool):
    result = subprocess.run([promtool, "check", "rules", *map(str, RULE_FILES)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("test_file", TEST_FILES, ids=[p.name for p in TEST_FILES])
def test_promtool_unit_tests(promtool, test_file):
    result = subprocess.run([promtool, "test", "rules", test_file.name], cwd=TESTS, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_rule_file_has_a_test_file():
    tested = {f for t in TEST_FILES for f in yaml.safe_load(t.read_text())["rule_files"]}
    assert tested == {f"../../rules/{p.name}" for p in RULE_FILES}
    assert {t.name for t in TEST_FILES} == {f"{p.stem}.test.yml" for p in RULE_FILES}


def test_every_alert_is_tested_firing_and_silent():
    firing, silent = {}, set()
    for path in TEST_FILES:
        for group in yaml.safe_load(path.read_text())["tests"]:
            for case in group.get("alert_rule_test", []):
                if case.get("exp_alerts"):
                    firing.setdefault(case["alertname"], []).extend(case["exp_alerts"])
                else:
                    silent.add(case["alertname"])
    assert set(firing) == set(ALERTS), "alerts without a firing test: %s" % sorted(set(ALERTS) - set(firing))
    assert silent >= set(ALERTS), "alerts without a silent case: %s" % sorted(set(ALERTS) - silent)
    for name, expected in firing.items():
        for alert in expected:
            # promtool compares annotations exactly: the test pins the rendered description.
            assert set(alert.get("exp_annotations", {})) == {"summary", "description", "runbook_url"}, name
            assert alert["exp_labels"]["severity"] == ALERTS[name]["labels"]["severity"], name


@pytest.mark.parametrize("name", sorted(ALERTS))
def test_alert_metadata(name):
    rule = ALERTS[name]
    assert re.fullmatch(r"[A-Z][a-zA-Z0-9]+", name), "CamelCase alert names"
    assert rule["labels"]["severity"] in ("critical", "warning", "info")
    annotations = rule["annotations"]
    assert set(annotations) == {"summary", "description", "runbook_url"}
    assert "{{" not in annotations["summary"] and annotations["summary"].endswith(".")
    # A sentence: capital first, full stop last (mixtool lint's alert-summary-style).
    assert re.fullmatch(r"[A-Z].*\.", annotations["summary"]), annotations["summary"]

    description = annotations["description"]
    assert "$labels." in description, "the description names the device"
    # Human units: numbers go through printf or a humanize function, never printed raw
    # (a raw float prints as 1.6e+10).
    assert not re.search(r"\{\{-?\s*(\$value|\.Value)\s*-?\}\}", description), description
    for use in re.findall(r"\{\{[^}]*(?:\$value|\.Value)[^}]*\}\}", description):
        assert re.search(r"printf|humanize", use), use

    url = annotations["runbook_url"]
    assert url.endswith(f"/runbooks/{name}.md")
    runbook = RUNBOOKS / f"{name}.md"
    assert runbook.is_file(), f"missing {runbook}"
    text = runbook.read_text()
    assert text.startswith(f"# {name}\n")
    for section in ("## What it means", "## Confirm by hand", "## How to fix"):
        assert section in text, f"{runbook.name}: no {section!r}"


def test_nvme_format_runbook_warns_that_it_erases():
    text = (RUNBOOKS / "NvmeNamespaceLbaFormatNotBest.md").read_text()
    assert "nvme format" in text and "ERASES THE WHOLE NAMESPACE" in text
    assert "nvme id-ns -H" in text


def test_runbooks_have_no_orphans():
    assert {p.stem for p in RUNBOOKS.glob("*.md")} == set(ALERTS)


def test_alerts_doc_lists_every_alert():
    text = (REPO / "docs" / "alerts.md").read_text()
    for name, rule in ALERTS.items():
        assert re.search(rf"\| \[`?{name}`?\]\(runbooks/{name}\.md\) \| {rule['labels']['severity']} \|", text), name


def test_recording_rules_follow_level_metric_operation():
    for path in RULE_FILES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                if "record" in rule:
                    level, metric, operation = rule["record"].split(":")
                    assert level and operation and metric.startswith("storpath_"), rule["record"]


def test_config_override_and_for_override(tmp_path):
    """A site's values reach the rules; `--for 0s` drops every `for:` (the integration tests use it)."""
    site = tmp_path / "site.yml"
    site.write_text("pcie:\n  watched_classes: '0x01.*'\n  link_below_expected_for: 30m\n"
                    "zfs:\n  capacity_warning_ratio: 0.8\n")
    config = generate.load_config(str(site))
    docs = generate.render(config)
    rules = {r.get("alert") or r["record"]: r for d in docs.values() for r in d["groups"][0]["rules"]}
    assert rules["PcieLinkSpeedBelowExpected"]["for"] == "30m"
    assert 'class=~"0x01.*"' in rules["PcieLinkSpeedBelowExpected"]["expr"]
    assert "> 0.8" in rules["ZfsPoolCapacityHigh"]["expr"]
    assert "80 %" in rules["ZfsPoolCapacityHigh"]["annotations"]["description"]

    untimed = generate.render(for_override="0s")
    assert not [r for d in untimed.values() for r in d["groups"][0]["rules"] if "for" in r]

    site.write_text("pcie:\n  no_such_key: 1\n")
    with pytest.raises(KeyError, match="no_such_key"):
        generate.load_config(str(site))


def test_rules_use_only_metrics_the_exporter_exposes():
    """Every storpath_* series a rule or description reads is in a fixture machine's golden
    exposition (what the exporter really serves) or, for metrics no fixture can produce (probes
    need fio and a config), documented in docs/metrics.md. Catches a renamed metric."""
    exposed = set()
    for golden in (REPO / "tests" / "fixtures" / "machines").glob("*/golden/*.prom"):
        exposed |= set(re.findall(r"^(storpath_[a-z0-9_]+)", golden.read_text(), re.M))
    documented = set(re.findall(r"`(storpath_[a-z0-9_]+)`", (REPO / "docs" / "metrics.md").read_text()))
    used = set()
    for path in RULE_FILES:
        # not the middle of a recording rule's name (level:metric:operation)
        used |= set(re.findall(r"(?<![:\w])(storpath_[a-z0-9_]+)(?![:\w])", path.read_text()))
    assert used - exposed - documented == set()
    assert used & exposed, "no golden exposition found"


def test_runbooks_name_the_units_that_are_installed():
    """The Debian package installs prometheus-storpath-exporter.service; `storpath.service` is only
    what deploy/systemd/install writes, so a runbook never names it alone."""
    for path in RUNBOOKS.glob("*.md"):
        text = path.read_text()
        assert not re.search(r"(journalctl -u|systemctl \w+) storpath\b", text), path.name
        if re.search(r"journalctl -u|systemctl \w+ \S*storpath", text):
            assert "prometheus-storpath-exporter" in text, path.name
