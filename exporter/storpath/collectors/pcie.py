"""PCIe link speed and width against what both ends of the link support."""

from __future__ import annotations

import sys
from typing import List, NamedTuple, Optional, Tuple

from storpath.analysis.pcie import LinkExpectation, current_bandwidth, expectations
from storpath.collectors import Collector, register
from storpath.families import COUNTER, GAUGE, Derived, Family, Rows

_ADDRESS = ("address",)
INFO_LABELS = ("address", "upstream", "root_port", "port_type", "class", "vendor_id", "device_id",
               "subsystem_vendor_id", "subsystem_device_id", "driver")

CURRENT_SPEED = Family(
    "storpath_pcie_current_link_speed_transfers_per_second", GAUGE,
    "Speed the link trained to (current_link_speed).", _ADDRESS, "transfers_per_second",
    doc="speed the link trained to (16 GT/s = 1.6e10)")
MAX_SPEED = Family(
    "storpath_pcie_max_link_speed_transfers_per_second", GAUGE,
    "Highest speed this end supports (max_link_speed).", _ADDRESS, "transfers_per_second",
    doc="highest speed this end supports")
EXPECTED_SPEED = Family(
    "storpath_pcie_expected_link_speed_transfers_per_second", GAUGE,
    "Speed the link should train to: the lower maximum of its two ends.", _ADDRESS, "transfers_per_second",
    doc="speed the link should train to: min of both ends' maximum. Absent when the link has no partner "
        "(empty slot)")
CURRENT_WIDTH = Family(
    "storpath_pcie_current_link_width", GAUGE,
    "Lanes the link trained to (current_link_width); 0 when the link is down.", _ADDRESS,
    doc="lanes the link trained to; 0 when the link is down")
MAX_WIDTH = Family(
    "storpath_pcie_max_link_width", GAUGE, "Most lanes this end supports (max_link_width).", _ADDRESS,
    doc="most lanes this end supports")
EXPECTED_WIDTH = Family(
    "storpath_pcie_expected_link_width", GAUGE,
    "Lanes the link should train to: the lower maximum of its two ends.", _ADDRESS,
    doc="lanes the link should train to: min of both ends' maximum")
CURRENT_BANDWIDTH = Family(
    "storpath_pcie_current_link_bandwidth_bytes_per_second", GAUGE,
    "Usable bandwidth of the link as trained, per direction, after line encoding.", _ADDRESS, "bytes_per_second",
    doc="usable bandwidth per direction as trained, after line encoding (8b/10b up to 5 GT/s, 128b/130b "
        "8-32 GT/s, FLIT 242/256 at 64 GT/s): 16 GT/s x4 = 7.88e9")
EXPECTED_BANDWIDTH = Family(
    "storpath_pcie_expected_link_bandwidth_bytes_per_second", GAUGE,
    "Usable bandwidth the link should have, per direction, after line encoding.", _ADDRESS, "bytes_per_second",
    doc="usable bandwidth the link should have")
BOTTLENECK = Family(
    "storpath_pcie_path_bottleneck_bandwidth_bytes_per_second", GAUGE,
    "Lowest expected link bandwidth on the path from this device up to its root port; `bottleneck` is the device "
    "end of that hop.", ("address", "bottleneck"), "bytes_per_second",
    doc="device ends only: the lowest expected link bandwidth on the path from this device up to its root port; "
        "`bottleneck` is the device end of that hop (the device itself, or a switch's upstream port)")
VERIFIABLE = Family(
    "storpath_pcie_link_verifiable", GAUGE,
    "1 when the link's verdict rests on the registers of both its ends (bare metal); 0 when it cannot: `basis` "
    "device_only (the port is emulated, or claims less than the device runs at: judged against the device's own "
    "capability), none (nothing to judge: an emulated device or port, an empty slot, no port above the device); "
    "`reason` says why.", ("address", "basis", "reason"),
    doc="1 when the link's verdict rests on the registers of both its ends (`basis=\"both_ends\"`: bare metal); 0 "
        "when it cannot. `basis=\"device_only\"`: the port above is emulated (`reason=\"emulated_port\"`: a virtual "
        "machine's ports report whatever their hypervisor chose) or claims a maximum below what the device runs at "
        "(`reason=\"ends_disagree\"`, which no real link does): the expected link is then the device's own "
        "capability, so a real downgrade its own registers show still counts, but a placement verdict is not "
        "possible. `basis=\"none\"`: nothing to judge (`emulated_device`: QEMU, virtio, VMware, Hyper-V... "
        "functions; `emulated_port` on a VM's port end; `no_partner`: an empty slot, a root-complex integrated "
        "endpoint or a device passed through onto the root bus, whose link registers read zero). Absent for "
        "functions without link attributes")
AER_ERRORS = Family(
    "storpath_pcie_aer_errors", COUNTER, "AER errors the device reported, by severity.", ("address", "severity"),
    doc="AER errors reported by the device (`correctable`, `nonfatal`, `fatal`), from the `TOTAL_ERR_*` lines; "
        "absent on kernels before 4.19")
