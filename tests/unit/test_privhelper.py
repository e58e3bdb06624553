"""`storpath helper` (storpath.commands.helper) and its wire (storpath.base.privhelper): the
helper takes only its fixed commands with checked arguments; `storpath serve` with
--helper.socket gets the RAID, dm and NVMe values from it; a dead or hung helper is a clear
problem of the source that asked, never a hang."""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from storpath.base import privhelper
from storpath.base.roots import Roots
from storpath.commands import helper
from storpath.readers import dm_multipath, nvme, nvme_health, sas_pcd
from storpath.readers.raid import tools as raid_tools
from tests import fake_storcli
from tests.fixtures import builders_health, builders_nvme, builders_paths
from tests.fixtures import builders_raid as build

ROOT = Path(__file__).resolve().parents[2]
STATUS = builders_paths.status_line("mpatha", 1 << 30, [("A", [("8:16", True, 0), ("8:32", False, 3)])])


@pytest.fixture(autouse=True)
def _local_again():
    yield
    privhelper.use(None)


# ---- refused: anything but the fixed commands --------------------------------------------

@pytest.mark.parametrize("request_, reason", [
    ({"cmd": "sh", "args": ["-c", "id"]}, "unknown command"),
    ({"cmd": "raid", "tool": "sh", "args": ["-c", "id"]}, "tool must be one of"),
    ({"cmd": "raid", "tool": "storcli", "args": ["/call", "show", "all", "J", "nolog", ";", "rm"]}, "fixed commands"),
    ({"cmd": "raid", "tool": "storcli", "args": ["/c0", "set", "jbod=on"]}, "fixed commands"),
    ({"cmd": "raid", "tool": "arcconf", "args": ["GETCONFIG", "17", "AL"]}, "fixed commands"),
    ({"cmd": "raid", "tool": "storcli", "args": "/call show all J nolog"}, "fixed commands"),
    ({"cmd": "dmsetup-status", "args": ["remove_all"]}, "unexpected field"),
    ({"cmd": "nvme-identify", "controller": "../nvme0", "nsid": 1}, "controller must match"),
    ({"cmd": "nvme-identify", "controller": "nvme0 --raw-binary", "nsid": 1}, "controller must match"),
    ({"cmd": "nvme-identify", "controller": "nvme0", "nsid": "1; id"}, "nsid must be an integer"),
    ({"cmd": "nvme-identify", "controller": "nvme0", "nsid": True}, "nsid must be an integer"),
    ({"cmd": "nvme-identify", "controller": "nvme0", "nsid": 0xFFFFFFFF}, "nsid must be an integer"),
    ({"cmd": "smart-log", "controller": "nvme0\n"}, "controller must match"),
    ({"cmd": "smartctl", "device_id": 0, "device": "/dev/../etc/shadow"}, "device must match"),
    ({"cmd": "smartctl", "device_id": -1, "device": "/dev/sda"}, "device_id must be an integer"),
    ({"cmd": "sg-modes", "node": "../../dev/watchdog"}, "node must match"),
    ({"cmd": "pci-config", "address": "0000:00:00.0/../../../../etc/shadow", "length": 256}, "address must match"),
    ({"cmd": "pci-config", "address": "0000:00:00.0", "length": 65536}, "length must be one of"),
    ({"cmd": "dmsetup-status", "timeout": 86400}, "timeout must be"),
])
def test_the_helper_refuses_anything_but_its_fixed_commands(request_, reason):
    reply = helper.answer(request_)
    assert reply["ok"] is False
    assert reason in reply["error"]


def _frame(sock, body: bytes) -> dict:
    sock.sendall(struct.pack(">I", len(body)) + body)
    return privhelper.recv_frame(sock, privhelper.MAX_REPLY, time.monotonic() + 5)


@pytest.fixture
def in_process(tmp_path):
    path = str(tmp_path / "h.sock")
    serving = helper.Helper(helper.listening_socket(path))
    thread = threading.Thread(target=serving.serve_forever, daemon=True)
    thread.start()
    yield path
    serving.stop()
    thread.join(5)
    serving.sock.close()


