"""A SAS drive's own PHYs from its Phy Control And Discover mode page (19h/01h): the parser
on literal bytes, the captured/sg_modes reader, and the expected rate it gives a link."""

from __future__ import annotations

import os
import stat

from storpath.analysis.expectation import BOTH_ENDS, FAR_END_UNKNOWN, NONE, LinkExpectation
from storpath.analysis.links import drive_capability, drive_phys, sas_expectation
from storpath.readers.sas import SasPhy, SasRemote
from storpath.readers.sas_pcd import (DrivePhy, DrivePhysResult, SasDrive, capture_commands, parse_phy_control_discover,
                                      read_all, read_drive_phys, ssp_drives)
from storpath.base.roots import Roots
from tests.snapshots import Scraped

G = 1e9
HBA = 0x500304801F3A2C00
DRIVE_PORT_A = 0x5000CCA0A1B2C311
DRIVE_PORT_B = 0x5000CCA0A1B2C315


def descriptor(phy_id, address, attached, negotiated=0xA, hw=(0x8, 0xB), programmed=(0x8, 0xB)):
    """One 48-byte SAS phy mode descriptor (SPL-4 9.2.7.5)."""
    d = bytearray(48)
    d[1] = phy_id
    d[4] = 0x10 if attached else 0x00  # attached device type: end device
    d[5] = negotiated  # reason 0 | negotiated logical link rate
    d[8:16] = address.to_bytes(8, "big")
    d[16:24] = attached.to_bytes(8, "big")
    d[24] = 3  # attached phy identifier
    d[32] = programmed[0] << 4 | hw[0]
    d[33] = programmed[1] << 4 | hw[1]
    return bytes(d)


def page(descriptors, page_code=0x59, subpage=0x01, protocol=0x6):
    body = bytes([0, protocol, 0x01, len(descriptors)]) + b"".join(descriptors)
    return bytes([page_code, subpage]) + len(body).to_bytes(2, "big") + body


def mode_sense10(page_bytes, block_descriptors=b""):
    """MODE SENSE(10) response: header (mode data length counts what follows its 2 bytes)."""
    rest = bytes([0x00, 0x10, 0x00, 0x00]) + len(block_descriptors).to_bytes(2, "big") + block_descriptors + page_bytes
    return len(rest).to_bytes(2, "big") + rest


# A dual-port 12 Gbit/s SAS-3 drive: port A on an HBA PHY at 6 Gbit/s, port B unattached.
SAS3_DRIVE = mode_sense10(page([descriptor(0, DRIVE_PORT_A, HBA, negotiated=0xA),
                                descriptor(1, DRIVE_PORT_B, 0, negotiated=0x0)]),
                          block_descriptors=bytes([0, 0, 0, 0, 0xD1, 0x88, 0x0A, 0x2F, 0, 0, 0x02, 0]))


def test_two_phy_sas3_drive():
    phys, problem = parse_phy_control_discover(SAS3_DRIVE)
    assert problem is None
    assert phys == (
        DrivePhy(0, "0x5000cca0a1b2c311", "0x500304801f3a2c00", 6 * G, 1.5 * G, 12 * G, 1.5 * G, 12 * G),
        DrivePhy(1, "0x5000cca0a1b2c315", "0x0000000000000000", None, 1.5 * G, 12 * G, 1.5 * G, 12 * G),
    )


def test_truncated_response():
    phys, problem = parse_phy_control_discover(SAS3_DRIVE[:-10])
    assert phys is None and "truncated" in problem
    # a mode data length that claims less than the descriptors need
    short = bytearray(SAS3_DRIVE)
    short[0:2] = (len(SAS3_DRIVE) - 2 - 48).to_bytes(2, "big")
    assert parse_phy_control_discover(bytes(short))[0] is None
    assert parse_phy_control_discover(SAS3_DRIVE[:5]) == (None, "5 bytes: shorter than the MODE SENSE(10) header")
    assert parse_phy_control_discover(b"")[0] is None and parse_phy_control_discover(None)[0] is None
    assert "no room" in parse_phy_control_discover(SAS3_DRIVE[:24])[1]


