"""Drives behind hardware RAID controllers (MegaRAID/PERC, HPE Smart Array, Adaptec): each
drive's link against both ends, volumes, write cache and battery.

In RAID mode the kernel sees only the volumes, so everything here comes from the vendor
tools (storcli/perccli, ssacli, arcconf, MegaCli), which a background task runs on its own
interval with a timeout, and only where a controller they speak to is bound
(readers.raid); a replay reads their captured outputs. A scrape never waits for a tool: a
tool that is missing, hangs or prints garbage is `storpath_raid_tool_up{tool} 0` with the
reason in the log, and the rest of the scrape is unaffected. Its drives, volumes, controllers
and batteries stay those of its last successful pass, with
`storpath_raid_tool_last_success_timestamp_seconds{tool}` saying how old they are, until a
pass of that tool succeeds or the exporter restarts (docs/metrics.md, "Last known state").
"""

from __future__ import annotations

from typing import Optional

from storpath.analysis.raid import judged, own_link_rate
from storpath.collectors import Collector, register
from storpath.base.config import Duration
from storpath.scrape.families import GAUGE, Family, Rows
from storpath.readers.raid import RaidPass
from storpath.readers.raid.records import BATTERY_STATES, DRIVE_STATES, VOLUME_STATES


TOOL_UP = Family(
    "storpath_raid_tool_up", GAUGE,
    "Whether the RAID tool's last run succeeded (1) or was missing, failed, hung or printed something unexpected (0); "
    "only the tools a bound controller needs.", ("tool",),
    doc="1 when the tool's last run (or captured read) succeeded, 0 when it is missing, failed, hung or printed "
        "something its parser does not understand (the reason is logged); `tool` `storcli` (perccli, storcli2 and "
        "perccli2 too), `megacli`, `ssacli`, `arcconf`, `smartctl` (captured only)")
LAST_SUCCESS = Family(
    "storpath_raid_last_success_timestamp_seconds", GAUGE,
    "When the RAID tools last ran successfully; the details below are that old. Absent when replaying captured "
    "output.", (), "seconds",
    doc="when the tools last all succeeded (the age of the details); absent when replaying captured output")
TOOL_LAST_SUCCESS = Family(
    "storpath_raid_tool_last_success_timestamp_seconds", GAUGE,
    "When the RAID tool's last successful pass ended: while the tool fails, its drives, volumes, controllers and "
    "batteries are that pass's. Absent until it first succeeds, and when replaying captured output.", ("tool",),
    "seconds",
    doc="when the tool's last successful pass ended; while `storpath_raid_tool_up` is 0 its drives, volumes, "
        "controllers and batteries are still exported as that pass saw them (kept until the tool succeeds "
        "again or the exporter restarts), so `time() - this` is their age (RaidToolResultsStale); absent before "
        "the tool's first success and when replaying captured output")
CONTROLLER_INFO = Family(
    "storpath_raid_controller_info", GAUGE,
    "A RAID controller as its tool names it, its model, firmware and PCI function (join `address` with "
    "storpath_pcie_*); always 1.", ("controller", "tool", "model", "firmware", "address", "status"),
    doc="always 1; `controller` is `<tool>/<the tool's id>` (`storcli/c0`, `ssacli/slot5`, `arcconf/1`, "
        "`megacli/a0`), `address` the PCI function (empty when the tool names none and more than one is bound), "
        "`status` the tool's word for the controller (Optimal, OK, Needs Attention)")
CONTROLLER_PORT_RATE = Family(
    "storpath_raid_controller_port_max_link_rate_transfers_per_second", GAUGE,
    "Fastest rate of the controller's drive-side ports (storcli Device Interface SAS-12G, arcconf Global Max SAS "
    "Phy Link Rate); absent where the tool does not say.", ("controller",), "transfers_per_second",
    doc="the controller's end of every drive link (`Device Interface` `SAS-12G` is 12e9); absent for ssacli and "
        "MegaCli, which name none")
BATTERY_STATE = Family(
    "storpath_raid_battery_state", GAUGE,
    "The controller's battery or CacheVault/supercap, as a state set; absent when it has none.",
    ("controller", "state"),
    doc="state set: `ok`, `learning` (charging or a learn cycle: write-back may be suspended), `degraded`, "
        "`failed` (replace it: the cache writes through), `missing`")
DRIVE_INFO = Family(
    "storpath_raid_drive_info", GAUGE,
    "A physical drive behind a RAID controller: slot as the tool names it, interface, media, model and the volume"
    " it belongs to; always 1.", ("controller", "slot", "interface", "media", "model", "volume"),
    doc="always 1; `slot` is the tool's address (`252:0` enclosure:slot, `2E:1:1` port:box:bay, `0,3` "
        "channel,device), `volume` the volume id on the same controller (empty for spares and unconfigured "
        "drives)")
