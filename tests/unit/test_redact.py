"""The redactor on the binary structures a capture holds: identities learned from their
fields, rewritten in place with stand-ins of their length, the same stand-in for one
identity in every form, and the readers still parse the result."""

from __future__ import annotations

from storpath.report.capture.files import Tree
from storpath.report.capture.redact import Redactor
from storpath.readers.ata_identify import capability_of, parse_id_text, parse_vpd_pg89
from storpath.readers.inventory import parse_vpd_serial
from storpath.readers.sas_pcd import parse_phy_control_discover
from tests.fixtures.builders_identity import (ASCII, BINARY, LOGICAL_UNIT, NAA, PROTOCOL_SAS, RELATIVE_TARGET_PORT,
                                              SCSI_NAME_STRING, T10_VENDOR_ID, TARGET_PORT, UTF8, ata_string,
                                              designator, identify_with, vpd_page, vpd_pg80)
from tests.fixtures.builders_sas import ata_id_text, identify_words, phy_control_discover, vpd_pg89

PORT = 0x5000CCA0A1B2D031
LU = 0x5000CCA0A1B2D030
SERIAL = "0PJ1K2LX"


def learned(files: dict) -> Redactor:
    redactor = Redactor(key=b"k" * 16)
    tree = Tree("/nonexistent")
    tree.files = dict(files)
    redactor.learn_sysfs(tree)
    return redactor


def test_unit_serial_number_page_keeps_its_header_and_length():
    page = vpd_pg80(b"            " + SERIAL.encode())
    r = learned({"d/vpd_pg80": page})
    out = r.apply("d/vpd_pg80", page)
    assert out[:4] == page[:4] and len(out) == len(page) and out[4:16] == b" " * 12
    stand_in = parse_vpd_serial(out)
    assert SERIAL.encode() not in out and len(stand_in) == len(SERIAL) and stand_in == r.token(SERIAL)
    # Another drive's serial of the same length gets another stand-in.
    other = vpd_pg80(b"0PJ1K2LY")
    assert parse_vpd_serial(learned({"a/vpd_pg80": page, "b/vpd_pg80": other}).apply("b/vpd_pg80", other)) \
        != stand_in


def test_a_page_that_is_not_the_page_its_name_says_is_blanked():
    bogus = bytes([0, 0x00, 0, 8]) + SERIAL.encode()
    assert learned({}).apply("d/vpd_pg80", bogus) == bytes(len(bogus))


def test_device_identification_page_keeps_what_names_no_device():
    page = vpd_page(0x83, b"".join([
        designator(BINARY, LOGICAL_UNIT, NAA, LU.to_bytes(8, "big")),
        designator(ASCII, LOGICAL_UNIT, T10_VENDOR_ID, b"ATA     " + ata_string("SAMSUNG MZ7LH960HAJR-00005", 40)
                   + ata_string("S4ENNX0M700123", 20)),
        designator(BINARY, TARGET_PORT, NAA, PORT.to_bytes(8, "big"), PROTOCOL_SAS),
        designator(BINARY, TARGET_PORT, RELATIVE_TARGET_PORT, (1).to_bytes(4, "big"), PROTOCOL_SAS),
        designator(UTF8, TARGET_PORT, SCSI_NAME_STRING, b"naa.%016X\x00\x00\x00\x00" % PORT, PROTOCOL_SAS)]))
    # The port's address as sysfs shows it: the binary designator gets the same stand-in.
    r = learned({"d/vpd_pg83": page, "end_device-0:3/sas_address": b"0x%016x\n" % PORT})
    out = r.apply("d/vpd_pg83", page)
    assert len(out) == len(page) and out[:4] == page[:4]
    stand_in = bytes.fromhex(r.token("0x%016x" % PORT)[2:])
    assert PORT.to_bytes(8, "big") not in out and stand_in in out
    assert b"naa.%s" % stand_in.hex().upper().encode() in out  # the SCSI name string, in its case
    assert LU.to_bytes(8, "big") not in out and b"S4ENNX0M700123" not in out
    assert b"ATA     SAMSUNG MZ7LH960HAJR-00005" in out and (1).to_bytes(4, "big") in out
    assert [out[i] for i in (4, 5, 7)] == [page[i] for i in (4, 5, 7)]  # descriptor headers unchanged


def test_identify_data_in_vpd_pg89_and_libata_id_get_one_stand_in():
    words = identify_with(identify_words(3, 3), serial_field=b"     WD-WXL1A83H2K9X", model="WDC WD40EFRX",
                          wwn=0x50014EE2B5C6D7E8)
    page, text = vpd_pg89(words), ata_id_text(words).encode()
    r = learned({"t/vpd_pg89": page, "ata_device/dev1.0/id": text})
    out_page, out_text = r.apply("t/vpd_pg89", page), r.apply("ata_device/dev1.0/id", text)
    page_words, _ = parse_vpd_pg89(out_page)
    text_words, _ = parse_id_text(out_text.decode())
    assert page_words == text_words and len(out_page) == len(page) and len(out_text) == len(text)
    assert capability_of(page_words) == capability_of(words)  # words 76/77: what storpath reads
    assert page_words[27:47] == words[27:47]  # the model stays
    assert page_words[10:20] != words[10:20] and page_words[108:112] != words[108:112]
    assert b"0x50014ee2b5c6d7e8" not in r.apply("x/wwid", b"0x50014ee2b5c6d7e8\n")
    assert b"W -DXW1L8AH3K2X9" in page  # the serial as IDENTIFY stores it: each pair swapped
    for form in (b"-DXW1L8AH3K2X9", bytes.fromhex("0150e24ec6b5e8d7"), b"WD-WXL1A83H2K9X".hex().encode(),
                 b"50014ee2b5c6d7e8"):
        assert form not in out_page and form not in out_text.replace(b" ", b"").replace(b"\n", b"")


