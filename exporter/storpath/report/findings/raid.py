"""Drives behind hardware RAID controllers: links below both ends, links that cannot be
judged (with their rate and what is unknown), volumes degraded or rebuilding, write cache
fallen to write-through, batteries. The judgement is storpath.analysis.raid's, the one
behind storpath_raid_drive_expected_link_rate_transfers_per_second and the alerts in
rules/raid.yml. The tools' pass (or the read of their captured outputs) is the snapshot's: run
with the raid collector's paths and timeout when the snapshot is taken
(storpath.scrape.slow.SlowRunner, read now), or the collector's last when it is a scrape's."""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from storpath.analysis.raid import (FAR_END_UNKNOWN, PORT_LIMIT_UNKNOWN, RATE_IS_EXPANDER_LINK, below_expected,
                                    cache_fell_back,
                                    judged, off_strip, own_link_rate, unverifiable_reason, volume_members)
from storpath.collectors.base import SourceFailed
from storpath.report.findings import CRITICAL, INFO, WARNING, Facts, Finding, Outcome, natural_key, register
from storpath.readers.raid import RaidRun

def _gbit(rate: Optional[float]) -> str:
    return "an unknown rate" if rate is None else f"{rate / 1e9:g} Gbit/s"


def raid_run(facts: Facts) -> Optional[RaidRun]:
    """The RAID tools' pass in the snapshot: the raid collector's last when the snapshot is a
    scrape's, else one run now (storpath.scrape.slow.SlowRunner, read now). SourceFailed when it
    could not be read (the tools ran past the check's deadline)."""
    return facts.part("raid").run


_REMEDIES = {
    FAR_END_UNKNOWN: "Where the drives are SATA, smartctl -j -d sat+megaraid,N (or -d cciss,N) through the controller "
                     "gives each drive's own capability; capture it as smartctl/<controller>-<N>.json.",
    PORT_LIMIT_UNKNOWN: "The controller's port rate is in its data sheet (SAS 3, 6 or 12 Gbit/s); a drive below its "
                        "own capability on a port that does more is held back by the backplane or cable.",
    RATE_IS_EXPANDER_LINK: "Nothing to do unless the volume is slow: the expander's own PHY rates (smp_discover "
                           "through the HBA) say what each drive negotiated.",
}


def _slots(slots: List[str]) -> str:
    slots = sorted(slots, key=natural_key)
    return ", ".join(slots) if len(slots) <= 6 else f"{', '.join(slots[:5])} and {len(slots) - 5} more"


