"""SAS PHY link rates against what the PHY can do, link errors, and what hangs off each PHY.

Rates, ports and attached devices are read on every scrape (the kernel answers them from
what the driver stored). The link error counters are not: every read of one makes the
driver ask the HBA, or send an SMP request to an expander, so they are read by a
background task on `collectors.sas.error_counters_interval` and the scrape serves the
latest read.
"""

from __future__ import annotations

import threading
import time
from typing import Dict, Iterable, Optional

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from storpath.collectors import Collector, register
from storpath.config import Duration
from storpath.readers.sas import SasPhyErrors, SasReader

TASK = "sas-link-errors"

_RATES = (
    ("negotiated", "negotiated_rate",
     "Physical link rate the PHY negotiated (negotiated_linkrate; \"3.0 Gbit\" is 3e9 bit transfers per second, "
     "before line encoding); absent while no rate is negotiated (Unknown, Phy disabled, Link Rate failed, "
     "Spin-up hold)."),
    ("minimum", "minimum_rate", "Programmed minimum link rate of the PHY (minimum_linkrate)."),
    ("maximum", "maximum_rate",
     "Programmed maximum link rate of the PHY (maximum_linkrate); below the hardware maximum, the PHY is held back."),
    ("hardware_minimum", "hardware_minimum_rate", "Lowest link rate the PHY hardware supports (minimum_linkrate_hw)."),
    ("hardware_maximum", "hardware_maximum_rate", "Highest link rate the PHY hardware supports (maximum_linkrate_hw)."),
)

_COUNTERS = (
    ("invalid_dwords", "invalid_dwords", "Invalid dwords the PHY received (invalid_dword_count)."),
    ("running_disparity_errors", "running_disparity_errors",
     "Running disparity errors the PHY saw (running_disparity_error_count)."),
    ("loss_of_dword_sync", "loss_of_dword_sync",
     "Times the PHY lost dword synchronisation (loss_of_dword_sync_count)."),
    ("reset_problems", "phy_reset_problems", "PHY reset sequences that failed (phy_reset_problem_count)."),
)


@register("sas", default=True)
class SasCollector(Collector):
    """SAS PHY link rates (negotiated, programmed, hardware), link error counters and attached devices."""

    config_defaults = {
        "error_counters_interval": Duration(60),  # how often the link error counters are read
        "startup_wait": Duration(5),  # how long the first scrapes wait for the first counter read
    }

    def __init__(self, ctx):
        super().__init__(ctx)
        cfg = {**self.config_defaults, **(ctx.config or {})}
        self.reader = SasReader(self.roots)
        self.startup_wait = float(cfg["startup_wait"])
        self._lock = threading.Lock()
        self._errors: Dict[str, SasPhyErrors] = {}
        self._errors_read_at: Optional[float] = None
        self._first_read = threading.Event()
        interval = max(1.0, float(cfg["error_counters_interval"]))  # 0 would spin
        self.task = ctx.scheduler.add(TASK, self.read_errors, interval=interval, jitter=min(5.0, interval / 10))

    def read_errors(self) -> None:
        """The background task: one read of every PHY's link error counters."""
        try:
            errors = self.reader.read_errors()
            with self._lock:
                self._errors = errors
                self._errors_read_at = time.time()
        finally:
            self._first_read.set()

    def collect(self) -> Iterable[Metric]:
        phys = self.reader.read(errors=False)
        if self.ctx.scheduler.started and not self._first_read.is_set():
            self._first_read.wait(self.startup_wait)
        with self._lock:
            errors, read_at = self._errors, self._errors_read_at
        labels = ["phy"]
        rates = {attr: GaugeMetricFamily(f"storpath_sas_phy_{name}_link_rate_transfers_per_second", doc, labels=labels)
                 for name, attr, doc in _RATES}
        counters = {attr: CounterMetricFamily(f"storpath_sas_phy_{name}", doc, labels=labels)
                    for name, attr, doc in _COUNTERS}
        attached = GaugeMetricFamily(
            "storpath_sas_phy_attached",
            "1 when a device (end device or expander) is attached through the PHY's port, 0 when nothing is: "
            "an empty PHY is not a slow one.", labels=labels)
        link_up = GaugeMetricFamily(
            "storpath_sas_phy_link_up",
            "1 when the PHY negotiated a link rate, 0 when negotiated_linkrate holds a state instead "
            "(Unknown, Phy disabled, Link Rate failed, Spin-up hold).", labels=labels)
        enabled = GaugeMetricFamily(
            "storpath_sas_phy_enabled",
            "The PHY's `enable` attribute (1 enabled, 0 disabled; read-only where the driver cannot switch PHYs).",
            labels=labels)
        info = GaugeMetricFamily(
            "storpath_sas_phy_info",
            "A SAS PHY, its port and what is attached to it, down to the block device; always 1. "
            "`sas_address` and `device_type` are the PHY's own (the HBA's or the expander's), "
            "`attached_*` describe the device at the far end.",
            labels=["phy", "sas_address", "port", "device_type", "attached_device", "attached_sas_address",
                    "attached_protocols", "device"])

        for phy in phys:
            key = [phy.name]
            for attr, family in rates.items():
                value = getattr(phy, attr)
                if value is not None:
                    family.add_metric(key, value)
            phy_errors = errors.get(phy.name)
            for attr, family in counters.items():
                value = getattr(phy_errors, attr) if phy_errors is not None else None
                if value is not None:
                    family.add_metric(key, value)
            attached.add_metric(key, 1 if phy.attached is not None else 0)
            link_up.add_metric(key, 1 if phy.link_up else 0)
            if phy.enabled is not None:
                enabled.add_metric(key, 1 if phy.enabled else 0)
            remote = phy.attached
            common = [phy.name, phy.sas_address or "", phy.port or "", phy.device_type or "",
                      remote.name if remote else "", (remote.sas_address or "") if remote else "",
                      (remote.target_port_protocols or "") if remote else ""]
            for device in (remote.block_devices if remote and remote.block_devices else ("",)):
                info.add_metric(common + [device], 1)
        read_ts = GaugeMetricFamily(
            "storpath_sas_phy_errors_read_timestamp_seconds",
            "When the link error counters served were read (a background task reads them); absent before the first "
            "read and when replaying a captured machine.")
        if read_at is not None and phys and not self.roots.captured:
            read_ts.add_metric([], read_at)
        return [*rates.values(), *counters.values(), read_ts, attached, link_up, enabled, info]
