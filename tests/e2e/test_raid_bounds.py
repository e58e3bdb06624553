"""A storcli that lists 130 000 drives (a 15 MB drives.json: no controller has that many) on the
real exporter: the RAID parse stops at its bound, storcli is `tool_up 0` with the reason in
the log, every other collector goes on, and the process stays well within the unit's
MemoryMax (512M; the chart's limit is 256Mi). Before the bound, the same file gave 1.04M
series, a 9 s scrape and 608 MiB."""

from __future__ import annotations

import time

from tests.conftest import run_exporter
from tests.fixtures.builders_raid import storcli_drive_rows

# deploy/systemd/storpath.service's MemoryMax, and the chart's resources.limits.memory.
UNIT_MEMORY_MAX_MIB = 512
CHART_MEMORY_LIMIT_MIB = 256


def _peak_rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM in /proc/<pid>/status")


def test_130k_drives_are_refused_with_the_reason_within_the_memory_limit(machine_tree, tmp_path):
    root = machine_tree("dell-r730xd-perc-h730p", "healthy")
    captured = tmp_path / "captured"
    (captured / "storcli").mkdir(parents=True)
    for name in ("controllers.json", "volumes.json"):
        (captured / "storcli" / name).write_bytes(open(f"{root}/captured/storcli/{name}", "rb").read())
    (captured / "storcli/drives.json").write_text(storcli_drive_rows(0, 130_000))
    assert (captured / "storcli/drives.json").stat().st_size > 15_000_000
    args = [f"--path.sysfs={root}/sys", f"--path.procfs={root}/proc", f"--path.captured={captured}"]
    with run_exporter(args, str(tmp_path)) as exporter:
        deadline = time.monotonic() + 120
        text = ""
        while time.monotonic() < deadline:
            text = exporter.metrics()
            if 'storpath_raid_tool_up{tool="storcli"}' in text:
                break
            time.sleep(1)
        peak = _peak_rss_mib(exporter.proc.pid)
        log = exporter.log()
    print(f"peak RSS of the exporter with 130k captured drives: {peak:.0f} MiB")
    assert 'storpath_raid_tool_up{tool="storcli"} 0.0' in text, log
    assert "more than 4096 drives on storcli/c0" in log and "MAX_DRIVES_PER_CONTROLLER" in log, log
    assert "storpath_raid_drive_info{" not in text
    assert 'storpath_scrape_collector_success{collector="pcie"} 1.0' in text
    assert peak < CHART_MEMORY_LIMIT_MIB < UNIT_MEMORY_MAX_MIB, peak
