"""SAS PHYs and SATA links negotiated below what the hardware does; PHY error counters rising.

A PHY with nothing attached reads `Unknown`, `Phy disabled`, `Link Rate failed` or `Spin-up
hold`, and a SATA link without a drive reads `<unknown>`: the exporter leaves those values out, and
the SAS rules also require storpath_sas_phy_attached, so an empty PHY is never a slow one.
"""

PHY = "storpath_sas_phy_"
NEG = PHY + "negotiated_link_rate_transfers_per_second"
MIN = PHY + "minimum_link_rate_transfers_per_second"
MAX = PHY + "maximum_link_rate_transfers_per_second"
HW_MAX = PHY + "hardware_maximum_link_rate_transfers_per_second"
ATTACHED = PHY + "attached"
PHY_ERRORS = [PHY + name + "_total" for name in (
    "invalid_dwords", "running_disparity_errors", "loss_of_dword_sync", "reset_problems")]
SATA = "storpath_sata_link_speed_transfers_per_second"
SATA_HW = "storpath_sata_link_hardware_limit_transfers_per_second"
SATA_LIMIT = "storpath_sata_link_limit_transfers_per_second"
SATA_LIMITED = "storpath_sata_link_limited"


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
        c.record("instance:storpath_sas_phys_below_hardware_maximum:count", c.expr("""
            count ${by} (${neg} < ${on} ${hw_max} and ${on} ${attached} == 1)
            or ${on_target}
            0 * count ${by} (${neg})
        """, neg=NEG, hw_max=HW_MAX, attached=ATTACHED, on=on, by=c.by(), on_target=c.on())),
        c.alert(
            "SasPhyLinkRateBelowMaximum",
            c.expr("""
                ${neg} < ${on} ${hw_max}
                and ${on}
                ${attached} == 1
                unless ${on}
                (
                  ${at_minimum}
                )
            """, neg=NEG, hw_max=HW_MAX, attached=ATTACHED, on=on, at_minimum=at_minimum),
            cfg.link_rate_for, "warning",
            "A SAS PHY with a device attached negotiated below its hardware maximum rate.",
            f"""PHY {{{{ $labels.phy }}}}{who} negotiated {c.gbits(NEG, 'phy')} though the PHY can do
            {c.gbits(HW_MAX, 'phy')} (programmed maximum {c.gbits(MAX, 'phy')}). Check that the attached
            device supports more before blaming the path (cable, backplane, expander).""",
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
            # Below the port's hardware limit, or held down by libata after link errors
            # (storpath_sata_link_limited: its limit lowered under the controller's, which is
            # often unset: `<unknown>`). libata.force lowers both limits: a decision, not matched.
            c.expr("""
                ${spd} < ${on} ${hw}
                or ${on}
                (${spd} and ${on} ${limited} == 1)
            """, spd=SATA, hw=SATA_HW, limited=SATA_LIMITED, on=c.on("link", "device")),
            cfg.link_rate_for, "warning",
            "A SATA link runs below what its port allows.",
            f"""SATA link {{{{ $labels.link }}}} ({{{{ $labels.device }}}}) runs at {c.gbits(SATA, 'link', 'device')};
            libata's current limit is {c.gbits(SATA_LIMIT, 'link', 'device', default='none')} and the port's
            hardware limit {c.gbits(SATA_HW, 'link', 'device', default='not set')}. A drive that only does
            this speed is fine; otherwise link errors made libata step down (cable, backplane, connector).""",
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
            f"""PHY {{{{ $labels.phy }}}}{who} counted {{{{ $value | humanize }}}} invalid dwords,
            disparity errors, losses of dword sync and reset problems in the last {cfg.phy_error_window}.""",
        ),
    ]
