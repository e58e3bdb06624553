"""PCIe link speed and width against what both ends of the link support."""

from __future__ import annotations

from storpath.analysis.demand import link_demands
from storpath.analysis.pcie import current_bandwidth
from storpath.collectors import Collector, register
from storpath.scrape.families import COUNTER, GAUGE, Family, Rows

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
LINK_DEMAND = Family(
    "storpath_pcie_link_demand_bytes_per_second", GAUGE,
    "What the device can use of its link per direction: its network ports' line rates added up (`source` "
    "network_ports) or the links below a switch's downstream ports (switch_links), at most its own link's capability.",
    ("address", "source"), "bytes_per_second",
    doc="device ends only (the first function of a multi-function device: all share one link): what the device "
        "can use of its link per direction, at most what its own link could carry. `source=\"network_ports\"`: a "
        "NIC's ports' line rates added up (/sys/class/net/*/speed of its functions; a port whose link is down "
        "counts nothing); `source=\"switch_links\"`: a switch's upstream port, the expected bandwidths of the "
        "links below its downstream ports added up. Absent where storpath cannot say (HBAs, RAID controllers, "
        "drives). Above `storpath_pcie_expected_link_bandwidth_bytes_per_second`, the slot is the device's "
        "bottleneck (PcieSlotBelowDeviceDemand)")
VERIFIABLE = Family(
    "storpath_pcie_link_verifiable", GAUGE,
    "1 when the link's verdict rests on the registers of both its ends (bare metal); 0 when it cannot: `basis` "
    "device_only (the port is emulated, or claims fewer lanes than the device runs at: judged against the device's own "
    "capability), none (nothing to judge: an emulated device or port, an empty slot, no port above the device); "
    "`reason` says why.", ("address", "basis", "reason"),
    doc="1 when the link's verdict rests on the registers of both its ends (`basis=\"both_ends\"`: bare metal); 0 "
        "when it cannot. `basis=\"device_only\"`: the port above is emulated (`reason=\"emulated_port\"`: a virtual "
        "machine's ports report whatever their hypervisor chose) or claims fewer lanes than the device runs at "
        "(`reason=\"ends_disagree\"`, which no real link does): the expected link is then the device's own "
        "capability, so a real downgrade its own registers show still counts, but a placement verdict is not "
        "possible. `basis=\"none\"`: nothing to judge (`emulated_device`: QEMU, virtio, VMware, Hyper-V... "
        "functions; `emulated_port` on a VM's port end; `no_partner`: an empty slot, a root-complex integrated "
        "endpoint or a device passed through onto the root bus, whose link registers read zero). Absent for "
        "functions without link attributes")
DESIGN = Family(
    "storpath_pcie_link_design_info", GAUGE,
    "A link the platform wires narrower than both its ends advertise (a vendor-documented platform fact): its "
    "expected width is the design's; always 1.", ("address", "design"),
    doc="both ends of a link that a documented platform fact (storpath.analysis.platform) wires narrower than both "
        "ends advertise; always 1. `design` names the fact, e.g. `amd_am4_x570_chipset_x4`: AMD's X570 chipset "
        "is attached to an AM4 processor by PCIe 4.0 x4 though the root port and the chipset's upstream port "
        "both advertise x8. `storpath_pcie_expected_link_width` is then the design's width, so such a link is "
        "not trained below expected")
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
            EXPECTED_BANDWIDTH, BOTTLENECK, LINK_DEMAND, VERIFIABLE, DESIGN, AER_ERRORS, DEVICE_INFO)


def _fmt_class(code):
    return "0x%06x" % code if code is not None else ""


@register("pcie", default=True)
class PcieCollector(Collector):
    """PCIe link speed and width of every PCI device, against what its link should train to."""

    families = FAMILIES
    reads = ("pci", "pcie_expected")
    enriches = ("net_ports",)  # a NIC's demand: without it, only those rows are left out

    def values(self, snapshot) -> Rows:
        devices = snapshot.pci
        expected = snapshot.pcie_expected
        demands = link_demands(devices, expected, snapshot.net_ports or ())
        rows = Rows()
        for device in devices:
            static = device.static
            is_storage = static.class_code is not None and static.class_code >> 16 == 0x01
            if not static.has_link and not is_storage:
                continue
            address = device.address
            exp = expected.get(address)
            rows.add(DEVICE_INFO, (address, static.parent or "", (exp.root_port if exp else None) or "",
                                   device.port_type or "", _fmt_class(static.class_code), static.vendor_id or "",
                                   static.device_id or "", static.subsystem_vendor_id or "",
                                   static.subsystem_device_id or "", device.driver or ""), 1)
            for severity, _ in static.aer_files:
                rows.add(AER_ERRORS, (address, severity), device.aer_totals.get(severity))
            if not static.has_link:
                continue
            key = (address,)
            rows.add(CURRENT_SPEED, key, device.current_link_speed)
            rows.add(MAX_SPEED, key, static.max_link_speed)
            rows.add(CURRENT_WIDTH, key, device.current_link_width)
            rows.add(MAX_WIDTH, key, static.max_link_width)
            if exp is None:
                continue
            rows.add(VERIFIABLE, (address, exp.speed.basis, exp.speed.reason), 1 if exp.speed.verifiable else 0)
            rows.add(EXPECTED_SPEED, key, exp.speed.expected)
            rows.add(EXPECTED_WIDTH, key, exp.expected_width)
            if exp.design is not None:
                rows.add(DESIGN, (address, exp.design), 1)
            rows.add(CURRENT_BANDWIDTH, key, current_bandwidth(device, exp))
            rows.add(EXPECTED_BANDWIDTH, key, exp.expected_bandwidth)
            if exp.bottleneck is not None:
                rows.add(BOTTLENECK, (address, exp.bottleneck), exp.bottleneck_bandwidth)
            demand = demands.get(address)
            if demand is not None:
                rows.add(LINK_DEMAND, (address, demand.source), demand.bytes_per_second)
        return rows
