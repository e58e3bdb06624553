"""SATA link speed against the limits the controller and libata set."""

from __future__ import annotations

from typing import Iterable

from prometheus_client.core import GaugeMetricFamily, Metric

from storpath.analysis.sata import speed_limited
from storpath.collectors import Collector, register
from storpath.readers.ata import AtaReader


@register("sata", default=True)
class SataCollector(Collector):
    """SATA link speed (sata_spd) and the hardware and current speed limits of every ATA link."""

    def __init__(self, ctx):
        super().__init__(ctx)
        self.reader = AtaReader(self.roots)

    def collect(self) -> Iterable[Metric]:
        labels = ["link", "device"]
        speed = GaugeMetricFamily(
            "storpath_sata_link_speed_transfers_per_second",
            "Speed the SATA link runs at (sata_spd; \"6.0 Gbps\" is 6e9 bit transfers per second, before line "
            "encoding); absent while the link is down.", labels=labels)
        hardware_limit = GaugeMetricFamily(
            "storpath_sata_link_hardware_limit_transfers_per_second",
            "Speed limit of the controller's port (hw_sata_spd_limit, lowered by libata.force); "
            "absent when the controller sets none.", labels=labels)
        limit = GaugeMetricFamily(
            "storpath_sata_link_limit_transfers_per_second",
            "Speed limit libata applies now (sata_spd_limit; error handling lowers it after link errors); "
            "absent when there is none.", labels=labels)
        limited = GaugeMetricFamily(
            "storpath_sata_link_limited",
            "1 when libata holds the link's speed limit below the controller's (lowered after link errors), else 0.",
            labels=labels)
        for link in self.reader.read():
            for device in link.block_devices or ("",):
                key = [link.name, device]
                for family, value in ((speed, link.speed), (hardware_limit, link.hardware_limit),
                                      (limit, link.limit)):
                    if value is not None:
                        family.add_metric(key, value)
                limited.add_metric(key, 1 if speed_limited(link) else 0)
        return [speed, hardware_limit, limit, limited]
