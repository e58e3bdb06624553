import pytest

from storpath.base.parse import parse_pcie_speed, parse_pcie_width, parse_sas_rate, parse_sata_rate
from storpath.base.units import parse_duration, parse_size, pcie_link_bytes_per_second


@pytest.mark.parametrize("text,expected", [
    ("2.5 GT/s", 2.5e9), ("2.5 GT/s PCIe", 2.5e9), ("5 GT/s", 5e9), ("5.0 GT/s PCIe", 5e9), ("8 GT/s", 8e9),
    ("8.0 GT/s PCIe", 8e9), ("16.0 GT/s PCIe", 16e9), ("32.0 GT/s PCIe", 32e9), ("64.0 GT/s PCIe", 64e9),
    ("16.0 GT/s PCIe\n", 16e9),
])
def test_every_kernel_spelling_of_a_link_speed_parses(text, expected):
    value, why = parse_pcie_speed(text)
    assert (value, why) == (expected, None)


@pytest.mark.parametrize("text", ["Unknown", "Unknown speed", "", "GT/s", "fast", "0 GT/s", "-8 GT/s", None])
def test_unreadable_link_speeds_give_no_value_and_a_reason(text):
    value, why = parse_pcie_speed(text)
    assert value is None and why


@pytest.mark.parametrize("text,allow_zero,expected", [
    ("4", False, 4), ("16", True, 16), ("x8", False, 8), ("0", True, 0), ("1", False, 1), ("32", False, 32),
])
def test_link_widths(text, allow_zero, expected):
    assert parse_pcie_width(text, allow_zero) == (expected, None)


@pytest.mark.parametrize("text,allow_zero", [("0", False), ("255", True), ("3", True), ("", True), ("four", True),
                                             (None, True)])
def test_implausible_widths_are_left_out(text, allow_zero):
    value, why = parse_pcie_width(text, allow_zero)
    assert value is None and why


def test_bandwidth_after_line_encoding():
    # 16 GT/s x4 with 128b/130b: the "about 7.88 GB/s" of a Gen4 x4 drive.
    assert pcie_link_bytes_per_second(16e9, 4) == pytest.approx(7.877e9, rel=1e-3)
    # 8b/10b up to 5 GT/s: Gen1 x8 carries 2 GB/s.
    assert pcie_link_bytes_per_second(2.5e9, 8) == pytest.approx(2.0e9)
    assert pcie_link_bytes_per_second(5e9, 1) == pytest.approx(0.5e9)
    assert pcie_link_bytes_per_second(8e9, 4) == pytest.approx(3.938e9, rel=1e-3)
    assert pcie_link_bytes_per_second(32e9, 16) == pytest.approx(63.0e9, rel=1e-3)
    # 64 GT/s FLIT mode: 242 of 256 bytes.
    assert pcie_link_bytes_per_second(64e9, 16) == pytest.approx(121.0e9, rel=1e-3)
    assert pcie_link_bytes_per_second(None, 4) is None


@pytest.mark.parametrize("text,expected", [("1.5 Gbit", 1.5e9), ("3.0 Gbit", 3e9), ("6.0 Gbit", 6e9),
                                           ("12.0 Gbit", 12e9), ("22.5 Gbit", 22.5e9)])
def test_sas_rates(text, expected):
    assert parse_sas_rate(text) == (expected, None)


@pytest.mark.parametrize("text", ["Unknown", "Phy disabled", "Link Rate failed", "Spin-up hold", ""])
def test_sas_statuses_carry_no_rate(text):
    value, why = parse_sas_rate(text)
    assert value is None and why


def test_sata_rates():
    assert parse_sata_rate("1.5 Gbps") == (1.5e9, None)
    assert parse_sata_rate("6.0 Gbps") == (6e9, None)
    assert parse_sata_rate("<unknown>") == (None, "<unknown>")


def test_durations_and_sizes():
    assert parse_duration("1h30m") == 5400
    assert parse_duration("500ms") == 0.5
    assert parse_duration(5) == 5.0
    with pytest.raises(ValueError):
        parse_duration("soon")
    with pytest.raises(ValueError):
        parse_duration("5x")
    assert parse_size("4KiB") == 4096
    assert parse_size("1G") == 1 << 30
    with pytest.raises(ValueError):
        parse_size("lots")
