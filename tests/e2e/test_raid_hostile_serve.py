"""A MegaCli output with lines of thousands of spaces before a letter, replayed on the real
exporter: the RAID pass reads it in the background while /-/healthy and /metrics keep
answering within a second each (before, one such line held the GIL for about 19 s in the
field pattern's backtracking, so health checks timed out and a liveness probe would restart
the exporter in a loop), and MegaCli's own inventory is still read."""

from __future__ import annotations

import time

import requests

from tests.conftest import run_exporter
from tests.fixtures import builders_raid as build

HOSTILE_LINE = " " * 3000 + "x"
LDINFO_VOLUME = dict(id=0, level="Primary-1, Secondary-0, RAID Level Qualifier-0", size="1.818 TB",
                     state="Degraded", strip="64 KB", drives=2,
                     default="WriteBack, ReadAhead, Direct, No Write Cache if Bad BBU",
                     current="WriteBack, ReadAhead, Direct, No Write Cache if Bad BBU")


def test_health_answers_within_a_second_while_a_hostile_megacli_output_is_read(machine_tree, tmp_path):
    root = machine_tree("ibm-x3650m3-serveraid-m5015", "healthy")
    megacli = tmp_path / "captured" / "megacli"
    megacli.mkdir(parents=True)
    hostile = "\n".join([HOSTILE_LINE] * 8) + "\n"
    drives = [build.MegaDrive(enclosure=252, slot=slot, device_id=slot + 8) for slot in range(2)]
    # Before the first drive, between drives and at the end: every parse state sees one.
    first, second = (build.megacli_pdlist(0, [drive]) for drive in drives)
    (megacli / "pdlist.txt").write_text(hostile + first + hostile + second + hostile)
    (megacli / "ldinfo.txt").write_text(hostile + build.megacli_ldinfo(0, [LDINFO_VOLUME]) + hostile)
    args = [f"--path.sysfs={root}/sys", f"--path.procfs={root}/proc", f"--path.captured={tmp_path}/captured"]
    with run_exporter(args, str(tmp_path)) as exporter:
        slow = []
        deadline = time.monotonic() + 12
        text = ""
        while time.monotonic() < deadline:
            for path in ("/-/healthy", "/metrics"):
                started = time.monotonic()
                try:
                    response = exporter.get(path, timeout=1.0)
                    if response.status_code != 200:
                        slow.append((path, response.status_code))
                    elif path == "/metrics":
                        text = response.text
                except requests.RequestException as error:
                    slow.append((path, repr(error), round(time.monotonic() - started, 2)))
            time.sleep(0.2)
        log = exporter.log()
    assert not slow, (slow, log)
    assert 'storpath_raid_tool_up{tool="megacli"} 1.0' in text, log
    assert "storpath_raid_drive_info{" in text, text
    assert 'storpath_raid_volume_state{controller="megacli/a0",state="degraded",volume="0"} 1.0' in text, text
