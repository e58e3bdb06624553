"""Generates storpath's Grafana dashboards (dashboards/*.json) from code.

    python dashboards/generate.py          # rewrite the JSON files
    python dashboards/generate.py --check  # exit 1 if a committed file is out of date

A small builder instead of a dashboard SDK: the panels storpath needs are few, and
keeping the model in ~one screen of helpers makes every query easy to review. Every
panel query is run against a real Prometheus in tests/dashboards/.

Layout: each dashboard is a list of rows; a row is a list of panels that share the
24-column grid; the view a reviewer wants first is the first row.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
DS = {"type": "prometheus", "uid": "${datasource}"}
TAGS = ["storpath", "storage"]
SCHEMA_VERSION = 39

# Selector every query carries, so the job/instance variables narrow every panel.
SEL = 'job=~"$job", instance=~"$instance"'


# ---- panels ------------------------------------------------------------------
def target(expr: str, legend: str = "", instant: bool = False, fmt: str = "time_series") -> Dict:
    t = {"datasource": DS, "expr": expr, "legendFormat": legend, "refId": "", "range": not instant,
         "instant": instant}
    if fmt != "time_series":
        t["format"] = fmt
    return t


def panel(kind: str, title: str, targets: List[Dict], width: int, height: int, unit: str = "short",
          description: str = "", **extra) -> Dict:
    p = {"type": kind, "title": title, "description": description, "datasource": DS, "targets": targets,
         "gridPos": {"w": width, "h": height}, "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
         "options": {}}
    for t, ref in zip(targets, "ABCDEFGHIJ"):
        t["refId"] = ref
    p.update(extra)
    return p


def stat(title: str, expr: str, width: int = 4, unit: str = "short", description: str = "",
         thresholds: Optional[List] = None, link: str = "") -> Dict:
    steps = thresholds or [{"color": "green", "value": None}, {"color": "red", "value": 1}]
    p = panel("stat", title, [target(expr, instant=True)], width, 4, unit, description)
    p["fieldConfig"]["defaults"]["thresholds"] = {"mode": "absolute", "steps": steps}
    p["options"] = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                    "colorMode": "background", "graphMode": "none", "textMode": "value"}
    if link:
        p["links"] = [{"title": "details", "url": link}]
    return p


def timeseries(title: str, targets: List[Dict], width: int = 12, height: int = 8, unit: str = "short",
               description: str = "") -> Dict:
    p = panel("timeseries", title, targets, width, height, unit, description)
    p["options"] = {"legend": {"displayMode": "table", "placement": "bottom", "calcs": ["lastNotNull", "max"]},
                    "tooltip": {"mode": "multi", "sort": "desc"}}
    p["fieldConfig"]["defaults"]["custom"] = {"lineWidth": 1, "fillOpacity": 0, "showPoints": "never"}
    return p


def table(title: str, targets: List[Dict], width: int = 24, height: int = 8, description: str = "",
          rename: Optional[Dict[str, str]] = None, units: Optional[Dict[str, str]] = None,
          links: Optional[Dict[str, str]] = None, hide: Optional[List[str]] = None) -> Dict:
    """A table from instant queries in table format, merged on their common labels."""
    for t in targets:
        t["instant"], t["range"], t["format"] = True, False, "table"
    p = panel("table", title, targets, width, height, "short", description)
    exclude = {name: True for name in ["Time", "__name__", *(hide or [])]}
    p["transformations"] = [{"id": "merge", "options": {}},
                            {"id": "organize", "options": {"excludeByName": exclude, "renameByName": rename or {}}}]
    overrides = []
    for column, unit in (units or {}).items():
        overrides.append({"matcher": {"id": "byName", "options": column},
                          "properties": [{"id": "unit", "value": unit}]})
    for column, url in (links or {}).items():
        overrides.append({"matcher": {"id": "byName", "options": column},
                          "properties": [{"id": "links", "value": [{"title": "open", "url": url}]}]})
    p["fieldConfig"]["overrides"] = overrides
    p["options"] = {"showHeader": True, "cellHeight": "sm"}
    return p


def text(title: str, content: str, width: int = 24, height: int = 3) -> Dict:
    p = {"type": "text", "title": title, "gridPos": {"w": width, "h": height},
         "options": {"mode": "markdown", "content": content}}
    return p


# ---- variables ------------------------------------------------------------------
def datasource_var() -> Dict:
    return {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
            "current": {}, "hide": 0, "refresh": 1, "regex": "", "options": []}


def query_var(name: str, label: str, query: str, multi: bool = True, include_all: bool = True) -> Dict:
    return {"name": name, "label": label, "type": "query", "datasource": DS,
            "definition": query, "query": {"query": query, "refId": f"{name}-var"},
            "refresh": 2, "sort": 1, "multi": multi, "includeAll": include_all, "allValue": ".*",
            "current": {}, "hide": 0, "options": [], "regex": ""}


def variables(with_device: bool) -> List[Dict]:
    out = [datasource_var(),
           query_var("job", "Job", "label_values(storpath_build_info, job)"),
           query_var("instance", "Instance", 'label_values(storpath_build_info{job=~"$job"}, instance)')]
    if with_device:
        out.append(query_var("device", "Device",
                             'label_values(storpath_block_device_info{job=~"$job", instance=~"$instance"}, device)'))
    return out


# ---- assembly -----------------------------------------------------------------
def dashboard(uid: str, title: str, description: str, rows: List[List[Dict]], with_device: bool,
              time_from: str = "now-6h", annotations: Optional[List[Dict]] = None, links=None) -> Dict:
    panels, y, next_id = [], 0, 1
    for row in rows:
        x, height = 0, 0
        for p in row:
            w, h = p["gridPos"]["w"], p["gridPos"]["h"]
            if x + w > 24:
                y, x = y + height, 0
                height = 0
            p["gridPos"] = {"x": x, "y": y, "w": w, "h": h}
            p["id"] = next_id
            next_id += 1
            x += w
            height = max(height, h)
            panels.append(p)
        y += height
    builtin = {"builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"}, "enable": True,
               "hide": True, "iconColor": "rgba(0, 211, 255, 1)", "name": "Annotations & Alerts", "type": "dashboard"}
    return {
        "uid": uid, "title": title, "description": description, "tags": TAGS, "editable": True,
        "schemaVersion": SCHEMA_VERSION, "version": 1, "timezone": "", "refresh": "1m", "graphTooltip": 1,
        "time": {"from": time_from, "to": "now"}, "timepicker": {}, "fiscalYearStartMonth": 0, "liveNow": False,
        "id": None, "weekStart": "",
        "annotations": {"list": [builtin, *(annotations or [])]},
        "templating": {"list": variables(with_device)},
        "links": links or [{"title": "storpath dashboards", "type": "dashboards", "tags": ["storpath"],
                            "asDropdown": True, "includeVars": True, "keepTime": True}],
        "panels": panels,
    }


HOST_URL = "/d/storpath-host/storpath-host?var-instance=${__data.fields.instance}&${datasource:queryparam}"


def fleet() -> Dict:
    # Fleet counts come from the recording rules (rules/), so they count exactly what the
    # alerts judge: watched PCI classes, the device end of each link.
    rows = [
        [
            stat("Hosts with a link below expected",
                 f"count(instance:storpath_pcie_links_below_expected:count{{{SEL}}} > 0) or vector(0)",
                 description="Hosts where a PCIe link of a storage or network device trained below what both "
                             "of its ends support."),
            stat("Links below expected",
                 f"sum(instance:storpath_pcie_links_below_expected:count{{{SEL}}}) or vector(0)"),
            stat("Devices placed below capability",
                 f"sum(instance:storpath_pcie_devices_limited_by_port:count{{{SEL}}}) or vector(0)",
                 thresholds=[{"color": "green", "value": None}, {"color": "orange", "value": 1}],
                 description="Devices that could do more than the port they sit behind (a Gen4 drive in a Gen3 slot)."),
            stat("Namespaces on a slower LBA format",
                 f"count(storpath_nvme_namespace_lba_size_bytes{{{SEL}}} "
                 f"!= storpath_nvme_namespace_best_lba_size_bytes) or vector(0)",
                 thresholds=[{"color": "green", "value": None}, {"color": "orange", "value": 1}]),
            stat("Degraded arrays and pools",
                 f"(sum(instance:storpath_md_arrays_degraded:count{{{SEL}}}) or vector(0)) + "
                 f"(count(storpath_zfs_pool_state{{{SEL}, state!=\"online\"}} == 1) or vector(0))"),
            stat("Probes below expectation",
                 f"count(target_profile:storpath_probe_read_throughput:ratio{{{SEL}}} < 0.7) or vector(0)",
                 thresholds=[{"color": "green", "value": None}, {"color": "orange", "value": 1}],
                 description="Probes that read under 70 % of what the configured value or the PCIe path allows."),
        ],
        [
            table("Worst offenders: links below expected (bandwidth lost)", [
                target(f"sort_desc(storpath_pcie_expected_link_bandwidth_bytes_per_second{{{SEL}}} "
                       f"- storpath_pcie_current_link_bandwidth_bytes_per_second > 0)"),
            ], width=12, height=9, rename={"Value": "bandwidth lost"}, units={"bandwidth lost": "Bps"},
                links={"instance": HOST_URL}, hide=["job"],
                description="Every link end trained below expectation, most bandwidth lost first. Click a host."),
            table("Worst offenders: devices below capability (placement)", [
                target(f"sort_desc((storpath_pcie_max_link_speed_transfers_per_second{{{SEL}}} "
                       f"* storpath_pcie_max_link_width / 8 "
                       f"- storpath_pcie_expected_link_speed_transfers_per_second * storpath_pcie_expected_link_width / 8) "
                       f"> 0 and on(instance, address) storpath_pcie_device_info{{port_type!~\"root_port|downstream_port\"}})"),
            ], width=12, height=9, rename={"Value": "raw capability not reachable"}, units={"raw capability not reachable": "Bps"},
                links={"instance": HOST_URL}, hide=["job"]),
        ],
        [
            timeseries("Measured / expected read throughput (probes)", [
                target(f"target_profile:storpath_probe_read_throughput:ratio{{{SEL}}}",
                       "{{instance}} {{target}} {{profile}}")], width=12, unit="percentunit",
                description="1.0 means the probe read as fast as the links allow; the alert threshold is 0.7."),
            timeseries("Links below expected per host", [
                target(f"instance:storpath_pcie_links_below_expected:count{{{SEL}}} > 0", "{{instance}}")], width=12),
        ],
        [
            table("Exporter health", [
                target(f"min by (instance, collector) (storpath_scrape_collector_success{{{SEL}}})"),
            ], width=12, height=7, rename={"Value": "success"}, hide=["job"]),
            table("Degraded arrays", [
                target(f"storpath_md_degraded_disks{{{SEL}}} > 0"),
            ], width=12, height=7, rename={"Value": "degraded disks"}, links={"instance": HOST_URL}),
        ],
    ]
    return dashboard("storpath-fleet", "storpath / Fleet overview",
                     "Which hosts run their storage below what the hardware can deliver.", rows, with_device=False)


def host() -> Dict:
    dev = 'device=~"$device"'

    def per_device(metric: str) -> str:
        """A per-PCI-function metric for every block device behind that function (an HBA
        carries many disks, so the block devices are the 'many' side of the join)."""
        return (f"storpath_block_device_info{{{SEL}, {dev}}} * on(instance, address) group_left() "
                f"{metric}{{{SEL}}}")
    rows = [
        [
            table("Storage devices: PCIe link (current vs expected vs device max)", [
                target(per_device("storpath_pcie_current_link_speed_transfers_per_second")),
                target(per_device("storpath_pcie_expected_link_speed_transfers_per_second")),
                target(per_device("storpath_pcie_max_link_speed_transfers_per_second")),
                target(per_device("storpath_pcie_current_link_width")),
                target(per_device("storpath_pcie_expected_link_width")),
                target(per_device("storpath_pcie_max_link_width")),
                target(per_device("storpath_pcie_current_link_bandwidth_bytes_per_second")),
                target(f"storpath_block_device_numa_node{{{SEL}, {dev}}}"),
                target(f"storpath_nvme_namespace_lba_size_bytes{{{SEL}, {dev}}}"),
            ], height=10, hide=["job", "instance"],
                rename={"Value #A": "speed", "Value #B": "expected speed", "Value #C": "device max speed",
                        "Value #D": "lanes", "Value #E": "expected lanes", "Value #F": "device max lanes",
                        "Value #G": "usable bandwidth", "Value #H": "NUMA node", "Value #I": "LBA size"},
                units={"speed": "hertz", "expected speed": "hertz", "device max speed": "hertz",
                       "usable bandwidth": "Bps", "LBA size": "bytes"},
                description="One row per block device. Speeds are transfers per second (GT/s shown as GHz)."),
        ],
        [
            table("PCI path up to the root port", [
                target(f"storpath_pcie_device_info{{{SEL}}} * on(instance, address) group_left() "
                       f"(count by (instance, address) (storpath_pcie_expected_link_speed_transfers_per_second{{{SEL}}}))"),
            ], width=14, height=9, hide=["job", "instance", "Value", "subsystem_vendor_id", "subsystem_device_id"],
                description="Every link end with its upstream port and root port: follow `upstream` to climb the tree."),
            table("Which hop limits each device", [
                target(f"storpath_pcie_path_bottleneck_bandwidth_bytes_per_second{{{SEL}}}"),
            ], width=10, height=9, hide=["job", "instance"], rename={"Value": "bottleneck bandwidth"},
                units={"bottleneck bandwidth": "Bps"}),
        ],
        [
            timeseries("Read throughput vs the link's expected bandwidth", [
                target(f"rate(node_disk_read_bytes_total{{{SEL}, {dev}}}[5m])", "{{device}} read"),
                target(per_device("storpath_pcie_expected_link_bandwidth_bytes_per_second"),
                       "{{device}} link allows"),
            ], unit="Bps", description="Live reads from node_exporter against what the device's link can carry."),
            timeseries("Write throughput vs the link's expected bandwidth", [
                target(f"rate(node_disk_written_bytes_total{{{SEL}, {dev}}}[5m])", "{{device}} write"),
                target(per_device("storpath_pcie_expected_link_bandwidth_bytes_per_second"),
                       "{{device}} link allows"),
            ], unit="Bps"),
        ],
        [
            timeseries("Probe results against expectation", [
                target(f"storpath_probe_read_bytes_per_second{{{SEL}}}", "{{target}} {{profile}} measured"),
                target(f"storpath_probe_expected_read_bytes_per_second{{{SEL}}}", "{{target}} {{profile}} expected"),
            ], unit="Bps"),
            timeseries("Probe read latency (p99)", [
                target(f"storpath_probe_read_latency_seconds{{{SEL}, quantile=\"0.99\"}}", "{{target}} {{profile}}"),
            ], unit="s"),
        ],
        [
            table("SAS PHYs", [
                target(f"storpath_sas_phy_negotiated_link_rate_transfers_per_second{{{SEL}}}"),
                target(f"storpath_sas_phy_maximum_link_rate_transfers_per_second{{{SEL}}}"),
                target(f"storpath_sas_phy_hardware_maximum_link_rate_transfers_per_second{{{SEL}}}"),
                target(f"storpath_sas_phy_minimum_link_rate_transfers_per_second{{{SEL}}}"),
            ], width=12, height=8, hide=["job", "instance"],
                rename={"Value #A": "negotiated", "Value #B": "maximum", "Value #C": "hardware maximum",
                        "Value #D": "minimum"},
                units={"negotiated": "bps", "maximum": "bps", "hardware maximum": "bps", "minimum": "bps"}),
            table("SATA links", [
                target(f"storpath_sata_link_speed_transfers_per_second{{{SEL}}}"),
                target(f"storpath_sata_link_limit_transfers_per_second{{{SEL}}}"),
                target(f"storpath_sata_link_limited{{{SEL}}}"),
            ], width=12, height=8, hide=["job", "instance"],
                rename={"Value #A": "speed", "Value #B": "libata limit", "Value #C": "held below hardware"},
                units={"speed": "bps", "libata limit": "bps"},
                description="Speeds in line rate (3 Gbps shown for 3.0e9 transfers/s). The hardware limit is "
                            "absent on most firmware."),
        ],
        [
            table("md arrays and members", [
                target(f"storpath_md_member_info{{{SEL}}}"),
            ], width=12, height=8, hide=["job", "instance", "Value"]),
            table("ZFS pools", [
                target(f"storpath_zfs_pool_size_bytes{{{SEL}}}"),
                target(f"storpath_zfs_pool_allocated_bytes{{{SEL}}} / storpath_zfs_pool_size_bytes"),
                target(f"storpath_zfs_pool_fragmentation_ratio{{{SEL}}}"),
                target(f"storpath_zfs_pool_ashift{{{SEL}}}"),
            ], width=12, height=8, hide=["job", "instance"],
                rename={"Value #A": "size", "Value #B": "used", "Value #C": "fragmentation", "Value #D": "ashift"},
                units={"size": "bytes", "used": "percentunit", "fragmentation": "percentunit"}),
        ],
        [
            table("ZFS vdevs not online", [
                target(f"storpath_zfs_vdev_state{{{SEL}, state!=\"online\"}} == 1"),
            ], width=12, height=6, hide=["job", "instance", "Value"]),
            timeseries("AER errors per second", [
                target(f"rate(storpath_pcie_aer_errors_total{{{SEL}}}[5m])", "{{address}} {{severity}}"),
            ], width=12, height=6, unit="short"),
        ],
    ]
    annotations = [{
        "name": "Link speed or width changed", "datasource": DS, "enable": True, "hide": False,
        "iconColor": "orange", "titleFormat": "PCIe link changed on {{address}}",
        "expr": (f"changes(storpath_pcie_current_link_speed_transfers_per_second{{{SEL}}}[5m]) > 0 "
                 f"or changes(storpath_pcie_current_link_width{{{SEL}}}[5m]) > 0"),
        "step": "1m", "tagKeys": "address", "textFormat": "speed or width changed",
    }]
    return dashboard("storpath-host", "storpath / Host", "Every storage device of one host, its links, arrays "
                     "and pools, and whether it runs at the speed its hardware allows.", rows, with_device=True,
                     annotations=annotations)


def capacity() -> Dict:
    rows = [
        [
            timeseries("Headroom: peak read throughput (7d) vs what the links allow, per device", [
                target(f"max_over_time((rate(node_disk_read_bytes_total{{{SEL}}}[5m]))[7d:5m]) "
                       f"/ on(instance, device) group_left() (storpath_block_device_info{{{SEL}}} "
                       f"* on(instance, address) group_left() storpath_pcie_expected_link_bandwidth_bytes_per_second{{{SEL}}})",
                       "{{instance}} {{device}}")], width=24, unit="percentunit",
                description="1.0: the device has read as fast as its link allows at some point in the week."),
        ],
        [
            timeseries("Probe results over weeks", [
                target(f"avg_over_time(storpath_probe_read_bytes_per_second{{{SEL}}}[1d])",
                       "{{instance}} {{target}} {{profile}}")], width=12, unit="Bps"),
            timeseries("Read throughput trend per device model", [
                target(f"sum by (model) (rate(node_disk_read_bytes_total{{{SEL}}}[1h]) "
                       f"* on(instance, device) group_left(model) (storpath_block_device_info{{{SEL}}} "
                       f"* on(instance, controller) group_left(model) storpath_nvme_controller_info{{{SEL}}}))",
                       "{{model}}")], width=12, unit="Bps"),
        ],
        [
            timeseries("Read throughput trend per md array", [
                target(f"sum by (instance, device) (rate(node_disk_read_bytes_total{{{SEL}, device=~\"md.*\"}}[1h]))",
                       "{{instance}} {{device}}")], width=12, unit="Bps"),
            timeseries("Pool capacity used, with 30-day projection", [
                target(f"storpath_zfs_pool_allocated_bytes{{{SEL}}} / storpath_zfs_pool_size_bytes", "{{instance}} {{zpool}} used"),
                target(f"predict_linear(storpath_zfs_pool_allocated_bytes{{{SEL}}}[7d], 30 * 86400) "
                       f"/ storpath_zfs_pool_size_bytes", "{{instance}} {{zpool}} in 30 days"),
            ], width=12, unit="percentunit",
                description="ZFS slows down past 70 % full (warning) and badly past 90 % (critical)."),
        ],
        [
            table("Days until a pool crosses 70 % and 90 %", [
                target(f"(0.7 * storpath_zfs_pool_size_bytes{{{SEL}}} - storpath_zfs_pool_allocated_bytes) "
                       f"/ (deriv(storpath_zfs_pool_allocated_bytes{{{SEL}}}[7d]) > 0) / 86400"),
                target(f"(0.9 * storpath_zfs_pool_size_bytes{{{SEL}}} - storpath_zfs_pool_allocated_bytes) "
                       f"/ (deriv(storpath_zfs_pool_allocated_bytes{{{SEL}}}[7d]) > 0) / 86400"),
            ], width=24, height=7, hide=["job"],
                rename={"Value #A": "days to 70 %", "Value #B": "days to 90 %"},
                units={"days to 70 %": "none", "days to 90 %": "none"},
                description="From the growth of the last 7 days; negative means the pool is past it already."),
        ],
    ]
    return dashboard("storpath-capacity", "storpath / Capacity and performance review",
                     "For the monthly review: throughput trends, probe results over weeks, headroom and pool growth.",
                     rows, with_device=False, time_from="now-30d")


DASHBOARDS = {"storpath-fleet.json": fleet, "storpath-host.json": host, "storpath-capacity.json": capacity}


def render() -> Dict[str, str]:
    return {name: json.dumps(build(), indent=2, sort_keys=True) + "\n" for name, build in DASHBOARDS.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a committed dashboard is out of date")
    args = parser.parse_args(argv)
    stale = []
    for name, content in render().items():
        path = os.path.join(HERE, name)
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
