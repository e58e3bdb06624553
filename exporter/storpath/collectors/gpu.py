"""GPUs and accelerators (PCI classes 0x03 and 0x12): the highest link speed and width each
reached over the last window, sampled between scrapes.

Their links train down when idle to save power (NVIDIA's nvidia-smi documents that the
current link generation and width "may be reduced when the GPU is not in use"; amdgpu's
power states carry a PCIe speed and lane width per level), and back up within milliseconds
of work arriving. One reading per scrape would see an idle GPU at 2.5 GT/s and call it
slow, or miss the seconds it was busy. So a background task reads each one's
current_link_speed and current_link_width every `sample_interval` (one second by default:
two small sysfs reads per GPU, readers.link_samples) and the scrape serves the highest of
each over the last `window`: what the link reaches when the device works. The rules
(rules/definitions/gpu.py) compare it with the link's expected speed and width, only when
the device was busy (docs/alerts.md, "GPUs and accelerators").
"""

from __future__ import annotations

from typing import Optional

from storpath.analysis.observed import sampled
from storpath.collectors import Collector, register
from storpath.base.config import Duration
from storpath.scrape.families import GAUGE, Family, Rows

_ADDRESS = ("address",)

MAX_OBSERVED_SPEED = Family(
    "storpath_pcie_max_observed_link_speed_transfers_per_second", GAUGE,
    "Highest link speed a GPU or accelerator trained to over the sampling window (current_link_speed, sampled "
    "between scrapes).", _ADDRESS, "transfers_per_second",
    doc="GPUs and accelerators (PCI classes 0x03, 0x12) only: the highest `current_link_speed` sampled over the "
        "last `collectors.gpu.window` (5 minutes by default; sampled every `sample_interval`, 1 s). Idle, their "
        "links train down to save power; busy, they train up to what both ends allow: this is what the link reaches "
        "when the device works, compared with `storpath_pcie_expected_link_speed_transfers_per_second` by the "
        "GPU rules")
MAX_OBSERVED_WIDTH = Family(
    "storpath_pcie_max_observed_link_width", GAUGE,
    "Most lanes a GPU's or accelerator's link trained to over the sampling window (current_link_width, sampled "
    "between scrapes).", _ADDRESS,
    doc="GPUs and accelerators only: the highest `current_link_width` sampled over the window (some GPUs narrow "
        "their link when idle as well)")
SAMPLES = Family(
    "storpath_pcie_link_samples", GAUGE,
    "Samples of a GPU's or accelerator's link the maxima rest on (the sampling window's).", _ADDRESS,
    doc="how many samples the window's maxima rest on: a few after the exporter starts or the device appears")
GPU_INFO = Family(
    "storpath_pcie_gpu_info", GAUGE,
    "A GPU or accelerator whose link is sampled; `pci_bus_id` is its address as NVML and dcgm-exporter spell it; "
    "always 1.", ("address", "pci_bus_id"),
    doc="a GPU or accelerator whose link is sampled; `pci_bus_id` is its address as NVML and dcgm-exporter spell "
        "it (`00000000:3B:00.0`), the key the GPU rules join dcgm-exporter's utilization on")

FAMILIES = (MAX_OBSERVED_SPEED, MAX_OBSERVED_WIDTH, SAMPLES, GPU_INFO)


def nvml_bus_id(address: str) -> str:
    """'0000:3b:00.0' -> '00000000:3B:00.0' (NVML's busId: an eight-digit domain, upper case)."""
    domain, _, rest = address.partition(":")
    return domain.upper().rjust(8, "0") + ":" + rest.upper()


@register("gpu", default=True)
class GpuCollector(Collector):
    """GPUs' and accelerators' PCIe links at their busiest over a window, sampled between scrapes."""

    families = FAMILIES
    reads = ("pci",)
    enriches = ("pcie_observed",)
    config_defaults = {
        # One second: a busy phase of a few seconds is seen; each sample is two sysfs reads per GPU.
        "sample_interval": Duration(1, minimum=0.1),
        # Longer than any scrape interval, so that no busy phase between two scrapes is missed.
        "window": Duration(300, minimum=1),
    }

    def values(self, snapshot) -> Optional[Rows]:
        gpus = sampled(snapshot.pci)
        if not gpus:
            return None  # no GPU here: no family headers either
        rows = Rows()
        observed = snapshot.pcie_observed or {}
        for address in sorted(gpus):
            rows.add(GPU_INFO, (address, nvml_bus_id(address)), 1)
            seen = observed.get(address)
            if seen is None:
                continue
            rows.add(MAX_OBSERVED_SPEED, (address,), seen.max_speed)
            rows.add(MAX_OBSERVED_WIDTH, (address,), seen.max_width)
            rows.add(SAMPLES, (address,), seen.samples)
        return rows
