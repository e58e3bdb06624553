"""The real `storpath serve` with no way to read config space past 64 bytes (a tree made as an
unprivileged process sees it) and the real `storpath helper` beside it, reading the machine as
root would: the link a tool capped is served as capped, with its target, once the helper's
answer is in; the serve process itself asks nothing on the scrape path."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from tests.conftest import ROOT, run_exporter, stop_process
from tests.fixtures import machines
from tests.fixtures.sysfs_builder import MachineBuilder

MACHINE = "desktop-z690-single-socket"
DRIVE, PORT = "0000:02:00.0", "0000:00:06.0"


def _tree(folder, size):
    b = MachineBuilder(str(folder), config_bytes=size)
    machines.load(MACHINE).modules[0].build(b, "capped-by-tool")
    b.finish()
    return folder


def _start_helper(socket_path, sysfs, log_path):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "exporter") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "storpath", "helper", f"--helper.socket={socket_path}",
                                 f"--path.sysfs={sysfs}"], stdout=log, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 20
    while not os.path.exists(socket_path):
        assert proc.poll() is None and time.monotonic() < deadline, open(log_path).read()
        time.sleep(0.05)
    return proc


def _capped(text):
    return [line for line in text.splitlines() if line.startswith("storpath_pcie_link_capped{")]


def test_capped_link_served_from_the_helpers_config_read(tmp_path):
    root, plain = _tree(tmp_path / "root", 256), _tree(tmp_path / "plain", 64)
    socket_path = str(tmp_path / "helper.sock")
    helper = _start_helper(socket_path, root / "sys", tmp_path / "helper.log")
    try:
        args = [f"--path.sysfs={plain}/sys", f"--path.procfs={plain}/proc", f"--helper.socket={socket_path}"]
        with run_exporter(args, str(tmp_path)) as exporter:
            deadline = time.monotonic() + 20
            text = exporter.metrics()
            while not _capped(text) and time.monotonic() < deadline:
                time.sleep(0.3)
                text = exporter.metrics()
        assert f'storpath_pcie_link_capped{{address="{DRIVE}",cause="unknown"}} 1.0' in _capped(text)
        assert f'storpath_pcie_target_link_speed_transfers_per_second{{address="{DRIVE}"}} 8e+09' in text
    finally:
        stop_process(helper)
    # The same verdicts as an exporter that reads the whole config space itself (as root).
    with run_exporter([f"--path.sysfs={root}/sys", f"--path.procfs={root}/proc"], str(tmp_path)) as exporter:
        assert _capped(exporter.metrics()) == _capped(text)


def test_without_the_helper_the_same_tree_is_a_link_below_expected(tmp_path):
    """The control: what the serve process reads alone does not show the cap (the test above
    fails on a serve that does not ask the helper)."""
    plain = _tree(tmp_path / "plain", 64)
    with run_exporter([f"--path.sysfs={plain}/sys", f"--path.procfs={plain}/proc"], str(tmp_path)) as exporter:
        text = exporter.metrics()
    assert _capped(text) == []
    assert "storpath_pcie_target_link_speed_transfers_per_second{" not in text
