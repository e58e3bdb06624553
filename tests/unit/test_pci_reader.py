"""The PCI reader on small trees, including broken and vanishing devices."""

import os
import shutil

from storpath.readers.pci import PciReader, parse_aer_total, parse_port_type
from storpath.base.roots import Roots
from tests.fixtures.sysfs_builder import MachineBuilder, config_space
from tests.snapshots import pci_tree


def _tree(tmp_path, **options):
    b = MachineBuilder(str(tmp_path), **options)
    host = b.host_bridge("0000:00")
    b.root_port(host, "0000:00:01.1", speed=16.0, width=4)
    b.nvme("0000:00:01.1", "0000:01:00.0", model="M", serial="S1", firmware="F", vendor=0x1987, device=0x5018,
           speed=16.0, width=4)
    return b


def test_port_type_from_config_space():
    cfg = config_space(0x1022, 0x1483, 0x060400, "root_port", 16.0, 4, 16.0, 4)
    assert parse_port_type(cfg) == "root_port"
    assert parse_port_type(config_space(1, 2, 0x010802, "endpoint", 16.0, 4, 16.0, 4)) == "endpoint"
    # An unprivileged read gets 64 bytes: no capability to see.
    assert parse_port_type(cfg[:64]) is None
    assert parse_port_type(b"") is None
    # A capability list that loops must not hang.
    looping = bytearray(cfg)
    looping[0x40:0x42] = bytes([0x01, 0x40])
    looping[0x34] = 0x40
    assert parse_port_type(bytes(looping)) is None


def test_aer_total_line():
    assert parse_aer_total("RxErr 3\nBadTLP 1\nTOTAL_ERR_COR 4\n") == 4
    assert parse_aer_total("TOTAL_ERR_FATAL 0") == 0
    assert parse_aer_total("garbage") is None
    assert parse_aer_total("TOTAL_ERR_COR x") is None
    assert parse_aer_total(None) is None


def test_reads_devices_and_types(tmp_path):
    _tree(tmp_path)
    devices = {d.address: d for d in pci_tree(Roots(sysfs=str(tmp_path / "sys")))}
    assert devices["0000:00:01.1"].port_type == "root_port"
    assert devices["0000:01:00.0"].port_type == "endpoint"
    assert devices["0000:01:00.0"].static.parent == "0000:00:01.1"
    assert devices["0000:01:00.0"].current_link_speed == 16e9
    assert devices["0000:01:00.0"].driver == "nvme"
    assert devices["0000:01:00.0"].aer_totals == {"correctable": 0, "nonfatal": 0, "fatal": 0}


def test_topology_fallback_without_config_space(tmp_path):
    b = MachineBuilder(str(tmp_path), config_bytes=64)
    host = b.host_bridge("0000:00")
    b.root_port(host, "0000:00:01.0", speed=8.0, width=8)
    b.attach("0000:00:01.0", 8.0, 8)
    b.switch("0000:00:01.0", "0000:01:00.0", ["0000:02:00.0"], speed=8.0, up_width=8, down_width=4)
    b.nvme("0000:02:00.0", "0000:03:00.0", model="M", serial="S", firmware="F", vendor=1, device=2,
           speed=8.0, width=4)
    types = {d.address: d.port_type for d in pci_tree(Roots(sysfs=str(tmp_path / "sys")))}
    assert types == {"0000:00:01.0": "root_port", "0000:01:00.0": "upstream_port", "0000:02:00.0": "downstream_port",
                     "0000:03:00.0": "endpoint"}


def test_unknown_and_broken_values_are_left_out_and_returned_as_problems(tmp_path):
    b = _tree(tmp_path)
    b.set_attr("0000:01:00.0", "current_link_speed", "Unknown")
    b.set_attr("0000:01:00.0", "current_link_width", "255")
    b.set_attr("0000:01:00.0", "aer_dev_fatal", "not a counter file")
    reader = PciReader(Roots(sysfs=str(tmp_path / "sys")))
    devices, problems = reader.read()
    first = {d.address: d for d in devices}["0000:01:00.0"]
    assert first.current_link_speed is None and first.current_link_width is None
    assert "fatal" not in first.aer_totals
    assert first.static.max_link_speed == 16e9
    attributes = sorted(dict(p.fields)["attribute"] for p in problems)
    assert attributes == ["current_link_speed", "current_link_width"], problems
    # Every read says so again: the snapshot step logs each problem once (test_snapshot).
    assert reader.read()[1] == problems


