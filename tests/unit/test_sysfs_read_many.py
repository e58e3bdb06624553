"""sysfs.read_many: the PCI reader's attributes read every scrape, one call per device."""

import os
import threading

from storpath.base import sysfs
from storpath.readers.pci import parse_aer_total


def test_read_many_gives_each_file_or_none(tmp_path):
    (tmp_path / "current_link_speed").write_bytes(b"16.0 GT/s PCIe\n")
    (tmp_path / "current_link_width").write_bytes(b"4\n")
    os.mkdir(tmp_path / "a_directory")
    paths = [str(tmp_path / name) for name in ("current_link_speed", "gone", "a_directory", "current_link_width")]
    assert sysfs.read_many(paths) == [b"16.0 GT/s PCIe\n", None, None, b"4\n"]
    assert sysfs.outstanding(threading.get_ident()) is None  # no read left outstanding afterwards


def test_read_many_names_the_file_it_reads(tmp_path):
    """A read outstanding is the one file being read (what the snapshot names when a source is
    stuck), not the first of the list."""
    fifo = tmp_path / "second"
    (tmp_path / "first").write_bytes(b"1\n")
    seen = []
    real_open = os.open

    def watching_open(path, flags, *args, **kwargs):
        seen.append(sysfs.outstanding(threading.get_ident())[0])
        return real_open(path, flags, *args, **kwargs)

    sysfs.os.open = watching_open  # (the module's own os; restored below)
    try:
        sysfs.read_many([str(tmp_path / "first"), str(fifo)])
    finally:
        sysfs.os.open = real_open
    assert seen == [str(tmp_path / "first"), str(fifo)]


def test_aer_total_counts_as_parse_int_takes_them():
    assert parse_aer_total(b"RxErr 3\nTOTAL_ERR_COR 18446744073709551615\n") == (1 << 64) - 1
    assert parse_aer_total(b"TOTAL_ERR_COR 18446744073709551616\n") is None  # above 64 bits
    assert parse_aer_total(b"TOTAL_ERR_COR 000000000000000000007\n") is None  # 21 digits
    assert parse_aer_total(b"TOTAL_ERR_COR +7\n") is None
    assert parse_aer_total(b"TOTAL_ERR_COR 7 \n") == 7  # (whitespace around, as parse_int strips it)
    assert parse_aer_total(b"TOTAL_ERR_NONFATAL 12") == 12
