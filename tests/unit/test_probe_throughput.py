"""What the PCIe path allows a device or an md array to read: pure tree arithmetic on
literal hops, then whole fixture machines (sysfs trees) through the real readers."""

from __future__ import annotations

import pytest

from storpath.analysis import pcie
from storpath.analysis.throughput import MdShape, expected_read_bandwidth, shared_tree_bandwidth
from storpath.probes import devices
from storpath.readers.block import read_block_devices
from storpath.roots import Roots
from storpath.units import pcie_link_bytes_per_second
from tests.pcitree import read_pci_tree
from tests.fixtures import machines
from tests.fixtures.builders_probes import add_md, add_partition

GEN4_X4 = pcie_link_bytes_per_second(16e9, 4)  # 7.877 GB/s
GEN3_X4 = pcie_link_bytes_per_second(8e9, 4)  # 3.938 GB/s
GEN3_X8 = pcie_link_bytes_per_second(8e9, 8)  # 7.877 GB/s


# ---- the tree, on literal hops (device end address, bandwidth), nearest first ----------

def test_one_device_gets_its_slowest_hop():
    total, limits = shared_tree_bandwidth([[("drive", 8.0), ("uplink", 5.0), ("top", 20.0)]])
    assert total == 5.0
    assert limits == ("uplink",)


def test_devices_on_separate_ports_add_up():
    total, limits = shared_tree_bandwidth([[("a", 4.0)], [("b", 4.0)], [("c", 3.0)]])
    assert total == 11.0
    assert set(limits) == {"a", "b", "c"}


def test_shared_uplink_caps_its_devices_only():
    paths = [[("d1", 4.0), ("up", 6.0)], [("d2", 4.0), ("up", 6.0)], [("d3", 4.0)]]
    total, limits = shared_tree_bandwidth(paths)
    assert total == 6.0 + 4.0
    assert set(limits) == {"up", "d3"}


def test_uplink_faster_than_its_devices_is_not_the_limit():
    paths = [[("d1", 2.0), ("up", 8.0)], [("d2", 2.0), ("up", 8.0)]]
    assert shared_tree_bandwidth(paths) == (4.0, ("d1", "d2"))


def test_two_namespaces_of_one_drive_share_its_link():
    assert shared_tree_bandwidth([[("drive", 7.0)], [("drive", 7.0)]])[0] == 7.0


# ---- fixture machines ------------------------------------------------------------------

def _facts(root: str):
    roots = Roots(sysfs=f"{root}/sys", procfs=f"{root}/proc")
    pci_devices = read_pci_tree(roots)
    block = {d.name: d for d in read_block_devices(roots)}
    return roots, block, {d.address: d for d in pci_devices}, pcie.analyse(pci_devices)


def _expect(root: str, device: str):
    roots, block, pci, links = _facts(root)
    return expected_read_bandwidth(device, block, pci, links, devices.read_md_arrays(roots))


def _nvme_disks(root: str):
    _, block, _, _ = _facts(root)
    return sorted(name for name, dev in block.items() if name.startswith("nvme"))


@pytest.fixture
def firecuda(tmp_path):
    def build(variant: str = "healthy") -> str:
        root = str(tmp_path / variant)
        builder = machines.load("am4-x570-firecuda").build(root, variant)
        add_md(builder, "md0", "raid0", _nvme_disks(root))
        return root
    return build


def test_firecuda_single_drive_gets_its_gen4_x4_link(firecuda):
    root = firecuda()
    expectation = _expect(root, "nvme0n1")
    assert expectation.bytes_per_second == pytest.approx(GEN4_X4)
    assert expectation.bytes_per_second == pytest.approx(7.877e9, rel=1e-3)


def test_firecuda_raid0_of_four_gen4_x4_drives_is_about_31_5_gb_per_second(firecuda):
    root = firecuda()
    expectation = _expect(root, "md0")
    assert len(expectation.members) == 4
    assert expectation.bytes_per_second == pytest.approx(4 * GEN4_X4)
    assert expectation.bytes_per_second == pytest.approx(31.5e9, rel=2e-3)
    assert sorted(expectation.limited_by) == ["0000:04:00.0", "0000:05:00.0", "0000:06:00.0", "0000:07:00.0"]


def test_firecuda_drive_in_gen3_port_lowers_the_array(firecuda):
    expectation = _expect(firecuda("gen3-port"), "md0")
    assert expectation.bytes_per_second == pytest.approx(3 * GEN4_X4 + GEN3_X4)


def test_firecuda_link_trained_low_does_not_lower_the_expectation(firecuda):
    # A fault must show as a probe below expectation, not as a lower expectation.
    for variant in ("x2-link", "gen3-trained"):
        assert _expect(firecuda(variant), "md0").bytes_per_second == pytest.approx(4 * GEN4_X4), variant


