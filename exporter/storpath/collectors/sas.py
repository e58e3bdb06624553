"""SAS PHY link rates against what the PHY can do, link errors, and what hangs off each PHY.

Rates, ports and attached devices are read on every scrape (the kernel answers them from
what the driver stored). The link error counters are not: every read of one makes the
driver ask the HBA, or send an SMP request to an expander, so they are read by a
background task on `collectors.sas.error_counters_interval` and the scrape serves the
latest read. Nor is a SAS drive's own PHY capability: it takes a SCSI command to the drive
(MODE SENSE of the Phy Control And Discover page, readers.sas_pcd), privileged, run by the
background task `sas-drive-phys` at start, when a SAS drive appears (seen on a scrape) and
on `collectors.sas.drive_phys_interval`.
"""

from __future__ import annotations


from storpath.analysis.links import drive_phys, expander_capabilities, sas_expectation
from storpath.collectors import Collector, register
from storpath.base.config import Duration
from storpath.scrape.families import COUNTER, GAUGE, Family, Rows


NEGOTIATED_RATE = Family(
    "storpath_sas_phy_negotiated_link_rate_transfers_per_second", GAUGE,
    "Physical link rate the PHY negotiated (negotiated_linkrate; \"3.0 Gbit\" is 3e9 bit transfers per second, "
    "before line encoding); absent while no rate is negotiated (Unknown, Phy disabled, Link Rate failed, Spin-up "
    "hold).", ("phy",), "transfers_per_second",
    doc="rate the link negotiated (`negotiated_linkrate`); absent while no rate is negotiated")
MINIMUM_RATE = Family(
    "storpath_sas_phy_minimum_link_rate_transfers_per_second", GAUGE,
    "Programmed minimum link rate of the PHY (minimum_linkrate).", ("phy",), "transfers_per_second",
    doc="programmed minimum rate (`minimum_linkrate`, set with lsiutil, sas2ircu or by writing the attribute)")
MAXIMUM_RATE = Family(
    "storpath_sas_phy_maximum_link_rate_transfers_per_second", GAUGE,
    "Programmed maximum link rate of the PHY (maximum_linkrate); below the hardware maximum, the PHY is held "
    "back.", ("phy",), "transfers_per_second",
    doc="programmed maximum rate (`maximum_linkrate`)")
HARDWARE_MINIMUM_RATE = Family(
    "storpath_sas_phy_hardware_minimum_link_rate_transfers_per_second", GAUGE,
    "Lowest link rate the PHY hardware supports (minimum_linkrate_hw).", ("phy",), "transfers_per_second",
    doc="lowest rate the PHY hardware does (`minimum_linkrate_hw`)")
HARDWARE_MAXIMUM_RATE = Family(
    "storpath_sas_phy_hardware_maximum_link_rate_transfers_per_second", GAUGE,
    "Highest link rate the PHY hardware supports (maximum_linkrate_hw).", ("phy",), "transfers_per_second",
    doc="highest rate the PHY hardware does (`maximum_linkrate_hw`)")
INVALID_DWORDS = Family(
    "storpath_sas_phy_invalid_dwords", COUNTER,
    "Invalid dwords the PHY received (invalid_dword_count).", ("phy",),
    doc="`invalid_dword_count`")
RUNNING_DISPARITY_ERRORS = Family(
    "storpath_sas_phy_running_disparity_errors", COUNTER,
    "Running disparity errors the PHY saw (running_disparity_error_count).", ("phy",),
    doc="`running_disparity_error_count`")
LOSS_OF_DWORD_SYNC = Family(
    "storpath_sas_phy_loss_of_dword_sync", COUNTER,
    "Times the PHY lost dword synchronisation (loss_of_dword_sync_count).", ("phy",),
    doc="`loss_of_dword_sync_count`")
RESET_PROBLEMS = Family(
    "storpath_sas_phy_reset_problems", COUNTER,
    "PHY reset sequences that failed (phy_reset_problem_count).", ("phy",),
    doc="`phy_reset_problem_count`")
ERRORS_READ_AT = Family(
    "storpath_sas_phy_errors_read_timestamp_seconds", GAUGE,
    "When the link error counters served were read (a background task reads them); absent before the first read "
    "and when replaying a captured machine.", (), "seconds",
    doc="when the counters served were read; absent before the first read and when replaying a captured machine "
        "(`--path.captured`)")
