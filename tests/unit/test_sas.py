"""SAS PHYs: the parsers on every kernel spelling and on junk, the reader on small trees
(direct-attached disks, empty PHYs, an expander behind a wide port, broken and vanishing
PHYs), and the collector's series."""

import logging
import os
import shutil

import pytest
from prometheus_client.core import CollectorRegistry
from prometheus_client import generate_latest

from storpath.base import log
from storpath.collectors import Context
from storpath.collectors.sas import SasCollector
from storpath.readers.sas import (SasPhyErrors, SasReader, parse_counter, parse_enable, parse_phy_link_rate,
                                  parse_sas_address)
from storpath.base.roots import Roots
from tests.conftest import log_records
from storpath.analysis.links import expander_capabilities
from storpath.readers.ata_identify import UNREPORTED, SataCapability
from tests.fixtures.builders_sas import direct_attached_disk, identify_words, sas_host, sas_phy, sas_port, vpd_pg89
from tests.fixtures.sysfs_builder import MachineBuilder
from tests.snapshots import Scraped, collect

HBA = 0x500605B0012A3F40


@pytest.mark.parametrize("text,rate", [
    ("1.5 Gbit", 1.5e9), ("3.0 Gbit", 3e9), ("6.0 Gbit", 6e9), ("12.0 Gbit", 12e9), ("22.5 Gbit", 22.5e9),
    ("3.0 Gbit\n", 3e9),
])
def test_every_kernel_rate_spelling(text, rate):
    assert parse_phy_link_rate(text) == (rate, None, None)


@pytest.mark.parametrize("text", ["Unknown", "Phy disabled", "Link Rate failed", "Spin-up hold", "Unknown\n"])
def test_states_without_a_rate_are_kept_as_states_not_problems(text):
    assert parse_phy_link_rate(text) == (None, text.strip(), None)


def test_a_state_the_kernel_has_no_name_for_is_an_empty_line():
    # sas_linkspeed_names has no entry for e.g. SAS_PHY_RESET_IN_PROGRESS: the kernel prints "\n".
    assert parse_phy_link_rate("\n") == (None, "", None)


@pytest.mark.parametrize("text", ["fast", "3.0 Gbps", "3.0", "0 Gbit", "0.0 Gbit", "-1.5 Gbit", "Gbit",
                                  "unknown", "Link rate failed"])
def test_junk_rates_are_problems(text):
    rate, state, problem = parse_phy_link_rate(text)
    assert rate is None and state is None and problem and repr(text.strip()) in problem


def test_missing_rate_is_neither_state_nor_problem():
    assert parse_phy_link_rate(None) == (None, None, None)


@pytest.mark.parametrize("text,value", [("0", 0), ("17\n", 17), ("4294967295", 4294967295)])
def test_counters(text, value):
    assert parse_counter(text) == value


@pytest.mark.parametrize("text", ["", "x", "-1", "4294967296", "1.5", None])
def test_bad_counters(text):
    assert parse_counter(text) is None


def test_sas_addresses():
    assert parse_sas_address("0x500605b0012a3f40\n") == "0x500605b0012a3f40"
    assert parse_sas_address("0x500605B0012A3F40") == "0x500605b0012a3f40"
    assert parse_sas_address("0x0") == "0x0000000000000000"
    for junk in ("500605b0012a3f40", "0xzz", "0x1ffffffffffffffff", "", None):
        assert parse_sas_address(junk) is None


def test_enable():
    assert parse_enable("1\n") is True and parse_enable("0") is False
    assert parse_enable("2") is None and parse_enable(None) is None


