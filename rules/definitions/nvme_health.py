"""NVMe drives slowed or endangered by their own health: temperature at the drive's warning
threshold, thermal throttling, critical warnings, spare below the drive's threshold."""

CTRL_INFO = "storpath_nvme_controller_info"
TEMP = "storpath_nvme_temperature_celsius"
TEMP_MAX = "storpath_nvme_temperature_max_celsius"
WCTEMP = "storpath_nvme_warning_composite_temperature_celsius"
THROTTLE = "storpath_nvme_thermal_management_time_seconds_total"


def rules(c):
    cfg = c.cfg
    on = c.on("controller")
    model = c.show(CTRL_INFO, ("controller",), inner="{{ .Labels.model }} at {{ .Labels.address }}")
    return [
        c.alert(
            "NvmeTemperatureAboveWarning",
            # The threshold the drive warns at: its over-temperature threshold (hwmon temp1_max,
            # Set Features 04h, which the host may have changed), else WCTEMP. Without hwmon
            # (kernels before 5.5) the SMART log's temperature warning bit says the same.
            c.expr("""
                (
                  ${temp}{sensor="composite"}
                  >= ${on} group_left()
                  (
                    max ${by} (${temp_max}{sensor="composite"})
                    or
                    ${wctemp}
                  )
                )
                or ${on}
                (
                  storpath_nvme_smart_composite_temperature_celsius
                  and ${on}
                  storpath_nvme_critical_warning{bit="temperature"} == 1
                )
            """, temp=TEMP, temp_max=TEMP_MAX, wctemp=WCTEMP, on=on, by=c.by("controller")),
            cfg.temperature_for, cfg.temperature_severity,
            "An NVMe drive is at or above its warning temperature: it throttles and may wear faster.",
            f"""{{{{ $labels.controller }}}} ({model}) is at {{{{ printf "%.1f" $value }}}} °C, at or above its
            warning threshold ({c.show(WCTEMP, ('controller',), fmt='%.1f °C WCTEMP', default='WCTEMP unknown')})
            for {cfg.temperature_for}. Drives throttle their own speed to cool down: check airflow and the
            drive's heatsink (M.2 drives on carrier cards without their cover run hot).""",
        ),
        c.alert(
            "NvmeThermalThrottling",
            c.expr("""
                sum ${by} (increase(${throttle}[${window}])) > ${seconds}
            """, throttle=THROTTLE, by=c.by("controller"), window=cfg.throttle_window,
                   seconds=str(cfg.throttle_min_seconds)),
            cfg.throttle_for, "warning",
            "An NVMe drive has been throttling its speed because of heat.",
            f"""{{{{ $labels.controller }}}} ({model}) spent {{{{ printf "%.0f" $value }}}} s of the last
            {cfg.throttle_window} in thermal management (Thermal Management Temperature 1 and 2 time in its
            SMART log): it ran slower than it can. Cool it: airflow, a heatsink, or load spread over more
            drives.""",
        ),
        c.alert(
            "NvmeCriticalWarning",
            # The temperature and spare bits have alerts of their own, with their numbers.
            'storpath_nvme_critical_warning{bit!~"temperature|available_spare"} == 1',
            cfg.critical_warning_for, "critical",
            "An NVMe drive raises a critical warning: reliability degraded, read-only or backup failed.",
            f"""{{{{ $labels.controller }}}} ({model}) has the `{{{{ $labels.bit }}}}` critical warning set in
            its SMART log. Back up what is on it and plan its replacement; see the runbook for each bit.""",
        ),
        c.alert(
            "NvmeSpareBelowThreshold",
            c.expr("""
                storpath_nvme_available_spare_ratio
                < ${on}
                storpath_nvme_available_spare_threshold_ratio
            """, on=on),
            cfg.spare_for, "critical",
            "An NVMe drive's available spare is below the drive's own threshold.",
            f"""{{{{ $labels.controller }}}} ({model}) has {{{{ $value | humanizePercentage }}}} of its spare
            capacity left, below its threshold of
            {c.show('storpath_nvme_available_spare_threshold_ratio', ('controller',), pipe='humanizePercentage')}:
            the drive is near the end of its life. Replace it.""",
        ),
    ]
