"""Every path to the data: NVMe subsystems and dm-multipath maps running on fewer paths than
they have (or on none), namespaces without an optimized ANA path, paths spread over NUMA
nodes under a policy that ignores them, maps over paths of different link rates, and
dual-ported drives reached through one path where their peers have two. Verdicts from
storpath.analysis.paths, as in rules/paths.yml."""

from __future__ import annotations

from storpath.analysis.paths import (crosses_numa, device_link_rates, drive_paths, judge_map, live_numa_nodes, map_count,
                                     map_link_rates, map_wwid, multipathed, optimized_paths, path_verdict,
                                     subsystem_count)
from storpath.collectors.base import SourceFailed
from storpath.report.findings import CRITICAL, INFO, WARNING, Facts, Finding, Outcome, register
from storpath.base.units import human_bits_per_second


@register("nvme_paths", collector="nvme_subsystem", order=45)
def check_subsystems(facts: Facts, out: Outcome) -> None:
    subsystems = facts.part("nvme_subsystems")
    for sub in subsystems:
        count = subsystem_count(sub)
        listing = ", ".join(f"{p.controller} {p.transport or '?'} {p.state}" for p in sub.paths) or "none listed"
        down = [p for p in sub.paths if not p.live]
        if count.lost:
            out.add(Finding(
                subject=sub.name, severity=CRITICAL, kind="paths.nvme_lost",
                title=f"no live path: all {count.paths} controllers of {sub.model or sub.nqn or sub.name} are down",
                evidence=f"paths: {listing}",
                impact="I/O to its namespaces queues (or fails once ctrl_loss_tmo runs out)",
                remedy=_nvme_remedy(down),
                related=tuple(sub.namespaces)))
        elif count.degraded:
            out.add(Finding(
                subject=sub.name, severity=WARNING, kind="paths.nvme_degraded",
                title=f"{count.live} of {count.paths} paths live; down: "
                      + ", ".join(f"{p.controller} ({p.state})" for p in down),
                evidence=f"paths: {listing}",
                impact="I/O runs over the remaining paths: less throughput on active/active paths, and no "
                       "redundancy left if one was the last spare",
                remedy=_nvme_remedy(down),
                related=tuple(p.controller for p in down)))
        for namespace, optimized in optimized_paths(sub).items():
            if optimized == 0:
                states = ", ".join(f"{p.controller}: {ns.ana_state}" for p in sub.paths for ns in p.namespace_paths
                                   if ns.namespace == namespace and ns.ana_state)
                out.add(Finding(
                    subject=namespace, severity=WARNING, kind="paths.no_optimized_path",
                    title="no live path in ANA state optimized",
                    evidence=f"ana_state per path: {states}",
                    impact="I/O goes through the array's non-owning controller (slower) or waits for an ANA "
                           "transition",
                    remedy="Restore the path to the owning controller, or move the namespace's ANA group on the "
                           "array; `nvme list-subsys` shows each path's ANA state."))
        if crosses_numa(sub):
            nodes = ", ".join(str(n) for n in sorted(live_numa_nodes(sub)))
            out.add(Finding(
                subject=sub.name, severity=INFO, kind="paths.numa_crossing",
                title=f"iopolicy {sub.iopolicy} spreads I/O over paths on NUMA nodes {nodes}",
                evidence=f"iopolicy {sub.iopolicy}; " + ", ".join(f"{p.controller} node {p.numa_node}"
                                                                  for p in sub.paths if p.numa_node is not None),
                impact="part of every CPU's I/O crosses the inter-socket link though a near path exists",
                remedy=f"`echo numa > /sys/class/nvme-subsystem/{sub.name}/iopolicy` (or the nvme_core.iopolicy "
                       "module parameter) picks the nearest path per node."))
    out.count(sum(1 for sub in subsystems if multipathed(sub)), "multipath NVMe subsystems")


def _nvme_remedy(down) -> str:
    fabric = [p for p in down if p.transport in ("tcp", "rdma", "fc")]
    if fabric:
        return ("Check the fabric between host and array for " + ", ".join(
            f"{p.controller} ({p.address or 'no address'})" for p in fabric)
            + "; `nvme list-subsys` shows each path; `nvme connect` restores one that was deleted.")
    return ("Check the controller's slot, cable and the kernel log (`dmesg | grep nvme`); a controller in "
            "state dead needs a reset or a reseat.")