@register("raid", collector="raid", order=35)
def check(facts: Facts, out: Outcome) -> None:
    try:
        run = raid_run(facts)
    except SourceFailed as exc:
        out.add(Finding(
            subject="raid", severity=WARNING, kind="raid.unreadable", title="the RAID tools could not be read",
            evidence=str(exc), impact="the drives, volumes and cache behind the RAID controllers are not judged",
            remedy="Run the tool by hand as root (storcli /call show all, ssacli ctrl all show config detail, "
                   "arcconf GETCONFIG 1) to see why it is slow; collectors.raid.timeout bounds each command."))
        return
    if run is None or run.empty:
        return
    for tool, status in sorted(run.tools.items()):
        if not status.ok:
            out.add(Finding(
                subject=tool, severity=WARNING, kind="raid.tool_failed", title=f"{tool} could not be read",
                evidence=status.reason or "failed",
                impact="the drives, volumes and cache behind its controllers are not judged",
                remedy=f"Install {tool} (or set collectors.raid.{tool}_path) and run it as root by hand to see why."))
    inventory = run.inventory
    for ctrl in inventory.controllers:
        if ctrl.battery in ("failed", "missing", "degraded"):
            out.add(Finding(
                subject=ctrl.name, severity=WARNING, kind="raid.battery_failed",
                title=f"cache battery {ctrl.battery}", evidence=f"{ctrl.model or ctrl.name}: {ctrl.battery_detail or ctrl.battery}",
                impact="without a working battery or CacheVault the controller stops caching writes (write-through): "
                       "writes are several times slower",
                remedy="Replace the battery or CacheVault module; the cache returns to write-back once it is charged."))
        facts.add_label(ctrl.name, " ".join(filter(None, (ctrl.model, ctrl.pci_address))))
        if ctrl.pci_address:
            facts.set_group(ctrl.name, ctrl.pci_address)
    for volume in inventory.volumes:
        subject = f"{volume.controller} volume {volume.id}"
        members = volume_members(volume, inventory.drives)
        where = f" ({volume.device})" if volume.device else ""
        if volume.state in ("degraded", "failed", "rebuilding"):
            bad = [f"{d.slot} {d.state_word or d.state}" for d in members if d.state != "online"]
            progress = f", {volume.operation} {volume.progress:.0%} done" if volume.progress is not None else ""
            out.add(Finding(
                subject=subject, severity=WARNING if volume.state == "rebuilding" else CRITICAL,
                kind=f"raid.volume_{volume.state}", title=f"{volume.level or 'RAID'} volume{where} is {volume.state}",
                evidence=f"state {volume.state_word or volume.state}{progress}" + (f"; {', '.join(bad)}" if bad else ""),
                impact="it runs without part of its redundancy; reads of the missing drive's data are rebuilt from "
                       "the others, and a rebuild takes the drives' bandwidth",
                remedy="Replace the failed drive and let the rebuild finish (storcli /cX/eY/sZ show rebuild, "
                       "ssacli ctrl slot=N ld all show, arcconf GETSTATUS N).",
                related=(volume.device,) if volume.device else ()))
        if cache_fell_back(volume):
            out.add(Finding(
                subject=subject, severity=WARNING, kind="raid.cache_write_through",
                title=f"volume{where} fell from write-back to write-through",
                evidence="configured write-back, writing through now" + (
                    f"; battery {next((c.battery for c in inventory.controllers if c.name == volume.controller), '')}"),
                impact="every write waits for the drives: several times slower for small writes",
                remedy="Fix the battery or CacheVault (or wait for its learn cycle to end); the controller returns to "
                       "write-back by itself.",
                related=(volume.device,) if volume.device else ()))
    _strip_alignment(facts, run, out)
    unverifiable: Dict[Tuple[str, str], List] = {}
    for drive, ctrl, expectation in judged(inventory.drives, inventory.controllers):
        if below_expected(drive, expectation):
            port = ctrl.port_rate if ctrl else None
            out.add(Finding(
                subject=f"{drive.controller} {drive.slot}", severity=WARNING, kind="raid.drive_link_below_expected",
                title=f"drive link at {_gbit(drive.negotiated_rate)}, both ends do {_gbit(expectation.expected)}",
                evidence=f"{drive.interface or ''} {drive.model or ''} in {drive.slot}: negotiated "
                         f"{_gbit(drive.negotiated_rate)}; drive {_gbit(drive.capability)} ({drive.capability_source}), "
                         f"controller port {_gbit(port)}".strip(),
                impact=f"the drive transfers at {drive.negotiated_rate / expectation.expected:.0%} of its link's "
                       "capability; a volume is as fast as its slowest member",
                remedy="Reseat the drive, check the backplane and cable of that slot; the controller's event log "
                       "(storcli /cX show events) names link resets."))
        elif not expectation.verifiable:
            unverifiable.setdefault((drive.controller, expectation.reason), []).append((drive, expectation))
    for (controller, reason), entries in sorted(unverifiable.items()):
        by_rate: Dict[str, List[str]] = {}
        for drive, _ in entries:
            by_rate.setdefault(_gbit(own_link_rate(drive)), []).append(drive.slot)
        drive, expectation = entries[0]
        known = "; ".join(f"{_slots(slots)} at {rate}" for rate, slots in sorted(by_rate.items()))
        capability = sorted({_gbit(d.capability) for d, _ in entries if d.capability is not None})
        out.add(Finding(
            subject=controller, severity=INFO, kind="raid.drive_link_unverifiable",
            title=f"{len(entries)} drive link{'s' if len(entries) > 1 else ''} not verifiable",
            evidence=known + (f"; drive capability {', '.join(capability)}" if capability else "")
            + f"; {unverifiable_reason(drive, expectation)}",
            impact="a link held below what both ends can do would not be seen",
            remedy=_REMEDIES.get(reason, _REMEDIES[FAR_END_UNKNOWN])))
    out.count(len(inventory.drives), "drives behind RAID controllers")
    out.count(len(inventory.volumes), "RAID volumes")


def _strip_alignment(facts: Facts, run: RaidRun, out: Outcome) -> None:
    """Partitions on a RAID volume's block device that start off its strip."""
    try:
        partitions = facts.part("alignment").partitions
    except SourceFailed:
        return
    for volume in run.inventory.volumes:
        if not volume.device or not volume.strip_bytes:
            continue
        for part in partitions:
            if part.disk == volume.device and off_strip(part.start_bytes, volume.strip_bytes):
                out.add(Finding(
                    subject=part.device, severity=WARNING, kind="raid.partition_off_strip",
                    title=f"partition starts off the RAID volume's {volume.strip_bytes // 1024} KiB strip",
                    evidence=f"{part.device} starts at byte {part.start_bytes} of {volume.device} "
                             f"({volume.level or 'RAID'} volume {volume.id} on {volume.controller}, strip "
                             f"{volume.strip_bytes} bytes)",
                    impact="writes of a strip's size span two drives; on parity RAID a full-stripe write becomes a "
                           "read-modify-write",
                    remedy="Recreate the partition at a multiple of the strip (1 MiB is one for strips up to 1 MiB)."))
