"""Tier 2: the real `storpath serve` on every fixture machine, scraped over HTTP and
compared with the checked-in golden exposition.

Regenerate the golden files after an intended change with
    STORPATH_UPDATE_GOLDEN=1 python -m pytest tests/e2e/test_golden.py
(or `make golden`) and review the diff like code. Only the value 1 updates, and never
under CI: a CI run that rewrote its goldens would pass whatever the exporter serves.
"""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from tests.conftest import require_tool
from tests.fixtures import machines

CASES = machines.all_cases()


def update_mode(environ) -> bool:
    """Whether this run rewrites the goldens: STORPATH_UPDATE_GOLDEN=1, and not under CI."""
    if environ.get("STORPATH_UPDATE_GOLDEN", "") != "1":
        return False
    if environ.get("CI"):
        raise RuntimeError("STORPATH_UPDATE_GOLDEN=1 under CI: goldens are compared in CI, never rewritten")
    return True


UPDATE = update_mode(os.environ)

# Values that differ from run to run: durations, the Python version, the build's git revision and branch,
# when the configuration was loaded.
_VOLATILE = [
    (re.compile(r'^(storpath_scrape_(?:collector|source)_duration_seconds\{[^}]*\}) .*$', re.M), r"\1 <duration>"),
    (re.compile(r'^(storpath_config_last_reload_success_timestamp_seconds) .*$', re.M), r"\1 <timestamp>"),
    (re.compile(r'^(storpath_scrape_collected_timestamp_seconds) .*$', re.M), r"\1 <timestamp>"),
    (re.compile(r'^(storpath_build_info\{branch=)"[^"]*",python="[^"]*",revision="[^"]*",', re.M),
     r'\1"<branch>",python="<python>",revision="<revision>",'),
]


def concrete(golden: str) -> str:
    """A golden exposition with a value in place of each placeholder normalise() put there."""
    for placeholder, value in (("<duration>", "0.001"), ("<python>", "3"), ("<branch>", "main"),
                               ("<revision>", "0" * 40), ("<timestamp>", "1.7e+09")):
        golden = golden.replace(placeholder, value)
    return golden


def normalise(exposition: str) -> str:
    for pattern, replacement in _VOLATILE:
        exposition = pattern.sub(replacement, exposition)
    return exposition


@pytest.mark.parametrize("name,variant", CASES, ids=[f"{n}:{v}" for n, v in CASES])
def test_exposition_matches_golden(name, variant, exporter_on):
    # The exporter's own process and Python metrics differ from run to run: left out.
    with exporter_on(name, variant, "--web.disable-exporter-metrics") as exporter:
        text = normalise(exporter.metrics())
        log = exporter.log()
    assert 'storpath_scrape_collector_success{collector="pcie"} 1.0' in text, log
    golden = machines.load(name).golden(variant)
    expected = None
    if os.path.exists(golden):
        with open(golden) as handle:
            expected = handle.read()
    if UPDATE and text != expected:
        os.makedirs(os.path.dirname(golden), exist_ok=True)
        with open(golden, "w") as handle:
            handle.write(text)
        pytest.skip(f"{golden} {'written' if expected is None else 'rewritten'}: review the diff")
    assert expected is not None, f"no golden file {golden}: run `make golden` and review it"
    assert text == expected, f"exposition of {name}:{variant} differs from {golden}; run `make golden` if intended"


@pytest.mark.parametrize("environ,update", [
    ({}, False), ({"STORPATH_UPDATE_GOLDEN": "0"}, False), ({"STORPATH_UPDATE_GOLDEN": ""}, False),
    ({"STORPATH_UPDATE_GOLDEN": "no"}, False), ({"STORPATH_UPDATE_GOLDEN": "1"}, True),
])
def test_only_the_value_1_updates_goldens(environ, update):
    """Before: any non-empty value, 0 included, rewrote every golden."""
    assert update_mode(environ) is update


def test_goldens_are_never_rewritten_under_ci():
    with pytest.raises(RuntimeError, match="never rewritten"):
        update_mode({"STORPATH_UPDATE_GOLDEN": "1", "CI": "true"})
    assert update_mode({"STORPATH_UPDATE_GOLDEN": "0", "CI": "true"}) is False


@pytest.mark.promtool
@pytest.mark.parametrize("name,variant", CASES, ids=[f"{n}:{v}" for n, v in CASES])
def test_golden_passes_promtool_check_metrics(name, variant):
    promtool = require_tool("promtool", "prometheus")
    golden = machines.load(name).golden(variant)
    with open(golden, encoding="utf-8") as handle:
        data = concrete(handle.read()).encode("utf-8")
    result = subprocess.run([promtool, "check", "metrics"], input=data, capture_output=True, timeout=60)
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()


FLEET_SCALE = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "fleet-scale.md")
SERIES_ROW = re.compile(r"^(\| ([a-z0-9-]+) \(([a-z0-9-]+)\) \| [^|]+ \| )(\d+)( \|)$", re.M)


def served_series(name: str, variant: str) -> int:
    """The samples a fixture machine's golden exposition serves (HELP/TYPE lines not counted)."""
    with open(machines.load(name).golden(variant)) as handle:
        return sum(1 for line in handle if line.strip() and not line.startswith("#"))


def fleet_scale_table(doc: str) -> str:
    """docs/fleet-scale.md with the series column of its series table counted from the goldens:
    the rows (machine, variant, what it has) are written by hand, the counts never."""
    before, rest = doc.split("<!-- series-table", 1)
    table, after = rest.split("<!-- /series-table -->", 1)
    table = SERIES_ROW.sub(lambda m: f"{m.group(1)}{served_series(m.group(2), m.group(3))}{m.group(5)}", table)
    return before + "<!-- series-table" + table + "<!-- /series-table -->" + after


def test_fleet_scale_doc_matches_goldens():
    """docs/fleet-scale.md quotes the series count per fixture machine, generated from the
    goldens (`make golden` rewrites them with the goldens); this fails when they drift."""
    doc = open(FLEET_SCALE, encoding="utf-8").read()
    table = doc.split("<!-- series-table", 1)[1].split("<!-- /series-table -->", 1)[0]
    assert len(SERIES_ROW.findall(table)) >= 5
    counted = fleet_scale_table(doc)
    if UPDATE and counted != doc:
        with open(FLEET_SCALE, "w", encoding="utf-8") as handle:
            handle.write(counted)
        return
    assert counted == doc, "docs/fleet-scale.md's series counts differ from the goldens: make golden"


def test_fleet_scale_counts_are_generated():
    """A count written by hand that differs from its golden is rewritten, not kept."""
    doc = open(FLEET_SCALE, encoding="utf-8").read()
    wrong = SERIES_ROW.sub(lambda m: f"{m.group(1)}1{m.group(5)}", doc, count=1)
    assert wrong != doc and fleet_scale_table(wrong) == doc