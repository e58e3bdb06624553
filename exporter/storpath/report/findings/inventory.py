"""Inventory findings: fewer storage devices than the operator declared
(collectors.inventory.expected, as InventoryBelowExpected), and a root port much wider than
the one storage controller below it, said as information: on one host storpath cannot tell a
carrier whose other drives never appeared from a single drive in a wide slot."""

from __future__ import annotations

from storpath.analysis.inventory import parse_expected, shortfalls, wide_ports
from storpath.report.findings import INFO, WARNING, Facts, Finding, Outcome, register
from storpath.readers.inventory import counts


@register("inventory", collector="inventory", order=70)
def check(facts: Facts, out: Outcome) -> None:
    devices = facts.part("inventory")
    present = counts(devices)
    expected, problems = parse_expected(facts.collector_config("inventory").get("expected", {}))
    for problem in problems:
        out.add(Finding(
            subject="config", severity=WARNING, kind="inventory.expected_invalid",
            title="collectors.inventory.expected: an entry is ignored",
            evidence=problem, impact="that kind is not compared with what is present",
            remedy="Give each kind (nvme_controller, nvme_namespace, sas_disk, sata_disk, hba) a whole number."))
    for kind, (have, want) in sorted(shortfalls(expected, present).items()):
        names = sorted(d.name for d in devices if d.kind == kind)
        out.add(Finding(
            subject=kind, severity=WARNING, kind="inventory.below_expected",
            title=f"{have} {kind} present, {want} declared",
            evidence=f"collectors.inventory.expected.{kind} = {want}; present: {', '.join(names) or 'none'}",
            impact=f"{want - have} {kind} the OS does not see carry no data and are in no other verdict",
            remedy="Find what is missing: the kernel log (dmesg), `lspci -tv`, the slot's bifurcation setting for a "
                   "multi-drive carrier, seating and cables. If the layout changed on purpose, change the "
                   "declared count."))
    for wide in wide_ports(facts.pci_devices()):
        port, device = wide.port, wide.device
        pw, dw = port.static.max_link_width, device.static.max_link_width
        blocks = facts.blocks_below(device.address)
        out.add(Finding(
            subject=port.address, severity=INFO, kind="inventory.wide_port_single_device",
            title=f"x{pw} root port with one x{dw} storage controller below it",
            evidence=f"root port {port.address} is x{pw} wide; the only device below it, {device.address}"
                     f"{' (' + ', '.join(blocks) + ')' if blocks else ''}, is x{dw}",
            impact=f"if this is a multi-drive carrier (a passive quad-M.2 card such as the ASUS Hyper M.2 x16), "
                   f"only its first drive exists for Linux and x{pw - dw} of the slot carry nothing; a single "
                   f"drive in a wide slot is fine",
            remedy=f"For a passive carrier, set the slot's bifurcation to x4x4x4x4 in the BIOS (PCIe/IIO "
                   f"configuration of the port above {port.address}) and reboot: each drive then gets a root "
                   f"port of its own.",
            related=(device.address, *blocks)))