def _hba(tmp_path, phys=4, attached=(0, 1)):
    """An mpt3sas HBA with `phys` PHYs; disks on the PHYs in `attached`, the rest empty."""
    b = MachineBuilder(str(tmp_path))
    host = b.host_bridge("0000:00")
    b.root_port(host, "0000:00:01.0", speed=8.0, width=8)
    b.attach("0000:00:01.0", 8.0, 8)
    b.pci("0000:00:01.0", "0000:01:00.0", class_code=0x010700, vendor=0x1000, device=0x0097, max_speed=8.0,
          max_width=8, cur_speed=8.0, cur_width=8, driver="mpt3sas")
    host_rel = b.scsi_host("0000:01:00.0")
    sas_host(b, host_rel, "mpt3sas")
    phy_paths = {}
    for index in range(phys):
        phy_paths[index] = sas_phy(b, host_rel, f"phy-0:{index}", phy_identifier=index, sas_address=HBA,
                                   negotiated="12.0 Gbit" if index in attached else "Link Rate failed",
                                   minimum="3.0 Gbit", maximum="12.0 Gbit", minimum_hw="3.0 Gbit",
                                   maximum_hw="12.0 Gbit", enable=1, errors=(index, 10 + index, 20 + index, 0))
    for index in attached:
        direct_attached_disk(b, host_rel, 0, phy_paths[index], index, sas_address=0x5000C50000000001 + index,
                             target_protocols="ssp", vendor="SEAGATE", model="ST16000NM002G",
                             size_bytes=16_000_900_661_248, rotational=1)
    return b, host_rel, phy_paths


def _attrs(b, phy_path):
    name = phy_path.rsplit("/", 1)[1]
    return os.path.join(b.sys, phy_path, "sas_phy", name)


def test_reads_rates_counters_port_and_attached_disk(tmp_path):
    _hba(tmp_path)
    phys = {p.name: p for p in SasReader(Roots(sysfs=str(tmp_path / "sys"))).read()[0]}
    assert sorted(phys) == ["phy-0:0", "phy-0:1", "phy-0:2", "phy-0:3"]
    phy = phys["phy-0:1"]
    assert (phy.negotiated_rate, phy.minimum_rate, phy.maximum_rate) == (12e9, 3e9, 12e9)
    assert (phy.hardware_minimum_rate, phy.hardware_maximum_rate) == (3e9, 12e9)
    errors = SasReader(Roots(sysfs=str(tmp_path / "sys"))).read_errors()[0]
    assert errors["phy-0:1"] == SasPhyErrors(invalid_dwords=1, running_disparity_errors=11, loss_of_dword_sync=21,
                                             phy_reset_problems=0)
    assert sorted(errors) == sorted(phys)
    assert phy.sas_address == "0x500605b0012a3f40" and phy.device_type == "end device"
    assert phy.enabled is True and phy.link_up and phy.port == "port-0:1"
    assert phy.attached.name == "end_device-0:1" and phy.attached.device_type == "end device"
    assert phy.attached.sas_address == "0x5000c50000000002" and phy.attached.target_port_protocols == "ssp"
    assert phy.attached.block_devices == ("sdb",)


def test_an_empty_phy_has_no_port_no_attached_device_and_no_rate(tmp_path):
    _hba(tmp_path)
    empty = {p.name: p for p in SasReader(Roots(sysfs=str(tmp_path / "sys"))).read()[0]}["phy-0:3"]
    assert empty.port is None and empty.attached is None
    assert empty.negotiated_rate is None and empty.negotiated_state == "Link Rate failed" and not empty.link_up
    # The programmed and hardware rates of an empty PHY are still real.
    assert empty.maximum_rate == 12e9 and empty.hardware_maximum_rate == 12e9