@register("multipath", collector="multipath", order=46)
def check_maps(facts: Facts, out: Outcome) -> None:
    maps = facts.part("multipath_maps")
    try:
        status = facts.part("dmsetup")
    except SourceFailed:
        status = None
    try:
        rates = device_link_rates(facts.part("sas_phys"))
    except SourceFailed:
        rates = {}
    for found in maps:
        judged = judge_map(found, status)
        count = map_count(judged)
        label = f"{found.name or found.device} (WWID {map_wwid(found)})"
        listing = ", ".join(f"{j.path.device} {j.path.state or '?'}"
                            + ("" if path_verdict(j) == "active" else f" ({path_verdict(j)})")
                            for j in judged) or "none listed"
        failed = [j.path.device for j in judged if j.failed]
        basis = "dmsetup status" if any(j.basis == "dmsetup" for j in judged) else "device states (no dmsetup status)"
        remedy = (f"`multipath -ll {label}` shows each path; check the cable, HBA port or fabric of "
                  + ", ".join(failed) + "; `multipathd reinstate path ...` once it is back.")
        if count.lost:
            out.add(Finding(
                subject=found.device, severity=CRITICAL, kind="paths.map_lost",
                title=f"multipath map {label}: no working path of {count.paths}",
                evidence=f"paths ({basis}): {listing}", impact="I/O to the map queues or fails",
                remedy=remedy, related=tuple(failed)))
        elif count.unknown and not count.degraded:
            unknown = [j.path.device for j in judged if j.unknown]
            out.add(Finding(
                subject=found.device, severity=WARNING, kind="paths.map_unknown",
                title=f"multipath map {label}: state of {count.unknown} of {count.paths} paths unknown: "
                      + ", ".join(unknown),
                evidence=f"paths ({basis}): {listing}",
                impact="a path dm-mpath failed while its device says running cannot be told from a working one",
                remedy="Run `storpath check` as root with dmsetup installed (device-mapper's ioctls need "
                       f"CAP_SYS_ADMIN), or `multipath -ll {found.name or found.device}`.",
                related=tuple(unknown)))
        elif count.degraded:
            out.add(Finding(
                subject=found.device, severity=WARNING, kind="paths.map_degraded",
                title=f"multipath map {label}: {count.live} of {count.paths} paths working; failed: "
                      + ", ".join(failed) + (f"; unknown: {count.unknown}" if count.unknown else ""),
                evidence=f"paths ({basis}): {listing}",
                impact="I/O runs over the remaining paths: less throughput, and less or no redundancy",
                remedy=remedy, related=tuple(failed)))
        speeds = map_link_rates(judged, rates)
        if len(speeds) > 1:
            out.add(Finding(
                subject=found.device, severity=WARNING, kind="paths.mixed_link_rates",
                title=f"multipath map {label} over paths of different link rates",
                evidence=", ".join(f"{j.path.device} {human_bits_per_second(rates[j.path.device])}"
                                   for j in judged if j.path.device in rates),
                impact="the selector spreads I/O evenly: the fast paths wait for the slow one",
                remedy="Find why the slow path negotiated low (`storpath check` on its SAS PHY, the cable, the "
                       "expander port) and fix it."))
    out.count(len(maps), "multipath maps")
    try:
        disks = facts.part("scsi_disks")
    except SourceFailed:
        return
    for drive in drive_paths(disks):
        if drive.missing:
            out.add(Finding(
                subject=drive.devices[0], severity=WARNING, kind="paths.drive_path_missing",
                title=f"drive {drive.wwid} reached through {len(drive.devices)} path(s); its peers have "
                      f"{drive.peers_paths}",
                evidence=f"{drive.model}: sd devices {', '.join(drive.devices)}",
                impact="the drive lost the redundancy of its second port: one more cable, expander or HBA "
                       "fault takes it away",
                remedy="Check the cable and expander (or HBA port) on the missing side of this drive's slot; "
                       "`lsscsi -t` lists each drive's SAS addresses.",
                related=drive.devices))
