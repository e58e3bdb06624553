"""Property-based tests of the unit parsers: link speeds and widths, SAS/SATA rates,
durations, sizes, throughputs, and sysfs's one decimal parser.

Properties: nothing but the parser's own answer (a value, a reason, or ValueError) ever
comes out; every value is physically possible; values a writer spells read back."""

from __future__ import annotations

import math

import pytest
from hypothesis import example, given, strategies as st

from storpath.base import parse, units

# Text as sysfs or a config file might hold it: any characters, with the ones parsers look
# for (digits of every script, signs, separators, the units) made likely.
_PIECES = st.sampled_from(["0", "1", "16", "255", "-", "+", "_", ".", " ", "\n", "x", "e", "GT/s", " PCIe", "Gbit",
                           "Gbps", "Unknown", "\u0661", "\u0666", "\uff11", "\u00b2", "nan", "inf", "9" * 25,
                           "ms", "s", "m", "h", "d", "w", "KiB", "G", "B/s", "GB/s", "MiB/s"])
TEXT = st.one_of(st.text(max_size=40), st.lists(_PIECES, max_size=8).map("".join))


@given(TEXT)
@example("1_6")
@example("+4")
@example("\u0661\u0666")
@example("99999999999999999999999")
def test_parse_int_takes_ascii_decimal_digits_only(text):
    value = parse.parse_int(text)
    if value is not None:
        assert text.strip().isascii() and text.strip().isdigit() and len(text.strip()) <= 20
        assert 0 <= value < 10 ** 20


@given(st.integers(min_value=-(10 ** 19), max_value=10 ** 19), st.sampled_from(["", " ", "\n"]))
def test_parse_int_round_trips_what_the_kernel_prints(number, padding):
    negative_ok = parse.parse_int(f"{number}{padding}", minimum=-(10 ** 19))
    assert negative_ok == number
    assert parse.parse_int(f"{number}{padding}") == (number if number >= 0 else None)
    assert parse.parse_int(f"{number}".encode()) == (number if number >= 0 else None)


@pytest.mark.parametrize("text", ["1_6", "+4", "\u0661\u0666", " 4 2", "0x10", "4.0", "-0", "--1", ""])
def test_parse_int_refuses_what_int_would_take(text):
    assert parse.parse_int(text) is None


@given(st.one_of(st.none(), TEXT))
@example("\u0661\u0666.0 GT/s PCIe")
@example("100000000000000000000000000000000 GT/s")
@example("3.0 GT/s")
def test_pcie_speed_is_a_pcie_generation_or_nothing(text):
    value, why = parse.parse_pcie_speed(text)
    assert (value is None) != (why is None)
    if value is not None:
        assert value in parse.PCIE_SPEEDS


@given(st.sampled_from(sorted(parse.PCIE_SPEEDS)), st.booleans())
def test_pcie_speed_round_trips_both_kernel_spellings(speed, modern):
    text = f"{speed / 1e9:.1f} GT/s PCIe" if modern else f"{speed / 1e9:g} GT/s"
    assert parse.parse_pcie_speed(text) == (speed, None)
    assert parse.parse_pcie_speed(units.human_transfers(speed)) == (speed, None)


@given(st.one_of(st.none(), st.binary(max_size=40), TEXT.map(lambda text: text.encode("utf-8", "surrogatepass"))),
       st.booleans())
@example(b"16.0 GT/s PCIe\n", False)
@example(b"8 GT/s\n", False)  # before Linux 4.17
@example(b"16.0 GT/s PCIe\n\x00\x00\x00", False)  # a tar copy of a file that shrank: NUL-padded
@example(b"\x00Unknown\n", True)
@example(b"4\n", True)
@example(b"0\n", True)
@example(b"x16\n", False)
def test_the_link_read_as_bytes_is_what_its_text_says(raw, allow_zero):
    """The raw parsers (the bytes as read, every scrape) give what the text parsers give for
    the text read_attr makes of the same bytes: the table of the kernel's spellings is a
    shortcut, never another answer."""
    text = parse.attribute_text(raw)
    assert parse.parse_pcie_speed_raw(raw) == parse.parse_pcie_speed(text)
    assert parse.parse_pcie_width_raw(raw, allow_zero) == parse.parse_pcie_width(text, allow_zero)


