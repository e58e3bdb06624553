"""SATA link speed against the limits the controller and libata set, and against what both
ends of the link can do (the port's limit and the drive's IDENTIFY data)."""

from __future__ import annotations

from storpath.analysis.links import sata_expectation
from storpath.analysis.sata import speed_limited
from storpath.collectors import Collector, register
from storpath.scrape.families import GAUGE, Family, Rows

_LABELS = ("link", "device")

SPEED = Family(
    "storpath_sata_link_speed_transfers_per_second", GAUGE,
    "Speed the SATA link runs at (sata_spd; \"6.0 Gbps\" is 6e9 bit transfers per second, before line encoding); "
    "absent while the link is down.", _LABELS, "transfers_per_second",
    doc="speed the link runs at (`sata_spd`); absent while the link is down")
HARDWARE_LIMIT = Family(
    "storpath_sata_link_hardware_limit_transfers_per_second", GAUGE,
    "Speed limit of the controller's port (hw_sata_spd_limit, lowered by libata.force); absent when the controller "
    "sets none.", _LABELS, "transfers_per_second",
    doc="the port's hardware limit (`hw_sata_spd_limit`); absent when none is set")
LIMIT = Family(
    "storpath_sata_link_limit_transfers_per_second", GAUGE,
    "Speed limit libata applies now (sata_spd_limit; error handling lowers it after link errors); absent when "
    "there is none.", _LABELS, "transfers_per_second",
    doc="the limit libata applies now (`sata_spd_limit`); absent when none is set")
LIMITED = Family(
    "storpath_sata_link_limited", GAUGE,
    "1 when libata holds the link's speed limit below the controller's (lowered after link errors), else 0.", _LABELS,
    doc="1 when libata holds the link's limit below the hardware's (a set `sata_spd_limit` under an unset or higher "
        "`hw_sata_spd_limit`: lowered after link errors), else 0. `libata.force` lowers both limits alike and so "
        "reads 0")

DEVICE_MAX_SPEED = Family(
    "storpath_sata_device_max_link_speed_transfers_per_second", GAUGE,
    "Fastest SATA generation the drive supports (IDENTIFY DEVICE word 76, from the ATA device's `id` "
    "attribute); absent when the drive does not report it.", _LABELS, "transfers_per_second",
    doc="the drive's own capability: the fastest generation IDENTIFY DEVICE word 76 lists (1.5, 3.0 or 6.0 "
        "Gbit/s), read from `/sys/class/ata_device/devP.D/id`; absent when the word reads 0x0000 or 0xFFFF")
EXPECTED_SPEED = Family(
    "storpath_sata_link_expected_speed_transfers_per_second", GAUGE,
    "Speed the SATA link should run at: the lower of the port's hardware limit and the drive's capability; "
    "absent when the drive's capability is unknown.", _LABELS, "transfers_per_second",
    doc="the lower of both ends: the port's `hw_sata_spd_limit` and the drive's IDENTIFY word 76; the "
        "drive's alone when the port sets no limit (`basis=\"device_only\"`); absent when the drive does not "
        "say")
VERIFIABLE = Family(
    "storpath_sata_link_verifiable", GAUGE,
    "1 when the link's expected speed rests on both ends (the port's hardware limit and the drive's IDENTIFY "
    "data), else 0: `basis` device_only (the port sets no limit) or none (the drive does not report its "
    "capability); `reason` says why.", _LABELS + ("basis", "reason"),
    doc="1 when the expected speed rests on both ends (`basis=\"both_ends\"`); 0 with `basis=\"device_only\"`, "
        "`reason=\"port_limit_unset\"` when `hw_sata_spd_limit` reads `<unknown>` (most boards leave SControl's "
        "speed field at 0, so a slower port cannot be ruled out), or `basis=\"none\"`, "
        "`reason=\"far_end_unknown\"` when the drive's IDENTIFY data gives no SATA capability. The alert judges "
        "only verifiable links. One series per link with a drive")

FAMILIES = (SPEED, HARDWARE_LIMIT, LIMIT, LIMITED, DEVICE_MAX_SPEED, EXPECTED_SPEED, VERIFIABLE)


@register("sata", default=True)
class SataCollector(Collector):
    """SATA link speed (sata_spd) and the hardware and current speed limits of every ATA link."""

    families = FAMILIES
    reads = ("ata_links",)

    def values(self, snapshot) -> Rows:
        rows = Rows()
        for link in snapshot.ata_links:
            for device in link.block_devices or ("",):
                key = (link.name, device)
                rows.add(SPEED, key, link.speed)
                rows.add(HARDWARE_LIMIT, key, link.hardware_limit)
                rows.add(LIMIT, key, link.limit)
                rows.add(LIMITED, key, 1 if speed_limited(link) else 0)
                if not link.block_devices and link.speed is None:
                    continue  # nothing attached: no far end to judge
                expectation = sata_expectation(link)
                rows.add(DEVICE_MAX_SPEED, key, link.device_capability.maximum)
                rows.add(EXPECTED_SPEED, key, expectation.expected)
                rows.add(VERIFIABLE, key + (expectation.basis, expectation.reason),
                         1 if expectation.verifiable else 0)
        return rows
