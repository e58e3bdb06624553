"""`storpath check` judges the RAID tools' pass and zpool's pools from its snapshot
(storpath.scrape.slow, read now), as it does NVMe Identify, SMART and dmsetup: the
findings run no tool and read no file, so a snapshot handed over (a scrape's, or one built
here with no machine behind it) is judged alike."""

from __future__ import annotations

from storpath.collectors import load_all
from storpath.report.findings import Facts, run_checks
from storpath.readers.raid import RaidPass
from storpath.readers.zfs import Vdev, ZfsPool, ZpoolPass, ZpoolRun
from storpath.base.roots import Roots
from storpath.scrape.slow import SlowRunner
from storpath.scrape.snapshot import Snapshot


def kinds(snapshot: Snapshot, subsystem: str):
    result = run_checks(Facts(None, {}, snapshot=snapshot), only=[subsystem])
    return {(f.subject, f.kind) for f in result.findings}


def test_zfs_is_judged_from_the_snapshot_alone_with_the_block_sizes_read_with_the_pools():
    pool = ZfsPool("tank", "online", [Vdev("tank", "root", "normal", "online", None),
                                      Vdev("sda", "disk", "normal", "online", "tank", leaf=True)], ashift=9)
    run = ZpoolRun(pools=[pool], ok=True, reason=None, finished_at=1.0, source="json")
    snapshot = Snapshot(zfs_kstat={"tank": "degraded"}, zpool=ZpoolPass(run, {"tank": {"sda": 4096}}, 1.0))
    assert kinds(snapshot, "zfs") == {("tank", "zfs.pool_not_online"), ("tank", "zfs.ashift_below_sector_size")}


def test_no_zfs_here_is_no_finding():
    assert kinds(Snapshot(zfs_kstat={}, zpool=ZpoolPass(None, {}, None)), "zfs") == set()


def test_raid_tools_past_the_deadline_are_a_finding_not_a_failed_check():
    found = kinds(Snapshot(raid=None, failed={"raid": "timed out"}), "raid")
    assert found == {("raid", "raid.unreadable")}


def test_no_raid_controller_is_no_finding():
    assert kinds(Snapshot(raid=RaidPass(None, None)), "raid") == set()


def test_check_reads_the_raid_tools_and_zpool_now_with_the_collectors_settings(tmp_path):
    specs = load_all()
    runner = SlowRunner(Roots(sysfs=str(tmp_path), procfs=str(tmp_path)))  # no scheduler: read now
    for name in ("raid", "zfs"):
        runner.enable(name, specs[name].cls.settings({}))
    sources = {source.name: source for source in runner.sources()}
    assert {"raid", "zpool"} <= set(sources)
    zpool, problems = sources["zpool"].read()  # no ZFS module under this root: zpool not run
    assert zpool == ZpoolPass(None, {}, None) and problems == ()