def test_an_oversize_or_malformed_request_is_refused_unread(in_process):
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(in_process)
        sock.sendall(struct.pack(">I", 1 << 30))  # announces a GiB: refused before any of it is read
        reply = privhelper.recv_frame(sock, privhelper.MAX_REPLY, time.monotonic() + 5)
    assert reply["ok"] is False and "over the limit of 4096" in reply["error"]
    for body in (b"not json", b"[1, 2]", b"\xff\xfe"):
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(in_process)
            reply = _frame(sock, body)
        assert reply["ok"] is False and "bad request" in reply["error"]


def test_a_client_that_sends_nothing_does_not_hold_the_helper(in_process, monkeypatch):
    monkeypatch.setattr(helper, "REQUEST_TIMEOUT", 0.3)
    silent = socket.socket(socket.AF_UNIX)
    silent.connect(in_process)
    try:  # the silent one is still connected: another client is answered all the same
        with pytest.raises(privhelper.HelperError, match="refused nope: unknown command"):
            privhelper.ask({"cmd": "nope"}, 5.0, in_process)
    finally:
        silent.close()


def test_the_socket_appears_only_once_it_listens(tmp_path, monkeypatch):
    """A client that finds the helper's path can connect: the socket is bound under a name of
    its own, listens, and only then is renamed into place (one bound and not yet listening
    refuses connections: CI saw "Connection refused" from a client that raced the helper).
    A socket left by an earlier run is replaced; anything else at the path is left alone."""
    path = tmp_path / "helper.sock"
    seen = []

    class Watched(socket.socket):
        def listen(self, *args):
            seen.append(path.exists())
            super().listen(*args)

    old = socket.socket(socket.AF_UNIX)
    old.bind(str(path))  # an earlier run's socket, its process gone
    old.close()
    monkeypatch.setattr(helper.socket, "socket", Watched)
    sock = helper.listening_socket(str(path))
    try:
        assert seen == [True]  # the earlier run's socket, still there while the new one starts to listen
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(str(path))
        assert sorted(p.name for p in tmp_path.iterdir()) == ["helper.sock"]
    finally:
        sock.close()
    path.unlink()
    seen.clear()
    sock = helper.listening_socket(str(path))
    sock.close()
    assert seen == [False]
    path.unlink()
    path.write_text("not a socket")
    with pytest.raises(OSError, match="exists and is not a socket"):
        helper.listening_socket(str(path))
    assert path.read_text() == "not a socket" and sorted(p.name for p in tmp_path.iterdir()) == ["helper.sock"]


def test_a_refusal_sent_before_the_request_is_still_read(tmp_path, monkeypatch):
    """The helper refuses a peer it does not serve before reading its request and closes: the
    client's send then fails (EPIPE), yet the refusal is in its socket and is what it reports."""
    path = str(tmp_path / "helper.sock")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(1)
    answered = threading.Event()
    sent = privhelper.send_frame

    def refuse():
        conn, _ = listener.accept()
        with conn:
            sent(conn, {"ok": False, "error": "user 65534 is not served by this helper"})
        answered.set()

    server = threading.Thread(target=refuse, daemon=True)
    server.start()
    failures = []

    def send_after_the_close(sock, doc):
        assert answered.wait(5)
        try:
            sent(sock, doc)
        except OSError as exc:
            failures.append(exc)
            raise

    monkeypatch.setattr(privhelper, "send_frame", send_after_the_close)
    try:
        with pytest.raises(privhelper.HelperError, match="refused dmsetup-status: user 65534 is not served"):
            privhelper.ask({"cmd": "dmsetup-status"}, 5.0, path)
    finally:
        server.join(5)
        listener.close()
    assert [type(exc) for exc in failures] == [BrokenPipeError]  # the order this test is about did happen


