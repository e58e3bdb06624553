"""SATA link speed against the limits the controller and libata set."""

from __future__ import annotations

from storpath.analysis.sata import speed_limited
from storpath.collectors import Collector, register
from storpath.families import GAUGE, Family, Rows

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

FAMILIES = (SPEED, HARDWARE_LIMIT, LIMIT, LIMITED)


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
        return rows
