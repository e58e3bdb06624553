"""Generates storpath's Grafana dashboards (dashboards/*.json) from code.

    python dashboards/generate.py                  # rewrite the JSON files
    python dashboards/generate.py --check          # exit 1 if a committed file is out of date
    python dashboards/generate.py --config site.yml --out DIR   # a site's thresholds

Built with grafana-foundation-sdk's Python builders (typed panels, variables, units; the
`dashboards` extra of pyproject.toml pins the version made for the Grafana of
deploy/compose). The thresholds drawn on panels come from rules/config/thresholds.yml, the
file the alerts are rendered from, so a board and an alert never disagree about "too full"
or "too slow". Every panel query is run against a real Prometheus in tests/dashboards/.

Units: PCIe speeds are divided by 1e9 in the query and shown with the custom unit
"suffix: GT/s" (Grafana has no GT/s unit; `hertz` read "16 GHz"); SAS and SATA line rates
the same way in Gbit/s; lanes with "prefix: x"; bandwidth in bytes/s (`Bps`).

Layout: each dashboard is a list of sections (a row header and panels that fill the
24-column grid); the view a reviewer wants first is the first section.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.builders import prometheus as prom
from grafana_foundation_sdk.builders import common as cb
from grafana_foundation_sdk.builders import stat as stat_panel
from grafana_foundation_sdk.builders import table as table_panel
from grafana_foundation_sdk.builders import timeseries as ts_panel
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as cm
from grafana_foundation_sdk.models import dashboard as dm
from grafana_foundation_sdk.models import prometheus as pm

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DS = dm.DataSourceRef(type_val="prometheus", uid="${datasource}")
TAGS = ["storpath", "storage"]

# Units (Grafana unit ids). Custom units keep the space after the colon: "16 GT/s".
GTS = "suffix: GT/s"
GBITS = "suffix: Gbit/s"
LANES = "prefix:x"
BPS = "Bps"
BYTES = "bytes"
RATIO = "percentunit"
DAYS = "d"
CELSIUS = "celsius"

# Selectors. Every selector of a storpath series carries both (tests/dashboards/test_conventions.py):
# a panel never mixes hosts or exporters the variables left out. Regex matches on the Host board
# too, where one host is chosen at a time: a single value matches itself, as dashboard-linter and
# mixtool lint expect of every query.
FLEET_SEL = 'job=~"$job", instance=~"$instance"'
HOST_SEL = FLEET_SEL
HOST_ONLY = 'instance=~"$instance"'  # node_exporter's series have their own job
# The capacity rules aggregate node_exporter's and storpath's series by (instance, device):
# they carry no job label, so only the host filter applies.
HOST_ONLY_FLEET = 'instance=~"$instance"'
HOST_URL = "/d/storpath-host/storpath-host?var-instance=${__data.fields.instance}&${datasource:queryparam}"

GREEN, ORANGE, RED, BLUE = "green", "orange", "red", "blue"


def _rules_generator():
    spec = importlib.util.spec_from_file_location("storpath_rules_generate", os.path.join(REPO, "rules", "generate.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RULES = _rules_generator()


def load_thresholds(path: Optional[str] = None) -> dict:
    """rules/config/thresholds.yml (with a site's file merged over it), as the rules read it."""
    return RULES.load_config(path)


# ---- small builders ---------------------------------------------------------------
def q(expr: str, legend: str = "", kind: str = "range", interval: str = "") -> prom.Dataquery:
    """A Prometheus query: kind is "range" (time series), "instant" (stat) or "table"."""
    t = prom.Dataquery().expr(expr).datasource(DS)
    if legend:
        t.legend_format(legend)
    if kind == "table":
        t.format(pm.PromQueryFormat.TABLE).instant()
    elif kind == "instant":
        t.instant()
    else:
        t.range()
    if interval:
        t.interval(interval)
    return t


def steps(*pairs: Tuple[Optional[float], str]) -> db.ThresholdsConfig:
    return db.ThresholdsConfig().mode(dm.ThresholdsMode.ABSOLUTE).steps(
        [dm.Threshold(value=v, color=c) for v, c in pairs])


def value_map(mapping: Dict[str, Tuple[str, str]]) -> dm.ValueMap:
    """{value or text: (shown text, colour)}"""
    return dm.ValueMap(options={k: dm.ValueMappingResult(text=t, color=c, index=i)
                                for i, (k, (t, c)) in enumerate(mapping.items())})


def regex_map(pattern: str, shown: str, color: str) -> dm.RegexMap:
    return dm.RegexMap(options=dm.DashboardRegexMapOptions(
        pattern=pattern, result=dm.ValueMappingResult(text=shown, color=color)))


def runbook(base: str, alert: str) -> db.DashboardLink:
    return db.DashboardLink(f"Runbook: {alert}").type(dm.DashboardLinkType.LINK).url(
        f"{base}{alert}.md").target_blank(True)


class Column:
    """A table column: the query's value renamed, its unit, colours and mappings."""

    def __init__(self, name: str, unit: str = "", mappings: Sequence = (), thresholds=None, colored: bool = False,
                 link: str = ""):
        self.name, self.unit, self.mappings, self.thresholds = name, unit, list(mappings), thresholds
        self.colored, self.link = colored or bool(mappings) or thresholds is not None, link

    def properties(self) -> List[dm.DynamicConfigValue]:
        props = []
        if self.unit:
            props.append(dm.DynamicConfigValue(id_val="unit", value=self.unit))
        if self.mappings:
            props.append(dm.DynamicConfigValue(id_val="mappings", value=self.mappings))
        if self.thresholds is not None:
            props.append(dm.DynamicConfigValue(id_val="thresholds", value=self.thresholds.build()))
            props.append(dm.DynamicConfigValue(id_val="color", value=dm.FieldColor(
                mode=dm.FieldColorModeId.THRESHOLDS)))
        if self.colored:
            props.append(dm.DynamicConfigValue(id_val="custom.cellOptions", value=cm.TableColoredBackgroundCellOptions(
                mode=cm.TableCellBackgroundDisplayMode.BASIC)))
        if self.link:
            props.append(dm.DynamicConfigValue(id_val="links", value=[
                db.DashboardLink("Open this host").url(self.link).build()]))
        return props


def _finish(panel, title: str, description: str, width: int, height: int, links: Sequence = ()):
    panel.title(title).datasource(DS).span(width).height(height)
    if description:
        panel.description(description)
    if links:
        panel.links(list(links))
    return panel


def _with_targets(panel, targets: Sequence[prom.Dataquery]):
    for target, ref in zip(targets, "ABCDEFGHIJKLMNOP"):
        panel.with_target(target.ref_id(ref))
    return panel


def stat(title: str, expr: str, width: int = 4, unit: str = "none", description: str = "",
         thresholds: Optional[db.ThresholdsConfig] = None, links: Sequence = (), mappings: Sequence = ()):
    p = stat_panel.Panel().unit(unit).thresholds(thresholds or steps((None, GREEN), (1, RED)))
    p.color_mode(cm.BigValueColorMode.BACKGROUND).graph_mode(cm.BigValueGraphMode.NONE).text_mode(
        cm.BigValueTextMode.VALUE).reduce_options(cb.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
    if mappings:
        p.mappings(list(mappings))
    _with_targets(p, [q(expr, kind="instant")])
    return _finish(p, title, description, width, 4, links)


def timeseries(title: str, targets: Sequence[prom.Dataquery], width: int = 12, height: int = 8, unit: str = "short",
               description: str = "", thresholds: Optional[db.ThresholdsConfig] = None, links: Sequence = (),
               interval: str = "", soft_max: Optional[float] = None, axis_label: str = ""):
    p = ts_panel.Panel().unit(unit).line_width(1).fill_opacity(0).show_points(cm.VisibilityMode.NEVER)
    if axis_label:  # a quantity Grafana has no unit for (GT/s): plain numbers, named on the axis
        p.axis_label(axis_label)
    p.legend(cb.VizLegendOptions().display_mode(cm.LegendDisplayMode.TABLE).placement(
        cm.LegendPlacement.BOTTOM).show_legend(True).calcs(["lastNotNull", "max"]))
    p.tooltip(cb.VizTooltipOptions().mode(cm.TooltipDisplayMode.MULTI).sort(cm.SortOrder.DESCENDING))
    if thresholds is not None:
        # Drawn as dashed lines at the alert thresholds; the series keep their own colours.
        p.thresholds(thresholds).thresholds_style(cb.GraphThresholdsStyleConfig().mode(
            cm.GraphThresholdsStyleMode.DASHED))
    if soft_max is not None:
        p.axis_soft_max(soft_max).axis_soft_min(0)
    if interval:
        p.interval(interval)
    _with_targets(p, targets)
    return _finish(p, title, description, width, height, links)


def table(title: str, targets: Sequence[prom.Dataquery], columns: Dict[str, Column], width: int = 24, height: int = 8,
          description: str = "", hide: Sequence[str] = (), links: Sequence = (),
          labels: Optional[Dict[str, Column]] = None, unit: str = "none"):
    """A table of instant queries in table format, merged on their common labels.

    ``columns`` names the value of each query in order (Value #A, Value #B...); ``labels``
    styles label columns (a state label coloured by a value mapping, a link on instance).
    """
    # A unit for every column the overrides leave alone (counts, labels): "none".
    p = table_panel.Panel().unit(unit).cell_height(cm.TableCellHeight.SM).show_header(True).align(
        cm.FieldTextAlignment.AUTO)
    for t in targets:
        # `merge` joins rows whose common columns agree, and a metric name is a column: two
        # metrics would never share a row. `max without ()` drops the name, keeps every label.
        t.expr(f"max without () ({t.build().expr})").format(pm.PromQueryFormat.TABLE).instant()
    _with_targets(p, targets)
    refs = "ABCDEFGHIJKLMNOP"
    value_names = {("Value" if len(targets) == 1 else f"Value #{refs[i]}"): name
                   for i, name in enumerate(columns)}
    # organize names fields as the queries return them: a hidden value column by its "Value #X"
    keys = {name: key for key, name in value_names.items()}
    exclude = {keys.get(name, name): True for name in ["Time", "__name__", *hide]}
    p.with_transformation(dm.DataTransformerConfig(id_val="merge", options={}))
    p.with_transformation(dm.DataTransformerConfig(id_val="organize", options={
        "excludeByName": exclude, "renameByName": value_names}))
    for name, column in list(columns.items()) + list((labels or {}).items()):
        props = column.properties()
        if props:
            p.override_by_name(name, props)
    return _finish(p, title, description, width, height, links)


# ---- variables --------------------------------------------------------------------
def datasource_var() -> db.DatasourceVariable:
    return db.DatasourceVariable("datasource").label("Data source").type("prometheus")


def query_var(name: str, label: str, query: str, multi: bool) -> db.QueryVariable:
    v = db.QueryVariable(name).label(label).datasource(DS).query(query).refresh(
        dm.VariableRefresh.ON_TIME_RANGE_CHANGED).sort(dm.VariableSort.ALPHABETICAL_ASC).multi(multi).include_all(multi)
    if multi:
        # `.+`, not `.*`: "All" then matches every series that has the label, as the linters ask.
        v.all_value(".+")
    return v


def job_query(t: dict) -> str:
    return f"label_values(storpath_build_info{{{t['dashboards']['job_selector']}}}, job)"


def fleet_variables(t: dict) -> List:
    return [datasource_var(),
            query_var("job", "Job", job_query(t), multi=True),
            query_var("instance", "Instance", 'label_values(storpath_build_info{job=~"$job"}, instance)', multi=True)]


def host_variables(t: dict) -> List:
    return [datasource_var(),
            query_var("job", "Job", job_query(t), multi=False),
            query_var("instance", "Instance", 'label_values(storpath_build_info{job=~"$job"}, instance)', multi=False),
            query_var("device", "Device", f"label_values(storpath_block_device_info{{{HOST_SEL}}}, device)", multi=True)]


# ---- assembly ---------------------------------------------------------------------
Section = Tuple[str, List]


def dashboard(uid: str, title: str, description: str, sections: Sequence[Section], variables: List,
              time_from: str = "now-6h", refresh: str = "1m", annotations: Sequence = ()) -> dict:
    d = db.Dashboard(title).uid(uid).description(description).tags(TAGS).readonly().refresh(refresh).time(
        time_from, "now").timezone("").tooltip(dm.DashboardCursorSync.CROSSHAIR).variables(variables)
    d.link(db.DashboardLink("storpath dashboards").type(dm.DashboardLinkType.DASHBOARDS).tags(["storpath"]).as_dropdown(
        True).include_vars(True).keep_time(True))
    d.annotation(db.AnnotationQuery().name("Annotations & Alerts").datasource(dm.DataSourceRef(
        type_val="grafana", uid="-- Grafana --")).enable(True).hide(True).icon_color("rgba(0, 211, 255, 1)").type(
        "dashboard").built_in(1))
    for annotation in annotations:
        d.annotation(annotation)
    for heading, panels in sections:
        if heading:
            d.with_row(db.Row(heading))
        for panel in panels:
            d.with_panel(panel)
    model = d.build()
    for number, panel in enumerate(model.panels, start=1):
        panel.id_val = number
    return json.loads(json.dumps(model, cls=JSONEncoder))


# ---- Fleet ------------------------------------------------------------------------
def fleet(t: dict) -> dict:
    sel, rb = FLEET_SEL, t["dashboards"]["runbook_url_base"]
    ratio = t["probes"]["throughput_ratio_threshold"]
    cap_warn, cap_crit = t["zfs"]["capacity_warning_ratio"], t["zfs"]["capacity_critical_ratio"]
    warn = steps((None, GREEN), (1, ORANGE))
    host_link = {"instance": Column("instance", link=HOST_URL)}
    verdicts = [
        # Fleet counts come from the recording rules (rules/), so they count exactly what
        # the alerts judge: watched PCI classes, the device end of each link.
        stat("Hosts with a link below expected",
             f"count(instance:storpath_pcie_links_below_expected:count{{{sel}}} > 0) or vector(0)",
             description="Hosts where a PCIe link of a storage or network device trained below what both of "
                         "its ends support.", links=[runbook(rb, "PcieLinkSpeedBelowExpected"),
                                                     runbook(rb, "PcieLinkWidthBelowExpected")]),
        stat("Links below expected", f"sum(instance:storpath_pcie_links_below_expected:count{{{sel}}}) or vector(0)",
             description="PCIe link ends of storage and network devices, on all the chosen hosts, that trained "
                         "below what both ends support.",
             links=[runbook(rb, "PcieLinkSpeedBelowExpected")]),
        stat("Devices placed below capability",
             f"sum(instance:storpath_pcie_devices_limited_by_port:count{{{sel}}}) or vector(0)", thresholds=warn,
             description="Devices that could do more than the port they sit behind (a Gen4 drive in a Gen3 slot).",
             links=[runbook(rb, "PcieDeviceLimitedByPort")]),
        stat("Namespaces on a slower LBA format",
             f"count(storpath_nvme_namespace_lba_size_bytes{{{sel}}} != storpath_nvme_namespace_best_lba_size_bytes{{{sel}}})"
             f" or vector(0)", thresholds=warn,
             description="NVMe namespaces formatted with an LBA size other than the one the drive calls best "
                         "(512 B where 4 KiB performs better).",
             links=[runbook(rb, "NvmeNamespaceLbaFormatNotBest")]),
        stat("Degraded arrays and pools",
             f"(sum(instance:storpath_md_arrays_degraded:count{{{sel}}}) or vector(0)) + "
             f"(count(storpath_zfs_pool_state{{{sel}, state!=\"online\"}} == 1) or vector(0))",
             description="md arrays with a missing or failed member, and ZFS pools in any state but online.",
             links=[runbook(rb, "MdArrayDegraded"), runbook(rb, "ZfsPoolNotOnline")]),
        stat("Probes below expectation",
             f"count(target_profile:storpath_probe_read_throughput:ratio{{{sel}}} < {ratio}) or vector(0)",
             thresholds=warn, description=f"Probes that read under {ratio:.0%} of what the configured value or the "
                                          f"PCIe path allows (the alert's threshold).",
             links=[runbook(rb, "ProbeThroughputBelowExpected")]),
    ]
    offenders = [
        table("Worst offenders: links below expected (bandwidth lost)", [
            q(f"sort_desc(storpath_pcie_expected_link_bandwidth_bytes_per_second{{{sel}}} "
              f"- storpath_pcie_current_link_bandwidth_bytes_per_second{{{sel}}} > 0 "
              f"unless on(job, instance, address) storpath_pcie_gpu_info{{{sel}}} "
              f"unless on(job, instance, address) label_join(max by (job, instance, upstream) ("
              f"storpath_pcie_device_info{{{sel}}} and on(job, instance, address) storpath_pcie_gpu_info{{{sel}}}), "
              f"\"address\", \"\", \"upstream\") "
              f"unless on(job, instance, address) storpath_pcie_link_capped{{{sel}}} == 1)"),
        ], {"bandwidth lost": Column("bandwidth lost", BPS)}, width=12, height=9, hide=["job"], labels=host_link,
            description="Every link end trained below expectation, most bandwidth lost first. Click a host. "
                        "GPUs and the ports above them, whose links train down when the GPU idles, are judged on "
                        "each Host board's GPU links row; a link capped at its port's Target Link Speed "
                        "(storpath_pcie_link_capped: trained as told) on the Host board's capped links row.",
            links=[runbook(rb, "PcieLinkSpeedBelowExpected"), runbook(rb, "PcieLinkWidthBelowExpected")]),
        table("Worst offenders: devices below capability (placement)", [
            q(f"sort_desc((storpath_pcie_max_link_speed_transfers_per_second{{{sel}}} "
              f"* storpath_pcie_max_link_width{{{sel}}} / 8 "
              f"- storpath_pcie_expected_link_speed_transfers_per_second{{{sel}}} "
              f"* storpath_pcie_expected_link_width{{{sel}}} / 8) "
              f"> 0 and on(instance, address) "
              f"storpath_pcie_device_info{{{sel}, port_type!~\"root_port|downstream_port\"}})"),
        ], {"raw capability not reachable": Column("raw capability not reachable", BPS)}, width=12, height=9,
            hide=["job"], labels=host_link,
            description="Devices that could train faster or wider than the port they sit behind allows, by the "
                        "raw bandwidth they cannot reach. Moving them to a better slot is the fix.",
            links=[runbook(rb, "PcieDeviceLimitedByPort")]),
    ]
    trends = [
        timeseries("Measured / expected read throughput (probes)", [
            q(f"target_profile:storpath_probe_read_throughput:ratio{{{sel}}}", "{{instance}} {{target}} {{profile}}")],
            unit=RATIO, thresholds=steps((None, RED), (ratio, GREEN)), soft_max=1,
            description=f"1.0 means the probe read as fast as the links allow; the alert fires under {ratio:.0%} "
                        f"(dashed line).", links=[runbook(rb, "ProbeThroughputBelowExpected")]),
        timeseries("Links below expected per host", [
            q(f"instance:storpath_pcie_links_below_expected:count{{{sel}}} > 0", "{{instance}}")],
            description="Per host, the PCIe link ends below expected over time: a step is a link that retrained."),
    ]
    health = [
        table("Exporter health", [q(f"min by (instance, collector) (storpath_scrape_collector_success{{{sel}}})")],
              {"success": Column("success", mappings=[value_map({"1": ("ok", GREEN), "0": ("failing", RED)})])},
              width=8, height=7, labels=host_link,
              description="Whether each collector of each exporter read its sources on the last scrape; a failing "
                          "one leaves its alerts blind.", links=[runbook(rb, "StorpathCollectorFailing")]),
        table("Degraded arrays", [q(f"storpath_md_degraded_disks{{{sel}}} > 0")],
              {"degraded disks": Column("degraded disks", thresholds=steps((None, GREEN), (1, RED)))},
              width=8, height=7, hide=["job"], labels=host_link,
              description="md arrays running with fewer disks than they were built with.",
              links=[runbook(rb, "MdArrayDegraded")]),
        table("Pools by fill level", [q(f"sort_desc(zpool:storpath_zfs_pool_capacity:ratio{{{sel}}})")],
              {"used": Column("used", RATIO, thresholds=steps((None, GREEN), (cap_warn, ORANGE), (cap_crit, RED)))},
              width=8, height=7, hide=["job"], labels=host_link,
              description=f"Orange from {cap_warn:.0%}, red from {cap_crit:.0%}: the ZfsPoolCapacity alerts' "
                          f"thresholds.", links=[runbook(rb, "ZfsPoolCapacityHigh")]),
    ]
    # The inventory rules (rules/inventory.yml) join storpath_host_info on (job, instance):
    # each host's count per kind carries its make and model, the median is per model.
    by_host = f"instance_kind:storpath_inventory_devices:by_host_model{{{sel}}}"
    per_model = "on(sys_vendor, product_name, kind) group_left"
    inventory_links = [runbook(rb, "InventoryFewerDevicesThanModel"), runbook(rb, "InventoryStorageLanesBelowModel"),
                       runbook(rb, "InventoryDevicesVanished"), runbook(rb, "InventoryBelowExpected")]
    inventory = [
        stat("Hosts with fewer devices than their model",
             f"count(count by (instance) ({by_host} < {per_model} model_kind:storpath_inventory_devices:median))"
             f" or vector(0)", width=6, thresholds=warn,
             description="Hosts with fewer NVMe controllers, SAS or SATA disks or HBAs than the median host of the "
                         "same make and model (the alert waits for three hosts of a model and an hour).",
             links=inventory_links[:1]),
        stat("Inventory alerts firing",
             f"count(ALERTS{{alertname=~\"Inventory.*\", alertstate=\"firing\", {sel}}}) or vector(0)", width=6,
             thresholds=warn, description="Drives vanished, fewer than the model's median or than declared, "
                                          "fewer storage lanes than the model's median.", links=inventory_links),
        table("Inventory: devices per host against the median host of its make and model", [
            q(by_host),
            q(f"{by_host} * 0 + {per_model} model_kind:storpath_inventory_devices:median"),
            q(f"{by_host} * 0 + {per_model} model_kind:storpath_inventory_hosts:count"),
            q(f"{by_host} < bool {per_model} model_kind:storpath_inventory_devices:median"),
        ], {"devices": Column("devices"), "model median": Column("model median"),
            "hosts of model": Column("hosts of model"),
            "vs model": Column("vs model", mappings=[value_map({"0": ("as the model", GREEN),
                                                                "1": ("below the model's median", ORANGE)})])},
            width=12, height=9, hide=["job"], labels=host_link,
            description="Per kind: NVMe controllers, SAS and SATA disks, HBAs (virtual machines and hosts without "
                        "a DMI product name are not compared).", links=inventory_links[:1]),
    ]
    return dashboard("storpath-fleet", "storpath / Fleet overview",
                     "Which hosts run their storage below what the hardware can deliver.",
                     [("", verdicts), ("Where", offenders), ("Over time", trends), ("Health", health),
                      ("Inventory", inventory)],
                     fleet_variables(t))


# ---- Host -------------------------------------------------------------------------
# Link state of one link end: which of speed and width trained below what both ends
# support, or the link is down (width 0). Computed in PromQL so the table can colour it.
LINK_STATE = value_map({"0": ("at expected", GREEN), "1": ("speed below expected", RED),
                        "2": ("lanes below expected", RED), "3": ("speed and lanes below", RED)})
LINK_DOWN = dm.RangeMap(options=dm.DashboardRangeMapOptions(
    from_val=4, to=7, result=dm.ValueMappingResult(text="link down", color=RED)))
# In the PCIe tree, 8 more where a GPU's link end (the GPU or the port above it) runs below the
# expected speed: GPUs train down when idle, so its speed is judged on the GPU links row.
GPU_LINK_STATE = value_map({"9": ("GPU link idle: see GPU links", BLUE), "11": ("speed and lanes below", RED)})
GPU_LINK_DOWN = dm.RangeMap(options=dm.DashboardRangeMapOptions(
    from_val=12, to=15, result=dm.ValueMappingResult(text="link down", color=RED)))
PLACEMENT_STATE = value_map({"0": ("as capable", GREEN), "1": ("port limits device", ORANGE)})


def host(t: dict) -> dict:
    sel, rb, dev = HOST_SEL, t["dashboards"]["runbook_url_base"], 'device=~"$device"'
    ratio = t["probes"]["throughput_ratio_threshold"]
    cap_warn, cap_crit = t["zfs"]["capacity_warning_ratio"], t["zfs"]["capacity_critical_ratio"]
    aer_window, aer_limit = t["pcie"]["aer_window"], t["pcie"]["aer_correctable_threshold"]
    warn = steps((None, GREEN), (1, ORANGE))

    def per_device(metric: str, scale: str = "") -> str:
        """A per-PCI-function metric for every block device behind that function (an HBA
        carries many disks, so the block devices are the 'many' side of the join)."""
        return (f"storpath_block_device_info{{{sel}, {dev}}} * on(instance, address) group_left() "
                f"{metric}{{{sel}}}{scale}")

    def link_state(series: str = "") -> str:
        s = f"{{{sel}{series}}}"
        return (f"(storpath_pcie_current_link_speed_transfers_per_second{s} "
                f"< bool storpath_pcie_expected_link_speed_transfers_per_second{s}) "
                f"+ 2 * (storpath_pcie_current_link_width{s} < bool storpath_pcie_expected_link_width{s}) "
                f"+ 4 * (storpath_pcie_current_link_width{s} == bool 0)")

    def gpu_link_end(series: str = "") -> str:
        """8 where the link end is a GPU or the port above one and runs below the expected speed, else 0."""
        s = f"{{{sel}{series}}}"
        gpu = f"storpath_pcie_gpu_info{{{sel}}}"
        ends = (f"group by (job, instance, address) ({gpu}) or label_join(max by (job, instance, upstream) ("
                f"storpath_pcie_device_info{{{sel}}} and on(job, instance, address) {gpu}), "
                f"\"address\", \"\", \"upstream\")")
        below = (f"storpath_pcie_current_link_speed_transfers_per_second{s} "
                 f"< bool storpath_pcie_expected_link_speed_transfers_per_second{s}")
        return (f"8 * (({below}) and on(job, instance, address) ({ends}) "
                f"or on(job, instance, address) 0 * storpath_pcie_current_link_speed_transfers_per_second{s})")

    def placement_state(series: str = "") -> str:
        s = f"{{{sel}{series}}}"
        return (f"(storpath_pcie_expected_link_speed_transfers_per_second{s} "
                f"* storpath_pcie_expected_link_width{s} "
                f"< bool storpath_pcie_max_link_speed_transfers_per_second{s} * storpath_pcie_max_link_width{s})")

    def device_join(expr: str) -> str:
        return f"storpath_block_device_info{{{sel}, {dev}}} * on(instance, address) group_left() ({expr})"

    speed_cols = {
        "speed": Column("speed", GTS), "expected speed": Column("expected speed", GTS),
        "device max speed": Column("device max speed", GTS), "lanes": Column("lanes", LANES),
        "expected lanes": Column("expected lanes", LANES), "device max lanes": Column("device max lanes", LANES),
    }
    link_queries = [
        "storpath_pcie_current_link_speed_transfers_per_second", "storpath_pcie_expected_link_speed_transfers_per_second",
        "storpath_pcie_max_link_speed_transfers_per_second", "storpath_pcie_current_link_width",
        "storpath_pcie_expected_link_width", "storpath_pcie_max_link_width"]

    def scaled(metric: str) -> str:
        return " / 1e9" if metric.endswith("_transfers_per_second") else ""

    verdicts = [
        stat("Links below expected", f"instance:storpath_pcie_links_below_expected:count{{{sel}}} or vector(0)",
             width=3, description="PCIe link ends of storage and network devices trained below what both ends "
                                  "support.",
             links=[runbook(rb, "PcieLinkSpeedBelowExpected"), runbook(rb, "PcieLinkWidthBelowExpected")]),
        stat("Devices limited by their port",
             f"instance:storpath_pcie_devices_limited_by_port:count{{{sel}}} or vector(0)", width=3, thresholds=warn,
             description="Devices that could do more than the port they sit behind (a Gen4 drive in a Gen3 slot).",
             links=[runbook(rb, "PcieDeviceLimitedByPort")]),
        stat("Namespaces not on the best LBA format",
             f"count(storpath_nvme_namespace_lba_size_bytes{{{sel}}} "
             f"!= storpath_nvme_namespace_best_lba_size_bytes{{{sel}}}) or vector(0)", width=3, thresholds=warn,
             description="NVMe namespaces not formatted with the LBA size the drive calls best.",
             links=[runbook(rb, "NvmeNamespaceLbaFormatNotBest")]),
        stat("SAS PHYs below hardware maximum",
             f"instance:storpath_sas_phys_below_hardware_maximum:count{{{sel}}} or vector(0)", width=3,
             description="SAS PHYs that negotiated a rate below what both ends of the link can do.",
             links=[runbook(rb, "SasPhyLinkRateBelowMaximum")]),
        stat("SATA links held low", f"sum(storpath_sata_link_limited{{{sel}}}) or vector(0)", width=3,
             thresholds=warn, description="SATA links libata holds below the hardware's limit (lowered after "
                                          "errors or by a kernel option).",
             links=[runbook(rb, "SataLinkBelowHardwareLimit")]),
        stat("md arrays degraded", f"instance:storpath_md_arrays_degraded:count{{{sel}}} or vector(0)", width=3,
             description="md arrays running with fewer disks than they were built with.",
             links=[runbook(rb, "MdArrayDegraded")]),
        stat("ZFS pools not online", f"count(storpath_zfs_pool_state{{{sel}, state!=\"online\"}} == 1) or vector(0)",
             width=3, description="ZFS pools in any state but online (degraded, faulted, suspended...).",
             links=[runbook(rb, "ZfsPoolNotOnline")]),
        stat("Collectors failing", f"count(storpath_scrape_collector_success{{{sel}}} == 0) or vector(0)", width=3,
             description="Collectors that could not read their sources on the last scrape: their alerts are blind.",
             links=[runbook(rb, "StorpathCollectorFailing")]),
    ]
    pcie = [
        table("Storage devices: PCIe link, current vs expected vs device max", [
            *[q(per_device(m, scaled(m))) for m in link_queries],
            q(device_join(link_state())), q(device_join(placement_state())),
            q(per_device("storpath_pcie_current_link_bandwidth_bytes_per_second")),
            q(per_device("storpath_pcie_expected_link_bandwidth_bytes_per_second")),
        ], {**speed_cols, "link": Column("link", mappings=[LINK_STATE, LINK_DOWN]),
            "placement": Column("placement", mappings=[PLACEMENT_STATE]),
            "usable bandwidth": Column("usable bandwidth", BPS), "expected bandwidth": Column("expected bandwidth", BPS)},
            height=9, hide=["job", "instance"],
            description="One row per block device. Expected: the lower maximum of the link's two ends; "
                        "device max: what the device itself can do (more than expected means its port limits it).",
            links=[runbook(rb, "PcieLinkSpeedBelowExpected"), runbook(rb, "PcieLinkWidthBelowExpected"),
                   runbook(rb, "PcieDeviceLimitedByPort")]),
        table("Capped PCIe links: the target they were held to and who set it", [
            q(f"storpath_pcie_link_capped{{{sel}}} == 1"),
            *[q(f"({m}{{{sel}}} * on(job, instance, address) group_left(cause) "
                f"(storpath_pcie_link_capped{{{sel}}} == 1)) / 1e9") for m in (
                "storpath_pcie_current_link_speed_transfers_per_second",
                "storpath_pcie_target_link_speed_transfers_per_second",
                "storpath_pcie_expected_link_speed_transfers_per_second")],
        ], {"capped": Column("capped", mappings=[value_map({"1": ("trained as told", BLUE)})]),
            "speed": Column("speed", GTS), "target speed": Column("target speed", GTS),
            "both ends support": Column("both ends support", GTS)},
            height=5, hide=["job", "instance"],
            labels={"cause": Column("cause", mappings=[value_map({
                "bandwidth_controller": ("kernel's PCIe bandwidth controller (thermal cooling device)", BLUE),
                "unknown": ("unknown: firmware, a driver, a tool (setpci) or a kernel quirk", BLUE)})])},
            description="Links that trained at the Target Link Speed their port was set to, below what both ends "
                        "support: a deliberate cap, not a fault (storpath_pcie_link_capped). `cause` names who set "
                        "it; the PCIe tree below shows these links below their expected speed.",
            links=[runbook(rb, "PcieLinkCapped")]),
        table("PCIe tree: every link end up to the root port", [
            q(f"storpath_pcie_device_info{{{sel}}} * on(instance, address) group_left() "
              f"(count by (instance, address) (storpath_pcie_expected_link_speed_transfers_per_second{{{sel}}}))"),
            *[q(f"{m}{{{sel}}}{scaled(m)}") for m in link_queries],
            q(f"{link_state()} + {gpu_link_end()}"),
        ], {"present": Column("present"), **speed_cols,
            "link": Column("link", mappings=[LINK_STATE, LINK_DOWN, GPU_LINK_STATE, GPU_LINK_DOWN])},
            width=16, height=10,
            hide=["job", "instance", "present", "subsystem_vendor_id", "subsystem_device_id", "vendor_id",
                  "device_id"],
            description="Every link end with its upstream port and root port: follow `upstream` to climb the tree. "
                        "A switch's upstream port limits every drive below it. A GPU and the port above it train "
                        "down when the GPU idles: their speed is judged on the GPU links row."),
        table("Which hop limits each device", [
            q(f"storpath_pcie_path_bottleneck_bandwidth_bytes_per_second{{{sel}}}"),
        ], {"bottleneck bandwidth": Column("bottleneck bandwidth", BPS)}, width=8, height=10, hide=["job", "instance"],
            description="The lowest expected link bandwidth on the path from the device to its root port; "
                        "`bottleneck` names that hop."),
        timeseries(f"Correctable AER errors in {aer_window}", [
            q(f"increase(storpath_pcie_aer_errors_total{{{sel}, severity=\"correctable\"}}[{aer_window}])",
              "{{address}}")],
            width=12, height=7, unit="none", thresholds=steps((None, GREEN), (aer_limit, RED)),
            description=f"The PcieAerCorrectableErrorsRising alert fires above {aer_limit} in {aer_window} "
                        f"(dashed line).", links=[runbook(rb, "PcieAerCorrectableErrorsRising")]),
        timeseries("Uncorrectable AER errors per second", [
            q(f"rate(storpath_pcie_aer_errors_total{{{sel}, severity!=\"correctable\"}}[$__rate_interval])",
              "{{address}} {{severity}}")],
            width=12, height=7, unit="short",
            description="Non-fatal and fatal AER errors: the link lost data the hardware could not recover.",
            links=[runbook(rb, "PcieAerUncorrectableErrors")]),
    ]
    nvme = [
        table("NVMe namespaces: LBA format in use vs best", [
            q(f"storpath_nvme_namespace_lba_size_bytes{{{sel}, {dev}}}"),
            q(f"storpath_nvme_namespace_best_lba_size_bytes{{{sel}, {dev}}}"),
            q(f"storpath_nvme_namespace_lba_size_bytes{{{sel}, {dev}}} "
              f"!= bool storpath_nvme_namespace_best_lba_size_bytes{{{sel}}}"),
            q(f"storpath_nvme_namespace_physical_block_size_bytes{{{sel}, {dev}}}"),
            q(f"storpath_nvme_namespace_info{{{sel}, {dev}}} * on(instance, controller) group_left(model, firmware) "
              f"storpath_nvme_controller_info{{{sel}}}"),
        ], {"LBA size": Column("LBA size", BYTES), "best LBA size": Column("best LBA size", BYTES),
            "format": Column("format", mappings=[value_map({"0": ("best", GREEN), "1": ("not the best", ORANGE)})]),
            "physical block": Column("physical block", BYTES), "present": Column("present")},
            width=14, height=8, hide=["job", "instance", "present", "nsid"],
            description="A namespace formatted with 512-byte LBAs on a drive whose best format is 4 KiB does "
                        "more work per I/O. Reformatting erases the namespace: read the runbook.",
            links=[runbook(rb, "NvmeNamespaceLbaFormatNotBest")]),
        table("Identify: data read", [
            q(f"storpath_nvme_identify_available{{{sel}}}"),
            q(f"time() - storpath_nvme_identify_timestamp_seconds{{{sel}}}"),
        ], {"identify": Column("identify", mappings=[value_map({"1": ("read", GREEN), "0": ("unavailable", ORANGE)})]),
            "age": Column("age", "s")}, width=10, height=8, hide=["job", "instance"],
            description="Without Identify (no root or CAP_SYS_ADMIN, no nvme-cli) the best LBA format is unknown.",
            links=[runbook(rb, "NvmeIdentifyUnavailable")]),
    ]
    rate_state = value_map({"0": ("at hardware maximum", GREEN), "1": ("below hardware maximum", RED)})
    sas_sata = [
        table("SAS PHYs: negotiated vs programmed vs hardware rates", [
            q(f"storpath_sas_phy_negotiated_link_rate_transfers_per_second{{{sel}}} / 1e9"),
            q(f"storpath_sas_phy_minimum_link_rate_transfers_per_second{{{sel}}} / 1e9"),
            q(f"storpath_sas_phy_maximum_link_rate_transfers_per_second{{{sel}}} / 1e9"),
            q(f"storpath_sas_phy_hardware_maximum_link_rate_transfers_per_second{{{sel}}} / 1e9"),
            q(f"storpath_sas_phy_negotiated_link_rate_transfers_per_second{{{sel}}} "
              f"< bool storpath_sas_phy_hardware_maximum_link_rate_transfers_per_second{{{sel}}}"),
        ], {"negotiated": Column("negotiated", GBITS), "minimum": Column("minimum", GBITS),
            "maximum": Column("maximum", GBITS), "hardware maximum": Column("hardware maximum", GBITS),
            "rate": Column("rate", mappings=[rate_state])},
            width=14, height=8, hide=["job", "instance"],
            description="Line rates (3.0 Gbit/s is 3e9 transfers/s). A PHY negotiated below what its hardware "
                        "does, with the programmed minimum or maximum set low, is the backplane step-down.",
            links=[runbook(rb, "SasPhyLinkRateBelowMaximum"), runbook(rb, "SasPhyNegotiatedAtLoweredMinimum")]),
        table("SATA links", [
            q(f"storpath_sata_link_speed_transfers_per_second{{{sel}}} / 1e9"),
            q(f"storpath_sata_link_limit_transfers_per_second{{{sel}}} / 1e9"),
            q(f"storpath_sata_link_limited{{{sel}}}"),
        ], {"speed": Column("speed", GBITS), "libata limit": Column("libata limit", GBITS),
            "limit": Column("limit", mappings=[value_map({"0": ("hardware's", GREEN), "1": ("held below hardware", RED)})])},
            width=10, height=8, hide=["job", "instance"],
            description="The hardware limit is absent on most firmware; `held below hardware` means libata lowered "
                        "the link after errors.", links=[runbook(rb, "SataLinkBelowHardwareLimit")]),
    ]
    numa = [
        stat("NUMA nodes per socket", f"storpath_numa_nodes_per_socket{{{sel}}}", width=4, unit="none",
             thresholds=steps((None, BLUE)), description="4 on an EPYC in NPS4, 1 in NPS1."),
        table("Block devices by NUMA node", [
            q(f"storpath_block_device_numa_node{{{sel}, {dev}}}"),
            q(per_device("storpath_numa_storage_controller_node")),
        ], {"NUMA node": Column("NUMA node", mappings=[value_map({"-1": ("unknown", ORANGE)})]),
            "controller node": Column("controller node", mappings=[value_map({"-1": ("unknown", ORANGE)})])},
            width=10, height=7, hide=["job", "instance"],
            description="The NUMA node of each block device and of its controller; unknown (-1) on a machine "
                        "with several nodes means the firmware did not describe locality.",
            links=[runbook(rb, "StorageNumaNodeUnknown")]),
        table("md arrays across NUMA nodes", [q(f"storpath_md_member_numa_nodes{{{sel}}}")],
              {"NUMA nodes": Column("NUMA nodes", thresholds=steps((None, GREEN), (2, ORANGE)))},
              width=10, height=7, hide=["job", "instance"],
              description="How many NUMA nodes the members of each md array sit on; more than one is a design "
                          "choice to know about.", links=[runbook(rb, "MdArraySpansNumaNodes")]),
    ]
    member_state = [regex_map(".*faulty.*", "faulty", RED), regex_map("^in_sync.*", "in sync", GREEN),
                    regex_map(".*spare.*", "spare / rebuilding", ORANGE)]
    pool_state = value_map({"online": ("online", GREEN), "degraded": ("degraded", RED), "faulted": ("faulted", RED),
                            "removed": ("removed", RED), "unavail": ("unavail", RED), "offline": ("offline", RED),
                            "suspended": ("suspended", RED)})
    arrays = [
        table("md arrays", [
            q(f"storpath_md_level_info{{{sel}}}"),
            q(f"storpath_md_raid_disks{{{sel}}}"),
            q(f"storpath_md_degraded_disks{{{sel}}}"),
            q(f"storpath_md_sync_action{{{sel}}} == 1"),
            q(f"storpath_md_array_state{{{sel}}} == 1"),
        ], {"level_present": Column("level_present"), "disks": Column("disks"),
            "degraded": Column("degraded", thresholds=steps((None, GREEN), (1, RED))),
            "sync": Column("sync"), "state_present": Column("state_present")},
            width=12, height=7, hide=["job", "instance", "level_present", "sync", "state_present"],
            labels={"action": Column("action", mappings=[value_map({"idle": ("idle", GREEN)}),
                                                         regex_map("recover|resync|reshape", "rebuilding", ORANGE)])},
            description="Level, disks, missing disks, the sync action in progress and the array state of "
                        "each md array.", links=[runbook(rb, "MdArrayDegraded"), runbook(rb, "MdSyncStalled")]),
        table("md members", [q(f"storpath_md_member_info{{{sel}}}")], {"present": Column("present")},
              width=12, height=7, hide=["job", "instance", "present"],
              labels={"state": Column("state", mappings=member_state)},
              description="Every member of every md array and its state (in sync, faulty, spare).",
              links=[runbook(rb, "MdMemberFaulty")]),
        table("ZFS pools", [
            q(f"storpath_zfs_pool_state{{{sel}}} == 1"),
            q(f"storpath_zfs_pool_size_bytes{{{sel}}}"),
            q(f"zpool:storpath_zfs_pool_capacity:ratio{{{sel}}}"),
            q(f"storpath_zfs_pool_fragmentation_ratio{{{sel}}}"),
            q(f"storpath_zfs_pool_ashift{{{sel}}}"),
            q(f"storpath_zfs_pool_expected_ashift{{{sel}}}"),
        ], {"state_present": Column("state_present"), "size": Column("size", BYTES),
            "used": Column("used", RATIO, thresholds=steps((None, GREEN), (cap_warn, ORANGE), (cap_crit, RED))),
            "fragmentation": Column("fragmentation", RATIO), "ashift": Column("ashift"),
            "expected ashift": Column("expected ashift")},
            width=12, height=7, hide=["job", "instance", "state_present"], labels={"state": Column("state", mappings=[pool_state])},
            description=f"Used turns orange from {cap_warn:.0%} and red from {cap_crit:.0%}, as the alerts do.",
            links=[runbook(rb, "ZfsPoolNotOnline"), runbook(rb, "ZfsPoolCapacityHigh"),
                   runbook(rb, "ZfsPoolAshiftBelowSectorSize")]),
        table("ZFS vdevs not online", [q(f"storpath_zfs_vdev_state{{{sel}, state!=\"online\"}} == 1")],
              {"present": Column("present")}, width=12, height=7, hide=["job", "instance", "present"],
              labels={"state": Column("state", mappings=[pool_state])},
              description="ZFS vdevs in any state but online.", links=[runbook(rb, "ZfsVdevNotOnline")]),
    ]
    raid_verdict = value_map({"0": ("as expected", GREEN), "1": ("below both ends", RED)})
    raid = [
        table("Hardware RAID drives: negotiated vs expected link rate", [
            q(f"storpath_raid_drive_negotiated_link_rate_transfers_per_second{{{sel}}} / 1e9"),
            q(f"storpath_raid_drive_expected_link_rate_transfers_per_second{{{sel}}} / 1e9"),
            q(f"storpath_raid_drive_max_link_rate_transfers_per_second{{{sel}}} / 1e9"),
            q(f"storpath_raid_drive_negotiated_link_rate_transfers_per_second{{{sel}}} "
              f"< bool on(instance, controller, slot) storpath_raid_drive_expected_link_rate_transfers_per_second{{{sel}}} "
              f"and on(instance, controller, slot) storpath_raid_drive_link_verifiable{{{sel}}} == 1"),
        ], {"negotiated": Column("negotiated", GBITS), "expected": Column("expected", GBITS),
            "drive max": Column("drive max", GBITS), "link": Column("link", mappings=[raid_verdict])},
            width=12, height=8, hide=["job", "instance"],
            description="Each drive behind a RAID controller (slot as its tool names it): the rate it runs at, the "
                        "lower of its own and the controller port's capability, and the verdict where both ends are "
                        "known. Behind an expander there is no rate of the drive's own.",
            links=[runbook(rb, "RaidDriveLinkBelowExpected")]),
        table("Hardware RAID volumes", [
            q(f"storpath_raid_volume_state{{{sel}}} == 1"),
            q(f"max without (policy) (storpath_raid_volume_write_back{{{sel}, policy=\"configured\"}})"),
            q(f"max without (policy) (storpath_raid_volume_write_back{{{sel}, policy=\"current\"}})"),
            q(f"storpath_raid_volume_operation_progress_ratio{{{sel}}}"),
        ], {"state_present": Column("state_present"),
            "write-back configured": Column("write-back configured", mappings=[
                value_map({"1": ("write-back", GREEN), "0": ("write-through", BLUE)})]),
            "write-back now": Column("write-back now", mappings=[
                value_map({"1": ("write-back", GREEN), "0": ("write-through", ORANGE)})]),
            "progress": Column("progress", RATIO)},
            width=12, height=8, hide=["job", "instance", "state_present"],
            labels={"state": Column("state", mappings=[value_map({"optimal": ("optimal", GREEN),
                                                                  "rebuilding": ("rebuilding", ORANGE),
                                                                  "degraded": ("degraded", RED),
                                                                  "failed": ("failed", RED)})])},
            description="State, configured and current write policy (write-through now where write-back is "
                        "configured: the cache fell back), and the running operation's progress.",
            links=[runbook(rb, "RaidVolumeDegraded"), runbook(rb, "RaidCacheFellToWriteThrough")]),
        table("Hardware RAID controllers and batteries", [
            q(f"storpath_raid_controller_info{{{sel}}}"),
            q(f"storpath_raid_battery_state{{{sel}}} == 1"),
        ], {"present": Column("present"), "battery_present": Column("battery_present")},
            width=24, height=6, hide=["job", "instance", "present", "battery_present"],
            labels={"state": Column("battery", mappings=[value_map({"ok": ("ok", GREEN), "learning": ("learning", ORANGE),
                                                                    "failed": ("failed", RED),
                                                                    "missing": ("missing", RED),
                                                                    "degraded": ("degraded", ORANGE)})])},
            description="Model, firmware and PCI function of each controller (join with the PCIe rows), and its "
                        "battery or CacheVault.", links=[runbook(rb, "RaidBatteryFailed"), runbook(rb, "RaidToolFailing")]),
    ]
    def node_rate(counter: str) -> str:
        # node_exporter's series of this host, by its instance or its node_uname_info's nodename
        # (rules/config/thresholds.yml node_exporter: kube-prometheus-stack keeps <ip>:9100).
        return RULES.node_exporter_series(
            lambda matcher: f"rate({counter}{{{', '.join(m for m in (matcher, dev) if m)}}}[$__rate_interval])", t,
            "$instance")

    throughput = [
        timeseries("Read throughput vs the link's expected bandwidth", [
            q(node_rate("node_disk_read_bytes_total"), "{{device}} read"),
            q(per_device("storpath_pcie_expected_link_bandwidth_bytes_per_second"), "{{device}} link allows"),
        ], unit=BPS, description="Live reads from node_exporter against what the device's link can carry."),
        timeseries("Write throughput vs the link's expected bandwidth", [
            q(node_rate("node_disk_written_bytes_total"), "{{device}} write"),
            q(per_device("storpath_pcie_expected_link_bandwidth_bytes_per_second"), "{{device}} link allows"),
        ], unit=BPS, description="Live writes from node_exporter against what the device's link can carry."),
        timeseries("Probes: measured vs expected read throughput", [
            q(f"storpath_probe_read_bytes_per_second{{{sel}}}", "{{target}} {{profile}} measured"),
            q(f"storpath_probe_expected_read_bytes_per_second{{{sel}}}", "{{target}} {{profile}} expected"),
        ], width=8, unit=BPS, description="What each read probe measured beside what its path should give.",
            links=[runbook(rb, "ProbeThroughputBelowExpected")]),
        timeseries("Probes: measured / expected", [
            q(f"target_profile:storpath_probe_read_throughput:ratio{{{sel}}}", "{{target}} {{profile}}")],
            width=8, unit=RATIO, thresholds=steps((None, RED), (ratio, GREEN)), soft_max=1,
            description=f"The alert fires under {ratio:.0%} (dashed line) for two probes in a row.",
            links=[runbook(rb, "ProbeThroughputBelowExpected")]),
        timeseries("Probe read latency (p99)", [
            q(f"storpath_probe_read_latency_seconds{{{sel}, quantile=\"0.99\"}}", "{{target}} {{profile}}")],
            width=8, unit="s", description="The 99th percentile of read latency in each probe run."),
    ]
    nvme_health = [
        timeseries("NVMe composite temperature vs warning threshold", [
            q(f"storpath_nvme_temperature_celsius{{{sel}, sensor=\"composite\"}}", "{{controller}}"),
            q(f"storpath_nvme_temperature_max_celsius{{{sel}, sensor=\"composite\"}}",
              "{{controller}} over-temperature threshold"),
            q(f"storpath_nvme_warning_composite_temperature_celsius{{{sel}}}", "{{controller}} WCTEMP"),
        ], unit=CELSIUS,
            description="Above its threshold a drive is outside its normal range and throttles. WCTEMP needs the "
                        "Identify data (root or CAP_SYS_ADMIN).",
            links=[runbook(rb, "NvmeTemperatureAboveWarning")]),
        timeseries("NVMe share of time throttled", [
            q(f"rate(storpath_nvme_thermal_management_time_seconds_total{{{sel}}}[$__rate_interval])",
              "{{controller}} level {{level}}")], unit=RATIO, soft_max=1,
            description="Thermal management: level 1 is the light step, level 2 the heavy one. From the SMART log, "
                        "read every minute.", links=[runbook(rb, "NvmeThermalThrottling")]),
        table("NVMe critical warnings set", [q(f"storpath_nvme_critical_warning{{{sel}}} == 1")],
              {"set": Column("set", mappings=[value_map({"1": ("set", RED)})])}, width=8, height=7,
              hide=["job", "instance"],
              description="Critical warning bits a drive reports in its SMART log: the drive's own verdict.",
              links=[runbook(rb, "NvmeCriticalWarning")]),
        table("NVMe available spare vs threshold", [
            q(f"storpath_nvme_available_spare_ratio{{{sel}}}"),
            q(f"storpath_nvme_available_spare_threshold_ratio{{{sel}}}"),
            q(f"storpath_nvme_available_spare_ratio{{{sel}}} < bool storpath_nvme_available_spare_threshold_ratio{{{sel}}}"),
        ], {"spare": Column("spare", RATIO), "threshold": Column("threshold", RATIO),
            "state": Column("state", mappings=[value_map({"0": ("above threshold", GREEN),
                                                          "1": ("below threshold", RED)})])},
            width=8, height=7, hide=["job", "instance"],
            description="Spare capacity left for worn-out blocks, beside the threshold below which the drive "
                        "warns.", links=[runbook(rb, "NvmeSpareBelowThreshold")]),
        table("Misaligned partitions", [
            q(f"storpath_block_partition_misaligned{{{sel}}} == 1"),
            q(f"storpath_block_partition_start_bytes{{{sel}}} "
              f"and on(instance, device) (storpath_block_partition_misaligned{{{sel}}} == 1)"),
            q(f"storpath_block_alignment_offset_bytes{{{sel}}} "
              f"and on(instance, device) (storpath_block_partition_misaligned{{{sel}}} == 1)"),
        ], {"misaligned": Column("misaligned"), "start": Column("start", BYTES),
            "alignment offset": Column("alignment offset", BYTES)},
            width=8, height=7, hide=["job", "instance", "misaligned"],
            description="Partitions whose start is not a multiple of the disk's physical block (every write a "
                        "read-modify-write) or optimal I/O size.",
            links=[runbook(rb, "BlockPartitionMisaligned")]),
    ]
    inventory = [
        table("Inventory: devices per kind", [q(f"storpath_inventory_devices{{{sel}}}")],
              {"devices": Column("devices")}, width=6, height=8, hide=["job", "instance"],
              description="How many NVMe controllers, SAS and SATA disks and HBAs the host has now.",
              links=[runbook(rb, "InventoryDevicesVanished"), runbook(rb, "InventoryBelowExpected")]),
        table("Inventory: every storage device", [q(f"storpath_inventory_device_info{{{sel}}}")],
              {"present": Column("present")},
              width=18, height=8, hide=["job", "instance", "present"],
              description="Every NVMe controller and namespace, SAS and SATA disk and HBA the OS sees, with the "
                          "PCI function it is or sits behind and that function's physical slot.",
              links=[runbook(rb, "InventoryDevicesVanished"), runbook(rb, "InventoryFewerDevicesThanModel")]),
    ]
    # ---- every path to the data (issue: NVMe multipath, dm-multipath, dual-ported drives)
    path_count = value_map({"0": ("every path serves", GREEN), "1": ("fewer paths serve", ORANGE),
                            "2": ("no path serves", RED)})
    map_verdict = value_map({"0": ("every path serves", GREEN), "1": ("fewer paths serve", ORANGE),
                             "2": ("no path serves", RED), "3": ("path states unknown", ORANGE)})
    path_state = [value_map({"live": ("live", GREEN), "running": ("running", GREEN)}),
                  regex_map("^(new|connecting|resetting|created|quiesce)$", "", ORANGE),
                  regex_map("^(dead|deleting.*|offline|transport-offline|blocked|cancel|deleted|unknown)$", "", RED)]
    nvme_degraded = (f"storpath_nvme_subsystem_paths_live{{{sel}}} "
                     f"< on(job, instance, subsystem) storpath_nvme_subsystem_paths{{{sel}}}")
    mpath_degraded = f"storpath_multipath_paths_failed{{{sel}}} > 0"
    path_links = [runbook(rb, "StoragePathsDegraded"), runbook(rb, "StoragePathLost"),
                  runbook(rb, "StoragePathsMissing")]
    paths = [
        stat("Multipath devices on fewer paths", f"count(({nvme_degraded}) or ({mpath_degraded})) or vector(0)",
             width=4, thresholds=warn,
             description="NVMe subsystems with fewer live controllers than they list, and dm-multipath maps with "
                         "fewer active paths than they have: I/O still flows, redundancy is gone.",
             links=path_links),
        stat("Multipath devices without a path",
             f"count((storpath_nvme_subsystem_paths_live{{{sel}}} == 0) "
             f"or (storpath_multipath_paths_failed{{{sel}}} >= on(job, instance, device) "
             f"storpath_multipath_paths{{{sel}}} > 0)) or vector(0)", width=4,
             description="NVMe subsystems with no live controller and dm-multipath maps with no active path: "
                         "I/O to them queues or fails.", links=[runbook(rb, "StoragePathLost")]),
        stat("Failed multipath paths", f"sum(storpath_multipath_paths_failed{{{sel}}}) or vector(0)", width=4,
             description="Paths dm-multipath counts as failed, over every map of the host.",
             links=[runbook(rb, "StoragePathsDegraded")]),
        stat("Dual-ported drives missing a path",
             f"count(storpath_scsi_drive_paths{{{sel}}} "
             f"< on(job, instance, wwid, model) storpath_scsi_drive_paths_expected{{{sel}}}) or vector(0)",
             width=4, thresholds=warn,
             description="SAS drives reached through fewer paths than the drives of the same model on this host: "
                         "a cable, expander or HBA port of their other path is gone.",
             links=[runbook(rb, "StorageDrivePathMissing")]),
        stat("Namespaces without an optimized path",
             f"count(storpath_nvme_namespace_optimized_paths{{{sel}}} == 0) or vector(0)", width=4,
             thresholds=warn,
             description="Namespaces whose live paths are all non-optimized in ANA terms: every I/O goes through "
                         "the array's non-owning controller.", links=[runbook(rb, "StorageNoOptimizedPath")]),
        stat("Multipath maps over mixed link rates",
             f"count(storpath_multipath_link_rates{{{sel}}} > 1) or vector(0)", width=4, thresholds=warn,
             description="dm-multipath maps whose paths negotiated different link rates: round-robin I/O runs at "
                         "the slower path's pace.", links=[runbook(rb, "StorageMultipathMixedLinkRates")]),
        table("NVMe subsystems: paths vs live paths", [
            q(f"storpath_nvme_subsystem_paths{{{sel}}}"),
            q(f"storpath_nvme_subsystem_paths_live{{{sel}}}"),
            q(f"(storpath_nvme_subsystem_paths_live{{{sel}}} < bool on(job, instance, subsystem) "
              f"storpath_nvme_subsystem_paths{{{sel}}}) + (storpath_nvme_subsystem_paths_live{{{sel}}} == bool 0)"),
            q(f"storpath_nvme_subsystem_info{{{sel}}}"),
        ], {"paths": Column("paths"), "live": Column("live"), "verdict": Column("verdict", mappings=[path_count]),
            "present": Column("present")},
            width=12, height=7, hide=["job", "instance", "present", "serial"],
            description="Each NVMe subsystem (native multipath): the controllers the kernel lists and those in "
                        "state live. A controller deleted after ctrl_loss_tmo leaves the list: StoragePathsMissing "
                        "compares with the last day's maximum.", links=path_links),
        table("Multipath maps: paths vs active vs failed", [
            q(f"storpath_multipath_paths{{{sel}}}"),
            q(f"storpath_multipath_paths_active{{{sel}}}"),
            q(f"storpath_multipath_paths_failed{{{sel}}}"),
            q(f"storpath_multipath_paths_unknown{{{sel}}}"),
            q(f"(storpath_multipath_paths_failed{{{sel}}} > bool 0) + (storpath_multipath_paths_failed{{{sel}}} "
              f">= bool on(job, instance, device, wwid) storpath_multipath_paths{{{sel}}}) + 3 * "
              f"((storpath_multipath_paths_unknown{{{sel}}} > bool 0) * (storpath_multipath_paths_failed{{{sel}}} "
              f"== bool 0))"),
            q(f"storpath_multipath_device_info{{{sel}}}"),
        ], {"paths": Column("paths"), "active": Column("active"),
            "failed": Column("failed", thresholds=steps((None, GREEN), (1, RED))),
            "unknown": Column("unknown", thresholds=steps((None, GREEN), (1, ORANGE))),
            "verdict": Column("verdict", mappings=[map_verdict]), "present": Column("present")},
            width=12, height=7, hide=["job", "instance", "present", "uuid"],
            description="Each dm-multipath map, by kernel device, name and WWID: its paths, those that serve "
                        "(dmsetup's A), those failed (dmsetup's F, or a device not running) and those of unknown "
                        "state (no dmsetup verdict and a device that says running).", links=path_links),
        table("NVMe paths: each controller's state", [
            q(f"(storpath_nvme_path_state{{{sel}}} == 1) * on(job, instance, subsystem, controller) "
              f"group_left(address) storpath_nvme_path_info{{{sel}}}"),
        ], {"present": Column("present")}, width=12, height=8, hide=["job", "instance", "present"],
            labels={"state": Column("state", mappings=path_state)},
            description="Every controller of every NVMe subsystem: its transport, where it goes and its state "
                        "(live serves; connecting and resetting are retrying; dead and deleting are gone).",
            links=path_links),
        table("Multipath paths: each path's state", [
            q(f"storpath_multipath_path_state{{{sel}}} == 1"),
            q(f"storpath_multipath_path_failed{{{sel}}}"),
        ], {"present": Column("present"),
            "failed in map": Column("failed in map", mappings=[value_map({"0": ("no", GREEN), "1": ("yes", RED)})])},
            width=12, height=8, hide=["job", "instance", "present"],
            labels={"state": Column("state", mappings=path_state)},
            description="Every path of every dm-multipath map: the path device's SCSI state (or NVMe controller "
                        "state) and whether the map counts it as failed (basis: dmsetup status, or the device "
                        "state where dmsetup did not run).", links=path_links),
        table("Dual-ported drives: paths vs their peers", [
            q(f"storpath_scsi_drive_paths{{{sel}}}"),
            q(f"storpath_scsi_drive_paths_expected{{{sel}}}"),
            q(f"storpath_scsi_drive_paths{{{sel}}} < bool on(job, instance, wwid, model) "
              f"storpath_scsi_drive_paths_expected{{{sel}}}"),
        ], {"paths": Column("paths"), "peers' paths": Column("peers' paths"),
            "verdict": Column("verdict", mappings=[value_map({"0": ("as its peers", GREEN),
                                                              "1": ("missing a path", ORANGE)})])},
            width=24, height=7, hide=["job", "instance"],
            description="Each SAS drive (by WWID) of a model of which some drive on the host is reached through "
                        "more than one port: its paths, and the most any drive of the same model has.",
            links=[runbook(rb, "StorageDrivePathMissing")]),
    ]
    gpu_only = f"and on(job, instance, address) storpath_pcie_gpu_info{{{sel}}}"
    below = value_map({"0": ("at expected", GREEN), "1": ("below expected", ORANGE)})
    gpu_links = [runbook(rb, "PcieGpuLinkSpeedBelowExpected"), runbook(rb, "PcieGpuLinkWidthBelowExpected")]
    gpus = [
        table("GPU links: highest observed vs expected", [
            q(f"storpath_pcie_gpu_info{{{sel}}}"),
            q(f"(storpath_pcie_current_link_speed_transfers_per_second{{{sel}}} {gpu_only}) / 1e9"),
            q(f"storpath_pcie_max_observed_link_speed_transfers_per_second{{{sel}}} / 1e9"),
            q(f"(storpath_pcie_expected_link_speed_transfers_per_second{{{sel}}} {gpu_only}) / 1e9"),
            q(f"storpath_pcie_max_observed_link_width{{{sel}}}"),
            q(f"storpath_pcie_expected_link_width{{{sel}}} {gpu_only}"),
            q(f"storpath_pcie_max_observed_link_speed_transfers_per_second{{{sel}}} < bool on(job, instance, address) "
              f"storpath_pcie_expected_link_speed_transfers_per_second{{{sel}}}"),
            q(f"storpath_pcie_max_observed_link_width{{{sel}}} < bool on(job, instance, address) "
              f"storpath_pcie_expected_link_width{{{sel}}}"),
        ], {"present": Column("present"), "speed now": Column("speed now", GTS),
            "highest speed": Column("highest speed", GTS), "expected speed": Column("expected speed", GTS),
            "highest lanes": Column("highest lanes", LANES), "expected lanes": Column("expected lanes", LANES),
            "speed": Column("speed", mappings=[below]), "lanes": Column("lanes", mappings=[below])},
            width=14, height=7, hide=["job", "instance", "present"],
            description="Each GPU or accelerator: the highest link speed and width sampled over the collector's "
                        "window against what both ends support. An idle GPU trains down to 2.5 GT/s, so a speed "
                        "below expected is a fault only while it works (the alerts look at busy GPUs); a width "
                        "below expected is one at any time.", links=gpu_links),
        timeseries("GPU link speed: highest observed vs expected", [
            q(f"storpath_pcie_max_observed_link_speed_transfers_per_second{{{sel}}} / 1e9", "{{address}} highest"),
            q(f"(storpath_pcie_expected_link_speed_transfers_per_second{{{sel}}} {gpu_only}) / 1e9",
              "{{address}} expected"),
        ], width=10, height=7, unit="none", axis_label="GT/s",
            description="The highest speed each GPU's link reached in the window, in GT/s, over time: it rises to "
                        "the expected speed when the GPU works and falls back when it idles.", links=gpu_links),
    ]
    annotations = [
        db.AnnotationQuery().name("Link speed or width changed").datasource(DS).enable(True).hide(False).icon_color(
            "orange").expr(f"changes(storpath_pcie_current_link_speed_transfers_per_second{{{sel}}}[5m]) > 0 "
                           f"or changes(storpath_pcie_current_link_width{{{sel}}}[5m]) > 0"),
    ]
    return dashboard("storpath-host", "storpath / Host",
                     "One host: every storage path, its links, formats, arrays and pools, and whether it runs at "
                     "the speed its hardware allows.",
                     [("", verdicts), ("PCIe", pcie), ("NVMe", nvme), ("SAS and SATA", sas_sata), ("Paths", paths),
                      ("GPU links", gpus), ("NUMA", numa),
                      ("md and ZFS", arrays), ("Hardware RAID", raid), ("Throughput and probes", throughput),
                      ("NVMe temperature, health and alignment", nvme_health), ("Inventory", inventory)],
                     host_variables(t), annotations=annotations)


# ---- Capacity and performance review --------------------------------------------------
def capacity(t: dict) -> dict:
    """Everything here reads recording rules (rules/definitions/capacity.py): a month over a
    fleet must not re-read a week of raw samples at every step."""
    sel, rb = FLEET_SEL, t["dashboards"]["runbook_url_base"]
    c = t["capacity"]
    cap_warn, cap_crit = t["zfs"]["capacity_warning_ratio"], t["zfs"]["capacity_critical_ratio"]
    peak = c["peak_window"]
    head = c["headroom_warning_ratio"]
    headroom = [
        timeseries(f"Peak read throughput ({peak}) / what the link allows, per device", [
            q(f"instance_device:storpath_block_device_read_peak:link_ratio{{{HOST_ONLY_FLEET}}}",
              "{{instance}} {{device}}")], width=24, unit=RATIO, interval=c["evaluation_interval"],
            thresholds=steps((None, GREEN), (head, ORANGE)), soft_max=1,
            description=f"1.0: the device has read as fast as its link allows at some point in the last {peak}. "
                        f"Above {head:.0%} (dashed) the link, not the drive, is the next limit."),
        table(f"Devices closest to their link ({peak} peak)", [
            q(f"topk(20, instance_device:storpath_block_device_read_peak:link_ratio{{{HOST_ONLY_FLEET}}})"),
        ], {"peak / link": Column("peak / link", RATIO, thresholds=steps((None, GREEN), (head, ORANGE)))},
            width=24, height=7, labels={"instance": Column("instance", link=HOST_URL)},
            description=f"The twenty devices whose {peak} peak read came closest to their link's bandwidth."),
    ]
    trends = [
        timeseries("Probe results over weeks", [
            q(f"storpath_probe_read_bytes_per_second{{{sel}}}", "{{instance}} {{target}} {{profile}}")],
            unit=BPS, interval="1h", description="Probes run hourly: one point an hour is every result."),
        timeseries("Average read throughput per drive, by model", [
            q("model:storpath_nvme_read_bytes:avg_rate5m", "{{model}}")], unit=BPS, interval=c["evaluation_interval"],
            description="Across the whole fleet (not narrowed by the host filter): one line per NVMe model."),
        timeseries("Read throughput per md array", [
            q(f"instance_device:storpath_block_device_read_bytes:rate5m{{{HOST_ONLY_FLEET}, device=~\"md.*\"}}",
              "{{instance}} {{device}}")], unit=BPS, interval=c["evaluation_interval"],
            description="Read throughput of each md array, averaged over 5 minutes."),
        timeseries(f"Pool capacity used, projected {c['projection_horizon']} ahead", [
            q(f"zpool:storpath_zfs_pool_capacity:ratio{{{sel}}}", "{{instance}} {{zpool}} used"),
            q(f"zpool:storpath_zfs_pool_capacity:predict_linear{{{sel}}}",
              "{{instance}} {{zpool}} projected"),
        ], unit=RATIO, interval=c["evaluation_interval"], soft_max=1,
            thresholds=steps((None, GREEN), (cap_warn, ORANGE), (cap_crit, RED)),
            description=f"ZFS slows down past {cap_warn:.0%} full (warning) and badly past {cap_crit:.0%} "
                        f"(critical); dashed lines. Projection from the growth of the last {c['growth_window']}.",
            links=[runbook(rb, "ZfsPoolCapacityHigh"), runbook(rb, "ZfsPoolCapacityCritical")]),
    ]
    pools = [
        table(f"Days until a pool crosses {cap_warn:.0%} and {cap_crit:.0%}", [
            q(f"zpool:storpath_zfs_pool_capacity_warning:days_left{{{sel}}}"),
            q(f"zpool:storpath_zfs_pool_capacity_critical:days_left{{{sel}}}"),
        ], {f"days to {cap_warn:.0%}": Column(f"days to {cap_warn:.0%}", "none",
                                               thresholds=steps((None, RED), (30, ORANGE), (90, GREEN))),
            f"days to {cap_crit:.0%}": Column(f"days to {cap_crit:.0%}", "none",
                                               thresholds=steps((None, RED), (30, ORANGE), (90, GREEN)))},
            width=24, height=7, hide=["job"], labels={"instance": Column("instance", link=HOST_URL)},
            description=f"From the growth of the last {c['growth_window']}; only growing pools below the "
                        f"threshold are listed."),
    ]
    return dashboard("storpath-capacity", "storpath / Capacity and performance review",
                     "For the monthly review: headroom, throughput trends, probe results over weeks and pool growth, "
                     "all from recording rules.",
                     [("Headroom", headroom), ("Trends", trends), ("Pools", pools)], fleet_variables(t),
                     time_from="now-30d", refresh="")

DASHBOARDS = {"storpath-fleet.json": fleet, "storpath-host.json": host, "storpath-capacity.json": capacity}


def render(config: Optional[str] = None) -> Dict[str, str]:
    thresholds = load_thresholds(config)
    return {name: json.dumps(build(thresholds), indent=2, sort_keys=True) + "\n" for name, build in DASHBOARDS.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a dashboard in --out is out of date")
    parser.add_argument("--config", help="a site's values, merged over rules/config/thresholds.yml")
    parser.add_argument("--out", default=HERE, help="where to write the dashboards (default: dashboards/)")
    args = parser.parse_args(argv)
    stale = []
    os.makedirs(args.out, exist_ok=True)
    for name, content in render(args.config).items():
        path = os.path.join(args.out, name)
        current = open(path).read() if os.path.exists(path) else None
        if current != content:
            stale.append(name)
            if not args.check:
                with open(path, "w") as handle:
                    handle.write(content)
    if args.check and stale:
        print(f"out of date: {', '.join(stale)}; run python dashboards/generate.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
