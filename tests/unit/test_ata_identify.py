"""IDENTIFY DEVICE data as libata's `id` attribute and the ATA Information VPD page hold it,
and the SATA capability (words 76 and 77) read from it."""

from __future__ import annotations

from storpath.readers.ata_identify import (SataCapability, UNREPORTED, capability_of, parse_id_text,
                                           parse_vpd_pg89)


def words_with(w76: int, w77: int = 0) -> list:
    words = [0] * 256
    words[0] = 0x0040
    words[76], words[77] = w76, w77
    return words


def id_text(words) -> str:
    """As drivers/ata/libata-transport.c prints it: "%04x", eight words a line."""
    return "".join("%04x%s" % (w, " " if (i + 1) % 8 else "\n") for i, w in enumerate(words))


def vpd_pg89(words, length: int = 572) -> bytes:
    header = bytes([0x00, 0x89, 0x02, 0x38]) + bytes(4) + b"linux   " + b"libata          " + b"    "
    header += bytes(20) + bytes([0xEC]) + bytes(3)
    assert len(header) == 60
    data = header + b"".join(w.to_bytes(2, "little") for w in words)
    return data[:length]


def test_id_text_of_a_sata_iii_drive():
    # word 76 0x170e: Gen1, Gen2, Gen3 (and NCQ bits); word 77 0x0006: negotiated Gen3
    text = id_text(words_with(0x170E, 0x0006))
    lines = text.splitlines()
    assert len(lines) == 32 and lines[9].split()[4:6] == ["170e", "0006"]
    words, problem = parse_id_text(text)
    assert problem is None and len(words) == 256
    assert capability_of(words) == SataCapability(6.0e9, 6.0e9)


def test_id_text_of_a_sata_ii_drive_held_at_gen1():
    words, _ = parse_id_text(id_text(words_with(0x0006, 0x0002)))
    assert capability_of(words) == SataCapability(3.0e9, 1.5e9)


def test_word_76_unreported():
    for w76 in (0x0000, 0xFFFF):
        words, problem = parse_id_text(id_text(words_with(w76, 0x0006)))
        assert problem is None
        assert capability_of(words) == UNREPORTED


def test_id_text_missing_empty_and_malformed():
    assert parse_id_text(None) == (None, None)
    assert parse_id_text("") == (None, None)  # a port multiplier prints nothing
    words, problem = parse_id_text(id_text(words_with(0x000E))[:-100])  # truncated
    assert words is None and "words" in problem
    bad = id_text(words_with(0x000E)).replace("000e", "00zz", 1)
    words, problem = parse_id_text(bad)
    assert words is None and "unrecognised" in problem
    words, problem = parse_id_text(id_text(words_with(0x000E)).replace("000e", "0000e", 1))
    assert words is None and problem


def test_vpd_pg89_of_a_sata_drive_behind_a_sas_hba():
    words, problem = parse_vpd_pg89(vpd_pg89(words_with(0x0006, 0x0004)))
    assert problem is None and len(words) == 256
    assert capability_of(words) == SataCapability(3.0e9, 3.0e9)


def test_vpd_pg89_unreported_word_76():
    assert capability_of(parse_vpd_pg89(vpd_pg89(words_with(0xFFFF)))[0]) == UNREPORTED
    assert capability_of(parse_vpd_pg89(vpd_pg89(words_with(0x0000)))[0]) == UNREPORTED
    all_zero = bytes([0x00, 0x89]) + bytes(570)
    assert capability_of(parse_vpd_pg89(all_zero)[0]) == UNREPORTED


def test_vpd_pg89_missing_short_or_another_page():
    assert parse_vpd_pg89(None) == (None, None)
    assert parse_vpd_pg89(b"") == (None, None)
    words, problem = parse_vpd_pg89(vpd_pg89(words_with(0x000E), length=200))
    assert words is None and "200 bytes" in problem
    words, problem = parse_vpd_pg89(b"\x00")
    assert words is None and problem
    other = bytearray(vpd_pg89(words_with(0x000E)))
    other[1] = 0x83
    words, problem = parse_vpd_pg89(bytes(other))
    assert words is None and "0x89" in problem


def test_capability_of_short_word_lists():
    assert capability_of(None) == UNREPORTED
    assert capability_of([0x000E] * 77) == UNREPORTED
    assert capability_of(words_with(0x0002)) == SataCapability(1.5e9, None)


