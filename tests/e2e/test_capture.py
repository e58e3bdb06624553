"""`storpath capture`: an archive of exactly what storpath reads, replayed elsewhere
gives the same `storpath check` report and the same /metrics as the machine itself."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import re
import tarfile

import pytest

from tests.conftest import ROOT, require_root, run_exporter
from tests.e2e.test_golden import normalise
from tests.fixtures import machines

CASES = machines.all_cases()
ENV = {"PYTHONPATH": os.path.join(ROOT, "exporter")}


def storpath(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "storpath", *args], capture_output=True, text=True,
                          env=dict(os.environ, **ENV), timeout=120, cwd=cwd)


def paths(root):
    return [f"--path.sysfs={root}/sys", f"--path.procfs={root}/proc", f"--path.captured={root}/captured"]


def capture(root, out_dir, *extra, name="machine"):
    archive = os.path.join(out_dir, f"{name}.tar.gz")
    result = storpath("capture", *paths(root), "-o", archive, *extra)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    # Extract with the real tar, as the archive's README tells a user to.
    subprocess.run(["tar", "xzf", archive], cwd=out_dir, check=True)
    return archive, os.path.join(out_dir, name)


@pytest.mark.parametrize("name,variant", CASES, ids=[f"{n}:{v}" for n, v in CASES])
def test_replayed_capture_gives_the_same_check_and_metrics(name, variant, machine_tree, tmp_path):
    root = machine_tree(name, variant)
    _, replay = capture(root, str(tmp_path))
    for fmt in ([], ["--json"]):
        original, replayed = storpath("check", *fmt, *paths(root)), storpath("check", *fmt, *paths(replay))
        if fmt:  # the paths differ, by design
            a, b = json.loads(original.stdout), json.loads(replayed.stdout)
            a.pop("paths"), b.pop("paths")
            assert a == b
        else:
            assert replayed.stdout == original.stdout
        assert replayed.returncode == original.returncode
    # The machine's own /metrics is its golden exposition (tests/e2e/test_golden.py serves the
    # tree with the same arguments and compares): the replay is compared with that file. The
    # exporter's own process and Python metrics differ between two processes: left out.
    with run_exporter(paths(replay) + ["--web.disable-exporter-metrics"], str(tmp_path)) as exporter:
        got = normalise(exporter.metrics())
    golden = machines.load(name).golden(variant)
    with open(golden) as handle:
        assert got == handle.read(), f"the replay of {name}:{variant} serves other metrics than {golden}"


def test_archive_keeps_symlinks_and_says_how_to_replay(machine_tree, tmp_path):
    archive, replay = capture(machine_tree("am4-x570-firecuda", "x2-link"), str(tmp_path), name="am4")
    with tarfile.open(archive) as tar:
        members = {m.name: m for m in tar.getmembers()}
    link = members["am4/sys/bus/pci/devices/0000:05:00.0"]
    assert link.issym() and link.linkname == "../../../devices/pci0000:00/0000:00:03.2/0000:05:00.0"
    assert members["am4/sys/class/block/nvme1n1"].issym()
    assert all(n == "am4" or n.startswith("am4/") for n in members)
    readme = open(os.path.join(replay, "README.md")).read()
    assert "tar xzf am4.tar.gz" in readme
    assert "storpath check --path.sysfs=am4/sys --path.procfs=am4/proc --path.captured=am4/captured" in readme
    manifest = json.load(open(os.path.join(replay, "MANIFEST.json")))
    assert manifest["redacted"] is False and manifest["files"]["sys"] > 100
    assert manifest["readers"]["pci"]["sysfs"] > 0
    # Only what the readers read: no attribute storpath never looks at.
    assert not os.path.exists(os.path.join(replay, "sys/devices/pci0000:00/0000:00:03.2/0000:05:00.0/modalias"))


def test_archive_holds_every_file_the_readers_open(machine_tree, tmp_path):
    """Run every collector and every findings subsystem on a fixture while recording
    which files they open (the interpreter's audit hook), then check each of them is
    in the capture. Catches a reader that reads a file its capture patterns miss."""
    root = os.path.realpath(machine_tree("am4-x570-firecuda", "sata-slowed"))
    _, replay = capture(root, str(tmp_path))
    script = f"""
import os, sys
opened = set()
root = {root!r}
def hook(event, args):
    if event == "open" and isinstance(args[0], str) and args[0].startswith(root + "/"):
        opened.add(args[0])
sys.addaudithook(hook)
from storpath.base.background import Scheduler
from storpath.collectors import load_all
from storpath.base.config import validate
from storpath.report.exporter import StorpathExporter, build_collectors
from storpath.report.findings import Facts, run_checks
from storpath.base.roots import Roots
config = validate({{}}, {{n: s.cls.config_defaults for n, s in load_all().items()}})
roots = Roots(sysfs=root + "/sys", procfs=root + "/proc", captured=root + "/captured")
scheduler = Scheduler()
collectors = build_collectors(roots, config, scheduler)
scheduler.run_all_once()
StorpathExporter(collectors, roots).collect(30.0)
run_checks(Facts(roots, config))
for path in sorted(opened):
    print(os.path.relpath(os.path.realpath(path), root) if os.path.exists(path) else "")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=dict(os.environ, **ENV), timeout=120)
    assert done.returncode == 0, done.stderr
    opened = [p for p in done.stdout.splitlines() if p]
    assert any(p.startswith("sys/") for p in opened) and any(p.startswith("captured/") for p in opened)
    missing = [p for p in opened if not os.path.exists(os.path.join(replay, p))]
    assert not missing, f"read by storpath but not captured: {missing}"


