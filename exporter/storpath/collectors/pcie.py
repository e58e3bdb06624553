"""PCIe link speed and width against what both ends of the link support."""

from __future__ import annotations

from typing import Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.samples import Sample

from storpath.analysis.pcie import ExpectationCache, analyse
from storpath.collectors import Collector, register


def _fmt_class(code):
    return "0x%06x" % code if code is not None else ""


def _device_labels(device, link):
    """The label sets of one device's samples, shared by its families."""
    static = device.static
    addr = {"address": device.address}
    info = {
        "address": device.address, "upstream": static.parent or "",
        "root_port": (link.root_port if link else None) or "", "port_type": device.port_type or "",
        "class": _fmt_class(static.class_code), "vendor_id": static.vendor_id or "",
        "device_id": static.device_id or "", "subsystem_vendor_id": static.subsystem_vendor_id or "",
        "subsystem_device_id": static.subsystem_device_id or "", "driver": device.driver or "",
    }
    aer = {severity: {"address": device.address, "severity": severity} for severity in ("correctable", "nonfatal", "fatal")}
    bottleneck = ({"address": device.address, "bottleneck": link.bottleneck}
                  if link is not None and link.bottleneck is not None else None)
    return addr, info, aer, bottleneck


@register("pcie", default=True)
class PcieCollector(Collector):
    """PCIe link speed and width of every PCI device, against what its link should train to."""

    def __init__(self, ctx):
        super().__init__(ctx)
        self.expectations = ExpectationCache()

    def collect(self) -> Iterable[Metric]:
        devices = self.ctx.facts.pci()
        links = analyse(devices, self.expectations)

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

        # Thousands of devices: samples are appended directly, sharing one label dict per
        # device, instead of add_metric() building a new dict for every sample.
        def put(family, labels, value):
            if value is not None:
                family.samples.append(Sample(family.name, labels, value, None))

        aer_name = aer.name + "_total"
        for device in devices:
            static = device.static
            is_storage = static.class_code is not None and static.class_code >> 16 == 0x01
            if not static.has_link and not is_storage:
                continue
            link = links.get(device.address)
            addr, info_labels, aer_labels, bottleneck_labels = _device_labels(device, link)
            put(info, info_labels, 1.0)
            for severity, total in device.aer_totals.items():
                aer.samples.append(Sample(aer_name, aer_labels[severity], total, None))
            if not static.has_link:
                continue
            put(cur_speed, addr, device.current_link_speed)
            put(max_speed, addr, static.max_link_speed)
            put(cur_width, addr, device.current_link_width)
            put(max_width, addr, static.max_link_width)
            if link is None:
                continue
            put(exp_speed, addr, link.expected_speed)
            put(exp_width, addr, link.expected_width)
            put(cur_bw, addr, link.current_bandwidth)
            put(exp_bw, addr, link.expected_bandwidth)
            if bottleneck_labels is not None:
                put(bottleneck, bottleneck_labels, link.bottleneck_bandwidth)

        return [cur_speed, max_speed, exp_speed, cur_width, max_width, exp_width, cur_bw, exp_bw, bottleneck, aer, info]