# A SATA-III SSD's `id` as libata prints it (words 72-79 on the tenth line: word 75 queue depth,
# 76 0x170e Gen1-3 and NCQ, 77 0x0006 negotiated Gen3).
LITERAL_ID = (
    "0040 3fff 0000 0010 0000 0000 003f 0000\n"
    "0000 0000 0000 0000 0000 0000 0000 0000\n"
    "0000 0000 0000 0000 0000 0000 0000 0000\n"
    "0000 0000 0000 0000 0000 0000 0000 0000\n"
    "0000 0000 0000 0000 0000 0000 0000 0000\n"
    "0000 0000 0000 0000 0000 0000 0000 8001\n"
    "0000 2f00 0000 0000 0000 0007 0000 0000\n"
    "0000 0000 0000 0000 0000 0000 0000 0000\n"
    "0000 0000 0000 0000 0000 0000 0000 0000\n"
    "0000 0000 0000 001f 170e 0006 016c 0040\n"
    "0ff8 0000 0000 7468 0000 0000 0000 0000\n"
    "0000 0000 0000 0000 0000 0000 0000 0000\n"
    "0000 0000 0000 0000 0000 0000 0000 0000\n"
    "0000 0000 0000 0000 0000 0000 0000 0000\n"
    "0000 0000 0000 0000 0000 0000 0000 0000\n"
    "0000 0000 0000 0000 0000 0000 0000 0000\n"
    "0000 0000 0000 0000 0000 0000 0000 0000\n"
    "0000 0000 0000 0000 0000 0000 0000 0000\n"
    "0000 0000 0000 0000 0000 0000 0000 0000\n"
    "0000 0000 0000 0000 0000 0000 0000 0000\n"
    "0000 0000 0000 0000 0000 0000 0000 0000\n"
    "0000 0000 0000 0000 0000 0000 0000 0000\n"
    "0000 0000 0000 0000 0000 0000 0000 0000\n"
    "0000 0000 0000 0000 0000 0000 0000 0000\n"
    "0000 0000 0000 0000 0000 0000 0000 0000\n"
    "0000 0000 0000 0000 0000 0000 0000 0000\n"
    "0000 0000 0000 0000 0000 0000 0000 0000\n"
    "0000 0000 0000 0000 0000 0000 0000 0000\n"
    "0000 0000 0000 0000 0000 0000 0000 0000\n"
    "0000 0000 0000 0000 0000 0000 0000 0000\n"
    "0000 0000 0000 0000 0000 0000 0000 0000\n"
    "0000 0000 0000 0000 0000 0000 0000 5ba5\n"
)


def test_literal_id_text():
    words, problem = parse_id_text(LITERAL_ID)
    assert problem is None and words[76] == 0x170E and words[77] == 0x0006 and words[255] == 0x5BA5
    assert capability_of(words) == SataCapability(6.0e9, 6.0e9)
    assert parse_id_text(LITERAL_ID.replace("170e 0006", "ffff 0006"))[0][76] == 0xFFFF
    assert capability_of(parse_id_text(LITERAL_ID.replace("170e 0006", "ffff 0006"))[0]) == UNREPORTED
    assert capability_of(parse_id_text(LITERAL_ID.replace("170e 0006", "0000 0006"))[0]) == UNREPORTED
    short = "".join(LITERAL_ID.splitlines(keepends=True)[:10])  # a read cut off after 80 words
    assert parse_id_text(short) == (None, "IDENTIFY data of 80 words, expected 256")


def test_literal_vpd_pg89_bytes():
    header = (b"\x00\x89\x02\x38" + b"\x00" * 4 + b"LSI     " + b"LSI SATL        " + b"0008"
              + b"\x34\x00\x00\x00\x01\x01\x00\x00" + b"\x00" * 12 + b"\xec\x00\x00\x00")
    identify = bytearray(512)
    identify[152:156] = b"\x06\x00\x02\x00"  # word 76 0x0006 (Gen1-2), word 77 0x0002 (Gen1): little-endian
    words, problem = parse_vpd_pg89(header + bytes(identify))
    assert problem is None and words[76] == 0x0006 and words[77] == 0x0002
    assert capability_of(words) == SataCapability(3.0e9, 1.5e9)
    assert parse_vpd_pg89(header + bytes(identify[:100]))[1] == "ATA Information VPD page of 160 bytes, expected 572"
    assert capability_of(parse_vpd_pg89(header + bytes(512))[0]) == UNREPORTED  # all-zero IDENTIFY data
    identify[152:154] = b"\xff\xff"
    assert capability_of(parse_vpd_pg89(header + bytes(identify))[0]) == UNREPORTED
