"""A long-running exporter keeps a lot between scrapes: per-instance device records, held
device directories, rendered lines per device, family texts behind tokens. None of it may hide a change: after every change of a
machine, the long-running exporter must serve exactly what a freshly started one serves
on the same tree."""

import os
import re
import shutil

import pytest

from storpath.scrape import exposition
from storpath.base.background import Scheduler
from storpath.base.config import validate
from storpath.report.exporter import build_collectors, StorpathExporter
from storpath.base.roots import Roots
from tests.fixtures import machines
from tests.fixtures.builders_nvme import reformat

# Values that differ between any two scrapes whatever the caches do.
_VOLATILE = re.compile(r"^(storpath_scrape_(?:(?:collector|source)_duration_seconds\{[^}]*\}|collected_timestamp_seconds)) .*$",
                       re.M)


class _Exporter:
    """The serve command's pieces: collectors and registry, kept for all scrapes."""

    def __init__(self, roots: Roots):
        # Background tasks (NVMe Identify, zpool, SAS error counters) run when told, as a
        # started scheduler would run them on their schedule.
        self.scheduler = Scheduler()
        self.collectors = build_collectors(roots, validate({}, {}), self.scheduler)
        self.scheduler.run_all_once()
        self.registry = StorpathExporter(self.collectors)

    def scrape(self) -> str:
        families = list(self.registry.collect())
        plain = b"".join(exposition.pieces(families))
        # OpenMetrics shares the kept sample text: it must follow every change too.
        samples = [line for line in plain.decode().splitlines() if not line.startswith("#")]
        om = b"".join(exposition.pieces(families, openmetrics=True)).decode().splitlines()
        assert om[-1] == "# EOF" and [line for line in om if not line.startswith("#")] == samples
        return _VOLATILE.sub(r"\1 X", plain.decode())

    def close(self):
        self.registry.close()


def _roots(root):
    return Roots(sysfs=os.path.join(root, "sys"), procfs=os.path.join(root, "proc"), dev=os.path.join(root, "dev"),
                 captured=os.path.join(root, "captured"))


def _fresh(root) -> str:
    exporter = _Exporter(_roots(root))
    try:
        return exporter.scrape()
    finally:
        exporter.close()


def _links_into(b, path):
    """The class and bus symlinks of the device at `path` and of the devices below it."""
    for folder in ("bus/pci/devices", "class/nvme", "class/block", "block"):
        base = os.path.join(b.sys, folder)
        for name in os.listdir(base):
            link = os.path.join(base, name)
            target = os.path.realpath(link)
            if target == path or target.startswith(path + os.sep):
                yield link


def _replace_device(b, address):
    """A different device instance at the same address, as the kernel makes it: new
    directories for it and everything below it (its NVMe controller, namespaces), and
    new class and bus symlinks for each of them."""
    path = os.path.join(b.sys, b.nodes[address].path)
    links = list(_links_into(b, path))
    shutil.copytree(path, path + ".new", symlinks=True)
    shutil.rmtree(path)
    os.rename(path + ".new", path)
    for link in links:
        os.symlink(os.readlink(link), link + ".new")
        os.replace(link + ".new", link)


def _controller_state(b, controller, state):
    with open(os.path.join(os.path.realpath(os.path.join(b.sys, "class", "nvme", controller)), "state"), "w") as out:
        out.write(state + "\n")


def _unbind(b, address):
    os.unlink(os.path.join(b.sys, b.nodes[address].path, "driver"))


def _remove_device(b, address):
    """Hot removal: the device, everything below it, and their class and bus symlinks."""
    path = os.path.join(b.sys, b.nodes[address].path)
    for link in list(_links_into(b, path)):
        os.unlink(link)
    shutil.rmtree(path)


