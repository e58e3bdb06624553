"""Findings from small hand-built machines, the registry, and the report layout."""

from __future__ import annotations

import pytest

from storpath.commands.capture import Redactor, expand_braces
from storpath.commands.check import render, report_width, use_colour
from storpath.report.findings import (CRITICAL, INFO, WARNING, CheckResult, Facts, Finding, counted, load_all,
                               register, run_checks, REGISTRY)
from storpath.base.roots import Roots
from tests.fixtures.sysfs_builder import MachineBuilder


@pytest.fixture
def b(tmp_path):
    builder = MachineBuilder(str(tmp_path))
    builder.host = builder.host_bridge("0000:00")
    return builder


def pcie(b):
    result = run_checks(Facts(Roots(sysfs=b.sys, procfs=b.proc)), only=["pcie"])
    return {(f.subject, f.kind): f for f in result.findings}


def drive(b, port, address, speed=16.0, width=4, **kw):
    b.nvme(port, address, model="M", serial=address, firmware="F", vendor=0x1987, device=0x5018, speed=speed,
           width=width, **kw)


def test_healthy_link_has_no_findings(b):
    b.root_port(b.host, "0000:00:01.0", speed=16.0, width=4)
    drive(b, "0000:00:01.0", "0000:01:00.0")
    assert pcie(b) == {}


def test_width_and_speed_both_low_is_one_warning_finding_on_the_device_end(b):
    b.root_port(b.host, "0000:00:01.0", speed=16.0, width=4)
    drive(b, "0000:00:01.0", "0000:01:00.0", cur_speed=8.0, cur_width=2)
    found = pcie(b)
    assert list(found) == [("0000:01:00.0", "pcie.link_trained_low")]
    finding = found[("0000:01:00.0", "pcie.link_trained_low")]
    assert finding.severity == WARNING  # as the alerts' severity
    assert finding.title == "PCIe link trained at 8 GT/s (Gen3) x2, both ends support 16 GT/s (Gen4) x4"
    assert "7.88 GB/s of link, 1.97 GB/s available (75% lost)" in finding.impact
    assert "bifurcation" in finding.remedy and "generation" in finding.remedy
    assert finding.related == ("nvme0n1",)


def test_gen4_drive_behind_gen3_port_is_a_placement_to_review(b):
    b.root_port(b.host, "0000:00:01.0", speed=8.0, width=4)
    drive(b, "0000:00:01.0", "0000:01:00.0")
    finding = pcie(b)[("0000:01:00.0", "pcie.placement_below_capability")]
    assert finding.severity == INFO
    assert "half lost" in finding.impact and "0000:00:01.0 8 GT/s (Gen3) x4" in finding.evidence


def test_link_down_with_the_device_still_present(b):
    b.root_port(b.host, "0000:00:01.0", speed=16.0, width=4)
    drive(b, "0000:00:01.0", "0000:01:00.0")
    b.set_attr("0000:01:00.0", "current_link_width", 0)
    b.set_attr("0000:00:01.0", "current_link_width", 0)
    found = pcie(b)
    assert found[("0000:01:00.0", "pcie.link_down")].severity == CRITICAL
    assert ("0000:01:00.0", "pcie.link_trained_low") not in found


def test_empty_slot_is_not_a_fault(b):
    b.root_port(b.host, "0000:00:01.0", speed=16.0, width=4)
    assert pcie(b) == {}


@pytest.mark.parametrize("severity,expected", [("fatal", CRITICAL), ("nonfatal", WARNING), ("correctable", INFO)])
def test_aer_errors_by_severity(b, severity, expected):
    b.root_port(b.host, "0000:00:01.0", speed=16.0, width=4)
    drive(b, "0000:00:01.0", "0000:01:00.0")
    b.set_aer("0000:01:00.0", severity, 3)
    b.set_aer("0000:00:01.0", severity, 2)
    found = [f for f in pcie(b).values() if f.kind.startswith("pcie.aer")]
    assert len(found) == 1 and found[0].subject == "0000:01:00.0" and found[0].severity == expected
    assert "0000:00:01.0" in found[0].evidence and "0000:01:00.0" in found[0].evidence


def test_a_gpu_idling_at_gen1_is_info_only(b):
    b.root_port(b.host, "0000:00:01.0", speed=16.0, width=16)
    b.attach("0000:00:01.0", 16.0, 16, cur_speed=2.5)
    b.pci("0000:00:01.0", "0000:01:00.0", class_code=0x030000, vendor=0x10de, device=0x2204, max_speed=16.0,
          max_width=16, cur_speed=2.5, cur_width=16, driver="nvidia")
    found = pcie(b)
    assert [f.severity for f in found.values()] == [INFO]


def test_hop_upstream_that_limits_a_drive(b):
    # A Gen4 x4 drive behind a switch whose uplink is x1: the drive's own link is fine.
    b.root_port(b.host, "0000:00:01.0", speed=16.0, width=1)
    b.attach("0000:00:01.0", 16.0, 1)
    b.switch("0000:00:01.0", "0000:01:00.0", ["0000:02:00.0"], speed=16.0, up_width=1, down_width=4)
    drive(b, "0000:02:00.0", "0000:03:00.0")
    found = pcie(b)
    hop = found[("0000:03:00.0", "pcie.path_limited_upstream")]
    assert hop.severity == WARNING and "0000:01:00.0" in hop.title
    assert "7.88 GB/s of own link, 1.97 GB/s available" in hop.impact