def test_sas_addresses_in_a_mode_page_get_the_sysfs_stand_ins():
    data = phy_control_discover([dict(sas_address=PORT, attached=0x500304801F3A2C00, negotiated="6.0 Gbit",
                                      hw_max="12.0 Gbit")])
    r = learned({"end_device-0:3/sas_address": b"0x%016x\n" % PORT})
    phys, problem = parse_phy_control_discover(r.apply("sas/end_device-0:3/mode-19-01.bin", data))
    assert problem is None
    assert phys[0].sas_address == r.token("0x%016x" % PORT)
    assert phys[0].attached_sas_address not in ("0x500304801f3a2c00", "0x0000000000000000")
    assert phys[0].hardware_maximum_rate == 12e9


def test_a_known_identity_is_found_as_raw_bytes_in_any_binary_file():
    r = learned({"end_device-0:3/sas_address": b"0x%016X\n" % PORT})
    raw = PORT.to_bytes(8, "big")
    swapped = bytes(raw[i ^ 1] for i in range(8))  # as 16-bit little-endian words
    blob = b"\x01\x02" + raw + b"\xff" + swapped
    out = r.apply("captured/unknown.bin", blob)
    assert raw not in out and swapped not in out and len(out) == len(blob)
    text = r.apply("captured/zpool-status.txt", b"wwn-0x%016x and 0x%016X\n" % (PORT, PORT))
    assert b"%016x" % PORT not in text.lower()


# NVMe over Fabrics controller `address` (drivers/nvme/host/fabrics.c, nvmf_get_address):
# `traddr=%s,trsvcid=%s` then `,host_traddr=%s` / `,src_addr=%s` when set.
TCP_ADDRESS = b"traddr=192.168.1.10,trsvcid=4420,host_traddr=192.168.1.2,src_addr=192.168.1.2\n"
RDMA6_ADDRESS = b"traddr=fd00:1::10,trsvcid=4420,host_traddr=fd00:1::2\n"


def test_fabrics_addresses_get_one_stand_in_each_in_every_file():
    other = b"traddr=192.168.1.100,trsvcid=4420\n"
    r = learned({"nvme0/address": TCP_ADDRESS, "nvme1/address": RDMA6_ADDRESS, "nvme2/address": other})
    out0 = r.apply("nvme0/address", TCP_ADDRESS).decode()
    out1 = r.apply("nvme1/address", RDMA6_ADDRESS).decode()
    out2 = r.apply("nvme2/address", other).decode()
    for secret in ("192.168.1.10", "192.168.1.2", "fd00:1::10", "fd00:1::2", "192.168.1.100"):
        assert secret not in out0 + out1 + out2, (secret, out0, out1, out2)
    assert out0.startswith("traddr=198.18.") and ",trsvcid=4420," in out0
    fields = dict(part.split("=", 1) for part in out0.strip().split(","))
    assert fields["host_traddr"] == fields["src_addr"] != fields["traddr"]
    assert out1.startswith("traddr=2001:db8::") and out2.strip() not in (out0, out1)
    # The same address in another file (nvme list-subsys text) gets the same stand-in.
    listing = r.apply("outputs/nvme-list-subsys.txt", b" +- nvme0 tcp traddr=192.168.1.10,trsvcid=4420 live\n")
    assert fields["traddr"].encode() in listing and b"192.168.1.10" not in listing


def test_a_pcie_controller_address_is_no_fabrics_address_and_stays():
    pcie = b"0000:01:00.0\n"
    r = learned({"nvme0/address": pcie})
    assert r.apply("nvme0/address", pcie) == pcie


LUKS_UUID = "3f6d1c2a-8b4e-4c1d-9a7f-0e5b6c7d8e9f"
LUKS_HEX = LUKS_UUID.replace("-", "")


