"""A SATA drive's own link capability, from its IDENTIFY DEVICE data, read without privilege.

Two places hold the 256 IDENTIFY words:

- libata: /sys/class/ata_device/devP.D/id (mode 0444), drivers/ata/libata-transport.c,
  the show function of the `id` attribute (show_ata_dev_id): every word printed as four
  lower-case hex digits ("%04x"), eight words a line, separated by a space and ended by a
  newline; empty for a port multiplier.
- a SATA drive behind a SAS HBA (SCSI/ATA translation): the ATA Information VPD page
  (0x89, SAT-3 section 12.4.2; the VPD page layout of SPC-4) that the SCSI midlayer
  caches and shows as the binary attribute vpd_pg89 of the SCSI device (mode 0444,
  drivers/scsi/scsi_sysfs.c). Bytes 0-3 the VPD header, 8-35 the SAT's vendor, product
  and revision, 36-55 the device signature, 56 the command code (0xEC IDENTIFY DEVICE),
  and from byte 60 the 512 bytes of IDENTIFY data, little-endian words.

Words (ACS-3, 7.12.7):
- 76, Serial ATA capabilities: bit 1 Gen1 (1.5 Gbit/s), bit 2 Gen2 (3.0), bit 3 Gen3 (6.0)
  supported. 0x0000 or 0xFFFF: the word is not reported (not a SATA device, or an old one).
- 77, Serial ATA additional capabilities: bits 3:1 the current negotiated speed (1 Gen1,
  2 Gen2, 3 Gen3; 0 not reported).
"""

from __future__ import annotations

from typing import List, Optional, Tuple

from storpath.base.records import datarecord

IDENTIFY_WORDS = 256
VPD_PG89_IDENTIFY_OFFSET = 60
VPD_PG89_PAGE_CODE = 0x89

# SATA generation -> bit transfers per second.
GENERATION_RATES = {1: 1.5e9, 2: 3.0e9, 3: 6.0e9}


@datarecord(frozen=True)
class SataCapability:
    """What a SATA drive says of its link in IDENTIFY words 76 and 77."""

    maximum: Optional[float]  # fastest generation word 76 lists; None: not reported
    current: Optional[float]  # word 77 bits 3:1; None: not reported


UNREPORTED = SataCapability(None, None)


def capability_of(words: Optional[List[int]]) -> SataCapability:
    """Words 76 and 77 of IDENTIFY data (at least 78 words) as rates."""
    if words is None or len(words) < 78:
        return UNREPORTED
    w76, w77 = words[76], words[77]
    maximum = None
    if w76 not in (0x0000, 0xFFFF):
        for generation in (3, 2, 1):
            if w76 & (1 << generation):
                maximum = GENERATION_RATES[generation]
                break
    current = None
    if w76 not in (0x0000, 0xFFFF) and w77 not in (0x0000, 0xFFFF):
        current = GENERATION_RATES.get((w77 >> 1) & 0x7)
    return SataCapability(maximum, current)


def parse_id_text(text: Optional[str]) -> Tuple[Optional[List[int]], Optional[str]]:
    """(words, problem) from libata's `id` attribute. Missing or empty (a port multiplier)
    -> (None, None); not 256 four-digit hex words -> (None, 'unrecognised ...')."""
    if text is None:
        return None, None
    fields = text.split()
    if not fields:
        return None, None
    if len(fields) != IDENTIFY_WORDS:
        return None, f"IDENTIFY data of {len(fields)} words, expected {IDENTIFY_WORDS}"
    words = []
    for field in fields:
        if len(field) != 4 or not all(c in "0123456789abcdefABCDEF" for c in field):
            return None, f"unrecognised IDENTIFY word {field[:16]!r}"
        words.append(int(field, 16))
    return words, None


def parse_vpd_pg89(data: Optional[bytes]) -> Tuple[Optional[List[int]], Optional[str]]:
    """(words, problem) from the binary vpd_pg89 attribute. Missing or empty (the device
    has no such page: a SAS drive) -> (None, None); another page code or fewer than the 60
    header bytes and 512 IDENTIFY bytes -> (None, problem)."""
    if not data:
        return None, None
    if len(data) < 2 or data[1] != VPD_PG89_PAGE_CODE:
        return None, "not an ATA Information VPD page (page code is not 0x89)"
    end = VPD_PG89_IDENTIFY_OFFSET + 2 * IDENTIFY_WORDS
    if len(data) < end:
        return None, f"ATA Information VPD page of {len(data)} bytes, expected {end}"
    identify = data[VPD_PG89_IDENTIFY_OFFSET:end]
    return [identify[i] | (identify[i + 1] << 8) for i in range(0, len(identify), 2)], None
