"""PCIe findings: links trained below what both ends support, devices placed behind a
slower port, links down with the device still present, AER errors, and the hop that
limits a device's path. All verdicts come from storpath.analysis.pcie.analyse, the
function the `pcie` collector exports (`storpath_pcie_expected_link_*`,
`storpath_pcie_path_bottleneck_bandwidth_bytes_per_second`).

A link is reported once, on its device end (the endpoint or a switch's upstream port),
naming the port above it. Links on a storage path (a storage controller, a device with
block devices behind it, or a bridge above one) are judged strictly; the same fault on
a device outside the watched classes is reported as info only. A GPU's or accelerator's
link trained low is info too: one reading cannot tell an idle GPU's power saving from a
fault (the exporter samples it while busy, collectors/gpu.py and rules/gpu.yml).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Set

from storpath.analysis.demand import NETWORK_PORTS, Demand, bottlenecked
from storpath.analysis import platform
from storpath.analysis.observed import follows_load
from storpath.analysis.pcie import LinkAnalysis
from storpath.analysis.throughput import path_hops, shared_tree_bandwidth
from storpath.readers.pci import DOWNSTREAM_FACING, PciDevice
from storpath.analysis.virtual import REASON_TEXT
from storpath.report.findings import CRITICAL, INFO, WARNING, Facts, Finding, Outcome, natural_key, pci_kind, register
from storpath.base.units import human_bytes_per_second, human_transfers

# Base classes judged strictly (rules/config/thresholds.yml pcie.watched_classes).
WATCHED_BASE_CLASSES = (0x01, 0x02, 0x03, 0x12)
_GENERATIONS = {2.5e9: 1, 5e9: 2, 8e9: 3, 16e9: 4, 32e9: 5, 64e9: 6}

# analysis.pcie.CAP_CAUSES in words, and what to do about each.
CAP_CAUSE_TEXT = {
    "bandwidth_controller": "by the kernel's PCIe bandwidth controller, a thermal cooling device",
    "unknown": "target set below capability, cause unknown: firmware, a driver, a tool or a kernel quirk",
}
CAP_CAUSE_REMEDY = {
    "bandwidth_controller": "The kernel lowered the link's speed to cool the system: see "
                            "/sys/class/thermal/cooling_device*/ of type PCIe_Port_Link_Speed_<port> and the "
                            "thermal zone that drives it.",
    "unknown": "Something set the port's Target Link Speed below what both ends support: look in the kernel log "
               "for a link retrain quirk (\"retraining failed\", \"2.5GT/s\"), check the BIOS setting of the "
               "slot's generation and any tool that wrote Link Control 2 (setpci).",
}


def link_text(speed: Optional[float], width: Optional[int]) -> str:
    """'16 GT/s (Gen4) x4'."""
    gen = _GENERATIONS.get(speed) if speed is not None else None
    text = human_transfers(speed) + (f" (Gen{gen})" if gen else "")
    return f"{text} x{width}" if width is not None else text


def _gbs(value: Optional[float]) -> str:
    return human_bytes_per_second(value)


def _lost(expected: Optional[float], available: Optional[float], what: str = "of link") -> str:
    """'7.88 GB/s of link, 3.94 GB/s available (half lost)'."""
    if expected is None or available is None:
        return "the link's bandwidth is reduced"
    text = f"{_gbs(expected)} {what}, {_gbs(available)} available"
    if expected > 0:
        share = 1 - available / expected
        text += " (half lost)" if abs(share - 0.5) < 0.01 else f" ({share:.0%} lost)"
    return text


def _for(blocks: List[str]) -> str:
    if not blocks:
        return ""
    if len(blocks) == 1:
        return f" for {blocks[0]}"
    return f" shared by {len(blocks)} block devices ({', '.join(blocks)})"


def _min_width(device: PciDevice, port: Optional[PciDevice]) -> str:
    widths = [w for w in (device.static.max_link_width, port.static.max_link_width if port else None) if w]
    return str(min(widths)) if widths else "?"


def watched(facts: Facts) -> Set[str]:
    """Device ends judged strictly, as the alerting rules select them
    (rules/config/thresholds.yml `pcie.watched_classes`, `watch_switch_uplinks`): storage
    (class 0x01) and network (0x02) controllers, GPUs (0x03) and accelerators (0x12), switch
    upstream ports, and every device end with block devices behind it."""
    chosen: Set[str] = set()
    for device in facts.pci_devices():
        code = device.static.class_code
        if (code is not None and code >> 16 in WATCHED_BASE_CLASSES) or device.port_type == "upstream_port":
            chosen.add(device.address)
    chosen |= {b.pci_address for b in facts.block_devices() if b.pci_address}
    return chosen


def _device_end(link: LinkAnalysis, device: PciDevice) -> bool:
    return link.partner is not None and device.port_type not in DOWNSTREAM_FACING


@register("pcie", collector="pcie", order=10)
def check(facts: Facts, out: Outcome) -> None:
    devices = facts.pci_by_address()
    links = facts.pcie_links()
    storage = watched(facts)
    demands = facts.pcie_demands()
    reported_links: Set[str] = set()
    hop_findings: Dict[str, str] = {}  # address -> kind of the finding about its own link

    for address in sorted(links, key=natural_key):
        link, device = links[address], devices[address]
        if link.partner is None:
            continue
        # A link is known by its port: the functions of one device (a dual-port NIC) share it.
        key = link.partner if _device_end(link, device) else address
        if not _device_end(link, device):
            # The port end: only speak for it when the device end cannot (it is not listed).
            if link.partner in links:
                continue
        if key in reported_links:
            continue
        reported_links.add(key)
        port = devices.get(link.partner)
        blocks = facts.blocks_below(address)
        subject_is_storage = address in storage

        def s(severity: str) -> str:
            return severity if subject_is_storage else INFO

        ends = f"device {link_text(device.static.max_link_speed, device.static.max_link_width)}"
        if port is not None:
            ends += f", port {port.address} {link_text(port.static.max_link_speed, port.static.max_link_width)}"

        asleep = device.asleep or (port.asleep if port is not None else None)
        if asleep:
            read = device.current_link_speed is not None or device.current_link_width is not None
            last = link_text(device.current_link_speed, device.current_link_width)
            out.add(Finding(
                subject=address, severity=INFO, kind="pcie.device_suspended",
                title=f"PCIe device sleeps ({asleep}): its link is not read, so as not to wake it",
                evidence=(f"power/runtime_status and power_state say it sleeps; its link was {last} when last read "
                          f"awake" if read else "power/runtime_status and power_state say it sleeps; its "
                          "link has not been read awake since storpath started") + f" ({ends})",
                impact="none while it sleeps: its link trains again when it wakes, and is judged then",
                remedy="None needed. To judge its link now, wake it (use the device, or set its "
                       "power/control to on for a while) and run storpath check again.",
                related=tuple(blocks)))
            hop_findings[address] = "pcie.device_suspended"
            continue

        if link.link_down:
            out.add(Finding(
                subject=address, severity=s(CRITICAL), kind="pcie.link_down",
                title="PCIe link is down though the device is still listed",
                evidence=f"link width 0 (down); it should train to "
                         f"{link_text(link.speed.expected, link.expected_width)} ({ends})",
                impact=f"no bandwidth at all{_for(blocks)}: "
                       f"{_gbs(link.expected_bandwidth)} of link expected",
                remedy="Look for 'Link Down', DPC or AER messages in the kernel log (dmesg). Reseat the device "
                       "and any riser or cable; if the link comes back, `echo 1 > /sys/bus/pci/rescan` or a "
                       "reboot brings the device back.",
                related=tuple(blocks)))
            hop_findings[address] = "pcie.link_down"
            continue

        low_speed, low_width = link.speed_below_expected, link.width_below_expected
        if low_speed or low_width:
            current = link_text(device.current_link_speed, device.current_link_width)
            expected = link_text(link.speed.expected, link.expected_width)
            both = "both ends support" if link.speed.verifiable else "the device itself supports"
            if not link.speed.verifiable:  # behind an emulated port: the device's own registers (analysis.virtual)
                ends = f"device {link_text(device.static.max_link_speed, device.static.max_link_width)}; " \
                       + REASON_TEXT.get(link.speed.reason, "the port's numbers are not hardware")
            if low_speed and low_width:
                title = f"PCIe link trained at {current}, {both} {expected}"
            elif low_speed:
                title = (f"PCIe link trained at {link_text(device.current_link_speed, None)}, "
                         f"{both} {link_text(link.speed.expected, None)}")
            else:
                title = f"PCIe link trained at x{device.current_link_width}, {both} x{link.expected_width}"
            remedies = []
            if low_width:
                remedies.append("Fewer lanes than both ends support: check the slot's bifurcation setting in the "
                                "BIOS (x4x4x4x4 for a four-drive carrier card, x8x8 for two), check that no "
                                "neighbouring slot or M.2 socket shares these lanes, and reseat the card or riser.")
            if low_speed:
                remedies.append("A lower speed than both ends support is a signal problem or a BIOS setting: "
                                "check the slot's PCIe generation setting in the BIOS (Auto or "
                                f"{link_text(link.speed.expected, None)}), reseat the device, riser or cable, or "
                                "try another slot.")
            aer = _aer_text(device, port)
            if follows_load(device.static.class_code):
                remedies.append("A GPU or accelerator trains its link down when idle: judge it while it works "
                                "(the exporter samples it between scrapes: rules/gpu.yml).")
            out.add(Finding(
                # The severity of the alert the rules fire for this link (PcieLinkSpeedBelowExpected,
                # PcieLinkWidthBelowExpected: warning; tests/rules/test_every_machine.py).
                subject=address, severity=INFO if follows_load(device.static.class_code) else s(WARNING),
                kind="pcie.link_trained_low" if (low_speed and low_width) else
                     ("pcie.link_speed_below_expected" if low_speed else "pcie.link_width_below_expected"),
                title=title,
                evidence=f"trained {current}, expected {expected} ({ends})" + (f"; {aer}" if aer else ""),
                impact=_lost(link.expected_bandwidth, link.current_bandwidth) + _for(blocks),
                remedy=" ".join(remedies),
                related=tuple(blocks)))
            hop_findings[address] = "pcie.link_trained_low"

        if link.capped:
            out.add(Finding(
                subject=address, severity=INFO, kind="pcie.link_capped",
                title=(f"PCIe link capped at {link_text(link.target_speed, None)} "
                       f"({CAP_CAUSE_TEXT.get(link.cap_cause, link.cap_cause)}), both ends support "
                       f"{link_text(link.speed.expected, None)}"),
                evidence=(f"trained {link_text(device.current_link_speed, device.current_link_width)} at the port's "
                          f"Target Link Speed {link_text(link.target_speed, None)} (Link Control 2); expected "
                          f"{link_text(link.speed.expected, link.expected_width)} ({ends})"),
                impact=_lost(link.expected_bandwidth, link.current_bandwidth) + _for(blocks),
                remedy=CAP_CAUSE_REMEDY.get(link.cap_cause, ""),
                related=tuple(blocks)))
        if link.design is not None and not link.link_down and not low_width:
            fact = platform.fact_named(link.design)
            out.add(Finding(
                subject=address, severity=INFO, kind="pcie.link_as_designed",
                title=f"x{link.expected_width} by design: {link.design}",
                evidence=f"trained {link_text(device.current_link_speed, device.current_link_width)}, both ends "
                         f"advertise x{_min_width(device, port)}; "
                         f"{fact.source if fact else link.design}",
                impact="none: the platform wires this many lanes between the two ends",
                remedy="Nothing to do: no slot, reseat or BIOS setting widens it.",
                related=tuple(blocks)))
            hop_findings.setdefault(address, "pcie.link_as_designed")

        if link.placement_speed_limited or link.placement_width_limited:
            device_max = link_text(device.static.max_link_speed, device.static.max_link_width)
            port_max = link_text(port.static.max_link_speed, port.static.max_link_width) if port else "unknown"
            if link.placement_speed_limited and link.placement_width_limited:
                title = f"placed behind a slower, narrower port: {port_max}, the device does {device_max}"
            elif link.placement_speed_limited:
                title = (f"placed behind a slower port: {link_text(port.static.max_link_speed, None)}, "
                         f"the device does {link_text(device.static.max_link_speed, None)}")
            else:
                title = (f"placed behind a narrower port: x{port.static.max_link_width}, "
                         f"the device does x{device.static.max_link_width}")
            # A review item unless the slot carries less than the device can use (analysis.demand).
            demand = demands.get(address)
            held_back = demand is not None and bottlenecked(link, demand)
            evidence = (f"device {device_max}, port {link.partner} {port_max}: the link can reach "
                        f"{link_text(link.speed.expected, link.expected_width)} at most")
            if demand is not None:
                evidence += f"; the device can use {_gbs(demand.bytes_per_second)} ({_demand_text(demand)})"
            out.add(Finding(
                subject=address, severity=s(WARNING) if held_back else INFO,
                kind="pcie.slot_below_device_demand" if held_back else "pcie.placement_below_capability",
                title=("the slot is its bottleneck: " if held_back else "") + title,
                evidence=evidence,
                impact=(f"it can use {_gbs(demand.bytes_per_second)} per direction, the slot carries "
                        f"{_gbs(link.expected_bandwidth)}{_for(blocks)}" if held_back else
                        _lost(link.max_bandwidth, link.expected_bandwidth, "the device could use") + _for(blocks)
                        + ", if it needed that much: a placement to review"),
                remedy=f"Move the device to a slot whose port supports {device_max} (usually a CPU-attached slot; "
                       "the board manual says which slots run at which generation and which share lanes), or "
                       "set the slot's bifurcation so this device gets all its lanes."
                       + ("" if held_back else " Often how the board is built: nothing to do unless its workload "
                                                "needs more than the slot carries."),
                related=tuple(blocks)))
            hop_findings.setdefault(address, "pcie.placement_below_capability")

    _hop_limits(facts, out, links, devices, storage, hop_findings)
    _shared_uplinks(facts, out, links, devices, storage)
    _aer(facts, out, devices, links, storage, hop_findings)
    out.count(len({frozenset((a, l.partner)) for a, l in links.items() if l.partner}), "PCIe links")


def _hop_limits(facts: Facts, out: Outcome, links: Dict[str, LinkAnalysis], devices: Dict[str, PciDevice],
                storage: Set[str], hop_findings: Dict[str, str]) -> None:
    """A device whose own link is fine but whose path up to the root port is narrower
    than the device's link: the hop that limits it (the exporter's bottleneck metric)."""
    for address in sorted(links, key=natural_key):
        link = links[address]
        if link.bottleneck is None or link.bottleneck == address or link.bottleneck_bandwidth is None:
            continue
        own = link.expected_bandwidth
        if own is None or link.bottleneck_bandwidth >= own:
            continue
        hop = devices.get(link.bottleneck)
        hop_link = links.get(link.bottleneck)
        blocks = facts.blocks_below(address)
        already = link.bottleneck in hop_findings
        hop_text = link_text(hop_link.speed.expected, hop_link.expected_width) if hop_link else "unknown"
        out.add(Finding(
            subject=address, severity=(INFO if already or address not in storage else WARNING),
            kind="pcie.path_limited_upstream",
            title=f"its path is limited upstream, at {link.bottleneck}",
            evidence=f"own link {link_text(link.speed.expected, link.expected_width)} ({_gbs(own)}); "
                     f"{link.bottleneck} ({_describe_port(hop)}) links at {hop_text} "
                     f"({_gbs(link.bottleneck_bandwidth)})",
            impact=_lost(own, link.bottleneck_bandwidth, "of own link") + _for(blocks),
            remedy=("See the finding about " + link.bottleneck + "." if already else
                    f"Move the card behind {link.bottleneck} to a wider or faster slot, or this device off it."),
            related=tuple(blocks)))


def _shared_uplinks(facts: Facts, out: Outcome, links: Dict[str, LinkAnalysis], devices: Dict[str, PciDevice],
                    storage: Set[str]) -> None:
    """A switch whose drives' links add up to more than its uplink carries: each drive
    reaches its own link speed, but not all at once. Normal for a switch (that is what
    it is for), so info only: it says what the drives together can deliver, computed
    with the analysis the probes use for their expectation (analysis.throughput)."""
    for address in sorted(devices, key=natural_key):
        if devices[address].port_type != "upstream_port" or address not in links:
            continue
        blocks = facts.blocks_below(address)
        ends = sorted({b.pci_address for b in facts.block_devices()
                       if b.pci_address and b.name in blocks and b.pci_address != address})
        paths = [path_hops(end, devices, links) for end in ends]
        paths = [p for p in paths if p and any(hop == address for hop, _ in p)]
        if len(paths) < 2:
            continue
        alone = sum(shared_tree_bandwidth([p])[0] for p in paths)
        together, limits = shared_tree_bandwidth(paths)
        if together >= alone * 0.999 or address not in limits:
            continue
        up = links[address]
        out.add(Finding(
            subject=address, severity=INFO, kind="pcie.shared_uplink_oversubscribed",
            title=f"{len(paths)} devices share one {_gbs(up.expected_bandwidth)} uplink",
            evidence=f"their own links add up to {_gbs(alone)}; this switch's uplink to {up.partner} is "
                     f"{link_text(up.speed.expected, up.expected_width)} ({_gbs(up.expected_bandwidth)})",
            impact=f"read together, {', '.join(blocks)} get at most {_gbs(together)}, "
                   f"{_gbs(alone - together)} less than their links add up to",
            remedy="Expected of a switch card; spread the devices over more slots (or use a card with a wider "
                   "uplink) where they must all run at full speed at once.",
            related=tuple(blocks)))


def _demand_text(demand: Demand) -> str:
    if demand.source == NETWORK_PORTS:
        return f"{demand.parts} network port{'s' if demand.parts != 1 else ''}' line rates added up"
    return f"{demand.parts} link{'s' if demand.parts != 1 else ''} below its downstream ports added up"


def _describe_port(device: Optional[PciDevice]) -> str:
    return pci_kind(device) if device else "unknown"


def _aer_text(device: PciDevice, port: Optional[PciDevice]) -> str:
    counts = []
    for end, name in ((device, "device"), (port, "port")):
        if end is None:
            continue
        total = sum(end.aer_totals.values())
        if total:
            counts.append(f"{total} on the {name}")
    return ("AER errors since boot: " + ", ".join(counts)) if counts else ""


def _aer(facts: Facts, out: Outcome, devices: Dict[str, PciDevice], links: Dict[str, LinkAnalysis],
         storage: Set[str], hop_findings: Dict[str, str]) -> None:
    """AER counters are totals since boot (or since the device appeared): fatal and
    non-fatal errors are reported as they are; correctable ones are informational (the
    alert looks at their rate, which one reading cannot), and folded into the link's own
    finding when it trained low."""
    by_subject: Dict[str, List[tuple]] = {}
    for address in sorted(devices, key=natural_key):
        device = devices[address]
        if not any(device.aer_totals.values()):
            continue
        link = links.get(address)
        # Count a port's errors with the device below it: they describe the same link.
        subject = link.partner if (link and link.faces_downstream and link.partner in devices) else address
        by_subject.setdefault(subject, []).append((address, device.aer_totals))
    for subject, ends in sorted(by_subject.items(), key=lambda item: natural_key(item[0])):
        totals = {sev: sum(t.get(sev, 0) for _, t in ends) for sev in ("fatal", "nonfatal", "correctable")}
        detail = "; ".join(f"{addr}: " + ", ".join(f"{n} {sev}" for sev, n in sorted(t.items()) if n)
                           for addr, t in ends)
        on_storage = any(addr in storage for addr, _ in ends)
        blocks = facts.blocks_below(subject)
        if totals["fatal"] or totals["nonfatal"]:
            severity = CRITICAL if totals["fatal"] else WARNING
            worst_name = "fatal" if totals["fatal"] else "non-fatal"
            out.add(Finding(
                subject=subject, severity=severity if on_storage else INFO, kind="pcie.aer_uncorrectable",
                title=f"{worst_name} PCIe errors (AER) reported",
                evidence=f"since boot: {detail}",
                impact="uncorrectable errors lose or abort transactions; the driver may reset the device, "
                       "and I/O stalls or fails meanwhile",
                remedy="Read the kernel log (dmesg | grep -i aer) for the error type. Update the device's "
                       "firmware and the BIOS, reseat the device and any riser or cable; errors that keep "
                       "coming point to a failing device or slot.",
                related=tuple(blocks)))
        elif totals["correctable"] and hop_findings.get(subject) != "pcie.link_trained_low":
            out.add(Finding(
                subject=subject, severity=INFO, kind="pcie.aer_correctable",
                title=f"{totals['correctable']} correctable PCIe errors (AER) since boot",
                evidence=detail,
                impact="each one is a replayed transfer; many of them mean a marginal link that may train "
                       "lower or fail",
                remedy="Watch whether the count keeps rising (storpath_pcie_aer_errors_total); if it does, "
                       "reseat the device, riser or cable.",
                related=tuple(blocks)))
