"""The error model, as prometheus/procfs has it: a reader that cannot read the directory
it finds its devices in fails its collector for the scrape (success 0, reason logged);
absent hardware is not a failure; one bad attribute drops only that value."""

import logging
import os

from storpath.base import log
from storpath.base.background import Scheduler
from storpath.base.config import validate
from storpath.report.exporter import build_collectors, StorpathExporter
from storpath.base.roots import Roots
from tests.fixtures import machines

SYSFS_COLLECTORS = {"alignment", "block", "gpu", "inventory", "md", "multipath", "numa", "nvme", "nvme_health",
                    "nvme_subsystem", "pcie", "sas", "sata"}


def _scrape(roots):
    exporter = StorpathExporter(build_collectors(roots, validate({}, {}), Scheduler()))
    try:
        families = {f.name: f for f in exporter.collect()}
    finally:
        exporter.close()
    success = {s.labels["collector"]: s.value for s in families["storpath_scrape_collector_success"].samples}
    return success, families


def _roots(root, **override):
    paths = dict(sysfs=os.path.join(root, "sys"), procfs=os.path.join(root, "proc"),
                 captured=os.path.join(root, "captured"))
    paths.update(override)
    return Roots(**paths)


def test_a_missing_sysfs_root_fails_every_collector_that_reads_it(tmp_path, caplog):
    os.makedirs(tmp_path / "proc")
    log.forget_once_keys()
    with caplog.at_level(logging.ERROR):
        success, families = _scrape(_roots(str(tmp_path), sysfs=str(tmp_path / "no-such-sys")))
    assert {name for name, ok in success.items() if ok == 0} == SYSFS_COLLECTORS
    assert success["zfs"] == 1 and success["probes"] == 1  # /proc is readable: no ZFS there is absent hardware
    assert "storpath_pcie_current_link_width" not in families  # nothing, rather than an empty family
    reasons = {r.fields["collector"]: r.fields["err"] for r in caplog.records if r.getMessage() == "collector failed"}
    assert set(reasons) == SYSFS_COLLECTORS and "no-such-sys" in reasons["pcie"], reasons
    assert "cannot read its root" in reasons["pcie"]


def test_absent_hardware_is_not_a_failure(tmp_path):
    os.makedirs(tmp_path / "sys")  # a readable sysfs with no bus, class or device directories
    os.makedirs(tmp_path / "proc")
    success, families = _scrape(_roots(str(tmp_path)))
    assert set(success.values()) == {1.0}, success
    assert "storpath_pcie_current_link_width" not in families  # no samples: no family, as node_exporter


def test_an_unreadable_class_directory_fails_only_its_collector(tmp_path):
    b = machines.load("am4-x570-firecuda").build(str(tmp_path), "healthy")
    nvme_class = os.path.join(b.sys, "class", "nvme")
    for name in os.listdir(nvme_class):
        os.unlink(os.path.join(nvme_class, name))
    os.rmdir(nvme_class)
    os.symlink("nvme", nvme_class)  # a loop: ELOOP, as an I/O error or EACCES would fail the listing
    success, _ = _scrape(_roots(str(tmp_path)))
    assert success["nvme"] == 0
    # nvme_health lists the controllers too: it fails with the class, and only they do.
    assert {name for name, ok in success.items() if ok == 0} == {"nvme", "nvme_health"}


def test_one_bad_attribute_drops_only_its_value(tmp_path, caplog):
    b = machines.load("am4-x570-firecuda").build(str(tmp_path), "healthy")
    b.set_attr("0000:04:00.0", "current_link_width", "garbage")
    log.forget_once_keys()
    with caplog.at_level(logging.WARNING):
        success, families = _scrape(_roots(str(tmp_path)))
    assert success["pcie"] == 1
    widths = {s.labels["address"]: s.value for s in families["storpath_pcie_current_link_width"].samples}
    assert "0000:04:00.0" not in widths and "0000:05:00.0" in widths
    speeds = {s.labels["address"] for s in families["storpath_pcie_current_link_speed_transfers_per_second"].samples}
    assert "0000:04:00.0" in speeds
    assert any(r.fields.get("attribute") == "current_link_width" and r.fields.get("address") == "0000:04:00.0"
               for r in caplog.records if hasattr(r, "fields"))
