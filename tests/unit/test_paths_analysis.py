"""Verdicts on every path to the data (storpath.analysis.paths), and the fixture machines'
faults as the collectors and `storpath check` see them."""

from __future__ import annotations

import pytest

from storpath.analysis.paths import (crosses_numa, drive_paths, judge_map, map_count, map_link_rates, map_wwid,
                                     optimized_paths, path_verdict, subsystem_count)
from storpath.base.background import Scheduler
from storpath.collectors.base import Context
from storpath.collectors.multipath import MultipathCollector
from storpath.collectors.nvme_subsystem import NvmeSubsystemCollector
from storpath.report.findings import Facts, run_checks
from storpath.readers.dm_multipath import DmsetupStatus, MapPath, MultipathMap, StatusPath
from storpath.readers.nvme_subsystem import NamespacePath, NvmeSubsystem, SubsystemPath
from storpath.readers.scsi_paths import ScsiDisk
from storpath.base.roots import Roots
from storpath.scrape.slow import SlowRunner
from storpath.scrape.snapshot import take_once
from tests.fixtures import machines
from tests.snapshots import collect

MAP = MultipathMap(device="dm-0", name="mpatha", uuid="mpath-3600", size_bytes=1 << 30, suspended=False,
                   paths=(MapPath("sdb", "8:16", "running"), MapPath("sdc", "8:32", "running"),
                          MapPath("sdd", None, "blocked")))


def path(controller, state, node=None, ana=None):
    ns = (NamespacePath(f"nvme0c{controller[-1]}n1", "nvme0n1", ana),) if ana else ()
    return SubsystemPath(controller, state, state, "fc", "nn-0x1:pn-0x2", node, ns)


def subsystem(*paths, iopolicy="numa"):
    return NvmeSubsystem("nvme-subsys0", "nqn.x", "Array", "S1", iopolicy, tuple(paths), ("nvme0n1",))


def test_dmsetup_verdict_overrides_the_device_state():
    """A path the kernel's map failed (F) while its SCSI device still reads running is failed:
    node_exporter, reading only device/state, counts it active."""
    status = DmsetupStatus({"mpatha": (StatusPath("8:16", True, 0, 1, "A"), StatusPath("8:32", False, 2, 1, "A"))},
                           ok=True)
    judged = judge_map(MAP, status)
    assert [(j.path.device, j.failed, j.basis, j.fail_count) for j in judged] == [
        ("sdb", False, "dmsetup", 0), ("sdc", True, "dmsetup", 2), ("sdd", True, "device_state", None)]
    count = map_count(judged)
    assert (count.paths, count.live, count.failed, count.degraded, count.lost) == (3, 1, 2, True, False)


def test_a_renamed_map_keeps_dm_mpaths_verdict():
    """`dmsetup rename` between dmsetup's run (old name) and the read of sysfs (new name): the
    map is found by its paths' device numbers, so its failed path stays failed."""
    status = DmsetupStatus({"mpath-old": (StatusPath("8:16", True, 0, 1, "A"), StatusPath("8:32", False, 2, 1, "A")),
                            "other": (StatusPath("8:48", False, 1, 1, "A"),)}, ok=True)
    renamed = MultipathMap(device="dm-0", name="mpath-new", uuid=MAP.uuid, size_bytes=MAP.size_bytes,
                           suspended=False, paths=MAP.paths)
    judged = judge_map(renamed, status)
    assert [(j.path.device, j.failed, j.basis) for j in judged] == [
        ("sdb", False, "dmsetup"), ("sdc", True, "dmsetup"), ("sdd", True, "device_state")]
    assert map_count(judged).degraded


