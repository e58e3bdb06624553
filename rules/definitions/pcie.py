"""PCIe links: trained below what both ends support, device placed behind a slower port,
link not trained, AER errors, flapping; and the fleet views the dashboards use.

Each link is judged once, on its device end (an endpoint or a switch's upstream port): its
`address` is the device the operator cares about, and `upstream` (from storpath_pcie_device_info)
is the port above it; the functions of a multi-function device share one link, judged on function 0. The port end reports the same link and is left out, except for "link not
trained", which is judged on the port: one series per port (counted over the watched functions
below it, `count by (upstream)`), since the functions of a multi-function device (a dual-port
NIC, a controller with several functions) share one port and one link. Only device ends of the watched PCI classes count
(config pcie.watched_classes): other devices may retrain lower when idle to save power.

In a virtual machine (storpath_pcie_link_verifiable, storpath.analysis.virtual): a device behind
an emulated port is judged against its own capability (a real downgrade its own registers show
still alerts), where it could do better on the host is not judged, and links with nothing
verifiable (emulated devices and ports) are left out.
"""

CUR_SPEED = "storpath_pcie_current_link_speed_transfers_per_second"
MAX_SPEED = "storpath_pcie_max_link_speed_transfers_per_second"
EXP_SPEED = "storpath_pcie_expected_link_speed_transfers_per_second"
CUR_WIDTH = "storpath_pcie_current_link_width"
MAX_WIDTH = "storpath_pcie_max_link_width"
EXP_WIDTH = "storpath_pcie_expected_link_width"
CUR_BW = "storpath_pcie_current_link_bandwidth_bytes_per_second"
EXP_BW = "storpath_pcie_expected_link_bandwidth_bytes_per_second"
# What the device can use of its link: a NIC's ports' line rates, the links below a switch.
DEMAND = "storpath_pcie_link_demand_bytes_per_second"
INFO = "storpath_pcie_device_info"
AER = "storpath_pcie_aer_errors_total"
# Speed and width changes the exporter's sampler counted between scrapes (collectors.pcie): flapping
# is judged on its increase; an exporter without it (older, or link_sample_classes empty) is
# judged on changes() of the two gauges, which misses a link that drops and retrains between scrapes.
LINK_CHANGES = "storpath_pcie_link_changes_total"
# The same changes by the kernel's cause, where its pcie_link_event tracepoint counts them.
LINK_CHANGE_CAUSES = "storpath_pcie_link_change_causes_total"
# 0 where a link's numbers are not all hardware (a virtual machine's emulated ports and devices).
VERIFIABLE = "storpath_pcie_link_verifiable"
# 1 where the link trained at a Target Link Speed set below both ends' capability (`cause`): a
# deliberate cap, not a fault (storpath.analysis.pcie.judge).
CAPPED = "storpath_pcie_link_capped"
TARGET_SPEED = "storpath_pcie_target_link_speed_transfers_per_second"
# A link a documented platform fact wires narrower than both ends advertise (the AM4 X570 chipset
# link, storpath.analysis.platform): its expected width is the design's, and fewer lanes than the
# device advertises is how the platform is built, not a placement to review.
DESIGN = "storpath_pcie_link_design_info"
PORTS = "root_port|downstream_port"
# Labels a link alert takes from storpath_pcie_device_info: the port above, class and driver.
INFO_LABELS = "upstream, class, driver"
# The address of a device's function 0 (0000:3b:00.0): the one that speaks for a shared link.
# Device 0 too: below a port the link's device is always device 0, and with ARI (Alternative
# Routing-ID, PCIe Base Spec 6.13) the device bits number functions 8-255, so function 8 is
# 0000:3b:01.0, no device of its own.
FUNCTION_0 = ".+:00[.]0"


