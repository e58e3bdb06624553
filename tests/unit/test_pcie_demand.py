"""What a device can use of its PCIe link (analysis.demand) and the network ports it is read
from (readers.net): the slot is a device's bottleneck only where the device can use more than
the slot carries. The machines: tests/fixtures/machines/dell-r710-quad-nic (an X710-DA4, four
10 GbE ports, in a Gen2 x4 slot) and dell-r330-perc-h730 (a dual-port BCM5720 in an x1 slot)."""

from __future__ import annotations

import pytest

from storpath.analysis.demand import NETWORK_PORTS, SWITCH_LINKS, bottlenecked, link_demands
from storpath.analysis.pcie import analyse
from storpath.readers.net import NetReader, parse_net_speed
from storpath.base.roots import Roots
from tests.fixtures import machines
from tests.fixtures.sysfs_builder import MachineBuilder
from tests.snapshots import pci_tree


@pytest.mark.parametrize("text,expected", [
    ("10000", (10e9, None)), ("1000\n", (1e9, None)), ("-1", (None, None)), ("", (None, None)),
    (None, (None, None)), ("0", (None, None)), ("fast", (None, "unrecognised speed 'fast'"))])
def test_parse_net_speed(text, expected):
    assert parse_net_speed(text) == expected


def _demands(root, name, variant):
    b = machines.load(name).build(str(root), variant)
    roots = Roots(sysfs=b.sys, procfs=b.proc)
    devices = pci_tree(roots)
    links = analyse(devices)
    ports, problems = NetReader(roots).read()
    assert problems == []
    return links, link_demands(devices, links, ports), ports


def test_net_reader_finds_the_ports_of_pci_functions(tmp_path):
    b = MachineBuilder(str(tmp_path))
    b.cpus(sockets=1, cores_per_socket=2, threads_per_core=1, numa_nodes=1)
    host = b.host_bridge("0000:00")
    b.pci(host, "0000:00:19.0", class_code=0x020000, vendor=0x8086, device=0x15b8, link=False, driver="e1000e")
    b.net("0000:00:19.0", "eno1", 1000)
    b.net("0000:00:19.0", "eno2", None)  # no cable: speed -1
    b.write("devices/virtual/net/lo/speed", "")  # no `device` link: left out
    b.symlink("class/net/lo", "devices/virtual/net/lo")
    b.write("devices/pci0000:00/0000:00:19.0/net/eno3/speed", "fast")
    b.symlink("devices/pci0000:00/0000:00:19.0/net/eno3/device", "devices/pci0000:00/0000:00:19.0")
    b.symlink("class/net/eno3", "devices/pci0000:00/0000:00:19.0/net/eno3")
    ports, problems = NetReader(Roots(sysfs=b.sys, procfs=b.proc)).read()
    assert [(p.name, p.pci_address, p.speed) for p in ports] == [
        ("eno1", "0000:00:19.0", 1e9), ("eno2", "0000:00:19.0", None), ("eno3", "0000:00:19.0", None)]
    assert [dict(p.fields)["device"] for p in problems] == ["eno3"]


def test_quad_10gbe_nic_in_a_gen2_x4_slot_is_bottlenecked(tmp_path):
    links, demands, _ = _demands(tmp_path, "dell-r710-quad-nic", "quad-nic-x4-gen2")
    nic = demands["0000:04:00.0"]
    assert (nic.source, nic.parts, nic.bytes_per_second) == (NETWORK_PORTS, 4, 5e9)  # 4 x 10 Gbit/s
    assert links["0000:04:00.0"].expected_bandwidth == 2e9 and bottlenecked(links["0000:04:00.0"], nic)
    assert "0000:04:00.1" not in demands  # one demand per link, on the function the port's link is judged on
    # ...and only that one: the BCM5709s (2 x 1 GbE behind x4 Gen1) are not.
    others = {a for a, d in demands.items() if bottlenecked(links[a], d)}
    assert others == {"0000:04:00.0"}


def test_dual_1gbe_nic_in_an_x1_slot_is_not_bottlenecked(tmp_path):
    links, demands, _ = _demands(tmp_path, "dell-r330-perc-h730", "healthy")
    bcm = demands["0000:04:00.0"]
    assert bcm.bytes_per_second == 1.25e8  # the second port has no cable: one 1 GbE link counts
    assert links["0000:04:00.0"].placement_width_limited and not bottlenecked(links["0000:04:00.0"], bcm)
    assert "0000:03:00.0" not in demands  # a RAID controller: its drives are not added up, no demand
    assert demands["0000:05:00.0"].source == SWITCH_LINKS  # the BMC's switch: the link below it
    assert not any(bottlenecked(links[a], d) for a, d in demands.items())


def test_demand_is_capped_by_the_devices_own_link(tmp_path):
    """A NIC whose ports outrun its own link (designed that way) is not held back by a slot that gives it all of it."""
    b = MachineBuilder(str(tmp_path))
    b.cpus(sockets=1, cores_per_socket=2, threads_per_core=1, numa_nodes=1)
    host = b.host_bridge("0000:00")
    b.root_port(host, "0000:00:02.0", speed=8.0, width=8, vendor=0x8086, device=0x6f04)
    b.attach("0000:00:02.0", 5.0, 4)
    for index in range(4):
        b.pci("0000:00:02.0", f"0000:03:00.{index}", class_code=0x020000, vendor=0x8086, device=0x10fb,
              max_speed=5.0, max_width=4, cur_speed=5.0, cur_width=4, driver="ixgbe")
        b.net(f"0000:03:00.{index}", f"eth{index}", 10000)
    roots = Roots(sysfs=b.sys, procfs=b.proc)
    devices = pci_tree(roots)
    links = analyse(devices)
    demand = link_demands(devices, links, NetReader(roots).read()[0])["0000:03:00.0"]
    assert demand.bytes_per_second == 2e9 and not bottlenecked(links["0000:03:00.0"], demand)
