"""What the PCIe path allows a device or an md array to read: pure tree arithmetic on
literal hops, then whole fixture machines (sysfs trees) through the real readers."""

from __future__ import annotations

import pytest

from storpath.analysis import pcie
from storpath.analysis.throughput import MdShape, expected_read_bandwidth, shared_tree_bandwidth
from storpath.scrape.probes import devices
from storpath.base.roots import Roots
from storpath.scrape.snapshot import take_once
from storpath.base.units import pcie_link_bytes_per_second
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
    """The parts of a snapshot a probe's expectation comes from, taken as the scrape takes them."""
    snapshot = take_once(Roots(sysfs=f"{root}/sys", procfs=f"{root}/proc"), ["pci", "pcie_expected", "blocks", "md"])
    block = {d.name: d for d in snapshot.blocks}
    links = pcie.analyse(snapshot.pci, expected=snapshot.pcie_expected)
    return snapshot, block, {d.address: d for d in snapshot.pci}, links


def _expect(root: str, device: str):
    snapshot, block, pci, links = _facts(root)
    return expected_read_bandwidth(device, block, pci, links, devices.md_shapes(snapshot.md))


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
    shape = devices.md_shapes(take_once(roots, ["md"]).md)["md5"]
    assert shape == MdShape("md5", "raid0", tuple(disks[:2]))
    assert devices.whole_disk(roots, parts[0]) == disks[0]
    assert _expect(root, "md5").bytes_per_second == pytest.approx(2 * GEN4_X4)


def test_spares_carry_no_reads(tmp_path):
    root = str(tmp_path / "m")
    builder = machines.load("am4-x570-firecuda").build(root, "healthy")
    disks = _nvme_disks(root)
    add_md(builder, "md0", "raid0", disks[:2], spares=disks[2:3])
    roots = Roots(sysfs=f"{root}/sys", procfs=f"{root}/proc")
    assert devices.md_shapes(take_once(roots, ["md"]).md)["md0"].members == tuple(disks[:2])
    assert _expect(root, "md0").bytes_per_second == pytest.approx(2 * GEN4_X4)


def test_unknown_and_virtual_devices_have_no_expectation(firecuda):
    root = firecuda()
    missing = _expect(root, "nvme9n1")
    assert missing.bytes_per_second is None and "no block device" in missing.reason


def test_member_without_pci_path_gives_no_expectation():
    shape = {"md0": MdShape("md0", "raid0", ("loop0", "loop1"))}
    result = expected_read_bandwidth("md0", {}, {}, {}, shape)
    assert result.bytes_per_second is None and "loop0" in result.reason


def test_a_probes_expectation_on_a_guest_is_the_scrapes(tmp_path, monkeypatch):
    """A KVM guest whose emulated root port carries a real Intel root port's ids (ioh3420)
    and claims Gen3 x4 above a passed-through Gen4 x4 drive trained at Gen3 x4: the scrape
    judges the link by the drive alone (device_only, emulated_port: 16 GT/s x4 expected);
    the probe's expected throughput must come from that verdict, not from an analysis of
    its own that takes the guest for bare metal (8 GT/s x4)."""
    from storpath.base.background import Scheduler
    from storpath.collectors.base import Context
    from storpath.collectors.pcie import PcieCollector
    from storpath.collectors.probes import ProbesCollector
    from storpath.report.exporter import StorpathExporter
    from tests.fixtures.sysfs_builder import MachineBuilder, Namespace

    b = MachineBuilder(str(tmp_path / "guest"))
    b.identity(sys_vendor="QEMU", product_name="Standard PC (Q35 + ICH9, 2009)", hypervisor=True)
    b.cpus(sockets=1, cores_per_socket=2, threads_per_core=1, numa_nodes=1)
    host = b.host_bridge("0000:00")
    b.root_port(host, "0000:00:02.0", speed=8.0, width=4, vendor=0x8086, device=0x3420)
    b.nvme("0000:00:02.0", "0000:01:00.0", model="Samsung SSD 980 PRO 2TB", serial="S1", firmware="1",
           vendor=0x144d, device=0xa80a, speed=16.0, width=4, cur_speed=8.0, cur_width=4,
           namespaces=[Namespace(size_bytes=1 << 40, lba_bytes=512)])
    b.set_link("0000:00:02.0", 8.0, 4)
    monkeypatch.setenv("STATE_DIRECTORY", str(tmp_path))
    full = {"probes": {"state_file": str(tmp_path / "probes.json"), "jitter": 0,
                       "targets": [{"device": "/dev/nvme0n1", "profiles": ["seqread"]}]}}
    roots = Roots(sysfs=b.sys, procfs=b.proc)
    scheduler = Scheduler()
    collectors = [PcieCollector(Context(roots=roots, scheduler=scheduler)),
                  ProbesCollector(Context(roots=roots, scheduler=scheduler, full_config=full))]
    exporter = StorpathExporter(collectors, roots)
    try:
        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
                   for family in exporter.collect(30.0) for s in family.samples}
    finally:
        exporter.close()
        collectors[1].ctx.slow.close()
    drive = (("address", "0000:01:00.0"),)
    assert samples[("storpath_pcie_expected_link_speed_transfers_per_second", drive)] == 16e9
    verdict = samples[("storpath_pcie_expected_link_bandwidth_bytes_per_second", drive)]
    assert verdict == pcie_link_bytes_per_second(16e9, 4)
    probe = samples[("storpath_probe_expected_read_bytes_per_second", (("profile", "seqread"), ("target", "/dev/nvme0n1")))]
    assert probe == verdict


def test_a_probe_locks_the_md_members_of_the_snapshot_and_reads_no_md_itself(tmp_path, monkeypatch):
    """The engine takes an array's members from the snapshot it was last given
    (refresh_expectations), never from a read of its own: with md's sysfs gone after the
    snapshot, a probe of md0 still locks md0 and its members."""
    import shutil

    from storpath.scrape.probes.config import check
    from storpath.scrape.probes.engine import ProbeEngine

    monkeypatch.setenv("STATE_DIRECTORY", str(tmp_path))
    root = str(tmp_path / "m")
    builder = machines.load("am4-x570-firecuda").build(root, "healthy")
    disks = _nvme_disks(root)
    add_md(builder, "md0", "raid0", disks[:2], minor=0)
    roots = Roots(sysfs=f"{root}/sys", procfs=f"{root}/proc")
    snapshot = take_once(roots, ["pci", "pcie_expected", "blocks", "md"])
    cfg = check({"jitter": 0, "state_file": str(tmp_path / "probes.json"), "targets": [{"device": "/dev/md0"}]})
    engine = ProbeEngine(cfg, roots)
    resolved = devices.Resolved(fio_path="/dev/md0", device="md0", disk="md0")
    assert engine._lock_keys(cfg.targets[0], resolved) == ["md0"]  # no snapshot given yet: the array alone
    engine.refresh_expectations(snapshot.pci, pcie.analyse(snapshot.pci, expected=snapshot.pcie_expected),
                                snapshot.blocks, snapshot.md)
    shutil.rmtree(f"{root}/sys/devices/virtual/block/md0/md")
    assert engine._lock_keys(cfg.targets[0], resolved) == sorted(["md0"] + disks[:2])