# (what, the change, whether it brings a new NVMe namespace or format: served in full once
# the Identify pass the scrape started has run, as with a running scheduler)
CHANGES = [
    ("link trains down", lambda b: b.set_link("0000:04:00.0", cur_speed=8.0, cur_width=2), False),
    ("AER counter moves", lambda b: b.set_aer("0000:04:00.0", "correctable", 3), False),
    ("AER counter moves again", lambda b: b.set_aer("0000:04:00.0", "correctable", 4), False),
    ("driver unbound", lambda b: _unbind(b, "0000:05:00.0"), False),
    ("device replaced, new max speed", lambda b: (_replace_device(b, "0000:06:00.0"),
                                                  b.set_attr("0000:06:00.0", "max_link_speed", "8.0 GT/s PCIe")), True),
    ("NVMe namespace reformatted", lambda b: reformat(b, "nvme0", 4096), True),
    # A local drive's controller state is read by its own background pass (nvme-controller-states):
    # served once that pass ran, with the subsystem read again.
    ("local NVMe controller resetting", lambda b: _controller_state(b, "nvme1", "resetting"), True),
    ("local NVMe controller live again", lambda b: _controller_state(b, "nvme1", "live"), True),
    ("drive removed", lambda b: _remove_device(b, "0000:07:00.0"), False),
]


@pytest.mark.parametrize("machine,variant", [("am4-x570-firecuda", "healthy")])
def test_long_running_exporter_serves_what_a_fresh_one_serves_after_every_change(tmp_path, machine, variant):
    b = machines.load(machine).build(str(tmp_path), variant)
    assert {"0000:04:00.0", "0000:05:00.0", "0000:06:00.0", "0000:07:00.0"} <= set(b.nodes)  # the four drives
    exporter = _Exporter(_roots(str(tmp_path)))
    try:
        before = exporter.scrape()
        assert exporter.scrape() == before  # nothing changed: the kept pieces serve the same text
        assert before == _fresh(str(tmp_path))
        for what, change, identify in CHANGES:
            change(b)
            served = exporter.scrape()
            if identify:
                # Seen on this scrape, which starts an Identify pass; once that ran, the
                # formats are served again.
                exporter.scheduler.run_all_once()
                served = exporter.scrape()
            assert served != before, f"{what}: the change does not show"
            assert served == _fresh(str(tmp_path)), f"{what}: the long-running exporter differs from a fresh one"
            before = served
    finally:
        exporter.close()


def test_a_disk_swapped_under_the_same_name_shows_its_new_identity(tmp_path):
    """The inventory is derived again only when the listings differ: a drive pulled and
    another pushed into the same bay gets the same name (sda) and the same place, only a
    new class symlink (new inode) and its own serial."""
    b = machines.load("dell-r900-sas1068e").build(str(tmp_path), "after-fix")
    _, end_device, disk = b.dell_disks[0]
    exporter = _Exporter(_roots(str(tmp_path)))
    try:
        before = exporter.scrape()
        assert 'serial="S45PNA0M500000"' in before
        target = os.path.join(b.sys, end_device, "target0:0:0", "0:0:0:0")
        serial = b"S45PNA0M5REPLACED"
        with open(os.path.join(target, "vpd_pg80"), "wb") as handle:
            handle.write(bytes([0, 0x80, 0, len(serial)]) + serial)
        link = os.path.join(b.sys, "class", "block", disk)
        os.symlink(os.readlink(link), link + ".new")
        os.replace(link + ".new", link)
        served = exporter.scrape()
        assert 'serial="S45PNA0M5REPLACED"' in served and 'serial="S45PNA0M500000"' not in served
        assert served == _fresh(str(tmp_path))
    finally:
        exporter.close()


def test_a_local_controller_found_dead_is_served_after_its_states_pass(tmp_path):
    """A scrape reads nothing of a local drive's subsystem: its controller's state comes from
    the nvme-controller-states task. Dead on disk, the drive is served as before until that
    pass ran; then as a subsystem with its one path down, as a fresh exporter serves it."""
    b = machines.load("am4-x570-firecuda").build(str(tmp_path), "healthy")
    exporter = _Exporter(_roots(str(tmp_path)))
    try:
        before = exporter.scrape()
        assert "storpath_nvme_subsystem_paths_live" not in before  # local drives, all live: none exported
        _controller_state(b, "nvme1", "dead")
        assert exporter.scrape() == before
        exporter.scheduler.run_all_once()
        served = exporter.scrape()
        lost = [line for line in served.splitlines() if line.startswith("storpath_nvme_subsystem_paths_live{")]
        assert lost == ['storpath_nvme_subsystem_paths_live{subsystem="nvme-subsys1"} 0.0']
        assert served == _fresh(str(tmp_path))
    finally:
        exporter.close()
