"""A sleeping PCI function is never woken by storpath: its link attributes and config space
are not read (the kernel resumes a runtime-suspended device for them, or reads all-ones in
D3cold on older kernels: storpath.readers.power), its link is served as last read while
awake, and the GPU sampler leaves it alone.

The sysfs files follow Documentation/ABI/testing/sysfs-devices-power (power/runtime_status:
active, suspended, suspending, resuming, error, unsupported; power/runtime_suspended_time in
ms) and Documentation/ABI/testing/sysfs-bus-pci (power_state: D0 ... D3cold)."""

import os
from contextlib import contextmanager

import pytest

from storpath.base.roots import Roots
from storpath.readers.link_samples import read_samples
from storpath.readers.pci import PciReader
from storpath.readers.power import parse_sleep, read_sleep
from tests.fixtures.sysfs_builder import MachineBuilder

DRIVE, PORT = "0000:01:00.0", "0000:00:01.1"
# What reading would wake (or, in D3cold on an older kernel, read as all-ones).
WAKING = ("current_link_speed", "current_link_width", "max_link_speed", "max_link_width", "config")


def _tree(tmp_path, drive_power=None, port_power=None):
    b = MachineBuilder(str(tmp_path))
    host = b.host_bridge("0000:00")
    b.root_port(host, PORT, speed=16.0, width=4)
    b.nvme(PORT, DRIVE, model="M", serial="S1", firmware="F", vendor=0x1987, device=0x5018, speed=16.0, width=4)
    for address, power in ((DRIVE, drive_power), (PORT, port_power)):
        _set_power(b, address, *(power or ("active", "D0")))
    return b


def _set_power(b, address, runtime_status, power_state, suspended_ms=None):
    for name, value in (("power/runtime_status", runtime_status), ("power_state", power_state),
                        ("power/runtime_suspended_time", suspended_ms)):
        path = os.path.join(b.sys, b.nodes[address].path, name)
        if value is None:
            if os.path.exists(path):
                os.remove(path)
        else:
            b.set_attr(address, name, value)


@pytest.fixture
def recording(monkeypatch):
    """Every path os.open is asked for (what storpath's sysfs reads go through) while a block runs."""
    real_open = os.open

    @contextmanager
    def record():
        opened = []

        def spy(path, flags, *args, **kwargs):
            opened.append(os.path.realpath(path) if kwargs.get("dir_fd") is None else path)
            return real_open(path, flags, *args, **kwargs)
        monkeypatch.setattr(os, "open", spy)
        try:
            yield opened
        finally:
            monkeypatch.setattr(os, "open", real_open)
    return record


def _waking_reads(opened, b, address):
    """The opens of `address`'s files that would wake it."""
    real = os.path.realpath(os.path.join(b.sys, b.nodes[address].path))
    return sorted(p for p in opened if os.path.dirname(p) == real and os.path.basename(p) in WAKING)


@pytest.mark.parametrize("runtime_status,power_state,state", [
    ("suspended", "D3cold", "D3cold"),
    ("suspended", "D3hot", "D3hot"),
    ("suspending", None, "suspended"),  # a kernel before power_state (5.19)
    ("suspended", None, "suspended"),
    ("unsupported", "D3cold", "D3cold"),  # put there by its driver or the firmware, without runtime PM
    (None, "D3hot", "D3hot"),  # a kernel without CONFIG_PM's attributes
    ("active", "D0", None),
    ("resuming", "D3cold", None),  # being woken already: reading it costs nothing more
    ("unsupported", "D0", None),
    (None, None, None),
])
def test_sleep_from_the_two_attributes(tmp_path, runtime_status, power_state, state):
    b = _tree(tmp_path, drive_power=(runtime_status, power_state))
    assert read_sleep(os.path.join(b.sys, b.nodes[DRIVE].path)) == state
    if runtime_status != "resuming":
        assert parse_sleep(runtime_status, power_state) == state


def test_an_awake_device_costs_one_read(tmp_path, recording):
    b = _tree(tmp_path)
    path = os.path.join(b.sys, b.nodes[DRIVE].path)
    with recording() as events:
        assert read_sleep(path) is None
    assert [os.path.basename(p) for p in events] == ["runtime_status"]


