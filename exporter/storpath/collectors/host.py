"""What machine this is (DMI) and whether it is a virtual machine."""

from __future__ import annotations

from typing import Iterable

from prometheus_client.core import GaugeMetricFamily, Metric

from storpath.collectors import Collector, register
from storpath.readers.host import DMI_FIELDS

LABELS = (*DMI_FIELDS, "hypervisor", "virtualization")


@register("host", default=True)
class HostCollector(Collector):
    """DMI identity of the machine and whether it is a virtual machine (which hypervisor)."""

    def collect(self) -> Iterable[Metric]:
        host = self.ctx.facts.host()
        info = GaugeMetricFamily(
            "storpath_host_info",
            "The machine's DMI identity and whether it is a virtual machine (`virtualization` vm, none or "
            "unknown; `hypervisor` as systemd-detect-virt names it); always 1.", labels=list(LABELS))
        info.add_metric([host.dmi[k] for k in DMI_FIELDS] + [host.hypervisor, host.virtualization], 1)
        return [info]
