"""The Identify Namespace parsers, on real data from QEMU's NVMe device (captured with
nvme-cli 2.3 under the lab's Debian 6.1 kernel, tests/fixtures/nvme_identify/) and on
structures built per the NVMe Base Specification, including malformed ones."""

import json
import os

import pytest

from storpath.analysis.nvme import best_format, judge
from storpath.readers.nvme import IdentifyError, LbaFormat, parse_id_ns_json, parse_identify_namespace
from tests.fixtures.builders_nvme import Fmt, id_ns_json, identify_namespace

DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "nvme_identify")
QEMU_FORMATS = [(512, 0), (512, 8), (512, 16), (512, 64), (4096, 0), (4096, 8), (4096, 16), (4096, 64)]


def _read(name, mode="rb"):
    with open(os.path.join(DATA, name), mode) as handle:
        return handle.read()


def _sizes(identify):
    return [(f.data_size, f.metadata_size) for f in identify.formats]


# ---- real data from QEMU ---------------------------------------------------------

def test_qemu_binary_at_format_0():
    ns = parse_identify_namespace(_read("qemu-id-ns-lbaf0.bin"))
    assert _sizes(ns) == QEMU_FORMATS
    assert [f.index for f in ns.formats] == list(range(8))
    assert ns.in_use_index == 0
    assert ns.in_use == LbaFormat(0, 512, 0, 0)
    assert ns.size_blocks == 262144  # 128 MiB in 512-byte blocks
    assert {f.relative_performance_name for f in ns.formats} == {"best"}


def test_qemu_binary_after_format_4():
    ns = parse_identify_namespace(_read("qemu-id-ns-lbaf4.bin"))
    assert ns.in_use == LbaFormat(4, 4096, 0, 0)
    assert ns.size_blocks == 32768


def test_qemu_json_matches_binary():
    for name in ("lbaf0", "lbaf4"):
        assert parse_id_ns_json(_read(f"qemu-id-ns-{name}.json", "r")) == \
            parse_identify_namespace(_read(f"qemu-id-ns-{name}.bin"))


def test_qemu_json_with_metadata_in_use():
    ns = parse_id_ns_json(_read("qemu-id-ns-lbaf5.json", "r"))
    assert ns.in_use == LbaFormat(5, 4096, 8, 0)
    verdict = judge(ns)
    # Only the 8-byte-metadata formats are candidates: 512+8 and 4096+8, both Best.
    assert verdict.best == LbaFormat(5, 4096, 8, 0)
    assert not verdict.improvable


def test_qemu_at_512_should_go_to_4096_same_metadata():
    verdict = judge(parse_identify_namespace(_read("qemu-id-ns-lbaf0.bin")))
    assert verdict.best == LbaFormat(4, 4096, 0, 0)
    assert verdict.improvable


# ---- built structures: the four drive stories -------------------------------------

def test_firecuda_530_at_512_with_4k_best_available():
    data = identify_namespace([Fmt(512, 0, 1), Fmt(4096, 0, 0)], 0, 2_000_398_934_016)
    assert len(data) == 4096
    ns = parse_identify_namespace(data)
    assert ns.in_use == LbaFormat(0, 512, 0, 1)
    assert ns.in_use.relative_performance_name == "better"
    assert ns.size_blocks == 2_000_398_934_016 // 512
    verdict = judge(ns)
    assert verdict.best == LbaFormat(1, 4096, 0, 0) and verdict.improvable


def test_drive_already_at_4k():
    ns = parse_identify_namespace(identify_namespace([Fmt(512, 0, 2), Fmt(4096, 0, 0)], 1, 15_362_991_415_296))
    verdict = judge(ns)
    assert verdict.in_use.data_size == 4096 and verdict.best == verdict.in_use and not verdict.improvable


def test_drive_with_metadata_formats():
    formats = [Fmt(512, 0, 2), Fmt(512, 8, 2), Fmt(512, 16, 2), Fmt(4096, 0, 0), Fmt(4096, 8, 0), Fmt(4096, 64, 0)]
    ns = parse_identify_namespace(identify_namespace(formats, 1, 3_200_631_791_616))
    assert [f.metadata_size for f in ns.formats] == [0, 8, 16, 0, 8, 64]
    assert judge(ns).best == LbaFormat(4, 4096, 8, 0)  # same 8 bytes of metadata, not 4096+0
    ns16 = parse_identify_namespace(identify_namespace(formats, 2, 3_200_631_791_616))
    assert judge(ns16).best == LbaFormat(2, 512, 16, 2)  # no 4096+16: nothing better with 16 bytes