DEVICE_INFO = Family(
    "storpath_pcie_device_info", GAUGE,
    "PCI identity and place in the tree of a device with a PCIe link or a storage controller; always 1.",
    INFO_LABELS,
    doc="identity and place in the tree of every device with a PCIe link and of every storage controller. "
        "`upstream` is the bridge above, `root_port` the root port of its path, `port_type` one of `endpoint`, "
        "`root_port`, `upstream_port`, `downstream_port`, `legacy_endpoint`, `rc_integrated_endpoint`, ... "
        "(from config space when readable, else from the tree)")

FAMILIES = (CURRENT_SPEED, MAX_SPEED, EXPECTED_SPEED, CURRENT_WIDTH, MAX_WIDTH, EXPECTED_WIDTH, CURRENT_BANDWIDTH,
            EXPECTED_BANDWIDTH, BOTTLENECK, VERIFIABLE, AER_ERRORS, DEVICE_INFO)


# The families whose series follow from what cannot change while the devices exist (the
# static records, the port types and link expectations derived from them) and the drivers.
FIXED = (MAX_SPEED, EXPECTED_SPEED, MAX_WIDTH, EXPECTED_WIDTH, EXPECTED_BANDWIDTH, BOTTLENECK, VERIFIABLE, DEVICE_INFO)


class _Fixed(NamedTuple):
    rows: Rows  # the FIXED families
    # Per device in the list, by position: (position, label values) of those with a link
    # and their expectation (None: no partner), and (position, ((severity, label values),
    # ...)) of the AER counters of those exported.
    linked: List[Tuple[int, Tuple[str], Optional[LinkExpectation]]]
    aer: List[Tuple[int, Tuple[Tuple[str, Tuple[str, str]], ...]]]


def _fmt_class(code):
    return sys.intern("0x%06x" % code) if code is not None else ""  # a few distinct classes on a host


@register("pcie", default=True)
class PcieCollector(Collector):
    """PCIe link speed and width of every PCI device, against what its link should train to."""

    families = FAMILIES

    def __init__(self, ctx):
        super().__init__(ctx)
        self._expected = Derived()
        self._fixed = Derived()
        # In a virtual machine the ports are the hypervisor's (storpath.analysis.virtual).
        self._guest = ctx.facts.host().virtual

    def values(self) -> Rows:
        devices = self.ctx.facts.pci()
        statics = [d.static for d in devices]
        expected = self._expected.get(statics, lambda: expectations(devices, self._guest))
        self.ctx.facts.keep("pcie.expectations", expected)  # the landing page draws these verdicts
        # A host of thousands of devices derives the fixed families only when a device
        # comes, goes or changes driver; the current values are read on every scrape.
        fixed = self._fixed.get((statics, [d.driver for d in devices]), lambda: self._fixed_rows(devices, expected))
        rows = Rows(fixed.rows)
        speed, width, bandwidth = (rows.series(f).add for f in (CURRENT_SPEED, CURRENT_WIDTH, CURRENT_BANDWIDTH))
        for i, key, exp in fixed.linked:
            device = devices[i]
            speed(key, device.current_link_speed)
            width(key, device.current_link_width)
            if exp is not None:
                bandwidth(key, current_bandwidth(device, exp))
        aer = rows.series(AER_ERRORS).add
        for i, keys in fixed.aer:
            totals = devices[i].aer_totals
            for severity, key in keys:
                total = totals.get(severity)
                if total is not None:
                    aer(key, total)
        return rows

    @staticmethod
    def _fixed_rows(devices, expected) -> _Fixed:
        rows = Rows()
        max_speed, exp_speed = rows.series(MAX_SPEED).add, rows.series(EXPECTED_SPEED).add
        max_width, exp_width = rows.series(MAX_WIDTH).add, rows.series(EXPECTED_WIDTH).add
        exp_bw, bottleneck, info = (rows.series(f).add for f in (EXPECTED_BANDWIDTH, BOTTLENECK, DEVICE_INFO))
        verifiable = rows.series(VERIFIABLE).add
        linked, aer = [], []
        for i, device in enumerate(devices):
            static = device.static
            is_storage = static.class_code is not None and static.class_code >> 16 == 0x01
            if not static.has_link and not is_storage:
                continue
            exp = expected.get(device.address)
            address = device.address
            info((address, static.parent or "", (exp.root_port if exp else None) or "", device.port_type or "",
                  _fmt_class(static.class_code), static.vendor_id or "", static.device_id or "",
                  static.subsystem_vendor_id or "", static.subsystem_device_id or "", device.driver or ""), 1)
            aer.append((i, tuple((severity, (address, severity)) for severity, _ in static.aer_files)))
            if not static.has_link:
                continue
            key = (address,)
            linked.append((i, key, exp))
            max_speed(key, static.max_link_speed)
            max_width(key, static.max_link_width)
            if exp is None:
                continue
            verifiable((address, exp.basis, exp.trust_reason), 1 if exp.verifiable else 0)
            exp_speed(key, exp.expected_speed)
            exp_width(key, exp.expected_width)
            exp_bw(key, exp.expected_bandwidth)
            if exp.bottleneck is not None:
                bottleneck((address, exp.bottleneck), exp.bottleneck_bandwidth)
        return _Fixed(rows, linked, aer)