def test_expander_behind_a_wide_port_and_the_disk_behind_the_expander(tmp_path):
    b, host_rel, phys = _hba(tmp_path, phys=4, attached=())
    for path in phys.values():
        b.write(os.path.join(_attrs(b, path), "negotiated_linkrate").split(b.sys + "/", 1)[1], "12.0 Gbit")
    port = sas_port(b, host_rel, "port-0:0", list(phys.values()))
    expander = f"{port}/expander-0:0"
    for attr, value in (("device_type", "edge expander"), ("sas_address", "0x500304801f0e2a3f"),
                        ("target_port_protocols", "smp"), ("initiator_port_protocols", "none")):
        b.write(f"{expander}/sas_device/expander-0:0/{attr}", value)
    b.symlink("class/sas_device/expander-0:0", f"{expander}/sas_device/expander-0:0")
    exp_phy = sas_phy(b, expander, "phy-0:0:12", phy_identifier=12, sas_address=0x500304801F0E2A3F,
                      negotiated="6.0 Gbit", minimum="1.5 Gbit", maximum="12.0 Gbit", minimum_hw="1.5 Gbit",
                      maximum_hw="12.0 Gbit", device_type="edge expander", initiator_protocols="none",
                      target_protocols="smp")
    exp_port = sas_port(b, expander, "port-0:0:12", [exp_phy])
    end_device = f"{exp_port}/end_device-0:0:12"
    b.write(f"{end_device}/sas_device/end_device-0:0:12/device_type", "end device")
    b.write(f"{end_device}/sas_device/end_device-0:0:12/target_port_protocols", "sata")
    b.write(f"{end_device}/sas_device/end_device-0:0:12/sas_address", "0x500304801f0e2a0c")
    disk = b.scsi_disk(end_device, "0:0:0:0", vendor="ATA", model="WDC WD40EFRX", size_bytes=4_000_787_030_016)
    phys_read = {p.name: p for p in SasReader(Roots(sysfs=str(tmp_path / "sys"))).read()[0]}
    assert sorted(phys_read) == ["phy-0:0", "phy-0:0:12", "phy-0:1", "phy-0:2", "phy-0:3"]
    for name in ("phy-0:0", "phy-0:1", "phy-0:2", "phy-0:3"):
        hba_phy = phys_read[name]
        assert hba_phy.port == "port-0:0" and hba_phy.attached.name == "expander-0:0"
        assert hba_phy.attached.device_type == "edge expander" and hba_phy.attached.block_devices == ()
    edge = phys_read["phy-0:0:12"]
    assert edge.device_type == "edge expander" and edge.negotiated_rate == 6e9
    assert edge.attached.name == "end_device-0:0:12" and edge.attached.block_devices == (disk,)
    assert edge.attached.target_port_protocols == "sata"
    # The PHYs say whose they are: the expander's own PHYs give its capability.
    assert edge.parent == "expander-0:0" and phys_read["phy-0:0"].parent == "host0"
    assert expander_capabilities(phys_read.values()) == {"expander-0:0": 12e9}


def test_a_sata_drives_capability_from_vpd_pg89(tmp_path):
    b, host_rel, phys = _hba(tmp_path, phys=4, attached=(0,))
    for index, words in ((1, identify_words(2, 1)), (2, identify_words(None)), (3, None)):
        direct_attached_disk(b, host_rel, 0, phys[index], index, sas_address=0x4433221100000000 + index,
                             target_protocols="sata", vendor="ATA", model="INTEL SSDSC2BB48", size_bytes=10 ** 12,
                             sata_words=words)
    # a page cut short by a broken SAT layer
    b.write(f"{host_rel}/port-0:3/end_device-0:3/target0:0:3/0:0:3:0/vpd_pg89", vpd_pg89(identify_words(3))[:100])
    phys_read, problems = SasReader(Roots(sysfs=str(tmp_path / "sys"))).read()
    by_name = {p.name: p for p in phys_read}
    assert by_name["phy-0:0"].attached.sata_capability == UNREPORTED  # a SAS drive: no page
    assert by_name["phy-0:1"].attached.sata_capability == SataCapability(3e9, 1.5e9)
    assert by_name["phy-0:2"].attached.sata_capability == UNREPORTED  # word 76 reads 0
    assert by_name["phy-0:3"].attached.sata_capability == UNREPORTED
    assert [dict(p.fields)["attribute"] for p in problems] == ["0:0:3:0/vpd_pg89"]


