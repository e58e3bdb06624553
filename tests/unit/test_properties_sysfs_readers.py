"""Property-based tests of the sysfs and procfs parsers: cpulists, AER blocks, /proc/mdstat
and md attributes, SAS and ATA attributes, numa_node.

Properties: nothing but the parser's answer comes out (None or a reason, never an
exception), every value is physically possible (counters and sizes not negative, numbers
from ASCII digits, a working-disk count within the array), and text the kernel's
spelling writes (the fixture builders') reads back."""

from __future__ import annotations

import re

from hypothesis import example, given, strategies as st

from storpath.base import parse
from storpath.readers import ata, md, numa, pci, sas
from tests.fixtures.builders_md import MdArraySpec, MdMemberSpec, mdstat_text
from tests.fixtures.sysfs_builder import _cpulist

_PIECES = st.sampled_from(["0", "1", "7", "63", "-", "+", "_", ",", ".", " ", "\n", "\t", "x", "0x", "[", "]", "/", "(",
                           ")", "%", "=", "\u0661", "\u0663", "\uff11", "\u00b2", "9" * 25, "30000000", "TOTAL_ERR_COR",
                           "md0", " : ", "active", "raid1", "blocks", "[2/1]", "[U_]", "recovery", "resync", "(F)",
                           "Gbit", "Gbps", "link", "none", "in_sync"])
TEXT = st.one_of(st.text(max_size=60), st.lists(_PIECES, max_size=12).map("".join))
ASCII_NUMBER = re.compile(r"[0-9]+")


def _ascii_digits_only(text: str) -> bool:
    return not any(c.isdigit() and not c.isascii() for c in text)


# ---- cpulists -------------------------------------------------------------------------

@given(st.one_of(st.none(), TEXT))
@example("0-30000000")
@example("\u0661-\u0663")
@example("1_0")
@example("+3")
def test_cpulist_is_bounded_and_ascii(text):
    cpus = numa.parse_cpulist(text)
    if cpus is None:
        return
    assert len(cpus) <= numa.MAX_CPUS and all(0 <= cpu < numa.MAX_CPUS for cpu in cpus)
    assert list(cpus) == sorted(set(cpus))
    assert _ascii_digits_only(text)


@given(st.sets(st.integers(0, numa.MAX_CPUS - 1), max_size=300))
def test_cpulist_round_trips(cpus):
    assert numa.parse_cpulist(_cpulist(sorted(cpus))) == tuple(sorted(cpus))


# ---- numa_node ---------------------------------------------------------------------

@given(st.one_of(st.none(), TEXT))
@example("99999999999999999999")
@example("-2")
def test_numa_node_is_minus_one_or_a_node_the_kernel_can_have(text):
    node = parse.parse_numa_node(text)
    assert node is None or -1 <= node < parse.MAX_NUMA_NODES


# ---- AER -------------------------------------------------------------------------------

def _aer_block(counts):
    return "\n".join(f"{name} {value}" for name, value in counts) + "\n"


@given(st.one_of(st.none(), TEXT))
@example("RxErr 0\nTOTAL_ERR_COR -5\n")
@example("TOTAL_ERR_COR \u0663\n")
@example("TOTAL_ERR_COR 1_000\n")
def test_aer_total_is_a_non_negative_64bit_counter(text):
    total = pci.parse_aer_total(text)
    assert total is None or 0 <= total < 1 << 64


@given(st.lists(st.tuples(st.sampled_from(["RxErr", "BadTLP", "BadDLLP", "Timeout"]), st.integers(0, 1 << 63)),
                max_size=6), st.integers(0, (1 << 64) - 1), st.sampled_from(["TOTAL_ERR_COR", "TOTAL_ERR_FATAL",
                                                                             "TOTAL_ERR_NONFATAL"]))
def test_aer_total_round_trips(counts, total, name):
    assert pci.parse_aer_total(_aer_block([*counts, (name, total)])) == total


# ---- /proc/mdstat and md attributes ------------------------------------------------------

