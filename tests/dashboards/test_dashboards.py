"""Dashboards as models: generated from code, valid for grafana-foundation-sdk's schema, one
host at a time on the Host board, units that read right, thresholds that are the alerts',
runbook links that exist, and panel queries cheap enough for a month of a fleet.
No Prometheus here (tests/dashboards/test_dashboard_values.py runs the queries)."""

from __future__ import annotations

import enum
import importlib.util
import json
import re
import subprocess
import sys
import types
import typing
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT
from tests.dashboards.conftest import DASH_DIR, load

DASHBOARDS = sorted(DASH_DIR.glob("*.json"))
UIDS = {"storpath-fleet.json": "storpath-fleet", "storpath-host.json": "storpath-host",
        "storpath-capacity.json": "storpath-capacity"}
THRESHOLDS = yaml.safe_load((Path(ROOT) / "rules" / "config" / "thresholds.yml").read_text())
RUNBOOKS = Path(ROOT) / "docs" / "runbooks"


def _generator():
    spec = importlib.util.spec_from_file_location("storpath_dashboards_generate", DASH_DIR / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def targets(dash):
    for p in dash["panels"]:
        for t in p.get("targets", []):
            yield p, t


def columns(p):
    """{column name: (target, unit or None)} of a table panel, after its organize step."""
    organize = next(t["options"] for t in p["transformations"] if t["id"] == "organize")
    units = {o["matcher"]["options"]: {prop["id"]: prop["value"] for prop in o["properties"]}
             for o in p["fieldConfig"]["overrides"]}
    out = {}
    for t in p["targets"]:
        value = "Value" if len(p["targets"]) == 1 else f"Value #{t['refId']}"
        name = organize["renameByName"].get(value, value)
        if not organize["excludeByName"].get(value):
            out[name] = (t, units.get(name, {}))
    return out


# ---- generated, and valid for the SDK's schema -----------------------------------------
def test_generated_dashboards_are_current():
    result = subprocess.run([sys.executable, str(DASH_DIR / "generate.py"), "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert {p.name for p in DASHBOARDS} == set(UIDS)


def _type_errors(value, hint, where: str) -> list:
    """Where ``value`` does not have the type the SDK's model declares (``hint``)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint in (typing.Any, object) or isinstance(hint, typing.TypeVar):
        # a panel's options and custom field config: typed by the panel plugin's own model
        return _model_errors(value, where) if hasattr(value, "to_json") else []
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return [] if type(None) in args else [f"{where}: None where {hint} is required"]
        options = [_type_errors(value, a, where) for a in args if a is not type(None)]
        return [] if any(not o for o in options) else min(options, key=len)
    if value is None or hint is type(None):
        return [] if value is None and hint is type(None) else [f"{where}: {value!r} where {hint} is required"]
    if origin is typing.Literal:
        return [] if value in args else [f"{where}: {value!r} not one of {args}"]
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: {type(value).__name__} where a list is required"]
        return [e for i, item in enumerate(value) for e in _type_errors(item, args[0] if args else object,
                                                                         f"{where}[{i}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__} where a mapping is required"]
        return [e for k, item in value.items() for e in _type_errors(item, args[1] if args else object,
                                                                     f"{where}.{k}")]
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return [] if value in {m.value for m in hint} else [f"{where}: {value!r} is not a {hint.__name__}"]
    if hint is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return [] if ok else [f"{where}: {value!r} is not a number"]
    if hint in (int, str, bool):
        ok = isinstance(value, hint) and not (hint is int and isinstance(value, bool))
        return [] if ok else [f"{where}: {value!r} is not {hint.__name__}"]
    if isinstance(hint, type):
        if isinstance(value, dict) and hasattr(hint, "from_json"):
            value = hint.from_json(value)  # the SDK keeps some nested fields (panel links) as JSON
        if not isinstance(value, hint):
            return [f"{where}: {type(value).__name__} where {hint.__name__} is required"]
        return _model_errors(value, where)
    return []


def _model_errors(model, where: str) -> list:
    try:
        hints = typing.get_type_hints(type(model))
    except Exception:  # a bag without declared fields (UnknownDataquery)
        return []
    errors = []
    for name, hint in hints.items():
        if hasattr(model, name):
            errors += _type_errors(getattr(model, name), hint, f"{where}.{name}")
    return errors


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_dashboard_matches_the_sdk_schema(path):
    """The JSON decodes into grafana-foundation-sdk's typed models (panels by their plugin's
    options and field config, queries as Prometheus queries), every value of the declared
    type and enum, and encodes back to exactly the same JSON: no field the schema lacks."""
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.cog.plugins import register_default_plugins
    from grafana_foundation_sdk.models import dashboard as dm
    from grafana_foundation_sdk.models import prometheus as pm

    register_default_plugins()
    raw = load(path)
    model = dm.Dashboard.from_json(raw)
    assert json.loads(json.dumps(model, cls=JSONEncoder)) == raw
    assert _model_errors(model, path.stem) == []
    for p in model.panels:
        if p.type_val == "row":
            continue
        assert type(p.options).__module__.endswith(f"models.{p.type_val}"), (p.title, type(p.options))
        for t in p.targets or []:
            assert isinstance(t, pm.Dataquery), p.title


def test_schema_check_catches_a_wrong_value():
    from grafana_foundation_sdk.cog.plugins import register_default_plugins
    from grafana_foundation_sdk.models import dashboard as dm

    register_default_plugins()
    raw = load(DASH_DIR / "storpath-host.json")
    table = next(p for p in raw["panels"] if p["type"] == "table")
    table["options"]["cellHeight"] = "tiny"
    raw["templating"]["list"][1]["refresh"] = 7
    errors = _model_errors(dm.Dashboard.from_json(raw), "host")
    assert any("cell_height" in e and "tiny" in e for e in errors), errors
    assert any("refresh" in e for e in errors), errors


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_dashboard_layout_and_queries(path):
    dash = load(path)
    assert dash["uid"] == UIDS[path.name] and dash["title"].startswith("storpath / ")
    assert "storpath" in dash["tags"]
    names = [v["name"] for v in dash["templating"]["list"]]
    assert names[:3] == ["datasource", "job", "instance"]
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    cells = {}
    for p in dash["panels"]:
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24 and g["h"] > 0, p["title"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"{p['title']!r} overlaps {cells[(x, y)]!r}"
                cells[(x, y)] = p["title"]
        if p["type"] in ("row", "text"):
            continue
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        refs = [t["refId"] for t in p["targets"]]
        assert refs and len(refs) == len(set(refs)) and all(refs), p["title"]
    for p, t in targets(dash):
        assert t["expr"].strip() and t["datasource"]["uid"] == "${datasource}"
        used = set(re.findall(r"\$(\w+)", t["expr"]))
        assert used <= set(names) | {"__rate_interval"}, f"{p['title']}: unknown variables {used - set(names)}"


# ---- one host at a time ------------------------------------------------------------------
def test_host_board_shows_one_host():
    dash = load(DASH_DIR / "storpath-host.json")
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    for name in ("job", "instance"):
        assert variables[name]["multi"] is False and variables[name]["includeAll"] is False, name
    for p, t in targets(dash):
        # A regex match, as the linters want of every query: Prometheus anchors it, so one host's
        # name never matches its longer-named neighbours (host1, host10).
        assert 'instance=~"$instance"' in t["expr"] and 'instance="' not in t["expr"], (p["title"], t["expr"])


def test_fleet_tables_show_the_host_and_link_to_it():
    for name in ("storpath-fleet.json", "storpath-capacity.json"):
        for p in load(DASH_DIR / name)["panels"]:
            if p["type"] != "table":
                continue
            organize = next(t["options"] for t in p["transformations"] if t["id"] == "organize")
            assert not organize["excludeByName"].get("instance"), p["title"]
            links = {o["matcher"]["options"]: o for o in p["fieldConfig"]["overrides"]
                     if any(prop["id"] == "links" for prop in o["properties"])}
            assert "instance" in links, f"{p['title']}: no link from a host to its Host board"


# ---- units ---------------------------------------------------------------------------
def test_no_hertz_for_transfer_rates():
    for path in DASHBOARDS:
        assert '"hertz"' not in path.read_text(), path.name


def test_table_columns_have_units_that_read_right():
    checked = 0
    for path in DASHBOARDS:
        for p in load(path)["panels"]:
            if p["type"] != "table":
                continue
            for name, (t, props) in columns(p).items():
                expr, unit = t["expr"], props.get("unit")
                assert expr.startswith("max without () (") and expr.endswith(")"), "a metric name splits rows"
                expr = expr[len("max without () ("):-1]
                state = "bool" in expr
                if "pcie" in expr and "link_speed_transfers_per_second" in expr and not state and " / 8" not in expr:
                    assert unit == "suffix: GT/s" and expr.endswith("/ 1e9"), (p["title"], name)
                elif re.search(r"(sas|sata)_\w*(rate|speed|limit)\w*transfers_per_second", expr) and not state:
                    assert unit == "suffix: Gbit/s" and expr.endswith("/ 1e9"), (p["title"], name)
                elif "link_width" in expr and not state and " / 8" not in expr:
                    assert unit == "prefix:x", (p["title"], name)
                elif re.search(r"bandwidth_bytes_per_second\W*$|bandwidth_bytes_per_second\)$", expr):
                    assert unit == "Bps", (p["title"], name)
                elif re.search(r"_size_bytes\W", expr + " ") and "!= bool" not in expr:
                    assert unit == "bytes", (p["title"], name)
                else:
                    continue
                checked += 1
    assert checked >= 20


def test_timeseries_units():
    for path in DASHBOARDS:
        for p in load(path)["panels"]:
            if p["type"] != "timeseries":
                continue
            exprs = " ".join(t["expr"] for t in p["targets"])
            unit = p["fieldConfig"]["defaults"]["unit"]
            if re.search(r"ratio|capacity", exprs):
                assert unit == "percentunit", p["title"]
            elif re.search(r"bytes(_total|_per_second|:rate5m|:avg_rate5m)", exprs):
                assert unit == "Bps", p["title"]


def test_states_are_mapped_to_words_and_colours():
    host = load(DASH_DIR / "storpath-host.json")
    link = next(p for p in host["panels"] if p["title"].startswith("Storage devices"))
    props = columns(link)["link"][1]
    texts = {r["text"] for m in props["mappings"] for r in ([m["options"]["result"]] if m["type"] == "range"
                                                              else m["options"].values())}
    assert {"at expected", "speed below expected", "lanes below expected", "link down"} <= texts
    assert props["custom.cellOptions"]["type"] == "color-background"
    colours = {r["text"]: r["color"] for m in props["mappings"] if m["type"] == "value"
               for r in m["options"].values()}
    assert colours["speed below expected"] == "red" and colours["at expected"] == "green"


# ---- thresholds are the alerts' -------------------------------------------------------------
def _steps(props_or_defaults):
    return [s["value"] for s in props_or_defaults["thresholds"]["steps"]]


def test_thresholds_come_from_the_rules_config():
    ratio = THRESHOLDS["probes"]["throughput_ratio_threshold"]
    warn, crit = THRESHOLDS["zfs"]["capacity_warning_ratio"], THRESHOLDS["zfs"]["capacity_critical_ratio"]
    fleet, host = load(DASH_DIR / "storpath-fleet.json"), load(DASH_DIR / "storpath-host.json")
    probe = next(p for p in fleet["panels"] if p["title"].startswith("Measured / expected"))
    assert _steps(probe["fieldConfig"]["defaults"]) == [None, ratio]
    assert probe["fieldConfig"]["defaults"]["custom"]["thresholdsStyle"]["mode"] == "dashed"
    stat = next(p for p in fleet["panels"] if p["title"] == "Probes below expectation")
    assert f"< {ratio})" in stat["targets"][0]["expr"]
    pools = next(p for p in host["panels"] if p["title"] == "ZFS pools")
    assert _steps(columns(pools)["used"][1]) == [None, warn, crit]
    aer = next(p for p in host["panels"] if p["title"].startswith("Correctable AER"))
    assert _steps(aer["fieldConfig"]["defaults"]) == [None, THRESHOLDS["pcie"]["aer_correctable_threshold"]]
    assert f"[{THRESHOLDS['pcie']['aer_window']}]" in aer["targets"][0]["expr"]


def test_a_sites_thresholds_reach_the_boards(tmp_path):
    site = tmp_path / "site.yml"
    site.write_text("zfs:\n  capacity_warning_ratio: 0.8\nprobes:\n  throughput_ratio_threshold: 0.5\n")
    result = subprocess.run([sys.executable, str(DASH_DIR / "generate.py"), "--config", str(site), "--out",
                             str(tmp_path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    host, fleet = load(tmp_path / "storpath-host.json"), load(tmp_path / "storpath-fleet.json")
    pools = next(p for p in host["panels"] if p["title"] == "ZFS pools")
    assert _steps(columns(pools)["used"][1]) == [None, 0.8, THRESHOLDS["zfs"]["capacity_critical_ratio"]]
    probe = next(p for p in fleet["panels"] if p["title"].startswith("Measured / expected"))
    assert _steps(probe["fieldConfig"]["defaults"]) == [None, 0.5]


def test_panel_links_go_to_runbooks_that_exist():
    base = THRESHOLDS["dashboards"]["runbook_url_base"]
    linked = set()
    for path in DASHBOARDS:
        for p in load(path)["panels"]:
            for link in p.get("links", []):
                assert link["url"].startswith(base), link
                name = link["url"][len(base):]
                assert (RUNBOOKS / name).is_file(), f"{p['title']}: {name} is not in docs/runbooks/"
                assert link["title"] == f"Runbook: {name[:-3]}"
                linked.add(name[:-3])
    # the faults storpath exists to catch each have a runbook one click from a panel
    assert {"PcieLinkSpeedBelowExpected", "PcieDeviceLimitedByPort", "NvmeNamespaceLbaFormatNotBest",
            "SasPhyLinkRateBelowMaximum", "SataLinkBelowHardwareLimit", "MdArrayDegraded", "ZfsPoolNotOnline",
            "ZfsPoolCapacityHigh", "ProbeThroughputBelowExpected"} <= linked


# ---- cheap on a fleet ------------------------------------------------------------------
def test_panels_never_read_long_ranges_of_raw_samples():
    """A panel's range selectors stay within an hour and no panel runs a subquery: week-long
    windows are recording rules' work (rules/definitions/capacity.py)."""
    limit = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    for path in DASHBOARDS:
        for p, t in targets(load(path)):
            assert not re.search(r"\[[^\]]*:[^\]]*\]", t["expr"]), f"{p['title']}: subquery"
            for number, unit in re.findall(r"\[(\d+)([smhdw])\]", t["expr"]):
                assert int(number) * limit[unit] <= 3600, f"{p['title']}: [{number}{unit}] in {t['expr']}"


def test_capacity_board_reads_recording_rules():
    rules = {r["record"] for g in yaml.safe_load((Path(ROOT) / "rules" / "capacity.yml").read_text())["groups"]
             for r in g["rules"] if "record" in r}
    used = set()
    for p, t in targets(load(DASH_DIR / "storpath-capacity.json")):
        names = set(re.findall(r"[a-z_]+:[a-z0-9_]+:[a-z0-9_]+", t["expr"]))
        # probe results are one series per target, changing once an hour: read as they are
        assert names or t["expr"].startswith("storpath_probe_"), f"{p['title']} reads no recording rule"
        used |= names
    assert used - {"zpool:storpath_zfs_pool_capacity:ratio"} <= rules
    assert "node_disk" not in (DASH_DIR / "storpath-capacity.json").read_text()
