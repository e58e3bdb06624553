"""Which controller and PCI function each block device sits behind: the join key."""

from __future__ import annotations

from typing import Iterable, List

from prometheus_client.core import Metric

from storpath.collectors import Collector, register
from storpath.exposition import SeriesFamily
from storpath.sysfs import same_objects


@register("block", default=True)
class BlockCollector(Collector):
    """Block devices with the controller and PCI address behind them (join key to PCIe and NUMA)."""

    # The block reader's per-instance records the lines were rendered from, and the lines.
    _rendered_from: List[object] = []
    _text = ""

    def collect(self) -> Iterable[Metric]:
        info = SeriesFamily(
            "storpath_block_device_info",
            "A block device and the controller and PCI function it sits behind; always 1. "
            "Join on `device` with node_exporter's node_disk_* and on `address` with storpath_pcie_*.",
            ("device", "controller", "address"))
        devices = self.ctx.facts.blocks()
        if not same_objects(devices, self._rendered_from):
            for dev in devices:
                if dev.pci_address is not None:
                    info.add((dev.name, dev.controller or "", dev.pci_address), 1)
            self._rendered_from, self._text = devices, "".join(info.lines)
        text = self._text
        info.set_text(self._rendered_from, lambda: text)
        return [info]
