"""The README's pictures (docs/images/) are what scripts/make-images makes today: the tree and the
plot byte for byte, the landing page by its HTML's hash (Chromium's pixels are not byte-stable).
Needs no Chromium: the check renders the SVGs and the page, not the screenshot."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

from tests.conftest import ROOT

GENERATE = f"{ROOT}/docs/images/generate.py"


def _module():
    spec = importlib.util.spec_from_file_location("docs_images_generate", GENERATE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_images_are_current():
    result = subprocess.run([sys.executable, GENERATE, "--check"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def test_plot_reads_both_exporters_from_the_last_benchmark_table():
    images = _module()
    rows, bench = images.cost_rows(open(images.PERFORMANCE, encoding="utf-8").read())
    assert len(rows) >= 2 and {devices for devices, _, _ in rows} == {256, 2048}  # one run or a pair per size
    assert all(node > storpath for _, storpath, node in rows)  # node_exporter's pcidevice collector is slower
    svg = images.plot_svg(rows, bench)
    assert svg.count("<polyline") == 2 and svg.count("<circle") == 2 * len(rows) and bench.date in svg


def test_the_readme_shows_every_picture():
    readme = open(f"{ROOT}/README.md", encoding="utf-8").read()
    for name in ("tree.svg", "landing.png", "scrape-cost.svg"):
        assert f"(docs/images/{name})" in readme, name


def test_a_changed_page_is_seen_but_not_its_time():
    images = _module()
    page = b"<p>From the scrape that finished 2026-11-28 03:06:09 UTC (0 s ago).</p><p>nvme2</p>"
    later = page.replace(b"03:06:09 UTC (0 s ago)", b"04:10:00 UTC (12 s ago)")
    assert images.page_hash(page) == images.page_hash(later)
    assert images.page_hash(page) != images.page_hash(page.replace(b"nvme2", b"nvme3"))
