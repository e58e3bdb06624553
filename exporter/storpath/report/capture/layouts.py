"""Where identities sit inside the binary structures (and the one hex dump) a capture
holds, so the redactor learns them from the bytes and rewrites them in place: the same
length, the same header and page length, so a replay parses the file as before.

- vpd_pg80, the Unit Serial Number VPD page (SPC-4 7.8.15, SPC-5 7.7.18): byte 0 the
  peripheral qualifier and device type, byte 1 the page code 80h, bytes 2-3 the page
  length (big-endian), then the serial in ASCII, often padded with spaces on either side.
- vpd_pg83, the Device Identification VPD page (SPC-4 7.8.6): a 4-byte header as above
  (page code 83h), then designation descriptors: byte 0 protocol identifier (7:4) and code
  set (3:0: 1 binary, 2 ASCII, 3 UTF-8), byte 1 PIV, association and designator type
  (3:0), byte 3 the designator length, then the designator. Types that identify the
  hardware: 0 vendor specific in ASCII (libata puts the ATA serial there), 1 T10 vendor ID (8 bytes
  of vendor, then a vendor specific part; libata: "ATA     " + model + serial), 2 EUI-64,
  3 NAA, 7 MD5 logical unit identifier, 8 SCSI name string ("naa.5000C500...").
  The SCSI midlayer shows both pages raw as the binary attributes vpd_pg80 and vpd_pg83 of
  the SCSI device (drivers/scsi/scsi_sysfs.c; libata answers them itself,
  drivers/ata/libata-scsi.c ata_scsiop_inq_80/_83).
- IDENTIFY DEVICE data (ACS-3 7.12.7): words 10-19 the serial number, 108-111 the world
  wide name, 176-205 the current media serial number. ATA strings hold their first
  character in bits 15:8 of each word. Seen as vpd_pg89 (the ATA Information VPD page,
  SAT-3 12.4.2: the 512 bytes from byte 60, little-endian words, so every pair of
  characters swapped) and as libata's `id` attribute (four hex digits a word,
  drivers/ata/libata-transport.c): both are turned into the words' big-endian bytes, where
  the strings read in order and the WWN is the NAA value as vpd_pg83 shows it.
- NVMe Identify Namespace (NGUID bytes 104-119, EUI-64 120-127) and Identify Controller
  (serial bytes 4-23, FRU GUID 112-127) of the NVMe base specification.
- The Phy Control And Discover mode page (storpath.readers.sas_pcd): every 48-byte PHY
  descriptor holds the drive port's SAS address (bytes 8-15) and the attached one (16-23).
"""

from __future__ import annotations

import re
from typing import Callable, List, Optional

from storpath.base.records import datarecord
from storpath.readers.ata_identify import IDENTIFY_WORDS, VPD_PG89_IDENTIFY_OFFSET, VPD_PG89_PAGE_CODE
from storpath.readers.nvme_health import ID_CTRL_FILE
from storpath.readers.sas_pcd import CAPTURED_NAME as PCD_FILE
from storpath.readers.sas_pcd import DESCRIPTOR_BYTES, MODE_SENSE10_HEADER

# An ASCII string, padded; a binary identifier shown as hex (NAA, EUI-64); a page that
# should hold identities but does not parse (zeroed: its reader cannot read it either).
TEXT, NUMBER, OPAQUE = "text", "number", "opaque"


@datarecord(frozen=True)
class Field:
    """One identity's bytes in a decoded file, from start up to end (excluded), and what kind of value it is."""

    start: int
    end: int
    kind: str  # TEXT, NUMBER or OPAQUE


@datarecord(frozen=True)
class Layout:
    """Fields of a file's bytes as `decode` gives them; `encode(rewritten, original)`
    turns rewritten bytes back into the file's own form."""

    fields: List[Field]
    decode: Callable[[bytes], bytes] = bytes
    encode: Callable[[bytes, bytes], bytes] = lambda rewritten, original: rewritten


# ---- SCSI VPD pages -----------------------------------------------------------------

def _vpd_length(data: bytes, page_code: int) -> Optional[int]:
    """The end of the page's payload within `data`, or None when it is not that page."""
    if len(data) < 4 or data[1] != page_code:
        return None
    return min(len(data), 4 + int.from_bytes(data[2:4], "big"))


def vpd_pg80(data: bytes) -> List[Field]:
    end = _vpd_length(data, 0x80)
    return [] if end is None else [Field(4, end, TEXT)]


CODE_SET_BINARY, CODE_SET_ASCII, CODE_SET_UTF8 = 1, 2, 3
T10_VENDOR_LENGTH = 8


