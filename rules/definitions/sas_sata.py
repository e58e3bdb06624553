"""SAS PHYs and SATA links negotiated below what both their ends do; PHY error counters rising.

As the PCIe rules do, the link rate is compared with the expected one: the lower of the port's
hardware limit and the far end's capability (a SATA drive's IDENTIFY data, an expander's PHYs).
The exporter gives an expected SAS rate only where both ends are known, and marks a SATA link
verifiable only then (storpath_sata_link_verifiable): a link whose far end is unknown (a SAS
drive whose Phy Control And Discover mode page could not be read) is never alerted on as slow. The stepped-down-
to-a-lowered-minimum signature needs no knowledge of the far end and alerts on its own.

A PHY with nothing attached reads `Unknown`, `Phy disabled`, `Link Rate failed` or `Spin-up
hold`, and a SATA link without a drive reads `<unknown>`: the exporter leaves those values out, and
the SAS rules also require storpath_sas_phy_attached, so an empty PHY is never a slow one.
"""

PHY = "storpath_sas_phy_"
NEG = PHY + "negotiated_link_rate_transfers_per_second"
MIN = PHY + "minimum_link_rate_transfers_per_second"
MAX = PHY + "maximum_link_rate_transfers_per_second"
HW_MAX = PHY + "hardware_maximum_link_rate_transfers_per_second"
EXPECTED = PHY + "expected_link_rate_transfers_per_second"
FAR_END = PHY + "attached_max_link_rate_transfers_per_second"
ATTACHED = PHY + "attached"
PHY_ERRORS = [PHY + name + "_total" for name in (
    "invalid_dwords", "running_disparity_errors", "loss_of_dword_sync", "reset_problems")]
SATA = "storpath_sata_link_speed_transfers_per_second"
SATA_HW = "storpath_sata_link_hardware_limit_transfers_per_second"
SATA_LIMIT = "storpath_sata_link_limit_transfers_per_second"
SATA_LIMITED = "storpath_sata_link_limited"
SATA_EXPECTED = "storpath_sata_link_expected_speed_transfers_per_second"
SATA_DEVICE = "storpath_sata_device_max_link_speed_transfers_per_second"
SATA_VERIFIABLE = "storpath_sata_link_verifiable"


def rules(c):
    cfg = c.cfg
    on = c.on("phy")
    at_minimum = c.expr("""
        ${neg} <= ${on} ${min}
        and ${on}
        ${min} < ${on} ${hw_max}
        and ${on}
        ${attached} == 1
    """, neg=NEG, min=MIN, hw_max=HW_MAX, attached=ATTACHED, on=on)
    # " (sda)": the block device at the far end, when there is one
    who = c.show(PHY + "info", ("phy",), inner="{{ with .Labels.device }} ({{ . }}){{ end }}")
    return [
        # The name is kept for the dashboards that read it; it counts PHYs below the expected rate
        # (both ends known) or stepped down to a lowered minimum: the PHYs the alerts below fire on.
        c.record("instance:storpath_sas_phys_below_hardware_maximum:count", c.expr("""
            count ${by} (
              (${neg} < ${on} ${expected} and ${on} ${attached} == 1)
              or ${on}
              (${at_minimum})
            )
            or ${on_target}
            0 * count ${by} (${neg})
        """, neg=NEG, expected=EXPECTED, attached=ATTACHED, on=on, by=c.by(), on_target=c.on(),
            at_minimum=at_minimum)),
        c.alert(
            "SasPhyLinkRateBelowMaximum",
            # storpath_sas_phy_expected_* exists only where both ends' capability is known.
            c.expr("""
                ${neg} < ${on} ${expected}
                and ${on}
                ${attached} == 1
                unless ${on}
                (
                  ${at_minimum}
                )
            """, neg=NEG, expected=EXPECTED, attached=ATTACHED, on=on, at_minimum=at_minimum),
            cfg.link_rate_for, "warning",
            "A SAS PHY negotiated below the rate both of its ends support.",
            f"""PHY {{{{ $labels.phy }}}}{who} negotiated {c.gbits(NEG, 'phy')} though the PHY can do
            {c.gbits(HW_MAX, 'phy')} and the device at the far end {c.gbits(FAR_END, 'phy')} (expected
            {c.gbits(EXPECTED, 'phy')}; programmed maximum {c.gbits(MAX, 'phy')}). Both ends can do more:
            suspect the cable, backplane or expander.""",
        ),
        c.alert(
            "SasPhyNegotiatedAtLoweredMinimum",
            at_minimum,
            cfg.link_rate_for, "warning",
            "A SAS PHY stepped down to its programmed minimum rate, below what the hardware does.",
            f"""PHY {{{{ $labels.phy }}}}{who} negotiated {c.gbits(NEG, 'phy')}, its programmed
            minimum_link_rate, though it can do {c.gbits(HW_MAX, 'phy')}: the link stepped all the way
            down (the backplane step-down). Raising minimum_link_rate makes it negotiate higher.""",
        ),
        c.alert(
            "SataLinkBelowHardwareLimit",
            # Below the lower of the port's hardware limit and the drive's capability, where both
            # are known (verifiable); or held down by libata after link errors
            # (storpath_sata_link_limited: its limit lowered under the controller's, which is
            # often unset: `<unknown>`). libata.force lowers both limits: a decision, not matched.
            c.expr("""
                (
                  ${spd} < ${on} ${expected}
                  and ${on}
                  ${verifiable} == 1
                )
                or ${on}
                (${spd} and ${on} ${limited} == 1)
            """, spd=SATA, expected=SATA_EXPECTED, verifiable=SATA_VERIFIABLE, limited=SATA_LIMITED,
                on=c.on("link", "device")),
            cfg.link_rate_for, "warning",
            "A SATA link runs below what both its port and its drive do, or libata lowered its limit.",
            f"""SATA link {{{{ $labels.link }}}} ({{{{ $labels.device }}}}) runs at {c.gbits(SATA, 'link', 'device')};
            the port's hardware limit is {c.gbits(SATA_HW, 'link', 'device', default='not set')}, the drive does
            {c.gbits(SATA_DEVICE, 'link', 'device', default='an unreported rate')} and libata's current limit is
            {c.gbits(SATA_LIMIT, 'link', 'device', default='none')}. Both ends can do more, or link errors made
            libata step down: suspect the cable, backplane or connector.""",
        ),
        c.alert(
            "SasPhyErrorsRising",
            # increase() drops the metric name, so each counter gets a label of its own before
            # the sum (else two counters of one PHY would collide).
            c.expr("""
                sum ${by_phy} (
                  ${increases}
                ) > ${threshold}
            """, by_phy=c.by("phy"), threshold=str(cfg.phy_error_threshold), increases="\nor\n".join(
                f'label_replace(increase({name}[{cfg.phy_error_window}]), "counter", "{name[len(PHY):]}", "", "")'
                for name in PHY_ERRORS)),
            cfg.phy_error_for, "warning",
            "A SAS PHY's error counters keep rising: a marginal cable, backplane or connector.",
            f"""PHY {{{{ $labels.phy }}}}{who} counted {{{{ printf "%.0f" $value }}}} invalid dwords,
            disparity errors, losses of dword sync and reset problems in the last {cfg.phy_error_window}.""",
        ),
    ]
