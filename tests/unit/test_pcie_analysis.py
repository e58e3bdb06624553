"""The link analysis on small hand-built topologies."""

import pytest

from storpath.analysis.pcie import analyse
from storpath.base.roots import Roots
from tests.fixtures.sysfs_builder import MachineBuilder
from tests.snapshots import pci_tree


def _analyse(b):
    return analyse(pci_tree(Roots(sysfs=b.sys)))


def _drive(b, port, address, speed, width, cur_speed=None, cur_width=None):
    b.nvme(port, address, model="M", serial=address, firmware="F", vendor=1, device=2, speed=speed, width=width,
           cur_speed=cur_speed, cur_width=cur_width)


@pytest.fixture
def b(tmp_path):
    builder = MachineBuilder(str(tmp_path))
    builder.host = builder.host_bridge("0000:00")
    return builder


def test_healthy_gen4_link_is_expected_at_gen4_on_both_ends(b):
    b.root_port(b.host, "0000:00:01.0", speed=16.0, width=4)
    _drive(b, "0000:00:01.0", "0000:01:00.0", 16.0, 4)
    links = _analyse(b)
    for end in ("0000:00:01.0", "0000:01:00.0"):
        assert links[end].speed.expected == 16e9 and links[end].expected_width == 4
        assert not links[end].speed_below_expected and not links[end].width_below_expected
    assert links["0000:01:00.0"].partner == "0000:00:01.0"
    assert links["0000:00:01.0"].partner == "0000:01:00.0"
    assert links["0000:01:00.0"].expected_bandwidth == pytest.approx(7.877e9, rel=1e-3)
    assert not links["0000:01:00.0"].placement_speed_limited


def test_gen4_drive_in_gen3_slot_is_placement_not_a_link_fault(b):
    b.root_port(b.host, "0000:00:01.0", speed=8.0, width=4)
    _drive(b, "0000:00:01.0", "0000:01:00.0", 16.0, 4)
    drive = _analyse(b)["0000:01:00.0"]
    assert drive.speed.expected == 8e9
    assert not drive.speed_below_expected
    assert drive.placement_speed_limited


def test_gen4_port_above_gen3_drive_is_fine(b):
    b.root_port(b.host, "0000:00:01.0", speed=16.0, width=8)
    _drive(b, "0000:00:01.0", "0000:01:00.0", 8.0, 4)
    links = _analyse(b)
    port, drive = links["0000:00:01.0"], links["0000:01:00.0"]
    assert port.speed.expected == 8e9 and port.expected_width == 4
    assert not port.speed_below_expected and not port.width_below_expected
    assert not port.placement_speed_limited and not port.placement_width_limited
    assert not drive.placement_speed_limited and not drive.placement_width_limited


def test_link_trained_low_is_a_fault_on_both_ends(b):
    b.root_port(b.host, "0000:00:01.0", speed=16.0, width=4)
    _drive(b, "0000:00:01.0", "0000:01:00.0", 16.0, 4, cur_speed=8.0, cur_width=2)
    for link in _analyse(b).values():
        assert link.speed_below_expected and link.width_below_expected
        assert link.current_bandwidth == pytest.approx(1.969e9, rel=1e-3)


def test_empty_slot_has_no_expectation(b):
    b.root_port(b.host, "0000:00:01.0", speed=16.0, width=16)
    port = _analyse(b)["0000:00:01.0"]
    assert port.partner is None and port.speed.expected is None
    assert not port.link_down and not port.width_below_expected


def test_device_present_but_link_down(b):
    b.root_port(b.host, "0000:00:01.0", speed=16.0, width=4)
    _drive(b, "0000:00:01.0", "0000:01:00.0", 16.0, 4)
    b.set_link("0000:01:00.0", cur_width=0)
    drive = _analyse(b)["0000:01:00.0"]
    assert drive.link_down and not drive.width_below_expected and drive.current_bandwidth == 0.0


