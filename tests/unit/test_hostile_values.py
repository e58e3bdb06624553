"""Plausible garbage is not exported as truth: one plain regression test per bug the
issue listed or the property tests (test_properties_*.py) found in a parser."""

from __future__ import annotations

import json

import pytest

from storpath.base import parse, units
from storpath.readers import ata, md, numa, nvme, pci, sas, zfs


@pytest.mark.parametrize("text", ["1_6", "+4", "\u0661\u0666", "\uff11\uff16"])
def test_a_link_width_is_ascii_digits(text):
    """int() took '1_6' as width 16, '+4' as 4, and other scripts' digits."""
    assert parse.parse_pcie_width(text, False)[0] is None


@pytest.mark.parametrize("text", ["100000000000000000000000000000000 GT/s", "3.0 GT/s PCIe", "\u0661\u0666.0 GT/s PCIe"])
def test_a_link_speed_is_a_pcie_generation(text):
    """A link speed of 1e32 was exported."""
    assert parse.parse_pcie_speed(text)[0] is None


def test_numa_node_beyond_the_kernels_limit_is_left_out():
    """numa_node 99999999999999999999 was exported."""
    assert parse.parse_numa_node("99999999999999999999") is None
    assert parse.parse_numa_node("1024") is None
    assert parse.parse_numa_node("-1") == -1 and parse.parse_numa_node("3") == 3


def test_a_negative_aer_total_is_left_out():
    """AER `TOTAL_ERR_COR -5` became a counter of -5."""
    assert pci.parse_aer_total("RxErr 0\nTOTAL_ERR_COR -5\n") is None
    assert pci.parse_aer_total("TOTAL_ERR_COR \u0663\n") is None


@pytest.mark.parametrize("text", ["0-30000000", "0-8192", "\u0661-\u0663", "1_0", "+3"])
def test_a_cpulist_is_bounded_and_strict(text):
    """A cpulist of 0-30000000 made scrapes take 19 s and 2.4 GB."""
    assert numa.parse_cpulist(text) is None


def test_a_cpulist_repeating_one_range_stays_small():
    assert numa.parse_cpulist(",".join(["0-8191"] * 2000)) == tuple(range(8192))


def test_mdstat_counts_are_ascii_and_working_disks_within_the_array():
    arrays = md.parse_mdstat("md0 : active raid1 sda[\u0661] sdb[1]\n      \u0661\u0662 blocks super 1.2 [2/5] [UU]\n")
    array = arrays["md0"]
    assert [m.name for m in array.members] == ["sdb"]
    assert (array.blocks, array.raid_disks, array.working_disks) == (None, None, None)


def test_md_attribute_numbers_are_ascii():
    assert md.parse_slot("\u0663") == (None, "unrecognised slot '\u0663'")
    assert md.parse_first_int("\u0663")[0] is None
    assert md.parse_first_int("4 (3)") == (4, None)


@pytest.mark.parametrize("text", ["0x_500605b0000272b0", "0x5006_05b0", "0x\u0665"])
def test_a_sas_address_is_hex_digits(text):
    assert sas.parse_sas_address(text) is None


def test_an_ata_link_name_is_ascii():
    assert ata.parse_link_name("link\u0661") is None


@pytest.mark.parametrize("doc", [
    {"nlbaf": 0, "flbas": 0, "nsze": 1e400, "lbafs": [{"ms": 0, "ds": 9, "rp": 0}]},
    {"nlbaf": 0, "flbas": 0, "nsze": -5, "lbafs": [{"ms": 0, "ds": 9, "rp": 0}]},
    {"nlbaf": 0, "flbas": 0, "nsze": 1, "lbafs": [{"ms": -8, "ds": 9, "rp": 0}]},
    {"nlbaf": 0, "flbas": 0, "nsze": "\u0663", "lbafs": [{"ms": 0, "ds": 9, "rp": 0}]},
])
def test_nvme_cli_json_out_of_range_is_an_identify_error(doc):
    """1e400 raised OverflowError; negative sizes and metadata were taken."""
    with pytest.raises(nvme.IdentifyError):
        nvme.parse_id_ns_json(json.dumps(doc).replace("Infinity", "1e400"))


@pytest.mark.parametrize("value", ["9" * 400, "\u0663K", "16E", -1, 1 << 64])
def test_zpool_counts_are_uint64_or_nothing(value):
    """'9'*400 raised OverflowError; other scripts' digits and values beyond uint64 were taken."""
    assert zfs.parse_count(value) is None


def test_zpool_json_with_a_negative_size_has_no_size():
    pools = zfs.parse_status_json(json.dumps({"pools": {"tank": {"name": "tank", "vdevs": {
        "tank": {"name": "tank", "total_space": -5, "alloc_space": 9, "vdevs": {}}}}}}))
    assert (pools[0].size_bytes, pools[0].free_bytes) == (None, None)


def test_zpool_list_fragmentation_above_100_percent_is_left_out():
    listing = zfs.parse_list("tank\t100\t50\t50\t101%\t50\tONLINE\t12\n")
    assert listing["tank"]["frag"] is None and listing["tank"]["size"] == 100


def test_zpool_status_text_whose_pool_line_follows_a_carriage_return():
    """IndexError: splitlines() breaks at \\r, so the block's first line was not its `pool:` line."""
    assert [p.name for p in zfs.parse_status_text("\rpool: tank\n state: ONLINE\n")] == ["tank"]


@pytest.mark.parametrize("value", [10 ** 400, float("nan"), float("inf")])
def test_a_duration_or_throughput_beyond_any_float_is_refused(value):
    """10**400 (a YAML integer) raised OverflowError."""
    with pytest.raises(ValueError):
        units.parse_duration(value)
    from storpath.scrape.probes import config as probes_config
    with pytest.raises(ValueError):
        probes_config.parse_rate(value)


def test_diskstats_counters_take_no_sign_and_ascii_digits_only():
    # Found by the hypothesis CI profile: '-1' and Arabic-Indic digits were read as counters.
    from storpath.scrape.probes.devices import parse_diskstats

    assert parse_diskstats("0 0 sda 3 3 -1 3 0 0 0 0 3 3 0\n") == {}
    assert parse_diskstats("0 0 sda 3 3 \u0663 3 0 0 0 0 3 3 0\n") == {}
    assert parse_diskstats("0 0 sda 3 3 16 3 0 0 0 0 3 3 0\n")["sda"].sectors_read == 16
