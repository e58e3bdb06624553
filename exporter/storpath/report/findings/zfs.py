"""ZFS findings: pools and vdevs not online, vdev errors, pools too full to write fast,
an ashift below the devices' physical sector size, and a scan in progress. Verdicts as
in rules/zfs.yml (capacity 70 % warning, 90 % critical); the ashift expectation is
storpath.analysis.zfs.expected_ashift, the one behind
`storpath_zfs_pool_expected_ashift`, over the devices' block sizes read with the pools. The
zpool run (or the read of its captured output) is the snapshot's: run with the zfs
collector's path and timeout when the snapshot is taken (storpath.scrape.slow.SlowRunner, read now),
or the collector's last when it is a scrape's. The pool state is kstat's
(/proc/spl/kstat/zfs/<pool>/state, in the snapshot as `zfs_kstat`) wherever it has
one, as in the metrics (collectors/zfs.py): so check and the alerts on
storpath_zfs_pool_state agree, also when zpool cannot be run."""

from __future__ import annotations

from storpath.analysis.zfs import data_leaves, expected_ashift
from storpath.report.findings import CRITICAL, INFO, WARNING, Facts, Finding, Outcome, SourceFailed, register
from storpath.readers.zfs import ZpoolPass, ZpoolRun

# As rules/config/thresholds.yml zfs.capacity_warning_ratio / capacity_critical_ratio.
CAPACITY_WARNING, CAPACITY_CRITICAL = 0.70, 0.90


