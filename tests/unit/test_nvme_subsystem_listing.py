"""The NVMe subsystem reader keeps each subsystem's listing while /sys/class/nvme and the
NVMe disks of /sys/class/block are unchanged (readers/nvme_subsystem.py, docs/performance.md
"State kept on the scrape path"): a long-running reader reads what a fresh one reads after
every change the kernel makes, and lists no subsystem folder while nothing changed.

The layout is the kernel's (Documentation/ABI/testing/sysfs-class-nvme; drivers/nvme/host/
core.c, nvme_init_subsystem: a link per controller in the subsystem's folder, made after the
controller's device; multipath.c: the head disk nvmeXnY is a child of the subsystem device)."""

from __future__ import annotations

import os

from storpath.base.roots import Roots
from storpath.readers import nvme_subsystem
from storpath.readers.nvme_subsystem import NvmeSubsystemReader

SUBSYS = "sys/devices/virtual/nvme-subsystem"


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(f"{text}\n")


def link(root, target, rel):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    os.symlink(os.path.relpath(os.path.join(root, target), os.path.dirname(path)), path)


def controller(root, index, address, state="live"):
    """A PCIe controller's device and its /sys/class/nvme link (not yet in a subsystem)."""
    device = f"sys/devices/pci0000:00/{address}/nvme/nvme{index}"
    for attr, text in (("state", state), ("transport", "pcie"), ("address", address), ("numa_node", "0")):
        write(root, f"{device}/{attr}", text)
    link(root, device, f"sys/class/nvme/nvme{index}")
    return device


def subsystem(root, index):
    folder = f"{SUBSYS}/nvme-subsys{index}"
    write(root, f"{folder}/subsysnqn", f"nqn.2014.08.org.nvmexpress:144d144dBENCH{index:04d}")
    write(root, f"{folder}/model", "Local NVMe")
    write(root, f"{folder}/serial", f"BENCH{index:04d}")
    link(root, folder, f"sys/class/nvme-subsystem/nvme-subsys{index}")
    os.makedirs(os.path.join(root, "sys/class/block"), exist_ok=True)
    return folder


def local_host(root, drives=3):
    for i in range(drives):
        device = controller(root, i, f"0000:0{i + 1}:00.0")
        link(root, device, f"{subsystem(root, i)}/nvme{i}")


def gone(root, rel):
    """Removed from the tree. sysfs gives every new node a fresh inode number (the readers'
    instance caches rest on it); a disk filesystem reuses a freed one, so what is removed
    here is moved aside, keeping its inodes taken."""
    os.makedirs(os.path.join(root, "removed"), exist_ok=True)
    os.rename(os.path.join(root, rel), os.path.join(root, "removed", str(len(os.listdir(os.path.join(root, "removed"))))))


def read(root, reader=None):
    subsystems, problems = (reader or NvmeSubsystemReader(Roots(sysfs=f"{root}/sys"))).read()
    return subsystems, [p.message for p in problems]


def test_a_long_running_reader_reads_what_a_fresh_one_reads(tmp_path):
    root = str(tmp_path)
    local_host(root)
    kept = NvmeSubsystemReader(Roots(sysfs=f"{root}/sys"))

    def same():
        got = read(root, kept)
        assert got == read(root)
        return {s.name: s for s in got[0]}

    assert len(same()) == 3 and same()["nvme-subsys0"].paths[0].state == "live"
    # A second controller of subsys0: its device first, then (identify done) its link.
    second = controller(root, 3, "0000:04:00.0")
    assert len(same()["nvme-subsys0"].paths) == 1
    assert len(same()["nvme-subsys0"].paths) == 1  # still not linked: the folder is listed again
    link(root, second, f"{SUBSYS}/nvme-subsys0/nvme3")
    assert [p.controller for p in same()["nvme-subsys0"].paths] == ["nvme0", "nvme3"]
    # A head disk (native multipath): the subsystem's child and its /sys/class/block link together.
    os.makedirs(os.path.join(root, f"{SUBSYS}/nvme-subsys0/nvme0n1"))
    link(root, f"{SUBSYS}/nvme-subsys0/nvme0n1", "sys/class/block/nvme0n1")
    assert same()["nvme-subsys0"].namespaces == ("nvme0n1",)
    # The controller removed: its class link first, the subsystem's link a moment later.
    gone(root, "sys/class/nvme/nvme3")
    gone(root, "sys/devices/pci0000:00/0000:04:00.0")
    assert [p.state for p in same()["nvme-subsys0"].paths] == ["live", "unknown"]
    assert [p.state for p in same()["nvme-subsys0"].paths] == ["live", "unknown"]
    gone(root, f"{SUBSYS}/nvme-subsys0/nvme3")
    assert [p.controller for p in same()["nvme-subsys0"].paths] == ["nvme0"]
    # A state change is read every time.
    write(root, "sys/devices/pci0000:00/0000:02:00.0/nvme/nvme1/state", "resetting")
    assert same()["nvme-subsys1"].paths[0].state == "resetting"
    # A subsystem replaced under the same name (a new instance, same controller name).
    gone(root, "sys/class/nvme-subsystem/nvme-subsys2")
    gone(root, f"{SUBSYS}/nvme-subsys2")
    gone(root, "sys/class/nvme/nvme2")
    device = controller(root, 2, "0000:09:00.0")
    link(root, device, f"{subsystem(root, 2)}/nvme2")
    assert same()["nvme-subsys2"].paths[0].address == "0000:09:00.0"


