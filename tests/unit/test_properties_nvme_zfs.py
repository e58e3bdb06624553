"""Property-based tests of the NVMe Identify Namespace parsers (binary and nvme-cli JSON)
and the zpool parsers (status JSON and text, list).

Properties: only the parser's own error (IdentifyError, ZpoolOutputError) comes out;
LBA formats, sizes, counters and progress are physically possible; what the fixture
builders write the way drives and zpool do reads back."""

from __future__ import annotations

import json

from hypothesis import example, given, strategies as st

from storpath.readers import nvme, zfs
from tests.fixtures import builders_nvme, builders_zfs

# ---- NVMe Identify Namespace -------------------------------------------------------------

_FORMAT = st.builds(builders_nvme.Fmt, data_size=st.sampled_from([512, 4096, 8192, 16384]),
                    metadata_size=st.sampled_from([0, 8, 16, 64]), relative_performance=st.integers(0, 3))


def assert_possible(ident: nvme.IdentifyNamespace) -> None:
    assert ident.formats and 0 <= ident.size_blocks < 1 << 64
    assert ident.in_use is not None
    for fmt in ident.formats:
        assert 512 <= fmt.data_size <= 1 << 31 and fmt.data_size & (fmt.data_size - 1) == 0
        assert 0 <= fmt.metadata_size <= 0xFFFF and 0 <= fmt.relative_performance <= 3
        assert 0 <= fmt.index <= 63


@given(st.binary(max_size=600))
def test_identify_binary_of_any_bytes(data):
    try:
        ident = nvme.parse_identify_namespace(data)
    except nvme.IdentifyError:
        return
    assert_possible(ident)


@given(st.lists(_FORMAT, min_size=1, max_size=16), st.data(), st.integers(0, 1 << 50),
       st.lists(st.tuples(st.integers(0, 200), st.integers(0, 255)), max_size=8))
def test_identify_binary_round_trips_and_survives_corruption(formats, data, size, noise):
    in_use = data.draw(st.integers(0, len(formats) - 1))
    raw = builders_nvme.identify_namespace(formats, in_use, size * formats[in_use].data_size)
    ident = nvme.parse_identify_namespace(raw)
    assert ident.in_use_index == in_use and ident.size_blocks == size
    assert [(f.data_size, f.metadata_size, f.relative_performance) for f in ident.formats] == \
        [(f.data_size, f.metadata_size, f.relative_performance) for f in formats]
    if noise:  # the same structure with a few bytes of the header and descriptors changed
        corrupt = bytearray(raw)
        for position, byte in noise:
            corrupt[position] = byte
        try:
            assert_possible(nvme.parse_identify_namespace(bytes(corrupt)))
        except nvme.IdentifyError:
            pass


_JSON_VALUE = st.one_of(st.integers(-(1 << 70), 1 << 70), st.floats(), st.text(max_size=5), st.none(), st.booleans())


@given(st.dictionaries(st.sampled_from(["nlbaf", "flbas", "nsze", "lbafs"]),
                       _JSON_VALUE | st.lists(st.dictionaries(st.sampled_from(["ms", "ds", "rp"]), _JSON_VALUE),
                                              max_size=4)))
@example({"nlbaf": 0, "flbas": 0, "nsze": 1e400, "lbafs": [{"ms": 0, "ds": 9, "rp": 0}]})
@example({"nlbaf": 0, "flbas": 0, "nsze": -5, "lbafs": [{"ms": -8, "ds": 9, "rp": 0}]})
@example({"nlbaf": 0, "flbas": 0, "nsze": "\u0663", "lbafs": [{"ms": 0, "ds": "\u0669", "rp": 0}]})
def test_identify_json_of_any_document(doc):
    text = json.dumps(doc)
    try:
        ident = nvme.parse_id_ns_json(text)
    except nvme.IdentifyError:
        return
    assert_possible(ident)


@given(st.text(max_size=200))
def test_identify_json_of_any_text(text):
    try:
        assert_possible(nvme.parse_id_ns_json(text))
    except nvme.IdentifyError:
        pass


@given(st.lists(_FORMAT, min_size=1, max_size=16), st.data(), st.integers(0, 1 << 50))
def test_identify_json_round_trips(formats, data, size):
    in_use = data.draw(st.integers(0, len(formats) - 1))
    ident = nvme.parse_id_ns_json(builders_nvme.id_ns_json(formats, in_use, size * formats[in_use].data_size))
    assert ident.in_use_index == in_use and ident.size_blocks == size
    assert [f.data_size for f in ident.formats] == [f.data_size for f in formats]


# ---- zpool ---------------------------------------------------------------------------------

def assert_pools_possible(pools):
    for pool in pools:
        for value in (pool.data_errors, pool.size_bytes, pool.allocated_bytes, pool.free_bytes, pool.ashift):
            assert value is None or 0 <= value < 1 << 64, pool
        assert pool.fragmentation_ratio is None or 0 <= pool.fragmentation_ratio <= 1
        for vdev in pool.vdevs:
            for value in (vdev.read_errors, vdev.write_errors, vdev.checksum_errors):
                assert value is None or 0 <= value < 1 << 64, vdev
        if pool.scan is not None:
            assert pool.scan.progress is None or 0 <= pool.scan.progress <= 1
            assert pool.scan.errors is None or pool.scan.errors >= 0


