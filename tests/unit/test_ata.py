"""ATA links: the speed parser on every kernel spelling, the reader on AHCI trees (with an
empty port, a port multiplier, broken and vanishing links), the limit verdict, and the
collector's series."""

import os
import shutil

import pytest
from prometheus_client import generate_latest
from prometheus_client.core import CollectorRegistry

from storpath.base import log
from storpath.analysis.sata import speed_limited
from storpath.collectors import Context
from storpath.collectors.sata import SataCollector
from storpath.readers.ata_identify import UNREPORTED, SataCapability
from storpath.readers.ata import AtaLink, AtaReader, parse_link_name, parse_link_speed
from storpath.base.roots import Roots
from storpath.scrape.snapshot import Snapshotter, sysfs_sources
from tests.conftest import log_records
from tests.fixtures.builders_sas import ata_port
from tests.fixtures.sysfs_builder import MachineBuilder
from tests.snapshots import Scraped

SSD = dict(vendor="ATA", model="Samsung SSD 870", size_bytes=1_000_204_886_016)


@pytest.mark.parametrize("text,value", [("1.5 Gbps", 1.5e9), ("3.0 Gbps", 3e9), ("6.0 Gbps", 6e9),
                                        ("6.0 Gbps\n", 6e9)])
def test_every_kernel_speed_spelling(text, value):
    assert parse_link_speed(text) == (value, None)


@pytest.mark.parametrize("text", ["<unknown>", "<unknown>\n", None])
def test_unknown_and_missing_give_no_value_and_no_problem(text):
    assert parse_link_speed(text) == (None, None)


@pytest.mark.parametrize("text", ["", "unknown", "3.0 Gbit", "fast", "0 Gbps", "0.0 Gbps", "Gbps"])
def test_junk_speeds_are_problems(text):
    value, problem = parse_link_speed(text)
    assert value is None and problem


def test_link_names():
    assert parse_link_name("link1") == (1, None)
    assert parse_link_name("link12.3") == (12, 3)
    assert parse_link_name("link") is None and parse_link_name("dev1.0") is None and parse_link_name("link1.") is None


def _ahci(tmp_path):
    b = MachineBuilder(str(tmp_path))
    host = b.host_bridge("0000:00")
    b.pci(host, "0000:00:1f.2", class_code=0x010601, vendor=0x8086, device=0x8d02, link=False, driver="ahci")
    return b


def _two_ports(tmp_path):
    b = _ahci(tmp_path)
    ata_port(b, "0000:00:1f.2", 1, 0, sata_spd="6.0 Gbps", disk=SSD)
    ata_port(b, "0000:00:1f.2", 2, 1)
    return b


def test_reads_a_disk_link_and_an_empty_one(tmp_path):
    _two_ports(tmp_path)
    links = {link.name: link for link in AtaReader(Roots(sysfs=str(tmp_path / "sys"))).read()[0]}
    assert links["link1"] == AtaLink(name="link1", port="ata1", speed=6e9, hardware_limit=None, limit=None,
                                     block_devices=("sda",), device_capability=SataCapability(6e9, 6e9))
    assert links["link2"] == AtaLink(name="link2", port="ata2", speed=None, hardware_limit=None, limit=None,
                                     block_devices=())


def test_forced_and_lowered_limits(tmp_path):
    b = _ahci(tmp_path)
    # libata.force=1:3.0Gbps lowers the hardware limit, and the current limit follows it.
    ata_port(b, "0000:00:1f.2", 1, 0, sata_spd="3.0 Gbps", hw_sata_spd_limit="3.0 Gbps", sata_spd_limit="3.0 Gbps",
             disk=SSD)
    # Error handling lowered the current limit; the controller sets none.
    ata_port(b, "0000:00:1f.2", 2, 1, sata_spd="1.5 Gbps", sata_spd_limit="1.5 Gbps", disk=SSD)
    links = {link.name: link for link in AtaReader(Roots(sysfs=str(tmp_path / "sys"))).read()[0]}
    assert (links["link1"].speed, links["link1"].hardware_limit, links["link1"].limit) == (3e9, 3e9, 3e9)
    assert (links["link2"].speed, links["link2"].hardware_limit, links["link2"].limit) == (1.5e9, None, 1.5e9)
    assert not speed_limited(links["link1"])
    assert speed_limited(links["link2"])