def test_a_helper_that_closes_without_a_word_is_a_clear_problem(tmp_path):
    path = str(tmp_path / "helper.sock")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(1)
    server = threading.Thread(target=lambda: listener.accept()[0].close(), daemon=True)
    server.start()
    try:
        with pytest.raises(privhelper.HelperError, match="cannot be asked dmsetup-status: "
                           "(connection closed after 0 of 4 bytes|Connection reset by peer)"):
            privhelper.ask({"cmd": "dmsetup-status"}, 5.0, path)
    finally:
        server.join(5)
        listener.close()


# ---- a helper in its own process, tools only on its PATH ------------------------------------

def _start_helper(tmp_path: Path, bin_dir: Path, prefix=(), extra=()) -> subprocess.Popen:
    path = tmp_path / "helper.sock"
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}",
               PYTHONPATH=f"{ROOT / 'exporter'}:{ROOT}")
    proc = subprocess.Popen([*prefix, sys.executable, "-m", "storpath", "helper", "--helper.socket", str(path),
                             "--helper.socket-mode", "0666", *extra], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 20
    while not path.exists():
        assert proc.poll() is None, proc.stdout.read().decode()
        assert time.monotonic() < deadline, "the helper did not start"
        time.sleep(0.05)
    return proc


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture
def tools(tmp_path):
    """A folder with a fake dmsetup, a fake storcli (answers from JSON files) and a fake nvme-cli
    (smart-log and id-ctrl of nvme0, as `nvme ... --output-format=json` prints them)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "smart.json").write_text(builders_health.smart_log_json(builders_health.Health(composite=321)))
    (tmp_path / "id-ctrl.json").write_text(json.dumps({"wctemp": 343, "cctemp": 358}))
    (tmp_path / "id-ns.json").write_text(builders_nvme.id_ns_json([builders_nvme.Fmt(512), builders_nvme.Fmt(4096)],
                                                                  0, 1 << 30))
    nvme_cli = bin_dir / "nvme"
    nvme_cli.write_text("#!/bin/sh\ncase \"$*\" in\n"
                        f"'smart-log /dev/nvme0 --output-format=json') cat {tmp_path}/smart.json;;\n"
                        f"'id-ctrl /dev/nvme0 --output-format=json') cat {tmp_path}/id-ctrl.json;;\n"
                        f"'id-ns /dev/nvme0 --namespace-id=1 --output-format=json') cat {tmp_path}/id-ns.json;;\n"
                        "*) echo \"no such command: $*\" >&2; exit 22;;\nesac\n")
    nvme_cli.chmod(0o755)
    (tmp_path / "status.txt").write_text(STATUS + "\n")
    dmsetup = bin_dir / "dmsetup"
    dmsetup.write_text(f"#!/bin/sh\n[ \"$*\" = 'status --target multipath' ] || exit 9\ncat {tmp_path}/status.txt\n")
    dmsetup.chmod(0o755)
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "controllers.json").write_text(build.storcli_controllers(0, "PERC H730P Mini", "4.300", (0, 3, 0, 0),
                                                                       "SAS-12G"))
    (folder / "drives.json").write_text(build.storcli_drives(0, [build.StorcliDrive(32, 0, did=0)]))
    (folder / "volumes.json").write_text(build.storcli_volumes(0, [build.StorcliVolume(0, 0, state="Dgrd")]))
    storcli_dir = tmp_path / "storcli"
    storcli_dir.mkdir()
    shutil.move(fake_storcli.write(storcli_dir, folder), bin_dir / "storcli")
    return bin_dir


def test_serve_with_a_helper_gets_dm_and_raid_values_the_serving_process_cannot_run(tmp_path, tools, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")  # neither dmsetup nor storcli here: only the helper has them
    proc = _start_helper(tmp_path, tools)
    try:
        privhelper.use(str(tmp_path / "helper.sock"))
        status = dm_multipath.read_dmsetup_status(Roots(), "dmsetup", 5.0)
        assert status.ok, status.reason
        assert [p.active for p in status.maps["mpatha"]] == [True, False]
        sysfs = tmp_path / "sys"
        (sysfs / "bus/pci/drivers/megaraid_sas/0000:03:00.0").mkdir(parents=True)
        roots = Roots(sysfs=str(sysfs), dev=str(tmp_path / "dev"))
        runner = raid_tools.ToolRunner(roots, {}, timeout=5.0)
        outputs, failed = runner.run_tools(raid_tools.bound_controllers(roots))
        assert failed == {}
        assert '"PERC H730P Mini"' in outputs[("storcli", "controllers.json")]
        assert "Dgrd" in outputs[("storcli", "volumes.json")]
    finally:
        _stop(proc)


def test_nvme_smart_log_and_thresholds_come_from_the_helper(tmp_path, tools, monkeypatch):
    """The SMART log and Identify Controller's thresholds: asked of the helper (its nvme-cli here,
    as no /dev/nvme0 answers the ioctl), none run by the asking process (no nvme on its PATH)."""
    proc = _start_helper(tmp_path, tools)
    monkeypatch.setenv("PATH", "/nonexistent")
    try:
        privhelper.use(str(tmp_path / "helper.sock"))
        roots = Roots(sysfs=str(tmp_path / "sys"), dev=str(tmp_path / "dev"))
        result = nvme_health.read_health(roots, "nvme0", timeout=20.0)  # (a shared 2-core machine)
        assert result.error is None and result.source == "helper"
        assert result.smart is not None and result.smart.composite_kelvin == 321
        assert result.thresholds == nvme_health.TemperatureThresholds(343, 358)
        missing = nvme_health.read_health(roots, "nvme7", timeout=20.0)  # the helper's nvme-cli fails on it
        assert missing.smart is None and "helper refused smart-log" in missing.error and "exited 22" in missing.error
    finally:
        _stop(proc)


def test_sas_drive_mode_page_comes_from_the_helper(in_process, tmp_path, monkeypatch):
    """sg_modes run by the helper (its `sg-modes` command), the raw page handed back; a refusal
    is the drive's reason. The node check is the helper's own (refusal table above); here
    its argv points at a stand-in that prints the page's bytes."""
    page = bytes(range(16))
    fake = tmp_path / "sg_modes"
    fake.write_bytes(b"#!/bin/sh\n[ \"$3\" = /dev/sg3 ] || exit 15\nprintf '" +
                     "".join(f"\\{b:03o}" for b in page).encode() + b"'\n")
    fake.chmod(0o755)
    monkeypatch.setitem(helper.RUNS, "sg-modes",
                        lambda request: [str(fake), "--page=0x19,0x1", "--raw", f"/dev/{request['node']}"])
    monkeypatch.setenv("PATH", "/nonexistent")
    privhelper.use(in_process)
    assert sas_pcd.mode_sense(Roots(), "sg3", timeout=5.0) == (page, "")
    data, why = sas_pcd.mode_sense(Roots(), "sg4", timeout=5.0)
    assert data is None and "exited 15" in why
    privhelper.use(str(tmp_path / "gone.sock"))
    data, why = sas_pcd.mode_sense(Roots(), "sg3", timeout=1.0)
    assert data is None and why.startswith("helper: ") and "cannot be asked sg-modes" in why


