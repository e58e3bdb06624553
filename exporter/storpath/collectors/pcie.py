"""PCIe link speed and width against what both ends of the link support."""

from __future__ import annotations

from typing import Dict, Iterable, List, Tuple

from prometheus_client.core import Metric

from storpath.analysis.pcie import ExpectationCache, current_bandwidth
from storpath.collectors import Collector, register
from storpath.exposition import SeriesFamily, label_text, value_text

INFO_LABELS = ("address", "upstream", "root_port", "port_type", "class", "vendor_id", "device_id",
               "subsystem_vendor_id", "subsystem_device_id", "driver")


def _fmt_class(code):
    return "0x%06x" % code if code is not None else ""


class _Rendered:
    """What is kept of one device between scrapes: what its lines were rendered from (its
    instance, driver, port type and link expectation: `key`; its current values), its
    label part, and the lines of its current values. The lines of the families that
    cannot change while `key` stays are not kept: the writer keeps their text, and they
    are rendered again, for all devices, only when some device's key changes."""

    __slots__ = ("key", "address", "values", "value_lines")

    def __init__(self, key: tuple, address: str):
        self.key = key
        self.address = address
        self.values: object = None  # none yet: rendered on first use
        self.value_lines: Tuple[str, ...] = ()


def _line(name: str, labels: str, value) -> str:
    return f"{name}{labels} {value_text(value)}\n" if value is not None else ""


def _joiner(entries: List[_Rendered], index: int):
    return lambda: "".join(e.value_lines[index] for e in entries)


@register("pcie", default=True)
class PcieCollector(Collector):
    """PCIe link speed and width of every PCI device, against what its link should train to."""

    def __init__(self, ctx):
        super().__init__(ctx)
        # In a virtual machine the ports are the hypervisor's (storpath.analysis.virtual).
        self.expectations = ExpectationCache(guest=ctx.facts.host().virtual)
        self._rendered: Dict[str, _Rendered] = {}
        self._static_token: object = None  # new whenever a line of the static families changes
        self._value_token: object = None  # likewise for the families of current values

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
            verifiable=gauge("link_verifiable",
                             "1 when the link's verdict rests on the registers of both its ends (bare metal); 0 "
                             "when it cannot: `basis` device_only (the port is emulated, or claims less than the "
                             "device runs at: judged against the device's own capability), none (nothing to "
                             "judge: an emulated device or port, an empty slot, no port above the device); "
                             "`reason` says why.", labels=("address", "basis", "reason")),
            info=gauge("device_info", "PCI identity and place in the tree of a device with a PCIe link or a storage "
                       "controller; always 1.", INFO_LABELS),
        )

    # The families whose lines change only with a device's instance, driver or link expectation.
    STATIC = ("info", "max_speed", "max_width", "exp_speed", "exp_width", "exp_bw", "bottleneck", "verifiable")

    def _render_static(self, included, families) -> List[str]:
        """The text of each STATIC family, for the devices of this scrape, in order."""
        texts: Dict[str, List[str]] = {name: [] for name in self.STATIC}
        names = {name: families[name].sample_name for name in self.STATIC}
        for device, exp, entry in included:
            static = device.static
            info = (device.address, static.parent or "", (exp.root_port if exp else None) or "",
                    device.port_type or "", _fmt_class(static.class_code), static.vendor_id or "",
                    static.device_id or "", static.subsystem_vendor_id or "", static.subsystem_device_id or "",
                    device.driver or "")
            texts["info"].append(_line(names["info"], label_text(INFO_LABELS, info), 1.0))
            if not static.has_link:
                continue
            address = entry.address
            texts["max_speed"].append(_line(names["max_speed"], address, static.max_link_speed))
            texts["max_width"].append(_line(names["max_width"], address, static.max_link_width))
            if exp is None:
                continue
            texts["verifiable"].append(_line(names["verifiable"], label_text(
                ("address", "basis", "reason"), (device.address, exp.basis, exp.trust_reason)),
                1.0 if exp.verifiable else 0.0))
            texts["exp_speed"].append(_line(names["exp_speed"], address, exp.expected_speed))
            texts["exp_width"].append(_line(names["exp_width"], address, exp.expected_width))
            texts["exp_bw"].append(_line(names["exp_bw"], address, exp.expected_bandwidth))
            if exp.bottleneck is not None:
                texts["bottleneck"].append(_line(names["bottleneck"], label_text(
                    ("address", "bottleneck"), (device.address, exp.bottleneck)), exp.bottleneck_bandwidth))
        return ["".join(texts[name]) for name in self.STATIC]

    # The families of current values, rendered when a device's values change.
    CURRENT = ("cur_speed", "cur_width", "cur_bw", "aer")

    def _render_values(self, entry: _Rendered, device, exp, families) -> Tuple[str, ...]:
        """The lines of a device's current values. On a host whose AER counters all move
        this runs for every device on every scrape: plain string building."""
        address = entry.address  # '{address="..."}'; `severity` sorts after `address`
        aer_prefix = families["aer"].sample_name + address[:-1] + ',severity="'
        aer = "".join(f'{aer_prefix}{severity}"}} {value_text(total)}\n'
                      for severity, total in device.aer_totals.items())
        if not device.static.has_link:
            return "", "", "", aer
        return (_line(families["cur_speed"].sample_name, address, device.current_link_speed),
                _line(families["cur_width"].sample_name, address, device.current_link_width),
                _line(families["cur_bw"].sample_name, address, current_bandwidth(device, exp)) if exp else "",
                aer)

    def collect(self) -> Iterable[Metric]:
        devices = self.ctx.facts.pci()
        expected = self.expectations.get(devices)
        families = self._families()
        previous, rendered = self._rendered, {}
        static_changed = values_changed = False
        included = []
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
                entry = _Rendered(key, label_text(("address",), (device.address,)))
                static_changed = True
            entry.key = key  # equal: the newest objects make the next comparison one of identity
            values = (device.current_link_speed, device.current_link_width, tuple(device.aer_totals.items()))
            if entry.values != values:
                entry.value_lines = self._render_values(entry, device, exp, families)
                entry.values = values
                values_changed = True
            rendered[device.address] = entry
            included.append((device, exp, entry))
        if len(rendered) != len(previous) or rendered.keys() != previous.keys():
            static_changed = values_changed = True
        self._rendered = rendered
        # A family's text is rendered or joined only if the writer does not hold it for
        # the current token already (see SeriesFamily.set_text).
        if static_changed or self._static_token is None:
            self._static_token = object()
        if values_changed or self._value_token is None:
            self._value_token = object()
        static_texts: List[List[str]] = []

        def static_text(index: int) -> str:
            if not static_texts:
                static_texts.append(self._render_static(included, families))
            return static_texts[0][index]

        for i, name in enumerate(self.STATIC):
            families[name].set_text(self._static_token, lambda i=i: static_text(i))
        entries = [entry for _, _, entry in included]
        for i, name in enumerate(self.CURRENT):
            families[name].set_text(self._value_token, _joiner(entries, i))
        order = ("cur_speed", "max_speed", "exp_speed", "cur_width", "max_width", "exp_width", "cur_bw", "exp_bw",
                 "bottleneck", "verifiable", "aer", "info")
        return [families[name] for name in order]
