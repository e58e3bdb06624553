"""NUMA: cpulist and numa_node parsers, nodes per socket, and the NUMA node of storage on
the EPYC machine in NPS1 and NPS4, with broken, missing and vanishing inputs."""

import logging
import os
import shutil

import pytest
from prometheus_client.core import CollectorRegistry

from storpath.base import log
from storpath.analysis.numa import block_device_nodes, nodes_per_socket
from storpath.collectors import Context
from storpath.collectors.numa import NumaCollector
from storpath.readers.block import BlockDevice
from storpath.readers.numa import (NumaNode, PciNuma, parse_cpulist, parse_numa_node, read_cpu_packages, read_nodes)
from storpath.base.roots import Roots
from storpath.scrape.snapshot import Snapshotter, needed, sysfs_sources, take_once
from tests.conftest import log_records
from tests.fixtures import machines
from tests.fixtures.sysfs_builder import MachineBuilder
from tests.snapshots import Scraped


@pytest.mark.parametrize("text,cpus", [
    ("0", (0,)), ("0-3", (0, 1, 2, 3)), ("0-3,8,10-11", (0, 1, 2, 3, 8, 10, 11)), ("0-1,4-5\n", (0, 1, 4, 5)),
    ("", ()), ("\n", ()),
])
def test_cpulists(text, cpus):
    assert parse_cpulist(text) == cpus


@pytest.mark.parametrize("text", ["a", "3-1", "-1", "0-", "1,,2", "0-3;8", None])
def test_bad_cpulists(text):
    assert parse_cpulist(text) is None


@pytest.mark.parametrize("text,node", [("-1", -1), ("0", 0), ("7\n", 7)])
def test_numa_nodes(text, node):
    assert parse_numa_node(text) == node


@pytest.mark.parametrize("text", ["", "x", "-2", "1.0", None])
def test_bad_numa_nodes(text):
    assert parse_numa_node(text) is None


def _nodes(*cpu_ranges):
    return [NumaNode(node=i, cpulist="", cpus=tuple(r)) for i, r in enumerate(cpu_ranges)]


def test_nodes_per_socket():
    two_sockets = {cpu: cpu // 4 for cpu in range(8)}
    assert nodes_per_socket(_nodes(range(4), range(4, 8)), two_sockets) == 1  # NPS1
    assert nodes_per_socket(_nodes(*[range(i, i + 1) for i in range(8)]), two_sockets) == 4  # NPS4
    assert nodes_per_socket(_nodes(range(8)), two_sockets) == 0.5  # NPS0
    # A memory-only node (CXL, no CPUs) does not split a socket.
    assert nodes_per_socket(_nodes(range(4), range(4, 8), ()), two_sockets) == 1
    # Offline CPUs (no topology, so not in the package map) do not count either.
    assert nodes_per_socket(_nodes(range(4), range(4, 8)), {0: 0, 1: 0}) == 1 / 1
    assert nodes_per_socket([], two_sockets) is None
    assert nodes_per_socket(_nodes(range(4)), {}) is None
    # CPUs 4-7 are online but in no node that was read: unknown, not 0.5.
    assert nodes_per_socket(_nodes(range(4)), two_sockets) is None


def test_block_device_nodes_join_on_the_pci_address_and_keep_minus_one():
    devices = [BlockDevice("nvme0n1", "/x", "0000:41:00.0", "nvme0", False),
               BlockDevice("sda", "/y", "0000:18:00.0", "host0", False),
               BlockDevice("md0", "/z", None, None, True),
               BlockDevice("sdb", "/w", "0000:99:00.0", "host1", False)]
    pci = [PciNuma("0000:41:00.0", 0x010802, 2), PciNuma("0000:18:00.0", 0x010700, -1),
           PciNuma("0000:99:00.0", 0x010700, None)]
    assert block_device_nodes(devices, pci) == [("nvme0n1", 2), ("sda", -1)]


@pytest.fixture(scope="module")
def epyc(tmp_path_factory):
    trees = {}
    for variant in ("nps1", "nps4"):
        root = str(tmp_path_factory.mktemp(variant))
        machines.load("epyc-7443-highpoint").build(root, variant)
        trees[variant] = root
    return trees


def test_reads_nodes_and_sockets_of_the_epyc_in_both_nps_settings(epyc):
    nps1 = Roots(sysfs=os.path.join(epyc["nps1"], "sys"))
    nps4 = Roots(sysfs=os.path.join(epyc["nps4"], "sys"))
    nodes1, nodes4 = read_nodes(nps1), read_nodes(nps4)
    assert [n.node for n in nodes1] == [0, 1] and [n.node for n in nodes4] == list(range(8))
    assert nodes1[0].cpulist == "0-23,48-71" and len(nodes1[0].cpus) == 48
    assert nodes4[6].cpulist == "36-41,84-89"
    packages = read_cpu_packages(nps4)
    assert len(packages) == 96 and set(packages.values()) == {0, 1}
    assert nodes_per_socket(nodes1, read_cpu_packages(nps1)) == 1
    assert nodes_per_socket(nodes4, packages) == 4


def _collect(sysfs):
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Scraped(NumaCollector(Context(roots=Roots(sysfs=sysfs)))))
    return registry