def test_luks_uuid_in_dm_name_and_dm_uuid_gets_one_stand_in():
    name = f"luks-{LUKS_UUID}\n".encode()
    for version in ("LUKS1", "LUKS2"):
        uuid = f"CRYPT-{version}-{LUKS_HEX}-luks-{LUKS_UUID}\n".encode()
        r = learned({"block/dm-0/dm/name": name, "block/dm-0/dm/uuid": uuid})
        out_name = r.apply("block/dm-0/dm/name", name).decode().strip()
        out_uuid = r.apply("block/dm-0/dm/uuid", uuid).decode().strip()
        assert LUKS_UUID not in out_name + out_uuid and LUKS_HEX not in out_uuid
        assert out_name.startswith("luks-") and len(out_name) == len(name) - 1
        stand_in = out_name[len("luks-"):]
        assert out_uuid == f"CRYPT-{version}-{stand_in.replace('-', '')}-luks-{stand_in}"
        # dmsetup's text names the volume the same way.
        table = r.apply("outputs/dmsetup-info.txt", f"Name: luks-{LUKS_UUID}\n".encode())
        assert table.decode() == f"Name: luks-{stand_in}\n"


def test_luks_uuid_learned_from_command_output_alone():
    r = Redactor(key=b"k" * 16)
    tree = Tree("/nonexistent")
    tree.files = {"dmsetup-ls.txt": f"luks-{LUKS_UUID}\t(253:0)\n".encode()}
    r.learn_outputs(tree)
    assert LUKS_UUID.encode() not in r.apply("dmsetup-ls.txt", tree.files["dmsetup-ls.txt"])


# `nvme connect -t tcp -a array1.example.com -w client-a.example.com --host-iface=ens1f0`: the
# kernel prints what it was given (nvmf_get_address), host names included.
HOSTNAME_ADDRESS = (b"traddr=array1.example.com,trsvcid=4420,host_traddr=client-a.example.com,"
                    b"host_iface=ens1f0\n")
SHORT_ADDRESS = b"traddr=nas1,trsvcid=4420,host_iface=san0\n"


def test_fabrics_host_names_and_host_iface_get_stand_ins():
    r = learned({"nvme0/address": HOSTNAME_ADDRESS, "nvme1/address": SHORT_ADDRESS})
    out0 = r.apply("nvme0/address", HOSTNAME_ADDRESS).decode()
    out1 = r.apply("nvme1/address", SHORT_ADDRESS).decode()
    for secret in ("array1", "client-a", "ens1f0", "nas1", "san0"):
        assert secret not in out0 + out1, (secret, out0, out1)
    fields = dict(part.split("=", 1) for part in out0.strip().split(","))
    assert fields["traddr"].endswith(".example") and fields["host_traddr"].endswith(".example")
    assert fields["traddr"] != fields["host_traddr"] and fields["trsvcid"] == "4420"
    assert len(fields["host_iface"]) <= 15 and fields["host_iface"] != "ens1f0"
    assert dict(part.split("=", 1) for part in out1.strip().split(","))["traddr"].endswith(".example")
    # The same host name in a command's text gets the same stand-in, as a whole name only.
    listing = r.apply("outputs/nvme-list-subsys.txt",
                      b" +- nvme0 tcp traddr=array1.example.com,trsvcid=4420 live (array1.example.community)\n")
    assert fields["traddr"].encode() in listing and b"array1.example.community" in listing
    assert b"traddr=array1.example.com," not in listing


def test_file_names_that_carry_identities_are_redacted_with_their_links():
    """A by-id name (a serial or a WWN in it), a WWID in a folder's name: redacted in every
    file and link name and link target, with the stand-ins the files' text gets."""
    from storpath.report.capture.archive import redact_names

    wwid = "naa.5000cca25ca8f1d0"
    serial = "S5Y1NJ0R123456"
    tree = Tree("/nonexistent")
    tree.files = {"block/sda/device/wwid": f"{wwid}\n".encode(),
                  f"devices/virtual/wwids/{wwid}/state": b"running\n",
                  f"disk/by-id/ata-Samsung_SSD_870_EVO_{serial}/size": b"1\n"}
    tree.links = {f"disk/by-id/wwn-0x5000cca25ca8f1d0": "../../block/sda",
                  "disk/by-path/sda": f"../by-id/ata-Samsung_SSD_870_EVO_{serial}"}
    tree.dirs = {f"devices/virtual/wwids/{wwid}"}
    tree.mtimes = {f"devices/virtual/wwids/{wwid}/state": 1.0}
    r = Redactor(key=b"k" * 16)
    r.learn_sysfs(tree)
    r.learn_names([*tree.files, *tree.links, *tree.links.values()])
    tree.files = {rel: r.apply(rel, data) for rel, data in tree.files.items()}
    redact_names(tree, r)
    names = " ".join([*tree.files, *tree.links, *tree.links.values(), *tree.dirs, *tree.mtimes])
    for secret in ("5000cca25ca8f1d0", serial):
        assert secret not in names.lower() and secret.lower() not in names.lower(), names
    stand_in = tree.files["block/sda/device/wwid"].decode().strip()
    assert f"devices/virtual/wwids/{stand_in}/state" in tree.files  # the same stand-in as the text's
    assert f"devices/virtual/wwids/{stand_in}" in tree.dirs
    by_id = next(rel for rel in tree.files if rel.startswith("disk/by-id/ata-"))
    assert tree.links["disk/by-path/sda"] == "../by-id/" + by_id.split("/")[2]  # the link still leads there
    assert "disk/by-id/wwn-0x" + stand_in[len("naa."):] in tree.links
