"""Every rule and panel that reads node_exporter's series (node_*) selects its jobs with
`node_exporter.selector` (rules/config/thresholds.yml; the mixin's nodeExporterSelector): a second
job exporting the same disk for an instance would otherwise be counted again
(capacity.test.yml shows the count)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
SELECTOR = yaml.safe_load((REPO / "rules/config/thresholds.yml").read_text())["node_exporter"]["selector"]
# a node_exporter metric name with what follows it (its braces, if any)
NODE_SERIES = re.compile(r"\b(node_[a-z_]+)\b(\{[^}]*\})?")


def expressions():
    for path in sorted((REPO / "rules").glob("*.yml")):
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                yield f"{path.name} {rule.get('record') or rule.get('alert')}", rule["expr"]
    for path in sorted((REPO / "dashboards").glob("*.json")):
        text = json.loads(path.read_text())
        stack = [text]
        while stack:
            item = stack.pop()
            if isinstance(item, dict):
                if isinstance(item.get("expr"), str):
                    yield f"{path.name} {item.get('refId', '')}", item["expr"]
                stack.extend(item.values())
            elif isinstance(item, list):
                stack.extend(item)


def test_the_selector_is_set():
    assert SELECTOR.startswith("job"), SELECTOR


def test_every_node_exporter_series_carries_the_selector():
    found, wrong = 0, []
    for where, expr in expressions():
        for name, braces in NODE_SERIES.findall(expr):
            found += 1
            if SELECTOR not in (braces or ""):
                wrong.append(f"{where}: {name}{braces}")
    assert found >= 8, found
    assert not wrong, "\n".join(wrong)
