"""ZFS parsers against REAL output of OpenZFS 2.1.11 (Debian bookworm contrib, zfs-dkms +
zfsutils-linux) on Debian's 6.1 kernel under QEMU: tests/unit/data/zpool_2.1_lab.txt,
made by `python3 tests/lab/lab.py capture zfs` (see tests/lab/README.md).

zpool1: raidz2 of vda-vdh, ashift=13. zpool2: raidz1 of vdi-vdl, a mirrored log on
nvme0n1+nvme1n1, cache vdm+vdn. Phases: healthy (zpool2 scrubbed), vdc offlined and vdj
overwritten with scrubs running, zpool1's scrub paused, both finished, vdc resilvered."""

from __future__ import annotations

import calendar
import stat
from pathlib import Path
from typing import Dict

import pytest

from storpath.readers.zfs import (ZpoolReader, apply_list, parse_list, parse_status_text, read_kstat_states)
from storpath.base.roots import Roots

DATA = Path(__file__).parent / "data" / "zpool_2.1_lab.txt"

STATUS = "zpool status -p"
STATUS_L = "zpool status -p -L"
LIST = "zpool list -Hp -o name,size,alloc,free,frag,cap,health,ashift"
KSTAT = "grep -H . /proc/spl/kstat/zfs/*/state"
PHASES = ("healthy", "degraded-scrub-running", "scrub-paused", "degraded-scrub-finished", "online-resilvered")

Z1_DISKS = ["vda", "vdb", "vdc", "vdd", "vde", "vdf", "vdg", "vdh"]
Z2_DISKS = ["vdi", "vdj", "vdk", "vdl"]
Z1_BYID = [f"virtio-SPLABZD{i}" for i in range(8)]
Z2_BYID = [f"virtio-SPLABZD{i}" for i in range(8, 12)]


def load() -> Dict[str, Dict[str, str]]:
    """{phase: {command header: text}}"""
    phases: Dict[str, Dict[str, str]] = {}
    current = None
    key = None
    for line in DATA.read_text().splitlines(keepends=True):
        if line.startswith("=== PHASE "):
            current = phases.setdefault(line[len("=== PHASE "):].strip(), {})
            key = None
        elif line.startswith("### ") and current is not None:
            key = line[4:].rstrip("\n")
            current[key] = ""
        elif key is not None:
            current[key] += line
    return phases


CAP = load()


def pools(phase: str, cmd: str = STATUS_L):
    return {p.name: p for p in parse_status_text(CAP[phase][cmd])}


def utc(*fields) -> float:
    return float(calendar.timegm(fields))


def test_capture_is_openzfs_2_1_without_json():
    assert tuple(CAP) == PHASES
    assert CAP["healthy"]["zpool version"].splitlines()[0].startswith("zfs-2.1.")
    # zpool 2.1 rejects -j with a usage error, exit status 2: the reader's fallback signal.
    assert CAP["healthy"]["zpool status -j --json-int -L"] == ""
    assert "invalid option 'j'" in CAP["healthy"]["zpool status -j --json-int -L [rc=2 stderr]"]


def tree(pool):
    return [(v.name, v.type, v.vdev_class, v.parent, v.leaf, v.state) for v in pool.vdevs]


def test_healthy_vdev_trees():
    p = pools("healthy")
    z1, z2 = p["zpool1"], p["zpool2"]
    assert (z1.state, z1.data_errors, z1.scan) == ("online", 0, None)  # 2.1 prints no scan: line before a scan
    assert tree(z1) == [("zpool1", "root", "normal", None, False, "online"),
                        ("raidz2-0", "raidz", "normal", "zpool1", False, "online")] + \
        [(d, "disk", "normal", "raidz2-0", True, "online") for d in Z1_DISKS]
    # "logs" is printed with a trailing tab in 2.1 ("\tlogs\t"); "cache" without.
    assert "\tlogs\t\n" in CAP["healthy"][STATUS_L]
    assert tree(z2) == [("zpool2", "root", "normal", None, False, "online"),
                        ("raidz1-0", "raidz", "normal", "zpool2", False, "online")] + \
        [(d, "disk", "normal", "raidz1-0", True, "online") for d in Z2_DISKS] + \
        [("mirror-1", "mirror", "log", None, False, "online"),
         ("nvme0n1", "disk", "log", "mirror-1", True, "online"),
         ("nvme1n1", "disk", "log", "mirror-1", True, "online"),
         ("vdm", "disk", "cache", None, True, "online"),
         ("vdn", "disk", "cache", None, True, "online")]
    for pool in (z1, z2):
        assert all((v.read_errors, v.write_errors, v.checksum_errors) == (0, 0, 0) for v in pool.vdevs)
    assert (z2.scan.function, z2.scan.state, z2.scan.errors, z2.scan.end_time) == \
        ("scrub", "finished", 0, utc(2026, 11, 21, 22, 50, 7))


