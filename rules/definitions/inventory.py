"""Storage devices that dropped off the bus, and drives that never appeared.

A drive the OS does not see is in no series, so nothing about it can be judged on its own.
What can be compared is a count: storpath_inventory_devices{kind} (every kind exported, 0 when
none) against
- the same host's count over `inventory.vanished_window` (a drive that went away): the alert
  resolves when the count is back, and is forgotten once the window has passed without the
  drive (then the lower count is the host's normal; a declared layout keeps telling);
- the other hosts of the same make and model (storpath_host_info's sys_vendor, product_name;
  virtual machines left out), once `inventory.fleet_min_hosts` of them report: fewer drives of
  a kind, or fewer PCIe lanes to storage, than the model's median (a carrier in a slot that is not
  bifurcated shows one drive at x4 where its twins show four);
- the layout an operator declared (collectors.inventory.expected);
- each PCIe link against the same address on the other hosts of the model (identical hosts
  enumerate alike), the same device (vendor and device id) in it: one that trained lower than most of them is a fault of this host
  (PcieLinkBelowModelPeers); one below what both its ends support that trained the same way
  on every host of the model is how the model is built, a design to review
  (PcieLinkBelowCapabilityOnWholeModel, info). Compared on the link's bandwidth, which moves
  with its speed and its width; capped links (trained as told), links down (PcieLinkDown's)
  and sleeping devices (their link is not read) are left out.

Prometheus 2.42 semantics the rules rely on: an `_over_time` function over a range ignores
staleness markers, so `last_over_time(info[w])` still returns a device's last sample while the
instant selector `info` has nothing for it (its series went stale on the first scrape without it);
`max_over_time(count[w])` is the highest count scraped in the window, restarts of the exporter
included (a restart changes no series).
"""

DEVICES = "storpath_inventory_devices"
EXPECTED = "storpath_inventory_expected_devices"
INFO = "storpath_inventory_device_info"
HOST = "storpath_host_info"
WIDTH = "storpath_pcie_current_link_width"
PCI_INFO = "storpath_pcie_device_info"
CUR_BW = "storpath_pcie_current_link_bandwidth_bytes_per_second"
EXP_BW = "storpath_pcie_expected_link_bandwidth_bytes_per_second"
CUR_SPEED = "storpath_pcie_current_link_speed_transfers_per_second"
CAPPED = "storpath_pcie_link_capped"
SUSPENDED = "storpath_pcie_device_suspended"
MODEL = "sys_vendor, product_name"
# The function that speaks for a shared link: device 0's function 0 (as in pcie.py: with ARI a
# device's function 8 is numbered 3b:01.0).
FUNCTION_0 = ".+:00[.]0"
# What identifies one device across scrapes: a drive back under the same name is not gone.
IDENTITY = ("kind", "device", "serial", "address")


def _query(c, expr: str, keys: tuple) -> str:
    """`query` of ``expr`` with the target labels and ``keys`` of the alert filled in as %q."""
    names = list(c.target_labels) + list(keys)
    args = " ".join(f"$labels.{n}" for n in names)
    return f'query (printf "{expr}" {args})'


def _matchers(c, keys: tuple) -> str:
    return ",".join(f"{n}=%q" for n in list(c.target_labels) + list(keys))