@pytest.mark.parametrize("hardware,limit,expected", [
    (None, None, False), (None, 3e9, True), (6e9, 6e9, False), (6e9, 3e9, True), (3e9, 3e9, False),
    (3e9, None, False),
])
def test_speed_limited_verdict(hardware, limit, expected):
    link = AtaLink(name="link1", port="ata1", speed=3e9, hardware_limit=hardware, limit=limit, block_devices=())
    assert speed_limited(link) is expected


def test_port_multiplier_links_find_their_own_disks(tmp_path):
    b = _ahci(tmp_path)
    ata_port(b, "0000:00:1f.2", 1, 0, sata_spd="3.0 Gbps")
    port = f"{b.nodes['0000:00:1f.2'].path}/ata1"
    # The PMP's own link carries the multiplier; its ports are links 1.0 and 1.1, whose
    # disks sit on SCSI channels 0 and 1 of the port's host.
    for pmp, speed in ((0, "3.0 Gbps"), (1, "1.5 Gbps")):
        rel = f"{port}/link1.{pmp}/ata_link/link1.{pmp}"
        for attr, value in (("sata_spd", speed), ("hw_sata_spd_limit", "<unknown>"), ("sata_spd_limit", "<unknown>")):
            b.write(f"{rel}/{attr}", value)
        b.symlink(f"class/ata_link/link1.{pmp}", rel)
        b.scsi_disk(f"{port}/host0", f"0:{pmp}:0:0", **SSD)
    b.write(f"{port}/ata_port/ata1/nr_pmp_links", 2)
    links = {link.name: link for link in AtaReader(Roots(sysfs=str(tmp_path / "sys"))).read()[0]}
    assert links["link1"].block_devices == ()
    assert links["link1.0"].block_devices == ("sda",) and links["link1.0"].speed == 3e9
    assert links["link1.1"].block_devices == ("sdb",) and links["link1.1"].speed == 1.5e9




def test_broken_values_are_left_out_and_logged_once(tmp_path):
    b = _two_ports(tmp_path)
    attrs = os.path.join(b.sys, b.nodes["0000:00:1f.2"].path, "ata1", "link1", "ata_link", "link1")
    with open(os.path.join(attrs, "sata_spd"), "w") as handle:
        handle.write("6 Gb/s\n")
    os.remove(os.path.join(attrs, "sata_spd_limit"))
    log.forget_once_keys()
    roots = Roots(sysfs=str(tmp_path / "sys"))
    links, problems = AtaReader(roots).read()
    link = {x.name: x for x in links}["link1"]
    assert link.speed is None and link.limit is None and link.block_devices == ("sda",)
    assert [dict(p.fields)["attribute"] for p in problems] == ["sata_spd"]  # a missing limit is no problem
    # The reader only reports; the snapshot step logs, once over two scrapes.
    snapshotter = Snapshotter([sysfs_sources(roots)["ata_links"]])
    with log_records("storpath") as records:
        snapshotter.take()
        snapshotter.take()
    snapshotter.close()
    bad = [r for r in records if getattr(r, "fields", {}).get("attribute") == "sata_spd"]
    assert [(r.name, r.getMessage(), r.fields) for r in bad] == [
        ("storpath.snapshot", "ATA link attribute not usable, leaving it out",
         {"link": "link1", "attribute": "sata_spd", "reason": "unrecognised SATA speed '6 Gb/s'"})]
    assert not [r for r in records if getattr(r, "fields", {}).get("attribute") == "sata_spd_limit"]


def test_a_vanished_link_is_skipped(tmp_path):
    b = _two_ports(tmp_path)
    shutil.rmtree(os.path.join(b.sys, b.nodes["0000:00:1f.2"].path, "ata1"))
    assert [link.name for link in AtaReader(Roots(sysfs=str(tmp_path / "sys"))).read()[0]] == ["link2"]


