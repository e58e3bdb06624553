"""zpool status text that made a pattern backtrack or int() raise: a scan line of thousands of
digits (quadratic: 36 s for 20 000), an error count of 5000 digits (ValueError past Python's
4300-digit limit, escaping the ZpoolOutputError the reader catches), thousands of blank lines
after a pool (the pool split's \\s* crossed every one of them from every line), a paused scan's
line repeating "started on". Each parses in milliseconds; the child's time limit
(tests.hang_guard) is a hang guard, not a speed target."""

from __future__ import annotations

from storpath.readers import zpool_output
from tests.hang_guard import finishes

SCAN = "scrub in progress since Sun Nov  9 03:12:45 2025"


def test_a_scan_line_of_digits_parses():
    scan = finishes(zpool_output.parse_scan_line, [SCAN, "1" * 20000 + "x"])
    assert (scan.function, scan.state, scan.progress) == ("scrub", "scanning", None)
    scan = finishes(zpool_output.parse_scan_line, [SCAN, "1.2T scanned at 1G/s, 54.28% done, 01:02:03 to go"])
    assert abs(scan.progress - 0.5428) < 1e-9


def test_error_counts_of_5000_digits_are_not_read():
    digits = "9" * 5000
    assert finishes(zpool_output.parse_scan_line,
                    [f"scrub repaired 0B in 00:01:02 with {digits} errors on Sun Nov  9 03:12:45 2025"]) is None
    [pool] = finishes(zpool_output.parse_status_text, f"  pool: tank\n state: ONLINE\nerrors: {digits} data errors\n")
    assert (pool.name, pool.data_errors) == ("tank", None)


def test_blank_lines_and_repeated_words_parse():
    [pool] = finishes(zpool_output.parse_status_text, "  pool: tank\n state: ONLINE\n" + "\n" * 200000)
    assert pool.name == "tank"
    scan = finishes(zpool_output.parse_scan_line, ["scrub paused since Sun Nov  9 03:12:45 2025",
                                                   "started on x" * 20000])
    assert scan.state == "paused"
