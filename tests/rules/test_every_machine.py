"""Every rule evaluates on every machine.

promtool loads ALL rule files with each fixture machine's golden exposition (what the exporter
really serves on that machine, tests/fixtures/machines/*/golden/) as its input series, one
target per machine and variant, and evaluates every rule for two hours of scrapes. A rule that
Prometheus cannot evaluate on a real machine's series (two series with one labelset after a
label_replace, many-to-many matching in a join) fails promtool's unit test with the rule's
name and error: the rule would show unhealthy in Prometheus and its alert could never fire,
which the hand-written tests of tests/rules/*.test.yml cannot see (their series are written
for the rule).

It also pins, for the machines of the issue "Alerts a real fleet can trust", which PCIe alerts
of warning or critical severity fire: none for links at the maximum both ends allow, the
link-down alert where a port's link is down below two functions, the bottleneck warning on the
one NIC whose ports' line rate exceeds its slot.
"""

from __future__ import annotations

import math
import subprocess
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.test_golden import concrete
from tests.fixtures import machines
from tests.rules.test_rules import RULE_FILES, promtool  # noqa: F401 (the fixture: promtool 2 and 3)

pytestmark = pytest.mark.promtool

SCRAPES = 25  # five-minute scrapes: two hours, past every `for:` (1h at most)
INTERVAL = "5m"
EVAL_AT = "2h"

# (machine, variant) -> the PCIe alerts of warning or critical severity that fire at EVAL_AT, as
# (alertname, address). A machine not listed here is only checked for evaluation errors.
PCIE_ALERTS: Dict[Tuple[str, str], List[Tuple[str, str]]] = {
    ("dell-r330-perc-h730", "healthy"): [],
    ("dell-r330-perc-h730", "kernel-6.13"): [],
    ("dell-r330-perc-h730", "nic-link-down"): [("PcieLinkDown", "0000:00:01.1")],
    ("dell-r710-quad-nic", "healthy"): [],
    ("dell-r710-quad-nic", "quad-nic-x4-gen2"): [("PcieSlotBelowDeviceDemand", "0000:04:00.0")],
}


def _number(value: float) -> str:
    """A value in promtool's series notation (`a+bxn` is an expansion there: no `e+`)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Inf" if value > 0 else "-Inf"
    return ("%.17g" % value).replace("e+", "e")


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def input_series(exposition: str, instance: str) -> List[dict]:
    """The golden exposition's samples as promtool input series of one target."""
    series = []
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            labels = {"job": "storpath", "instance": instance, **sample.labels}
            selector = ",".join(f"{name}={_quote(value)}" for name, value in sorted(labels.items()))
            series.append({"series": f"{sample.name}{{{selector}}}", "values": f"{_number(sample.value)}x{SCRAPES}"})
    series.append({"series": f'up{{job="storpath",instance="{instance}"}}', "values": f"1x{SCRAPES}"})
    return series


def _case(name: str, variant: str) -> dict:
    machine = machines.load(name)
    instance = f"{name}-{variant}:9866"
    group = {"name": f"{name}:{variant}", "interval": INTERVAL,
             "input_series": input_series(concrete(Path(machine.golden(variant)).read_text()), instance),
             # An expression to evaluate at EVAL_AT makes promtool evaluate every rule group at
             # every step up to it (an evaluation error fails the test).
             "promql_expr_test": [{"expr": "vector(1)", "eval_time": EVAL_AT, "exp_samples": [{"value": 1}]}]}
    expected = PCIE_ALERTS.get((name, variant))
    if expected is not None:
        group["promql_expr_test"].append({
            "expr": 'count by (alertname, address) (ALERTS{alertstate="firing", severity=~"warning|critical", '
                    'alertname=~"Pcie.*"})',
            "eval_time": EVAL_AT,
            "exp_samples": [{"labels": f'{{alertname="{alert}", address="{address}"}}', "value": 1}
                            for alert, address in expected]})
    return group


def test_pcie_expectations_name_real_cases():
    cases = set(machines.all_cases())
    assert set(PCIE_ALERTS) <= cases


def test_every_rule_evaluates_on_every_machine(promtool, tmp_path):  # noqa: F811
    tests = {"rule_files": [str(path) for path in RULE_FILES], "evaluation_interval": INTERVAL,
             "tests": [_case(name, variant) for name, variant in machines.all_cases()]}
    path = tmp_path / "every-machine.test.yml"
    path.write_text(yaml.safe_dump(tests, sort_keys=False))
    result = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, (result.stdout + result.stderr)[-20000:]
