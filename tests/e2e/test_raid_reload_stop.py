"""The real `storpath serve` with a storcli that hangs (a shell script that sleeps, as a
controller whose firmware stopped answering leaves storcli): a SIGHUP that changes the raid
collector's configuration builds new collectors while the old ones' storcli still hangs, and the
new storcli must not start before the old one is gone; SIGTERM must leave no storcli behind.
The fake storcli notes every start in runs.log and whether another one's process was alive."""

from __future__ import annotations

import signal
import time

from tests import fake_storcli
from tests.conftest import run_exporter


def _wait(check, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.1)
    return check()


def test_reload_and_sigterm_with_a_hung_storcli(tmp_path):
    sysfs = tmp_path / "sys"
    (sysfs / "bus/pci/drivers/megaraid_sas/0000:03:00.0").mkdir(parents=True)
    (tmp_path / "dev").mkdir()
    storcli = fake_storcli.write(tmp_path)
    config = tmp_path / "storpath.yml"

    def write_config(timeout):
        config.write_text(f"collectors:\n  raid:\n    storcli_path: {storcli}\n    megacli_path: {tmp_path}/MegaCli\n"
                          f"    timeout: {timeout}\n    startup_wait: 0s\n")

    write_config("120s")
    args = [f"--path.sysfs={sysfs}", f"--path.dev={tmp_path / 'dev'}", f"--config.file={config}"]
    with run_exporter(args, str(tmp_path)) as exporter:
        assert _wait(lambda: fake_storcli.runs(tmp_path)[0] == 1, 20), exporter.log()
        write_config("110s")  # another raid configuration: the reload rebuilds the collectors
        exporter.proc.send_signal(signal.SIGHUP)
        assert _wait(lambda: "configuration reloaded" in exporter.log(), 20), exporter.log()
        # The old storcli was killed by the old collectors' close; the new one started after it.
        assert _wait(lambda: fake_storcli.runs(tmp_path)[0] == 2, 20), exporter.log()
        assert fake_storcli.runs(tmp_path)[1] == 0, (tmp_path / "runs.log").read_text()
        assert _wait(lambda: len(fake_storcli.alive(tmp_path)) <= 2, 5)  # one run: sh and its sleep
        exporter.proc.send_signal(signal.SIGTERM)
        exporter.proc.wait(30)
        assert _wait(lambda: fake_storcli.alive(tmp_path) == [], 5), fake_storcli.alive(tmp_path)
        assert fake_storcli.runs(tmp_path) == (2, 0)
