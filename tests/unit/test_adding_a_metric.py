"""CONTRIBUTING.md's "Adding a metric to an existing collector" is walked: its list of files
names files that are there, and a gauge added to a collector the way it says shows up where
the list says and nowhere else: in the exposition of a machine that has its values, in
docs/metrics.md's table, and not in the exposition of a machine without them (not even its
`# HELP`), so no other golden changes."""

from __future__ import annotations

import glob
import os
import re

import pytest

from storpath.scrape import exposition
from storpath.report import metricsdoc
from storpath.base.background import Scheduler
from storpath.collectors import load_all, pcie
from storpath.base.config import validate
from storpath.report.exporter import StorpathExporter, build_collectors
from storpath.scrape.families import GAUGE, Family
from storpath.base.roots import Roots
from tests.conftest import ROOT

CONTRIBUTING = os.path.join(ROOT, "CONTRIBUTING.md")
NEW = Family("storpath_pcie_walked_gauge", GAUGE, "A gauge the recipe's walk adds.", ("address",))


def recipe(path: str = CONTRIBUTING):
    """(file, what changes, by) of each row of the recipe's table."""
    text = open(path, encoding="utf-8").read()
    table = text.split("<!-- metric-recipe -->", 1)[1].split("<!-- /metric-recipe -->", 1)[0]
    rows = []
    for line in table.strip().splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows.append((cells[0].strip("`"), cells[1], cells[2]))
    return rows


def _exposition(root: str) -> str:
    roots = Roots(sysfs=os.path.join(root, "sys"), procfs=os.path.join(root, "proc"),
                  captured=os.path.join(root, "captured") if os.path.isdir(os.path.join(root, "captured")) else None)
    config = validate({}, {n: s.cls.config_defaults for n, s in load_all().items()})
    scheduler = Scheduler()
    exporter = StorpathExporter(build_collectors(roots, config, scheduler), roots)
    try:
        text = b"".join(exposition.pieces(exporter.collect(30.0))).decode()
    finally:
        exporter.close()
        scheduler.stop()
    text = re.sub(r"^(storpath_scrape_collected_timestamp_seconds) .*$", r"\1 X", text, flags=re.M)
    return re.sub(r"^(storpath_scrape_(?:collector|source)_duration_seconds\{[^}]*\}) .*$", r"\1 X", text, flags=re.M)


def _add_the_gauge(monkeypatch, value):
    """Steps 1 and 2: the family in the collector's table, its rows in values()."""
    families = pcie.FAMILIES[:-1] + (NEW, pcie.FAMILIES[-1])
    monkeypatch.setattr(pcie, "FAMILIES", families)
    monkeypatch.setattr(pcie.PcieCollector, "families", families)
    real = pcie.PcieCollector.values

    def values(self, snapshot):
        rows = real(self, snapshot)
        for device in snapshot.pci:
            rows.add(NEW, (device.address,), value(device))
        return rows

    monkeypatch.setattr(pcie.PcieCollector, "values", values)


def test_the_recipe_lists_at_most_eight_files_and_each_is_there():
    rows = recipe()
    assert 3 <= len(rows) <= 8
    for file, _, by in rows:
        assert by in ("hand", "`make golden`", "`make docs`"), by
        assert glob.glob(os.path.join(ROOT, re.sub(r"<[^>]+>", "*", file))), f"{file}: no such file"


@pytest.mark.parametrize("has_values", [True, False])
def test_a_gauge_added_as_the_recipe_says_is_where_it_says(machine_tree, monkeypatch, has_values):
    root = machine_tree("desktop-z690-single-socket", "healthy")
    before = _exposition(root)
    _add_the_gauge(monkeypatch, (lambda device: 1) if has_values else (lambda device: None))
    after = _exposition(root)
    added = [line for line in after.splitlines() if line not in before.splitlines()]
    if has_values:
        assert added[:2] == [f"# HELP {NEW.name} {NEW.help}", f"# TYPE {NEW.name} gauge"]
        assert added[2:] and all(line.startswith(NEW.name + "{") for line in added[2:])
    else:  # a machine without its values: the golden stays as it was, byte for byte
        assert after == before
    # `make docs`: the family's row in docs/metrics.md's table of its collector
    doc = metricsdoc.render(open(os.path.join(ROOT, "docs", "metrics.in.md"), encoding="utf-8").read())
    assert f"`{NEW.name}`" in doc