DRIVE_STATE = Family(
    "storpath_raid_drive_state", GAUGE,
    "A physical drive's state, as a state set.", ("controller", "slot", "state"),
    doc="state set: " + ", ".join(f"`{s}`" for s in DRIVE_STATES))
DRIVE_NEGOTIATED = Family(
    "storpath_raid_drive_negotiated_link_rate_transfers_per_second", GAUGE,
    "Rate the drive's link runs at as the tool reports it (storcli Link Speed, ssacli PHY Transfer Rate, arcconf "
    "Transfer Speed); absent when unknown or when it is the controller-to-expander link.", ("controller", "slot"),
    "transfers_per_second",
    doc="the drive's link rate (storcli/MegaCli `Link Speed`, storcli2 `Negotiated Speed`, ssacli `PHY Transfer "
        "Rate`, arcconf `Transfer Speed`; smartctl's IDENTIFY word 77 where the tool says Unknown); absent when "
        "the reported rate exceeds the drive's capability (it is then the controller-to-expander link)")
DRIVE_MAX = Family(
    "storpath_raid_drive_max_link_rate_transfers_per_second", GAUGE,
    "The drive's own fastest link rate (storcli Device Speed, storcli2 Capable Speed, arcconf Programmed Max Speed, "
    "smartctl's IDENTIFY word 76); absent when no source gives it.", ("controller", "slot"),
    "transfers_per_second",
    doc="the drive's capability: storcli/MegaCli `Device Speed`, storcli2 `Capable Speed`, arcconf `Programmed "
        "Max Speed` or per-PHY `Maximum Link Rate`, newer ssacli `PHY Maximum Link Rate`, smartctl "
        "`interface_speed.max` through the controller; absent when none gives it (ssacli before the PHY Maximum "
        "Link Rate field)")
DRIVE_EXPECTED = Family(
    "storpath_raid_drive_expected_link_rate_transfers_per_second", GAUGE,
    "Rate the drive's link should run at: the lower of the controller port's and the drive's capability; absent "
    "when the drive's is unknown.", ("controller", "slot"), "transfers_per_second",
    doc="the lower of both ends (the drive's alone when the controller's is unknown); absent when the drive's "
        "capability is unknown")
DRIVE_VERIFIABLE = Family(
    "storpath_raid_drive_link_verifiable", GAUGE,
    "1 when the drive's expected rate rests on both ends' capability, else 0 with the basis and reason.",
    ("controller", "slot", "basis", "reason"),
    doc="1 with `basis=\"both_ends\"`; 0 with `basis=\"device_only\"`, `reason=\"port_limit_unknown\"` (the tool "
        "names no controller port rate: a lower rate may be the controller's limit) or `basis=\"none\"`, "
        "`reason=\"far_end_unknown\"` (the drive's capability is unknown: ssacli) or `rate_is_expander_link` (the "
        "reported rate is the controller-to-expander link). The below-expected alert judges verifiable drives "
        "only")
VOLUME_INFO = Family(
    "storpath_raid_volume_info", GAUGE,
    "A RAID volume: name, RAID level and the kernel block device it is (join `device` with "
    "storpath_block_device_info and node_disk_*); always 1.", ("controller", "volume", "name", "level", "device"),
    doc="always 1; `volume` the tool's id (`0/0` DG/VD, `1` logical drive), `level` `raid0`, `raid1`, `raid5`, "
        "`raid6`, `raid10`..., `device` the block device (storcli's OS Drive Name, ssacli's Disk Name, else the "
        "SCSI disk at the target its driver gives the volume: channel 2 for megaraid_sas, 0 for aacraid; empty "
        "where none is found)")
VOLUME_STATE = Family(
    "storpath_raid_volume_state", GAUGE,
    "A RAID volume's state, as a state set.", ("controller", "volume", "state"),
    doc="state set: `optimal`, `degraded`, `rebuilding` (degraded with a member rebuilding), `failed`, `other`")
VOLUME_PROGRESS = Family(
    "storpath_raid_volume_operation_progress_ratio", GAUGE,
    "Fraction done of the operation running on the volume (rebuild, initialization, consistency_check, verify).",
    ("controller", "volume", "operation"), "ratio",
    doc="fraction done of the running `operation` (`rebuild`, `initialization`, `consistency_check`, `verify`, "
        "`reconstruction`); absent when none runs or the tool gives no percentage")
VOLUME_WRITE_BACK = Family(
    "storpath_raid_volume_write_back", GAUGE,
    "1 when the volume's write policy is write-back, 0 write-through; `policy` configured (default) or current.",
    ("controller", "volume", "policy"),
    doc="`policy=\"configured\"` the default or initial write policy, `policy=\"current\"` the one in force; "
        "configured 1 with current 0 is the fallback to write-through (battery or CacheVault failed, missing or "
        "relearning; ssacli's `Cache Status: Temporarily Disabled`)")
