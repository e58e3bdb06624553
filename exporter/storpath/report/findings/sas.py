"""SAS PHY and SATA link findings: links negotiated below what both their ends do (the
Dell R900 backplane held SATA-II SSDs at 1.5 Gbit/s on 3.0 Gbit/s PHYs), and link errors.

The verdicts are the alerting rules' (rules/sas_sata.yml): a PHY with a device attached
whose negotiated rate is below the expected one (the lower of its hardware maximum and
the far end's capability, storpath.analysis.links), a PHY stepped all the way down to a
lowered programmed minimum (whatever the far end does), and a SATA link below the lower
of its port's limit and its drive's capability, or held down by libata
(storpath.analysis.sata.speed_limited). A SAS drive's capability comes from its Phy Control
And Discover mode page (readers.sas_pcd; privileged); a link whose far end's capability is
unknown is unverifiable, not slow; a PHY with nothing attached is not slow either.
PHYs with the same problem on one controller are reported together: eight identical
paragraphs help nobody.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from storpath.analysis.expectation import which_end
from storpath.analysis.links import (at_lowered_minimum, drive_phys, expander_capabilities, sas_expectation,
                                     sata_expectation)
from storpath.analysis.sata import speed_limited
from storpath.report.findings import INFO, WARNING, Facts, Finding, Outcome, natural_key, register
from storpath.readers.sas import NO_ERRORS_READ, SasPhy
from storpath.base.units import human_bits_per_second as gbit


def payload_mb(rate: float) -> str:
    """What a SAS/SATA line rate carries: 8b/10b coding up to 12 Gbit/s, 128b/150b at
    22.5 Gbit/s (SAS-4)."""
    efficiency = 128 / 150 if rate > 12.5e9 else 0.8
    return f"{rate * efficiency / 8 / 1e6:.0f} MB/s"


def _span(names: List[str]) -> str:
    names = sorted(names, key=natural_key)
    return names[0] if len(names) == 1 else (", ".join(names) if len(names) <= 3 else f"{names[0]} … {names[-1]}")


def _controller_of(facts: Facts, disks: Tuple[str, ...]) -> Optional[str]:
    for dev in facts.block_devices():
        if dev.name in disks and dev.pci_address:
            return dev.pci_address
    return None


@register("sas", collector="sas", order=30)
def check_sas(facts: Facts, out: Outcome) -> None:
    phys = facts.part("sas_phys")
    link_error_counts = facts.part("sas_errors")[0] if phys else {}
    groups: Dict[tuple, List[SasPhy]] = {}
    errors: Dict[Optional[str], List[Tuple[SasPhy, int]]] = {}
    expanders = expander_capabilities(phys)
    drives = drive_phys(phys, facts.snapshot.sas_drive_phys or {})
    for phy in phys:
        disks = phy.attached.block_devices if phy.attached else ()
        controller = _controller_of(facts, disks)
        counts = link_error_counts.get(phy.name, NO_ERRORS_READ)
        counted = [c for c in (counts.invalid_dwords, counts.running_disparity_errors, counts.loss_of_dword_sync,
                               counts.phy_reset_problems) if c]
        if counted and phy.attached is not None:
            errors.setdefault(controller, []).append((phy, sum(counted)))
        if phy.attached is None or phy.negotiated_rate is None or phy.hardware_maximum_rate is None:
            continue
        expectation = sas_expectation(phy, expanders, drives)
        at_minimum = at_lowered_minimum(phy)
        below = (expectation is not None and expectation.verifiable and expectation.expected is not None
                 and phy.negotiated_rate < expectation.expected)
        if not (at_minimum or below):
            continue
        expected = expectation.expected if expectation is not None and expectation.expected is not None \
            else phy.hardware_maximum_rate
        far_end = expectation.far_end if expectation is not None else None
        key = (controller, at_minimum, phy.negotiated_rate, expected, far_end, phy.hardware_maximum_rate,
               phy.minimum_rate, phy.maximum_rate, expectation)
        groups.setdefault(key, []).append(phy)

    for key, members in sorted(groups.items(), key=lambda item: natural_key(item[1][0].name)):
        controller, at_minimum, negotiated, expected, far_end, hw_max, minimum, maximum, expectation = key
        names = [p.name for p in members]
        disks = [d for p in members for d in (p.attached.block_devices if p.attached else ())]
        count = f"{len(members)} PHYs" if len(members) > 1 else f"PHY {names[0]}"
        verb = "negotiate" if len(members) > 1 else "negotiated"
        far = members[0].attached
        far_name = "the expander's PHYs" if far and far.name.startswith("expander-") else "the drive"
        evidence = (f"{_span(names)}{' (' + _span(disks) + ')' if disks else ''}: negotiated {gbit(negotiated)}; "
                    f"the PHYs do {_range(phy_hw_min(members), hw_max)}, programmed {_range(minimum, maximum)}; "
                    f"{far_name} {'do' if far_name.endswith('s') else 'does'} "
                    f"{gbit(far_end) if far_end is not None else 'an unknown rate'}"
                    + (f": expected {gbit(expected)} ({which_end(expectation)})" if far_end is not None
                       else ""))
        if at_minimum:
            remedy = (f"The link stepped down to the programmed minimum. Raise it: "
                      f"`echo {hw_max / 1e9:.1f} Gbit > /sys/class/sas_phy/PHY/minimum_linkrate` (or the HBA's "
                      "own tool, e.g. lsiutil), then check the rate holds; if it falls back, the backplane or "
                      "cable cannot carry it.")
        else:
            remedy = ("Both ends can do more: suspect the cable, backplane or expander, and check "
                      "maximum_linkrate is not set low.")
        out.add(Finding(
            subject=controller or names[0], severity=WARNING,
            kind="sas.phy_at_lowered_minimum" if at_minimum else "sas.phy_below_hardware_maximum",
            title=f"{count} {verb} {gbit(negotiated)}, both ends do {gbit(expected)}" if far_end is not None
            else f"{count} {verb} {gbit(negotiated)}, the hardware does {gbit(hw_max)}",
            evidence=evidence,
            impact=f"{payload_mb(negotiated)} per link instead of {payload_mb(expected)} "
                   f"({1 - negotiated / expected:.0%} lost)" + (f" for {_span(disks)}" if disks else ""),
            remedy=remedy,
            related=tuple(names) + tuple(disks)))

    for controller, bad in sorted(errors.items(), key=lambda item: natural_key(item[0] or "")):
        names = [p.name for p, _ in bad]
        out.add(Finding(
            subject=controller or names[0], severity=INFO, kind="sas.phy_errors",
            title=f"link errors counted on {len(bad)} SAS PHY{'s' if len(bad) > 1 else ''}",
            evidence="; ".join(f"{p.name}: {n}" for p, n in bad) + " (invalid dwords, disparity, "
                     "loss of sync, reset problems, since the HBA started)",
            impact="a few are normal at link start; a count that keeps rising means retries and resets",
            remedy="Watch whether they rise (storpath_sas_phy_* counters); if so, reseat or replace the cable "
                   "or backplane connector of those PHYs.",
            related=tuple(names)))
    out.count(sum(1 for p in phys if p.attached is not None), "SAS PHYs in use")


def _range(low: Optional[float], high: Optional[float]) -> str:
    if low is None or high is None:
        return f"{gbit(low)} to {gbit(high)}"
    return f"{low / 1e9:g} to {high / 1e9:g} Gbit/s"


def phy_hw_min(phys: List[SasPhy]) -> Optional[float]:
    return phys[0].hardware_minimum_rate


@register("sata", collector="sata", order=31)
def check_sata(facts: Facts, out: Outcome) -> None:
    links = facts.part("ata_links")
    used = 0
    for link in sorted(links, key=lambda l: natural_key(l.name)):
        if link.speed is None:
            continue
        used += 1
        disks = list(link.block_devices)
        subject = disks[0] if disks else link.name
        who = f"{link.name} ({', '.join(disks)})" if disks else link.name
        expectation = sata_expectation(link)
        if expectation.verifiable and expectation.expected is not None and link.speed < expectation.expected:
            out.add(Finding(
                subject=subject, severity=WARNING, kind="sata.link_below_hardware_limit",
                title=f"SATA link runs at {gbit(link.speed)}, port and drive both do {gbit(expectation.expected)}",
                evidence=f"{who}: sata_spd {gbit(link.speed)}, hw_sata_spd_limit {gbit(link.hardware_limit)}, "
                         f"sata_spd_limit {gbit(link.limit)}, the drive's IDENTIFY data (word 76) "
                         f"{gbit(link.device_capability.maximum)}: expected {gbit(expectation.expected)} "
                         f"({which_end(expectation)})",
                impact=f"{payload_mb(link.speed)} instead of {payload_mb(expectation.expected)}",
                remedy="Replace the cable or check the backplane, and remove any libata.force speed setting "
                       "from the kernel command line.",
                related=tuple(disks)))
        elif speed_limited(link):
            out.add(Finding(
                subject=subject, severity=WARNING, kind="sata.link_limited_by_libata",
                title=f"libata limited the SATA link to {gbit(link.limit)}",
                evidence=f"{who}: sata_spd {gbit(link.speed)}, sata_spd_limit {gbit(link.limit)} though the "
                         f"controller sets {'no limit' if link.hardware_limit is None else gbit(link.hardware_limit)}",
                impact=f"{payload_mb(link.speed)} at most; libata lowers the limit after link errors, so the "
                       "link was failing at the higher speed",
                remedy="Look for 'limiting SATA link speed' in the kernel log; replace the SATA cable (or move "
                       "the drive to another port), then reboot: the limit only resets with the link.",
                related=tuple(disks)))
        elif link.device_capability.maximum is None and link.hardware_limit is not None \
                and link.speed < link.hardware_limit:
            # Unverifiable (storpath_sata_link_verifiable 0): the drive may be the slower end.
            drive = f"/dev/{disks[0]}" if disks else "the drive"
            out.add(Finding(
                subject=subject, severity=INFO, kind="sata.link_below_port_drive_unknown",
                title=f"SATA link runs at {gbit(link.speed)} on a {gbit(link.hardware_limit)} port; the drive "
                      "does not say what it supports",
                evidence=f"{who}: sata_spd {gbit(link.speed)}, hw_sata_spd_limit {gbit(link.hardware_limit)}; "
                         "the drive's IDENTIFY data (word 76) lists no SATA generation",
                impact=f"{payload_mb(link.speed)}; {payload_mb(link.hardware_limit)} if the drive supports the "
                       "port's rate",
                remedy=f"Look up what the drive supports: `hdparm -I {drive}` (its Transport line lists the SATA "
                       "revisions it claims) or its datasheet; if it does the port's rate, replace the cable or "
                       "check the backplane.",
                related=tuple(disks)))
    out.count(used, "SATA links")