def _logged(records, attribute):
    return [r for r in records if getattr(r, "fields", {}).get("attribute") == attribute]




def test_broken_attributes_are_left_out_logged_once_and_hide_nothing_else(tmp_path):
    b, _, phys = _hba(tmp_path)
    attrs = _attrs(b, phys[0])
    with open(os.path.join(attrs, "maximum_linkrate_hw"), "w") as handle:
        handle.write("fast\n")
    with open(os.path.join(attrs, "loss_of_dword_sync_count"), "w") as handle:
        handle.write("lots\n")
    # A counter the driver refuses to fetch: a read that fails (a folder stands in for
    # the error a driver returns).
    os.remove(os.path.join(attrs, "invalid_dword_count"))
    os.mkdir(os.path.join(attrs, "invalid_dword_count"))
    os.remove(os.path.join(attrs, "running_disparity_error_count"))  # an older driver without it
    log.forget_once_keys()
    reader = SasReader(Roots(sysfs=str(tmp_path / "sys")))
    phys, problems = reader.read()
    first = {p.name: p for p in phys}
    errors, error_problems = reader.read_errors()
    assert sorted(dict(p.fields)["attribute"] for p in problems) == ["maximum_linkrate_hw"]
    assert sorted(dict(p.fields)["attribute"] for p in error_problems) == [
        "invalid_dword_count", "loss_of_dword_sync_count"]
    # The reader only reports: a scrape's snapshot step logs the rates, the background
    # task the counters, once each however often they run.
    ctx = Context(roots=Roots(sysfs=str(tmp_path / "sys")))
    collector = SasCollector(ctx)
    with log_records("storpath") as records:
        for _ in range(2):
            ctx.scheduler.run_all_once()
            collect(collector)
    phy = first["phy-0:0"]
    assert phy.hardware_maximum_rate is None and phy.negotiated_rate == 12e9 and phy.maximum_rate == 12e9
    assert errors["phy-0:0"] == SasPhyErrors(invalid_dwords=None, running_disparity_errors=None,
                                             loss_of_dword_sync=None, phy_reset_problems=0)
    assert errors["phy-0:1"].loss_of_dword_sync == 21
    assert phy.attached.block_devices == ("sda",)
    assert first["phy-0:1"].hardware_maximum_rate == 12e9
    assert [r.name for r in _logged(records, "maximum_linkrate_hw")] == ["storpath.snapshot"]  # once, not per read
    assert [r.name for r in _logged(records, "loss_of_dword_sync_count")] == ["storpath.sas"]
    refused = _logged(records, "invalid_dword_count")
    assert [(r.name, r.levelno) for r in refused] == [("storpath.sas", logging.INFO)]  # not worth a warning
    assert _logged(records, "running_disparity_error_count") == []  # absent is not an error


def test_a_vanished_phy_is_skipped_and_the_others_are_read(tmp_path):
    b, _, phys = _hba(tmp_path)
    shutil.rmtree(os.path.join(b.sys, phys[1]))  # the class link now dangles
    reader = SasReader(Roots(sysfs=str(tmp_path / "sys")))
    assert [p.name for p in reader.read()[0]] == ["phy-0:0", "phy-0:2", "phy-0:3"]
    assert sorted(reader.read_errors()[0]) == ["phy-0:0", "phy-0:2", "phy-0:3"]


def test_a_port_whose_end_device_went_away_reads_as_nothing_attached(tmp_path):
    b, host_rel, _ = _hba(tmp_path)
    shutil.rmtree(os.path.join(b.sys, host_rel, "port-0:0", "end_device-0:0"))
    phy = {p.name: p for p in SasReader(Roots(sysfs=str(tmp_path / "sys"))).read()[0]}["phy-0:0"]
    assert phy.port == "port-0:0" and phy.attached is None


