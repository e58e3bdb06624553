"""Which controller and PCI function each block device sits behind: the join key."""

from __future__ import annotations

from storpath.collectors import Collector, register
from storpath.scrape.families import GAUGE, Family, Rows

DEVICE_INFO = Family(
    "storpath_block_device_info", GAUGE,
    "A block device and the controller and PCI function it sits behind; always 1. "
    "Join on `device` with node_exporter's node_disk_* and on `address` with storpath_pcie_*.",
    ("device", "controller", "address"),
    doc="a block device (no partitions, no hidden NVMe path devices) and the controller and PCI function it sits "
        "behind; the join from `device` to `address`")

FAMILIES = (DEVICE_INFO,)


@register("block", default=True)
class BlockCollector(Collector):
    """Block devices with the controller and PCI address behind them (join key to PCIe and NUMA)."""

    families = FAMILIES
    reads = ("blocks",)

    def values(self, snapshot) -> Rows:
        rows = Rows()
        for dev in snapshot.blocks:
            if dev.pci_address is not None:
                rows.add(DEVICE_INFO, (dev.name, dev.controller or "", dev.pci_address), 1)
        return rows
