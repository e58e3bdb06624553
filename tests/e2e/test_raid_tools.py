"""The raid collector's tools on a machine whose controller is bound, run live (no captures): a
storcli that hangs, one that is missing and one that prints garbage each show as
storpath_raid_tool_up{tool="storcli"} 0 with the reason in the log, and the scrape is unaffected:
every other collector succeeds and the scrape does not wait for the tool."""

from __future__ import annotations

import stat
import time

import pytest

from tests.conftest import run_exporter

STORCLI = {
    "hangs": "#!/bin/sh\nsleep 60\n",
    "garbage": "#!/bin/sh\necho 'storcli: error while loading shared libraries: libstorelibir.so'\n",
    "missing": None,
}


@pytest.mark.parametrize("how", list(STORCLI))
def test_a_broken_storcli_is_tool_down_and_the_scrape_goes_on(how, machine_tree, tmp_path):
    root = machine_tree("dell-r730xd-perc-h730p", "healthy")  # megaraid_sas bound at 0000:03:00.0
    storcli = tmp_path / "storcli"
    if STORCLI[how] is not None:
        storcli.write_text(STORCLI[how])
        storcli.chmod(storcli.stat().st_mode | stat.S_IEXEC)
    config = tmp_path / "storpath.yml"
    config.write_text(f"collectors:\n  raid:\n    storcli_path: {storcli}\n    megacli_path: {tmp_path}/MegaCli\n"
                      "    timeout: 1s\n    startup_wait: 0s\n")
    dev = tmp_path / "dev"
    dev.mkdir()
    # No --path.captured: the tools run as on a live host (--path.dev lets a replayed sysfs run them).
    args = [f"--path.sysfs={root}/sys", f"--path.procfs={root}/proc", f"--path.dev={dev}", f"--config.file={config}"]
    with run_exporter(args, str(tmp_path)) as exporter:
        deadline = time.monotonic() + 30
        while True:
            started = time.monotonic()
            text = exporter.metrics()
            took = time.monotonic() - started
            if 'storpath_raid_tool_up{tool="storcli"} 0.0' in text or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        log = exporter.log()
    assert 'storpath_raid_tool_up{tool="storcli"} 0.0' in text, log
    assert took < 5, took  # a hung storcli is never waited for by a scrape
    assert 'storpath_scrape_collector_success{collector="raid"} 1.0' in text
    assert 'storpath_scrape_collector_success{collector="pcie"} 1.0' in text
    assert "storpath_raid_drive_info{" not in text
    assert "RAID tool failed" in log and "tool=storcli" in log
    reason = {"hangs": "did not finish within 1 s", "garbage": "not JSON", "missing": "not found"}[how]
    assert reason in log, log
