"""The end-to-end tests that run alone.

The full suite (scripts/test) runs in two passes: first every self-contained test on all cores
(pytest-xdist), then, one test at a time, those marked `alone` (and the integration and lab
tiers). An end-to-end test runs alone when it measures time or load, or makes load itself: run
beside another test on a 2-core machine, either could fail for the other's sake. The modules
below are those; the rest of this tier (goldens, check, tree, capture, lspci, the noise corpus)
compares outputs only and runs in the first pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

ALONE = {
    "test_background_failure_replay": "waits for background passes by the clock",
    "test_blocking_reads": "tells a blocked read from a slow one by how long it is outstanding",
    "test_hostile_names": "serves and checks machines under a non-UTF-8 environment with deadlines",
    "test_landing_browser": "drives Chromium, which takes both cores while it starts",
    "test_probes_fio": "runs fio and bounds its time and its budget",
    "test_probes_serve": "probes on a schedule and times their runs",
    "test_raid_bounds": "bounds the RAID tools' runs in time",
    "test_raid_hostile_serve": "hangs RAID tools and bounds the scrape meanwhile",
    "test_raid_reload_stop": "reloads and stops while RAID tools run, within deadlines",
    "test_raid_tools": "runs the RAID tools on their schedule",
    "test_serve": "waits for scrapes and background tasks by the clock",
    "test_serve_abuse": "floods the server and bounds its answers in time",
    "test_serve_address_cap": "holds connections open until timeouts",
    "test_serve_config_bounds": "bounds start-up and scrapes in time",
    "test_serve_descriptors": "counts open files and connections while clients come and go",
    "test_serve_helper": "times the privileged helper's answers",
    "test_serve_signals": "signals the server and times its reload and shutdown",
    "test_serve_web": "read and write timeouts of slow clients",
    "test_slow_is_not_stuck": "saturates every core on purpose",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        path = Path(str(item.fspath))
        if path.parent == HERE and path.stem in ALONE:
            item.add_marker(pytest.mark.alone)
