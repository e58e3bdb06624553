"""Host identity (readers.host) and which link numbers are hardware (analysis.virtual)."""

from __future__ import annotations

import pytest

from storpath.analysis.pcie import analyse
from storpath.readers.host import identify, parse_cpuinfo_hypervisor, read_host
from storpath.base.roots import Roots
from tests.fixtures.sysfs_builder import MachineBuilder
from tests.snapshots import pci_tree

FLAGS = "processor\t: 0\nflags\t\t: fpu vme de pse tsc msr{}\n\nprocessor\t: 1\nflags\t\t: fpu hypervisor\n"


def test_cpuinfo_flag_is_read_from_the_first_processor():
    assert parse_cpuinfo_hypervisor(FLAGS.format(" hypervisor lahf_lm")) is True
    assert parse_cpuinfo_hypervisor(FLAGS.format(" lahf_lm")) is False
    assert parse_cpuinfo_hypervisor("processor\t: 0\nFeatures\t: fp asimd\n") is None  # arm64: no flags line
    assert parse_cpuinfo_hypervisor("") is None and parse_cpuinfo_hypervisor(None) is None


@pytest.mark.parametrize("dmi,flag,xen,hypervisor,virtualization", [
    ({"sys_vendor": "QEMU", "product_name": "Standard PC (Q35 + ICH9, 2009)"}, True, None, "qemu", "vm"),
    ({"sys_vendor": "VMware, Inc.", "product_name": "VMware7,1"}, True, None, "vmware", "vm"),
    ({"sys_vendor": "Microsoft Corporation", "product_name": "Virtual Machine"}, True, None, "microsoft", "vm"),
    ({"sys_vendor": "Microsoft Corporation", "product_name": "Surface Laptop 5"}, False, None, "", "none"),
    ({"sys_vendor": "Amazon EC2", "product_name": "i3en.large"}, True, None, "amazon", "vm"),
    ({"sys_vendor": "Amazon EC2", "product_name": "i3.metal"}, False, None, "", "none"),  # bare-metal instance
    ({"sys_vendor": "Google", "product_name": "Google Compute Engine"}, True, None, "google", "vm"),
    ({"sys_vendor": "Supermicro", "product_name": "SYS-6028R-TR"}, False, None, "", "none"),
    ({"sys_vendor": "Supermicro"}, True, None, "unknown", "vm"),  # a hypervisor DMI does not name
    ({}, None, "xen", "xen", "vm"),  # a paravirtualised Xen guest: no DMI, no flags
    ({"sys_vendor": "QEMU", "product_name": "KVM Virtual Machine"}, None, None, "qemu", "vm"),  # arm64 guest
    ({}, None, None, "", "unknown"),
])
def test_identify(dmi, flag, xen, hypervisor, virtualization):
    host = identify(dmi, flag, xen)
    assert (host.hypervisor, host.virtualization) == (hypervisor, virtualization)
    assert host.evidence


@pytest.mark.parametrize("sys_vendor,product_name,board_vendor,board_name,model", [
    ("Dell Inc.", "PowerEdge R750", "Dell Inc.", "0PJ7YJ", ("Dell Inc.", "PowerEdge R750")),
    # ASUS desktop firmware: the board is the model (an X570 and a Z690 are not one model).
    ("ASUS", "System Product Name", "ASUSTeK COMPUTER INC.", "ROG CROSSHAIR VIII HERO",
     ("ASUSTeK COMPUTER INC.", "ROG CROSSHAIR VIII HERO")),
    ("System manufacturer", "System Product Name", "ASUSTeK COMPUTER INC.", "PRIME Z690-A",
     ("ASUSTeK COMPUTER INC.", "PRIME Z690-A")),
    ("Supermicro", "Super Server", "Supermicro", "X11SSH-CTF", ("Supermicro", "X11SSH-CTF")),
    ("To Be Filled By O.E.M.", "To Be Filled By O.E.M.", "ASRock", "B650D4U", ("ASRock", "B650D4U")),
    ("System manufacturer", "SYS-6028R-TR", "Supermicro", "X10DRi", ("Supermicro", "SYS-6028R-TR")),
    # Nothing names the build: no model, so such hosts are not compared as one.
    ("To be filled by O.E.M.", "To be filled by O.E.M.", "Default string", "Default string", ("", "")),
    ("", "", "", "", ("", "")),
])
def test_model_is_the_product_or_the_board_where_firmware_left_a_placeholder(sys_vendor, product_name, board_vendor,
                                                                            board_name, model):
    dmi = {"sys_vendor": sys_vendor, "product_name": product_name, "board_vendor": board_vendor,
           "board_name": board_name}
    assert identify(dmi, False, None).model == model


def test_read_host_from_a_tree(tmp_path):
    b = MachineBuilder(str(tmp_path))
    b.identity(sys_vendor="QEMU", product_name="Standard PC (Q35 + ICH9, 2009)", bios_vendor="SeaBIOS",
           bios_version="1.16.2", hypervisor=True)
    host = read_host(Roots(sysfs=b.sys, procfs=b.proc))
    assert host.virtual and host.hypervisor == "qemu"
    assert host.dmi["bios_version"] == "1.16.2" and host.dmi["board_name"] == ""
    assert read_host(Roots(sysfs=str(tmp_path / "none"), procfs=str(tmp_path / "none"))).virtualization == "unknown"


