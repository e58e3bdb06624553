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

And in the same run, `storpath check` and the alert rules give the same severity for the same
link: on every machine, check's PCIe link findings say which link alerts of rules/pcie.yml must
fire, on which address and with which severity, and the firing ones must be exactly those. A
link trained low that check calls critical while the alert says warning, or an alert fired once
per function of a multi-function device where check speaks once for the link, fails here. (One
promtool run per version for both: loading every machine's series is most of its time.)
"""

from __future__ import annotations

import math
import subprocess
from pathlib import Path
from typing import Dict, List, Set, Tuple

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from storpath.analysis.observed import follows_load
from storpath.base.roots import Roots
from storpath.report.findings import Facts, run_checks
from storpath.report.findings.pcie import watched
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


LINK_ALERTS = ("PcieLinkSpeedBelowExpected", "PcieLinkWidthBelowExpected", "PcieDeviceLimitedByPort",
               "PcieSlotBelowDeviceDemand", "PcieLinkDown")
TRAINED_LOW = {"pcie.link_speed_below_expected": ("PcieLinkSpeedBelowExpected",),
               "pcie.link_width_below_expected": ("PcieLinkWidthBelowExpected",),
               "pcie.link_trained_low": ("PcieLinkSpeedBelowExpected", "PcieLinkWidthBelowExpected")}


def expected_alerts(root: Path) -> Set[Tuple[str, str, str]]:
    """(alertname, address, severity) of the link alerts that check's findings say must fire."""
    facts = Facts(Roots(sysfs=str(root / "sys"), procfs=str(root / "proc")), {})
    judged = watched(facts)
    devices = facts.pci_by_address()
    links = facts.pcie_links()
    out: Set[Tuple[str, str, str]] = set()
    for finding in run_checks(facts, only=["pcie"]).findings:
        subject = finding.subject
        if subject not in judged or subject not in devices:
            continue  # links the rules do not watch (config pcie.watched_classes)
        if finding.kind in TRAINED_LOW and not follows_load(devices[subject].static.class_code):
            out |= {(alert, subject, finding.severity) for alert in TRAINED_LOW[finding.kind]}
        elif finding.kind == "pcie.placement_below_capability":
            out.add(("PcieDeviceLimitedByPort", subject, finding.severity))
        elif finding.kind == "pcie.slot_below_device_demand":
            # The slot is the bottleneck: check says so in one finding; the rules keep the placement
            # notice (info) beside the warning.
            out |= {("PcieSlotBelowDeviceDemand", subject, finding.severity),
                    ("PcieDeviceLimitedByPort", subject, "info")}
        elif finding.kind == "pcie.link_down":
            out.add(("PcieLinkDown", links[subject].partner, finding.severity))  # judged on the port
    return out


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


@pytest.fixture(scope="module")
def check_says(machine_tree) -> Dict[Tuple[str, str], Set[Tuple[str, str, str]]]:
    """(machine, variant) -> the link alerts check's findings say must fire there."""
    return {(name, variant): expected_alerts(Path(machine_tree(name, variant)))
            for name, variant in machines.all_cases()}


def _case(name: str, variant: str, check_alerts: Set[Tuple[str, str, str]]) -> dict:
    machine = machines.load(name)
    instance = f"{name}-{variant}:9866"
    alerts = "|".join(LINK_ALERTS)
    group = {"name": f"{name}:{variant}", "interval": INTERVAL,
             "input_series": input_series(concrete(Path(machine.golden(variant)).read_text()), instance),
             # An expression to evaluate at EVAL_AT makes promtool evaluate every rule group at
             # every step up to it (an evaluation error fails the test).
             "promql_expr_test": [
                 {"expr": "vector(1)", "eval_time": EVAL_AT, "exp_samples": [{"value": 1}]},
                 # check and the alerts agree
                 {"expr": f'count by (alertname, address, severity) (ALERTS{{alertstate="firing", '
                          f'alertname=~"{alerts}"}})',
                  "eval_time": EVAL_AT,
                  "exp_samples": [{"labels": f'{{alertname="{a}", address="{addr}", severity="{sev}"}}', "value": 1}
                                  for a, addr, sev in sorted(check_alerts)]}]}
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


def test_every_rule_evaluates_on_every_machine_and_the_link_alerts_agree_with_check(
        promtool, check_says, tmp_path):  # noqa: F811
    tests = {"rule_files": [str(path) for path in RULE_FILES], "evaluation_interval": INTERVAL,
             "tests": [_case(name, variant, check_says[(name, variant)]) for name, variant in machines.all_cases()]}
    path = tmp_path / "every-machine.test.yml"
    path.write_text(yaml.safe_dump(tests, sort_keys=False))
    result = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, (result.stdout + result.stderr)[-20000:]


def test_the_cases_expect_some_alerts_of_every_severity(check_says):
    """The comparison means something: the fixture machines have links that check calls
    critical, warning and info among them."""
    seen: Dict[str, int] = {}
    for alerts in check_says.values():
        for _, _, severity in alerts:
            seen[severity] = seen.get(severity, 0) + 1
    assert seen.get("info") and seen.get("warning") and seen.get("critical"), seen
