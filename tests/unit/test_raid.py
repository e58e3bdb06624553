"""Drives behind hardware RAID controllers: the tools' parsers on literal text and on the
project's own fixtures (tests/fixtures/builders_raid.py), the judgement of each drive's
link against both ends, and the reader's handling of tools that are missing, hang or print
garbage."""

from __future__ import annotations

import json
import os
import stat
import textwrap

import pytest

from storpath.analysis import raid as analysis
from storpath.analysis.expectation import BOTH_ENDS, DEVICE_ONLY, FAR_END_UNKNOWN, NONE, PORT_LIMIT_UNKNOWN
from storpath.readers.raid import (arcconf as raid_arcconf, megacli as raid_megacli,
                                   smartctl as raid_smartctl, ssacli as raid_ssacli,
                                   storcli as raid_storcli)
from storpath.readers.raid import RaidReader, parse_storcli
from storpath.readers.raid.records import (RaidController, RaidDrive, RaidOutputError, parse_link_rate, parse_strip,
                                           raid_level)
from storpath.base.roots import Roots
from tests.fixtures import builders_raid as build

G = 1e9


# ---- words -------------------------------------------------------------------------------

@pytest.mark.parametrize("text,rate", [
    ("6.0Gb/s", 6e9), ("12.0Gb/s", 12e9), ("1.5Gbps", 1.5e9), ("3.0GBPS, Unknown", 3e9), ("6.0Gbps, Unknown", 6e9),
    ("SATA 6.0 Gb/s", 6e9), ("SAS 3.0 Gb/s", 3e9), ("PHY enabled - 6 Gbps", 6e9), ("12 Gbps ", 12e9),
    ("Unknown", None), ("", None), ("unknown ", None), ("7.0Gb/s", None), (None, None), (6, None)])
def test_link_rates_in_every_tools_spelling(text, rate):
    assert parse_link_rate(text) == rate


@pytest.mark.parametrize("text,level", [
    ("RAID6", "raid6"), ("RAID10", "raid10"), ("1+0", "raid10"), ("5", "raid5"), ("6 Reed-Solomon", "raid6"),
    ("Primary-5, Secondary-0, RAID Level Qualifier-3", "raid5"), ("Primary-1, Secondary-3, RAID Level Qualifier-0",
                                                                   "raid10"), ("bogus", None), ("", None)])
def test_raid_levels(text, level):
    assert raid_level(text) == level


def test_strip_sizes_count_in_powers_of_two():
    assert parse_strip("256 KB") == 262144 and parse_strip("64 KiB") == 65536 and parse_strip("1.000 MB") == 1 << 20
    assert parse_strip("N/A") is None and parse_strip("0 KB") is None


# ---- storcli ------------------------------------------------------------------------------

def test_storcli_behind_an_expander_link_speed_is_not_the_drives():
    """HBA 9500-8i with SATA drives behind expanders: Device 6.0, Link 12.0 on every drive."""
    drives = [build.StorcliDrive(23, slot, did=slot, state="JBOD", group="-", link_speed="12.0Gb/s")
              for slot in range(3)]
    inventory = raid_storcli.parse_controllers(build.storcli_controllers(
        0, "HBA 9500-8i", "28.00.00.00", (0, 1, 0, 0), "SAS-12G", bbu=None, hba_drives=drives))
    [ctrl] = inventory.controllers
    assert (ctrl.name, ctrl.pci_address, ctrl.port_rate, ctrl.battery) == ("storcli/c0", "0000:01:00.0", 12e9, None)
    # The record keeps storcli's rate; the analysis says it is the expander's link.
    assert [(d.slot, d.negotiated_rate, d.capability, analysis.rate_is_expander_link(d), analysis.own_link_rate(d),
             d.state) for d in inventory.drives] == [(f"23:{n}", 12e9, 6e9, True, None, "jbod") for n in range(3)]
    for drive in inventory.drives:
        expectation = analysis.drive_expectation(drive, ctrl)
        assert not expectation.verifiable and expectation.reason == analysis.RATE_IS_EXPANDER_LINK
        assert not analysis.below_expected(drive, expectation)


