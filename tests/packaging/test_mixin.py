"""The monitoring mixin: generated from rules/definitions and dashboards/generate.py, it evaluates
(Debian's C++ jsonnet and go-jsonnet) to exactly rules/*.yml and dashboards/*.json with its default
_config, follows a site's _config the way rules/generate.py and dashboards/generate.py do, and
can be vendored by jsonnet-bundler: everything it imports lies inside mixin/."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
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


@pytest.fixture(scope="module", params=["jsonnet", "go-jsonnet"])
def jsonnet(request) -> str:
    """Debian's C++ jsonnet, and go-jsonnet (what jsonnet-bundler users run), built once by
    scripts/build-go-jsonnet from the Go module proxy."""
    if request.param == "jsonnet":
        return require_tool("jsonnet", "jsonnet")
    result = subprocess.run([str(REPO / "scripts" / "build-go-jsonnet")], capture_output=True, text=True,
                            timeout=900)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def evaluate(field: str, config: dict | None = None, jsonnet: str | None = None, path: Path = MIXIN,
             name: str = "mixin.libsonnet"):
    """``field`` of the mixin, with ``config`` merged into _config."""
    jsonnet = jsonnet or require_tool("jsonnet", "jsonnet")
    code = f"(import '{name}')"
    if config is not None:
        code += " + { _config+:: %s }" % json.dumps(config)
    result = subprocess.run([jsonnet, "-J", str(path), "-e", f"({code}).{field}"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def rule_files() -> dict:
    return {p.name: yaml.safe_load(p.read_text()) for p in sorted((REPO / "rules").glob("*.yml"))}


def test_mixin_is_generated_from_the_current_definitions():
    assert mixingen.main(["--check"]) == 0, "run: make mixin"


def test_default_config_evaluates_to_exactly_the_rule_files(jsonnet):
    files = rule_files()
    assert set(rulegen.subsystems()) == {name[:-4] for name in files}
    assert evaluate("ruleFiles", jsonnet=jsonnet) == files


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
    "pcie": {"placement_severity": "warning", "watch_switch_uplinks": False, "aer_window": "30m"},
    "target_labels": ["cluster", "job", "instance"],
    "target_selector": 'job="storpath-exporter"',
}


def test_a_sites_config_changes_the_mixin_as_it_changes_rules_generate(jsonnet):
    config = {mixingen.camel(path): value for path, value in mixingen.leaves(SITE)}
    got = evaluate("ruleFiles", config, jsonnet=jsonnet)
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


def test_dashboards_are_those_of_dashboards_dir(jsonnet):
    dashboards = evaluate("grafanaDashboards", jsonnet=jsonnet)
    want = {p.name: json.loads(p.read_text()) for p in sorted((REPO / "dashboards").glob("*.json"))}
    assert want and dashboards == want


# What a site changes on its boards: the thresholds drawn and named, the AER window, the runbook
# base the panel links use, the job variable's selector.
DASHBOARD_SITE = {
    "zfs": {"capacity_warning_ratio": 0.8, "capacity_critical_ratio": 0.95},
    "probes": {"throughput_ratio_threshold": 0.55},
    "pcie": {"aer_window": "30m", "aer_correctable_threshold": 25},
    "capacity": {"peak_window": "14d", "headroom_warning_ratio": 0.9},
    "dashboards": {"job_selector": 'namespace="monitoring"', "runbook_url_base": "https://wiki.example.com/storage/"},
}


def test_a_sites_config_changes_the_dashboards_as_it_changes_dashboards_generate(jsonnet, tmp_path):
    dashgen = _load("storpath_dashboards_generate_test", REPO / "dashboards" / "generate.py")
    site = tmp_path / "site.yml"
    site.write_text(yaml.safe_dump(DASHBOARD_SITE))
    want = {name: json.loads(text) for name, text in dashgen.render(str(site)).items()}
    config = {mixingen.camel(path): value for path, value in mixingen.leaves(DASHBOARD_SITE)}
    got = evaluate("grafanaDashboards", config, jsonnet=jsonnet)
    assert got == want
    text = json.dumps(got)
    assert "https://wiki.example.com/storage/ZfsPoolCapacityHigh.md" in text and "/runbooks/" not in text
    assert "Orange from 80%, red from 95%" in text and "[30m]" in text and "(14d peak)" in text
    assert 'label_values(storpath_build_info{namespace=\\"monitoring\\"}, job)' in text
    fleet = got["storpath-fleet.json"]
    pools = next(p for p in fleet["panels"] if p["title"] == "Pools by fill level")
    used = next(o for o in pools["fieldConfig"]["overrides"] if o["matcher"]["options"] == "used")
    steps = next(prop["value"]["steps"] for prop in used["properties"] if prop["id"] == "thresholds")
    assert [s["value"] for s in steps] == [None, 0.8, 0.95]


# ---- vendored with jsonnet-bundler -------------------------------------------------------------
IMPORT = re.compile(r"\bimport(?:str|bin)?\s*(['\"])(.+?)\1")


def test_everything_the_mixin_imports_lies_inside_its_folder():
    """jsonnet-bundler vendors the folder alone (`jb install github.com/storpath/storpath/mixin`):
    an import that climbs out of it finds nothing there."""
    imports = []
    for source in sorted(MIXIN.rglob("*sonnet")):
        code = "\n".join(line for line in source.read_text().splitlines() if not line.lstrip().startswith("//"))
        for _, target in IMPORT.findall(code):
            resolved = (source.parent / target).resolve()
            imports.append(target)
            assert MIXIN.resolve() in resolved.parents, f"{source.relative_to(REPO)} imports {target}"
            assert resolved.is_file(), f"{source.relative_to(REPO)} imports {target}, which is missing"
    assert "generated/dashboards.libsonnet" in imports


def test_jsonnetfile_declares_a_package_without_dependencies():
    manifest = json.loads((MIXIN / "jsonnetfile.json").read_text())
    assert manifest["version"] == 1 and manifest["dependencies"] == []


def test_a_vendored_copy_evaluates_alone(jsonnet, tmp_path):
    """The folder copied where jsonnet-bundler puts it (vendor/<name>/), nothing else of the
    repository beside it, imported by a site's jsonnet through -J vendor."""
    vendor = tmp_path / "vendor"
    shutil.copytree(MIXIN, vendor / "storpath-mixin", ignore=shutil.ignore_patterns("__pycache__", "*.py"))
    for field in ("prometheusAlerts", "prometheusRules", "grafanaDashboards"):
        assert evaluate(field, jsonnet=jsonnet, path=vendor, name="storpath-mixin/mixin.libsonnet") \
            == evaluate(field, jsonnet=jsonnet), field