@pytest.fixture
def switches(tmp_path):
    def build(variant: str = "healthy", arrays=None) -> str:
        root = str(tmp_path / variant)
        builder = machines.load("intel-r2224wft-switches").build(root, variant)
        disks = _nvme_disks(root)
        for index, (name, level, picked) in enumerate(arrays or []):
            add_md(builder, name, level, [disks[i] for i in picked], minor=index)
        return root
    return build


def test_switches_four_drives_behind_one_x8_uplink_are_capped_by_it(switches):
    root = switches(arrays=[("md0", "raid0", [0, 1, 2, 3])])
    expectation = _expect(root, "md0")
    # Four Gen3 x4 drives (15.75 GB/s of drive links) share one Gen3 x8 uplink.
    assert expectation.bytes_per_second == pytest.approx(GEN3_X8)
    assert expectation.bytes_per_second == pytest.approx(7.88e9, rel=1e-3)
    assert expectation.limited_by == ("0000:3b:00.0",)  # the switch's upstream port


def test_switches_array_across_both_adapters_gets_both_uplinks(switches):
    root = switches(arrays=[("md0", "raid0", list(range(8)))])
    expectation = _expect(root, "md0")
    assert expectation.bytes_per_second == pytest.approx(2 * GEN3_X8)
    assert sorted(expectation.limited_by) == ["0000:3b:00.0", "0000:d8:00.0"]


def test_switches_two_drives_fit_under_the_uplink(switches):
    expectation = _expect(switches(arrays=[("md0", "raid0", [0, 1])]), "md0")
    assert expectation.bytes_per_second == pytest.approx(2 * GEN3_X4)


def test_switches_single_drive_behind_the_switch(switches):
    root = switches()
    assert _expect(root, _nvme_disks(root)[0]).bytes_per_second == pytest.approx(GEN3_X4)


def test_md_levels(switches):
    root = switches(arrays=[("md0", "raid1", [0, 4]), ("md1", "raid5", [0, 1, 4, 5]), ("md2", "raid10", [0, 1, 4, 5]),
                            ("md3", "raid6", [0, 1]), ("md4", "raid0", [0, 1])])
    with open(f"{root}/sys/devices/virtual/block/md4/md/level", "w") as handle:
        handle.write("multipath\n")  # a personality storpath has no rule for
    assert _expect(root, "md0").bytes_per_second == pytest.approx(GEN3_X4)  # one member serves a stream
    assert _expect(root, "md1").bytes_per_second == pytest.approx(4 * GEN3_X4 * 3 / 4)  # one in four is parity
    assert _expect(root, "md2").bytes_per_second == pytest.approx(4 * GEN3_X4)
    raid6 = _expect(root, "md3")
    assert raid6.bytes_per_second is None and "no data members" in raid6.reason
    other = _expect(root, "md4")
    assert other.bytes_per_second is None and "multipath" in other.reason


def test_md_over_partitions_counts_their_disks(tmp_path):
    root = str(tmp_path / "m")
    builder = machines.load("am4-x570-firecuda").build(root, "healthy")
    disks = _nvme_disks(root)
    parts = [add_partition(builder, disk, 1, 1000) for disk in disks[:2]]
    add_md(builder, "md5", "raid0", parts, minor=5)
    roots = Roots(sysfs=f"{root}/sys", procfs=f"{root}/proc")
    shape = devices.read_md(roots, "md5")
    assert shape == MdShape("md5", "raid0", tuple(disks[:2]))
    assert devices.whole_disk(roots, parts[0]) == disks[0]
    assert _expect(root, "md5").bytes_per_second == pytest.approx(2 * GEN4_X4)


def test_spares_carry_no_reads(tmp_path):
    root = str(tmp_path / "m")
    builder = machines.load("am4-x570-firecuda").build(root, "healthy")
    disks = _nvme_disks(root)
    add_md(builder, "md0", "raid0", disks[:2], spares=disks[2:3])
    roots = Roots(sysfs=f"{root}/sys", procfs=f"{root}/proc")
    assert devices.read_md(roots, "md0").members == tuple(disks[:2])
    assert _expect(root, "md0").bytes_per_second == pytest.approx(2 * GEN4_X4)


def test_unknown_and_virtual_devices_have_no_expectation(firecuda):
    root = firecuda()
    missing = _expect(root, "nvme9n1")
    assert missing.bytes_per_second is None and "no block device" in missing.reason


def test_member_without_pci_path_gives_no_expectation():
    shape = {"md0": MdShape("md0", "raid0", ("loop0", "loop1"))}
    result = expected_read_bandwidth("md0", {}, {}, {}, shape)
    assert result.bytes_per_second is None and "loop0" in result.reason
