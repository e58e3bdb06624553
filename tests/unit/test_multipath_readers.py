"""Every path to the data: the NVMe native multipath and dm-multipath readers on literal
text and small trees (malformed, missing, unknown values included)."""

from __future__ import annotations

import os

import pytest

from storpath.readers.dm_multipath import (MultipathReader, StatusFormatError, parse_dmsetup_status,
                                           parse_status_line, read_dmsetup_status)
from storpath.base.parse import parse_numa_node
from storpath.readers.nvme_subsystem import NvmeSubsystemReader, parse_ana_state, parse_controller_state
from storpath.base.roots import Roots
from tests.hang_guard import finishes

# dm-mpath.c multipath_status, INFO: two path groups (A in use, E enabled), round-robin
# (no per-path selector args), one path failed once in the second group.
TWO_GROUPS = "mpatha: 0 104857600 multipath 2 0 0 0 2 1 A 0 2 0 8:128 A 0 8:144 A 0 E 0 2 0 8:160 F 1 8:176 A 0"
# service-time prints two args per path (in-flight size and relative throughput).
SERVICE_TIME = "mpathb: 0 2097152 multipath 2 1 0 0 1 1 A 0 2 2 8:16 A 0 0 1 8:32 F 3 0 1"


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(f"{text}\n")


@pytest.mark.parametrize("text,state", [("live", "live"), ("dead", "dead"), ("deleting (no IO)", "deleting"),
                                        ("deleting (noio)", "deleting"), ("connecting\n", "connecting"),
                                        ("bogus", "unknown"), (None, "unknown"), ("", "unknown")])
def test_controller_state(text, state):
    assert parse_controller_state(text) == state


def test_ana_state_and_numa():
    assert parse_ana_state("optimized") == ("optimized", None)
    assert parse_ana_state("non-optimized\n") == ("non-optimized", None)
    assert parse_ana_state(None) == (None, None)
    assert parse_ana_state("fast")[0] is None and "fast" in parse_ana_state("fast")[1]
    # The one parse keeps -1 (no node); the subsystem reader makes it None (test_subsystem_reader's nvme1).
    assert parse_numa_node("1") == 1 and parse_numa_node("-1") == -1 and parse_numa_node("x") is None


def test_status_line_groups_and_selector_args():
    paths = parse_dmsetup_status(TWO_GROUPS)["mpatha"]
    assert [(p.devno, p.active, p.fail_count, p.group, p.group_state) for p in paths] == [
        ("8:128", True, 0, 1, "A"), ("8:144", True, 0, 1, "A"), ("8:160", False, 1, 2, "E"),
        ("8:176", True, 0, 2, "E")]
    paths = parse_dmsetup_status(SERVICE_TIME)["mpathb"]
    assert [(p.devno, p.active, p.fail_count) for p in paths] == [("8:16", True, 0), ("8:32", False, 3)]


def test_status_skips_other_targets_and_no_devices():
    assert parse_dmsetup_status("No devices found\n") == {}
    assert parse_dmsetup_status("vg-root: 0 4096 linear 8:1 2048\n") == {}


