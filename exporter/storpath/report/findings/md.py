"""md RAID findings: arrays running degraded, faulty members, a resync, recovery or
check in progress or waiting, mismatches found by the last check, and arrays whose
members sit on different NUMA nodes. Verdicts as in rules/md.yml and rules/numa.yml.
An IMSM/DDF container (level "container") holds metadata and disks, not data: it is
never degraded (its volumes are arrays of their own and are judged as such)."""

from __future__ import annotations

from storpath.analysis.md import member_placement
from storpath.report.findings import CRITICAL, INFO, WARNING, Facts, Finding, Outcome, natural_key, register


@register("md", collector="md", order=50)
def check(facts: Facts, out: Outcome) -> None:
    arrays = facts.part("md")
    disk_address = {b.name: b.pci_address for b in facts.block_devices()}
    address_node = {d.address: d.static.numa_node for d in facts.pci_devices()}
    placement = member_placement(arrays, disk_address, address_node)
    for array in sorted(arrays, key=lambda a: natural_key(a.name)):
        members = sorted(array.members, key=lambda m: (m.slot is None, m.slot or 0, m.name))
        listing = ", ".join(f"{m.name} [{','.join(m.state) or '?'}]" for m in members) or "none listed"
        level = array.level or "not started"
        if array.degraded:  # never for a container (readers.md)
            out.add(Finding(
                subject=array.name, severity=CRITICAL, kind="md.degraded",
                title=f"{level} array degraded: {array.degraded} of {array.raid_disks} members missing",
                evidence=f"degraded {array.degraded}, raid_disks {array.raid_disks}; members: {listing}",
                impact="it runs without (part of) its redundancy, and reads that needed the missing member "
                       "are rebuilt from the others: slower, and one more failure loses data",
                remedy=f"Replace the failed disk and add it: `mdadm --manage /dev/{array.name} --add /dev/NEW` "
                       "(after `--remove` of the faulty one); watch the recovery in /proc/mdstat.",
                related=tuple(m.disk for m in members)))
        for member in members:
            if "faulty" in member.state:
                out.add(Finding(
                    subject=array.name, severity=WARNING, kind="md.member_faulty",
                    title=f"member {member.name} is marked faulty",
                    evidence=f"{member.name}: state {','.join(member.state)}",
                    impact="it carries no I/O; the array runs on the others",
                    remedy=f"`mdadm --manage /dev/{array.name} --remove /dev/{member.name}`, check or replace "
                           "the disk (smartctl -a), then --add it back.",
                    related=(member.disk,)))
        action = array.sync_action
        if array.sync_waiting:
            out.add(_waiting(array))
        elif action and action not in ("idle", "frozen"):
            done = ""
            if array.sync_completed:
                finished, total = array.sync_completed
                done = f", {finished / total:.1%} done" if total else ""
            out.add(Finding(
                subject=array.name, severity=INFO, kind="md.sync_running",
                title=f"{action} in progress{done}",
                evidence=f"sync_action {action}" + (f", sync_completed {array.sync_completed[0]} / "
                                                    f"{array.sync_completed[1]} sectors" if array.sync_completed else ""),
                impact="the array's throughput is shared with the sync until it finishes",
                remedy="Let it finish; measure performance afterwards."))
        elif array.mismatch_count:
            out.add(Finding(
                subject=array.name, severity=WARNING, kind="md.mismatches",
                title=f"the last check found {array.mismatch_count} mismatched sectors",
                evidence=f"mismatch_cnt {array.mismatch_count} (512-byte sectors)",
                impact="copies or parity disagree: a read may return either version",
                remedy=f"Find the cause (a failing disk, a crash during writes) and run "
                       f"`echo repair > /sys/block/{array.name}/md/sync_action`; raid1 holding swap can show a "
                       "few benign ones."))
        place = placement.get(array.name)
        if place is not None and len(place.numa_nodes) > 1:
            out.add(Finding(
                subject=array.name, severity=INFO, kind="md.spans_numa_nodes",
                title=f"members on {len(place.numa_nodes)} NUMA nodes",
                evidence=f"member nodes {', '.join(str(n) for n in sorted(place.numa_nodes))}; members: {listing}",
                impact="every stripe crosses the inter-socket link for part of its I/O",
                remedy="Build arrays from drives on one node where throughput matters."))
    out.count(len(arrays), "md arrays")


def _waiting(array) -> Finding:
    """A sync the kernel holds back: resync=DELAYED (another array on the same disks
    syncs first) or resync=PENDING (not started: no MD_RECOVERY_RUNNING)."""
    if array.sync_waiting == "DELAYED":
        title = "resync waiting for another array on the same disks"
        evidence = "sync_completed delayed (/proc/mdstat: resync=DELAYED)"
        impact = "none yet: it starts when the other array's sync finishes, and then shares the disks' throughput"
    else:
        title = "resync pending, not started"
        evidence = "/proc/mdstat: resync=PENDING" + (f"; array_state {array.array_state}" if array.array_state else "")
        impact = "none yet: the array is not known to be in sync; the resync starts once the array is written " \
                 "(auto-read-only) or unfrozen"
    if array.sync_action:
        evidence += f"; sync_action {array.sync_action}"
    return Finding(
        subject=array.name, severity=INFO, kind="md.sync_waiting", title=title, evidence=evidence, impact=impact,
        remedy="Nothing to do; measure performance after the sync has run.")