def test_without_a_helper_the_commands_run_here_as_before(tmp_path, tools, monkeypatch):
    monkeypatch.setenv("PATH", f"{tools}:/usr/bin:/bin")
    status = dm_multipath.read_dmsetup_status(Roots(), dm_multipath.find_dmsetup("dmsetup"), 5.0)
    assert status.ok and [p.active for p in status.maps["mpatha"]] == [True, False]


def test_a_dead_helper_is_a_clear_problem_of_each_source(tmp_path):
    privhelper.use(str(tmp_path / "nobody.sock"))
    status = dm_multipath.read_dmsetup_status(Roots(), "dmsetup", 1.0)
    assert not status.ok and "helper at" in status.reason and "cannot be asked dmsetup-status" in status.reason
    result = nvme.identify_namespace(Roots(), "nvme0", 1, timeout=1.0)
    assert result.identify is None and "helper" in result.error
    sysfs = tmp_path / "sys"
    (sysfs / "bus/pci/drivers/megaraid_sas/0000:03:00.0").mkdir(parents=True)
    roots = Roots(sysfs=str(sysfs), dev=str(tmp_path / "dev"))
    _, failed = raid_tools.ToolRunner(roots, {}, timeout=1.0).run_tools(raid_tools.bound_controllers(roots))
    assert "cannot be asked raid" in failed["storcli"].reason


