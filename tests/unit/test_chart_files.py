"""The Helm chart carries storpath's rules and dashboards as committed files (Helm reads files
inside the chart only, and Argo CD or Flux render the chart straight from git, with no make step):
they are rules/*.yml and dashboards/*.json, byte for byte. `make chart-files` copies them."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "helm" / "storpath"


def _files(folder: Path, pattern: str) -> dict:
    return {p.name: p.read_bytes() for p in sorted(folder.glob(pattern))}


def test_chart_rules_are_the_rules():
    rules = _files(REPO / "rules", "*.yml")
    assert rules, "no rules/*.yml"
    assert _files(CHART / "files" / "rules", "*.yml") == rules, "run: make chart-files"


def test_chart_dashboards_are_the_dashboards():
    dashboards = _files(REPO / "dashboards", "*.json")
    assert dashboards, "no dashboards/*.json"
    assert _files(CHART / "files" / "dashboards", "*.json") == dashboards, "run: make chart-files"


def test_chart_files_are_committed_not_ignored():
    for path in [*(CHART / "files" / "rules").glob("*.yml"), *(CHART / "files" / "dashboards").glob("*.json")]:
        ignored = subprocess.run(["git", "-C", str(REPO), "check-ignore", "-q", str(path)])
        assert ignored.returncode == 1, f"{path.relative_to(REPO)} is git-ignored"


def test_the_chart_knows_the_job_the_rules_select():
    """The chart rewrites the rules' job selector to its `job` value: it must know what the rules say."""
    config = yaml.safe_load((REPO / "rules" / "config" / "thresholds.yml").read_text())
    helpers = (CHART / "templates" / "_helpers.tpl").read_text()
    (job,) = re.findall(r'define "storpath.rulesJob" -}}(.*?){{', helpers)
    assert config["target_selector"] == f'job="{job}"'
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["job"] == job