def rules(c):
    cfg = c.cfg
    on = c.on("address")
    # One series per link: the functions of a multi-function device (a dual-port NIC) share their
    # link, which is judged on function 0 (every multi-function device has one; `storpath check`
    # speaks for the link on its first function too).
    watched = f'{INFO}{{port_type!~"{PORTS}", class=~"{cfg.watched_classes}", address=~"{FUNCTION_0}"}}'
    if cfg.watch_switch_uplinks:
        watched += f'\nor\n{INFO}{{port_type="upstream_port"}}'
    v = dict(on=on, by=c.by(), on_target=c.on(), watched=watched, info=INFO, labels=INFO_LABELS,
             cur_speed=CUR_SPEED, exp_speed=EXP_SPEED, max_speed=MAX_SPEED,
             cur_width=CUR_WIDTH, exp_width=EXP_WIDTH, max_width=MAX_WIDTH,
             nothing_verifiable=f'{VERIFIABLE}{{basis="none"}}', verifiable=VERIFIABLE, capped=CAPPED)
    # GPUs and accelerators train down when idle: their speed and width are judged on the highest
    # link sampled while busy (rules/definitions/gpu.py), never on one reading.
    v["follows_load"] = f'{INFO}{{class=~"{cfg.load_dependent_classes}"}}'
    speed_low = c.expr("${cur_speed} < ${on} ${exp_speed}\nunless ${on} ${nothing_verifiable}\n"
                       "unless ${on} ${follows_load}\nunless ${on} ${capped} == 1", **v)
    width_low = c.expr("${cur_width} < ${on} ${exp_width}\nunless ${on} ${nothing_verifiable}\n"
                       "unless ${on} ${follows_load}", **v)
    limited = c.expr("""
        (
          ${exp_speed} < ${on} ${max_speed}
          or ${on}
          (${exp_width} < ${on} ${max_width} unless ${on} ${design})
        )
        unless ${on} ${verifiable} == 0
    """, design=DESIGN, **v)
    # `and` keeps the demand's own labels (`source`); a one-to-one comparison `on(...)` would not.
    bottleneck = c.expr("""
        ${demand}
        and ${on} (${demand} > ${on} ${exp_bw})
        unless ${on} ${verifiable} == 0
    """, demand=DEMAND, exp_bw=EXP_BW, **v)
    v.update(speed_low=speed_low, width_low=width_low, limited=limited)

    def on_watched(expr):
        """``expr`` for watched device ends, with the port, class and driver as labels."""
        return c.expr("""
            (
              ${expr}
            )
            * ${on} group_left(${labels})
            (
              ${watched}
            )
        """, expr=expr, **v)

    def count_watched(expr):
        """Per target: how many watched device ends match ``expr`` (0, not nothing, when none)."""
        return c.expr("""
            count ${by} (
              (
                ${expr}
              )
              and ${on}
              (
                ${watched}
              )
            )
            or ${on_target}
            0 * count ${by} (${info})
        """, expr=expr, **v)

    where = "{{ $labels.address }} ({{ $labels.driver }}, class {{ $labels.class }}) below port {{ $labels.upstream }}"
    bandwidth = (f"it carries {c.gbytes(CUR_BW, 'address')} per direction instead of "
                 f"{c.gbytes(EXP_BW, 'address')}")

    return [
        # ---- fleet views -------------------------------------------------------------------------
        c.record("address:storpath_pcie_link_bandwidth:ratio",
                 on_watched(c.expr("${cur} / ${on} ${exp}", cur=CUR_BW, exp=EXP_BW, on=on))),
        c.record("instance:storpath_pcie_links_below_expected:count",
                 count_watched(c.expr("${speed_low}\nor ${on}\n${width_low}", **v))),
        c.record("instance:storpath_pcie_devices_limited_by_port:count", count_watched(limited)),

        # ---- link faults -------------------------------------------------------------------------
        c.alert(
            "PcieLinkSpeedBelowExpected",
            on_watched(c.expr("${speed_low}\nunless ${on} ${cur_width} == 0", **v)),
            cfg.link_below_expected_for, "warning",
            "A PCIe link trained below the speed both of its ends support.",
            f"""{where} trained at {c.gts(CUR_SPEED, 'address')} though both ends support
            {c.gts(EXP_SPEED, 'address')}: {bandwidth}. Usually a riser, cable or signal problem, or a
            BIOS setting forcing a lower generation.""",
        ),
        c.alert(
            "PcieLinkCapped",
            on_watched(c.expr("${capped} == 1", **v)),
            cfg.link_capped_for, "info",
            "A PCIe link runs at a Target Link Speed set below what both of its ends support.",
            f"""{where} trained at {c.gts(CUR_SPEED, 'address')}, the Target Link Speed its port was set to
            ({{{{ if eq $labels.cause "bandwidth_controller" }}}}by the kernel's PCIe bandwidth controller, a
            thermal cooling device{{{{ else }}}}cause unknown: firmware, a driver, a tool such as setpci or a
            kernel quirk{{{{ end }}}}), though both ends support {c.gts(EXP_SPEED, 'address')}: {bandwidth}.
            A deliberate cap, not a fault.""",
        ),
        c.alert(
            "PcieLinkWidthBelowExpected",
            on_watched(c.expr("${width_low}\nunless ${on} ${cur_width} == 0", **v)),
            cfg.link_below_expected_for, "warning",
            "A PCIe link trained with fewer lanes than both of its ends support.",
            f"""{where} trained at {{{{ printf "x%.0f" $value }}}} though both ends support
            {c.lanes(EXP_WIDTH, 'address')}: {bandwidth}. Usually slot bifurcation, a card not fully
            seated, or a damaged riser or cable.""",
        ),
        c.alert(
            "PcieDeviceLimitedByPort",
            on_watched(limited),
            cfg.placement_for, cfg.placement_severity,
            "A PCIe device could run faster or wider than the port it is plugged into allows.",
            f"""{where} supports {c.gts(MAX_SPEED, 'address')} {c.lanes(MAX_WIDTH, 'address')} but its
            port only allows {c.gts(EXP_SPEED, 'address')} {c.lanes(EXP_WIDTH, 'address')}, so it is
            limited to {c.gbytes(EXP_BW, 'address')} per direction. A placement to review (often how the
            board is built); PcieSlotBelowDeviceDemand warns where the device can use more than that.""",
        ),
        c.alert(
            "PcieSlotBelowDeviceDemand",
            on_watched(bottleneck),
            cfg.slot_bottleneck_for, "warning",
            "A PCIe slot carries less than the device in it can use.",
            f"""{where} can use {c.gbytes(DEMAND, 'address')} per direction ({{{{ if eq $labels.source
            "network_ports" }}}}its network ports' line rates added up{{{{ else }}}}the links below it added
            up{{{{ end }}}}), but its slot's link carries {c.gbytes(EXP_BW, 'address')}
            ({c.gts(EXP_SPEED, 'address')} {c.lanes(EXP_WIDTH, 'address')}; the device supports
            {c.gts(MAX_SPEED, 'address')} {c.lanes(MAX_WIDTH, 'address')}): the slot is its bottleneck.
            Move it to a slot that gives it its whole link, or use fewer of its ports.""",
        ),
        c.alert(
            "PcieLinkDown",
            c.expr("""
                ${cur_width} == 0
                and ${on} ${exp_width} > 0
                unless ${on} ${nothing_verifiable}
                and ${on}
                label_replace(
                  count ${by_port} (
                    ${watched}
                  ),
                  "address", "$1", "upstream", "(.+)"
                )
            """, by_port=c.by("upstream"), **v),
            cfg.link_down_for, "critical",
            "A PCIe port has a device below it but its link is not trained.",
            f"""The link from port {{{{ $labels.address }}}} to
            {c.show(INFO, (("upstream", "address"),), field=".Labels.address", join=", ")} has width 0:
            the device is on the bus but cannot be reached.""",
        ),

        # ---- errors and instability ----------------------------------------------------------------
        c.alert(
            "PcieAerCorrectableErrorsRising",
            c.expr("""
                sum without (severity) (
                  increase(${aer}{severity="correctable"}[${window}])
                ) > ${threshold}
            """, aer=AER, window=cfg.aer_window, threshold=str(cfg.aer_correctable_threshold)),
            cfg.aer_correctable_for, "warning",
            "A PCIe device keeps reporting correctable AER errors: a marginal link.",
            f"""{{{{ $labels.address }}}} reported {{{{ printf "%.0f" $value }}}} correctable AER errors in the
            last {cfg.aer_window}. The hardware recovered them by retrying, at a cost in throughput; they
            point at a marginal link (riser, cable, slot, signal integrity).""",
        ),
        c.alert(
            "PcieAerUncorrectableErrors",
            c.expr("""
                sum without (severity) (
                  label_replace(
                    increase(${aer}{severity=~"fatal|nonfatal"}[${window}]),
                    "aer_severity", "$1", "severity", "(.+)"
                  )
                ) > 0
            """, aer=AER, window=cfg.aer_window),
            "0s", "critical",
            "A PCIe device reported uncorrectable (non-fatal or fatal) AER errors.",
            f"""{{{{ $labels.address }}}} reported {{{{ printf "%.0f" $value }}}} {{{{ $labels.aer_severity }}}}
            AER errors in the last {cfg.aer_window}: transactions were lost or the link was reset.
            Expect I/O errors, or a device that dropped off the bus.""",
            keep_firing_for=cfg.counter_alerts_keep_firing_for,
        ),
        c.alert(
            "PcieLinkFlapping",
            c.expr("""
                ${changes} >= ${threshold}
            """, changes=on_watched(c.expr(
                "(\n  increase(${link_changes}[${w}])\n  or\n  (\n    changes(${cur_speed}[${w}])\n"
                "    + changes(${cur_width}[${w}])\n  )\n  unless ${on} ${link_changes}\n)\n"
                "unless ${on} ${follows_load}",
                w=cfg.flapping_window, link_changes=LINK_CHANGES, **v)),
                threshold=str(cfg.flapping_threshold)),
            "0s", "warning",
            "A PCIe link keeps changing its speed or width.",
            f"""{where} changed link speed or width {{{{ printf "%.0f" $value }}}} times in the last
            {cfg.flapping_window}; it is now at {c.gts(CUR_SPEED, 'address')} {c.lanes(CUR_WIDTH, 'address')}.
            A storage or network link trains once: this one keeps retraining (marginal signal, failing
            device or riser).{c.show(LINK_CHANGE_CAUSES, ('address',), join=', ', field='.Labels.cause',
            inner='{{ if not $i }} The kernel gave as causes (counts since the exporter started): {{ end }}'
                  '{{ .Labels.cause }} {{ printf "%.0f" .Value }}')}""",
            keep_firing_for=cfg.counter_alerts_keep_firing_for,
        ),
    ]