@pytest.mark.parametrize("phase", PHASES)
def test_without_L_same_tree_under_by_id_names(phase):
    """Without -L zpool prints the names the pools were created with (/dev/disk/by-id)."""
    by_id = pools(phase, STATUS)
    kernel = pools(phase, STATUS_L)
    rename = dict(zip(Z1_DISKS + Z2_DISKS + ["nvme0n1", "nvme1n1", "vdm", "vdn"],
                      Z1_BYID + Z2_BYID + ["nvme-QEMU_NVMe_Ctrl_SPLABZIL0", "nvme-QEMU_NVMe_Ctrl_SPLABZIL1",
                                           "virtio-SPLABZD12", "virtio-SPLABZD13"]))
    for name in ("zpool1", "zpool2"):
        a, b = kernel[name], by_id[name]
        assert a.state == b.state and a.data_errors == b.data_errors
        assert [(rename.get(v.name, v.name), v.type, v.vdev_class, v.parent, v.leaf, v.state, v.read_errors,
                 v.write_errors, v.checksum_errors) for v in a.vdevs] == \
               [(v.name, v.type, v.vdev_class, v.parent, v.leaf, v.state, v.read_errors, v.write_errors,
                 v.checksum_errors) for v in b.vdevs]
        assert (a.scan is None) == (b.scan is None)
        if a.scan:
            assert (a.scan.function, a.scan.state, a.scan.start_time, a.scan.end_time, a.scan.errors) == \
                   (b.scan.function, b.scan.state, b.scan.start_time, b.scan.end_time, b.scan.errors)


def test_degraded_with_scrubs_running_and_checksum_errors():
    p = pools("degraded-scrub-running")
    z1, z2 = p["zpool1"], p["zpool2"]
    v1 = {v.name: v for v in z1.vdevs}
    assert z1.state == "degraded" and v1["zpool1"].state == "degraded" and v1["raidz2-0"].state == "degraded"
    assert v1["vdc"].state == "offline" and v1["vdc"].leaf
    assert [v.name for v in z1.vdevs if v.state == "online"] == [d for d in Z1_DISKS if d != "vdc"]
    assert (z1.scan.function, z1.scan.state, z1.scan.start_time) == ("scrub", "scanning",
                                                                    utc(2026, 11, 21, 22, 50, 11))
    assert z1.scan.progress == pytest.approx(0.2689)
    # zpool2 stays ONLINE; the overwritten member shows checksum errors, "(repairing)" after them.
    v2 = {v.name: v for v in z2.vdevs}
    assert z2.state == "online" and z2.data_errors == 0
    assert (v2["vdj"].state, v2["vdj"].read_errors, v2["vdj"].write_errors, v2["vdj"].checksum_errors) == \
        ("online", 0, 0, 136)
    assert "136  (repairing)" in CAP["degraded-scrub-running"][STATUS_L]
    assert sum(v.checksum_errors for v in z2.vdevs) == 136
    assert (z2.scan.function, z2.scan.state, z2.scan.start_time) == ("scrub", "scanning",
                                                                    utc(2026, 11, 21, 22, 50, 12))
    assert z2.scan.progress == pytest.approx(0.7361)


def test_scrub_paused_and_other_pool_finished():
    p = pools("scrub-paused")
    z1, z2 = p["zpool1"], p["zpool2"]
    # 2.1: "scrub paused since <pause time>", then "scrub started on <start time>" and the counts.
    # The start time is the "started on" line's (22:50:11, as while it ran), not the pause time.
    assert (z1.scan.function, z1.scan.state) == ("scrub", "paused")
    assert z1.scan.start_time == utc(2026, 11, 21, 22, 50, 11)
    assert "scrub paused since Sat Nov 21 22:50:15 2026" in CAP["scrub-paused"][STATUS_L]
    assert z1.scan.progress == pytest.approx(0.4426)
    assert (z2.scan.function, z2.scan.state, z2.scan.errors, z2.scan.end_time) == \
        ("scrub", "finished", 0, utc(2026, 11, 21, 22, 50, 14))
    assert {v.name: v.checksum_errors for v in z2.vdevs}["vdj"] == 136


def test_scrub_finished_on_degraded_pool():
    p = pools("degraded-scrub-finished")
    z1 = p["zpool1"]
    assert z1.state == "degraded"
    assert (z1.scan.function, z1.scan.state, z1.scan.errors, z1.scan.end_time, z1.scan.progress) == \
        ("scrub", "finished", 0, utc(2026, 11, 21, 22, 50, 16), None)