@pytest.fixture
def b(tmp_path):
    builder = MachineBuilder(str(tmp_path))
    builder.cpus(sockets=1, cores_per_socket=2, threads_per_core=1, numa_nodes=1)
    builder.host = builder.host_bridge("0000:00")
    return builder


def _links(b, guest):
    return analyse(pci_tree(Roots(sysfs=b.sys, procfs=b.proc)), guest=guest)


def _passthrough(b, port_ids, port_speed, port_width, cur_width=4):
    b.root_port(b.host, "0000:00:02.0", speed=port_speed, width=port_width, vendor=port_ids[0], device=port_ids[1])
    b.nvme("0000:00:02.0", "0000:01:00.0", model="Samsung SSD 980 PRO 2TB", serial="S1", firmware="1",
           vendor=0x144d, device=0xa80a, speed=16.0, width=4, cur_speed=16.0, cur_width=cur_width)
    b.set_link("0000:00:02.0", min(port_speed, 16.0), min(port_width, cur_width))


def test_old_qemu_port_is_not_a_placement_limit(b):
    _passthrough(b, (0x1b36, 0x000c), 2.5, 1)
    drive = _links(b, guest=True)["0000:01:00.0"]
    assert (drive.speed.basis, drive.speed.reason) == ("device_only", "emulated_port")
    assert (drive.speed.expected, drive.expected_width) == (16e9, 4)  # its own capability
    assert not drive.placement_speed_limited and not drive.width_below_expected
    assert drive.bottleneck == "0000:01:00.0"
    assert _links(b, guest=True)["0000:00:02.0"].speed.basis == "none"


def test_a_real_downgrade_in_the_devices_own_registers_stays_visible(b):
    _passthrough(b, (0x1b36, 0x000c), 16.0, 32, cur_width=2)
    drive = _links(b, guest=True)["0000:01:00.0"]
    assert drive.width_below_expected and drive.expected_width == 4 and not drive.speed.verifiable


def test_ends_that_disagree_without_knowing_the_host(b):
    """A port that claims x1 above a device running x4: not hardware, whoever made it."""
    _passthrough(b, (0x8086, 0x3420), 2.5, 1)
    links = _links(b, guest=False)
    assert (links["0000:01:00.0"].speed.basis, links["0000:01:00.0"].speed.reason) == ("device_only", "ends_disagree")
    assert not links["0000:01:00.0"].placement_speed_limited
    # ioh3420's ids are a real Intel root port's too: only in a guest are they taken as emulated
    assert _links(b, guest=True)["0000:01:00.0"].speed.reason == "emulated_port"


def test_bare_metal_gen3_slot_is_still_placement(b):
    b.root_port(b.host, "0000:00:02.0", speed=8.0, width=4)
    b.nvme("0000:00:02.0", "0000:01:00.0", model="m", serial="S1", firmware="1", vendor=0x144d, device=0xa80a,
           speed=16.0, width=4)
    drive = _links(b, guest=False)["0000:01:00.0"]
    assert drive.speed.verifiable and drive.speed.basis == "both_ends" and drive.placement_speed_limited


def test_root_complex_integrated_endpoint_has_no_link_to_judge(b):
    b.nvme(b.host, "0000:00:05.0", model="m", serial="S1", firmware="1", vendor=0x144d, device=0xa808,
           speed=None, width=0, cur_speed=None, cur_width=0, port_type="rc_integrated_endpoint")
    link = _links(b, guest=True)["0000:00:05.0"]
    assert (link.speed.basis, link.speed.reason, link.partner) == ("none", "no_partner", None)
    assert not link.link_down and link.speed.expected is None


def test_emulated_device_is_never_judged(b):
    b.root_port(b.host, "0000:00:02.0", speed=16.0, width=32, vendor=0x1b36, device=0x000c)
    b.nvme("0000:00:02.0", "0000:01:00.0", model="QEMU NVMe Ctrl", serial="d", firmware="8", vendor=0x1b36,
           device=0x0010, speed=2.5, width=1)
    link = _links(b, guest=True)["0000:01:00.0"]
    assert link.speed.basis == "none" and link.speed.reason == "emulated_device" and link.bottleneck is None


def test_kept_expectations_follow_a_link_that_retrains(b):
    """Whether the ends disagree reads the current link: a retrain past the port's maximum
    must reach the expectations a long-running exporter keeps."""
    import os

    from storpath.analysis.pcie import InstanceExpectations, expectations

    _passthrough(b, (0x8086, 0x3420), 16.0, 2, cur_width=2)
    roots = Roots(sysfs=b.sys, procfs=b.proc)
    kept = InstanceExpectations()
    before = kept(pci_tree(roots), False)["0000:01:00.0"]
    with open(os.path.join(b.sys, "bus/pci/devices/0000:01:00.0/current_link_width"), "w") as handle:
        handle.write("4\n")  # wider than the port's x2: the port's numbers are not hardware
    devices = pci_tree(roots)
    after = kept(devices, False)["0000:01:00.0"]
    assert after == expectations(devices, False)["0000:01:00.0"]
    assert before.speed.reason != "ends_disagree" and after.speed.reason == "ends_disagree", (before, after)
