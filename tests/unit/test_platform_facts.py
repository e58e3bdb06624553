"""Links narrow by the platform's design (storpath.analysis.platform): an AM4 X570 host as real
ones report it (root port and chipset upstream port both advertise x8, the socket wires four
lanes) carries no warning or critical, and names the design."""

from __future__ import annotations

from storpath.analysis.pcie import analyse
from storpath.base.roots import Roots
from storpath.report.findings import CRITICAL, WARNING, Facts, run_checks
from tests.fixtures import machines
from tests.snapshots import pci_tree

CHIPSET_UPLINK = "0000:02:00.0"


def _built(tmp_path, variant="healthy"):
    b = machines.load("am4-x570-firecuda").build(str(tmp_path / variant), variant)
    return Roots(sysfs=b.sys, procfs=b.proc)


def test_the_fixture_models_both_ends_at_x8_trained_at_x4(tmp_path):
    devices = {d.address: d for d in pci_tree(_built(tmp_path))}
    uplink, port = devices[CHIPSET_UPLINK], devices["0000:00:01.2"]
    assert (uplink.static.max_link_width, port.static.max_link_width) == (8, 8)
    assert (uplink.current_link_width, port.current_link_width) == (4, 4)


def test_the_x570_chipset_link_is_judged_as_designed(tmp_path):
    links = analyse(pci_tree(_built(tmp_path)))
    for end in (CHIPSET_UPLINK, "0000:00:01.2"):
        assert links[end].design == "amd_am4_x570_chipset_x4"
        assert links[end].expected_width == 4
        assert not links[end].width_below_expected
    assert not links[CHIPSET_UPLINK].placement_width_limited


def test_check_has_no_warning_or_critical_and_names_the_design(tmp_path):
    result = run_checks(Facts(_built(tmp_path), {}), only=["pcie"])
    loud = [(f.subject, f.kind, f.severity) for f in result.findings if f.severity in (WARNING, CRITICAL)]
    assert loud == []
    designed = [f for f in result.findings if f.kind == "pcie.link_as_designed"]
    assert [f.subject for f in designed] == [CHIPSET_UPLINK]
    assert "amd_am4_x570_chipset_x4" in designed[0].title and "X570" in designed[0].evidence


def test_the_same_link_at_x2_is_still_a_fault(tmp_path):
    b = machines.load("am4-x570-firecuda").build(str(tmp_path / "x2"), "healthy")
    b.set_link("0000:00:01.2", 16.0, 2)
    b.set_link(CHIPSET_UPLINK, 16.0, 2)
    links = analyse(pci_tree(Roots(sysfs=b.sys, procfs=b.proc)))
    assert links[CHIPSET_UPLINK].width_below_expected


def test_other_ids_get_no_design(tmp_path):
    """The same widths between a root port and a switch of other vendors stay a fault: only a
    documented fact says a link is narrow on purpose."""
    from tests.fixtures.sysfs_builder import MachineBuilder
    b = MachineBuilder(str(tmp_path / "other"))
    b.cpus(sockets=1, cores_per_socket=2, threads_per_core=1, numa_nodes=1)
    host = b.host_bridge("0000:00")
    b.root_port(host, "0000:00:01.2", speed=16.0, width=8, vendor=0x8086, device=0x347a)
    b.attach("0000:00:01.2", 16.0, 8, cur_width=4)
    b.switch("0000:00:01.2", CHIPSET_UPLINK, ["0000:03:01.0"], speed=16.0, up_width=8, up_cur_width=4,
             down_width=1)
    links = analyse(pci_tree(Roots(sysfs=b.sys, procfs=b.proc)))
    assert links[CHIPSET_UPLINK].design is None and links[CHIPSET_UPLINK].width_below_expected