ATTACHED = Family(
    "storpath_sas_phy_attached", GAUGE,
    "1 when a device (end device or expander) is attached through the PHY's port, 0 when nothing is: an empty PHY"
    " is not a slow one.", ("phy",),
    doc="1 when a device (end device or expander) is attached through the PHY's port, 0 when the PHY is in no "
        "port or its port has no device: an empty bay, not a slow link")
LINK_UP = Family(
    "storpath_sas_phy_link_up", GAUGE,
    "1 when the PHY negotiated a link rate, 0 when negotiated_linkrate holds a state instead (Unknown, Phy "
    "disabled, Link Rate failed, Spin-up hold).", ("phy",),
    doc="1 when `negotiated_linkrate` is a rate, 0 when it is a state")
ENABLED = Family(
    "storpath_sas_phy_enabled", GAUGE,
    "The PHY's `enable` attribute (1 enabled, 0 disabled; read-only where the driver cannot switch PHYs).", ("phy",),
    doc="the `enable` attribute (0 after `echo 0 > enable`; read-only, and 1, where the driver cannot switch "
        "PHYs); absent on kernels without it")
PHY_INFO = Family(
    "storpath_sas_phy_info", GAUGE,
    "A SAS PHY, its port and what is attached to it, down to the block device; always 1. `sas_address` and "
    "`device_type` are the PHY's own (the HBA's or the expander's), `attached_*` describe the device at the far "
    "end.", ("phy", "sas_address", "port", "device_type", "attached_device", "attached_sas_address", "attached_protocols", "device"),
    doc="always 1. `sas_address` and `device_type` are the PHY's own (on an HBA: the HBA's address and `end "
        "device`; on an expander: the expander's and `edge expander`); `port` the port (`port-0:3`, empty when in"
        " none); `attached_device` the rphy at the far end (`end_device-0:3`, `expander-0:0`), "
        "`attached_sas_address` its address, `attached_protocols` its `target_port_protocols` (`ssp` SAS, "
        "`sata`/`stp` SATA, `smp` expander); `device` a block device below the end device (one series per block "
        "device; empty when none). The PHYs of a wide port share their `attached_device`")
ATTACHED_MAX_RATE = Family(
    "storpath_sas_phy_attached_max_link_rate_transfers_per_second", GAUGE,
    "Highest link rate the device at the far end supports: an expander's PHYs' maximum_linkrate_hw, a SATA "
    "drive's IDENTIFY DEVICE word 76 (vpd_pg89), a SAS drive's Phy Control And Discover mode page; absent when "
    "unknown.", ("phy",),
    "transfers_per_second",
    doc="the far end's capability: for an expander the highest `maximum_linkrate_hw` of its own PHYs, for a "
        "SATA drive the fastest generation of its IDENTIFY DEVICE word 76 (from the ATA Information VPD page, "
        "`vpd_pg89`), for a SAS drive the HARDWARE MAXIMUM PHYSICAL LINK RATE of its PHY facing this one (Phy "
        "Control And Discover mode page 0x19/0x01, read by a background task with `sg_modes`, which needs "
        "root); absent where none of these is known (a SAS drive before the first read or without privilege "
        "or sg3-utils, a SATA drive where the kernel gives no `vpd_pg89`)")
EXPECTED_RATE = Family(
    "storpath_sas_phy_expected_link_rate_transfers_per_second", GAUGE,
    "Link rate the PHY should negotiate: the lower of its hardware maximum and the attached device's; absent "
    "when the far end's capability is unknown.", ("phy",), "transfers_per_second",
    doc="the lower of both ends' capability (`maximum_linkrate_hw` and the far end's); absent when either is "
        "unknown")
LINK_VERIFIABLE = Family(
    "storpath_sas_phy_link_verifiable", GAUGE,
    "1 when the PHY's expected rate rests on both ends' capability, else 0 (`basis` none, `reason` "
    "far_end_unknown: a SAS drive whose mode page could not be read, or a SATA drive without vpd_pg89); PHYs "
    "with a device attached only.",
    ("phy", "basis", "reason"),
    doc="1 when the expected rate rests on both ends (`basis=\"both_ends\"`); 0 with `basis=\"none\"` and "
        "`reason=\"far_end_unknown\"` (a SAS drive whose Phy Control And Discover page is not read; a SATA drive whose kernel or HBA gives no `vpd_pg89`) or "
        "`port_limit_unknown` (no `maximum_linkrate_hw`). The below-expected alert judges only verifiable "
        "PHYs; the lowered-minimum one needs no knowledge of the far end")