def test_no_sas_class_is_no_phys(tmp_path):
    (tmp_path / "sys").mkdir()
    assert SasReader(Roots(sysfs=str(tmp_path / "sys"))).read()[0] == []
    assert SasReader(Roots(sysfs=str(tmp_path / "sys"))).read_errors()[0] == {}


def _scrape(tmp_path, read_errors=True):
    ctx = Context(roots=Roots(sysfs=str(tmp_path / "sys")))
    collector = SasCollector(ctx)
    if read_errors:
        ctx.scheduler.run_all_once()  # what `serve` does in the background
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Scraped(collector))
    return registry, generate_latest(registry).decode()


def test_collector_series(tmp_path):
    _hba(tmp_path)
    registry, text = _scrape(tmp_path)
    value = registry.get_sample_value
    assert value("storpath_sas_phy_negotiated_link_rate_transfers_per_second", {"phy": "phy-0:0"}) == 12e9
    assert value("storpath_sas_phy_negotiated_link_rate_transfers_per_second", {"phy": "phy-0:3"}) is None
    assert value("storpath_sas_phy_hardware_maximum_link_rate_transfers_per_second", {"phy": "phy-0:3"}) == 12e9
    assert value("storpath_sas_phy_minimum_link_rate_transfers_per_second", {"phy": "phy-0:2"}) == 3e9
    assert value("storpath_sas_phy_attached", {"phy": "phy-0:0"}) == 1
    assert value("storpath_sas_phy_attached", {"phy": "phy-0:3"}) == 0
    assert value("storpath_sas_phy_link_up", {"phy": "phy-0:3"}) == 0
    assert value("storpath_sas_phy_enabled", {"phy": "phy-0:3"}) == 1
    assert value("storpath_sas_phy_invalid_dwords_total", {"phy": "phy-0:2"}) == 2
    assert value("storpath_sas_phy_running_disparity_errors_total", {"phy": "phy-0:2"}) == 12
    assert value("storpath_sas_phy_loss_of_dword_sync_total", {"phy": "phy-0:2"}) == 22
    assert value("storpath_sas_phy_reset_problems_total", {"phy": "phy-0:2"}) == 0
    assert value("storpath_sas_phy_info", {
        "phy": "phy-0:1", "sas_address": "0x500605b0012a3f40", "port": "port-0:1", "device_type": "end device",
        "attached_device": "end_device-0:1", "attached_sas_address": "0x5000c50000000002",
        "attached_protocols": "ssp", "device": "sdb"}) == 1
    assert value("storpath_sas_phy_info", {
        "phy": "phy-0:3", "sas_address": "0x500605b0012a3f40", "port": "", "device_type": "end device",
        "attached_device": "", "attached_sas_address": "", "attached_protocols": "", "device": ""}) == 1
    assert text.count("storpath_sas_phy_info{") == 4


def test_collector_without_sas_hardware_exports_no_series(tmp_path):
    (tmp_path / "sys").mkdir()
    _, text = _scrape(tmp_path)
    assert text == ""  # no series, and no family without one (no HELP either, as node_exporter)


