"""NVMe health that costs throughput: temperatures and thermal throttling, the critical
warning bits, spare and wear.

The kernel's hwmon temperatures (and the drive's temperature thresholds as hwmon shows
them) are read on every scrape: no privilege, one file per value. The SMART / Health log
and Identify Controller's WCTEMP/CCTEMP need the admin ioctl or nvme-cli: they are read
by the background task `nvme-smart` (every `smart_interval`, 60 s by default, never more
often than every 10 s), and a scrape serves its latest result.
"""

from __future__ import annotations

from typing import List

from storpath.collectors import Collector, register
from storpath.base.config import Duration
from storpath.scrape.families import COUNTER, GAUGE, Family, Rows
from storpath.readers.nvme_health import HealthResult, HwmonSensor, celsius

_CONTROLLER = ("controller",)
_SENSOR = ("controller", "sensor")
_LEVEL = ("controller", "level")

TEMPERATURE = Family(
    "storpath_nvme_temperature_celsius", GAUGE,
    "Temperature of an NVMe sensor now (hwmon tempN_input); sensor `composite` is the drive's Composite Temperature.",
    _SENSOR, "celsius",
    doc="temperature now, from the kernel's nvme hwmon device (`tempN_input`; kernel 5.5+, no privilege). "
        "`sensor` is `composite` (the Composite Temperature the drive throttles by) or `sensor_1`..`sensor_8`")
TEMPERATURE_MAX = Family(
    "storpath_nvme_temperature_max_celsius", GAUGE,
    "Over-temperature threshold of an NVMe sensor (hwmon tempN_max, Set Features Temperature Threshold).",
    _SENSOR, "celsius",
    doc="over-temperature threshold (`tempN_max`, feature 04h): above it the drive sets the temperature critical "
        "warning bit. Starts at a vendor value, usually WCTEMP; the host may change it")
TEMPERATURE_MIN = Family(
    "storpath_nvme_temperature_min_celsius", GAUGE,
    "Under-temperature threshold of an NVMe sensor (hwmon tempN_min).", _SENSOR, "celsius",
    doc="under-temperature threshold (`tempN_min`)")
TEMPERATURE_CRIT = Family(
    "storpath_nvme_temperature_critical_celsius", GAUGE,
    "Critical Composite Temperature Threshold as hwmon shows it (temp1_crit, CCTEMP).", _SENSOR, "celsius",
    doc="critical composite temperature (`temp1_crit`, CCTEMP from Identify Controller): beyond it the drive "
        "may shut down to protect itself")
TEMPERATURE_ALARM = Family(
    "storpath_nvme_temperature_alarm", GAUGE,
    "1 while the drive's temperature critical warning is set (hwmon temp1_alarm), else 0.", _SENSOR,
    doc="1 while the SMART log's temperature critical warning bit is set (`temp1_alarm`): a temperature is over "
        "its over-temperature or under its under-temperature threshold")
WARNING_THRESHOLD = Family(
    "storpath_nvme_warning_composite_temperature_celsius", GAUGE,
    "Warning Composite Temperature Threshold, WCTEMP (Identify Controller).", _CONTROLLER, "celsius",
    doc="WCTEMP from Identify Controller: the composite temperature above which the drive counts warning "
        "temperature time and is outside its normal operating range. Absent when the drive reports 0 or "
        "Identify cannot be read")
CRITICAL_THRESHOLD = Family(
    "storpath_nvme_critical_composite_temperature_celsius", GAUGE,
    "Critical Composite Temperature Threshold, CCTEMP (Identify Controller).", _CONTROLLER, "celsius",
    doc="CCTEMP from Identify Controller")
SMART_TEMPERATURE = Family(
    "storpath_nvme_smart_composite_temperature_celsius", GAUGE,
    "Composite Temperature in the SMART / Health log when last read.", _CONTROLLER, "celsius",
    doc="Composite Temperature from the SMART log (kelvin there), as of the last read (`nvme-smart` task)")
