"""GPUs and accelerators: their PCIe link judged on what it reaches while the device works.

Their links train down when idle (NVIDIA documents that the current link generation and width
"may be reduced when the GPU is not in use"; amdgpu's power levels each carry a PCIe speed and
lane width), so one reading of the link says nothing. The exporter samples each GPU's link about
once a second between scrapes and exports the highest speed and width of the last five minutes
(storpath_pcie_max_observed_link_*, collectors/gpu.py); these rules take the highest of the
`gpu.window` (an hour) and compare it with what both ends of the link allow, only where the
device was busy in that window:
- the link left its idle speed (gpu.idle_link_speed, 2.5 GT/s): it carried work, so it went as
  high as it could; or
- dcgm-exporter says so (utilization above gpu.busy_utilization_percent), joined on the GPU's
  NVML bus id (storpath_pcie_gpu_info's pci_bus_id) and the host's name.
An idle GPU (at 2.5 GT/s, no utilization) never alerts. docs/alerts.md explains the choice.
"""

OBS_SPEED = "storpath_pcie_max_observed_link_speed_transfers_per_second"
OBS_WIDTH = "storpath_pcie_max_observed_link_width"
EXP_SPEED = "storpath_pcie_expected_link_speed_transfers_per_second"
EXP_WIDTH = "storpath_pcie_expected_link_width"
GPU_INFO = "storpath_pcie_gpu_info"
INFO = "storpath_pcie_device_info"
VERIFIABLE = "storpath_pcie_link_verifiable"
INFO_LABELS = "upstream, class, driver"


def rules(c):
    cfg = c.cfg
    on = c.on("address")
    classes = c.config["pcie"]["load_dependent_classes"]
    v = dict(on=on, obs_speed=OBS_SPEED, obs_width=OBS_WIDTH, exp_speed=EXP_SPEED, exp_width=EXP_WIDTH,
             window=cfg.window, idle=str(cfg.idle_link_speed), gpu_info=GPU_INFO, labels=INFO_LABELS,
             gpus=f'{INFO}{{port_type!~"root_port|downstream_port", class=~"{classes}"}}',
             nothing_verifiable=f'{VERIFIABLE}{{basis="none"}}', util=cfg.dcgm_utilization_metric,
             host_label=cfg.dcgm_host_label, busy_pct=str(cfg.busy_utilization_percent))
    busy = c.expr("""
        max_over_time(${obs_speed}[${window}]) > ${idle}
        or ${on}
        (
          label_replace(${gpu_info}, "host", "$1", "instance", "(.+?)(?::[0-9]+)?")
          and on(host, pci_bus_id)
          label_replace(
            max by (${host_label}, pci_bus_id) (max_over_time(${util}[${window}])) > ${busy_pct},
            "host", "$1", "${host_label}", "(.+)"
          )
        )
    """, **v)
    v["busy"] = busy

    def judged(below):
        """``below`` for GPUs that were busy in the window, with the port, class and driver as labels."""
        return c.expr("""
            (
              (
                ${below}
                unless ${on} ${nothing_verifiable}
              )
              and ${on}
              (
                ${busy}
              )
            )
            * ${on} group_left(${labels})
            ${gpus}
        """, below=below, **v)

    where = "GPU {{ $labels.address }} ({{ $labels.driver }}, class {{ $labels.class }}) below port {{ $labels.upstream }}"
    return [
        c.alert(
            "PcieGpuLinkSpeedBelowExpected",
            judged(c.expr("max_over_time(${obs_speed}[${window}]) < ${on} ${exp_speed}", **v)),
            cfg.below_expected_for, "warning",
            "A busy GPU's or accelerator's PCIe link never reached the speed both of its ends support.",
            f"""{where} worked in the last {cfg.window} but its link reached at most {{{{ $value | humanize }}}}T/s
            though both ends support {c.gts(EXP_SPEED, 'address')}: its host transfers run at a fraction of the
            link's speed. Usually a riser, cable or signal problem, or a BIOS setting forcing a lower
            generation.""",
        ),
        c.alert(
            "PcieGpuLinkWidthBelowExpected",
            judged(c.expr("max_over_time(${obs_width}[${window}]) < ${on} ${exp_width}", **v)),
            cfg.below_expected_for, "warning",
            "A busy GPU's or accelerator's PCIe link never reached the width both of its ends support.",
            f"""{where} worked in the last {cfg.window} but its link had at most {{{{ printf "x%.0f" $value }}}}
            though both ends support {c.lanes(EXP_WIDTH, 'address')}: its host transfers get a fraction of the
            lanes. Usually slot bifurcation, a card not fully seated, or a damaged riser or cable.""",
        ),
    ]
