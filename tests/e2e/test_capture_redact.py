"""`storpath capture --redact` on disks that answer with real binary identity pages: SAS
drives (direct and behind an expander) and SATA drives (on the SAS HBA's SCSI/ATA
translation and on the chipset's AHCI port), every one with its vpd_pg80, vpd_pg83,
wwid and, for SATA, its IDENTIFY data in vpd_pg89 and libata's `id`. Every member of the
archive is searched for every identity in every form it takes on a real machine, and the
replayed archive still reads as the machine did, with no identity in /metrics."""

from __future__ import annotations

import glob
import os
import re
import tarfile
from typing import Dict, List, Tuple

import pytest

from tests.conftest import run_exporter
from tests.e2e.test_capture import capture, paths, storpath
from tests.fixtures import machines
from tests.fixtures.builders_identity import ata_string, sas_disk_identity, sata_disk_identity, scsi_disks

from storpath.readers.inventory import parse_vpd_serial
from storpath.readers.sas_pcd import parse_phy_control_discover

MACHINE, VARIANT = "supermicro-x11ssh-sas3008", "sas-drives"
SSD_MODEL = "SAMSUNG MZ7LH960HAJR-00005"
TEXT, NUMBER = "text", "number"


def build_machine(root: str) -> Dict[str, str]:
    """The fixture machine with identity pages on every disk; returns its identities
    (value -> TEXT for a serial, NUMBER for a WWN or SAS address as hex digits)."""
    b = machines.load(MACHINE).build(root, VARIANT)
    identities: Dict[str, str] = {}
    for index, (disk, device) in enumerate(scsi_disks(b)):
        if "/end_device-" in device and not os.path.exists(os.path.join(b.sys, device, "vpd_pg89")):
            # SAS: an HGST-style serial of 8 behind 12 spaces, or a Seagate-style one of 20.
            serial = f"0PJ{index}K2LX" if index % 2 else f"ZA1{index}C3D0000C8123ABC"
            port = _port_address(b, device)
            lu_naa, device_naa = 0x5000CCA09A1B0000 + 0x100 * index, 0x5000CCA09A1B0003 + 0x100 * index
            sas_disk_identity(b, device, serial_field=serial.encode().rjust(20 if index % 2 else len(serial)),
                              lu_naa=lu_naa, port_address=port, device_naa=device_naa)
            identities.update({serial: TEXT, "%016x" % lu_naa: NUMBER, "%016x" % device_naa: NUMBER})
        elif "/end_device-" in device:
            # SATA behind the HBA: a Samsung serial, left-aligned in its 20 characters.
            serial, wwn = f"S4ENNX0M70{index}123", 0x5002538E4A1B2C00 + index
            port = _port_address(b, device)
            sata_disk_identity(b, device, serial_field=ata_string(serial, 20), model=SSD_MODEL, wwn=wwn,
                               target_port=port)
            identities.update({serial: TEXT, "%016x" % wwn: NUMBER})
        else:
            # SATA on libata: right-aligned at an odd offset, so its pairs split differently.
            serial, wwn = "WD-WXL1A83H2K9X", 0x50014EE2B5C6D7E8
            ata = re.search(r"/ata(\d+)/", device)
            id_attribute = f"{device[:ata.end() - 1]}/link{ata.group(1)}/dev{ata.group(1)}.0/ata_device/" \
                           f"dev{ata.group(1)}.0/id"
            sata_disk_identity(b, device, serial_field=serial.encode().rjust(20), model=SSD_MODEL, wwn=wwn,
                               id_attribute=id_attribute)
            identities.update({serial: TEXT, "%016x" % wwn: NUMBER})
    # The SAS addresses the fixture gives HBA, expander and drives, and those in the drives'
    # Phy Control And Discover pages (each drive's second port is only there).
    for path in files_named(os.path.join(b.sys, "devices"), "sas_address"):
        identities[open(path).read().strip().lower()[2:].rjust(16, "0")] = NUMBER
    for path in glob.glob(os.path.join(b.captured, "sas", "*", "mode-19-01.bin")):
        phys, _ = parse_phy_control_discover(open(path, "rb").read())
        for phy in phys:
            for address in (phy.sas_address, phy.attached_sas_address):
                if int(address, 16):
                    identities[address[2:]] = NUMBER
    return identities


def files_named(top: str, name: str) -> List[str]:
    """Every file called `name` below `top`, symlinks not followed (sysfs links loop)."""
    return [os.path.join(folder, name) for folder, _, files in os.walk(top) if name in files]


def _port_address(b, device: str) -> int:
    """The SAS address of the end device above a SCSI device, from /sys/class/sas_device."""
    end_device = re.findall(r"/(end_device-[0-9:]+)/", device)[-1]
    return int(open(os.path.join(b.sys, "class/sas_device", end_device, "sas_address")).read(), 16)


def _swapped(data: bytes) -> bytes:
    out = bytearray(data)
    out[0::2], out[1::2] = data[1::2], data[0::2]
    return bytes(out)