_ZJSON = st.recursive(st.one_of(st.integers(-(1 << 70), 1 << 70), st.floats(), st.text(max_size=6), st.none(),
                                st.booleans()),
                      lambda children: st.lists(children, max_size=3) | st.dictionaries(
                          st.sampled_from(["pools", "name", "state", "vdevs", "error_count", "read_errors",
                                           "write_errors", "checksum_errors", "total_space", "alloc_space",
                                           "scan_stats", "function", "to_examine", "issued", "skipped", "errors",
                                           "logs", "vdev_type", "tank", "sda", "start_time"]), children, max_size=5),
                      max_leaves=25)


@given(_ZJSON)
@example({"pools": {"tank": {"name": "tank", "error_count": "1" * 400, "vdevs": {}}}})
@example({"pools": {"pools": {"state": 1}}})  # found by this test: a state that is no string
@example({"pools": {"tank": {"name": "tank", "vdevs": {"tank": {"name": "tank", "state": ["ONLINE"]}}}}})
@example({"pools": {"tank": {"name": "tank", "vdevs": {"tank": {"name": "tank", "total_space": -5, "alloc_space": 9,
                                                                 "vdevs": {}}}}}})
@example({"pools": {"tank": {"name": "tank", "error_count": "\u0663K"}}})
def test_zpool_status_json_of_any_document(doc):
    try:
        pools = zfs.parse_status_json(json.dumps(doc))
    except zfs.ZpoolOutputError:
        return
    assert_pools_possible(pools)


_ZTEXT_PIECES = st.sampled_from(["  pool: tank\n", " state: ONLINE\n", "  scan: ", "scrub in progress since ",
                                 "Sun Nov  9 03:12:45 2025", "\t", "  ", "config:\n", "\tNAME STATE READ WRITE CKSUM\n",
                                 "tank", "mirror-0", "sda", " ONLINE", " DEGRADED", " 0", " 1.2K", " 99999999999E",
                                 " -3", " \u0663", "\n", "errors: No known data errors\n", "errors: 5 data errors",
                                 "45.5% done", "300% done", "logs\n", "resilvered 1G in 00:01:00 with 2 errors on "])


@given(st.one_of(st.text(max_size=80), st.lists(_ZTEXT_PIECES, max_size=30).map("".join)))
def test_zpool_status_text_of_any_text(text):
    try:
        pools = zfs.parse_status_text(text)
    except zfs.ZpoolOutputError:
        return
    assert_pools_possible(pools)


@given(st.lists(st.lists(st.one_of(st.text(max_size=6), st.integers(-5, 1 << 66).map(str), st.just("-"),
                                   st.just("\u0663")), min_size=8, max_size=8).map("\t".join), max_size=4))
def test_zpool_list_of_any_lines(lines):
    try:
        listing = zfs.parse_list("\n".join(lines))
    except zfs.ZpoolOutputError:
        return
    for values in listing.values():
        for key in ("size", "alloc", "free", "ashift"):
            assert values[key] is None or 0 <= values[key] < 1 << 64
        assert values["frag"] is None or 0 <= values["frag"] <= 1


@given(st.one_of(st.integers(), st.floats(), st.text(max_size=30), st.none(), st.booleans()))
@example("9" * 400)
@example("\u0663K")
@example(-1)
def test_zpool_counts_are_non_negative_or_nothing(value):
    count = zfs.parse_count(value)
    assert count is None or 0 <= count < 1 << 64


_LEAF_NAMES = st.sampled_from(["sda", "sdb", "sdc", "nvme0n1", "nvme1n1", "vdb"])


@given(st.lists(st.tuples(st.integers(0, 1 << 40), st.integers(0, 1 << 40), st.integers(0, 1 << 40)),
                min_size=1, max_size=3), st.sampled_from(["ONLINE", "DEGRADED", "FAULTED"]), st.booleans())
def test_zpool_json_and_text_round_trip_the_builders(errors, state, as_text):
    leaves = [builders_zfs.Leaf(name=f"sd{chr(97 + i)}", state="ONLINE", read=r, write=w, cksum=c, guid=i + 1)
              for i, (r, w, c) in enumerate(errors)]
    pool = builders_zfs.Pool(name="tank", guid=7, state=state, size=1 << 40, alloc=1 << 30,
                             groups=[builders_zfs.Group(name="mirror-0", vdev_type="mirror", leaves=leaves, guid=9)],
                             leaf_bytes={leaf.name: 1 << 40 for leaf in leaves})
    text = builders_zfs.status_text([pool]) if as_text else builders_zfs.status_json([pool])
    parsed = (zfs.parse_status_text if as_text else zfs.parse_status_json)(text)
    assert [p.name for p in parsed] == ["tank"] and parsed[0].state == state.lower()
    found = {v.name: (v.read_errors, v.write_errors, v.checksum_errors) for v in parsed[0].vdevs if v.leaf}
    if as_text:  # zpool status -p prints exact counts
        assert found == {leaf.name: (leaf.read, leaf.write, leaf.cksum) for leaf in leaves}
    else:
        assert found == {leaf.name: (leaf.read, leaf.write, leaf.cksum) for leaf in leaves}
