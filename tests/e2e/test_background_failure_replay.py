"""A replayed `zpool status` JSON nested 5000 levels deep, through the real exporter:
`storpath_zfs_zpool_up 0` with the reason in the log, and every other series as the
same machine with its real zpool output gives. Before, the zpool task died of
RecursionError, `storpath_zfs_zpool_up` was absent and every success said 1."""

from __future__ import annotations

import os
import re
import shutil
import time

from tests.conftest import run_exporter
from tests.e2e.test_golden import normalise

MACHINE = ("intel-r2224wft-switches", "zfs-degraded")
DEEP = '{"output_version": {"command": "zpool status", "vers_major": 0, "vers_minor": 1}, "pools": ' \
       + '{"zpool1": ' * 5000 + "{}" + "}" * 5000 + "}\n"


def _args(root):
    return [f"--path.sysfs={root}/sys", f"--path.procfs={root}/proc", f"--path.captured={root}/captured",
            "--web.disable-exporter-metrics"]


def _zpool_up(text):
    match = re.search(r"^storpath_zfs_zpool_up (\S+)$", text, re.M)
    return float(match.group(1)) if match else None


def _scrape_once_zpool_ran(exporter):
    """The first answer after the zpool task's first pass (it runs beside the first scrape)."""
    deadline = time.monotonic() + 20
    text = exporter.metrics()
    while _zpool_up(text) is None and time.monotonic() < deadline:
        time.sleep(0.2)
        text = exporter.metrics()
    return text


def _without(text, prefixes):
    return [line for line in normalise(text).splitlines() if not line.startswith(prefixes)
            and not any(f"# {kind} {p}" in line for kind in ("HELP", "TYPE") for p in prefixes)]


def test_a_zpool_document_nested_5000_deep_is_zpool_up_0_and_nothing_else_changes(machine_tree, tmp_path):
    original = machine_tree(*MACHINE)
    replay = str(tmp_path / "machine")
    shutil.copytree(original, replay, symlinks=True)
    with open(os.path.join(replay, "captured", "zpool", "status.json"), "w") as handle:
        handle.write(DEEP)
    with run_exporter(_args(original), str(tmp_path)) as exporter:
        healthy = _scrape_once_zpool_ran(exporter)
    with run_exporter(_args(replay), str(tmp_path)) as exporter:
        deep = _scrape_once_zpool_ran(exporter)
        log = exporter.log()
    assert _zpool_up(healthy) == 1
    assert _zpool_up(deep) == 0, log
    assert "zpool status JSON does not parse: nested deeper than 64 levels" in log
    assert "RecursionError" not in log and "Traceback" not in log
    # Every source and collector read, the zfs collector included (pool states from kstat).
    assert re.findall(r"^storpath_scrape_(?:source|collector)_success\{.*\} 0", deep, re.M) == []
    assert 'storpath_scrape_collector_success{collector="zfs"} 1.0' in deep
    assert 'storpath_zfs_pool_state{state="degraded",zpool="zpool1"} 1.0' in deep
    # Everything but the zpool details is what the machine's real zpool output gives.
    volatile = ("storpath_zfs_", "storpath_scrape_source_duration", "storpath_scrape_collector_duration",
                "storpath_scrape_collected_timestamp")
    assert _without(deep, volatile) == _without(healthy, volatile)
