"""Alignment findings: partitions and md data that do not start on the physical block (or
optimal I/O) boundary of the disk below. The verdict is storpath.analysis.alignment.judge,
the one behind storpath_block_partition_misaligned."""

from __future__ import annotations

from storpath.analysis.alignment import PHYSICAL_BLOCK, judge
from storpath.report.findings import INFO, WARNING, Facts, Finding, Outcome, natural_key, register

_REALIGN = ("A partition cannot be moved in place: move the data off (or rely on a redundant copy), delete "
            "and recreate the partition at a 1 MiB boundary (`sfdisk`, `parted -a optimal` and `gdisk` start at "
            "sector 2048 by default), then restore or rebuild.")


def _verdict_finding(subject: str, where: str, v, related) -> Finding:
    physical = v.boundary == PHYSICAL_BLOCK
    return Finding(
        subject=subject, severity=WARNING if physical else INFO,
        kind="alignment.physical_block" if physical else "alignment.optimal_io",
        title=f"{where} starts {v.off_by_bytes} bytes past a {v.boundary_bytes}-byte "
              f"{'physical block' if physical else 'optimal I/O'} boundary",
        evidence=f"starts at byte {v.start_bytes} (sector {v.start_bytes // 512})",
        impact="every write spans two physical blocks: the drive reads, modifies and writes both" if physical
        else "writes of the optimal I/O size straddle two units (stripe, indirection unit): partial writes",
        remedy=_REALIGN, related=related)


@register("alignment", collector="alignment", order=60)
def check(facts: Facts, out: Outcome) -> None:
    found = facts.part("alignment")
    for p in sorted(found.partitions, key=lambda p: natural_key(p.device)):
        for v in judge(p.start_bytes, p.disk_limits, p.disk_alignment_offset):
            if v.misaligned:
                out.add(_verdict_finding(p.device, f"partition {p.device} of {p.disk}", v, (p.device, p.disk)))
    for m in found.md_members:
        for v in judge(m.data_start_bytes, m.limits):
            if v.misaligned:
                out.add(_verdict_finding(m.array, f"{m.array}'s data on {m.member}", v, (m.member, m.disk)))
    out.count(len(found.partitions), "partitions")