def rules(c):
    cfg = c.cfg
    window = cfg.vanished_window
    hosts = f'{HOST}{{virtualization!="vm", product_name!=""}}'
    on_model = f"on({MODEL}, kind)"
    gone = (f"last_over_time({INFO}{{{_matchers(c, ('kind',))}}}[{window}]) "
            f"unless on({c.labels(*IDENTITY)}) {INFO}")
    gone_list = (f"{{{{ range $i, $_ := {_query(c, gone, ('kind',))} | sortByLabel \"device\" }}}}"
                 f"{{{{ if $i }}}}, {{{{ end }}}}{{{{ .Labels.device }}}}"
                 f"{{{{ with .Labels.model }}}} ({{{{ . }}}}){{{{ end }}}}"
                 f"{{{{ with .Labels.serial }}}} serial {{{{ . }}}}{{{{ end }}}}"
                 f" at {{{{ .Labels.address }}}}{{{{ with .Labels.slot }}}} (slot {{{{ . }}}}){{{{ end }}}}"
                 f"{{{{ else }}}}none named (not seen in the window, or back under another name){{{{ end }}}}")
    most = _query(c, f"max_over_time({DEVICES}{{{_matchers(c, ('kind',))}}}[{window}])", ("kind",))
    most_text = f'{{{{ range {most} }}}}{{{{ printf "%.0f" .Value }}}}{{{{ end }}}}'

    def per_model(record: str, fmt: str, kind: bool) -> str:
        extra = ",kind=%q" if kind else ""
        args = "$labels.sys_vendor $labels.product_name" + (" $labels.kind" if kind else "")
        expr = f"{record}{{sys_vendor=%q,product_name=%q{extra}}}"
        return f'{{{{ range query (printf "{expr}" {args}) }}}}{{{{ printf "{fmt}" .Value }}}}{{{{ end }}}}'

    by_model = "instance_kind:storpath_inventory_devices:by_host_model"
    median = "model_kind:storpath_inventory_devices:median"
    model_hosts = "model_kind:storpath_inventory_hosts:count"
    lanes = "instance:storpath_inventory_storage_lanes:sum"
    lanes_median = "model:storpath_inventory_storage_lanes:median"
    lanes_hosts = "model:storpath_inventory_hosts:count"
    links = "address:storpath_pcie_link_bandwidth:by_host_model"
    links_median = "model_address:storpath_pcie_link_bandwidth:median"
    links_hosts = "model_address:storpath_pcie_link_bandwidth:hosts"
    links_spread = "model_address:storpath_pcie_link_bandwidth:spread"
    # The same device (vendor and device id) at the same address: a host with another card in
    # that slot is no peer of it.
    link_key = f"{MODEL}, address, vendor_id, device_id"
    on_link = f"on({link_key})"

    def per_link(record: str, fmt: str, scale: str = "") -> str:
        expr = f"{record}{{sys_vendor=%q,product_name=%q,address=%q,vendor_id=%q,device_id=%q}}{scale}"
        args = "$labels.sys_vendor $labels.product_name $labels.address $labels.vendor_id $labels.device_id"
        return (f'{{{{ range query (printf "{expr}" {args}) }}}}'
                f'{{{{ printf "{fmt}" .Value }}}}{{{{ end }}}}')

    link_where = ("{{ $labels.instance }} ({{ $labels.sys_vendor }} {{ $labels.product_name }}): the link of "
                  "{{ $labels.address }}")
    trained = f"{c.gts(CUR_SPEED, 'address')} {c.lanes('storpath_pcie_current_link_width', 'address')}"
    return [
        # One series per host and link (function 0 speaks for a multi-function device's link), with
        # the host's model; then per model and address: the median, how many hosts, max - min.
        c.record(links, c.expr("""
            ${cur_bw}
            * on(${target_address}) group_left(vendor_id, device_id)
            ${pci_info}{port_type!~"root_port|downstream_port", class=~"${classes}", address=~"${function_0}"}
            * on(${target}) group_left(${model})
            ${hosts}
            unless on(${target_address}) ${capped} == 1
            unless on(${target_address}) ${width} == 0
            unless on(${target_address}) ${suspended} == 1
        """, cur_bw=CUR_BW, target_address=c.labels("address"), pci_info=PCI_INFO, classes=cfg.peer_link_classes,
            target=c.labels(), model=MODEL, hosts=hosts, capped=CAPPED, width=WIDTH, suspended=SUSPENDED,
            function_0=FUNCTION_0)),
        c.record(links_median, f"quantile by ({link_key}) (0.5, {links})"),
        c.record(links_hosts, f"count by ({link_key}) ({links})"),
        c.record(links_spread, f"max by ({link_key}) ({links}) - min by ({link_key}) ({links})"),
        c.record(by_model, c.expr("""
            ${devices}{kind=~"${kinds}"}
            * on(${target}) group_left(${model})
            ${hosts}
        """, devices=DEVICES, kinds=cfg.fleet_kinds, target=c.labels(), model=MODEL, hosts=hosts)),
        c.record(median, f"quantile by ({MODEL}, kind) (0.5, {by_model})"),
        c.record(model_hosts, f"count by ({MODEL}, kind) ({by_model})"),
        c.record(lanes, c.expr("""
            sum by (${target_by}) (
              ${width}
              * on(${target_address}) group_left
              ${pci_info}{port_type!~"root_port|downstream_port|upstream_port", class=~"${classes}"}
              * on(${target}) group_left(${model})
              ${hosts}
            )
        """, target_by=c.labels("sys_vendor", "product_name"), width=WIDTH, target_address=c.labels("address"),
            pci_info=PCI_INFO, classes=cfg.storage_classes, target=c.labels(), model=MODEL, hosts=hosts)),
        c.record(lanes_median, f"quantile by ({MODEL}) (0.5, {lanes})"),
        c.record(lanes_hosts, f"count by ({MODEL}) ({lanes})"),
        c.alert(
            "InventoryDevicesVanished",
            c.expr("""
                max_over_time(${devices}[${window}]) - ${devices} > 0
            """, devices=DEVICES, window=window),
            cfg.vanished_for, cfg.vanished_severity,
            "A host has fewer storage devices of a kind than it had recently: a drive dropped off the bus.",
            f"""{{{{ $labels.instance }}}} has {{{{ printf "%.0f" $value }}}} {{{{ $labels.kind }}}} device(s) fewer
            than in the last {window} ({most_text} then). Gone: {gone_list}. Resolves when the drive is back; silence it while
            it is replaced, or it is forgotten {window} after it went.""",
        ),
        c.alert(
            "InventoryFewerDevicesThanModel",
            c.expr("""
                ${by_model} < ${on_model} group_left ${median}
                and ${on_model}
                ${model_hosts} >= ${min_hosts}
            """, by_model=by_model, on_model=on_model, median=median, model_hosts=model_hosts,
                min_hosts=str(cfg.fleet_min_hosts)),
            cfg.fleet_for, cfg.fleet_severity,
            "A host has fewer storage devices of a kind than most hosts of its make and model.",
            f"""{{{{ $labels.instance }}}} ({{{{ $labels.sys_vendor }}}} {{{{ $labels.product_name }}}}) has
            {{{{ printf "%.0f" $value }}}} {{{{ $labels.kind }}}} where the {per_model(model_hosts, "%.0f", True)}
            hosts of its model have {per_model(median, "%.4g", True)} (median). Drives the OS never saw: a slot
            that is not bifurcated, a drive not seated, a cable, a disabled port.""",
        ),
        c.alert(
            "InventoryStorageLanesBelowModel",
            c.expr("""
                ${lanes} < on(${model}) group_left ${lanes_median}
                and on(${model})
                ${lanes_hosts} >= ${min_hosts}
            """, lanes=lanes, model=MODEL, lanes_median=lanes_median, lanes_hosts=lanes_hosts,
                min_hosts=str(cfg.fleet_min_hosts)),
            cfg.fleet_for, cfg.fleet_severity,
            "A host has fewer PCIe lanes to storage than most hosts of its make and model.",
            f"""{{{{ $labels.instance }}}} ({{{{ $labels.sys_vendor }}}} {{{{ $labels.product_name }}}}) has its
            storage controllers on x{{{{ printf "%.0f" $value }}}} in all, where the
            {per_model(lanes_hosts, "%.0f", False)} hosts of its model have x{per_model(lanes_median, "%.0f", False)}
            (median): drives missing, or trained narrower (a passive carrier in a slot that is not bifurcated
            shows one drive at x4 instead of four).""",
        ),
        c.alert(
            "PcieLinkBelowModelPeers",
            c.expr("""
                ${links} < ${on_link} group_left ${links_median}
                and ${on_link}
                ${links_hosts} >= ${min_hosts}
            """, links=links, on_link=on_link, links_median=links_median, links_hosts=links_hosts,
                min_hosts=str(cfg.fleet_min_hosts)),
            cfg.fleet_for, cfg.peer_link_severity,
            "A PCIe link trained lower than the same link on most hosts of its make and model.",
            f"""{link_where} trained at {trained} ({c.gbytes(CUR_BW, 'address')}) where the {per_link(links_hosts, "%.0f")} hosts of its model carry
            {per_link(links_median, "%.3g GB/s", " / 1e9")} (median) at the same address: this host differs
            from its peers, a fault here (a riser, a card not seated, a cable, a BIOS setting), not the design.""",
        ),
        c.alert(
            "PcieLinkBelowCapabilityOnWholeModel",
            c.expr("""
                ${links} < on(${target_address}) group_left ${exp_bw}
                and ${on_link}
                ${links_spread} == 0
                and ${on_link}
                ${links_hosts} >= ${min_hosts}
            """, links=links, target_address=c.labels("address"), exp_bw=EXP_BW, on_link=on_link,
                links_spread=links_spread, links_hosts=links_hosts, min_hosts=str(cfg.fleet_min_hosts)),
            cfg.fleet_for, cfg.model_design_severity,
            "A PCIe link trained below what both of its ends support the same way on every host of its model.",
            f"""{link_where} trained at {trained}, below the {c.gbytes(EXP_BW, 'address')} both of its ends
            support, as it did on all {per_link(links_hosts, "%.0f")} hosts of its model: how the model is
            built, a design to review (the board's lane wiring, a slot's bifurcation or generation setting
            shipped alike), not a fault of this host.""",
        ),
        c.alert(
            "InventoryBelowExpected",
            f"{DEVICES} < {c.on('kind')} {EXPECTED}",
            cfg.below_expected_for, cfg.below_expected_severity,
            "A host has fewer storage devices of a kind than its declared inventory.",
            f"""{{{{ $labels.instance }}}} has {{{{ printf "%.0f" $value }}}} {{{{ $labels.kind }}}} where
            collectors.inventory.expected declares {c.show(EXPECTED, ('kind',), fmt='%.0f')}. Missing now:
            {gone_list}.""",
        ),
    ]