def test_online_again_after_resilver():
    p = pools("online-resilvered")
    z1, z2 = p["zpool1"], p["zpool2"]
    assert z1.state == "online" and all(v.state == "online" for v in z1.vdevs)
    assert (z1.scan.function, z1.scan.state, z1.scan.errors, z1.scan.end_time) == \
        ("resilver", "finished", 0, utc(2026, 11, 21, 22, 50, 19))
    # Checksum counts stay until `zpool clear`.
    assert {v.name: v.checksum_errors for v in z2.vdevs}["vdj"] == 136 and z2.state == "online"


def test_list_sizes_and_ashift():
    listing = parse_list(CAP["healthy"][LIST])
    assert listing["zpool1"] == {"size": 939524096, "alloc": 156229632, "free": 783294464, "frag": 0.0,
                                 "ashift": 13}
    # zpool2 was created without -o ashift: the property reads 0 (chosen per vdev).
    assert listing["zpool2"] == {"size": 469762048, "alloc": 90218496, "free": 379543552, "frag": 0.01,
                                 "ashift": None}
    for phase in ("degraded-scrub-running", "degraded-scrub-finished", "online-resilvered"):
        values = parse_list(CAP[phase][LIST])
        assert values["zpool1"]["size"] == 939524096
        assert values["zpool1"]["alloc"] + values["zpool1"]["free"] == values["zpool1"]["size"]
    p = list(pools("healthy").values())
    apply_list(p, listing)
    z1 = next(x for x in p if x.name == "zpool1")
    assert (z1.size_bytes, z1.allocated_bytes, z1.ashift) == (939524096, 156229632, 13)


@pytest.mark.parametrize("phase,expected", [
    ("healthy", {"zpool1": "online", "zpool2": "online"}),
    ("degraded-scrub-running", {"zpool1": "degraded", "zpool2": "online"}),
    ("degraded-scrub-finished", {"zpool1": "degraded", "zpool2": "online"}),
    ("online-resilvered", {"zpool1": "online", "zpool2": "online"}),
])
def test_kstat_state_files(tmp_path, phase, expected):
    for line in CAP[phase][KSTAT].splitlines():
        path, word = line.split(":", 1)
        target = tmp_path / path.lstrip("/").split("/", 1)[1]  # proc/spl/... -> spl/...
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(word + "\n")
    assert read_kstat_states(Roots(procfs=str(tmp_path)))[0] == expected


def test_reader_on_a_zpool_that_prints_the_real_output(tmp_path):
    """ZpoolReader against a stand-in zpool replaying the captured 2.1 output: -j fails
    with the real usage error (exit 2), the text and list outputs are parsed and joined."""
    phase = CAP["degraded-scrub-running"]
    (tmp_path / "status.txt").write_text(phase[STATUS_L])
    (tmp_path / "list.txt").write_text(phase[LIST])
    (tmp_path / "usage.txt").write_text(CAP["healthy"]["zpool status -j --json-int -L [rc=2 stderr]"])
    zpool = tmp_path / "zpool"
    zpool.write_text(f"""#!/bin/sh
case "$*" in
  *-j*) cat {tmp_path}/usage.txt >&2; exit 2 ;;
  "status -p -L") cat {tmp_path}/status.txt ;;
  "list -Hp -o name,size,alloc,free,frag,cap,health,ashift") cat {tmp_path}/list.txt ;;
  *) exit 1 ;;
esac
""")
    zpool.chmod(zpool.stat().st_mode | stat.S_IXUSR)
    reader = ZpoolReader(Roots(), zpool=str(zpool), timeout=10)
    snapshot = reader.read()
    assert snapshot.ok and snapshot.source == "text" and reader.json_supported is False
    by_name = {p.name: p for p in snapshot.pools}
    z1 = by_name["zpool1"]
    assert (z1.state, z1.ashift, z1.size_bytes, z1.scan.state) == ("degraded", 13, 939524096, "scanning")
    assert by_name["zpool2"].ashift is None and len(by_name["zpool2"].vdevs) == 11


@pytest.mark.parametrize("phase", ["healthy", "degraded-scrub-finished"])
def test_captured_files_replay(tmp_path, phase):
    """The layout `storpath capture` writes (zpool/status.txt, zpool/list.txt) with real output."""
    (tmp_path / "zpool").mkdir()
    (tmp_path / "zpool" / "status.txt").write_text(CAP[phase][STATUS_L])
    (tmp_path / "zpool" / "list.txt").write_text(CAP[phase][LIST])
    snapshot = ZpoolReader(Roots(captured=str(tmp_path))).read()
    assert snapshot.ok and snapshot.source == "captured-text"
    by_name = {p.name: p for p in snapshot.pools}
    assert by_name["zpool1"].state == ("online" if phase == "healthy" else "degraded")
    assert by_name["zpool1"].ashift == 13 and by_name["zpool2"].size_bytes == 469762048
