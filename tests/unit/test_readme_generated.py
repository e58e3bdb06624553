"""README's parts that describe the code and the last measurement are what docs/readme.py makes
from them (the collectors table from the collector registry and the slow sources, the benchmark
paragraph and its plot from the last benchmark table of docs/performance.md), and a change to
either makes README stale; the slow work README lists is every slow source there is."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import sys

from storpath.collectors import REGISTRY, load_all
from storpath.scrape import slow
from tests.conftest import ROOT


def _module(name: str, path: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


readme = _module("docs_readme", os.path.join(ROOT, "docs", "readme.py"))


def _text(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def test_the_generated_parts_are_current():
    assert readme.stale(_text(readme.README), readme.parts()) == [], "run python docs/readme.py (make docs)"


def test_the_collectors_table_is_the_registry():
    text = _text(readme.README)
    table = text[text.index("| collector | what | when |"):]
    table = table[:table.index("<!-- /generated")]
    named = set()
    for row in table.splitlines()[2:]:
        named.update(re.findall(r"`([a-z_]+)`", row.split("|")[1]))
    assert named == set(load_all())


def test_a_collector_changed_in_the_code_makes_the_readme_stale(monkeypatch):
    load_all()
    spec = REGISTRY["block"]
    monkeypatch.setitem(REGISTRY, "block", dataclasses.replace(spec, help="Block devices, told otherwise."))
    assert "Block devices, told otherwise" in readme.collectors_table()
    assert readme.stale(_text(readme.README), readme.parts()) == ["collectors"]


def test_the_paragraph_and_the_plot_follow_the_last_benchmark_table():
    text = _text(readme.PERFORMANCE)
    bench = readme.last_benchmark(text)
    assert bench.runs and bench.sizes() == [256, 2048] and bench.node_exporter == "1.12.1"
    assert all(run.label.startswith("after") for run in bench.runs)
    paragraph = readme.benchmark_paragraph(bench)
    assert f"{min(r.ratio for r in bench.at(2048)):.2f}" in paragraph and bench.date in paragraph
    # a newer table, written below, is the one the README gives
    newer = text + ("\n## A newer run (2031-01-02)\n\nBeside node_exporter 1.13.0:\n\n"
                    "| run | functions | p50 | CPU/scrape | bare reads | CPU / bare | peak RSS | node_exporter p50 | p50 ratio |\n"
                    "|---|---|---|---|---|---|---|---|---|\n"
                    "| before | 256 | 30.0 ms | 29.0 ms | 6.0 ms | 4.8 | 38.0 MB | 50.0 ms | 0.600 |\n"
                    "| after | 256 | 20.0 ms | 19.0 ms | 6.0 ms | 3.2 | 38.0 MB | 50.0 ms | 0.400 |\n"
                    "| after | 2048 | 100.0 ms | 99.0 ms | 50.0 ms | 2.0 | 60.0 MB | 400.0 ms | 0.250 |\n")
    moved = readme.last_benchmark(newer)
    assert (moved.date, moved.node_exporter, [r.ratio for r in moved.runs]) == ("2031-01-02", "1.13.0", [0.4, 0.25])
    assert "took 0.25 of node_exporter's" in readme.benchmark_paragraph(moved)
    images = _module("docs_images_generate", os.path.join(ROOT, "docs", "images", "generate.py"))
    rows, drawn = images.cost_rows(newer)
    assert rows == [(256, 20.0, 50.0), (2048, 100.0, 400.0)] and repr(drawn) == repr(moved)  # its own load of readme.py
    assert "2031-01-02" in images.plot_svg(rows, drawn)


# What README says of each slow source (storpath.scrape.slow), where it lists the work kept off
# the scrape path. A new slow source fails here until README names it too.
SLOW_WORK = {
    "nvme-identify": "NVMe\nIdentify", "nvme-smart": "SMART log", "sas-link-errors": "SAS PHY error counters",
    "sas-drive-phys": "SAS drives' own PHYs", "dmsetup": "`dmsetup status`", "raid": "RAID controllers' tools",
    "zpool": "`zpool`", "gpu-link-samples": "GPU link sampler", "link-change-samples": "link change sampler",
    "pcie-target-speeds": "Target Link Speed reads", "probe": "fio probes",
    "nvme-controller-states": "local NVMe drives' controller states",
}


def test_the_slow_work_readme_lists_is_every_slow_source():
    text = _text(readme.README)
    paragraph = text[text.index("The scrape path reads only sysfs and procfs"):]
    paragraph = paragraph[:paragraph.index("\n\n")]
    assert sorted(source.task for source in slow.SLOW) == sorted(SLOW_WORK)
    for task, words in SLOW_WORK.items():
        assert words in paragraph, (task, words)
