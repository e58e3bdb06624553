"""The linters the rules, the mixin and the boards are said to pass, run where they are installed:
pint on rules/*.yml (its exceptions in rules/.pint.hcl, each with its reason), mixtool on the
mixin, dashboard-linter on every board (exceptions in dashboards/.lint). None of them is in Debian
or served by the Go module proxy as a module that builds with `go install`, so each is looked for
on PATH, in $STORPATH_TOOLS and under .cache/go-tools/; a missing one skips its test, naming it.
To run them, build each from its source (git clone, then `GOFLAGS=-mod=mod go build -o DIR/NAME
./cmd/NAME`, `.` for dashboard-linter; their dependencies come from the Go module proxy) into one
folder DIR and set STORPATH_TOOLS=DIR. dashboard-linter from 4d0844b on (the Grafana v2 schema)
needs github.com/grafana/grafana/apps/dashboard, which the proxy refuses; its parent 1be3836
lints the same v1 boards with the same rules.
What they check is also kept without them by tests/rules/test_rules.py and
tests/dashboards/test_conventions.py."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SOURCES = {
    "pint": "github.com/cloudflare/pint (cmd/pint)",
    "mixtool": "github.com/monitoring-mixins/mixtool (cmd/mixtool)",
    "dashboard-linter": "github.com/grafana/dashboard-linter",
}


def find(name: str) -> str:
    places = [shutil.which(name)]
    if os.environ.get("STORPATH_TOOLS"):
        places.append(os.path.join(os.environ["STORPATH_TOOLS"], name))
    places += sorted(glob.glob(str(REPO / ".cache" / "go-tools" / f"{name}-*" / name)), reverse=True)
    for place in places:
        if place and os.access(place, os.X_OK):
            return place
    pytest.skip(f"{name} is not installed (not on PATH, in $STORPATH_TOOLS or .cache/go-tools/{name}-*/): "
                f"build it from {SOURCES[name]} to run this check")


def run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300)


def test_pint_finds_nothing():
    pint = find("pint")
    rules = sorted(str(p.relative_to(REPO)) for p in (REPO / "rules").glob("*.yml"))
    result = run(pint, "--no-color", "--offline", "--config", "rules/.pint.hcl", "lint", "--fail-on", "warning", *rules)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mixtool_lints_the_mixin():
    mixtool = find("mixtool")
    result = run(mixtool, "lint", "mixin/mixin.libsonnet")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("board", sorted(p.name for p in (REPO / "dashboards").glob("*.json")))
def test_dashboard_linter_strict(board):
    linter = find("dashboard-linter")
    result = run(linter, "lint", "--strict", f"dashboards/{board}")
    assert result.returncode == 0, result.stdout + result.stderr


def test_dashboard_linter_reads_the_exclusions(tmp_path):
    """The boards pass because of dashboards/.lint, read beside the board: without it the Host
    board's single-select host and job and its node_exporter queries are reported."""
    linter = find("dashboard-linter")
    board = tmp_path / "storpath-host.json"
    board.write_text((REPO / "dashboards" / "storpath-host.json").read_text(encoding="utf-8"), encoding="utf-8")
    result = run(linter, "lint", "--strict", str(board))
    assert result.returncode != 0, result.stdout + result.stderr
    assert "job template should be a multi select" in result.stdout + result.stderr