def test_storcli_drives_and_volumes_join_by_drive_group():
    hdds = [build.StorcliDrive(252, slot, did=30 + slot) for slot in range(2)]
    hdds[1].state = "Rbld"
    volumes = raid_storcli.parse_volumes(build.storcli_volumes(0, [build.StorcliVolume(
        0, 0, raid="RAID1", state="Dgrd", cache="RWTD", initial="WriteBack", active="Rebuild (11%)", drives=hdds)]))
    [volume] = volumes.volumes
    assert (volume.id, volume.level, volume.state, volume.operation, volume.progress) == \
        ("0/0", "raid1", "rebuilding", "rebuild", 0.11)
    assert (volume.write_back_configured, volume.write_back_current, volume.strip_bytes, volume.device) == \
        (True, False, 262144, "sda")
    assert analysis.cache_fell_back(volume)
    drives = raid_storcli.parse_drives(build.storcli_drives(0, hdds), raid_storcli.volume_groups(volumes))
    assert [(d.slot, d.state, d.volume, d.device_id, d.serial) for d in drives.drives] == \
        [("252:0", "online", "0/0", 30, "ZL2A0000"), ("252:1", "rebuilding", "0/0", 31, "ZL2A0000")]


def test_storcli2_capable_and_negotiated_speed_current_and_default_cache():
    """perccli2/storcli2 name the fields differently (PERC H965i)."""
    drives = {"Controllers": [{"Command Status": {"Controller": "0", "Status": "Success"}, "Response Data": {
        "Drives List": [{"Drive Information": {"EID:Slt": "292:0", "PID": 275, "State": "Conf", "Status": "Online",
                                               "DG": 0, "Intf": "SATA", "Med": "SSD", "Model": "MTFDDAK480TGB"},
                         "Drive Detailed Information": {"Serial Number": "2150320D0001", "Capable Speed": "6.0Gb/s",
                                                        "Path Information": [{"Path": "Primary",
                                                                              "Negotiated Speed": "3.0Gb/s"}]}}]}}]}
    [drive] = raid_storcli.parse_drives(json.dumps(drives)).drives
    assert (drive.slot, drive.state, drive.negotiated_rate, drive.capability, drive.device_id) == \
        ("292:0", "online", 3e9, 6e9, 275)
    volumes = {"Controllers": [{"Command Status": {"Controller": "0"}, "Response Data": {"Virtual Drives": [
        {"VD Info": {"DG/VD": "0/1", "TYPE": "RAID6", "State": "Optl", "CurrentCache": "NR,WT", "DefaultCache": "NR,WB",
                     "Size": "5.233 TiB"},
         "VD Properties": {"Strip Size": "64 KiB", "OS Drive Name": "/dev/sda",
                           "SCSI NAA Id": "6f4ee0806dd4f2002b3c4d5e6f708190"}}]}}]}
    [volume] = raid_storcli.parse_volumes(json.dumps(volumes)).volumes
    assert (volume.write_back_configured, volume.write_back_current, volume.strip_bytes, volume.wwn) == \
        (True, False, 65536, "6f4ee0806dd4f2002b3c4d5e6f708190")


@pytest.mark.parametrize("text", ["", "not json", "[]", '{"Controllers": 3}', "{" * 500 + "}" * 500])
def test_storcli_garbage_is_an_output_error(text):
    with pytest.raises(RaidOutputError):
        raid_storcli.parse_drives(text)


# ---- ssacli -------------------------------------------------------------------------------

def _p212(battery_status="OK", cache_status="OK", details=None):
    shelf = [build.SsaDrive("2E", 1, bay, serial=f"Z1E{bay:05d}") for bay in range(1, 4)]
    return build.ssacli_config([build.SsaController(
        "Smart Array P410i", "0", "6.64", "0000:03:00.0", embedded=True, cache_status=cache_status,
        cache_details=details, battery_status=battery_status,
        arrays=[build.SsaArray("A", "SATA", [build.SsaLogical(1)], shelf[:2])], unassigned=shelf[2:])])