def test_collector_on_the_epyc(epyc):
    for variant, drive_node, boot_node in (("nps1", 1, 0), ("nps4", 6, 2)):
        value = _collect(os.path.join(epyc[variant], "sys")).get_sample_value
        assert value("storpath_numa_nodes_per_socket") == (1 if variant == "nps1" else 4)
        for device in ("nvme1n1", "nvme2n1", "nvme3n1", "nvme4n1"):
            assert value("storpath_block_device_numa_node", {"device": device}) == drive_node
        assert value("storpath_block_device_numa_node", {"device": "nvme0n1"}) == boot_node
        assert value("storpath_numa_storage_controller_node", {"address": "0000:c3:00.0"}) == drive_node
        # Only storage controllers: the NIC and the switch ports are not in it.
        assert value("storpath_numa_storage_controller_node", {"address": "0000:21:00.0"}) is None
        assert value("storpath_numa_storage_controller_node", {"address": "0000:c2:00.0"}) is None
    value = _collect(os.path.join(epyc["nps1"], "sys")).get_sample_value
    assert value("storpath_numa_node_info", {"numa_node": "1", "cpulist": "24-47,72-95"}) == 1


def test_firmware_that_did_not_say_stays_visible_as_minus_one(tmp_path):
    root = str(tmp_path)
    builder = machines.load("epyc-7443-highpoint").build(root, "nps1")
    builder.set_attr("0000:c3:00.0", "numa_node", -1)
    value = _collect(os.path.join(root, "sys")).get_sample_value
    assert value("storpath_block_device_numa_node", {"device": "nvme1n1"}) == -1
    assert value("storpath_numa_storage_controller_node", {"address": "0000:c3:00.0"}) == -1
    assert value("storpath_block_device_numa_node", {"device": "nvme2n1"}) == 1




def test_broken_missing_and_vanished_inputs(tmp_path):
    root = str(tmp_path)
    builder = machines.load("epyc-7443-highpoint").build(root, "nps1")
    sys_root = os.path.join(root, "sys")
    builder.write("devices/system/node/node1/cpulist", "24-47,x")
    builder.set_attr("0000:c4:00.0", "numa_node", "many")
    shutil.rmtree(os.path.join(sys_root, builder.nodes["0000:c5:00.0"].path))  # hot-removed drive
    log.forget_once_keys()
    with log_records("storpath") as records:
        registry = _collect(sys_root)
        value = registry.get_sample_value
        value("storpath_numa_nodes_per_socket")
        _collect(sys_root).get_sample_value("storpath_numa_nodes_per_socket")
    assert value("storpath_numa_node_info", {"numa_node": "0", "cpulist": "0-23,48-71"}) == 1
    assert [s for m in registry.collect() if m.name == "storpath_numa_node_info" for s in m.samples
            if s.labels["numa_node"] == "1"] == []
    # Half the CPUs are in no node that could be read: no count rather than a wrong one.
    assert value("storpath_numa_nodes_per_socket") is None
    assert value("storpath_block_device_numa_node", {"device": "nvme2n1"}) is None
    assert value("storpath_block_device_numa_node", {"device": "nvme3n1"}) is None
    assert value("storpath_block_device_numa_node", {"device": "nvme1n1"}) == 1
    warnings = [r for r in records if r.levelno == logging.WARNING]
    # The cpulist (NUMA reader) and the numa_node (PCI reader), once each over two scrapes.
    assert len(warnings) == 2, [r.getMessage() for r in warnings]
    assert {getattr(r, "fields", {}).get("attribute") for r in warnings} == {None, "numa_node"}


def test_kernel_without_numa(tmp_path):
    root = str(tmp_path)
    machines.load("epyc-7443-highpoint").build(root, "nps1")
    sys_root = os.path.join(root, "sys")
    shutil.rmtree(os.path.join(sys_root, "devices", "system", "node"))
    for address in os.listdir(os.path.join(sys_root, "bus", "pci", "devices")):
        os.remove(os.path.join(sys_root, "bus", "pci", "devices", address, "numa_node"))
    registry = _collect(sys_root)
    samples = [s for m in registry.collect() for s in m.samples]
    assert samples == []
    assert take_once(Roots(sysfs=sys_root), ["numa"]).numa.pci[0].numa_node is None