@given(TEXT)
@example("md0 : active raid1 sda[\u0661]\n      100 blocks super 1.2 [2/5] [UU]\n")
@example("md0 : active raid1 sda[0]\n      \u0661\u0662 blocks super 1.2 [2/1] [U_]\n")
@example("md0 : active raid1 a[0]\n      [>...]  recovery = 1.0% (\u0663/10) finish=1min\n")
def test_mdstat_values_are_possible(text):
    for array in md.parse_mdstat(text).values():
        for value in (array.blocks, array.raid_disks, array.working_disks, array.sync_done, array.sync_total):
            assert value is None or value >= 0
        if array.raid_disks is not None:
            assert array.working_disks <= array.raid_disks
        if array.sync_total is not None:
            assert array.sync_done <= array.sync_total
        for member in array.members:
            assert member.descriptor >= 0


@given(st.lists(st.tuples(st.sampled_from(["raid1", "raid5", "raid6", "raid10"]), st.integers(2, 6),
                          st.integers(0, 6), st.integers(1, 1 << 30)), min_size=1, max_size=4))
def test_mdstat_round_trips_the_kernels_layout(arrays):
    specs = []
    for i, (level, disks, failed, kib) in enumerate(arrays):
        failed = min(failed, disks - 1)
        members = [MdMemberSpec(disk=f"sd{i}{chr(97 + n)}", slot=n, state="in_sync" if n >= failed else "faulty")
                   for n in range(disks)]
        specs.append(MdArraySpec(name=f"md{i}", level=level, members=members, component_kib=kib, raid_disks=disks,
                                 bitmap=False))
    parsed = md.parse_mdstat(mdstat_text(specs))
    assert sorted(parsed) == sorted(s.name for s in specs)
    for spec in specs:
        array = parsed[spec.name]
        assert (array.level, array.raid_disks) == (spec.level, spec.raid_disks)
        assert array.working_disks == sum(1 for m in spec.members if m.state == "in_sync")
        assert sorted(m.name for m in array.members) == sorted(m.disk for m in spec.members)


@given(st.one_of(st.none(), TEXT))
@example("\u0663")
@example("-1")
@example("4 (3)")
def test_md_numbers_are_non_negative_ascii(text):
    value, why = md.parse_first_int(text)
    assert value is None or (value >= 0 and why is None)
    slot, why = md.parse_slot(text)
    assert slot is None or slot >= 0
    done, why = md.parse_sync_completed(text)
    assert done is None or 0 <= done[0] <= done[1]
    assert isinstance(md.parse_member_state(text), tuple)


@given(st.integers(0, 1 << 62), st.integers(0, 1 << 62))
def test_md_sync_completed_round_trips(a, b):
    done, total = min(a, b), max(a, b, 1)
    assert md.parse_sync_completed(f"{done} / {total}") == ((done, total), None)


# ---- SAS and ATA ---------------------------------------------------------------------

@given(st.one_of(st.none(), TEXT))
@example("0x_500605b0000272b0")
@example("0x\u0665")
@example("0x" + "f" * 17)
def test_sas_address_is_16_hex_digits(text):
    address = sas.parse_sas_address(text)
    assert address is None or re.fullmatch(r"0x[0-9a-f]{16}", address)


@given(st.integers(0, (1 << 64) - 1))
def test_sas_address_round_trips(value):
    assert sas.parse_sas_address(f"0x{value:016x}") == f"0x{value:016x}"
    assert sas.parse_sas_address(f"0x{value:x}") == f"0x{value:016x}"


@given(st.one_of(st.none(), TEXT))
@example("-1")
@example("4294967296")
def test_sas_counters_and_rates_are_possible(text):
    counter = sas.parse_counter(text)
    assert counter is None or 0 <= counter <= 0xFFFFFFFF
    rate, state, problem = sas.parse_phy_link_rate(text)
    assert rate is None or 0 < rate < 1e12
    assert sas.parse_enable(text) in (None, True, False)


@given(st.integers(0, 0xFFFFFFFF))
def test_sas_counter_round_trips(value):
    assert sas.parse_counter(f"{value}\n") == value


@given(st.one_of(st.none(), TEXT))
@example("link\u0661")
@example("link1.\u0662")
def test_ata_link_names_and_speeds_are_possible(text):
    speed, problem = ata.parse_link_speed(text)
    assert speed is None or 0 < speed < 1e12
    if text is not None:
        name = ata.parse_link_name(text)
        assert name is None or (_ascii_digits_only(text) and name[0] >= 0)


@given(st.integers(0, 10 ** 6), st.one_of(st.none(), st.integers(0, 15)))
def test_ata_link_name_round_trips(port, pmp):
    text = f"link{port}" if pmp is None else f"link{port}.{pmp}"
    assert ata.parse_link_name(text) == (port, pmp)