@given(st.one_of(st.none(), TEXT), st.booleans())
@example("1_6", False)
@example("+4", False)
@example("\u0661\u0666", False)
def test_pcie_width_is_a_valid_width(text, allow_zero):
    value, why = parse.parse_pcie_width(text, allow_zero)
    assert (value is None) != (why is None)
    if value is not None:
        assert value in parse.PCIE_WIDTHS or (allow_zero and value == 0)


@given(st.sampled_from(sorted(parse.PCIE_WIDTHS)), st.sampled_from(["", "x"]), st.sampled_from(["", "\n"]))
def test_pcie_width_round_trips(width, prefix, suffix):
    assert parse.parse_pcie_width(f"{prefix}{width}{suffix}", False) == (width, None)


@given(st.one_of(st.none(), TEXT))
@example("1e32 Gbit")
@example("\u0666.0 Gbit")
def test_sas_and_sata_rates_are_bounded(text):
    for parse_rate in (parse.parse_sas_rate, parse.parse_sata_rate):
        value, why = parse_rate(text)
        assert (value is None) != (why is None)
        if value is not None:
            assert 0 <= value < 1e12


@given(st.one_of(TEXT, st.floats(), st.integers()))
@example(".nan")
@example(float("nan"))
@example(float("inf"))
@example("99999999999999999999w")
@example(10 ** 400)
def test_durations_are_finite_and_bounded_or_refused(value):
    try:
        seconds = units.parse_duration(value)
    except ValueError:
        return
    assert math.isfinite(seconds) and 0 <= seconds <= units.MAX_DURATION


@given(st.lists(st.tuples(st.integers(0, 10 ** 6), st.sampled_from(["ms", "s", "m", "h", "d", "w"])), min_size=1,
                max_size=4))
def test_durations_add_up_their_parts(parts):
    text = "".join(f"{n}{unit}" for n, unit in parts)
    total = sum(n * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[unit] for n, unit in parts)
    if total > units.MAX_DURATION:
        with pytest.raises(ValueError, match="longer than 366 days"):
            units.parse_duration(text)
    else:
        assert units.parse_duration(text) == pytest.approx(total)


@given(st.one_of(TEXT, st.integers(), st.floats()))
@example("9" * 400)
@example("1" * 21 + "P")
def test_sizes_are_bounded_or_refused(value):
    try:
        size = units.parse_size(value)
    except ValueError:
        return
    assert isinstance(size, int) and size <= units.MAX_SIZE


@given(st.integers(0, units.MAX_SIZE >> 30), st.sampled_from(["", "K", "KiB", "M", "MiB", "G", "GiB"]))
def test_sizes_round_trip(number, unit):
    scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[unit[:1]]
    assert units.parse_size(f"{number}{unit}") == number * scale


@given(st.one_of(TEXT, st.floats(), st.integers()))
@example(float("nan"))
@example("1e99GB/s")
def test_throughputs_are_finite_positive_and_bounded_or_refused(value):
    try:
        rate = units.parse_rate(value)
    except ValueError:
        return
    assert math.isfinite(rate) and 0 < rate <= units.MAX_RATE


@given(st.integers(1, 10 ** 5), st.sampled_from(["B/s", "kB/s", "MB/s", "GB/s", "KiB/s", "MiB/s", "GiB/s"]))
def test_throughputs_round_trip(number, unit):
    scale = {"B/s": 1, "kB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9, "KiB/s": 1024, "MiB/s": 1 << 20, "GiB/s": 1 << 30}[unit]
    assert units.parse_rate(f"{number}{unit}") == pytest.approx(number * scale)