CRITICAL_WARNING = Family(
    "storpath_nvme_critical_warning", GAUGE,
    "One bit of the SMART / Health log's Critical Warning: 1 set, 0 clear.", ("controller", "bit"),
    doc="one Critical Warning bit per series: `available_spare` (below threshold), `temperature` (beyond a "
        "threshold), `reliability` (degraded by media or internal errors), `read_only`, "
        "`volatile_memory_backup` (failed), `persistent_memory_region` (read only)")
AVAILABLE_SPARE = Family(
    "storpath_nvme_available_spare_ratio", GAUGE,
    "Available Spare, as a fraction of the spare capacity (SMART / Health log).", _CONTROLLER, "ratio",
    doc="remaining spare capacity, 0-1 (Available Spare / 100)")
AVAILABLE_SPARE_THRESHOLD = Family(
    "storpath_nvme_available_spare_threshold_ratio", GAUGE,
    "Available Spare Threshold: below it the drive raises the available spare critical warning.", _CONTROLLER,
    "ratio", doc="the drive's own threshold for Available Spare, 0-1")
PERCENTAGE_USED = Family(
    "storpath_nvme_endurance_used_ratio", GAUGE,
    "Percentage Used / 100: the drive's estimate of its life used; may exceed 1.", _CONTROLLER, "ratio",
    doc="Percentage Used / 100, the vendor's estimate of rated endurance used (capped at 2.55)")
MEDIA_ERRORS = Family(
    "storpath_nvme_media_errors", COUNTER,
    "Media and Data Integrity Errors: unrecovered data integrity errors the controller detected.", _CONTROLLER,
    doc="unrecovered ECC, CRC or LBA tag mismatches the controller detected over its life")
WARNING_TEMPERATURE_TIME = Family(
    "storpath_nvme_warning_temperature_time_seconds", COUNTER,
    "Time the composite temperature was at or above WCTEMP (Warning Composite Temperature Time, minutes x 60).",
    _CONTROLLER, "seconds", doc="time at or above WCTEMP, counted by the drive in minutes")
CRITICAL_TEMPERATURE_TIME = Family(
    "storpath_nvme_critical_temperature_time_seconds", COUNTER,
    "Time the composite temperature was at or above CCTEMP (Critical Composite Temperature Time, minutes x 60).",
    _CONTROLLER, "seconds", doc="time at or above CCTEMP, counted by the drive in minutes")
THERMAL_TRANSITIONS = Family(
    "storpath_nvme_thermal_management_transitions", COUNTER,
    "Times the drive entered thermal management level 1 (light) or 2 (heavy throttling).", _LEVEL,
    doc="Thermal Management Temperature 1 / 2 Transition Count: how often the drive started throttling; "
        "`level` 1 is the light step, 2 the heavy one")
THERMAL_TIME = Family(
    "storpath_nvme_thermal_management_time_seconds", COUNTER,
    "Time the drive spent in thermal management level 1 or 2 (throttled).", _LEVEL, "seconds",
    doc="Total Time For Thermal Management Temperature 1 / 2: seconds the drive ran throttled. Its rate is the "
        "fraction of time the drive was slowed down by heat")
SMART_AVAILABLE = Family(
    "storpath_nvme_smart_available", GAUGE,
    "1 if the SMART / Health log of this controller was read, 0 if not; the reason is logged.", _CONTROLLER,
    doc="1 if the last `nvme-smart` pass read the SMART log, 0 if not (no root or CAP_SYS_ADMIN, no nvme-cli; "
        "reason in the log). Absent until the first pass")
SMART_TIMESTAMP = Family(
    "storpath_nvme_smart_timestamp_seconds", GAUGE,
    "When the SMART / Health log served for this controller was read (captured data: when it was captured).",
    _CONTROLLER, "seconds", doc="when the SMART log served was read; for captured data, the file's mtime")