def test_redact_replaces_serials_consistently(machine_tree, tmp_path):
    root = machine_tree("am4-x570-firecuda", "healthy")
    archive, replay = capture(root, str(tmp_path), "--redact", name="red")
    serials = ["7VR01A2B", "7VR01A3C", "7VR01A4D", "7VR01A5E"]
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            if member.isfile():
                data = tar.extractfile(member).read()
                for serial in serials:
                    assert serial.encode() not in data and serial.lower().encode() not in data, member.name
    ctrl = os.path.join(replay, "sys/class/nvme/nvme0")
    serial = open(os.path.join(ctrl, "serial")).read().strip()
    assert serial.startswith("REDACTE") and len(serial) == len(serials[0])  # as long as the serial it hides
    # The same stand-in wherever the serial appeared: the controller, its subsystem, the NQN.
    subsys = open(os.path.join(replay, "sys/devices/virtual/nvme-subsystem/nvme-subsys0/serial")).read().strip() \
        if os.path.exists(os.path.join(replay, "sys/devices/virtual/nvme-subsystem/nvme-subsys0/serial")) else serial
    assert subsys == serial
    nqn_path = os.path.join(ctrl, "subsysnqn")
    if os.path.exists(nqn_path):
        assert serial in open(nqn_path).read()
    others = {open(os.path.join(replay, f"sys/class/nvme/nvme{i}/serial")).read().strip() for i in range(4)}
    assert len(others) == 4  # distinct drives stay distinct
    assert json.load(open(os.path.join(replay, "MANIFEST.json")))["redacted"] is True
    # Nothing storpath judges depends on a serial: the report is the same.
    assert storpath("check", *paths(replay)).stdout == storpath("check", *paths(root)).stdout


def test_capture_of_a_missing_tree_fails_clearly(tmp_path):
    result = storpath("capture", f"--path.sysfs={tmp_path}/nope", "-o", str(tmp_path / "x.tar.gz"))
    assert result.returncode == 3 and "is not a folder" in result.stderr
    assert not (tmp_path / "x.tar.gz").exists()


@pytest.fixture
def full_filesystem(tmp_path):
    """A 64 KiB tmpfs, filled to the last block."""
    require_root("mounting a tmpfs")
    mount = tmp_path / "full"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0755", "tmpfs", str(mount)], check=True)
    try:
        with open(mount / "filler", "wb") as handle:
            try:
                while True:
                    handle.write(b"\0" * 4096)
                    handle.flush()
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                try:
                    handle.close()
                except OSError:
                    pass
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_capture_onto_a_full_filesystem_fails_clearly_and_leaves_nothing(full_filesystem, machine_tree):
    root = machine_tree(*CASES[0])
    for _ in range(3):
        result = storpath("capture", *paths(root), "-o", str(full_filesystem / "machine.tar.gz"))
        assert result.returncode == 1, result.stderr
        assert "storpath capture: cannot write" in result.stderr and "No space left on device" in result.stderr
        assert "Traceback" not in result.stderr, result.stderr
        assert sorted(os.listdir(full_filesystem)) == ["filler"]