def test_a_hung_helper_times_out_with_the_source_named(tmp_path):
    path = str(tmp_path / "hung.sock")
    hung = socket.socket(socket.AF_UNIX)
    hung.bind(path)
    hung.listen(4)  # accepts (the kernel does) and never answers
    try:
        privhelper.use(path)
        start = time.monotonic()
        with pytest.raises(privhelper.HelperError, match="did not answer dmsetup-status within 1.5 s"):
            privhelper.ask({"cmd": "dmsetup-status"}, 1.5)
        assert time.monotonic() - start < 3
    finally:
        hung.close()


def _cap_eff(pid: str = "self") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    raise AssertionError("no CapEff")


CLIENT = """
import json, sys
from pathlib import Path
from storpath.base import privhelper
from storpath.base.roots import Roots
from storpath.readers import dm_multipath
from storpath.readers.raid import tools
cap = [l for l in Path('/proc/self/status').read_text().splitlines() if l.startswith('CapEff:')][0].split()[1]
privhelper.use(sys.argv[1])
status = dm_multipath.read_dmsetup_status(Roots(), 'dmsetup', 5.0)
roots = Roots(sysfs=sys.argv[2], dev='/nonexistent')
outputs, failed = tools.ToolRunner(roots, {}, timeout=5.0).run_tools(tools.bound_controllers(roots))
from storpath.readers import nvme_health
health = nvme_health.read_health(Roots(sysfs=sys.argv[2], dev='/nonexistent'), 'nvme0', timeout=20.0)
from storpath.readers import nvme
ident = nvme.identify_namespace(Roots(sysfs=sys.argv[2], dev='/nonexistent'), 'nvme0', 1, timeout=20.0)
print(json.dumps({"cap_eff": cap, "uid": __import__('os').getuid(), "dm_ok": status.ok,
                  "paths": [p.active for p in status.maps.get('mpatha', ())],
                  "raid": sorted(k[1] for k in outputs), "failed": sorted(failed),
                  "nvme_composite": health.smart.composite_kelvin if health.smart else health.error,
                  "lba_in_use": ident.identify.in_use.data_size if ident.identify else ident.error}))
"""


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv")
def test_the_serving_side_has_no_capability_while_values_come_through_the_helper(tmp_path, tools):
    """The helper runs as root; the asking process as nobody with every capability dropped
    (setpriv): its CapEff is 0 and still gets dmsetup's, storcli's and the NVMe SMART log's answers."""
    assert _cap_eff() != 0  # the test itself runs privileged: the drop below is what makes the difference
    shared = Path(tempfile.mkdtemp(prefix="storpath-helper-"))  # where nobody may look (tmp_path's parent is 0700)
    shared.chmod(0o755)
    proc = _start_helper(shared, tools, extra=("--helper.allow-uid", "65534"))
    try:
        sysfs = shared / "sys"
        (sysfs / "bus/pci/drivers/megaraid_sas/0000:03:00.0").mkdir(parents=True)
        env = dict(os.environ, PATH="/nonexistent", PYTHONPATH=f"{ROOT / 'exporter'}:{ROOT}")
        done = subprocess.run([shutil.which("setpriv"), "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all",
                               "--bounding-set=-all", sys.executable, "-c", CLIENT, str(shared / "helper.sock"),
                               str(sysfs)], env=env, capture_output=True, timeout=60)
        assert done.returncode == 0, done.stderr.decode()
        seen = json.loads(done.stdout)
        assert seen["cap_eff"] == "0000000000000000" and seen["uid"] == 65534
        assert seen["dm_ok"] and seen["paths"] == [True, False]
        assert seen["raid"] == ["controllers.json", "drives.json", "volumes.json"] and seen["failed"] == []
        assert seen["nvme_composite"] == 321  # the SMART log, read by the helper's nvme-cli
        assert seen["lba_in_use"] == 512  # Identify Namespace, read by the helper's nvme-cli
    finally:
        _stop(proc)
        shutil.rmtree(shared)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv")