def test_registry_skips_a_module_whose_reader_is_missing_and_fences_a_failing_one(tmp_path, monkeypatch):
    import storpath.report.findings as findings

    monkeypatch.setitem(findings.UNAVAILABLE, "zz_future", "No module named 'storpath.readers.future'")

    @register("zz_broken")
    def broken(facts, out):
        raise RuntimeError("boom")

    try:
        result = run_checks(Facts(Roots(sysfs=str(tmp_path), procfs=str(tmp_path))))
    finally:
        REGISTRY.pop("zz_broken")
    assert "zz_future" in result.skipped and "not available" in result.skipped["zz_future"]
    failed = [f for f in result.findings if f.kind == "storpath.check_failed"]
    assert len(failed) == 1 and "RuntimeError: boom" in failed[0].evidence and failed[0].severity == WARNING
    assert "pcie" in result.ran  # the others ran
    assert "pcie" in load_all()


def test_finding_severity_is_checked():
    with pytest.raises(ValueError):
        Finding(subject="x", severity="bad", title="t", evidence="e", impact="i", remedy="r")


def test_exit_codes():
    f = lambda sev: Finding(subject="x", severity=sev, title="t", evidence="e", impact="i", remedy="r")  # noqa
    assert CheckResult().exit_code() == 0
    assert CheckResult(findings=[f(INFO)]).exit_code() == 0
    assert CheckResult(findings=[f(INFO), f(WARNING)]).exit_code() == 1
    assert CheckResult(findings=[f(WARNING), f(CRITICAL)]).exit_code() == 2


def test_counted():
    assert counted(1, "PCIe links") == "1 PCIe link"
    assert counted(1, "SAS PHYs in use") == "1 SAS PHY in use"
    assert counted(3, "NUMA nodes") == "3 NUMA nodes"


def test_render_wraps_at_the_width_and_keeps_units_together():
    long = Finding(subject="0000:01:00.0", severity=CRITICAL, kind="k", title="PCIe link trained at 8 GT/s (Gen3)",
                   evidence=" ".join(["trained 16 GT/s (Gen4) x2, expected 16 GT/s (Gen4) x4"] * 4),
                   impact="7.88 GB/s of link, 3.94 GB/s available", remedy="word " * 40)
    result = CheckResult(findings=[long], checked=[(3, "PCIe links")])
    for width in (60, 80, 100):
        text = render(result, {"0000:01:00.0": "nvme0 · nvme0n1"}, [], width=width)
        lines = text.splitlines()
        assert all(len(line) <= width for line in lines), [line for line in lines if len(line) > width]
        assert not any(line.rstrip().endswith(("16", "GT/s", "(Gen4)")) for line in lines)
    assert "\033[" not in render(result, {}, [], colour=False)
    assert "\033[1;31mCRITICAL" in render(result, {}, [], colour=True)


def test_colour_and_width_rules(monkeypatch):
    class Tty:
        def isatty(self):
            return True

    class Pipe:
        def isatty(self):
            return False

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert use_colour("auto", Tty()) and not use_colour("auto", Pipe())
    assert use_colour("always", Pipe()) and not use_colour("never", Tty())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not use_colour("auto", Tty())
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setenv("TERM", "dumb")
    assert not use_colour("auto", Tty())
    monkeypatch.delenv("COLUMNS", raising=False)
    assert report_width(Pipe()) == 80
    monkeypatch.setenv("COLUMNS", "40")
    assert report_width(Pipe()) == 60
    monkeypatch.setenv("COLUMNS", "300")
    assert report_width(Pipe()) == 100


def test_expand_braces():
    assert expand_braces("a/{b,c}/d/{e,f}") == ["a/b/d/e", "a/b/d/f", "a/c/d/e", "a/c/d/f"]
    assert expand_braces("plain") == ["plain"]


def test_redactor_keeps_shape_and_consistency():
    r = Redactor(key=b"k" * 16)
    serial = r.token("S467NX0M401234A")
    assert serial.startswith("REDACTED") and r.token("S467NX0M401234A") == serial
    sas = r.token("0x500605b0000272b0")
    assert sas.startswith("0x") and len(sas) == 18 and sas != "0x500605b0000272b0"
    int(sas, 16)
    eui = r.token("eui.0025385b71b07e1f")
    assert eui.startswith("eui.") and len(eui) == len("eui.0025385b71b07e1f")
    assert r.token("0000000000000000") == "0000000000000000"  # "not set" hides nothing
    text = r.apply("class/nvme/nvme0/subsysnqn", b"nqn.2014.08.org.nvmexpress:144d144dS467NX0M401234A Samsung\n")
    assert text == f"nqn.2014.08.org.nvmexpress:144d144d{serial} Samsung\n".encode()
    unknown = r.apply("class/nvme/nvme1/subsysnqn", b"nqn.2014.08.org.nvmexpress:uuid:11112222\n")
    assert b"11112222" not in unknown and unknown.startswith(b"nqn.2014.08.org.nvmexpress:")
    assert r.apply("class/nvme/nvme0/serial", b"S467NX0M401234A     \n") == (serial + "     \n").encode()
    config = bytes(range(256)) * 16
    assert r.apply("devices/x/config", config) == config[:256]


def test_natural_key_orders_names_by_number_and_pci_addresses_by_hex():
    from storpath.report.findings import natural_key

    names = ["nvme10n1", "0000:0a:00.0", "nvme2n1", "0000:08:00.0", "0000:10:00.0", "0001:00:01.0", "sda"]
    assert sorted(names, key=natural_key) == ["0000:08:00.0", "0000:0a:00.0", "0000:10:00.0", "0001:00:01.0",
                                              "nvme2n1", "nvme10n1", "sda"]
