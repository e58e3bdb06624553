"""Fleet outliers: an NVMe drive whose link bandwidth or probe throughput is far below the median
of its siblings, the drives of the same model (and firmware) across every host the Prometheus sees.

The per-host alerts judge a drive against what its own path should give; these judge it against
its twins. They catch what a host alone cannot tell: a drive whose link is "as expected" only
because its slot or riser reports a low capability too, a drive that reads slower than its
identical neighbours on healthy links (heat, wear, a firmware quirk), and they give the capacity
review its list of drives that deliver less than the ones they were bought with.

Model and firmware come from storpath_nvme_controller_info. SAS and SATA drives are compared by
the model of storpath_inventory_device_info (kind sas_disk or sata_disk; no firmware there): their
negotiated link rate (a SAS PHY's, the fastest PHY of the drive's port, or a SATA link's speed)
against the median of the same model's drives. This catches a drive whose link is slow where
the per-host rules cannot judge it (a SAS drive, whose own capability storpath does not read; a
SATA port that sets no limit). The peers are grouped by fleet.peer_labels
(model and firmware by default), never by target: the median is over the whole fleet this
Prometheus holds, so these rules belong on the central side (a federating Prometheus, vmalert
on a long-term store), and in a site Prometheus they compare the drives of that site.
"""

CUR_BW = "storpath_pcie_current_link_bandwidth_bytes_per_second"
CONTROLLER_INFO = "storpath_nvme_controller_info"
NAMESPACE_INFO = "storpath_nvme_namespace_info"
PROBE_READ = "storpath_probe_read_bytes_per_second"
PROBE_TARGET_INFO = "storpath_probe_target_info"

LINK = "controller:storpath_nvme_link_bandwidth_bytes_per_second:with_model"
LINK_MEDIAN = "model:storpath_nvme_link_bandwidth_bytes_per_second:median"
LINK_RATIO = "controller:storpath_nvme_link_bandwidth:ratio_to_model_median"
PROBE = "target_profile:storpath_nvme_probe_read_bytes_per_second:with_model"
PROBE_MEDIAN = "model:storpath_nvme_probe_read_bytes_per_second:median"
PROBE_RATIO = "target_profile:storpath_nvme_probe_read_throughput:ratio_to_model_median"

SAS_NEG = "storpath_sas_phy_negotiated_link_rate_transfers_per_second"
SAS_INFO = "storpath_sas_phy_info"
SATA_SPEED = "storpath_sata_link_speed_transfers_per_second"
INVENTORY = "storpath_inventory_device_info"
RAID_NEG = "storpath_raid_drive_negotiated_link_rate_transfers_per_second"
RAID_INFO = "storpath_raid_drive_info"
DISK_LINK = "device:storpath_disk_link_rate_transfers_per_second:with_model"
DISK_LINK_MEDIAN = "model:storpath_disk_link_rate_transfers_per_second:median"


