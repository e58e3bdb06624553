"""Every path to the data: which paths of an NVMe subsystem or a dm-multipath map serve,
and what is wrong with the rest. Pure functions of the readers' records.

The verdicts, and what they compare with (decided here, once, for the collector, the rules,
`storpath check` and `storpath tree` alike):

- degraded: fewer live paths than paths the kernel lists now. A path the kernel still
  lists but cannot use (an NVMe controller connecting, resetting or dead; a map's path
  failed by dm-mpath, or a SCSI device offline) is the common, silent case: I/O flows over
  the others. A path that is gone entirely (a controller deleted after ctrl_loss_tmo, an sd
  device removed) leaves no trace in sysfs; a verdict from one snapshot cannot see it, so it
  is Prometheus's to see: the rules compare `paths` with its own maximum over the last day
  (StoragePathsMissing). Comparing with peers on the host (other maps of the same array)
  would call a deliberately single-pathed LUN degraded; the rules leave it out.
- lost: no live path at all while the kernel still lists the subsystem or map (I/O queues
  or fails).
- no optimized path: a namespace whose paths report ANA states, none of them optimized on
  a live controller: I/O goes through the array's non-owning controller (slower) or nowhere.
- NUMA crossing: live paths on more than one NUMA node while the I/O policy spreads I/O
  over all of them (round-robin, queue-depth; dm-mpath's selectors never look at NUMA):
  part of the I/O goes through the far socket although a near path exists. iopolicy `numa`
  makes the kernel pick the nearest path per node and is fine.
- mixed link rates: a map whose paths negotiated different SAS link rates: the round-robin
  selector paces the fast paths to the slow one.
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from storpath.base.records import datarecord
from storpath.readers.dm_multipath import SERVING_STATES, DmsetupStatus, MapPath, MultipathMap, StatusPath
from storpath.readers.nvme_subsystem import NvmeSubsystem
from storpath.readers.sas import SasPhy
from storpath.readers.scsi_paths import ScsiDisk

# iopolicies that send I/O down every live path whatever the submitting CPU's node.
SPREADING_POLICIES = frozenset({"round-robin", "queue-depth"})


@datarecord(frozen=True)
class PathCount:
    """The paths of one NVMe subsystem or dm-multipath map: how many, how many live, how many unknown."""

    paths: int
    live: int
    unknown: int = 0  # paths whose state nothing could tell (a map's path without dmsetup's verdict)

    @property
    def failed(self) -> int:
        return self.paths - self.live - self.unknown

    @property
    def degraded(self) -> bool:
        return self.failed > 0

    @property
    def lost(self) -> bool:
        """Every path known failed: a map with paths of unknown state is not called lost."""
        return self.paths > 0 and self.failed == self.paths


@datarecord(frozen=True)
class JudgedPath:
    """One path of a dm-multipath map with the verdict on it."""

    path: MapPath
    failed: bool
    basis: str  # "dmsetup": the map's own A/F flag; "device_state": the device's state (no dmsetup)
    unknown: bool = False  # no dmsetup verdict and a device that says it serves: dm-mpath may have failed it
    fail_count: Optional[int] = None  # times dm-mpath failed the path (dmsetup only)
    group: Optional[int] = None
    group_state: Optional[str] = None  # A in use, E enabled, D disabled


def multipathed(subsystem: NvmeSubsystem) -> bool:
    """A subsystem worth showing as one: more than one path, a fabrics path, or a path down.
    A local single-port drive is a subsystem of one PCIe controller, already in the PCI tree."""
    return len(subsystem.paths) > 1 or any(p.transport != "pcie" or not p.live for p in subsystem.paths)


def subsystem_count(subsystem: NvmeSubsystem) -> PathCount:
    return PathCount(len(subsystem.paths), subsystem.live_paths)


def judge_map(found: MultipathMap, status: Optional[DmsetupStatus]) -> Tuple[JudgedPath, ...]:
    """Each path of `found` and whether it is failed: dm-mpath's own flag where dmsetup
    status named the path. Without it the device's state counts what it can: a device not
    running (offline, blocked...) is failed, one that says running is unknown, never active
    (dm-mpath fails paths whose device still reads running: a path checker's verdict, a
    fabric that drops I/O). The
    paths are found by device number under the map's name, else under any name: a map
    renamed between dmsetup's run and this read keeps dm-mpath's verdict."""
    named: Dict[str, StatusPath] = {}
    anywhere: Dict[str, StatusPath] = {}
    if status is not None and status.ok:
        named = {p.devno: p for p in status.maps.get(found.name, ())} if found.name is not None else {}
        anywhere = status.by_devno
    judged = []
    for path in found.paths:
        seen = (named.get(path.devno) or anywhere.get(path.devno)) if path.devno else None
        if seen is not None:
            judged.append(JudgedPath(path, failed=not seen.active, basis="dmsetup", fail_count=seen.fail_count,
                                     group=seen.group, group_state=seen.group_state))
        else:
            serving = path.state in SERVING_STATES
            judged.append(JudgedPath(path, failed=not serving, basis="device_state", unknown=serving))
    return tuple(judged)


def map_wwid(found: MultipathMap) -> str:
    """The map's stable identity: its dm uuid without multipathd's `mpath-` prefix (the LUN's
    WWID, as `multipath -ll` shows it); the uuid itself where it has another form."""
    return found.uuid[len("mpath-"):] if found.uuid.startswith("mpath-") else found.uuid


def path_verdict(judged: JudgedPath) -> str:
    """"active", "failed" or "unknown", as `check` and `tree` say it."""
    return "unknown" if judged.unknown else "failed" if judged.failed else "active"


def map_count(judged: Sequence[JudgedPath]) -> PathCount:
    return PathCount(len(judged), sum(1 for j in judged if not j.failed and not j.unknown),
                     sum(1 for j in judged if j.unknown))


def optimized_paths(subsystem: NvmeSubsystem) -> Dict[str, int]:
    """Per namespace whose paths report ANA states: its live paths in state optimized
    (0: no optimized path)."""
    counts: Dict[str, int] = {}
    for path in subsystem.paths:
        for ns in path.namespace_paths:
            if ns.ana_state is None:
                continue
            counts[ns.namespace] = counts.get(ns.namespace, 0) + (path.live and ns.ana_state == "optimized")
    return dict(sorted(counts.items()))


def live_numa_nodes(subsystem: NvmeSubsystem) -> Set[int]:
    return {p.numa_node for p in subsystem.paths if p.live and p.numa_node is not None}


def crosses_numa(subsystem: NvmeSubsystem) -> bool:
    """Live paths on several NUMA nodes under a policy that spreads I/O over them all."""
    return len(live_numa_nodes(subsystem)) > 1 and subsystem.iopolicy in SPREADING_POLICIES


def map_link_rates(judged: Iterable[JudgedPath], device_rate: Mapping[str, float]) -> Set[float]:
    """Negotiated link rates (bits/s) of a map's working paths that have one (SAS)."""
    return {device_rate[j.path.device] for j in judged if not j.failed and j.path.device in device_rate}