def test_the_helper_answers_no_user_but_its_own_and_root(tmp_path, tools):
    """The socket may be open to every local user (a DynamicUser has no group to give it): the
    helper itself refuses a peer of another UID (SO_PEERCRED), before reading its request."""
    shared = Path(tempfile.mkdtemp(prefix="storpath-helper-"))
    shared.chmod(0o755)
    proc = _start_helper(shared, tools)
    try:
        ask = ("import sys; from storpath.base import privhelper\n"
               "try:\n    privhelper.ask({'cmd': 'dmsetup-status'}, 5.0, sys.argv[1]); print('answered')\n"
               "except privhelper.HelperError as exc:\n    print(exc)\n")
        env = dict(os.environ, PYTHONPATH=f"{ROOT / 'exporter'}:{ROOT}")
        done = subprocess.run([shutil.which("setpriv"), "--reuid=65534", "--regid=65534", "--clear-groups",
                               sys.executable, "-c", ask, str(shared / "helper.sock")], env=env,
                              capture_output=True, text=True, timeout=60)
        assert "user 65534 is not served by this helper" in done.stdout, done.stdout + done.stderr
        assert privhelper.ask({"cmd": "dmsetup-status"}, 5.0, str(shared / "helper.sock"))["rc"] == 0  # root is
    finally:
        _stop(proc)
        out = proc.stdout.read().decode()
        shutil.rmtree(shared)
    assert out.count("helper refused a connection from a user it does not serve") == 1 and "uid=65534" in out


# ---- the units: the capabilities only in the helper's ------------------------------------------

SYSTEMD = ROOT / "deploy" / "systemd"


def _settings(path: Path):
    out = {}
    for line in path.read_text().replace("\\\n", "").splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, value = line.split("=", 1)
            out.setdefault(key.strip(), []).append(value.strip())
    return out


def test_the_serving_unit_has_no_capability_and_asks_the_helper():
    for path in (SYSTEMD / "storpath.service", SYSTEMD / "helper.conf"):
        unit = _settings(path)
        assert unit.get("CapabilityBoundingSet", [""]) == [""] and unit.get("AmbientCapabilities", [""]) == [""]
    assert "--helper.socket=/run/storpath-helper/helper.sock" in _settings(SYSTEMD / "helper.conf")["ExecStart"][-1]
    assert _settings(SYSTEMD / "storpath-helper.socket")["ListenStream"] == ["/run/storpath-helper/helper.sock"]
    for dropin in ("raid-tools.conf", "nvme-identify.conf"):  # what grants capabilities goes to the helper
        assert "storpath-helper.service" in (SYSTEMD / dropin).read_text().splitlines()[0]
    helper_unit = _settings(SYSTEMD / "storpath-helper.service")
    assert set(helper_unit["CapabilityBoundingSet"][0].split()) == {"CAP_SYS_ADMIN", "CAP_SYS_RAWIO",
                                                                    "CAP_DAC_READ_SEARCH"}
    assert helper_unit["PrivateNetwork"] == ["yes"] and helper_unit["RestrictAddressFamilies"] == ["AF_UNIX"]
    assert helper_unit["ExecStart"] == ["/opt/storpath/bin/storpath helper"]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
@pytest.mark.parametrize("unit, most", [("storpath.service", 2.5), ("storpath-helper.service", 2.5)])
def test_systemd_analyze_security_of_both_units(unit, most):
    done = subprocess.run(["systemd-analyze", "security", "--offline=yes", "--no-pager", str(SYSTEMD / unit)],
                          capture_output=True, text=True, timeout=120)
    line = [l for l in done.stdout.splitlines() if "Overall exposure level" in l]
    assert line, done.stdout + done.stderr
    assert float(line[0].split(":")[1].split()[0]) <= most, line[0]