def test_the_layout_a_real_kernel_gives_under_qemu_mptsas1068(tmp_path):
    """What Debian's 6.1 kernel showed for QEMU's mptsas1068 with disks on PHYs 0 and 1
    (tests/lab sas topology): the emulation reports the attached disk's identity as the
    PHY's own, and empty PHYs read `Link Rate failed`, device_type `none`, address 0."""
    b = MachineBuilder(str(tmp_path))
    host = b.host_bridge("0000:00")
    b.root_port(host, "0000:00:04.0", speed=8.0, width=8)
    b.pci("0000:00:04.0", "0000:01:00.0", class_code=0x010000, vendor=0x1000, device=0x0054, link=False,
          driver="mptsas")
    host_rel = b.scsi_host("0000:01:00.0")
    sas_host(b, host_rel, "mptsas")
    disks = {0: 0x5000C50015EA71A0, 1: 0x5000C50015EA71B0}
    for index in range(8):
        wwn = disks.get(index)
        phy = sas_phy(b, host_rel, f"phy-0:{index}", phy_identifier=index, sas_address=wwn or 0,
                      negotiated="3.0 Gbit" if wwn else "Link Rate failed", minimum="1.5 Gbit", maximum="3.0 Gbit",
                      minimum_hw="1.5 Gbit", maximum_hw="3.0 Gbit", device_type="end device" if wwn else "none",
                      initiator_protocols="none", target_protocols="ssp" if wwn else "none")
        if wwn:
            direct_attached_disk(b, host_rel, 0, phy, index, sas_address=wwn, target_protocols="ssp",
                                 vendor="QEMU", model="QEMU HARDDISK", size_bytes=64 << 20)
    registry, _ = _scrape(tmp_path)
    value = registry.get_sample_value
    assert value("storpath_sas_phy_negotiated_link_rate_transfers_per_second", {"phy": "phy-0:1"}) == 3e9
    assert value("storpath_sas_phy_info", {
        "phy": "phy-0:2", "sas_address": "0x0000000000000000", "port": "", "device_type": "none",
        "attached_device": "", "attached_sas_address": "", "attached_protocols": "", "device": ""}) == 1
    assert value("storpath_sas_phy_info", {
        "phy": "phy-0:0", "sas_address": "0x5000c50015ea71a0", "port": "port-0:0", "device_type": "end device",
        "attached_device": "end_device-0:0", "attached_sas_address": "0x5000c50015ea71a0",
        "attached_protocols": "ssp", "device": "sda"}) == 1
    assert [value("storpath_sas_phy_attached", {"phy": f"phy-0:{i}"}) for i in range(8)] == [1, 1] + [0] * 6


@pytest.mark.parametrize("state,enable", [("Phy disabled", 0), ("Spin-up hold", 1), ("Unknown", 1)])
def test_phys_in_a_state_export_no_rate_and_say_why_not(tmp_path, state, enable):
    b, _, phys = _hba(tmp_path, phys=2, attached=(0,))
    attrs = _attrs(b, phys[1])
    with open(os.path.join(attrs, "negotiated_linkrate"), "w") as handle:
        handle.write(state + "\n")
    with open(os.path.join(attrs, "enable"), "w") as handle:
        handle.write(f"{enable}\n")
    registry, _ = _scrape(tmp_path)
    value = registry.get_sample_value
    assert value("storpath_sas_phy_negotiated_link_rate_transfers_per_second", {"phy": "phy-0:1"}) is None
    assert value("storpath_sas_phy_link_up", {"phy": "phy-0:1"}) == 0
    assert value("storpath_sas_phy_enabled", {"phy": "phy-0:1"}) == enable
    assert value("storpath_sas_phy_link_up", {"phy": "phy-0:0"}) == 1


def test_error_counters_come_from_the_background_read_not_the_scrape(tmp_path):
    b, _, phys = _hba(tmp_path)
    ctx = Context(roots=Roots(sysfs=str(tmp_path / "sys")))
    collector = SasCollector(ctx)
    assert ctx.scheduler.tasks["sas-link-errors"].interval == 60
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Scraped(collector))
    value = registry.get_sample_value
    # Before the first background read: rates, but no counters and no read time.
    assert value("storpath_sas_phy_negotiated_link_rate_transfers_per_second", {"phy": "phy-0:2"}) is None
    assert value("storpath_sas_phy_hardware_maximum_link_rate_transfers_per_second", {"phy": "phy-0:2"}) == 12e9
    assert value("storpath_sas_phy_loss_of_dword_sync_total", {"phy": "phy-0:2"}) is None
    assert value("storpath_sas_phy_errors_read_timestamp_seconds") is None
    ctx.scheduler.run_all_once()
    assert value("storpath_sas_phy_loss_of_dword_sync_total", {"phy": "phy-0:2"}) == 22
    first_read = value("storpath_sas_phy_errors_read_timestamp_seconds")
    assert first_read is not None
    # The counters move on the HBA; a scrape keeps serving the last read until the next one.
    with open(os.path.join(_attrs(b, phys[2]), "loss_of_dword_sync_count"), "w") as handle:
        handle.write("25\n")
    assert value("storpath_sas_phy_loss_of_dword_sync_total", {"phy": "phy-0:2"}) == 22
    ctx.scheduler.run_all_once()
    assert value("storpath_sas_phy_loss_of_dword_sync_total", {"phy": "phy-0:2"}) == 25
    assert value("storpath_sas_phy_errors_read_timestamp_seconds") >= first_read


