"""`storpath capture --redact` of a host whose RAID tools' outputs carry identifiers in every
field their parsers read (readers.raid_storcli, raid_ssacli, raid_arcconf, raid_megacli,
raid_smartctl): controller serials (storcli, ssacli, arcconf), storcli's controller SAS address,
drive serials and WWNs (storcli's `SN`/`WWN`, ssacli's `Serial Number`/`WWID`, arcconf's `Serial
number` and `World-wide name`, the serial inside MegaCli's `Inquiry Data` for a SATA and a SAS
drive, MegaCli's `SAS Address(0)`), volume NAA ids (storcli's `SCSI NAA Id`, ssacli's `Unique
Identifier`) and smartctl's serial and WWN. None may be left anywhere in the archive's bytes,
and the archive is the owner's alone (0600). The outputs follow the builders in
tests/fixtures/builders_raid.py, each of which cites the real output it follows."""

from __future__ import annotations

import gzip
import json
import os
import stat

from tests.e2e.test_capture import capture
from tests.fixtures import builders_raid as build

# value -> where it is planted
PLANTED = {
    "SKC7A1234567": "storcli controller Serial Number",
    "500605b0a1b2c3d4": "storcli controller SAS Address",
    "ZL2Q9R8S": "storcli drive SN",
    "5000C500DEADBEEF": "storcli drive WWN",
    "600605b00d0a7e00aa11bb22cc33dd44": "storcli SCSI NAA Id",
    "PBKUC0XYZ9876": "ssacli controller Serial Number",
    "9QJ4K7M2": "ssacli drive Serial Number",
    "5000C5001A2B3C4D": "ssacli drive WWID",
    "600508B1001C48AFDD414EB0F3999999": "ssacli Unique Identifier",
    "W1F3ZE9T": "MegaCli SATA drive Inquiry Data serial",
    "S0M9XK2P": "MegaCli SAS drive Inquiry Data serial",
    "500019b9ff72cd05": "MegaCli SAS Address(0)",
    "WD-WMATV0000001": "arcconf drive Serial number",
    "ACF1A2B3C4D": "arcconf controller Serial Number",
    "5000CCA0B1C2D3E4": "arcconf World-wide name",
    "Z1E0XQ77": "smartctl serial_number",
    "61107309629": "smartctl wwn's id (the drive's own part of its WWN)",
}


def _outputs(captured):
    storcli = captured / "storcli"
    storcli.mkdir(parents=True)
    controllers = build.storcli_controllers(0, "PERC H730P Mini", "4.300", (0, 3, 0, 0), "SAS-12G")
    (storcli / "controllers.json").write_text(controllers.replace("SK00000000", "SKC7A1234567")
                                              .replace("500605b000000000", "500605b0a1b2c3d4"))
    drives = build.storcli_drives(0, [build.StorcliDrive(32, 0, did=0, serial="ZL2Q9R8S")])
    (storcli / "drives.json").write_text(drives.replace("5000C50000000000", "5000C500DEADBEEF"))
    (storcli / "volumes.json").write_text(build.storcli_volumes(0, [build.StorcliVolume(
        0, 0, naa="600605b00d0a7e00aa11bb22cc33dd44")]))
    ssacli = captured / "ssacli"
    ssacli.mkdir()
    config = build.ssacli_config([build.SsaController("Smart Array P212", "2", "6.60", "0000:05:00.0", [
        build.SsaArray("A", "SAS", [build.SsaLogical(1, uid="600508B1001C48AFDD414EB0F3999999")],
                       [build.SsaDrive("2E", 1, 1, serial="9QJ4K7M2")])])])
    (ssacli / "config-detail.txt").write_text(config.replace("PBKUC0ARH0000", "PBKUC0XYZ9876")
                                              .replace("5000C50000000000", "5000C5001A2B3C4D"))
    megacli = captured / "megacli"
    megacli.mkdir()
    sata = " " * 12 + "W1F3ZE9T" + "ST3000DM001-1CH166".ljust(40) + "CC27".ljust(8)
    sas = "SEAGATE ST600MM0006     LS0AS0M9XK2P"
    (megacli / "pdlist.txt").write_text(build.megacli_pdlist(0, [
        build.MegaDrive(32, 0, 4, inquiry=sata), build.MegaDrive(32, 1, 5, pd_type="SAS", inquiry=sas)]))
    arcconf = captured / "arcconf"
    arcconf.mkdir()
    al = build.arcconf_config("Adaptec ASR8405", "Optimal", [dict(
        id=0, name="data", level="1", status="Optimal", strip="256 KB", mode="Enabled (write-back)",
        setting="Enabled (write-back) when protected by battery/ZMM", segments=[("Present", 1)])], [dict(
            slot=1, state="Online", speed="6.0 Gb/s SATA", model="WD1003FBYX", serial="WD-WMATV0000001")])
    al = al.replace("   Controller Model", "   Controller Serial Number                 : ACF1A2B3C4D\n"
                                          "   Controller Model")
    al = al.replace("         Size                               : 953869 MB",
                    "         World-wide name                    : 5000CCA0B1C2D3E4\n"
                    "         Size                               : 953869 MB")
    (arcconf / "1-al.txt").write_text(al)
    smartctl = captured / "smartctl"
    smartctl.mkdir()
    (smartctl / "c0-0.json").write_text(json.dumps({
        "json_format_version": [1, 0], "device": {"protocol": "ATA"}, "serial_number": "Z1E0XQ77",
        "wwn": {"naa": 5, "oui": 9528, "id": 61107309629}, "model_name": "ST2000NM0033",
        "interface_speed": {"max": {"sata_value": 14, "string": "6.0 Gb/s", "units_per_second": 60,
                                    "bits_per_unit": 100000000}}}))


def test_every_raid_identifier_planted_is_gone_from_the_archive_and_it_is_the_owners(tmp_path):
    root = tmp_path / "host"
    (root / "sys/bus/pci/drivers/megaraid_sas").mkdir(parents=True)
    (root / "proc").mkdir()
    _outputs(root / "captured")
    before = b"".join(p.read_bytes() for p in (root / "captured").rglob("*") if p.is_file())
    for value, where in PLANTED.items():
        assert value.encode() in before, where  # each identifier is where the test says
    assert len(PLANTED) >= 17
    out = tmp_path / "out"
    out.mkdir()
    archive, _ = capture(str(root), str(out), "--redact")
    assert stat.S_IMODE(os.stat(archive).st_mode) == 0o600
    data = gzip.decompress(open(archive, "rb").read())
    left = {where: value for value, where in PLANTED.items()
            if value.encode() in data or value.lower().encode() in data or value.upper().encode() in data}
    assert left == {}
