"""A Target Link Speed set below both ends' capability (Link Control 2, PCIe Base Spec
7.5.3.19) is a deliberate cap, told from a fault and named by its cause: the kernel's PCIe
bandwidth controller (its thermal cooling device's statistics,
Documentation/ABI/testing/sysfs-class-thermal) or something sysfs cannot name."""

import threading

import pytest

from storpath.analysis.pcie import analyse
from storpath.base import privhelper
from storpath.commands import helper
from storpath.scrape.slow import PcieTargets
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


# ---- without CAP_SYS_ADMIN: the target read by `storpath helper` -------------------------------

def _two_trees(tmp_path, variant):
    """The machine as root reads it (256 bytes of config space) and as an unprivileged process
    does (the kernel gives it 64)."""
    roots = {}
    for name, size in (("root", 256), ("unprivileged", 64)):
        b = MachineBuilder(str(tmp_path / name), config_bytes=size)
        machines.load(MACHINE).modules[0].build(b, variant)
        b.finish()
        roots[name] = Roots(sysfs=str(tmp_path / name / "sys"), procfs=str(tmp_path / name / "proc"))
    return roots


@pytest.fixture
def helper_of(tmp_path):
    """helper_of(sysfs) -> the socket of a `storpath helper` reading config space under `sysfs`."""
    started = []

    def start(sysfs):
        path = str(tmp_path / f"helper{len(started)}.sock")
        serving = helper.Helper(helper.listening_socket(path), sysfs=sysfs)
        thread = threading.Thread(target=serving.serve_forever, daemon=True)
        thread.start()
        started.append((serving, thread))
        return path

    yield start
    privhelper.use(None)
    for serving, thread in started:
        serving.stop()
        thread.join(5)
        serving.sock.close()


def test_a_serve_without_capabilities_gets_the_target_from_the_helper(tmp_path, helper_of):
    roots = _two_trees(tmp_path, "capped-by-tool")
    privhelper.use(helper_of(roots["root"].sysfs))
    slow = PcieTargets(roots["unprivileged"], PcieCollector.config_defaults)
    assert slow.wanted()
    devices = pci_tree(roots["unprivileged"])
    assert analyse(devices)[DRIVE].speed_below_expected  # its own read: 64 bytes, no target
    targets, problems = slow.read(None, devices)
    assert targets == {PORT: 8e9} and list(problems) == []  # the tool set the port's (the others: none set)
    scraped = pci_tree(roots["unprivileged"])  # the next scrape: given the pass's targets, asks nothing
    assert slow.scraped(scraped) is None
    link = analyse(scraped)[DRIVE]
    assert (link.capped, link.cap_cause, link.speed_below_expected, link.target_speed) == (True, "unknown", False, 8e9)


def test_a_link_newly_below_its_maximum_has_the_pass_run_early_and_a_dead_helper_is_said(tmp_path, helper_of):
    roots = _two_trees(tmp_path, "healthy")
    privhelper.use(helper_of(roots["root"].sysfs))
    slow = PcieTargets(roots["unprivileged"], PcieCollector.config_defaults)
    healthy = pci_tree(roots["unprivileged"])
    seen = slow.seen({}, healthy)
    assert not slow.stale(seen, slow.changed(healthy))
    capped = pci_tree(_two_trees(tmp_path / "later", "capped-by-tool")["unprivileged"])
    assert slow.stale(seen, slow.changed(capped))  # a link dropped: asked at once, not in a minute
    privhelper.use(str(tmp_path / "gone.sock"))
    targets, problems = slow.read(None, capped)
    assert targets == {} and len(problems) == 1
    assert "Target Link Speed unknown" in problems[0].message
    assert {PORT, DRIVE} <= set(dict(problems[0].fields)["addresses"].split(","))
    assert "cannot be asked pci-config" in dict(problems[0].fields)["reason"]


def test_without_a_helper_there_is_no_such_pass(tmp_path):
    privhelper.use(None)
    assert not PcieTargets(_roots(tmp_path, "healthy"), PcieCollector.config_defaults).wanted()