def test_no_ata_class_is_no_links(tmp_path):
    (tmp_path / "sys").mkdir()
    assert AtaReader(Roots(sysfs=str(tmp_path / "sys"))).read()[0] == []


def test_collector_series(tmp_path):
    b = _ahci(tmp_path)
    ata_port(b, "0000:00:1f.2", 1, 0, sata_spd="3.0 Gbps", sata_spd_limit="3.0 Gbps", disk=SSD)
    ata_port(b, "0000:00:1f.2", 2, 1, sata_spd="6.0 Gbps", hw_sata_spd_limit="6.0 Gbps", sata_spd_limit="6.0 Gbps",
             disk=SSD)
    ata_port(b, "0000:00:1f.2", 3, 2)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Scraped(SataCollector(Context(roots=Roots(sysfs=str(tmp_path / "sys"))))))
    value = registry.get_sample_value
    one, two, empty = {"link": "link1", "device": "sda"}, {"link": "link2", "device": "sdb"}, \
        {"link": "link3", "device": ""}
    assert value("storpath_sata_link_speed_transfers_per_second", one) == 3e9
    assert value("storpath_sata_link_limit_transfers_per_second", one) == 3e9
    assert value("storpath_sata_link_hardware_limit_transfers_per_second", one) is None
    assert value("storpath_sata_link_limited", one) == 1
    assert value("storpath_sata_link_hardware_limit_transfers_per_second", two) == 6e9
    assert value("storpath_sata_link_limited", two) == 0
    assert value("storpath_sata_link_speed_transfers_per_second", empty) is None
    assert value("storpath_sata_link_limited", empty) == 0
    assert "link3" not in "".join(line for line in generate_latest(registry).decode().splitlines()
                                  if line.startswith("storpath_sata_link_speed"))


def test_every_value_a_real_kernel_printed_parses():
    """Debian's 6.1 kernel under QEMU's AHCI with libata.force=1:3.0Gbps,2:1.5Gbps
    (tests/unit/data/sas_ata_lab_6.1.txt): the force lowers both limits."""
    from tests.unit.lab_dump import load

    links = {k.rsplit("/", 1)[1]: v for k, v in load("sas_ata_lab_6.1.txt").items()
             if k.startswith("/sys/class/ata_link/")}
    assert sorted(links) == ["link1", "link2", "link3", "link4", "link5", "link6"]
    values = {}
    for name, attrs in links.items():
        port = name.replace("link", "ata")
        assert attrs["@path"].endswith(f"/{port}/{name}/ata_link/{name}")  # the layout the reader walks
        parsed = [parse_link_speed(attrs[a]) for a in ("sata_spd", "hw_sata_spd_limit", "sata_spd_limit")]
        assert all(problem is None for _, problem in parsed), (name, attrs)
        values[name] = tuple(value for value, _ in parsed)
    assert values["link1"] == (1.5e9, 3e9, 3e9)
    assert values["link2"] == (1.5e9, 1.5e9, 1.5e9)
    assert values["link3"] == (None, None, None)


def test_the_drives_identify_data(tmp_path):
    b = _ahci(tmp_path)
    ata_port(b, "0000:00:1f.2", 1, 0, sata_spd="1.5 Gbps", disk=SSD, device_gen=2)  # a SATA-II drive at Gen1
    ata_port(b, "0000:00:1f.2", 2, 1, sata_spd="6.0 Gbps", disk=SSD, device_gen=None)  # word 76 not reported
    ata_port(b, "0000:00:1f.2", 3, 2, sata_spd="6.0 Gbps", disk=SSD)
    b.write_raw("class/ata_device/dev3.0/id", "0040 0000\n")  # truncated
    links, problems = AtaReader(Roots(sysfs=str(tmp_path / "sys"))).read()
    by_name = {link.name: link for link in links}
    assert by_name["link1"].device_capability == SataCapability(3e9, 1.5e9)
    assert by_name["link2"].device_capability == UNREPORTED
    assert by_name["link3"].device_capability == UNREPORTED
    assert [dict(p.fields)["attribute"] for p in problems] == ["dev3.0/id"]
