"""NVMe namespaces formatted with a slower LBA format than the drive offers."""

LBA = "storpath_nvme_namespace_lba_size_bytes"
BEST = "storpath_nvme_namespace_best_lba_size_bytes"
NS_INFO = "storpath_nvme_namespace_info"
CTRL_INFO = "storpath_nvme_controller_info"


def rules(c):
    cfg = c.cfg
    model = c.show(CTRL_INFO, ("controller",), inner="{{ .Labels.model }} at {{ .Labels.address }}")
    return [
        c.alert(
            "NvmeNamespaceLbaFormatNotBest",
            # `best` is ranked among the formats with the metadata size in use (Relative
            # Performance, then data size): a format the namespace can be changed to without
            # changing what the host stores per block. Absent while Identify is unknown.
            c.expr("""
                (
                  ${lba} != ${on} ${best}
                )
                * ${on} group_left(controller, nsid) ${ns_info}
            """, lba=LBA, best=BEST, ns_info=NS_INFO, on=c.on("device")),
            cfg.lba_format_for, cfg.lba_format_severity,
            "An NVMe namespace uses a slower LBA format than its drive supports.",
            f"""{{{{ $labels.device }}}} (namespace {{{{ $labels.nsid }}}} of {{{{ $labels.controller }}}},
            {model}) is formatted with {{{{ printf "%.0f" $value }}}}-byte logical blocks, but the drive's
            best format uses {c.show(BEST, ('device',), fmt='%.0f-byte')} blocks (Identify Namespace,
            Relative Performance). Changing the format with `nvme format` ERASES the namespace: see the
            runbook.""",
        ),
        c.alert(
            "NvmeIdentifyUnavailable",
            # A notice, not a standing alert: the shipped unprivileged deployments cannot read
            # Identify on purpose. Fires while a controller has been unreadable for less than the
            # notice window (a new deployment, or one that lost the capability), then stays quiet.
            c.expr("""
                storpath_nvme_identify_available == 0
                unless ${on}
                last_over_time(storpath_nvme_identify_available[${notice}] offset ${notice}) == 0
            """, on=c.on("controller"), notice=cfg.identify_unavailable_notice),
            cfg.identify_unavailable_for, "info",
            "NVMe Identify data cannot be read: the LBA format check is off.",
            """Controller {{ $labels.controller }} has namespaces, but storpath could not read Identify
            Namespace for them (no root or CAP_SYS_ADMIN, and no nvme-cli): their LBA formats are not
            judged. The exporter's log line "NVMe LBA formats unknown" gives the reason.""",
        ),
    ]