def test_ssacli_gives_the_rate_but_no_capability():
    inventory = raid_ssacli.parse_config_detail(_p212())
    [ctrl] = inventory.controllers
    assert (ctrl.name, ctrl.model, ctrl.pci_address, ctrl.port_rate, ctrl.battery) == \
        ("ssacli/slot0", "Smart Array P410i", "0000:03:00.0", None, "ok")
    assert [(d.slot, d.interface, d.negotiated_rate, d.capability, d.state, d.volume) for d in inventory.drives] == [
        ("2E:1:1", "SATA", 1.5e9, None, "online", "1"), ("2E:1:2", "SATA", 1.5e9, None, "online", "1"),
        ("2E:1:3", "SATA", 1.5e9, None, "unconfigured", None)]
    drive = inventory.drives[0]
    expectation = analysis.drive_expectation(drive, ctrl)
    assert (expectation.basis, expectation.reason, expectation.expected) == (NONE, FAR_END_UNKNOWN, None)
    [volume] = inventory.volumes
    assert (volume.level, volume.state, volume.device, volume.write_back_current) == ("raid5", "optimal", "sdc", True)


def test_ssacli_cache_temporarily_disabled_is_the_write_through_fallback():
    inventory = raid_ssacli.parse_config_detail(_p212("Failed (Replace Batteries)", "Temporarily Disabled",
                                                      "Cache disabled; low batteries."))
    assert inventory.controllers[0].battery == "failed"
    [volume] = inventory.volumes
    assert (volume.write_back_configured, volume.write_back_current) == (True, False)


def test_ssacli_recovering_volume_is_rebuilding_with_progress():
    text = _p212().replace("         Status: OK\n         Caching", "         Status: Recovering, 54.28% complete\n"
                                                                   "         Caching")
    [volume] = raid_ssacli.parse_config_detail(text).volumes
    assert (volume.state, volume.operation, volume.progress) == ("rebuilding", "rebuild", pytest.approx(0.5428))


def test_ssacli_without_a_controller_is_an_output_error():
    with pytest.raises(RaidOutputError):
        raid_ssacli.parse_config_detail("Error: no controllers detected.\n")


# ---- MegaCli ------------------------------------------------------------------------------

def test_megacli_device_speed_and_link_speed_without_a_controller_rate():
    drives = [build.MegaDrive(15, slot, device_id=4 + slot) for slot in range(2)]
    drives[1].state = "Rebuild"
    inventory = raid_megacli.parse_listing(build.megacli_pdlist(0, drives))
    assert [(d.controller, d.slot, d.negotiated_rate, d.capability, d.state, d.volume, d.device_id)
            for d in inventory.drives] == [("megacli/a0", "15:0", 3e9, 6e9, "online", "0", 4),
                                           ("megacli/a0", "15:1", 3e9, 6e9, "rebuilding", "0", 5)]
    # No controller port rate in MegaCli's listings: a drive below its own capability may be held by the
    # controller (a SAS1078 does 3 Gb/s): device_only, not called slow.
    expectation = analysis.drive_expectation(inventory.drives[0], RaidController("megacli/a0", "megacli"))
    assert (expectation.basis, expectation.reason, expectation.expected) == (DEVICE_ONLY, PORT_LIMIT_UNKNOWN, 6e9)
    assert not analysis.below_expected(inventory.drives[0], expectation)


def test_megacli_ldinfo_write_through_fallback_and_bbu():
    text = build.megacli_ldinfo(0, [dict(id=0, level="Primary-5, Secondary-0, RAID Level Qualifier-3",
                                         size="24.555 TB", state="Optimal", strip="256 KB", drives=10,
                                         default="WriteBack, ReadAhead, Direct, No Write Cache if Bad BBU",
                                         current="WriteThrough, ReadAhead, Direct, No Write Cache if Bad BBU")])
    [volume] = raid_megacli.parse_listing(text).volumes
    assert (volume.level, volume.state, volume.write_back_configured, volume.write_back_current) == \
        ("raid5", "optimal", True, False)
    assert raid_megacli.parse_bbu(build.megacli_bbu(0, True)) == {"megacli/a0": "failed"}
    assert raid_megacli.parse_bbu(build.megacli_bbu(0, False)) == {"megacli/a0": "ok"}
    assert raid_megacli.parse_bbu("Adapter 0: Get BBU Status Failed.\n") == {"megacli/a0": None}


# ---- arcconf ------------------------------------------------------------------------------

