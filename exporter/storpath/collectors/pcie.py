"""PCIe link speed and width against what both ends of the link support."""

from __future__ import annotations

from typing import Dict

from storpath.analysis.demand import link_demands
from storpath.analysis.pcie import CAP_CAUSES, current_bandwidth, judge, port_end
from storpath.collectors import Collector, register
from storpath.base.config import Duration
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
TARGET_SPEED = Family(
    "storpath_pcie_target_link_speed_transfers_per_second", GAUGE,
    "Target Link Speed of the link's port end (Link Control 2), read for links below their own maximum.", _ADDRESS,
    "transfers_per_second",
    doc="the Target Link Speed (Link Control 2, PCIe Base Spec 7.5.3.19) of the port end of this address's link: "
        "the highest speed the port lets the link train to. Read from config space, which only root can read "
        "past its first 64 bytes, and only for links running below an end's own maximum (re-read every scrape: "
        "the kernel, firmware or setpci may change it). A serve without that privilege asks `storpath helper` "
        "(`--helper.socket`) in a background pass every `collectors.pcie.target_speed_interval` (60 s; at once "
        "when another link drops below its maximum). Absent where not read or not readable: the target is then "
        "unknown, never assumed")
LINK_CAPPED = Family(
    "storpath_pcie_link_capped", GAUGE,
    "1 when the link trained at a Target Link Speed set below both ends' capability (a deliberate cap, not a "
    "fault); `cause` says who set it.", ("address", "cause"),
    doc="1 when the link runs at its port's Target Link Speed and that target is below what both ends support: "
        "the link trained as it was told, so PcieLinkSpeedBelowExpected does not fire (PcieLinkCapped, info). "
        "`cause`: `bandwidth_controller` (the kernel's PCIe bandwidth controller, Linux 6.13 and later: its "
        "thermal cooling device `PCIe_Port_Link_Speed_<port>` shows transitions or time in another state in "
        "`stats/`), `unknown` (no cooling device changed it: firmware, a driver, a tool such as setpci, or a "
        "kernel quirk holding 2.5 GT/s; sysfs does not say which). Absent for links not capped")
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
LINK_CHANGES = Family(
    "storpath_pcie_link_changes", COUNTER,
    "Changes of a watched link's speed or width, sampled between scrapes (current_link_speed and "
    "current_link_width every collectors.pcie.link_sample_interval).", ("address",),
    doc="changes of the link's speed or width that a background task saw sampling `current_link_speed` and "
        "`current_link_width` every `collectors.pcie.link_sample_interval` (1 s by default), for the functions of "
        "the classes in `collectors.pcie.link_sample_classes` (storage, network and GPUs by default; `bridge` adds "
        "switch and root ports, `all` every link). A link that drops and retrains between two scrapes moves it "
        "while both scrapes read the same gauges; PcieLinkFlapping is judged on its increase. Counted from when "
        "the exporter first saw the function")
LINK_CHANGE_CAUSES = Family(
    "storpath_pcie_link_change_causes", COUNTER,
    "Changes of a watched link's speed or width by the kernel's cause, from its pcie_link_event tracepoint.",
    ("address", "cause"),
    doc="the changes of `storpath_pcie_link_changes_total` by the cause the kernel gave, where they are counted "
        "from its `pcie_link_event` tracepoint (`storpath_pcie_link_changes_source{source=\"tracepoint\"}`): "
        "`cause` is `retrain` (the link was retrained), `bwctrl_irq` (the port's bandwidth controller saw the "
        "link change on its own: a fault or a device's power management), `bwctrl_enable`, `add_bus`, `hotplug`, "
        "or `other` (a reason newer than storpath); a cause appears once it has counted. Absent where the "
        "links are sampled")
LINK_CHANGES_SOURCE = Family(
    "storpath_pcie_link_changes_source", GAUGE,
    "What counts storpath_pcie_link_changes_total: the kernel's tracepoint, the sampler, or none; always 1.",
    ("source",),
    doc="what counts `storpath_pcie_link_changes_total`: `tracepoint` (the kernel's `pcie_link_event` events, "
        "every change), `sampler` (`current_link_speed` and `current_link_width` read every "
        "`collectors.pcie.link_sample_interval`: a change and its return within one interval are missed) or "
        "`none` (`link_sample_classes: []`); always 1. Absent in one-shot commands")
DEVICE_INFO = Family(
    "storpath_pcie_device_info", GAUGE,
    "PCI identity and place in the tree of a device with a PCIe link or a storage controller; always 1.",
    INFO_LABELS,
    doc="identity and place in the tree of every device with a PCIe link and of every storage controller. "
        "`upstream` is the bridge above, `root_port` the root port of its path, `port_type` one of `endpoint`, "
        "`root_port`, `upstream_port`, `downstream_port`, `legacy_endpoint`, `rc_integrated_endpoint`, ... "
        "(from config space when readable, else from the tree)")

SUSPENDED = Family(
    "storpath_pcie_device_suspended", GAUGE,
    "1 for a device that sleeps (runtime-suspended, or in D3hot or D3cold): its link is not read, so as not to wake "
    "it, and its link series are as last read while it was awake; absent for a device that is awake.",
    ("address", "state"),
    doc="1 for a device with a PCIe link that sleeps: `power/runtime_status` says suspended, or `power_state` "
        "D3hot or D3cold (`state`: `D3cold`, `D3hot`, or `suspended` where the kernel has no `power_state`). "
        "Reading its link attributes or config space would wake it (kernels with \"PCI/sysfs: Ensure devices are "
        "powered for config reads\") or, on older kernels, read all-ones: storpath reads neither. Its "
        "`current_link_*` series and verdicts are then the link as last read while it was awake "
        "(`storpath_pcie_link_last_read_timestamp_seconds` says when), or absent if it has slept since storpath "
        "started. Absent for a device that is awake")