def test_a_fabrics_path_is_read_whole_every_time(tmp_path):
    """One path over TCP: its ANA state (a path disk's ana_state) is read every time."""
    root = str(tmp_path)
    local_host(root, drives=1)
    device = controller(root, 5, "traddr=10.0.0.5,trsvcid=4420")
    write(root, f"{device}/transport", "tcp")
    write(root, f"{device}/nvme1c5n1/ana_state", "optimized")
    link(root, device, f"{subsystem(root, 1)}/nvme5")
    kept = NvmeSubsystemReader(Roots(sysfs=f"{root}/sys"))
    for state in ("optimized", "inaccessible", "inaccessible", "optimized"):
        write(root, f"{device}/nvme1c5n1/ana_state", state)
        got = read(root, kept)
        assert got == read(root)
        assert [n.ana_state for n in got[0][1].paths[0].namespace_paths] == [state]


def test_no_subsystem_folder_is_listed_while_nothing_changed(tmp_path, monkeypatch):
    root = str(tmp_path)
    local_host(root)
    reader = NvmeSubsystemReader(Roots(sysfs=f"{root}/sys"))
    first = read(root, reader)
    listed = []
    real = nvme_subsystem.list_entries
    monkeypatch.setattr(nvme_subsystem, "list_entries", lambda path, *a: listed.append(path) or real(path, *a))
    assert read(root, reader) == first
    assert not [path for path in listed if "/nvme-subsystem/" in path]
    controller(root, 7, "0000:07:00.0")  # a new controller: every folder is listed again
    read(root, reader)
    assert len([path for path in listed if "/nvme-subsystem/" in path]) == 3


# ---- the local drives' states read on their own schedule (storpath serve) -----------------

def test_controller_states_reads_every_controller_once_per_pass(tmp_path):
    """ControllerStates: one listing of /sys/class/nvme and each controller's `state`, as the
    kernel printed it; one whose state cannot be read is None; a controller replaced under
    its name (a new instance) is read at its new place."""
    root = str(tmp_path)
    local_host(root)
    fabrics = controller(root, 5, "traddr=10.0.0.5,trsvcid=4420", state="connecting")
    states = nvme_subsystem.ControllerStates(Roots(sysfs=f"{root}/sys"))
    assert states.read() == {"nvme0": b"live\n", "nvme1": b"live\n", "nvme2": b"live\n", "nvme5": b"connecting\n"}
    os.remove(os.path.join(root, fabrics, "state"))
    gone(root, "sys/class/nvme/nvme2")
    gone(root, "sys/devices/pci0000:00/0000:03:00.0")
    controller(root, 2, "0000:0a:00.0", state="resetting")
    assert states.read() == {"nvme0": b"live\n", "nvme1": b"live\n", "nvme2": b"resetting\n", "nvme5": None}
    assert nvme_subsystem.ControllerStates(Roots(sysfs=f"{tmp_path}/nothing")).read() == {}


def test_a_local_drive_kept_reads_nothing_and_follows_the_states_pass(tmp_path, monkeypatch):
    """Given the states' last pass, a scrape reads no local drive's state: a controller that
    went resetting shows once a pass read it (then read again, now, with the subsystem), and
    a controller the pass has not seen yet keeps the record read when it appeared."""
    root = str(tmp_path)
    local_host(root)
    roots = Roots(sysfs=f"{root}/sys")
    reader, states = NvmeSubsystemReader(roots), nvme_subsystem.ControllerStates(roots)
    first = reader.read(None, states.read())  # a fresh reader: every subsystem read whole, states included
    assert first == NvmeSubsystemReader(roots).read()
    opened = []
    real = nvme_subsystem.read_many
    monkeypatch.setattr(nvme_subsystem, "read_many", lambda paths, *a: opened.extend(paths) or real(paths, *a))
    passed = states.read()
    opened.clear()
    write(root, "sys/devices/pci0000:00/0000:02:00.0/nvme/nvme1/state", "resetting")
    assert reader.read(None, passed) == first and opened == []  # nothing read: the pass said live
    passed = states.read()
    subsystems, problems = reader.read(None, passed)
    assert [s.paths[0].state for s in subsystems] == ["live", "resetting", "live"] and problems == []
    assert (subsystems, problems) == NvmeSubsystemReader(roots).read()
    assert reader.read(None, passed) == (subsystems, problems)  # kept again, as resetting
    # A drive that appeared after the pass: read whole when it appears, then kept.
    device = controller(root, 3, "0000:04:00.0")
    link(root, device, f"{subsystem(root, 3)}/nvme3")
    assert "nvme3" not in passed
    write(root, f"{device}/state", "dead")
    grown = reader.read(None, passed)
    assert grown == NvmeSubsystemReader(roots).read() and grown[0][3].paths[0].state == "dead"
    write(root, f"{device}/state", "live")
    assert reader.read(None, passed)[0][3].paths[0].state == "dead"  # until a pass sees it
    assert reader.read(None, states.read())[0][3].paths[0].state == "live"
    # Without a pass (None), every kept local drive's state is read each call.
    write(root, "sys/devices/pci0000:00/0000:01:00.0/nvme/nvme0/state", "dead")
    assert reader.read()[0][0].paths[0].state == "dead"