def test_wrong_page_or_protocol():
    caching = mode_sense10(bytes([0x08, 0x12]) + bytes(18))  # the Caching page, no subpage format
    phys, problem = parse_phy_control_discover(caching)
    assert phys is None and "not the Phy Control And Discover page" in problem
    other_subpage = mode_sense10(page([descriptor(0, DRIVE_PORT_A, HBA)], subpage=0x02))
    assert "subpage 0x02" in parse_phy_control_discover(other_subpage)[1]
    not_sas = mode_sense10(page([descriptor(0, DRIVE_PORT_A, HBA)], protocol=0x1))
    assert "not SAS" in parse_phy_control_discover(not_sas)[1]


def test_reserved_rate_codes_are_no_rate():
    phys, _ = parse_phy_control_discover(mode_sense10(page([descriptor(0, DRIVE_PORT_A, HBA, hw=(0x3, 0xF))])))
    assert phys[0].hardware_minimum_rate is None and phys[0].hardware_maximum_rate is None


# ---- the link's expectation ------------------------------------------------------------

def hba_phy(negotiated=6 * G, hw_max=12 * G, address="0x500304801f3a2c00", remote_address="0x5000cca0a1b2c311"):
    remote = SasRemote(name="end_device-0:3", device_type="end device", sas_address=remote_address,
                       target_port_protocols="ssp", block_devices=("sdd",))
    return SasPhy(name="phy-0:3", sas_address=address, device_type="end device", initiator_port_protocols="ssp",
                  target_port_protocols=None, negotiated_rate=negotiated, negotiated_state=None,
                  minimum_rate=1.5 * G, maximum_rate=hw_max, hardware_minimum_rate=1.5 * G,
                  hardware_maximum_rate=hw_max, enabled=True, port="port-0:3", attached=remote, parent="host0")


def result(data=SAS3_DRIVE, address="0x5000cca0a1b2c311"):
    return DrivePhysResult(address, parse_phy_control_discover(data)[0], "captured", None, 0.0)


def test_a_12g_drive_on_a_12g_phy_expects_12_and_a_6g_drive_6():
    phy = hba_phy()
    drives = drive_phys([phy], {"end_device-0:3": result()})
    assert sas_expectation(phy, {}, drives) == LinkExpectation(12 * G, 12 * G, 12 * G, BOTH_ENDS)
    sas2 = mode_sense10(page([descriptor(0, DRIVE_PORT_A, HBA, hw=(0x8, 0xA)),
                              descriptor(1, DRIVE_PORT_B, 0, hw=(0x8, 0xA))]))
    drives = drive_phys([phy], {"end_device-0:3": result(sas2)})
    assert sas_expectation(phy, {}, drives) == LinkExpectation(6 * G, 12 * G, 6 * G, BOTH_ENDS)


def test_the_drive_phy_facing_this_one_counts():
    phys = parse_phy_control_discover(mode_sense10(page([descriptor(0, DRIVE_PORT_A, 0x1234, hw=(0x8, 0xA)),
                                                        descriptor(1, DRIVE_PORT_B, HBA, hw=(0x8, 0xB))])))[0]
    assert drive_capability(hba_phy(), phys) == 12 * G
    # none faces it: the common maximum when the PHYs agree, else unknown
    assert drive_capability(hba_phy(address="0x5003048000000000"), phys) is None
    assert drive_capability(hba_phy(address="0x5003048000000000"), parse_phy_control_discover(SAS3_DRIVE)[0]) == 12 * G
    assert drive_capability(hba_phy(), ()) is None