def _arcconf(battery="Optimal", mode="Enabled (write-back)", status="Optimal", rebuilding=False):
    return build.arcconf_config(
        "Adaptec 6405", battery,
        [dict(id=0, name="data", level="10", status=status, strip="256 KB", mode=mode,
              setting="Enabled (write-back) when protected by battery/ZMM",
              segments=[("Present", 0), ("Rebuilding" if rebuilding else "Present", 1)])],
        [dict(slot=0, state="Online", speed="SATA 3.0 Gb/s", model="WD2003FYYS", serial="WD-WMAY0000"),
         dict(slot=1, state="Rebuilding" if rebuilding else "Online", speed="SATA 1.5 Gb/s", model="WD2003FYYS",
              serial="WD-WMAY0001")])


def test_arcconf_rebuild_with_getstatus_progress():
    inventory = raid_arcconf.parse_config(_arcconf(status="Degraded", rebuilding=True), 1,
                                          build.arcconf_status(0, "Rebuild", 1))
    [volume] = inventory.volumes
    assert (volume.level, volume.state, volume.operation, volume.progress) == ("raid10", "rebuilding", "rebuild", 0.01)
    assert [(d.slot, d.interface, d.negotiated_rate, d.state, d.volume) for d in inventory.drives] == \
        [("0,0", "SATA", 3e9, "online", "0"), ("0,1", "SATA", 1.5e9, "rebuilding", "0")]


def test_arcconf_battery_failed_and_write_through():
    inventory = raid_arcconf.parse_config(_arcconf(battery="Failed", mode="Disabled (write-through)"), 1)
    assert inventory.controllers[0].battery == "failed"
    assert analysis.cache_fell_back(inventory.volumes[0])


def test_arcconf_transfer_speed_above_programmed_max_is_the_expander_link():
    text = _arcconf().replace("         Transfer Speed                     : SATA 3.0 Gb/s",
                              "         Programmed Max Speed               : SATA 6.0 Gb/s\n"
                              "         Transfer Speed                     : SATA 12.0 Gb/s")
    drive = raid_arcconf.parse_config(text, 1).drives[0]
    assert (drive.negotiated_rate, drive.capability, analysis.rate_is_expander_link(drive)) == (12e9, 6e9, True)


# ---- smartctl -----------------------------------------------------------------------------

def _smartctl(serial="Z1E00001", maximum=(60, "6.0 Gb/s"), current=(15, "1.5 Gb/s"), protocol="ATA"):
    speed = {}
    if maximum:
        speed["max"] = {"units_per_second": maximum[0], "bits_per_unit": 100000000, "string": maximum[1]}
    if current:
        speed["current"] = {"units_per_second": current[0], "bits_per_unit": 100000000, "string": current[1]}
    doc = {"smartctl": {"exit_status": 0}, "device": {"protocol": protocol}, "serial_number": serial}
    if speed:
        doc["interface_speed"] = speed
    return json.dumps(doc)


def test_smartctl_gives_a_sata_drives_capability_and_a_sas_drive_none():
    drive = raid_smartctl.parse_smartctl(_smartctl())
    assert (drive.maximum, drive.current, drive.serial) == (6e9, 1.5e9, "Z1E00001")
    sas = raid_smartctl.parse_smartctl(_smartctl(maximum=None, current=None, protocol="SCSI"))
    assert (sas.maximum, sas.current) == (None, None)
    with pytest.raises(RaidOutputError):
        raid_smartctl.parse_smartctl('{"json_format_version": [1, 0]}')


# ---- the judgement -------------------------------------------------------------------------

def _drive(negotiated, capability):
    return RaidDrive("storcli/c0", "252:0", negotiated_rate=negotiated, capability=capability)


@pytest.mark.parametrize("port,negotiated,capability,basis,expected,below,limit", [
    (12 * G, 3 * G, 6 * G, BOTH_ENDS, 6 * G, True, "device"),  # SATA SSD held at 3.0 on a 12G controller
    (12 * G, 6 * G, 6 * G, BOTH_ENDS, 6 * G, False, "device"),  # SATA at 6.0 on 12G: healthy
    (6 * G, 6 * G, 12 * G, BOTH_ENDS, 6 * G, False, "port"),  # 12G SAS drive on a SAS-6G controller: its limit
    (12 * G, 12 * G, 12 * G, BOTH_ENDS, 12 * G, False, "both"),
    (None, 3 * G, 6 * G, DEVICE_ONLY, 6 * G, False, "device"),  # controller unknown: not called slow
    (12 * G, 1.5 * G, None, NONE, None, False, ""),  # capability unknown (ssacli)
    (12 * G, 12 * G, 6 * G, NONE, 6 * G, False, "device"),  # 12G above a 6G drive: the expander's link
])
def test_expected_rate_is_the_lower_of_both_ends(port, negotiated, capability, basis, expected, below, limit):
    ctrl = RaidController("storcli/c0", "storcli", port_rate=port)
    drive = _drive(negotiated, capability)
    expectation = analysis.drive_expectation(drive, ctrl)
    assert (expectation.basis, expectation.expected) == (basis, expected)
    assert analysis.below_expected(drive, expectation) is below
    assert expectation.limited_by() == limit