VOLUME_STRIP = Family(
    "storpath_raid_volume_strip_bytes", GAUGE,
    "The volume's strip size (per drive) in bytes.", ("controller", "volume"), "bytes",
    doc="strip (stripe unit) per drive; a partition on the volume should start on a multiple of it")
VOLUME_SIZE = Family(
    "storpath_raid_volume_size_bytes", GAUGE,
    "The volume's size as the tool reports it.", ("controller", "volume"), "bytes",
    doc="size as the tool prints it (powers of two, rounded as the tool rounds)")

FAMILIES = (TOOL_UP, LAST_SUCCESS, TOOL_LAST_SUCCESS, CONTROLLER_INFO, CONTROLLER_PORT_RATE, BATTERY_STATE,
            VOLUME_INFO, VOLUME_STATE,
            VOLUME_PROGRESS, VOLUME_WRITE_BACK, VOLUME_STRIP, VOLUME_SIZE, DRIVE_INFO, DRIVE_STATE, DRIVE_NEGOTIATED,
            DRIVE_MAX, DRIVE_EXPECTED, DRIVE_VERIFIABLE)


@register("raid", default=True)
class RaidCollector(Collector):
    """Drives, volumes, cache and battery behind hardware RAID controllers (vendor tools run in the background)."""

    families = FAMILIES
    reads = ("raid",)
    config_defaults = {
        "interval": Duration(300),  # how often the tools run: a storcli pass over many drives takes seconds
        "timeout": Duration(60),  # per command: a tool taking longer is killed and reported
        "storcli_path": "storcli",  # also perccli, storcli64, perccli64, storcli2, perccli2 when left as is
        "megacli_path": "MegaCli",  # where storcli is absent (also MegaCli64, megacli)
        "ssacli_path": "ssacli",  # also hpssacli, hpacucli
        "arcconf_path": "arcconf",
        # For SATA drives behind MegaRAID whose capability storcli does not give (-i only: IDENTIFY).
        "smartctl_path": "smartctl",
        "startup_wait": Duration(5),  # how long the first scrapes wait for the first pass
    }

    def values(self, found) -> Optional[Rows]:
        run, last_success = found.raid if found.raid is not None else (None, None)
        if run is None:
            return None  # no RAID controller bound, nothing captured: no families at all
        rows = Rows()
        for tool, status in sorted(run.tools.items()):
            rows.add(TOOL_UP, (tool,), 1.0 if status.ok else 0.0)
        rows.add(LAST_SUCCESS, (), last_success)
        for tool, when in sorted(run.succeeded.items()):
            rows.add(TOOL_LAST_SUCCESS, (tool,), when)
        inventory = run.inventory
        for ctrl in inventory.controllers:
            rows.add(CONTROLLER_INFO, (ctrl.name, ctrl.tool, ctrl.model or "", ctrl.firmware or "",
                                       ctrl.pci_address or "", ctrl.status or ""), 1)
            rows.add(CONTROLLER_PORT_RATE, (ctrl.name,), ctrl.port_rate)
            if ctrl.battery is not None:
                for state in BATTERY_STATES:
                    rows.add(BATTERY_STATE, (ctrl.name, state), 1.0 if state == ctrl.battery else 0.0)
        for volume in inventory.volumes:
            key = (volume.controller, volume.id)
            rows.add(VOLUME_INFO, key + (volume.name or "", volume.level or "", volume.device or ""), 1)
            for state in VOLUME_STATES:
                rows.add(VOLUME_STATE, key + (state,), 1.0 if state == volume.state else 0.0)
            if volume.operation is not None:
                rows.add(VOLUME_PROGRESS, key + (volume.operation,), volume.progress)
            for policy, value in (("configured", volume.write_back_configured),
                                  ("current", volume.write_back_current)):
                if value is not None:
                    rows.add(VOLUME_WRITE_BACK, key + (policy,), 1.0 if value else 0.0)
            rows.add(VOLUME_STRIP, key, volume.strip_bytes)
            rows.add(VOLUME_SIZE, key, volume.size_bytes)
        for drive, _, expectation in judged(inventory.drives, inventory.controllers):  # one each (readers.raid.merge)
            key = (drive.controller, drive.slot)
            rows.add(DRIVE_INFO, key + (drive.interface or "", drive.media or "", drive.model or "",
                                        drive.volume or ""), 1)
            for state in DRIVE_STATES:
                rows.add(DRIVE_STATE, key + (state,), 1.0 if state == drive.state else 0.0)
            rows.add(DRIVE_NEGOTIATED, key, own_link_rate(drive))
            rows.add(DRIVE_MAX, key, drive.capability)
            rows.add(DRIVE_EXPECTED, key, expectation.expected)
            rows.add(DRIVE_VERIFIABLE, key + (expectation.basis, expectation.reason),
                     1 if expectation.verifiable else 0)
        return rows


__all__ = ["RaidCollector", "RaidPass", "FAMILIES"]