# ---- --redact against every fixture machine ------------------------------------------
# What identifies hardware, collected from the unredacted tree on the test's own terms
# (not the redactor's lists): identity attributes of sysfs, identity keys of JSON outputs,
# and in any text the by-id names, 0x WWNs/SAS addresses and vdevs named by GUID.
IDENTITY_ATTRIBUTES = {"serial", "wwid", "wwn", "sas_address", "vpd_pg80", "eui", "nguid", "unique_id", "port_name",
                       "node_name", "enclosure_identifier"}
IDENTITY_KEYS = {"guid", "pool_guid", "vdev_guid", "sn", "serial", "serial_number", "eui64", "nguid", "wwn", "wwid"}
TEXT_IDENTITIES = [re.compile(r"(?<![0-9A-Za-z])0x[0-9a-fA-F]{16}(?![0-9A-Za-z])"),
                   re.compile(r"(?m)^\t\s*([0-9]{6,})\s+[A-Z]+\b")]
BY_ID = re.compile(r"/dev/disk/by-id/(?:nvme|ata|scsi|wwn)-(\S+?)(?:-part[0-9]+)?(?:\s|$)")


def _identities_in(root):
    found = set()

    def add(value):
        value = str(value).strip()
        body = re.sub(r"^(0x|naa\.|eui\.|t10\.)", "", value)
        for item in {value, body}:
            if len(item) >= 6 and item.strip("0x.-") and item.isprintable():
                found.add(item)

    def walk_json(node):
        if isinstance(node, dict):
            for key, item in node.items():
                if key in IDENTITY_KEYS and isinstance(item, (str, int)):
                    add(item)
                elif key == "devid" and isinstance(item, str):
                    walk_text("/dev/disk/by-id/" + item + "\n")
                else:
                    walk_json(item)
        elif isinstance(node, list):
            for item in node:
                walk_json(item)

    def walk_text(text):
        for pattern in TEXT_IDENTITIES:
            for match in pattern.finditer(text):
                add(match.group(match.lastindex or 0))
        for name in BY_ID.findall(text):
            hex_id = re.match(r"^(?:0x|3|eui\.)([0-9a-fA-F]{12,})$", name)
            add(hex_id.group(1) if hex_id else name.rsplit("_", 1)[-1])

    for folder, _, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            if os.path.islink(path):
                continue
            try:
                text = open(path, "rb").read().decode("utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            if name in IDENTITY_ATTRIBUTES:
                add(text)
            if name.endswith(".json"):
                try:
                    walk_json(json.loads(text))
                except ValueError:
                    pass
            walk_text(text)
    return found


def _leaks(archive, identities):
    patterns = [(value, re.compile((rf"(?<![0-9]){value}(?![0-9])" if value.isdigit() else re.escape(value)).encode(),
                                   re.I)) for value in identities]
    leaks = []
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            if member.isfile():
                data = tar.extractfile(member).read()
                leaks.extend(f"{member.name}: {value}" for value, pattern in patterns if pattern.search(data))
    return leaks


def _findings(root):
    """check --json with the paths left out and each identity of the tree (a vdev named
    by its GUID in a finding's evidence) as `<id>`: the redacted one has other values."""
    done = storpath("check", "--json", *paths(root))
    report = json.loads(done.stdout)
    report.pop("paths")
    text = json.dumps(report, sort_keys=True)
    for value in sorted(_identities_in(root), key=len, reverse=True):
        text = re.sub(rf"(?<![0-9]){value}(?![0-9])" if value.isdigit() else re.escape(value), "<id>", text)
    return done.returncode, json.loads(text)


REDACT_CASES = [(name, machines.load(name).variants and next(iter(machines.load(name).variants)))
                for name in machines.names()] + [("intel-r2224wft-switches", "zfs-checksum"),
                                                 ("intel-r2224wft-switches", "zfs-text-unavail")]


@pytest.mark.parametrize("name,variant", REDACT_CASES, ids=[f"{n}:{v}" for n, v in REDACT_CASES])
def test_redacted_capture_keeps_no_identity_and_the_same_findings(name, variant, machine_tree, tmp_path):
    root = machine_tree(name, variant)
    identities = _identities_in(root)
    archive, replay = capture(root, str(tmp_path), "--redact", name="red")
    assert not _leaks(archive, identities)
    assert _findings(replay) == _findings(root)