def test_switch_uplink_is_the_bottleneck_hop_for_a_device_behind_it(b):
    b.root_port(b.host, "0000:00:01.0", speed=8.0, width=8)
    b.attach("0000:00:01.0", 8.0, 8, cur_width=2)
    b.switch("0000:00:01.0", "0000:01:00.0", ["0000:02:00.0", "0000:02:01.0"], speed=8.0, up_width=8,
             down_width=4, up_cur_width=2)
    _drive(b, "0000:02:00.0", "0000:03:00.0", 8.0, 4)
    links = _analyse(b)
    uplink = links["0000:01:00.0"]
    assert uplink.partner == "0000:00:01.0" and uplink.expected_width == 8 and uplink.width_below_expected
    drive = links["0000:03:00.0"]
    assert drive.root_port == "0000:00:01.0"
    assert not drive.width_below_expected
    # The drive's own link (x4) is below the uplink's expected x8: the drive's hop limits it.
    assert drive.bottleneck == "0000:03:00.0"
    # The empty downstream port expects nothing.
    assert links["0000:02:01.0"].expected_width is None


def test_narrow_uplink_limits_the_path(b):
    b.root_port(b.host, "0000:00:01.0", speed=8.0, width=1)
    b.attach("0000:00:01.0", 8.0, 8)
    # The switch's uplink trains x1, all its port allows (a card in an x1 slot).
    b.switch("0000:00:01.0", "0000:01:00.0", ["0000:02:00.0"], speed=8.0, up_width=8, down_width=4, up_cur_width=1)
    _drive(b, "0000:02:00.0", "0000:03:00.0", 8.0, 4)
    drive = _analyse(b)["0000:03:00.0"]
    assert drive.bottleneck == "0000:01:00.0"
    assert drive.bottleneck_bandwidth == pytest.approx(0.9846e9, rel=1e-3)


# ---- one end's capability unreadable -----------------------------------------------------
# The expectation is then the readable end's capability: a link never trains above either
# end, so it is the best knowledge there is. The usual cause is a kernel that prints
# "Unknown" for a generation newer than itself, i.e. for the faster end; and a link running
# below the one capability storpath can read is running slow, whatever the other end is.
# "No expectation" would hide exactly that. These tests fail if `_min` changes its mind.

def _unreadable(b, address, attribute, text="Unknown"):
    b.write(f"{b.nodes[address].path}/{attribute}", text)


@pytest.mark.parametrize("unreadable_end", ["0000:00:01.0", "0000:01:00.0"])
def test_unreadable_speed_on_one_end_expects_the_other_ends_capability(b, unreadable_end):
    b.root_port(b.host, "0000:00:01.0", speed=16.0, width=4)
    _drive(b, "0000:00:01.0", "0000:01:00.0", 16.0, 4, cur_speed=8.0)
    _unreadable(b, unreadable_end, "max_link_speed")
    links = _analyse(b)
    for end in ("0000:00:01.0", "0000:01:00.0"):
        assert links[end].speed.expected == 16e9, end
    drive = links["0000:01:00.0"]
    assert drive.speed_below_expected  # 8 GT/s below the 16 GT/s one end is known to do
    assert drive.expected_bandwidth == pytest.approx(7.877e9, rel=1e-3)


@pytest.mark.parametrize("unreadable_end", ["0000:00:01.0", "0000:01:00.0"])
def test_unreadable_width_on_one_end_expects_the_other_ends_capability(b, unreadable_end):
    b.root_port(b.host, "0000:00:01.0", speed=16.0, width=4)
    _drive(b, "0000:00:01.0", "0000:01:00.0", 16.0, 4, cur_width=2)
    _unreadable(b, unreadable_end, "max_link_width", "garbage")
    links = _analyse(b)
    assert links["0000:00:01.0"].expected_width == links["0000:01:00.0"].expected_width == 4
    assert links["0000:01:00.0"].width_below_expected


def test_unreadable_capability_on_both_ends_expects_nothing(b):
    b.root_port(b.host, "0000:00:01.0", speed=16.0, width=4)
    _drive(b, "0000:00:01.0", "0000:01:00.0", 16.0, 4, cur_speed=8.0)
    for end in ("0000:00:01.0", "0000:01:00.0"):
        _unreadable(b, end, "max_link_speed")
    drive = _analyse(b)["0000:01:00.0"]
    assert drive.speed.expected is None and drive.expected_bandwidth is None
    assert not drive.speed_below_expected and not drive.placement_speed_limited
