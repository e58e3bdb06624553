"""Partition and md alignment: the verdict on literal numbers, the kernel's own
alignment_offset formula, the reader on a kernel-shaped tree, and properties."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from storpath.analysis.alignment import OPTIMAL_IO, PHYSICAL_BLOCK, judge, off_by
from storpath.collectors.alignment import PARTITION_MISALIGNED, alignment_rows
from storpath.readers.alignment import AlignmentReader, Limits, parse_alignment_offset, parse_sectors
from storpath.base.roots import Roots
from tests.fixtures.builders_health import kernel_alignment_offset

E512 = Limits(512, 4096, None)  # a 512e disk: 512-byte logical, 4 KiB physical sectors


@pytest.mark.parametrize("start_sectors,limits,expected", [
    (63, E512, {PHYSICAL_BLOCK: 3584}),  # DOS-compatible fdisk: 32256 bytes, 3584 past 4 KiB
    (2048, E512, {PHYSICAL_BLOCK: 0}),  # 1 MiB
    (63, Limits(512, 512, None), {}),  # 512-byte physical sectors: nothing to be misaligned to
    (2048, Limits(4096, 4096, 65536), {OPTIMAL_IO: 0}),  # 1 MiB on a 64 KiB indirection unit
    (2056, Limits(512, 4096, 65536), {PHYSICAL_BLOCK: 0, OPTIMAL_IO: 4096}),
    (2048, Limits(512, 4096, 0 or None), {PHYSICAL_BLOCK: 0}),
])
def test_verdicts(start_sectors, limits, expected):
    assert {v.boundary: v.off_by_bytes for v in judge(start_sectors * 512, limits)} == expected


def test_disk_alignment_offset_moves_the_boundaries():
    # A 512e disk jumpered for XP reports alignment_offset 3584: sector 63 is its aligned start.
    assert [v.misaligned for v in judge(63 * 512, E512, 3584)] == [False]
    assert [v.misaligned for v in judge(2048 * 512, E512, 3584)] == [True]


def test_unknown_start_no_verdict():
    assert judge(None, E512) == []


@pytest.mark.parametrize("text,expected", [("512\n", 512), ("-1", -1), ("-2", None), ("", None), (None, None)])
def test_alignment_offset_text(text, expected):
    assert parse_alignment_offset(text) == expected


def test_sectors_text():
    assert parse_sectors("63\n") == 32256 and parse_sectors("x") is None and parse_sectors("-1") is None


@given(st.integers(0, 2 ** 40), st.sampled_from([4096, 8192, 16384]), st.sampled_from([0, 4096, 65536, 1 << 20]))
def test_our_verdict_agrees_with_the_kernels_formula(start_sectors, physical, optimal):
    """Misaligned to the physical block exactly when the kernel's alignment_offset of the
    start is not 0 (granularity = physical block, io_min = physical as the builders write)."""
    verdicts = judge(start_sectors * 512, Limits(512, physical, optimal or None))
    by_boundary = {v.boundary: v for v in verdicts}
    kernel = kernel_alignment_offset(start_sectors, physical, physical)
    assert by_boundary[PHYSICAL_BLOCK].misaligned == (kernel != 0)
    if kernel:
        assert kernel + by_boundary[PHYSICAL_BLOCK].off_by_bytes == physical
    if optimal > physical:
        assert by_boundary[OPTIMAL_IO].misaligned == (start_sectors * 512 % optimal != 0)


@given(st.integers(0, 2 ** 50), st.integers(1, 2 ** 20), st.integers(0, 2 ** 20))
def test_off_by_is_within_a_boundary(start, boundary, offset):
    assert 0 <= off_by(start, boundary, offset) < boundary


def test_reader_on_a_partitioned_disk_and_an_md_member(tmp_path):
    sys = tmp_path / "sys"
    disk = sys / "devices/pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sda"
    part = disk / "sda1"
    part.mkdir(parents=True)
    (disk / "queue").mkdir()
    for name, value in (("queue/logical_block_size", 512), ("queue/physical_block_size", 4096),
                        ("queue/optimal_io_size", 0), ("alignment_offset", 0), ("sda1/partition", 1),
                        ("sda1/start", 63), ("sda1/alignment_offset", 512)):
        (disk / name).write_text(f"{value}\n")
    md = sys / "devices/virtual/block/md0"
    (md / "md/dev-sda1").mkdir(parents=True)
    (md / "md/dev-sda1/offset").write_text("2048\n")
    (md / "md/dev-sda1/block").symlink_to(part)
    (md / "alignment_offset").write_text("-1\n")
    (sys / "class/block").mkdir(parents=True)
    for name, target in (("sda", disk), ("sda1", part), ("md0", md)):
        (sys / "class/block" / name).symlink_to(target)
    found = AlignmentReader(Roots(sysfs=str(sys))).read()
    (p,) = found.partitions
    assert (p.device, p.disk, p.start_bytes, p.alignment_offset) == ("sda1", "sda", 32256, 512)
    (m,) = found.md_members
    assert (m.array, m.member, m.disk, m.data_offset_bytes, m.data_start_bytes) == (
        "md0", "sda1", "sda", 1048576, 32256 + 1048576)
    assert found.stacked_offsets == (("md0", -1),)
    rows = alignment_rows(found)
    assert rows[PARTITION_MISALIGNED].labels == [("sda1", "sda", PHYSICAL_BLOCK)]
    assert rows[PARTITION_MISALIGNED].values == [1]