LINK_LAST_READ = Family(
    "storpath_pcie_link_last_read_timestamp_seconds", GAUGE,
    "When the link series of a sleeping device were read, while it was awake, in Unix seconds.", _ADDRESS,
    "seconds",
    doc="a sleeping device's (`storpath_pcie_device_suspended`) link as served was read at this time, the last "
        "scrape that found it awake; absent for a device that is awake (its link is read on every scrape) and "
        "for one never seen awake")
SUSPENDED_TIME = Family(
    "storpath_pcie_runtime_suspended_seconds", COUNTER,
    "Time a sleeping device has spent runtime-suspended since boot (power/runtime_suspended_time).", _ADDRESS,
    "seconds",
    doc="a sleeping device's time runtime-suspended since boot, from `power/runtime_suspended_time` "
        "(milliseconds); its rate is 1 while it sleeps. Only for sleeping devices: an awake device's is not read")

FAMILIES = (CURRENT_SPEED, MAX_SPEED, EXPECTED_SPEED, CURRENT_WIDTH, MAX_WIDTH, EXPECTED_WIDTH, CURRENT_BANDWIDTH,
            EXPECTED_BANDWIDTH, BOTTLENECK, LINK_DEMAND, VERIFIABLE, TARGET_SPEED, LINK_CAPPED, DESIGN, AER_ERRORS,
            LINK_CHANGES, LINK_CHANGE_CAUSES, LINK_CHANGES_SOURCE, DEVICE_INFO, SUSPENDED, LINK_LAST_READ, SUSPENDED_TIME)


def _fmt_class(code):
    return "0x%06x" % code if code is not None else ""


@register("pcie", default=True)
class PcieCollector(Collector):
    """PCIe link speed and width of every PCI device, against what its link should train to."""

    families = FAMILIES
    reads = ("pci", "pcie_expected")
    # pcie_targets: with `storpath helper`, the Target Link Speeds it read (given to the devices
    # of the scrape: storpath.scrape.slow.PcieTargets)
    enriches = ("net_ports", "pcie_link_changes", "pcie_targets")  # without one, only its rows are left out
    config_defaults = {
        # One second: a link that drops and retrains is seen unless it does so within the second;
        # each sample is two small sysfs reads per watched function (docs/performance.md).
        "link_sample_interval": Duration(1, minimum=0.1),
        # Whose links are sampled for changes: storage, network, gpu, bridge, or all; [] samples none.
        "link_sample_classes": ["storage", "network", "gpu"],
        # With --helper.socket: how often the helper is asked for the Target Link Speed of the
        # links below their maximum (sooner when another link drops), and its bound for each.
        "target_speed_interval": Duration(60, minimum=10),
        "target_speed_timeout": Duration(5, minimum=0.1),
        # Who counts the changes: sampler, or tracepoint (the kernel's pcie_link_event, read
        # from a tracefs instance root made and enabled; sampling where it cannot be read); auto
        # is tracepoint. The sampler is the default: tracefs is root's (docs/metrics.md).
        "link_change_source": "sampler",
        "link_trace_instance": "storpath",  # the tracefs instance read; "" the top trace_pipe
        "link_trace_max_bytes": 1048576,  # the most one pass reads of trace_pipe (about 7000 events)
    }
    # Slow sources a one-shot command or a serve without a helper does not have: their rows are
    # left out, nothing reported missing.
    OPTIONAL_SOURCES = ("pcie_link_changes", "pcie_targets")

    def __init__(self, ctx):
        super().__init__(ctx)
        own = {source.name for source in self.sources()}
        # no sampler in a one-shot command (a window needs time): nothing to count; no helper: no targets from it
        self.enriches = tuple(name for name in self.enriches if name not in self.OPTIONAL_SOURCES or name in own)

    def values(self, snapshot) -> Rows:
        devices = snapshot.pci
        expected = snapshot.pcie_expected
        demands = link_demands(devices, expected, snapshot.net_ports or ())
        record = snapshot.pcie_link_changes
        changes = record.counts if record is not None else {}
        causes: Dict[str, list] = {}
        for (address, cause), count in sorted(record.causes.items()) if record is not None else ():
            causes.setdefault(address, []).append((cause, count))
        by_address = {d.address: d for d in devices}
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
            if device.asleep is not None:
                rows.add(SUSPENDED, (address, device.asleep), 1)
                rows.add(LINK_LAST_READ, key, device.link_read_at)
                rows.add(SUSPENDED_TIME, key, device.suspended_seconds)
            rows.add(CURRENT_SPEED, key, device.current_link_speed)
            rows.add(MAX_SPEED, key, static.max_link_speed)
            rows.add(CURRENT_WIDTH, key, device.current_link_width)
            rows.add(MAX_WIDTH, key, static.max_link_width)
            if address in changes:
                rows.add(LINK_CHANGES, key, changes[address])
                for cause, count in causes.get(address, ()):
                    rows.add(LINK_CHANGE_CAUSES, (address, cause), count)
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
            port = port_end(device, exp, by_address)
            if port is not None and port.target_link_speed is not None:
                rows.add(TARGET_SPEED, key, port.target_link_speed)
                verdict = judge(device, exp, port)
                if verdict.capped and verdict.cap_cause in CAP_CAUSES:
                    rows.add(LINK_CAPPED, (address, verdict.cap_cause), 1)
            demand = demands.get(address)
            if demand is not None:
                rows.add(LINK_DEMAND, (address, demand.source), demand.bytes_per_second)
        if record is not None:
            rows.add(LINK_CHANGES_SOURCE, (record.source,), 1)
        return rows
