"""PCIe link speed and width against what both ends of the link support."""

from __future__ import annotations

from typing import Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from storpath.analysis.pcie import analyse
from storpath.collectors import Collector, register
from storpath.readers.pci import PciReader


def _fmt_class(code):
    return "0x%06x" % code if code is not None else ""


@register("pcie", default=True)
class PcieCollector(Collector):
    """PCIe link speed and width of every PCI device, against what its link should train to."""

    def __init__(self, ctx):
        super().__init__(ctx)
        self.reader = PciReader(self.roots)

    def collect(self) -> Iterable[Metric]:
        devices = self.reader.read()
        links = analyse(devices)

        def gauge(name, doc, labels=("address",)):
            return GaugeMetricFamily(f"storpath_pcie_{name}", doc, labels=list(labels))

        cur_speed = gauge("current_link_speed_transfers_per_second", "Speed the link trained to (current_link_speed).")
        max_speed = gauge("max_link_speed_transfers_per_second", "Highest speed this end supports (max_link_speed).")
        cur_width = gauge("current_link_width", "Lanes the link trained to (current_link_width); 0 when the link is down.")
        max_width = gauge("max_link_width", "Most lanes this end supports (max_link_width).")
        exp_speed = gauge("expected_link_speed_transfers_per_second",
                          "Speed the link should train to: the lower maximum of its two ends.")
        exp_width = gauge("expected_link_width", "Lanes the link should train to: the lower maximum of its two ends.")
        cur_bw = gauge("current_link_bandwidth_bytes_per_second",
                       "Usable bandwidth of the link as trained, per direction, after line encoding.")
        exp_bw = gauge("expected_link_bandwidth_bytes_per_second",
                       "Usable bandwidth the link should have, per direction, after line encoding.")
        bottleneck = gauge("path_bottleneck_bandwidth_bytes_per_second",
                           "Lowest expected link bandwidth on the path from this device up to its root port; "
                           "`bottleneck` is the device end of that hop.", labels=("address", "bottleneck"))
        aer = CounterMetricFamily("storpath_pcie_aer_errors", "AER errors the device reported, by severity.",
                                  labels=["address", "severity"])
        info = GaugeMetricFamily(
            "storpath_pcie_device_info",
            "PCI identity and place in the tree of a device with a PCIe link or a storage controller; always 1.",
            labels=["address", "upstream", "root_port", "port_type", "class", "vendor_id", "device_id",
                    "subsystem_vendor_id", "subsystem_device_id", "driver"])

        for device in devices:
            static = device.static
            is_storage = static.class_code is not None and static.class_code >> 16 == 0x01
            if not static.has_link and not is_storage:
                continue
            addr = [device.address]
            link = links.get(device.address)
            info.add_metric([
                device.address, static.parent or "", (link.root_port if link else None) or "", device.port_type or "",
                _fmt_class(static.class_code), static.vendor_id or "", static.device_id or "",
                static.subsystem_vendor_id or "", static.subsystem_device_id or "", device.driver or "",
            ], 1)
            for severity, total in device.aer_totals.items():
                aer.add_metric([device.address, severity], total)
            if not static.has_link:
                continue
            for family, value in ((cur_speed, device.current_link_speed), (max_speed, static.max_link_speed),
                                  (cur_width, device.current_link_width), (max_width, static.max_link_width)):
                if value is not None:
                    family.add_metric(addr, value)
            if link is None:
                continue
            for family, value in ((exp_speed, link.expected_speed), (exp_width, link.expected_width),
                                  (cur_bw, link.current_bandwidth), (exp_bw, link.expected_bandwidth)):
                if value is not None:
                    family.add_metric(addr, value)
            if link.bottleneck is not None and link.bottleneck_bandwidth is not None:
                bottleneck.add_metric([device.address, link.bottleneck], link.bottleneck_bandwidth)

        return [cur_speed, max_speed, exp_speed, cur_width, max_width, exp_width, cur_bw, exp_bw, bottleneck, aer, info]