def test_error_counter_interval_is_configurable(tmp_path):
    _hba(tmp_path)
    ctx = Context(roots=Roots(sysfs=str(tmp_path / "sys")), config={"error_counters_interval": 300.0})
    SasCollector(ctx)
    assert ctx.scheduler.tasks["sas-link-errors"].interval == 300


def test_every_value_a_real_kernel_printed_parses():
    """Debian's 6.1 kernel under QEMU's mptsas1068 (tests/unit/data/sas_ata_lab_6.1.txt)."""
    from tests.unit.lab_dump import load

    phys = {k: v for k, v in load("sas_ata_lab_6.1.txt").items() if k.startswith("/sys/class/sas_phy/")}
    assert len(phys) == 8
    for link, attrs in phys.items():
        name = link.rsplit("/", 1)[1]
        assert attrs["@path"].endswith(f"/host0/{name}/sas_phy/{name}")  # the layout the reader walks
        for attr in ("negotiated_linkrate", "minimum_linkrate", "maximum_linkrate", "minimum_linkrate_hw",
                     "maximum_linkrate_hw"):
            rate, state, problem = parse_phy_link_rate(attrs[attr])
            assert problem is None and (rate is None) != (state is None), (name, attr, attrs[attr])
        for attr in ("invalid_dword_count", "running_disparity_error_count", "loss_of_dword_sync_count",
                     "phy_reset_problem_count"):
            assert parse_counter(attrs[attr]) == 0
        assert parse_sas_address(attrs["sas_address"]) is not None
        assert parse_enable(attrs["enable"]) is True
    assert parse_phy_link_rate(phys["/sys/class/sas_phy/phy-0:0"]["negotiated_linkrate"]) == (3e9, None, None)
    assert parse_phy_link_rate(phys["/sys/class/sas_phy/phy-0:2"]["negotiated_linkrate"]) == \
        (None, "Link Rate failed", None)
    assert parse_phy_link_rate(phys["/sys/class/sas_phy/phy-0:7"]["minimum_linkrate_hw"]) == (1.5e9, None, None)
    device = load("sas_ata_lab_6.1.txt")["/sys/class/sas_device/end_device-0:1"]
    assert device["@path"].endswith("/host0/port-0:1/end_device-0:1/sas_device/end_device-0:1")
    assert parse_sas_address(device["sas_address"]) == "0x5000c50015ea71b0"
    assert (device["device_type"], device["target_port_protocols"]) == ("end device", "ssp")


def test_the_rates_are_read_apart_from_the_counters(tmp_path):
    _hba(tmp_path)
    reader = SasReader(Roots(sysfs=str(tmp_path / "sys")))
    errors = reader.read_errors()[0]["phy-0:2"]
    assert (errors.invalid_dwords, errors.running_disparity_errors, errors.loss_of_dword_sync,
            errors.phy_reset_problems) == (2, 12, 22, 0)
    assert {p.name: p for p in reader.read()[0]}["phy-0:2"].hardware_maximum_rate == 12e9
