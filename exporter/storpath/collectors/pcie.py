"""PCIe link speed and width against what both ends of the link support."""

from __future__ import annotations

from typing import Dict, Iterable, Tuple

from prometheus_client.core import Metric

from storpath.analysis.pcie import ExpectationCache, current_bandwidth
from storpath.collectors import Collector, register
from storpath.exposition import SeriesFamily, label_text

INFO_LABELS = ("address", "upstream", "root_port", "port_type", "class", "vendor_id", "device_id",
               "subsystem_vendor_id", "subsystem_device_id", "driver")
SEVERITIES = ("correctable", "nonfatal", "fatal")


def _fmt_class(code):
    return "0x%06x" % code if code is not None else ""


class _Rendered:
    """One device's label parts and the lines of its families that cannot change while
    the device instance, its driver and its link's expectation stay the same."""

    __slots__ = ("key", "address", "aer", "static_lines")

    def __init__(self, key: tuple, address: str, aer: Dict[str, str], static_lines: Tuple[str, ...]):
        self.key = key
        self.address = address
        self.aer = aer
        self.static_lines = static_lines


@register("pcie", default=True)
class PcieCollector(Collector):
    """PCIe link speed and width of every PCI device, against what its link should train to."""

    def __init__(self, ctx):
        super().__init__(ctx)
        self.expectations = ExpectationCache()
        self._rendered: Dict[str, _Rendered] = {}

    @staticmethod
    def _families():
        def gauge(name, doc, labels=("address",)):
            return SeriesFamily(f"storpath_pcie_{name}", doc, labels)

        return dict(
            cur_speed=gauge("current_link_speed_transfers_per_second", "Speed the link trained to (current_link_speed)."),
            max_speed=gauge("max_link_speed_transfers_per_second", "Highest speed this end supports (max_link_speed)."),
            exp_speed=gauge("expected_link_speed_transfers_per_second",
                            "Speed the link should train to: the lower maximum of its two ends."),
            cur_width=gauge("current_link_width",
                            "Lanes the link trained to (current_link_width); 0 when the link is down."),
            max_width=gauge("max_link_width", "Most lanes this end supports (max_link_width)."),
            exp_width=gauge("expected_link_width", "Lanes the link should train to: the lower maximum of its two ends."),
            cur_bw=gauge("current_link_bandwidth_bytes_per_second",
                         "Usable bandwidth of the link as trained, per direction, after line encoding."),
            exp_bw=gauge("expected_link_bandwidth_bytes_per_second",
                         "Usable bandwidth the link should have, per direction, after line encoding."),
            bottleneck=gauge("path_bottleneck_bandwidth_bytes_per_second",
                             "Lowest expected link bandwidth on the path from this device up to its root port; "
                             "`bottleneck` is the device end of that hop.", labels=("address", "bottleneck")),
            aer=SeriesFamily("storpath_pcie_aer_errors", "AER errors the device reported, by severity.",
                             ("address", "severity"), kind="counter"),
            info=gauge("device_info", "PCI identity and place in the tree of a device with a PCIe link or a storage "
                       "controller; always 1.", INFO_LABELS),
        )

    # The families whose lines are rendered once per device instance, in this order.
    STATIC = ("info", "max_speed", "max_width", "exp_speed", "exp_width", "exp_bw", "bottleneck")

    def _render(self, key, device, exp, families) -> _Rendered:
        static = device.static
        address = device.address
        addr = label_text(("address",), (address,))
        staged = {name: SeriesFamily(f.name, "", f.label_names) for name, f in families.items() if name in self.STATIC}
        staged["info"].add((address, static.parent or "", (exp.root_port if exp else None) or "",
                            device.port_type or "", _fmt_class(static.class_code), static.vendor_id or "",
                            static.device_id or "", static.subsystem_vendor_id or "",
                            static.subsystem_device_id or "", device.driver or ""), 1.0)
        if static.has_link:
            staged["max_speed"].add_text(addr, static.max_link_speed)
            staged["max_width"].add_text(addr, static.max_link_width)
            if exp is not None:
                staged["exp_speed"].add_text(addr, exp.expected_speed)
                staged["exp_width"].add_text(addr, exp.expected_width)
                staged["exp_bw"].add_text(addr, exp.expected_bandwidth)
                if exp.bottleneck is not None:
                    staged["bottleneck"].add((address, exp.bottleneck), exp.bottleneck_bandwidth)
        aer = {severity: label_text(("address", "severity"), (address, severity)) for severity in SEVERITIES}
        return _Rendered(key, addr, aer, tuple("".join(staged[name].lines) for name in self.STATIC))

    def collect(self) -> Iterable[Metric]:
        devices = self.ctx.facts.pci()
        expected = self.expectations.get(devices)
        families = self._families()
        static_families = [families[name] for name in self.STATIC]
        cur_speed, cur_width, cur_bw, aer = (families[n] for n in ("cur_speed", "cur_width", "cur_bw", "aer"))
        previous, rendered = self._rendered, {}
        for device in devices:
            static = device.static
            is_storage = static.class_code is not None and static.class_code >> 16 == 0x01
            if not static.has_link and not is_storage:
                continue
            exp = expected.get(device.address)
            # Same instance (the reader hands out the same static record), same driver,
            # same expectation object (recomputed only when the topology changes).
            key = (static, device.driver, device.port_type, exp)
            entry = previous.get(device.address)
            if entry is None or entry.key != key:
                entry = self._render(key, device, exp, families)
            rendered[device.address] = entry
            for family, line in zip(static_families, entry.static_lines):
                if line:
                    family.lines.append(line)
            for severity, total in device.aer_totals.items():
                aer.add_text(entry.aer[severity], total)
            if not static.has_link:
                continue
            cur_speed.add_text(entry.address, device.current_link_speed)
            cur_width.add_text(entry.address, device.current_link_width)
            if exp is not None:
                cur_bw.add_text(entry.address, current_bandwidth(device, exp))
        self._rendered = rendered
        order = ("cur_speed", "max_speed", "exp_speed", "cur_width", "max_width", "exp_width", "cur_bw", "exp_bw",
                 "bottleneck", "aer", "info")
        return [families[name] for name in order]