def test_a_map_printed_again_and_again_keeps_every_path_in_order_in_linear_time():
    """A map of several segments (or hostile output) names the same map on many lines: its
    paths are joined in order, and the parse stays linear in the output's size. 8 MiB of one
    name took the old tuple-per-line join 40.6 s of CPU (4 MiB: 9.4 s); the hang guard
    (tests.hang_guard, 10 s) fails it, the linear parse takes 1.2 s."""
    line = "mpatha: 0 100 multipath 0 0 1 1 A 0 1 0 8:{} {} 0\n"
    small = "".join(line.format(n, "AF"[n % 2]) for n in range(3))
    paths = parse_dmsetup_status(small)["mpatha"]
    assert [(p.devno, p.active) for p in paths] == [("8:0", True), ("8:1", False), ("8:2", True)]
    hostile = line.format(16, "A") * (8 * 2 ** 20 // len(line.format(16, "A")))
    maps = finishes(parse_dmsetup_status, hostile)
    assert list(maps) == ["mpatha"] and len(maps["mpatha"]) == hostile.count("\n")


@pytest.mark.parametrize("words", ["2 0 0 0 1 1 A 0 2 0 8:16 A 0", "2 0 0 0 1 1 X 0 1 0 8:16 A 0",
                                   "2 0 0 0 1 1 A 0 1 0 sda A 0", "2 0 0 0 1 1 A 0 1 0 8:16 Q 0", "x"])
def test_status_malformed(words):
    with pytest.raises(StatusFormatError):
        parse_status_line(words.split())


def subsystem_tree(root):
    base = "sys/devices/virtual/nvme-subsystem/nvme-subsys0"
    write(root, f"{base}/subsysnqn", "nqn.2014-08.org.example:array1")
    write(root, f"{base}/model", "Array                                   ")
    write(root, f"{base}/iopolicy", "numa")
    for ctrl, state, node, ana in (("nvme0", "live", "0", "optimized"), ("nvme1", "connecting", "-1", None),
                                   ("nvme2", "deleting (no IO)", "1", "bogus")):
        write(root, f"{base}/{ctrl}/state", state)
        write(root, f"{base}/{ctrl}/transport", "tcp")
        write(root, f"{base}/{ctrl}/address", f"traddr=10.0.0.{ctrl[-1]},trsvcid=4420")
        write(root, f"{base}/{ctrl}/numa_node", node)
        os.makedirs(os.path.join(root, f"{base}/{ctrl}/nvme0c{ctrl[-1]}n1"), exist_ok=True)
        if ana is not None:
            write(root, f"{base}/{ctrl}/nvme0c{ctrl[-1]}n1/ana_state", ana)
    os.makedirs(os.path.join(root, f"{base}/nvme0n1"))
    os.makedirs(os.path.join(root, "sys/class/nvme-subsystem"))
    os.symlink("../../devices/virtual/nvme-subsystem/nvme-subsys0",
               os.path.join(root, "sys/class/nvme-subsystem/nvme-subsys0"))


def test_subsystem_reader(tmp_path):
    root = str(tmp_path)
    subsystem_tree(root)
    subsystems, problems = NvmeSubsystemReader(Roots(sysfs=f"{root}/sys")).read()
    (sub,) = subsystems
    assert (sub.nqn, sub.model, sub.serial, sub.iopolicy, sub.namespaces) == (
        "nqn.2014-08.org.example:array1", "Array", None, "numa", ("nvme0n1",))
    assert [(p.controller, p.state, p.numa_node) for p in sub.paths] == [
        ("nvme0", "live", 0), ("nvme1", "connecting", None), ("nvme2", "deleting", 1)]
    assert sub.live_paths == 1
    assert [n.ana_state for p in sub.paths for n in p.namespace_paths] == ["optimized", None, None]
    assert [p.message for p in problems] == ["NVMe ana_state not known"]  # an absent serial is no problem


def test_no_subsystem_class_is_no_hardware(tmp_path):
    os.makedirs(tmp_path / "sys")
    assert NvmeSubsystemReader(Roots(sysfs=str(tmp_path / "sys"))).read() == ([], [])


def map_tree(root):
    write(root, "sys/block/dm-0/dm/uuid", "mpath-3600a098038303053453f463045727a41")
    write(root, "sys/block/dm-0/dm/name", "mpatha")
    write(root, "sys/block/dm-0/dm/suspended", "0")
    write(root, "sys/block/dm-0/size", "2097152")
    write(root, "sys/block/dm-1/dm/uuid", "LVM-xyz")
    write(root, "sys/block/dm-2/dm/uuid", "part1-mpath-3600a098038303053453f463045727a41")
    for disk, state, devno in (("sdb", "running", "8:16"), ("sdc", "offline", "8:32"), ("sdd", None, "bogus")):
        os.makedirs(os.path.join(root, "sys/block/dm-0/slaves", disk))
        write(root, f"sys/block/{disk}/dev", devno)
        if state:
            write(root, f"sys/block/{disk}/device/state", state)


def test_map_reader(tmp_path):
    root = str(tmp_path)
    map_tree(root)
    maps, problems = MultipathReader(Roots(sysfs=f"{root}/sys")).read()
    (found,) = maps
    assert (found.device, found.name, found.size_bytes, found.suspended) == ("dm-0", "mpatha", 2097152 * 512, False)
    assert [(p.device, p.devno, p.state) for p in found.paths] == [
        ("sdb", "8:16", "running"), ("sdc", "8:32", "offline"), ("sdd", None, None)]
    assert problems == []  # a path without device/state (a loop device) is unknown, not unreadable


def test_a_renamed_map_is_read_with_its_new_name(tmp_path):
    """`dmsetup rename` (multipathd does it when an alias changes) keeps the dm device and its
    uuid: a long-running reader reads the new name on its next call, not the first one's."""
    root = str(tmp_path)
    map_tree(root)
    reader = MultipathReader(Roots(sysfs=f"{root}/sys"))
    assert [m.name for m in reader.read()[0]] == ["mpatha"]
    write(root, "sys/block/dm-0/dm/name", "mpath-db")
    (found,), _ = reader.read()
    assert (found.device, found.name, found.uuid) == ("dm-0", "mpath-db", "mpath-3600a098038303053453f463045727a41")


def test_dmsetup_replayed_from_capture(tmp_path):
    write(str(tmp_path), "captured/dmsetup/status.txt", TWO_GROUPS)
    status = read_dmsetup_status(Roots(sysfs=str(tmp_path), dev="", captured=str(tmp_path / "captured")),
                                 "dmsetup-not-run", 1.0)
    assert status.ok and status.source == "captured" and len(status.maps["mpatha"]) == 4
    write(str(tmp_path), "captured/dmsetup/status.txt", "mpatha: 0 1 multipath 2 0")
    bad = read_dmsetup_status(Roots(sysfs=str(tmp_path), dev="", captured=str(tmp_path / "captured")), "x", 1.0)
    assert not bad.ok and "ends early" in bad.reason


def test_dmsetup_not_run_on_a_replay(tmp_path):
    status = read_dmsetup_status(Roots(sysfs=str(tmp_path), dev=""), "/nonexistent/dmsetup", 1.0)
    assert status.ok and status.maps == {} and status.source == "none"


def test_dmsetup_missing_binary(tmp_path):
    status = read_dmsetup_status(Roots(sysfs=str(tmp_path)), "/nonexistent/dmsetup", 1.0)
    assert not status.ok and "cannot run" in status.reason