@datarecord(frozen=True)
class DrivePaths:
    """One SCSI drive (one WWID) and the sd devices through which the host reaches it."""

    wwid: str
    model: str
    devices: Tuple[str, ...]
    peers_paths: int  # the most paths a drive of the same model has on this host

    @property
    def missing(self) -> int:
        return max(self.peers_paths - len(self.devices), 0)


def device_link_rates(sas_phys: Iterable[SasPhy]) -> Dict[str, float]:
    """Block device -> the negotiated rate (bits/s) of the SAS PHY facing its end device."""
    rates: Dict[str, float] = {}
    for phy in sas_phys:
        if phy.attached is not None and phy.negotiated_rate is not None:
            rates.update({disk: phy.negotiated_rate for disk in phy.attached.block_devices})
    return rates


def drive_paths(disks: Iterable[ScsiDisk]) -> List[DrivePaths]:
    """Group sd devices by WWID: a dual-ported drive reached through two HBAs or expanders
    shows as two sd devices with one WWID. A drive reached through fewer paths than its
    same-model (vendor and model) peers on the host has lost one (a cable, an expander, an
    HBA port)."""
    by_wwid: Dict[str, List[str]] = {}
    model_of: Dict[str, str] = {}
    for disk in disks:
        if not disk.wwid:
            continue
        by_wwid.setdefault(disk.wwid, []).append(disk.name)
        model_of[disk.wwid] = " ".join(filter(None, (disk.vendor, disk.model)))
    most: Dict[str, int] = {}
    for wwid, devices in by_wwid.items():
        most[model_of[wwid]] = max(most.get(model_of[wwid], 0), len(devices))
    return [DrivePaths(wwid, model_of[wwid], tuple(sorted(devices)), most[model_of[wwid]])
            for wwid, devices in sorted(by_wwid.items())]