def test_without_dmsetup_the_device_state_counts_what_it_can():
    """No dmsetup verdict: a blocked device is failed, a running one unknown, never active
    (the old code counted sdb and sdc active)."""
    for status in (None, DmsetupStatus({}, ok=False, reason="not root")):
        judged = judge_map(MAP, status)
        assert [path_verdict(j) for j in judged] == ["unknown", "unknown", "failed"]
        count = map_count(judged)
        assert (count.paths, count.live, count.failed, count.unknown, count.degraded, count.lost) == (
            3, 0, 1, 2, True, False)
    offline = MultipathMap(device="dm-1", name="m", uuid="mpath-3601", size_bytes=1, suspended=False,
                           paths=(MapPath("sde", "8:64", "offline"), MapPath("sdf", "8:80", "blocked")))
    assert map_count(judge_map(offline, None)).lost  # every device down: lost whatever dmsetup says
    assert map_wwid(MAP) == "3600"


def test_a_failed_path_is_not_counted_active_when_dmsetup_then_fails(tmp_path):
    """dm-mpath failed a path (F) whose SCSI device still says running; then dmsetup stops
    answering. The map does not become all active (the old code exported 2 of 2 active and no
    alert could fire): its paths are unknown, `check` and `tree` say so, and the map carries
    its WWID."""
    roots = build(tmp_path, "supermicro-dualport-sas-shelf", "path-failed")
    offline = [p for p in (tmp_path / "sys").rglob("state") if p.is_file() and p.read_text().strip() == "offline"]
    assert len(offline) == 1
    offline[0].write_text("running\n")
    collector = MultipathCollector(Context(roots, scheduler=Scheduler()))
    collector.ctx.scheduler.run_all_once()
    found = series(collector)
    wwid = next(dict(k)["wwid"] for (name, k) in found if name == "storpath_multipath_paths"
                and dict(k)["device"] == "dm-3")
    labels = (("device", "dm-3"), ("wwid", wwid))
    assert [found[(f"storpath_multipath_paths{s}", labels)] for s in ("", "_active", "_failed", "_unknown")] == [
        2, 1, 1, 0]
    assert kinds(roots, "multipath") == ["paths.map_degraded"]

    (tmp_path / "captured" / "dmsetup" / "status.txt").unlink()  # dmsetup's verdict gone (absent)
    collector = MultipathCollector(Context(roots, scheduler=Scheduler()))
    collector.ctx.scheduler.run_all_once()
    found = series(collector)
    assert [found[(f"storpath_multipath_paths{s}", labels)] for s in ("", "_active", "_failed", "_unknown")] == [
        2, 0, 0, 2]
    assert not any(name == "storpath_multipath_path_failed" and dict(k)["device"] == "dm-3" and v == 0
                   for (name, k), v in found.items())  # no path called serving
    assert "paths.map_unknown" in kinds(roots, "multipath")


def test_subsystem_lost_and_degraded():
    assert subsystem_count(subsystem(path("nvme0", "live"), path("nvme1", "connecting"))).degraded
    lost = subsystem_count(subsystem(path("nvme0", "dead"), path("nvme1", "connecting")))
    assert lost.lost and lost.failed == 2
    assert not subsystem_count(subsystem(path("nvme0", "live"))).degraded


def test_optimized_paths_count_live_paths_only():
    sub = subsystem(path("nvme0", "connecting", ana="optimized"), path("nvme1", "live", ana="non-optimized"))
    assert optimized_paths(sub) == {"nvme0n1": 0}
    assert optimized_paths(subsystem(path("nvme0", "live"))) == {}  # no ANA reported: no verdict


@pytest.mark.parametrize("policy,crossing", [("round-robin", True), ("queue-depth", True), ("numa", False)])
def test_numa_crossing(policy, crossing):
    sub = subsystem(path("nvme0", "live", node=0), path("nvme1", "live", node=1), iopolicy=policy)
    assert crosses_numa(sub) is crossing
    one_node = subsystem(path("nvme0", "live", node=0), path("nvme1", "dead", node=1), iopolicy=policy)
    assert not crosses_numa(one_node)


def test_link_rates_of_working_paths():
    judged = judge_map(MAP, None)
    assert map_link_rates(judged, {"sdb": 12e9, "sdc": 6e9, "sdd": 3e9}) == {12e9, 6e9}  # sdd failed


