"""Which controller and PCI function each block device sits behind: the join key."""

from __future__ import annotations

from typing import Iterable

from prometheus_client.core import GaugeMetricFamily, Metric

from storpath.collectors import Collector, register


@register("block", default=True)
class BlockCollector(Collector):
    """Block devices with the controller and PCI address behind them (join key to PCIe and NUMA)."""

    def collect(self) -> Iterable[Metric]:
        info = GaugeMetricFamily(
            "storpath_block_device_info",
            "A block device and the controller and PCI function it sits behind; always 1. "
            "Join on `device` with node_exporter's node_disk_* and on `address` with storpath_pcie_*.",
            labels=["device", "controller", "address"])
        for dev in self.ctx.facts.blocks():
            if dev.pci_address is None:
                continue
            info.add_metric([dev.name, dev.controller or "", dev.pci_address], 1)
        return [info]