def forms(value: str, kind: str) -> List[Tuple[str, re.Pattern]]:
    """(form, pattern) of every way the identity is written in what storpath captures:
    as text (a serial as is; a number as hex digits in either case, with or without a
    0x/naa./wwn- prefix, and split into libata's `id` words by spaces or a newline); a
    serial as its ASCII in hex (the `id` words) and with the characters of each pair
    swapped, from either alignment (IDENTIFY data as stored, vpd_pg89); a number as its
    raw bytes (vpd_pg83, mode pages) and with each 16-bit word's bytes swapped."""
    def spaced_hex(digits: str) -> re.Pattern:
        return re.compile(rb"\s*".join(re.escape(c.encode()) for c in digits), re.I)

    if kind == TEXT:
        raw = value.encode()
        found = [("ascii", re.compile(re.escape(raw))), ("hex of ascii", spaced_hex(raw.hex()))]
        for start in (0, 1):
            part = raw[start:][:(len(raw) - start) // 2 * 2]
            found.append((f"pairs swapped from {start}", re.compile(re.escape(_swapped(part)))))
        return found
    raw = bytes.fromhex(value)
    return [("hex", spaced_hex(value)), ("raw bytes", re.compile(re.escape(raw))),
            ("words swapped", re.compile(re.escape(_swapped(raw))))]


def leaks(archive: str, identities: Dict[str, str]) -> List[str]:
    patterns = [(value, form, pattern) for value, kind in identities.items() for form, pattern in forms(value, kind)]
    found = []
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            data = member.name.encode() + b"\n" + member.linkname.encode()
            if member.isfile():
                data += b"\n" + tar.extractfile(member).read()
            found.extend(f"{member.name}: {value} ({form})" for value, form, pattern in patterns
                         if pattern.search(data))
    return found


@pytest.fixture(scope="module")
def machine(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("identities"))
    return root, build_machine(root)


def test_the_forms_searched_for_are_those_the_capture_holds(machine, tmp_path):
    """Unredacted, the archive holds every identity, and the serials and WWNs in the
    binary forms the redacted archive is searched for: the search can find what leaks."""
    root, identities = machine
    archive, _ = capture(root, str(tmp_path), name="plain")
    found = leaks(archive, identities)
    held = {line.split(": ", 1)[1].split(" (")[0] for line in found}
    # Not captured (no reader reads vpd_pg83): the SAS target devices' NAAs. The logical units'
    # (their `wwid`, which the multipath reader groups dual-ported drives by) are.
    missing = set(identities) - held
    assert missing and all(v.startswith("5000cca09a1b") for v in missing), missing
    assert any(v.startswith("5000cca09a1b") for v in held), held
    for member, form in (("vpd_pg80", "ascii"), ("vpd_pg89", "pairs swapped from 0"), ("/id", "hex of ascii"),
                         ("vpd_pg89", "words swapped"), ("/id", "hex"), ("mode-19-01.bin", "raw bytes")):
        assert any(member in line.split(": ")[0] and f"({form})" in line for line in found), (member, form)


def test_redacted_capture_holds_no_identity_in_any_form(machine, tmp_path):
    root, identities = machine
    archive, replay = capture(root, str(tmp_path), "--redact", name="red")
    assert not leaks(archive, identities)
    # Every page keeps its header and length, and still names one device each.
    serials = set()
    for original in files_named(os.path.join(root, "sys/devices"), "vpd_pg80"):
        redacted = os.path.join(replay, os.path.relpath(original, root))
        before, after = open(original, "rb").read(), open(redacted, "rb").read()
        assert after[:4] == before[:4] and len(after) == len(before)
        assert len(parse_vpd_serial(after)) == len(parse_vpd_serial(before))
        serials.add(parse_vpd_serial(after))
    assert len(serials) == len(scsi_disks_of(root))


def scsi_disks_of(root: str) -> List[str]:
    return [n for n in os.listdir(os.path.join(root, "sys/class/block")) if re.fullmatch(r"sd[a-z]+", n)]


IDENTITY_LABELS = re.compile(r'((?:serial|sas_address|attached_sas_address|address|wwn)=")([^"]+)(")')


def _metrics(root: str, work: str) -> str:
    with run_exporter(paths(root) + ["--web.disable-exporter-metrics"], work) as exporter:
        return exporter.metrics()


def test_replayed_redacted_capture_reads_the_same_and_shows_no_identity(machine, tmp_path):
    """What storpath reads from the pages (SATA link capability from IDENTIFY, the SAS
    drives' PHYs from their mode pages, the disks' serials) comes back from the redacted
    archive, with stand-ins where identities were."""
    root, identities = machine
    _, replay = capture(root, str(tmp_path), "--redact", name="red")
    original, replayed = _metrics(root, str(tmp_path)), _metrics(replay, str(tmp_path))
    for value, kind in identities.items():
        for form, pattern in forms(value, kind):
            assert not pattern.search(replayed.encode()), f"/metrics shows {value} ({form})"
    assert "storpath_inventory_device_info" in replayed

    def normal(text: str) -> List[str]:
        # An identity's place keeps a value: a stand-in (PCI addresses are no identity).
        return sorted(IDENTITY_LABELS.sub(lambda m: m.group(0) if re.fullmatch(r"[0-9a-f]{4}:[0-9a-f:.]+",
                                                                                m.group(2)) else
                                          m.group(1) + "<id>" + m.group(3), line)
                      for line in text.splitlines()
                      if not line.startswith(("storpath_scrape", "storpath_config_last_reload_success_timestamp")))
    assert normal(replayed) == normal(original)
    check_original = storpath("check", *paths(root))
    check_replayed = storpath("check", *paths(replay))
    assert check_replayed.returncode == check_original.returncode
