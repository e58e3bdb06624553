"""Lab: partition alignment on a real kernel. A raid0 of two virtio disks with a 64 KiB
chunk asks for 64 KiB minimum and 128 KiB optimal I/O; one partition of the array starts
at sector 63 (where an old DOS-compatible fdisk put it) and one at 2 MiB. The kernel's
own alignment_offset of each partition must agree with storpath's verdict, and the
exporter in the guest serves both.

The lab image has no sfdisk (Debian ships it in `fdisk`, not util-linux; adding it would
rebuild every helper's cached image), so the test writes the DOS partition table itself,
the same bytes sfdisk writes, and has the kernel re-read it (BLKRRPART)."""

import shlex

import lab

# An MBR: partition entries at 446 (16 bytes: status, CHS, type 0x83, CHS, first LBA, count),
# signature 55 AA at 510; then BLKRRPART (_IO(0x12, 95)).
MBR = """
import fcntl, os, struct
mbr = bytearray(512)
for slot, (start, count) in enumerate([(63, 4033), (4096, 8192)]):
    struct.pack_into("<B3sB3sII", mbr, 446 + 16 * slot, 0, b"\\xfe\\xff\\xff", 0x83, b"\\xfe\\xff\\xff", start, count)
mbr[510:512] = b"\\x55\\xaa"
fd = os.open("/dev/md9", os.O_RDWR)
os.write(fd, bytes(mbr)); os.fsync(fd)
fcntl.ioctl(fd, 0x125F)
os.close(fd)
"""


def _sample(scrape, name, **labels):
    return scrape.value(name, **labels)


def test_partition_at_sector_63_of_a_raid0_is_misaligned(md_guest):
    md_guest.sh("mdadm --create /dev/md9 --run --level=0 --chunk=64 --raid-devices=2 --metadata=1.2 /dev/vde /dev/vdf")
    md_guest.sh(f"python3 -c {shlex.quote(MBR)}")
    assert md_guest.read("/sys/class/block/md9p1/start") == "63"
    assert md_guest.read("/sys/class/block/md9/queue/optimal_io_size") == "131072"
    kernel_p1 = int(md_guest.read("/sys/class/block/md9p1/alignment_offset"))
    kernel_p2 = int(md_guest.read("/sys/class/block/md9p2/alignment_offset"))
    assert kernel_p1 != 0 and kernel_p2 == 0

    scrape = lab.Scrape(lab.exporter_metrics(md_guest))
    assert _sample(scrape, "storpath_block_partition_start_bytes", device="md9p1", disk="md9") == 63 * 512
    assert _sample(scrape, "storpath_block_alignment_offset_bytes", device="md9p1") == kernel_p1
    assert _sample(scrape, "storpath_block_partition_misaligned", device="md9p1", boundary="optimal_io") == 1
    assert _sample(scrape, "storpath_block_partition_misaligned", device="md9p2", boundary="optimal_io") == 0
    # virtio disks have 512-byte physical blocks: no physical-block verdict to give
    assert _sample(scrape, "storpath_block_partition_misaligned", device="md9p1", boundary="physical_block") is None
    # md's own data offset on its members, from md/dev-*/offset
    assert _sample(scrape, "storpath_md_member_data_offset_bytes", array="md9", member="vde") == \
        int(md_guest.read("/sys/block/md9/md/dev-vde/offset")) * 512
