"""`storpath check` and the alert rules give the same severity for the same link.

On every fixture machine, check's PCIe link findings say which link alerts of rules/pcie.yml
must fire, on which address and with which severity; promtool evaluates the rules on the
machine's golden exposition (what the exporter serves there, as tests/rules/test_every_machine.py
loads it) for two hours of scrapes, past every `for:`, and the firing alerts must be exactly
those. A link trained low that check calls critical while the alert says warning, or an alert
fired once per function of a multi-function device where check speaks once for the link,
fails here.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Dict, List, Set, Tuple

import pytest
import yaml

from storpath.analysis.observed import follows_load
from storpath.base.roots import Roots
from storpath.report.findings import Facts, run_checks
from storpath.report.findings.pcie import watched
from tests.e2e.test_golden import concrete
from tests.fixtures import machines
from tests.rules.test_every_machine import EVAL_AT, INTERVAL, input_series
from tests.rules.test_rules import REPO, promtool  # noqa: F401 (the fixture)

pytestmark = pytest.mark.promtool

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


def _case(name: str, variant: str, root: Path) -> dict:
    machine = machines.load(name)
    machine.build(str(root), variant)
    instance = f"{name}-{variant}:9866"
    alerts = "|".join(LINK_ALERTS)
    return {"name": f"{name}:{variant}", "interval": INTERVAL,
            "input_series": input_series(concrete(Path(machine.golden(variant)).read_text()), instance),
            "promql_expr_test": [{
                "expr": f'count by (alertname, address, severity) (ALERTS{{alertstate="firing", '
                        f'alertname=~"{alerts}"}})',
                "eval_time": EVAL_AT,
                "exp_samples": [{"labels": f'{{alertname="{a}", address="{addr}", severity="{sev}"}}', "value": 1}
                                for a, addr, sev in sorted(expected_alerts(root))]}]}


def test_check_and_the_alerts_agree_on_every_link_of_every_machine(promtool, tmp_path):  # noqa: F811
    cases: List[dict] = [_case(name, variant, tmp_path / f"{name}-{variant}")
                         for name, variant in machines.all_cases()]
    tests = {"rule_files": [str(REPO / "rules" / "pcie.yml")], "evaluation_interval": INTERVAL, "tests": cases}
    path = tmp_path / "check-and-alerts.test.yml"
    path.write_text(yaml.safe_dump(tests, sort_keys=False))
    result = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, (result.stdout + result.stderr)[-20000:]


def test_the_cases_expect_some_alerts_of_every_severity(tmp_path):
    """The comparison means something: the fixture machines have links that check calls
    critical, warning and info among them."""
    seen: Dict[str, int] = {}
    for name, variant in machines.all_cases():
        root = tmp_path / f"{name}-{variant}"
        machines.load(name).build(str(root), variant)
        for _, _, severity in expected_alerts(root):
            seen[severity] = seen.get(severity, 0) + 1
    assert seen.get("info") and seen.get("warning") and seen.get("critical"), seen
