"""The conventions dashboard-linter (`--strict`) and `mixtool lint` check, kept here without
either tool: every query selects its series by the board's job and instance, rates use
`$__rate_interval`, every panel has a unit and a description, boards are not editable, the
job and instance variables are what the linters expect. The exceptions are exactly those of
dashboards/.lint (the linters' own exclusion file, each with its reason), so a new panel
cannot slip past the tests and the linters disagree with them."""

from __future__ import annotations

import re
from typing import Iterator, List, Optional, Tuple

import pytest
import yaml

from tests.dashboards.conftest import DASH_DIR, load

DASHBOARDS = sorted(DASH_DIR.glob("*.json"))
LINT = yaml.safe_load((DASH_DIR / ".lint").read_text())
EXCLUSIONS = LINT["exclusions"]
RULES_CONFIG = yaml.safe_load((DASH_DIR.parent / "rules" / "config" / "thresholds.yml").read_text())

# dashboard-linter's panel-units-rule: the Grafana unit ids it knows for a panel's default unit
# (a custom "suffix:" unit is not one of them; tables may use it in a column's override). Only
# what these boards use is listed; the test says which is missing.
UNITS = {"none", "short", "percent", "percentunit", "bytes", "Bps", "s", "d", "celsius"}
UNIT_PANELS = {"stat", "singlestat", "graph", "table", "timeseries", "gauge"}

# ---- a small PromQL reader: the vector selectors of an expression -----------------------------
KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan",
            # aggregations, whose `by (...)`/`without (...)` may stand before their parenthesis
            "sum", "min", "max", "avg", "count", "group", "stddev", "stdvar", "topk", "bottomk", "quantile",
            "count_values", "limitk", "limit_ratio"}
LABEL_LISTS = {"by", "without", "on", "ignoring", "group_left", "group_right"}
Matcher = Tuple[str, str, str]


def _string_end(expr: str, i: int) -> int:
    quote, i = expr[i], i + 1
    while expr[i] != quote:
        i += 2 if expr[i] == "\\" else 1
    return i + 1


def _closing(expr: str, i: int, open_: str, close: str) -> int:
    depth = 0
    while True:
        c = expr[i]
        if c in "\"'`":
            i = _string_end(expr, i)
            continue
        depth += (c == open_) - (c == close)
        i += 1
        if depth == 0:
            return i


def _matchers(body: str) -> List[Matcher]:
    return [(m.group(1), m.group(2), m.group(3))
            for m in re.finditer(r'\s*([a-zA-Z_]\w*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*,?', body)]


def selectors(expr: str) -> Iterator[Tuple[Optional[str], List[Matcher]]]:
    """(metric name or None, matchers) of every vector selector in ``expr``."""
    i = 0
    while i < len(expr):
        c = expr[i]
        if c in "\"'`":
            i = _string_end(expr, i)
        elif c == "[":
            i = _closing(expr, i, "[", "]")
        elif c.isdigit() or (c == "." and expr[i + 1:i + 2].isdigit()):
            while i < len(expr) and (expr[i].isalnum() or expr[i] == "."):
                i += 1
        elif c == "{":
            end = _closing(expr, i, "{", "}")
            yield None, _matchers(expr[i + 1:end - 1])
            i = end
        elif c.isalpha() or c in "_:":
            m = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*").match(expr, i)
            name, i = m.group(0), m.end()
            rest = expr[i:].lstrip()
            if name in LABEL_LISTS and rest.startswith("("):
                i = _closing(expr, expr.index("(", i), "(", ")")
            elif rest.startswith("(") or name in KEYWORDS or name in LABEL_LISTS:
                continue
            elif rest.startswith("{"):
                start = expr.index("{", i)
                end = _closing(expr, start, "{", "}")
                yield name, _matchers(expr[start + 1:end - 1])
                i = end
            else:
                yield name, []
        else:
            i += 1


def test_the_reader_finds_every_selector():
    expr = ('max without () (sort_desc((a{job=~"$job", x="}"} * b / 8 - c:d:e[5m] offset 1h) > 0 '
            'and on(instance, address) f{port_type!~"r|d"}) + 1e9 + rate(g[$__rate_interval]) '
            '+ count by (instance) ({__name__="h"}) * on(i) group_left j)')
    assert [(n, [m[0] for m in ms]) for n, ms in selectors(expr)] == [
        ("a", ["job", "x"]), ("b", []), ("c:d:e", []), ("f", ["port_type"]), ("g", []), (None, ["__name__"]), ("j", [])]