def test_unknown_without_the_page_or_for_another_drive():
    phy = hba_phy()
    unknown = LinkExpectation(None, 12 * G, None, NONE, FAR_END_UNKNOWN)
    assert sas_expectation(phy, {}, {}) == unknown
    assert sas_expectation(phy, {}, drive_phys([phy], None)) == unknown
    failed = DrivePhysResult("0x5000cca0a1b2c311", None, "sg_modes", "permission denied", 0.0)
    assert sas_expectation(phy, {}, drive_phys([phy], {"end_device-0:3": failed})) == unknown
    # read from the drive that was there before: not this one's
    swapped = drive_phys([phy], {"end_device-0:3": result(address="0x5000cca0deadbeef")})
    assert sas_expectation(phy, {}, swapped) == unknown


# ---- the reader ----------------------------------------------------------------------------

def end_device(tmp_path, name="end_device-0:3", protocols="ssp", address="0x5000cca0a1b2c311"):
    sysfs = tmp_path / "sys"
    dev = sysfs / "devices" / "host0" / "port-0:3" / name
    attrs = dev / "sas_device" / name
    attrs.mkdir(parents=True)
    (attrs / "target_port_protocols").write_text(protocols + "\n")
    (attrs / "sas_address").write_text(address + "\n")
    (dev / "target0:0:3" / "0:0:3:0" / "block" / "sdd").mkdir(parents=True)
    (dev / "target0:0:3" / "0:0:3:0" / "scsi_generic" / "sg3").mkdir(parents=True)
    cls = sysfs / "class" / "sas_device"
    cls.mkdir(parents=True, exist_ok=True)
    os.symlink(attrs, cls / name)
    return sysfs


def test_only_ssp_drives_with_their_sg_node(tmp_path):
    sysfs = end_device(tmp_path)
    end_device(tmp_path, "end_device-0:0", "sata")
    end_device(tmp_path, "end_device-0:1", "sata, stp")
    drives = ssp_drives(Roots(sysfs=str(sysfs)))
    assert drives == [SasDrive("end_device-0:3", "0x5000cca0a1b2c311", "sg3")]


def test_replayed_from_captured_files(tmp_path):
    sysfs = end_device(tmp_path)
    captured = tmp_path / "captured"
    folder = captured / "sas" / "end_device-0:3"
    folder.mkdir(parents=True)
    (folder / "mode-19-01.bin").write_bytes(SAS3_DRIVE)
    roots = Roots(sysfs=str(sysfs), dev="", captured=str(captured))
    results = read_all(roots)
    assert list(results) == ["end_device-0:3"]
    got = results["end_device-0:3"]
    assert got.error is None and got.source == "captured" and got.phys[0].hardware_maximum_rate == 12 * G
    (folder / "mode-19-01.bin").write_bytes(SAS3_DRIVE[:30])
    assert "truncated" in read_all(roots)["end_device-0:3"].error
    (folder / "mode-19-01.bin").unlink()
    assert "no captured mode page" in read_all(roots)["end_device-0:3"].error


def test_no_devices_no_tool_and_a_failing_tool(tmp_path, monkeypatch):
    sysfs = end_device(tmp_path)
    drive = ssp_drives(Roots(sysfs=str(sysfs)))[0]
    assert "device nodes not opened" in read_drive_phys(Roots(sysfs=str(sysfs), dev=""), drive).error
    roots = Roots(sysfs=str(sysfs), dev=str(tmp_path / "dev"))
    assert "not installed" in read_drive_phys(roots, drive, sg_modes="no-such-sg_modes").error
    tool = tmp_path / "sg_modes"
    tool.write_text("#!/bin/sh\necho 'sg_modes: error opening file: $4: Permission denied' >&2\nexit 15\n")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    got = read_drive_phys(roots, drive, sg_modes=str(tool), timeout=5)
    assert got.phys is None and "exited 15" in got.error


