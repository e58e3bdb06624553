"""A Target Link Speed set below both ends' capability (Link Control 2, PCIe Base Spec
7.5.3.19) is a deliberate cap, told from a fault and named by its cause: the kernel's PCIe
bandwidth controller (its thermal cooling device's statistics,
Documentation/ABI/testing/sysfs-class-thermal) or something sysfs cannot name."""

from storpath.analysis.pcie import analyse
from storpath.base.roots import Roots
from storpath.collectors.base import Context
from storpath.collectors.pcie import PcieCollector
from storpath.readers.pci import PciReader, parse_target_link_speed
from storpath.readers.pcie_cooling import LinkCooling, parse_time_in_state
from tests.fixtures import machines
from tests.fixtures.sysfs_builder import MachineBuilder, config_space
from tests.snapshots import collect, pci_tree

MACHINE = "desktop-z690-single-socket"
PORT, DRIVE = "0000:00:06.0", "0000:02:00.0"


def _roots(tmp_path, variant):
    machines.load(MACHINE).build(str(tmp_path), variant)
    return Roots(sysfs=str(tmp_path / "sys"), procfs=str(tmp_path / "proc"))


def _links(roots):
    return analyse(pci_tree(roots))


def test_target_link_speed_from_link_control_2():
    cfg = bytearray(config_space(0x8086, 0x464d, 0x060400, "root_port", 16.0, 4, 8.0, 4))
    assert parse_target_link_speed(bytes(cfg)) is None  # 0 is reserved: unknown, not a guess
    for code, speed in ((1, 2.5e9), (3, 8e9), (4, 16e9), (6, 64e9)):
        cfg[0x70 + 0x30] = 0xF0 | code  # the other bits of Link Control 2 do not count
        assert parse_target_link_speed(bytes(cfg)) == speed
    cfg[0xA0] = 0x07
    assert parse_target_link_speed(bytes(cfg)) is None
    assert parse_target_link_speed(bytes(cfg[:64])) is None  # an unprivileged read
    assert parse_target_link_speed(bytes(cfg[:0xA1])) is None  # cut inside Link Control 2


def test_cooling_statistics_not_cur_state_say_whether_it_changed():
    # A Gen3 drive below a Gen5 port: state 2 from the port's own maximum, nothing changed.
    assert not LinkCooling("0000:00:01.0", 2, 4, 0, ((0, 0), (1, 0), (2, 9000))).changed
    assert not LinkCooling("0000:00:01.0", 2, 4, None, ()).changed  # no statistics: not proof
    assert LinkCooling("0000:00:01.0", 1, 3, 1, ()).changed
    assert LinkCooling("0000:00:01.0", 1, 3, 0, ((0, 500), (1, 10))).changed  # counts reset, time left
    assert parse_time_in_state("state0 12\nstate1 3\nbogus\nstateX 1\n") == ((0, 12), (1, 3))


def test_capped_by_a_tool_is_info_with_an_unknown_cause(tmp_path):
    link = _links(_roots(tmp_path, "capped-by-tool"))[DRIVE]
    assert (link.capped, link.cap_cause, link.speed_below_expected) == (True, "unknown", False)
    assert link.target_speed == 8e9


def test_capped_by_the_bandwidth_controller(tmp_path):
    links = _links(_roots(tmp_path, "capped-thermal"))
    assert (links[DRIVE].capped, links[DRIVE].cap_cause) == (True, "bandwidth_controller")
    assert (links[PORT].capped, links[PORT].cap_cause) == (True, "bandwidth_controller")


def test_below_its_own_target_is_still_a_fault(tmp_path):
    link = _links(_roots(tmp_path, "below-target"))[DRIVE]
    assert (link.capped, link.speed_below_expected, link.target_speed) == (False, True, 16e9)


def test_unprivileged_the_target_is_unknown_and_the_verdict_as_before(tmp_path):
    b = MachineBuilder(str(tmp_path), config_bytes=64)
    machines.load(MACHINE).modules[0].build(b, "capped-by-tool")
    b.finish()
    link = analyse(pci_tree(Roots(sysfs=str(tmp_path / "sys"))))[DRIVE]
    assert (link.capped, link.speed_below_expected, link.target_speed) == (False, True, None)


def test_target_is_read_again_when_it_changes(tmp_path):
    b = MachineBuilder(str(tmp_path))
    machines.load(MACHINE).modules[0].build(b, "below-target")
    b.finish()
    reader = PciReader(Roots(sysfs=str(tmp_path / "sys")))
    devices, _ = reader.read()
    assert analyse(devices)[DRIVE].speed_below_expected
    b.set_target_speed(PORT, 8.0)  # setpci on the running host; the device instance is the same
    devices, _ = reader.read()
    assert analyse(devices)[DRIVE].capped


def test_healthy_links_read_no_config_and_no_cooling_device(tmp_path):
    roots = _roots(tmp_path, "healthy")
    devices = {d.address: d for d in pci_tree(roots)}
    assert devices[DRIVE].target_link_speed is None and devices[PORT].link_cooling is None


def _rows(roots, name):
    families = {f.name: f for f in collect(PcieCollector(Context(roots=roots)))}
    family = families.get(name)
    return {} if family is None else {tuple(sorted(s.labels.items())): s.value for s in family.samples}


def test_exported_target_and_cause(tmp_path):
    roots = _roots(tmp_path, "capped-thermal")
    capped = _rows(roots, "storpath_pcie_link_capped")
    assert capped == {(("address", DRIVE), ("cause", "bandwidth_controller")): 1,
                      (("address", PORT), ("cause", "bandwidth_controller")): 1}
    target = _rows(roots, "storpath_pcie_target_link_speed_transfers_per_second")
    assert target[(("address", DRIVE),)] == 8e9