# (family, attribute of the PHY's record)
_RATES = ((NEGOTIATED_RATE, "negotiated_rate"), (MINIMUM_RATE, "minimum_rate"), (MAXIMUM_RATE, "maximum_rate"),
          (HARDWARE_MINIMUM_RATE, "hardware_minimum_rate"), (HARDWARE_MAXIMUM_RATE, "hardware_maximum_rate"))
_COUNTERS = ((INVALID_DWORDS, "invalid_dwords"), (RUNNING_DISPARITY_ERRORS, "running_disparity_errors"),
             (LOSS_OF_DWORD_SYNC, "loss_of_dword_sync"), (RESET_PROBLEMS, "phy_reset_problems"))

FAMILIES = (NEGOTIATED_RATE, MINIMUM_RATE, MAXIMUM_RATE, HARDWARE_MINIMUM_RATE, HARDWARE_MAXIMUM_RATE, INVALID_DWORDS,
            RUNNING_DISPARITY_ERRORS, LOSS_OF_DWORD_SYNC, RESET_PROBLEMS, ERRORS_READ_AT, ATTACHED, LINK_UP, ENABLED,
            ATTACHED_MAX_RATE, EXPECTED_RATE, LINK_VERIFIABLE, PHY_INFO)


@register("sas", default=True)
class SasCollector(Collector):
    """SAS PHY link rates (negotiated, programmed, hardware), link error counters and attached devices."""

    families = FAMILIES
    reads = ("sas_phys",)
    # The background tasks' results: a task that failed leaves out the error counters or the
    # drives' own capability (their links unverifiable), never the PHYs' rates.
    enriches = ("sas_errors", "sas_drive_phys")
    config_defaults = {
        "error_counters_interval": Duration(60),  # how often the link error counters are read
        # A drive's PHY capability does not change while it is there; a new drive seen on
        # a scrape triggers a read anyway: the interval is a backstop.
        "drive_phys_interval": Duration(6 * 3600),
        "drive_phys_timeout": Duration(10),  # per drive: one that does not answer must not hold the task
        "sg_modes": "sg_modes",
        "startup_wait": Duration(5),  # how long the first scrapes wait for the first counter read
    }

    def values(self, snapshot) -> Rows:
        phys = snapshot.sas_phys
        errors, read_at = snapshot.sas_errors if snapshot.sas_errors is not None else ({}, None)
        rows = Rows()
        expanders = expander_capabilities(phys)
        drives = drive_phys(phys, snapshot.sas_drive_phys)
        for phy in phys:
            key = (phy.name,)
            expectation = sas_expectation(phy, expanders, drives)
            if expectation is not None:
                rows.add(ATTACHED_MAX_RATE, key, expectation.far_end)
                rows.add(EXPECTED_RATE, key, expectation.expected)
                rows.add(LINK_VERIFIABLE, key + (expectation.basis, expectation.reason),
                         1 if expectation.verifiable else 0)
            for family, attr in _RATES:
                rows.add(family, key, getattr(phy, attr))
            phy_errors = errors.get(phy.name)
            for family, attr in _COUNTERS:
                rows.add(family, key, getattr(phy_errors, attr) if phy_errors is not None else None)
            rows.add(ATTACHED, key, 1 if phy.attached is not None else 0)
            rows.add(LINK_UP, key, 1 if phy.link_up else 0)
            if phy.enabled is not None:
                rows.add(ENABLED, key, 1 if phy.enabled else 0)
            remote = phy.attached
            common = (phy.name, phy.sas_address or "", phy.port or "", phy.device_type or "",
                      remote.name if remote else "", (remote.sas_address or "") if remote else "",
                      (remote.target_port_protocols or "") if remote else "")
            for device in (remote.block_devices if remote and remote.block_devices else ("",)):
                rows.add(PHY_INFO, common + (device,), 1)
        if read_at is not None and phys and not self.roots.captured:
            rows.add(ERRORS_READ_AT, (), read_at)
        return rows