def test_drive_paths_against_same_model_peers():
    drives = drive_paths([ScsiDisk(name, wwid, vendor, "X", None) for name, wwid, vendor in (
        ("sda", "naa.1", "HGST"), ("sde", "naa.1", "HGST"), ("sdb", "naa.2", "HGST"), ("sdc", "naa.3", "SEAGATE"),
        ("sdd", None, "HGST"))])
    assert [(d.wwid, d.devices, d.peers_paths, d.missing) for d in drives] == [
        ("naa.1", ("sda", "sde"), 2, 0), ("naa.2", ("sdb",), 2, 1), ("naa.3", ("sdc",), 1, 0)]
    assert drives[0].model == "HGST X"


def build(tmp_path, name, variant):
    machines.load(name).build(str(tmp_path), variant)
    return Roots(sysfs=str(tmp_path / "sys"), procfs=str(tmp_path / "proc"), dev="",
                 captured=str(tmp_path / "captured"))


def series(collector):
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in collect(collector) for s in f.samples}


def kinds(roots, collector):
    names = ["nvme_subsystems", "multipath_maps", "scsi_disks", "sas_phys", "blocks", "pci"]
    runner = SlowRunner(roots)  # no scheduler: dmsetup read now, as `storpath check` reads it
    runner.enable(collector, MultipathCollector.settings({}))
    extra = runner.sources()
    snapshot = take_once(roots, names + [s.name for s in extra], extra)
    result = run_checks(Facts(roots, snapshot=snapshot), only=["nvme_paths", "multipath"])
    return sorted(f.kind for f in result.findings)


@pytest.mark.parametrize("variant,expected", [
    ("healthy", []),
    ("tcp-path-dead", ["paths.no_optimized_path", "paths.nvme_degraded"]),
    ("fc-path-dead", ["paths.nvme_degraded"]),
    ("fc-round-robin", ["paths.numa_crossing"]),
])
def test_nvmeof_machine(tmp_path, variant, expected):
    roots = build(tmp_path, "dell-r750-nvmeof", variant)
    assert kinds(roots, "multipath") == expected
    found = series(NvmeSubsystemCollector(Context(roots, scheduler=Scheduler())))
    live = found[("storpath_nvme_subsystem_paths_live", (("subsystem", "nvme-subsys0"),))]
    assert live == (1 if variant == "tcp-path-dead" else 2)


@pytest.mark.parametrize("variant,expected", [
    ("healthy", []),
    ("path-missing", ["paths.drive_path_missing"]),
    ("path-failed", ["paths.map_degraded"]),
    ("mixed-rates", ["paths.mixed_link_rates"]),
])
def test_dualport_shelf(tmp_path, variant, expected):
    roots = build(tmp_path, "supermicro-dualport-sas-shelf", variant)
    assert kinds(roots, "multipath") == expected
    collector = MultipathCollector(Context(roots, scheduler=Scheduler()))
    collector.ctx.scheduler.run_all_once()  # the dmsetup task's pass
    found = series(collector)
    assert found[("storpath_multipath_dmsetup_up", ())] == 1
    failed = {dict(k)["path"]: dict(k)["basis"] for (name, k), v in found.items()
              if name == "storpath_multipath_path_failed" and v == 1}
    assert failed == ({"sdh": "dmsetup"} if variant == "path-failed" else {})


def test_tree_says_unknown_for_a_path_without_dmsetups_verdict():
    """`storpath tree` marks a running path without dmsetup's verdict "unknown" (the old code
    showed it as a working path and the map as 2/3 active), a blocked one "failed"."""
    from storpath.report.tree.sources import path_arrays
    (array,) = path_arrays((), (MAP,), None, ())
    assert array.detail == "multipath mpatha · 0/3 paths active, 2 unknown"
    assert [note.split(" · ")[-1] for note in array.notes] == ["unknown", "unknown", "failed"]