FAMILIES = (TEMPERATURE, TEMPERATURE_MAX, TEMPERATURE_MIN, TEMPERATURE_CRIT, TEMPERATURE_ALARM, WARNING_THRESHOLD,
            CRITICAL_THRESHOLD, SMART_TEMPERATURE, CRITICAL_WARNING, AVAILABLE_SPARE, AVAILABLE_SPARE_THRESHOLD,
            PERCENTAGE_USED, MEDIA_ERRORS, WARNING_TEMPERATURE_TIME, CRITICAL_TEMPERATURE_TIME, THERMAL_TRANSITIONS,
            THERMAL_TIME, SMART_AVAILABLE, SMART_TIMESTAMP)

MIN_INTERVAL = 10.0


def smart_rows(controller: str, result: HealthResult, rows: Rows) -> None:
    """The series of one controller's SMART log and thresholds (pure: rows from a result)."""
    ctrl = (controller,)
    if result.thresholds is not None:
        rows.add(WARNING_THRESHOLD, ctrl, celsius(result.thresholds.warning_kelvin))
        rows.add(CRITICAL_THRESHOLD, ctrl, celsius(result.thresholds.critical_kelvin))
    smart = result.smart
    rows.add(SMART_AVAILABLE, ctrl, 0 if smart is None else 1)
    if smart is None:
        return
    rows.add(SMART_TEMPERATURE, ctrl, celsius(smart.composite_kelvin))
    for bit, value in smart.warning_bits():
        rows.add(CRITICAL_WARNING, (controller, bit), value)
    rows.add(AVAILABLE_SPARE, ctrl, smart.available_spare / 100)
    rows.add(AVAILABLE_SPARE_THRESHOLD, ctrl, smart.available_spare_threshold / 100)
    rows.add(PERCENTAGE_USED, ctrl, smart.percentage_used / 100)
    rows.add(MEDIA_ERRORS, ctrl, smart.media_errors)
    rows.add(WARNING_TEMPERATURE_TIME, ctrl, smart.warning_temperature_minutes * 60)
    rows.add(CRITICAL_TEMPERATURE_TIME, ctrl, smart.critical_temperature_minutes * 60)
    for level in (0, 1):
        rows.add(THERMAL_TRANSITIONS, (controller, str(level + 1)), smart.tmt_transitions[level])
        rows.add(THERMAL_TIME, (controller, str(level + 1)), smart.tmt_seconds[level])
    rows.add(SMART_TIMESTAMP, ctrl, result.read_at)


def hwmon_rows(sensors: List[HwmonSensor], rows: Rows) -> None:
    for s in sensors:
        labels = (s.controller, s.sensor)
        rows.add(TEMPERATURE, labels, s.celsius)
        rows.add(TEMPERATURE_MAX, labels, s.max_celsius)
        rows.add(TEMPERATURE_MIN, labels, s.min_celsius)
        rows.add(TEMPERATURE_CRIT, labels, s.crit_celsius)
        rows.add(TEMPERATURE_ALARM, labels, s.alarm)


@register("nvme_health", default=True)
class NvmeHealthCollector(Collector):
    """NVMe temperatures (hwmon, every scrape), thermal throttling, critical warnings and spare (SMART log)."""

    families = FAMILIES
    reads = ("hwmon",)
    enriches = ("nvme_smart",)  # a failed SMART pass leaves out its rows, not the hwmon temperatures
    config_defaults = {
        # The SMART log changes slowly (minutes of throttle time, percent of spare): a
        # minute is fine-grained enough for alerts and cheap for the drive.
        "smart_interval": Duration(60),
        "smart_timeout": Duration(10),
        "nvme_cli": "nvme",
        # How long the first scrapes after start wait for the first SMART pass.
        "startup_wait": Duration(5),
    }

    def values(self, snapshot) -> Rows:
        names, sensors = snapshot.hwmon
        results = snapshot.nvme_smart if snapshot.nvme_smart is not None else {}
        rows = Rows()
        hwmon_rows(sensors, rows)
        for name in names:
            if name in results:
                smart_rows(name, results[name], rows)
        return rows