def test_a_device_asleep_from_the_start_is_never_read_then_read_once_awake(tmp_path, recording):
    b = _tree(tmp_path, drive_power=("suspended", "D3cold"))
    _set_power(b, DRIVE, "suspended", "D3cold", 5250)
    reader = PciReader(Roots(sysfs=b.sys, procfs=b.proc))
    with recording() as events:
        devices, _ = reader.read()
        again, _ = reader.read()
    assert _waking_reads(events, b, DRIVE) == []
    assert _waking_reads(events, b, PORT) != []  # the port is awake: read as ever
    drive = {d.address: d for d in again}[DRIVE]
    assert drive.asleep == "D3cold" and drive.suspended_seconds == 5.25
    assert drive.current_link_speed is None and drive.current_link_width is None and drive.link_read_at is None
    assert not drive.static.complete and drive.static.max_link_speed is None
    assert drive.static.vendor_id == "0x1987" and drive.static.has_link  # what the kernel keeps is read
    # It wakes: its capability and link are read, once for the capability.
    _set_power(b, DRIVE, "active", "D0")
    with recording() as events:
        awake = {d.address: d for d in reader.read()[0]}[DRIVE]
        reader.read()
    reads = _waking_reads(events, b, DRIVE)
    assert [os.path.basename(p) for p in reads].count("config") == 1 and "current_link_speed" in str(reads)
    assert awake.asleep is None and awake.static.complete and awake.static.max_link_speed == 16e9
    assert awake.current_link_speed == 16e9 and awake.current_link_width == 4 and awake.port_type == "endpoint"


def test_a_device_that_falls_asleep_keeps_its_link_as_last_read(tmp_path, recording):
    b = _tree(tmp_path)
    b.set_link(DRIVE, cur_speed=8.0, cur_width=2)  # trained low while awake: a real fault
    reader = PciReader(Roots(sysfs=b.sys, procfs=b.proc))
    reader.read()
    last_awake = reader._last_read
    _set_power(b, DRIVE, "suspended", "D3cold", 1000)
    b.set_link(DRIVE, cur_speed=2.5, cur_width=1)  # what a read would see now (and it would wake it)
    with recording() as events:
        first, _ = reader.read()
        second, _ = reader.read()
    assert _waking_reads(events, b, DRIVE) == []
    for devices in (first, second):
        drive = {d.address: d for d in devices}[DRIVE]
        assert drive.asleep == "D3cold"
        assert (drive.current_link_speed, drive.current_link_width) == (8e9, 2)
        assert drive.link_read_at == last_awake
    _set_power(b, DRIVE, "active", "D0")
    drive = {d.address: d for d in reader.read()[0]}[DRIVE]
    assert drive.asleep is None and drive.link_read_at is None
    assert (drive.current_link_speed, drive.current_link_width) == (2.5e9, 1)


def test_a_sleeping_port_is_not_read_either(tmp_path, recording):
    b = _tree(tmp_path, drive_power=("suspended", "D3cold"), port_power=("suspended", "D3hot"))
    reader = PciReader(Roots(sysfs=b.sys, procfs=b.proc))
    with recording() as events:
        devices, _ = reader.read()
    assert _waking_reads(events, b, PORT) == [] and _waking_reads(events, b, DRIVE) == []
    assert {d.address: d.asleep for d in devices} == {PORT: "D3hot", DRIVE: "D3cold"}


def test_the_gpu_sampler_skips_a_sleeping_function(tmp_path, recording):
    b = _tree(tmp_path, drive_power=("suspended", "D3cold"))
    paths = {a: os.path.join(b.sys, b.nodes[a].path) for a in (DRIVE, PORT)}
    with recording() as events:
        samples = read_samples(paths)
    assert _waking_reads(events, b, DRIVE) == []
    assert set(samples) == {PORT}


def test_capture_reads_no_link_file_of_a_sleeping_function(tmp_path, recording):
    from storpath.readers import pci, power
    from storpath.report.capture.files import Tree
    b = _tree(tmp_path, drive_power=("suspended", "D3cold"))
    tree = Tree(b.sys)
    with recording() as events:
        for pattern in pci.CAPTURE_SYSFS + power.CAPTURE_SYSFS:
            tree.add_pattern(pattern)
    assert _waking_reads(events, b, DRIVE) == []
    assert _waking_reads(events, b, PORT) != []  # an awake one is captured as ever
    kept = [rel for rel in tree.files if rel.endswith(f"{DRIVE}/current_link_width")]
    assert kept and tree.files[kept[0]] == b"" and "sleeps" in tree.unreadable[kept[0]]
    assert [rel for rel in tree.files if rel.endswith(f"{DRIVE}/power/runtime_status")]
