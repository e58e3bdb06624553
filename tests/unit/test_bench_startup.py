"""The start-up and collector benchmarks run end to end on small hosts, and call a scrape
complete only when every collector succeeded."""

from __future__ import annotations

import os
import subprocess
import sys

from benchmarks import startup
from tests.conftest import ROOT


def test_complete_means_every_collector_succeeded():
    assert startup.complete('storpath_scrape_collector_success{collector="pcie"} 1.0\n'
                            'storpath_scrape_collector_success{collector="nvme"} 1.0\n')
    assert not startup.complete('storpath_scrape_collector_success{collector="pcie"} 1.0\n'
                                'storpath_scrape_collector_success{collector="nvme"} 0.0\n')
    assert not startup.complete("# nothing yet\n")


def test_first_complete_scrape_of_a_fixture_machine(machine_tree, tmp_path):
    root = machine_tree("desktop-z690-single-socket", "healthy")
    found = startup.first_complete_scrape(startup.environment(os.path.join(ROOT, "exporter"), str(tmp_path)), root)
    assert found["ms"] > 0 and found["rss"] > 0 and found["series"] > 100


def test_gc_benchmark_on_a_small_host(tmp_path):
    done = subprocess.run([sys.executable, "-m", "benchmarks.gc_scrape", "--sizes", "2", "--scrapes", "1",
                           "--blocks", "2", "--workdir", str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "exporter")))
    assert done.returncode == 0, done.stderr
    assert "2 drives (4 PCI functions)" in done.stdout and "cyclic garbage among frozen objects 0" in done.stdout
    assert "unfrozen scrape p50" in done.stdout and "frozen   scrape p50" in done.stdout


def test_sources_benchmark_on_a_small_host(tmp_path):
    """benchmarks.sources times each source and collector of a serve-built exporter."""
    done = subprocess.run([sys.executable, "-m", "benchmarks.sources", "--size", "2", "--scrapes", "2",
                           "--workdir", str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "exporter")))
    assert done.returncode == 0, done.stderr
    assert "2 drives (4 PCI functions)" in done.stdout
    assert "source pci" in done.stdout and "values pcie" in done.stdout and "  sum " in done.stdout