def vpd_pg83(data: bytes) -> List[Field]:
    end = _vpd_length(data, 0x83)
    if end is None:
        return []
    fields, at = [], 4
    while at + 4 <= end:
        code_set, kind, length = data[at] & 0x0F, data[at + 1] & 0x0F, data[at + 3]
        start, stop = at + 4, min(end, at + 4 + length)
        text = code_set in (CODE_SET_ASCII, CODE_SET_UTF8)
        if kind == 1 and text:
            # T10 vendor ID: the vendor, then what the vendor chose; its last word is the
            # serial (libata: "ATA     " + model + serial), the rest names the model.
            body = data[start + T10_VENDOR_LENGTH:stop].rstrip(b" \x00")
            if body:
                first = start + T10_VENDOR_LENGTH + max(body.rfind(b" "), body.rfind(b"\x00")) + 1
                fields.append(Field(first, start + T10_VENDOR_LENGTH + len(body), TEXT))
        elif kind in (0, 8) and text:
            fields.append(Field(start, stop, TEXT))
        elif kind in (2, 3, 7) and code_set == CODE_SET_BINARY and stop - start >= 8:
            fields.append(Field(start, stop, NUMBER))
        at += 4 + length
    return fields


# ---- ATA IDENTIFY DEVICE data ---------------------------------------------------------

IDENTIFY_FIELDS = [Field(2 * 10, 2 * 20, TEXT), Field(2 * 108, 2 * 112, NUMBER), Field(2 * 176, 2 * 206, TEXT)]


def swap_pairs(data: bytes) -> bytes:
    """The bytes of every 16-bit word swapped (ATA words are stored little-endian)."""
    out = bytearray(data)
    out[0::2], out[1::2] = data[1::2], data[0::2]
    return bytes(out)


def vpd_pg89() -> Layout:
    start, end = VPD_PG89_IDENTIFY_OFFSET, VPD_PG89_IDENTIFY_OFFSET + 2 * IDENTIFY_WORDS
    return Layout([Field(f.start + start, f.end + start, f.kind) for f in IDENTIFY_FIELDS],
                  decode=lambda data: data[:start] + swap_pairs(data[start:end]) + data[end:],
                  encode=lambda rewritten, _: rewritten[:start] + swap_pairs(rewritten[start:end]) + rewritten[end:])


ID_WORD = re.compile(rb"[0-9a-fA-F]{4}")


def _id_text_encode(rewritten: bytes, original: bytes) -> bytes:
    """The rewritten words into the original text, each in its place and case."""
    words = iter(rewritten[i:i + 2].hex().encode() for i in range(0, len(rewritten), 2))

    def word(match) -> bytes:
        new = next(words)
        return new.upper() if match.group(0).isupper() else new

    return ID_WORD.sub(word, original)


def ata_id_text() -> Layout:
    return Layout(IDENTIFY_FIELDS, decode=lambda data: bytes.fromhex(b"".join(ID_WORD.findall(data)).decode()),
                  encode=_id_text_encode)


def _is_id_text(data: bytes) -> bool:
    return len(ID_WORD.findall(data)) == IDENTIFY_WORDS and not data.translate(None, b"0123456789abcdefABCDEF \n")


# ---- NVMe Identify, SAS mode page ----------------------------------------------------

def phy_control_discover(data: bytes) -> List[Field]:
    """The SAS addresses of every PHY descriptor (the same walk as readers.sas_pcd)."""
    if len(data) < MODE_SENSE10_HEADER:
        return []
    page = MODE_SENSE10_HEADER + int.from_bytes(data[6:8], "big")
    if page + 8 > len(data):
        return []
    first, fields = page + 8, []
    for index in range(data[page + 7]):
        descriptor = first + index * DESCRIPTOR_BYTES
        if descriptor + 24 > len(data):
            break
        fields += [Field(descriptor + 8, descriptor + 16, NUMBER), Field(descriptor + 16, descriptor + 24, NUMBER)]
    return fields


def layout_of(name: str, data: bytes) -> Optional[Layout]:
    """The layout of a file named `name` (its base name), or None when it has none."""
    if name in ("vpd_pg80", "vpd_pg83"):
        page_code = 0x80 if name == "vpd_pg80" else 0x83
        if _vpd_length(data, page_code) is None:
            return Layout([Field(0, len(data), OPAQUE)])
        return Layout(vpd_pg80(data) if page_code == 0x80 else vpd_pg83(data))
    if name == "vpd_pg89" and len(data) >= VPD_PG89_IDENTIFY_OFFSET + 2 * IDENTIFY_WORDS \
            and data[1] == VPD_PG89_PAGE_CODE:
        return vpd_pg89()
    if name == "id" and _is_id_text(data):
        return ata_id_text()
    if name.endswith(".id-ns") and len(data) >= 128:
        return Layout([Field(104, 120, NUMBER), Field(120, 128, NUMBER)])
    if name == ID_CTRL_FILE and len(data) >= 128:
        return Layout([Field(4, 24, TEXT), Field(112, 128, NUMBER)])
    if name == PCD_FILE:
        return Layout(phy_control_discover(data))
    return None