def test_a_partition_off_the_volumes_strip():
    assert analysis.off_strip(32256, 262144) and not analysis.off_strip(1 << 20, 262144)
    assert not analysis.off_strip(None, 262144) and not analysis.off_strip(32256, None)


# ---- the reader: replay and tools that fail -------------------------------------------------

def _sysfs_with(tmp_path, driver):
    sys = tmp_path / "sys"
    (sys / "bus/pci/drivers" / driver / "0000:03:00.0").mkdir(parents=True)
    return str(sys)


def _script(tmp_path, name, body):
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_replay_reads_whatever_is_captured_without_a_bound_controller(tmp_path):
    captured = tmp_path / "captured"
    (captured / "ssacli").mkdir(parents=True)
    (captured / "ssacli/config-detail.txt").write_text(_p212())
    (captured / "smartctl").mkdir()
    (captured / "smartctl/slot0-0.json").write_text(_smartctl(serial="Z1E00001"))
    snapshot = RaidReader(Roots(sysfs=str(tmp_path), captured=str(captured))).read()
    assert snapshot.tools["ssacli"].ok and snapshot.tools["smartctl"].ok
    first = snapshot.inventory.drives[0]
    assert (first.capability, first.capability_source, first.negotiated_rate) == (6e9, "smartctl", 1.5e9)
    assert snapshot.inventory.drives[1].capability is None  # another serial: still unknown


def test_captured_garbage_is_tool_down_not_an_exception(tmp_path):
    captured = tmp_path / "captured"
    (captured / "storcli").mkdir(parents=True)
    (captured / "storcli/drives.json").write_text("Segmentation fault\n")
    snapshot = RaidReader(Roots(sysfs=str(tmp_path), captured=str(captured))).read()
    assert not snapshot.tools["storcli"].ok and "not JSON" in snapshot.tools["storcli"].reason


def test_a_replayed_sysfs_without_captures_runs_no_tool_of_this_host(tmp_path):
    roots = Roots(sysfs=_sysfs_with(tmp_path, "megaraid_sas"), dev="")
    storcli = _script(tmp_path, "storcli", f"touch {tmp_path}/ran\n")
    snapshot = RaidReader(roots, {"storcli": storcli}).read()
    assert (snapshot.source, snapshot.tools) == ("none", {}) and snapshot.problems
    assert not (tmp_path / "ran").exists()


def test_no_controller_bound_runs_nothing(tmp_path):
    snapshot = RaidReader(Roots(sysfs=str(tmp_path)), {"storcli": "/nonexistent/storcli"}).read()
    assert (snapshot.source, snapshot.tools) == ("none", {})


def test_a_missing_tool_is_down_with_the_reason(tmp_path):
    roots = Roots(sysfs=_sysfs_with(tmp_path, "hpsa"))
    snapshot = RaidReader(roots, {"ssacli": str(tmp_path / "ssacli")}).read()
    assert not snapshot.tools["ssacli"].ok and "not found" in snapshot.tools["ssacli"].reason


def test_a_hung_tool_is_killed_at_the_timeout(tmp_path):
    roots = Roots(sysfs=_sysfs_with(tmp_path, "hpsa"))
    ssacli = _script(tmp_path, "ssacli", "sleep 30\n")
    snapshot = RaidReader(roots, {"ssacli": ssacli}, timeout=0.5).read()
    assert not snapshot.tools["ssacli"].ok and "did not finish within 0.5 s" in snapshot.tools["ssacli"].reason