def test_drive_with_a_single_format():
    data = identify_namespace([Fmt(512, 0, 0)], 0, 1_000_204_886_016)
    ns = parse_identify_namespace(data)
    assert _sizes(ns) == [(512, 0)]
    assert judge(ns).best == ns.in_use
    text = id_ns_json([Fmt(512, 0, 0)], 0, 1_000_204_886_016)
    assert parse_id_ns_json(text) == ns
    assert json.loads(text)["nlbaf"] == 0


def test_relative_performance_ranks_before_size():
    formats = [LbaFormat(0, 512, 0, 0), LbaFormat(1, 4096, 0, 1), LbaFormat(2, 8192, 0, 3)]
    assert best_format(formats, formats[1]) == formats[0]
    # Same rating: the larger data size wins; a tie keeps the format in use.
    same = [LbaFormat(0, 512, 0, 2), LbaFormat(1, 4096, 0, 2), LbaFormat(2, 4096, 0, 2)]
    assert best_format(same, same[0]) == same[1]
    assert best_format(same, same[2]) == same[2]


# ---- bit fields --------------------------------------------------------------------

def test_flbas_high_bits_only_count_beyond_16_formats():
    many = [Fmt(512, m) for m in range(0, 20)]
    data = identify_namespace(many, 18, 1 << 30)
    assert data[26] == (18 & 0xF) | (1 << 5)
    assert parse_identify_namespace(data).in_use_index == 18
    # With few formats, bits 6:5 are junk the host must ignore; bit 4 (extended LBA) too.
    few = bytearray(identify_namespace([Fmt(512), Fmt(4096)], 1, 1 << 30))
    few[26] |= 0x70
    assert parse_identify_namespace(bytes(few)).in_use_index == 1


def test_descriptor_bit_fields():
    word = 64 | (12 << 16) | (3 << 24) | (0xFC << 24)  # reserved bits 31:26 set
    ns = parse_identify_namespace(identify_namespace([Fmt(4096)], 0, 1 << 30, raw_descriptors=[word]))
    assert ns.formats == (LbaFormat(0, 4096, 64, 3),)
    assert ns.formats[0].relative_performance_name == "degraded"


def test_unavailable_formats_are_skipped():
    words = [0 | (9 << 16), 0, 8 | (12 << 16)]  # format 1 has LBADS 0: not available
    data = bytearray(identify_namespace([Fmt(512), Fmt(512), Fmt(4096, 8)], 0, 1 << 30, raw_descriptors=words))
    ns = parse_identify_namespace(bytes(data))
    assert [f.index for f in ns.formats] == [0, 2]


# ---- malformed -------------------------------------------------------------------

@pytest.mark.parametrize("data,why", [
    (b"", "0 bytes"),
    (bytes(100), "100 bytes"),
    (bytes(4096), "no available LBA format"),  # an inactive namespace reads as zeros
])
def test_short_or_empty_structures(data, why):
    with pytest.raises(IdentifyError, match=why):
        parse_identify_namespace(data)


def test_in_use_index_beyond_nlbaf():
    data = bytearray(identify_namespace([Fmt(512), Fmt(4096)], 0, 1 << 30))
    data[26] = 5
    with pytest.raises(IdentifyError, match="FLBAS selects format 5"):
        parse_identify_namespace(bytes(data))


def test_in_use_format_not_available():
    data = identify_namespace([Fmt(512), Fmt(4096)], 1, 1 << 30, raw_descriptors=[9 << 16, 0])
    with pytest.raises(IdentifyError, match="not an available format"):
        parse_identify_namespace(data)


@pytest.mark.parametrize("text,why", [
    ("", "not JSON"),
    ("NVMe status: INVALID_NS", "not JSON"),
    ("[1, 2]", "not a JSON object"),
    ('{"nlbaf": 1, "flbas": 0}', "lacks the LBA format fields"),
    ('{"nlbaf": 1, "flbas": 0, "lbafs": [{"ms": 0, "ds": 9, "rp": 0}]}', "lists 1 LBA formats, NLBAF says 2"),
    ('{"nlbaf": "x", "flbas": 0, "lbafs": []}', "lacks the LBA format fields"),
    ('{"nlbaf": 0, "flbas": 0, "lbafs": [{"ms": 0, "ds": "nine", "rp": 0}]}', "lacks the LBA format fields"),
    ('{"nlbaf": 70, "flbas": 0, "lbafs": []}', "lists 0 LBA formats"),
])
def test_malformed_json(text, why):
    with pytest.raises(IdentifyError, match=why):
        parse_id_ns_json(text)
