"""The storage devices present, by kind, with their identity: what Prometheus compares
over time (a drive that dropped off the bus) and across hosts of the same model (a drive
that never appeared). Built from the PCI tree and block devices the other collectors
read this scrape; no listing of its own but the (small) PCI slot directory."""

from __future__ import annotations

import logging

from storpath.base import log
from storpath.analysis.inventory import parse_expected
from storpath.collectors import Collector, register
from storpath.scrape.families import GAUGE, Family, Rows
from storpath.readers.inventory import counts

_KIND = ("kind",)

DEVICE_INFO = Family(
    "storpath_inventory_device_info", GAUGE,
    "A storage device present: its kind (nvme_controller, nvme_namespace, sas_disk, sata_disk, hba), name, model, "
    "serial, PCI function and physical slot; always 1.",
    ("kind", "device", "model", "serial", "address", "slot"),
    doc="a storage device present: `kind` is `nvme_controller`, `nvme_namespace`, `sas_disk`, `sata_disk` or `hba`; "
        "`device` the kernel's name (`nvme0`, `nvme0n1`, `sda`; the PCI address for an HBA); `model` and `serial` "
        "as the device reports them (an HBA's model is its PCI `vendor:device`; empty where unreadable); `address` "
        "the PCI function it is or sits behind; `slot` the physical slot of that function "
        "(/sys/bus/pci/slots), empty where the firmware names none; always 1")
DEVICES = Family(
    "storpath_inventory_devices", GAUGE,
    "Storage devices present, by kind; 0 for a kind with none.", _KIND,
    doc="storage devices present, per kind; every kind is exported, 0 when there are none, so a kind that drops "
        "to none is a drop and not a vanished series")
EXPECTED_DEVICES = Family(
    "storpath_inventory_expected_devices", GAUGE,
    "Storage devices of this kind the host should have (collectors.inventory.expected); absent when not declared.",
    _KIND,
    doc="the count declared in `collectors.inventory.expected`; absent for kinds not declared")

FAMILIES = (DEVICE_INFO, DEVICES, EXPECTED_DEVICES)


@register("inventory", default=True)
class InventoryCollector(Collector):
    """Storage devices present by kind (NVMe, SAS, SATA, HBAs) with model, serial, PCI address and slot."""

    families = FAMILIES
    config_defaults = {
        # {kind: count} the host should have, e.g. {nvme_controller: 4}; see docs/metrics.md.
        "expected": {},
    }

    reads = ("inventory",)

    def __init__(self, ctx):
        super().__init__(ctx)
        self.expected, problems = parse_expected(self.config.get("expected", {}))
        for problem in problems:
            log.kv(self.log, logging.ERROR, "collectors.inventory.expected: entry ignored", problem=problem)

    def values(self, snapshot) -> Rows:
        rows = Rows()
        for d in sorted(snapshot.inventory, key=lambda d: (d.kind, d.address, d.name)):
            rows.add(DEVICE_INFO, (d.kind, d.name, d.model, d.serial, d.address, d.slot), 1)
        for kind, count in counts(snapshot.inventory).items():
            rows.add(DEVICES, (kind,), count)
        for kind, count in self.expected.items():
            rows.add(EXPECTED_DEVICES, (kind,), count)
        return rows
