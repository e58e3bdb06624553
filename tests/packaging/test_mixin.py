"""The monitoring mixin: generated from rules/definitions, it evaluates (Debian's jsonnet) to exactly
rules/*.yml with its default _config, and follows a site's _config the way rules/generate.py does."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import require_tool

REPO = Path(__file__).resolve().parents[2]
MIXIN = REPO / "mixin"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


rulegen = _load("storpath_rules_generate_test", REPO / "rules" / "generate.py")
mixingen = _load("storpath_mixin_generate_test", MIXIN / "generate.py")


def evaluate(field: str, config: dict | None = None):
    """``field`` of the mixin, with ``config`` merged into _config."""
    jsonnet = require_tool("jsonnet", "jsonnet")
    code = "(import 'mixin.libsonnet')"
    if config is not None:
        code += " + { _config+:: %s }" % json.dumps(config)
    result = subprocess.run([jsonnet, "-J", str(MIXIN), "-e", f"({code}).{field}"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def rule_files() -> dict:
    return {p.name: yaml.safe_load(p.read_text()) for p in sorted((REPO / "rules").glob("*.yml"))}


def test_mixin_is_generated_from_the_current_definitions():
    assert mixingen.main(["--check"]) == 0, "run: python3 mixin/generate.py"


def test_default_config_evaluates_to_exactly_the_rule_files():
    files = rule_files()
    assert set(rulegen.subsystems()) == {name[:-4] for name in files}
    assert evaluate("ruleFiles") == files


def test_alerts_and_recording_rules_hold_every_rule_once():
    alerts = evaluate("prometheusAlerts")["groups"]
    records = evaluate("prometheusRules")["groups"]
    for name, document in rule_files().items():
        for group in document["groups"]:
            want_alerts = [r for r in group["rules"] if "alert" in r]
            want_records = [r for r in group["rules"] if "record" in r]
            got_alerts = [g["rules"] for g in alerts if g["name"] == group["name"]]
            got_records = [g["rules"] for g in records if g["name"] == group["name"] + ".rules"]
            assert got_alerts == ([want_alerts] if want_alerts else []), name
            assert got_records == ([want_records] if want_records else []), name
    names = [g["name"] for g in alerts + records]
    assert len(names) == len(set(names)), "one PrometheusRule takes both lists: group names must differ"


# A site's values: a threshold, a ratio shown in percent, a `for:` of 0 (left out), a duration
# compared in seconds, a severity, the target labels and selector, and a switch that changes
# expressions (pcie.watch_switch_uplinks).
SITE = {
    "zfs": {"capacity_warning_ratio": 0.8, "scrub_overdue_after": "45d"},
    "md": {"degraded_for": "0s", "mismatch_threshold": 16},
    "pcie": {"placement_severity": "info", "watch_switch_uplinks": False, "aer_window": "30m"},
    "target_labels": ["cluster", "job", "instance"],
    "target_selector": 'job="storpath-exporter"',
}


def test_a_sites_config_changes_the_mixin_as_it_changes_rules_generate():
    config = {mixingen.camel(path): value for path, value in mixingen.leaves(SITE)}
    got = evaluate("ruleFiles", config)
    want = {f"{name}.yml": doc for name, doc in rulegen.render(rulegen.merge(rulegen.load_config(), SITE)).items()}
    assert got == want
    assert got != rule_files()
    zfs = {r.get("alert"): r for r in got["zfs.yml"]["groups"][0]["rules"]}
    assert "> 0.8\n" in zfs["ZfsPoolCapacityHigh"]["expr"]
    assert "80 %" in zfs["ZfsPoolCapacityHigh"]["annotations"]["description"]
    assert "> 3888000" in zfs["ZfsScrubOverdue"]["expr"]
    md = {r.get("alert"): r for r in got["md.yml"]["groups"][0]["rules"]}
    assert "for" not in md["MdArrayDegraded"] and md["MdMemberFaulty"]["for"] == "1m"
    assert "on(cluster, job, instance, device)" in md["MdSyncStalled"]["expr"]


def test_dashboards_are_those_of_dashboards_dir():
    dashboards = evaluate("grafanaDashboards")
    want = {p.name: json.loads(p.read_text()) for p in sorted((REPO / "dashboards").glob("*.json"))}
    assert want and dashboards == want