@register("zfs", collector="zfs", order=60)
def check(facts: Facts, out: Outcome) -> None:
    try:
        found = facts.part("zpool")
    except SourceFailed as exc:  # zpool ran past the check's deadline
        found = ZpoolPass(ZpoolRun(pools=[], ok=False, reason=str(exc), finished_at=0.0, source="none"), {}, None)
    run = found.run
    try:
        kstat = dict(facts.part("zfs_kstat"))
    except SourceFailed:
        kstat = {}
    if run is None:  # no ZFS here (or a replayed machine without it): kstat's states only
        run = ZpoolRun(pools=[], ok=True, reason=None, finished_at=0.0, source="none")
    if not run.ok and not run.pools:
        out.add(Finding(
            subject="zfs", severity=INFO, kind="zfs.unreadable",
            title="ZFS pool details could not be read" if kstat else "ZFS pools could not be read",
            evidence=run.reason or "zpool failed",
            impact="vdevs, errors, capacity and ashift are unknown" + (
                "; pool states come from /proc/spl/kstat/zfs" if kstat else "; so is pool health"),
            remedy="Run as root or check that zpool works (`zpool status`)."))
    # A pool zpool did not list (it failed, or was not run on a replay) still has kstat's
    # state, as the metrics have it.
    listed = {pool.name for pool in run.pools}
    for name in sorted(set(kstat) - listed):
        if kstat[name] != "online":
            out.add(_not_online(name, kstat[name], [], "kstat"))
    for pool in run.pools:
        state = kstat.get(pool.name) or pool.state
        if state and state != "online":
            bad = [v for v in pool.vdevs if v.state and v.state != "online" and v.leaf]
            out.add(_not_online(pool.name, state, bad, "kstat" if pool.name in kstat else "zpool"))
        elif state == "online":
            for vdev in pool.vdevs:
                if vdev.state and vdev.state != "online":
                    out.add(Finding(
                        subject=pool.name, severity=WARNING, kind="zfs.vdev_not_online",
                        title=f"vdev {vdev.name} is {vdev.state.upper()}",
                        evidence=f"{vdev.name} ({vdev.vdev_class}) {vdev.state.upper()}",
                        impact="the pool works around it", remedy=f"`zpool status -v {pool.name}`.",
                        related=(vdev.name,)))
        errors = [(v, (v.read_errors or 0), (v.write_errors or 0), (v.checksum_errors or 0)) for v in pool.vdevs
                  if v.leaf and ((v.read_errors or 0) + (v.write_errors or 0) + (v.checksum_errors or 0))]
        if errors:
            out.add(Finding(
                subject=pool.name, severity=WARNING, kind="zfs.vdev_errors",
                title=f"errors on {len(errors)} device{'s' if len(errors) > 1 else ''}",
                evidence="; ".join(f"{v.name}: read {r}, write {w}, checksum {c}" for v, r, w, c in errors),
                impact="ZFS repaired what it could from redundancy; a device that keeps erring slows every read "
                       "that touches it",
                remedy=f"Check the device (smartctl -a) and its cable; `zpool clear {pool.name}` after fixing, "
                       "and replace a device whose counts keep rising.",
                related=tuple(v.name for v, *_ in errors)))
        if pool.size_bytes and pool.allocated_bytes is not None:
            ratio = pool.allocated_bytes / pool.size_bytes
            if ratio >= CAPACITY_WARNING:
                out.add(Finding(
                    subject=pool.name, severity=CRITICAL if ratio >= CAPACITY_CRITICAL else WARNING,
                    kind="zfs.capacity_high", title=f"pool is {ratio:.0%} full",
                    evidence=f"{pool.allocated_bytes / 1e12:.2f} TB of {pool.size_bytes / 1e12:.2f} TB allocated"
                             + (f", fragmentation {pool.fragmentation_ratio:.0%}"
                                if pool.fragmentation_ratio is not None else ""),
                    impact=f"above {CAPACITY_WARNING:.0%} ZFS spends longer finding free space and writes slow "
                           "down, more so as fragmentation grows",
                    remedy="Free space (old snapshots: `zfs list -t snapshot -o name,used -s used`) or add a "
                           "vdev of the same shape."))
        sizes = [found.block_sizes.get(pool.name, {}).get(v.name) for v in data_leaves(pool.vdevs)]
        wanted = expected_ashift(sizes)
        if pool.ashift and wanted and pool.ashift < wanted:
            out.add(Finding(
                subject=pool.name, severity=WARNING, kind="zfs.ashift_below_sector_size",
                title=f"ashift {pool.ashift} ({1 << pool.ashift} bytes) below the devices' "
                      f"{1 << wanted}-byte sectors",
                evidence=f"ashift {pool.ashift}; largest physical sector {max(s for s in sizes if s)} bytes "
                         f"calls for ashift {wanted}",
                impact="every smaller write becomes a read-modify-write inside the drive",
                remedy=f"ashift is fixed per vdev: recreate the pool (or add new vdevs) with "
                       f"`-o ashift={wanted}`, after moving the data off."))
        if pool.scan and pool.scan.state == "scanning":
            done = f", {pool.scan.progress:.1%} done" if pool.scan.progress is not None else ""
            out.add(Finding(
                subject=pool.name, severity=INFO, kind=f"zfs.{pool.scan.function}_running",
                title=f"{pool.scan.function} in progress{done}", evidence=f"{pool.scan.function} scanning",
                impact="the pool's throughput is shared with the scan until it finishes",
                remedy="Let it finish; measure performance afterwards."))
    out.count(len(listed | set(kstat)), "ZFS pools")


def _not_online(name: str, state: str, bad, source: str) -> Finding:
    """A pool whose state is not ONLINE; `source` says where the state came from."""
    where = f"/proc/spl/kstat/zfs/{name}/state" if source == "kstat" else "zpool status"
    return Finding(
        subject=name, severity=CRITICAL, kind="zfs.pool_not_online",
        title=f"pool is {state.upper()}",
        evidence=f"state {state.upper()} ({where})" + (
            "; " + ", ".join(f"{v.name} {v.state.upper()}" for v in bad) if bad else ""),
        impact="it runs without part of its redundancy (or not at all); reads of missing data are "
               "reconstructed from parity, which is slower",
        remedy=f"`zpool status -v {name}`; replace the failed device with "
               f"`zpool replace {name} OLD NEW` and let it resilver.",
        related=tuple(v.name for v in bad))
