"""dm-multipath maps and dual-ported SCSI drives: every path, whether it serves, and the
verdicts of analysis.paths (failed paths, NUMA spread, mixed link rates, a drive with a
path fewer than its peers).

Which paths a map counts failed comes from `dmsetup status --target multipath`, which needs
root and runs in a background task on its own interval (or is read from
captured/dmsetup/status.txt when replaying); without it a path whose device is not running
counts as failed, one running as unknown (storpath_multipath_paths_unknown), never as active.
Every map family carries `wwid` next to `device`: dm numbers maps in creation order, so
dm-5 may be another LUN after a reboot; the rules key a map's history by WWID.
"""

from __future__ import annotations

from typing import Dict, Optional, Set

from storpath.analysis.paths import device_link_rates, drive_paths, judge_map, map_count, map_wwid
from storpath.collectors import Collector, register
from storpath.base.config import Duration
from storpath.scrape.families import COUNTER, GAUGE, Family, Rows

DMSETUP_UP = Family(
    "storpath_multipath_dmsetup_up", GAUGE,
    "Whether the last dmsetup status run (or captured read) succeeded (1) or failed (0); absent without "
    "dm-multipath.", (),
    doc="1 when the last `dmsetup status --target multipath` (or its capture) was read, 0 when it failed (not "
        "installed, not root, hung: the paths' verdicts then rest on their device states); absent where the "
        "dm_multipath module is not loaded")
DEVICE_INFO = Family(
    "storpath_multipath_device_info", GAUGE,
    "A dm-multipath map: its block device, name (dm/name), uuid (dm/uuid, mpath-<wwid>) and WWID; always 1.",
    ("device", "name", "uuid", "wwid"),
    doc="one per map (`dm/uuid` starting `mpath-`): `device` the kernel's block device (`dm-5`, as node_disk_* "
        "names it, renumbered in creation order at boot), `name` its /dev/mapper name (node_exporter's `device` "
        "label; `dmsetup rename` changes it), `uuid`, `wwid` (the uuid after `mpath-`: the LUN's, stable across "
        "reboots); always 1")
DEVICE_ACTIVE = Family(
    "storpath_multipath_device_active", GAUGE,
    "1 when the map is active, 0 when suspended (dm/suspended).", ("device", "wwid"),
    doc="1 while the map serves I/O, 0 while suspended (`dm/suspended` 1: a reload in progress, or stuck)")
SIZE = Family(
    "storpath_multipath_size_bytes", GAUGE,
    "Size of the map (size, 512-byte sectors, times 512).", ("device", "wwid"), "bytes",
    doc="size of the map in bytes")
PATHS = Family(
    "storpath_multipath_paths", GAUGE,
    "Paths (slave devices) of the map, whatever their state; wwid the map's stable identity.", ("device", "wwid"),
    doc="paths (the map's `slaves/`) whatever their state; `wwid` (as on every map family) is the map's identity "
        "across reboots that renumber `device`; a path device removed from the host leaves the map "
        "(StoragePathsMissing compares with the last day's maximum of the same WWID)")
PATHS_ACTIVE = Family(
    "storpath_multipath_paths_active", GAUGE,
    "Paths of the map that serve I/O: active (A) in dmsetup status; without it none is known to.",
    ("device", "wwid"),
    doc="paths that serve: dm-mpath's `A` in `dmsetup status`; a path dmsetup did not judge (dmsetup failed, hung, "
        "absent, or the map is newer than its last run) is never counted here on its device state alone (see "
        "`paths_unknown`)")
PATHS_FAILED = Family(
    "storpath_multipath_paths_failed", GAUGE,
    "Paths of the map that do not serve: failed (F) in dmsetup status, or without it a device not running.",
    ("device", "wwid"),
    doc="failed (`F`) in `dmsetup status`, or without it a device state other than `running`/`live` (offline, "
        "blocked...: the device state counts what it can); above 0: StoragePathsDegraded, equal to `paths`: "
        "StoragePathLost")
PATHS_UNKNOWN = Family(
    "storpath_multipath_paths_unknown", GAUGE,
    "Paths of the map whose state is unknown: no dmsetup verdict and a device that says running.",
    ("device", "wwid"),
    doc="paths dmsetup status did not judge whose device still says `running`/`live`: dm-mpath may have failed "
        "them (a path checker's verdict), so they count neither active nor failed; `paths = active + failed + "
        "unknown`; above 0 for long: StorageMultipathStateUnknown, and a firing StoragePathsDegraded or "
        "StoragePathLost of the map stays firing while its paths are unknown")
PATH_STATE = Family(
    "storpath_multipath_path_state", GAUGE,
    "A path's device state (device/state: running, offline, blocked...; live for NVMe); 1 for the current "
    "value only.", ("device", "path", "state"),
    doc="the path device's `device/state` (SCSI: `running`, `offline`, `transport-offline`, `blocked`, `quiesce`, "
        "`created`, `cancel`, `deleted`; NVMe: the controller's state), `unknown` where there is none; one series "
        "per path with value 1, as node_exporter's dmmultipath collector exports it")
PATH_FAILED = Family(
    "storpath_multipath_path_failed", GAUGE,
    "1 when the map counts the path failed, else 0; basis says whether dmsetup status or the device state told.",
    ("device", "path", "basis"),
    doc="1 when the path does not serve; `basis` `dmsetup` (dm-mpath's own A/F flag) or `device_state` (no "
        "dmsetup status: the device's state)")
PATH_FAILURES = Family(
    "storpath_multipath_path_failures", COUNTER,
    "Times dm-mpath failed the path since the map was loaded (dmsetup status fail count).", ("device", "path"),
    doc="times dm-mpath failed the path since the map was loaded (`dmsetup status`'s fail count); a rising count "
        "on a path that is active again is a flapping link")