def test_a_tool_printing_garbage_is_down(tmp_path):
    roots = Roots(sysfs=_sysfs_with(tmp_path, "megaraid_sas"))
    storcli = _script(tmp_path, "storcli", "echo '{\"Controllers\": [{\"Command Status\": '\n")
    snapshot = RaidReader(roots, {"storcli": storcli}).read()
    assert not snapshot.tools["storcli"].ok and "not JSON" in snapshot.tools["storcli"].reason


def test_a_working_storcli_is_run_with_the_three_commands(tmp_path):
    roots = Roots(sysfs=_sysfs_with(tmp_path, "megaraid_sas"))
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "controllers.json").write_text(build.storcli_controllers(0, "PERC H730P Mini", "4.300", (0, 3, 0, 0),
                                                                       "SAS-12G"))
    (folder / "drives.json").write_text(build.storcli_drives(0, [build.StorcliDrive(32, 0, did=0)]))
    (folder / "volumes.json").write_text(build.storcli_volumes(0, [build.StorcliVolume(0, 0)]))
    storcli = _script(tmp_path, "storcli", f"""\
        case "$1" in
          /call) cat {folder}/controllers.json ;;
          /call/eall/sall) cat {folder}/drives.json ;;
          /call/vall) cat {folder}/volumes.json ;;
        esac
        """)
    snapshot = RaidReader(roots, {"storcli": storcli}).read()
    assert snapshot.tools == {"storcli": snapshot.tools["storcli"]} and snapshot.tools["storcli"].ok
    assert [(d.slot, d.volume) for d in snapshot.inventory.drives] == [("32:0", "0/0")]
    assert snapshot.inventory.controllers[0].pci_address == "0000:03:00.0"


def _block_node(path):
    try:
        os.mknod(path, stat.S_IFBLK | 0o600, os.makedev(8, 0))
    except PermissionError:
        pytest.skip("creating a block device node needs CAP_MKNOD")


def _controller_with_disk(tmp_path, disk="sda", node=True):
    """megaraid_sas bound at 0000:03:00.0 with SCSI disk `disk` below it (volume 0 at 0:2:0:0, as
    the driver places it), /sys/class/block/<disk> pointing there, and a block node for it under
    --path.dev (the layout of /sys/devices on a PERC H730P host)."""
    sysfs = tmp_path / "sys"
    function = sysfs / "devices/pci0000:00/0000:00:02.0/0000:03:00.0"
    (function / f"host0/target0:2:0/0:2:0:0/block/{disk}").mkdir(parents=True)
    (sysfs / "bus/pci/drivers/megaraid_sas").mkdir(parents=True)
    (sysfs / "bus/pci/drivers/megaraid_sas/0000:03:00.0").symlink_to(function)
    (sysfs / "class/block").mkdir(parents=True)
    (sysfs / "class/block" / disk).symlink_to(function / f"host0/target0:2:0/0:2:0:0/block/{disk}")
    (tmp_path / "dev").mkdir()
    if node:
        _block_node(str(tmp_path / "dev" / disk))
    return Roots(sysfs=str(sysfs), dev=str(tmp_path / "dev"))


def test_smartctl_through_the_controller_gives_what_old_storcli_firmware_hides(tmp_path):
    """storcli on a SAS1078 says "Unknown" for every rate; smartctl -d sat+megaraid,N through the
    volume's block device gives the SATA drive's IDENTIFY words 76/77."""
    roots = _controller_with_disk(tmp_path)
    folder = tmp_path / "out"
    folder.mkdir()
    drive = build.StorcliDrive(8, 3, did=44, device_speed="Unknown", link_speed="Unknown", model="HDS723020BLA642")
    (folder / "controllers.json").write_text(build.storcli_controllers(0, "LSI MegaRAID SAS 84016E", "1.12",
                                                                       (0, 3, 0, 0), "SAS-3G", bbu=None))
    (folder / "drives.json").write_text(build.storcli_drives(0, [drive]))
    (folder / "volumes.json").write_text(build.storcli_volumes(0, [build.StorcliVolume(0, 0, drives=[drive])]))
    (folder / "smartctl.json").write_text(_smartctl(serial="MN1220F30000", current=(15, "1.5 Gb/s")))
    storcli = _script(tmp_path, "storcli", f"""\
        case "$1" in
          /call) cat {folder}/controllers.json ;;
          /call/eall/sall) cat {folder}/drives.json ;;
          /call/vall) cat {folder}/volumes.json ;;
        esac
        """)
    smartctl = _script(tmp_path, "smartctl", f"""\
        echo "$@" > {tmp_path}/smartctl.args
        cat {folder}/smartctl.json
        exit 4
        """)
    snapshot = RaidReader(roots, {"storcli": storcli, "smartctl": smartctl}).read()
    assert (tmp_path / "smartctl.args").read_text().split() == ["-j", "-i", "-d", "sat+megaraid,44",
                                                                 str(tmp_path / "dev/sda")]
    [found] = snapshot.inventory.drives
    assert (found.capability, found.capability_source, found.negotiated_rate) == (6e9, "smartctl", 1.5e9)
    ctrl = snapshot.inventory.controllers[0]
    expectation = analysis.drive_expectation(found, ctrl)
    # below both the 3 Gb/s controller and the 6 Gb/s drive: visible only through smartctl
    assert expectation.expected == 3e9 and analysis.below_expected(found, expectation)


