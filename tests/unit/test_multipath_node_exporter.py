"""node_exporter's own fixture tree (prometheus/node_exporter collector/fixtures/sys, commit
a7dcc3a0, kept as field data outside the repository: nothing of it is committed here) read by
storpath's nvme_subsystem and multipath collectors: their path counts and states must equal
what node_exporter publishes for the same tree, its collector/fixtures/e2e-output.txt
(node_dmmultipath_*) and, for the nvmesubsystem collector (disabled by default, so not in
e2e-output), the expected exposition of collector/nvmesubsystem_linux_test.go.

storpath's `device` label of a map is the kernel's block device (dm-5, as node_disk_* names
it); node_exporter's `device` is the map's name (mpathA), storpath's `name`. node_exporter's
"active" paths (device running) are storpath's "unknown" where dmsetup did not judge them."""

from __future__ import annotations

import os
import tarfile

import pytest

from storpath.base.background import Scheduler
from storpath.collectors.base import Context
from storpath.collectors.multipath import MultipathCollector
from storpath.collectors.nvme_subsystem import NvmeSubsystemCollector
from storpath.base.roots import Roots
from tests.snapshots import collect

CORPUS = "/work/shared/field-data/peer-corpora/node-exporter-fixtures.tar.gz"

# node_exporter 1.12's published values for the tree (the sources above), by map name.
NODE_EXPORTER_MAPS = {
    "mpathA": dict(sysfs_name="dm-5", paths=4, active=3, failed=1, size=5.36870912e10, device_active=1,
                   states={"sdi": "running", "sdj": "running", "sdk": "running", "sdl": "offline"}),
    "mpathB": dict(sysfs_name="dm-6", paths=2, active=2, failed=0, size=1.073741824e11, device_active=1,
                   states={"sdm": "running", "sdn": "running"}),
}
NODE_EXPORTER_SUBSYSTEM = dict(subsystem="nvme-subsys0", paths=4, live=3, namespaces=("nvme0n1",),
                               states={"nvme0": "live", "nvme1": "live", "nvme2": "live", "nvme3": "dead"},
                               transport="fc", iopolicy="round-robin", model="Dell PowerStore", serial="SN12345678")


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    if not os.path.exists(CORPUS):
        pytest.skip(f"node_exporter's fixture tree is field data, not in the repository: {CORPUS}")
    root = tmp_path_factory.mktemp("node-exporter")
    with tarfile.open(CORPUS) as archive:
        archive.extractall(root, members=[m for m in archive.getmembers()
                                          if m.name.startswith(("sys/class/nvme-subsystem", "sys/block/"))],
                           filter="data")
    return Roots(sysfs=str(root / "sys"), procfs=str(root / "proc"), dev="")


def samples(collector):
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for family in collect(collector)
            for s in family.samples}


def value(found, name, **labels):
    """The one series of `name` with these labels (map families carry `wwid` too)."""
    (hit,) = [v for (metric, key), v in found.items() if metric == name and labels.items() <= dict(key).items()]
    return hit


def test_multipath_counts_and_states_equal_node_exporter(tree):
    collector = MultipathCollector(Context(tree, scheduler=Scheduler()))
    collector.ctx.scheduler.run_all_once()  # the dmsetup task's pass
    found = samples(collector)
    names = {dict(key)["name"]: dict(key)["device"] for (metric, key) in found
             if metric == "storpath_multipath_device_info"}
    assert set(names) == set(NODE_EXPORTER_MAPS)  # dm-7 (LVM) is no multipath map there either
    for name, expected in NODE_EXPORTER_MAPS.items():
        device = names[name]
        assert device == expected["sysfs_name"]
        assert value(found, "storpath_multipath_paths", device=device) == expected["paths"]
        # node_exporter calls a path active on its device state alone; without dmsetup's verdict (none
        # in this tree) storpath calls a running path unknown: the same paths, not claimed to serve.
        assert value(found, "storpath_multipath_paths_active", device=device) == 0
        assert value(found, "storpath_multipath_paths_unknown", device=device) == expected["active"]
        assert value(found, "storpath_multipath_paths_failed", device=device) == expected["failed"]
        assert value(found, "storpath_multipath_size_bytes", device=device) == expected["size"]
        assert value(found, "storpath_multipath_device_active", device=device) == expected["device_active"]
        states = {dict(key)["path"]: dict(key)["state"] for (metric, key), v in found.items()
                  if metric == "storpath_multipath_path_state" and dict(key)["device"] == device and v == 1}
        assert states == expected["states"]


def test_nvme_subsystem_counts_and_states_equal_node_exporter(tree):
    found = samples(NvmeSubsystemCollector(Context(tree, scheduler=Scheduler())))
    sub = NODE_EXPORTER_SUBSYSTEM["subsystem"]
    assert value(found, "storpath_nvme_subsystem_paths", subsystem=sub) == NODE_EXPORTER_SUBSYSTEM["paths"]
    assert value(found, "storpath_nvme_subsystem_paths_live", subsystem=sub) == NODE_EXPORTER_SUBSYSTEM["live"]
    states = {dict(key)["controller"]: dict(key)["state"] for (metric, key), v in found.items()
              if metric == "storpath_nvme_path_state" and v == 1}
    assert states == NODE_EXPORTER_SUBSYSTEM["states"]
    transports = {dict(key)["transport"] for (metric, key) in found if metric == "storpath_nvme_path_state"}
    assert transports == {NODE_EXPORTER_SUBSYSTEM["transport"]}
    (info,) = [dict(key) for (metric, key) in found if metric == "storpath_nvme_subsystem_info"]
    assert (info["iopolicy"], info["model"], info["serial"]) == (
        NODE_EXPORTER_SUBSYSTEM["iopolicy"], NODE_EXPORTER_SUBSYSTEM["model"], NODE_EXPORTER_SUBSYSTEM["serial"])
    namespaces = tuple(dict(key)["device"] for (metric, key) in found
                       if metric == "storpath_nvme_subsystem_namespace_info")
    assert namespaces == NODE_EXPORTER_SUBSYSTEM["namespaces"]