def test_a_numa_node_beyond_the_nodes_present_is_left_out_with_one_warning(tmp_path):
    """numa_node 7 on a machine with 2 nodes was exported as truth."""
    root = str(tmp_path)
    builder = machines.load("epyc-7443-highpoint").build(root, "nps1")
    builder.set_attr("0000:c3:00.0", "numa_node", 7)
    sys_root = os.path.join(root, "sys")
    log.forget_once_keys()
    with log_records("storpath") as records:
        value = _collect(sys_root).get_sample_value
        _collect(sys_root).get_sample_value("storpath_numa_nodes_per_socket")
    assert value("storpath_numa_storage_controller_node", {"address": "0000:c3:00.0"}) is None
    assert value("storpath_block_device_numa_node", {"device": "nvme1n1"}) is None
    # The other drives on node 1 keep theirs.
    assert value("storpath_block_device_numa_node", {"device": "nvme2n1"}) == 1
    by_address = {d.address: d.numa_node for d in take_once(Roots(sysfs=sys_root), ["numa"]).numa.pci}
    assert by_address["0000:c3:00.0"] is None and by_address["0000:c4:00.0"] == 1
    warnings = [r for r in records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert warnings[0].fields["device"] == "0000:c3:00.0" and warnings[0].fields["value"] == 7


def test_minus_one_stays_and_a_kernel_without_numa_takes_the_node_as_read(tmp_path):
    root = str(tmp_path)
    builder = machines.load("epyc-7443-highpoint").build(root, "nps1")
    builder.set_attr("0000:c3:00.0", "numa_node", -1)
    builder.set_attr("0000:c4:00.0", "numa_node", 7)
    sys_root = os.path.join(root, "sys")
    shutil.rmtree(os.path.join(sys_root, "devices", "system", "node"))
    value = _collect(sys_root).get_sample_value
    assert value("storpath_numa_storage_controller_node", {"address": "0000:c3:00.0"}) == -1
    assert value("storpath_numa_storage_controller_node", {"address": "0000:c4:00.0"}) == 7


def test_a_cpulist_beyond_the_possible_cpus_is_left_out_with_one_warning(tmp_path):
    """A cpulist of 0-30000000 made scrapes take 19 s and 2.4 GB; one naming CPUs this
    machine cannot have is no truer when it is short."""
    builder = MachineBuilder(str(tmp_path))
    builder.cpus(sockets=1, cores_per_socket=2, threads_per_core=2, numa_nodes=2)  # CPUs 0-3
    builder.write("devices/system/node/node0/cpulist", "0-30000000")
    builder.write("devices/system/node/node1/cpulist", "1,3,7")
    sys_root = os.path.join(str(tmp_path), "sys")
    log.forget_once_keys()
    problems = []
    assert read_nodes(Roots(sysfs=sys_root), problems) == []
    assert sorted(dict(p.fields)["value"] for p in problems) == ["0-30000000", "1,3,7"]
    # The reader only reports; the snapshot step logs, once over two scrapes.
    snapshotter = Snapshotter(needed(sysfs_sources(Roots(sysfs=sys_root)), ["numa"]))
    with log_records("storpath") as records:
        assert snapshotter.take().numa.nodes == ()
        snapshotter.take()
    snapshotter.close()
    warnings = [r for r in records if r.levelno == logging.WARNING]
    assert sorted(r.fields["value"] for r in warnings) == ["0-30000000", "1,3,7"]
    assert {r.name for r in warnings} == {"storpath.snapshot"}
    assert all(r.fields["cpus_possible"] == 4 for r in warnings)
    builder.write("devices/system/node/node1/cpulist", "1,3")
    assert [n.cpus for n in read_nodes(Roots(sysfs=sys_root))] == [(1, 3)]
    # Without cpu/possible the bound is the kernel's most CPUs.
    builder.remove("devices/system/cpu/possible")
    builder.write("devices/system/node/node1/cpulist", "1,3,7")
    assert [n.cpus for n in read_nodes(Roots(sysfs=sys_root))] == [(1, 3, 7)]


def test_parse_cpulist_takes_its_bound():
    assert parse_cpulist("0-3", 4) == (0, 1, 2, 3)
    assert parse_cpulist("0-4", 4) is None and parse_cpulist("4", 4) is None