def test_a_volume_without_a_named_device_is_found_at_its_scsi_target(tmp_path):
    """MegaCli names no block device: megaraid_sas puts virtual drive N at channel 2, target N."""
    sysfs = tmp_path / "sys"
    function = sysfs / "devices/pci0000:00/0000:00:02.0/0000:03:00.0"
    for hctl, disk in (("0:2:0:0", "sda"), ("0:2:1:0", "sdb"), ("0:0:5:0", "sdc")):
        (function / f"host0/target{hctl.rsplit(':', 1)[0]}/{hctl}/block/{disk}").mkdir(parents=True)
    (sysfs / "bus/pci/devices").mkdir(parents=True)
    (sysfs / "bus/pci/devices/0000:03:00.0").symlink_to(function)
    (sysfs / "bus/pci/drivers/megaraid_sas").mkdir(parents=True)
    (sysfs / "bus/pci/drivers/megaraid_sas/0000:03:00.0").symlink_to(function)
    captured = tmp_path / "captured"
    (captured / "megacli").mkdir(parents=True)
    (captured / "megacli/ldinfo.txt").write_text(build.megacli_ldinfo(0, [
        dict(id=n, level="Primary-1, Secondary-0, RAID Level Qualifier-0", size="1.0 TB", state="Optimal",
             strip="64 KB", drives=2, default="WriteBack", current="WriteBack") for n in (0, 1, 2)]))
    snapshot = RaidReader(Roots(sysfs=str(sysfs), captured=str(captured))).read()
    assert snapshot.inventory.controllers[0].pci_address == "0000:03:00.0"
    assert [(v.id, v.device) for v in snapshot.inventory.volumes] == [("0", "sda"), ("1", "sdb"), ("2", None)]


def test_storcli_drives_json_wins_over_the_hbas_own_listing():
    hba = build.storcli_controllers(0, "HBA", "1", (0, 1, 0, 0), "SAS-12G", bbu=None,
                                    hba_drives=[build.StorcliDrive(23, 0, did=0, group="-")])
    drives = build.storcli_drives(0, [build.StorcliDrive(23, 0, did=0, group=0)])
    volumes = build.storcli_volumes(0, [build.StorcliVolume(0, 0)])
    inventory = parse_storcli(hba, drives, volumes)
    assert [(d.slot, d.volume) for d in inventory.drives] == [("23:0", "0/0")]


def test_capture_takes_the_tools_outputs_into_the_replay_layout(tmp_path, monkeypatch):
    """`storpath capture` runs what the reader runs and writes captured/<tool>/..., which a replay
    then reads whole."""
    from storpath.readers.raid.capture import capture_commands

    sysfs = _sysfs_with(tmp_path, "hpsa")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "config.txt").write_text(_p212())
    _script(bin_dir, "ssacli", f"cat {tmp_path}/config.txt\n")
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    folder = tmp_path / "captured"
    assert capture_commands(Roots(sysfs=sysfs), str(folder)) == []
    assert (folder / "ssacli/config-detail.txt").read_text() == _p212()
    replayed = RaidReader(Roots(sysfs=sysfs, captured=str(folder))).read()
    assert replayed.tools["ssacli"].ok and len(replayed.inventory.drives) == 3