NUMA_NODES = Family(
    "storpath_multipath_numa_nodes", GAUGE,
    "Distinct NUMA nodes of the HBAs behind the map's working paths; above 1, part of the I/O crosses sockets.",
    ("device", "wwid"),
    doc="distinct NUMA nodes of the PCI functions (HBAs) behind the working paths; dm-mpath's selectors do not "
        "look at NUMA, so above 1 part of the I/O crosses sockets though a near path exists; absent when no node "
        "is known")
LINK_RATES = Family(
    "storpath_multipath_link_rates", GAUGE,
    "Distinct SAS link rates negotiated by the map's working paths; above 1 the fast paths are paced to the slow.",
    ("device", "wwid"),
    doc="distinct negotiated SAS link rates of the working paths (the PHY facing each path's end device); above 1 "
        "(StorageMultipathMixedLinkRates) a round-robin map runs at the slow path's pace; absent when no path has "
        "a SAS rate")
DRIVE_PATHS = Family(
    "storpath_scsi_drive_paths", GAUGE,
    "SCSI devices through which the host reaches one drive (one WWID); a dual-ported drive on two HBAs or "
    "expanders shows 2.", ("wwid", "model"),
    doc="sd devices with the drive's `device/wwid`: 2 for a dual-ported drive reached through both its ports; "
        "exported where some drive of the same model on the host has more than one")
DRIVE_PATHS_EXPECTED = Family(
    "storpath_scsi_drive_paths_expected", GAUGE,
    "The most paths a drive of the same model has on this host; a drive with fewer has lost one.", ("wwid", "model"),
    doc="the most paths any drive of the same model has on this host (its peers in the shelf); `drive_paths` "
        "below it (StorageDrivePathMissing): a cable, expander or HBA port of that drive's other path is gone")

FAMILIES = (DMSETUP_UP, DEVICE_INFO, DEVICE_ACTIVE, SIZE, PATHS, PATHS_ACTIVE, PATHS_FAILED, PATHS_UNKNOWN, PATH_STATE, PATH_FAILED,
            PATH_FAILURES, NUMA_NODES, LINK_RATES, DRIVE_PATHS, DRIVE_PATHS_EXPECTED)


@register("multipath", default=True)
class MultipathCollector(Collector):
    """dm-multipath maps and dual-ported SCSI drives: paths, active and failed, their states (dmsetup in the background)."""

    families = FAMILIES
    reads = ("multipath_maps", "dmsetup")
    enriches = ("blocks", "pci", "sas_phys", "scsi_disks")
    config_defaults = {
        "interval": Duration(30),  # how often dmsetup status runs
        "timeout": Duration(10),  # a dmsetup taking longer is killed and reported
        "dmsetup_path": "dmsetup",  # looked up in PATH, then /usr/sbin and /sbin
    }

    def values(self, snapshot) -> Optional[Rows]:
        rows = Rows()
        status = snapshot.dmsetup
        drives = [d for d in drive_paths(snapshot.scsi_disks or ()) if d.peers_paths > 1]
        if not snapshot.multipath_maps and not drives and status is None:
            return None  # no dm-multipath and no dual-ported drive here: no family headers either
        if status is not None:
            rows.add(DMSETUP_UP, (), 1.0 if status.ok else 0.0)
        device_node: Dict[str, Optional[int]] = {}
        if snapshot.blocks is not None and snapshot.pci is not None:
            node_of = {d.address: d.static.numa_node for d in snapshot.pci}
            device_node = {b.name: node_of.get(b.pci_address) for b in snapshot.blocks if b.pci_address}
        device_rate = device_link_rates(snapshot.sas_phys or ())
        for found in snapshot.multipath_maps:
            wwid = map_wwid(found)
            ident = (found.device, wwid)
            rows.add(DEVICE_INFO, (found.device, found.name or "", found.uuid, wwid), 1)
            if found.suspended is not None:
                rows.add(DEVICE_ACTIVE, ident, 0.0 if found.suspended else 1.0)
            rows.add(SIZE, ident, found.size_bytes)
            judged = judge_map(found, status)
            count = map_count(judged)
            rows.add(PATHS, ident, count.paths)
            rows.add(PATHS_ACTIVE, ident, count.live)
            rows.add(PATHS_FAILED, ident, count.failed)
            rows.add(PATHS_UNKNOWN, ident, count.unknown)
            nodes: Set[int] = set()  # of the working paths' HBAs (dm-mpath spreads I/O over them all)
            rates: Set[float] = set()  # negotiated by the working paths that have one (SAS)
            for j in judged:
                path = j.path.device
                rows.add(PATH_STATE, (found.device, path, j.path.state or "unknown"), 1)
                if not j.unknown:  # a path of unknown state is neither failed nor serving
                    rows.add(PATH_FAILED, (found.device, path, j.basis), 1.0 if j.failed else 0.0)
                rows.add(PATH_FAILURES, (found.device, path), j.fail_count)
                if not j.failed:
                    node = device_node.get(path)
                    if node is not None:
                        nodes.add(node)
                    rate = device_rate.get(path)
                    if rate is not None:
                        rates.add(rate)
            if nodes:
                rows.add(NUMA_NODES, ident, len(nodes))
            if rates:
                rows.add(LINK_RATES, ident, len(rates))
        for drive in drives:
            rows.add(DRIVE_PATHS, (drive.wwid, drive.model), len(drive.devices))
            rows.add(DRIVE_PATHS_EXPECTED, (drive.wwid, drive.model), drive.peers_paths)
        return rows