def rules(c):
    cfg = c.cfg
    peers = ", ".join(cfg.peer_labels)
    # A probe's siblings also ran the same profile on the same kind of target.
    probe_peers = ", ".join(list(cfg.peer_labels) + ["profile", "kind"])

    def median(series, by):
        """The fleet median of ``series`` per peer group, only where the group has enough drives."""
        return c.expr("""
            quantile by (${by}) (0.5, ${series})
            and on(${by})
            count by (${by}) (${series}) >= ${min_peers}
        """, series=series, by=by, min_peers=str(cfg.min_peers))

    def peer_median(metric, series, by):
        """The group's median and size in an alert description (queried when the alert is sent)."""
        matchers = ",".join(f"{name}=%q" for name in by.split(", "))
        args = " ".join(f"$labels.{name}" for name in by.split(", "))
        return (f'{{{{ range query (printf "{metric}{{{matchers}}} / 1e9" {args}) }}}}'
                f'{{{{ printf "%.3g GB/s" .Value }}}}{{{{ end }}}} over '
                f'{{{{ range query (printf "count({series}{{{matchers}}})" {args}) }}}}'
                f'{{{{ printf "%.0f" .Value }}}}{{{{ end }}}} drives')

    link_ratio_pct = f"{cfg.link_bandwidth_ratio_threshold * 100:.0f} %"
    probe_ratio_pct = f"{cfg.throughput_ratio_threshold * 100:.0f} %"
    drive = ("{{ $labels.controller }} ({{ $labels.model }}, firmware {{ $labels.firmware }}) "
             "at {{ $labels.address }}")
    return [
        # ---- every NVMe drive's link bandwidth and probe throughput with its model ------------------
        c.record(LINK, c.expr("""
            ${bw}
            * ${on} group_left(controller, model, firmware)
            ${info}{address!=""}
        """, bw=CUR_BW, on=c.on("address"), info=CONTROLLER_INFO)),
        c.record(LINK_MEDIAN, median(LINK, peers)),
        c.record(LINK_RATIO, c.expr("${link} / on(${by}) group_left() ${median}",
                                    link=LINK, by=peers, median=LINK_MEDIAN)),
        c.record(PROBE, c.expr("""
            ${read}
            * ${on_target} group_left(kind, device) ${target_info}{kind="device"}
            * ${on_device} group_left(controller) ${namespace_info}
            * ${on_controller} group_left(address, model, firmware) ${controller_info}
        """, read=PROBE_READ, target_info=PROBE_TARGET_INFO, namespace_info=NAMESPACE_INFO,
            controller_info=CONTROLLER_INFO, on_target=c.on("target"), on_device=c.on("device"),
            on_controller=c.on("controller"))),
        c.record(PROBE_MEDIAN, median(PROBE, probe_peers)),
        c.record(PROBE_RATIO, c.expr("${probe} / on(${by}) group_left() ${median}",
                                     probe=PROBE, by=probe_peers, median=PROBE_MEDIAN)),
        # ---- every SAS and SATA drive's link rate with its model ----------------------------------
        # Drives behind a RAID controller (storpath_raid_*) join as `device` "<controller> <slot>"
        # (storcli/c0 32:9): the kernel has no block device of their own.
        # A SAS PHY's rate reaches its block device through storpath_sas_phy_info (one series per
        # block device, the rate on the right: one per PHY); a wide port's PHYs give their fastest.
        c.record(DISK_LINK, c.expr("""
            (
              max ${by_device} (${sas_info}{device!=""} * ${on_phy} group_left() ${sas_neg})
              or
              max ${by_device} (${sata}{device!=""})
            )
            * ${on_device} group_left(model) ${inventory}{kind=~"sas_disk|sata_disk"}
            or
            max ${by_model} (label_join(
              ${raid_neg} * ${on_slot} group_left(model) ${raid_info}{model!=""},
              "device", " ", "controller", "slot"))
        """, sas_info=SAS_INFO, sas_neg=SAS_NEG, sata=SATA_SPEED, inventory=INVENTORY, on_phy=c.on("phy"),
            on_device=c.on("device"), by_device=c.by("device"), raid_neg=RAID_NEG, raid_info=RAID_INFO,
            on_slot=c.on("controller", "slot"), by_model=c.by("device", "model"))),
        c.record(DISK_LINK_MEDIAN, median(DISK_LINK, "model")),
        # ---- drives far below their siblings ------------------------------------------------------
        c.alert(
            "NvmeLinkBandwidthBelowModelPeers",
            f"{LINK_RATIO} < {cfg.link_bandwidth_ratio_threshold}",
            cfg.link_bandwidth_for, cfg.severity,
            "An NVMe drive's PCIe link carries far less than the median of its model in the fleet.",
            f"""{drive} on {{{{ $labels.instance }}}} has a link of {c.gbytes(CUR_BW, 'address')} per
            direction, {{{{ $value | humanizePercentage }}}} of the median of its siblings (same
            {peers}), {peer_median(LINK_MEDIAN, LINK, peers)} (threshold {link_ratio_pct}).""",
        ),
        c.alert(
            "NvmeProbeThroughputBelowModelPeers",
            f"{PROBE_RATIO} < {cfg.throughput_ratio_threshold}",
            cfg.throughput_for, cfg.severity,
            "An NVMe drive reads far slower than the median of its model in the fleet.",
            f"""Probe {{{{ $labels.profile }}}} of {{{{ $labels.target }}}} ({drive}) on
            {{{{ $labels.instance }}}} read {c.gbytes(PROBE_READ, 'target', 'profile')},
            {{{{ $value | humanizePercentage }}}} of the median of its siblings (same
            {peers}, profile and kind of target), {peer_median(PROBE_MEDIAN, PROBE, probe_peers)}
            (threshold {probe_ratio_pct}).""",
        ),
        c.alert(
            "DiskLinkRateBelowModelPeers",
            f"{DISK_LINK} < on(model) group_left() {DISK_LINK_MEDIAN}",
            cfg.disk_link_rate_for, cfg.severity,
            "A SAS or SATA drive negotiated a lower link rate than the median of its model in the fleet.",
            f"""{{{{ $labels.device }}}} ({{{{ $labels.model }}}}) on {{{{ $labels.instance }}}} negotiated
            {{{{ $value | humanize }}}}bit/s where the drives of its model run at
            {{{{ range query (printf "{DISK_LINK_MEDIAN}{{model=%q}} / 1e9" $labels.model) }}}}{{{{ printf "%.3g Gbit/s" .Value }}}}{{{{ end }}}}
            (the median over {{{{ range query (printf "count({DISK_LINK}{{model=%q}})" $labels.model) }}}}{{{{ printf "%.0f" .Value }}}}{{{{ end }}}}
            drives): a cable, backplane, expander or port holds it back, or its PHY's rate was set low.""",
        ),
    ]