def test_missing_files_and_vanished_devices(tmp_path):
    b = _tree(tmp_path)
    root = Roots(sysfs=str(tmp_path / "sys"))
    os.remove(os.path.join(b.sys, b.nodes["0000:01:00.0"].path, "max_link_width"))
    reader = PciReader(root)
    device = {d.address: d for d in reader.read()[0]}["0000:01:00.0"]
    assert device.static.max_link_width is None and device.static.max_link_speed == 16e9
    # The device disappears (hot removal): its symlink dangles, it is skipped.
    shutil.rmtree(os.path.join(b.sys, b.nodes["0000:01:00.0"].path))
    assert [d.address for d in reader.read()[0]] == ["0000:00:01.1"]


def test_dynamic_values_seen_on_next_read_and_replacement_refreshes_cache(tmp_path):
    b = _tree(tmp_path)
    reader = PciReader(Roots(sysfs=str(tmp_path / "sys")))
    assert {d.address: d for d in reader.read()[0]}["0000:01:00.0"].current_link_width == 4
    b.set_link("0000:01:00.0", cur_width=2)
    b.set_aer("0000:01:00.0", "correctable", 7)
    device = {d.address: d for d in reader.read()[0]}["0000:01:00.0"]
    assert device.current_link_width == 2 and device.aer_totals["correctable"] == 7
    # A different drive appears at the same address: the kernel removes the device with
    # its bus symlink and adds the new one with a new symlink (a new sysfs node).
    path = os.path.join(b.sys, b.nodes["0000:01:00.0"].path)
    moved = path + ".old"
    os.rename(path, moved)
    shutil.copytree(moved, path, symlinks=True)
    shutil.rmtree(moved)
    link = os.path.join(b.sys, "bus", "pci", "devices", "0000:01:00.0")
    os.symlink(os.readlink(link), link + ".new")
    os.replace(link + ".new", link)
    b.set_attr("0000:01:00.0", "max_link_speed", "8.0 GT/s PCIe")
    b.set_attr("0000:01:00.0", "device", "0xa808")
    device = {d.address: d for d in reader.read()[0]}["0000:01:00.0"]
    assert device.static.max_link_speed == 8e9 and device.static.device_id == "0xa808"


def _open_fds():
    return len(os.listdir("/proc/self/fd"))


def test_a_long_lived_reader_follows_changes_and_removal_and_holds_no_file(tmp_path):
    b = _tree(tmp_path)
    roots = Roots(sysfs=str(tmp_path / "sys"))
    kept = PciReader(roots)
    fds_before = _open_fds()

    def facts(reader):
        return [(d.address, d.driver, d.current_link_speed, d.current_link_width, d.aer_totals)
                for d in reader.read()[0]]

    assert facts(kept) == facts(PciReader(roots))
    b.set_link("0000:01:00.0", cur_width=1)
    b.set_aer("0000:01:00.0", "fatal", 2)
    changed = facts(kept)
    assert changed == facts(PciReader(roots)) and ("0000:01:00.0", 1) in [(f[0], f[3]) for f in changed]
    # Hot removal: the device goes from the read, and with it its static record.
    shutil.rmtree(os.path.join(b.sys, b.nodes["0000:01:00.0"].path))
    os.unlink(os.path.join(b.sys, "bus", "pci", "devices", "0000:01:00.0"))
    assert facts(kept) == facts(PciReader(roots)) and "0000:01:00.0" not in [f[0] for f in facts(kept)]
    assert _open_fds() == fds_before


def test_parse_static_needs_no_filesystem():
    from storpath.readers.pci import parse_static

    texts = {"class": "0x010802", "vendor": "0x144d", "device": "0xa80a", "subsystem_vendor": "0x144d",
             "subsystem_device": "0xa801", "numa_node": "bogus", "max_link_speed": "16.0 GT/s PCIe",
             "max_link_width": "4"}
    static, problems = parse_static("0000:01:00.0", "/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0", texts,
                                    True, None, (("correctable", "aer_dev_correctable"),))
    assert (static.parent, static.class_code, static.vendor_id, static.max_link_speed, static.max_link_width) == \
        ("0000:00:01.1", 0x010802, "0x144d", 16e9, 4)
    assert static.numa_node is None and problems == [("numa_node", "unparsable 'bogus'")]