def test_sg_modes_output_parsed_and_captured(tmp_path, monkeypatch):
    sysfs = end_device(tmp_path)
    raw = tmp_path / "response.bin"
    raw.write_bytes(SAS3_DRIVE)
    tool = tmp_path / "sg_modes"
    tool.write_text(f"#!/bin/sh\n[ \"$1 $2 $3\" = '--page=0x19,0x1 --raw {tmp_path}/dev/sg3' ] || exit 99\n"
                    f"cat {raw}\n")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    roots = Roots(sysfs=str(sysfs), dev=str(tmp_path / "dev"))
    got = read_all(roots, sg_modes=str(tool), timeout=5)["end_device-0:3"]
    assert got.error is None and got.source == "sg_modes" and len(got.phys) == 2
    out = tmp_path / "capture"
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ.get('PATH', '')}")  # `storpath capture` runs sg_modes
    assert capture_commands(roots, str(out)) == []
    assert (out / "sas" / "end_device-0:3" / "mode-19-01.bin").read_bytes() == SAS3_DRIVE


# ---- the collector: a background task, served through the snapshot --------------------------

def test_collector_serves_the_drive_task_and_reads_again_for_a_new_drive(tmp_path):
    from prometheus_client.core import CollectorRegistry

    from storpath.collectors import Context
    from storpath.collectors.sas import SasCollector
    from tests.fixtures import machines

    machines.load("supermicro-x11ssh-sas3008").build(str(tmp_path), "sas-drives")
    roots = Roots(sysfs=str(tmp_path / "sys"), procfs=str(tmp_path / "proc"), dev="",
                  captured=str(tmp_path / "captured"))
    ctx = Context(roots=roots)
    collector = SasCollector(ctx)
    assert ctx.scheduler.tasks["sas-drive-phys"].interval == 6 * 3600
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Scraped(collector))
    value = registry.get_sample_value
    expected = "storpath_sas_phy_expected_link_rate_transfers_per_second"
    # before the first pass: the SAS drives' links are unverifiable, not slow
    assert value(expected, {"phy": "phy-0:3"}) is None
    assert value("storpath_sas_phy_link_verifiable",
                 {"phy": "phy-0:3", "basis": "none", "reason": "far_end_unknown"}) == 0
    ctx.scheduler.run_all_once()
    assert value(expected, {"phy": "phy-0:3"}) == 12e9  # 12 Gbit/s drive on a 12 Gbit/s PHY
    assert value(expected, {"phy": "phy-0:2"}) == 6e9  # 6 Gbit/s drive
    assert value(expected, {"phy": "phy-0:0:8"}) == 6e9  # 12 Gbit/s drive behind the 6 Gbit/s expander
    assert value("storpath_sas_phy_attached_max_link_rate_transfers_per_second", {"phy": "phy-0:0:8"}) == 12e9
    assert value("storpath_sas_phy_link_verifiable", {"phy": "phy-0:3", "basis": "both_ends", "reason": ""}) == 1
    # a drive swapped in under the same end device: its predecessor's page is not served, and the task runs early
    task = ctx.scheduler.tasks["sas-drive-phys"]
    triggered = []
    task.trigger = lambda: triggered.append(True)
    attrs = tmp_path / "sys" / "class" / "sas_device" / "end_device-0:3" / "sas_address"
    attrs.write_text("0x5000cca0deadbee1\n")
    assert value(expected, {"phy": "phy-0:3"}) is None
    assert triggered == [True]


def test_unreadable_pages_leave_the_links_unverifiable_and_say_why_once(tmp_path):
    from prometheus_client.core import CollectorRegistry

    from storpath.collectors import Context
    from storpath.collectors.sas import SasCollector
    from tests.conftest import log_records
    from tests.fixtures import machines

    machines.load("supermicro-x11ssh-sas3008").build(str(tmp_path), "sas-drives")
    ctx = Context(roots=Roots(sysfs=str(tmp_path / "sys"), procfs=str(tmp_path / "proc"), dev=""))
    collector = SasCollector(ctx)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Scraped(collector))
    with log_records("storpath") as records:
        ctx.scheduler.run_all_once()
        ctx.scheduler.run_all_once()
    lines = [r for r in records if "Phy Control And Discover" in r.getMessage()]
    assert len(lines) == 1
    assert registry.get_sample_value("storpath_sas_phy_link_verifiable",
                                     {"phy": "phy-0:3", "basis": "none", "reason": "far_end_unknown"}) == 0