# ---- the exceptions, from dashboards/.lint ---------------------------------------------------
def excluded(rule: str, dashboard: str, panel: Optional[str] = None, target: Optional[int] = None) -> bool:
    entry = EXCLUSIONS.get(rule)
    if entry is None:
        return False
    for e in entry.get("entries") or [{}]:
        if e.get("dashboard", dashboard) == dashboard and (panel is None or e.get("panel", panel) == panel) \
                and (target is None or int(e.get("targetidx", target)) == target):
            return True
    return False


def test_every_exclusion_says_why():
    for rule, entry in EXCLUSIONS.items():
        assert entry.get("reason"), rule
        for e in entry.get("entries", []):
            assert e.get("reason") or entry.get("reason"), (rule, e)
            assert e["dashboard"] in {load(p)["title"] for p in DASHBOARDS}, (rule, e)


def panels(dash):
    return [p for p in dash["panels"] if p["type"] != "row"]


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_every_selector_carries_the_job_and_instance_matchers(path):
    dash = load(path)
    wrong = []
    for p in panels(dash):
        for index, t in enumerate(p["targets"]):
            for name, matchers in selectors(t["expr"]):
                for label, rule in (("job", "target-job-rule"), ("instance", "target-instance-rule")):
                    if (label, "=~", f"${label}") not in matchers \
                            and not excluded(rule, dash["title"], p["title"], index):
                        wrong.append(f"{p['title']!r} #{index}: {name or ''}{{...}} has no {label}=~\"${label}\"")
    assert not wrong, "\n".join(wrong)


def test_only_node_exporter_and_fleet_wide_series_go_without_the_job():
    """What .lint lets through is node_exporter's series (their own job) and the recording
    rules that aggregate across a host's exporters or the fleet (no job label at all)."""
    for path in DASHBOARDS:
        dash = load(path)
        for p in panels(dash):
            for index, t in enumerate(p["targets"]):
                for name, matchers in selectors(t["expr"]):
                    if ("job", "=~", "$job") in matchers:
                        continue
                    assert name.startswith("node_") or re.match(r"(instance|model)\w*:", name), (p["title"], name)


# Windows of increase() that are an alert's own (the panel shows the alert's number).
ALERT_WINDOWS = {RULES_CONFIG["pcie"]["aer_window"]}


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_rates_use_rate_interval(path):
    for p in panels(load(path)):
        for t in p["targets"]:
            for function, window in re.findall(r"\b(rate|irate|increase)\s*\([^\[]*\[([^\]]*)\]", t["expr"]):
                allowed = {"$__rate_interval"} | (ALERT_WINDOWS if function == "increase" else set())
                assert window in allowed, f"{p['title']!r}: {function}(...[{window}])"


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_every_panel_has_a_description_and_a_unit(path):
    for p in panels(load(path)):
        assert p.get("title") and p.get("description", "").strip(), f"{p.get('title')!r} has no description"
        if p["type"] in UNIT_PANELS:
            unit = p.get("fieldConfig", {}).get("defaults", {}).get("unit", "")
            assert unit in UNITS, f"{p['title']!r}: unit {unit!r}"


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_not_editable(path):
    assert load(path)["editable"] is False


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_variables_as_the_linters_want(path):
    dash = load(path)
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert variables["datasource"]["label"] in ("Data source", "Prometheus data source")
    for p in panels(dash):
        assert p["datasource"]["uid"] in ("$datasource", "${datasource}"), p["title"]
        assert p["targets"], f"{p['title']!r} has no query"
    for name in ("job", "instance"):
        v = variables[name]
        assert v["type"] == "query" and v["datasource"]["uid"] in ("$datasource", "${datasource}"), name
        assert v["label"] == name.title(), name
        # On time range change: hosts that came and went in the chosen range are offered.
        assert v["refresh"] == 2, name
        if not excluded(f"template-{name}-rule", dash["title"]):
            assert v["multi"] is True and v["allValue"] == ".+", name
    for v in variables.values():
        if v["type"] == "query":
            assert v["refresh"] == 2, v["name"]
