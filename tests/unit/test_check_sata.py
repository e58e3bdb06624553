"""`storpath check` on a SATA link slower than its port where the drive does not say what it
supports (IDENTIFY word 76 unreported): the metrics call the link unverifiable
(storpath_sata_link_verifiable 0), and check says once where to look."""

import glob
import os

from storpath.report.findings import INFO, Facts, Outcome
from storpath.report.findings.sas import check_sata
from storpath.base.roots import Roots
from tests.fixtures import machines
from tests.fixtures.builders_sas import SATA_RATES, ata_id_text, identify_words


def _findings(tmp_path, variant, unreported):
    root = str(tmp_path)
    machines.load("supermicro-x11ssh-sas3008").build(root, variant)
    sys = os.path.join(root, "sys")
    (identity,) = glob.glob(f"{sys}/class/ata_device/dev1.0/id")
    if unreported:  # word 76 reads 0: the drive does not list its SATA generations
        with open(identity, "w") as handle:
            handle.write(ata_id_text(identify_words(None, SATA_RATES["3.0 Gbps"])))
    out = Outcome("sata")
    check_sata(Facts(Roots(sysfs=sys, procfs=os.path.join(root, "proc"), dev="")), out)
    return {(f.subject, f.kind): f for f in out.findings}


def test_link_below_its_port_with_an_unreported_drive_is_one_info_line(tmp_path):
    findings = _findings(tmp_path, "boot-ssd-held", unreported=True)
    assert list(findings) == [("sdg", "sata.link_below_port_drive_unknown")]
    finding = findings[("sdg", "sata.link_below_port_drive_unknown")]
    assert finding.severity == INFO
    assert finding.title == "SATA link runs at 3 Gbit/s on a 6 Gbit/s port; the drive does not say what it supports"
    assert "hw_sata_spd_limit 6 Gbit/s" in finding.evidence and "word 76" in finding.evidence
    assert "hdparm -I /dev/sdg" in finding.remedy


def test_the_same_link_at_its_port_rate_or_with_a_reporting_drive_is_not_it(tmp_path):
    assert _findings(tmp_path / "a", "healthy", unreported=True) == {}
    assert list(_findings(tmp_path / "b", "boot-ssd-held", unreported=False)) == [
        ("sdg", "sata.link_below_hardware_limit")]
