"""NVMe health findings: a drive at or above the temperature it warns at, a drive that has
throttled, critical warnings, spare below the drive's threshold. The same readers as the
nvme_health collector: hwmon always, the SMART log when it can be read (root, nvme-cli, or
a capture made as root), inline here as a one-shot command may wait for it."""

from __future__ import annotations

from typing import List, Optional

from storpath.report.findings import CRITICAL, INFO, WARNING, Facts, Finding, Outcome, natural_key, register
from storpath.readers.nvme_health import HealthResult, celsius

_COOLING = ("Improve the drive's cooling: fit the carrier card's heatsink cover and thermal pads, put a fan on "
            "the slot or move the drive to a cooled bay (U.2/E1.S cool better than M.2); check that nobody "
            "lowered the threshold (`nvme get-feature /dev/{c} -f 4 -H`).")
_BITS = {"reliability": "reliability degraded by media or internal errors",
         "read_only": "media placed in read-only mode",
         "volatile_memory_backup": "volatile memory backup (power-loss protection) failed",
         "persistent_memory_region": "persistent memory region read only"}


def _warning_threshold(max_celsius: Optional[float], result: HealthResult) -> Optional[float]:
    if max_celsius is not None:
        return max_celsius
    if result.thresholds is not None:
        return celsius(result.thresholds.warning_kelvin)
    return None


@register("nvme_health", collector="nvme_health", order=25)
def check(facts: Facts, out: Outcome) -> None:
    controllers = sorted(facts.part("nvme_controllers"), key=lambda c: natural_key(c.name))
    results = facts.part("nvme_smart")
    sensors = facts.part("hwmon")[1]
    unknown: List[str] = []
    reason = ""
    for ctrl in controllers:
        c = ctrl.name
        composite = next((s for s in sensors if s.controller == c and s.sensor == "composite"), None)
        result = results[c]
        smart = result.smart
        if smart is None:
            unknown.append(c)
            reason = result.error or reason
        now = composite.celsius if composite is not None else celsius(smart.composite_kelvin if smart else None)
        threshold = _warning_threshold(composite.max_celsius if composite else None, result)
        hot = now is not None and threshold is not None and now >= threshold
        if hot or (smart is not None and smart.critical_warning & 0x02):
            out.add(Finding(
                subject=c, severity=WARNING, kind="nvme.temperature_above_warning",
                title=f"at {now:.1f} °C, at or above its warning temperature" if now is not None
                else "temperature critical warning set",
                evidence=f"composite {now if now is not None else '?'} °C, warning threshold "
                         f"{threshold if threshold is not None else '?'} °C (hwmon temp1_max, else WCTEMP)",
                impact="the drive throttles itself to cool down: it runs below its rated speed while the link "
                       "looks fine",
                remedy=_COOLING.format(c=c), related=(c,)))
        if smart is not None and sum(smart.tmt_seconds):
            minutes = sum(smart.tmt_seconds) / 60
            out.add(Finding(
                subject=c, severity=WARNING if hot else INFO, kind="nvme.thermal_throttling",
                title=f"has throttled for {minutes:.0f} minutes over its life",
                evidence=f"thermal management level 1: {smart.tmt_transitions[0]} times, {smart.tmt_seconds[0]} s; "
                         f"level 2: {smart.tmt_transitions[1]} times, {smart.tmt_seconds[1]} s; "
                         f"{smart.warning_temperature_minutes} minutes above WCTEMP (SMART log, {result.source})",
                impact="while throttled the drive is slower than it can be; storpath's alerts watch the time "
                       "rising (NvmeThermalThrottling)",
                remedy=_COOLING.format(c=c), related=(c,)))
        if smart is None:
            continue
        for bit, value in smart.warning_bits():
            if value and bit in _BITS:
                out.add(Finding(
                    subject=c, severity=CRITICAL, kind=f"nvme.critical_warning.{bit}",
                    title=f"critical warning: {_BITS[bit]}",
                    evidence=f"SMART log Critical Warning 0x{smart.critical_warning:02x} ({result.source})",
                    impact="the drive's own verdict: it may fail or stop taking writes",
                    remedy="Back up what is on it and replace the drive.", related=(c,)))
        if smart.available_spare < smart.available_spare_threshold:
            out.add(Finding(
                subject=c, severity=CRITICAL, kind="nvme.spare_below_threshold",
                title=f"available spare {smart.available_spare}% below its threshold "
                      f"{smart.available_spare_threshold}%",
                evidence=f"percentage used {smart.percentage_used}%, media errors {smart.media_errors}",
                impact="with little spare left, writes slow down; at none the drive turns read only",
                remedy="Replace the drive.", related=(c,)))
    if unknown:
        out.add(Finding(
            subject=unknown[0] if len(unknown) == 1 else "nvme", severity=INFO, kind="nvme.smart_unknown",
            title=f"SMART log of {', '.join(unknown)} could not be read",
            evidence=reason, impact="throttle time, critical warnings and spare are unknown; hwmon temperatures "
                                    "are still checked",
            remedy="Run `storpath check` as root or install nvme-cli; a capture made as root carries the data.",
            related=tuple(unknown)))
    out.count(len(controllers), "NVMe controllers")
