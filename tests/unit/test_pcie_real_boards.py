"""PCIe verdicts on real boards: a BMC's PCIe-to-PCI bridge is not a switch, an SR-IOV virtual
function has no link of its own, and a port whose max_link_speed changed meaning in kernel 6.13
is judged the same on every kernel. The trees follow the Dell R330 of
tests/fixtures/machines/dell-r330-perc-h730 (a real host's lspci, cited there)."""

from __future__ import annotations

import pytest

from storpath.analysis.pcie import analyse
from storpath.base.roots import Roots
from tests.fixtures import machines
from tests.fixtures.sysfs_builder import MachineBuilder
from tests.snapshots import pci_tree


@pytest.fixture
def b(tmp_path):
    builder = MachineBuilder(str(tmp_path), config_bytes=64)  # read without root: no PCIe capability
    builder.cpus(sockets=1, cores_per_socket=2, threads_per_core=1, numa_nodes=1)
    builder.host = builder.host_bridge("0000:00")
    return builder


def _tree(b):
    return {d.address: d for d in pci_tree(Roots(sysfs=b.sys, procfs=b.proc))}


def _r330(tmp_path, variant):
    b = machines.load("dell-r330-perc-h730").build(str(tmp_path / variant), variant)
    devices = pci_tree(Roots(sysfs=b.sys, procfs=b.proc))
    return {d.address: d for d in devices}, analyse(devices)


def test_bmc_video_bridge_is_not_a_switch_upstream_port(tmp_path):
    devices, _ = _r330(tmp_path, "healthy")
    assert devices["0000:05:00.0"].port_type == "upstream_port"  # the SH7758's switch: a downstream port below
    assert devices["0000:06:00.0"].port_type == "downstream_port"
    assert devices["0000:07:00.0"].port_type == "pcie_to_pci_bridge"  # only the Matrox (no link) below it


def test_an_ast1150_video_bridge_and_a_bridge_with_nothing_below(b):
    b.root_port(b.host, "0000:00:1c.0", speed=5.0, width=1, vendor=0x8086, device=0x8c10)
    b.attach("0000:00:1c.0", 2.5, 1)
    b.pci("0000:00:1c.0", "0000:02:00.0", class_code=0x060400, vendor=0x1a03, device=0x1150,
          port_type="pcie_to_pci_bridge", max_speed=2.5, max_width=1, cur_speed=2.5, cur_width=1)  # ASPEED AST1150
    b.pci("0000:02:00.0", "0000:03:00.0", class_code=0x030000, vendor=0x1a03, device=0x2000, link=False,
          driver="ast")
    b.pci(b.host, "0000:00:1d.0", class_code=0x060400, vendor=0x8086, device=0x8c18, port_type="root_port",
          max_speed=5.0, max_width=1, cur_speed=2.5, cur_width=0)
    b.pci("0000:00:1d.0", "0000:04:00.0", class_code=0x060400, vendor=0x10b5, device=0x8112,
          port_type="pcie_to_pci_bridge", max_speed=2.5, max_width=1, cur_speed=2.5, cur_width=0)  # nothing below
    tree = _tree(b)
    assert tree["0000:02:00.0"].port_type == "pcie_to_pci_bridge"
    assert tree["0000:04:00.0"].port_type == "unknown"  # nothing below it says which it is


def test_a_virtual_function_has_no_link_verdict(b):
    """A VF's link registers are reserved: sysfs may show Unknown / width 0, which must not read as a link down."""
    b.root_port(b.host, "0000:00:02.0", speed=8.0, width=8, vendor=0x8086, device=0x6f04)
    b.attach("0000:00:02.0", 8.0, 8)
    b.pci("0000:00:02.0", "0000:03:00.0", class_code=0x020000, vendor=0x8086, device=0x1572, max_speed=8.0,
          max_width=8, cur_speed=8.0, cur_width=8, driver="i40e")
    b.pci("0000:00:02.0", "0000:03:02.0", class_code=0x020000, vendor=0x8086, device=0x154c, max_speed=None,
          max_width=0, cur_speed=None, cur_width=0, driver="iavf")
    b.symlink(f"{b.nodes['0000:03:02.0'].path}/physfn", b.nodes["0000:03:00.0"].path)
    devices = pci_tree(Roots(sysfs=b.sys, procfs=b.proc))
    links = analyse(devices)
    assert "0000:03:02.0" not in links
    assert not any(link.link_down for link in links.values())
    assert links["0000:00:02.0"].partner == "0000:03:00.0"


def test_the_same_hardware_is_judged_the_same_on_kernels_before_and_after_6_13(tmp_path):
    old_devices, old = _r330(tmp_path, "healthy")
    new_devices, new = _r330(tmp_path, "kernel-6.13")
    # What the two kernels write differs...
    assert old_devices["0000:00:01.2"].static.max_link_speed == 8e9
    assert new_devices["0000:00:01.2"].static.max_link_speed == 2.5e9
    # ...the verdicts do not.
    for address in old:
        a, b = old[address], new[address]
        assert (a.speed.expected, a.expected_width, a.speed.basis, a.speed_below_expected, a.width_below_expected,
                a.placement_speed_limited, a.placement_width_limited) == \
               (b.speed.expected, b.expected_width, b.speed.basis, b.speed_below_expected, b.width_below_expected,
                b.placement_speed_limited, b.placement_width_limited), address
    h730 = new["0000:03:00.0"]
    assert (h730.speed.expected, h730.expected_width, h730.speed.basis) == (8e9, 4, "both_ends")
    assert not h730.width_below_expected and h730.placement_width_limited and not h730.placement_speed_limited


def test_a_real_step_down_below_a_port_stating_less_still_counts(b):
    """Kernel 6.13's port says 2.5 GT/s; the device (Gen3) trained at 5 GT/s: the port is taken to
    support 5 (it runs there), and the link is judged below what both ends support only where it is."""
    b.root_port(b.host, "0000:00:01.2", speed=2.5, width=4, vendor=0x8086, device=0x1909)
    b.attach("0000:00:01.2", 8.0, 8, cur_speed=8.0, cur_width=2)
    b.pci("0000:00:01.2", "0000:03:00.0", class_code=0x010400, vendor=0x1000, device=0x005d, max_speed=8.0,
          max_width=8, cur_speed=8.0, cur_width=2, driver="megaraid_sas")
    link = analyse(pci_tree(Roots(sysfs=b.sys, procfs=b.proc)))["0000:03:00.0"]
    assert link.speed.basis == "both_ends" and link.expected_width == 4 and link.width_below_expected
