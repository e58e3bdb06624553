"""Lab: partition alignment on a real kernel. A raid0 of two virtio disks with a 64 KiB
chunk asks for 64 KiB minimum and 128 KiB optimal I/O; sfdisk puts one partition of the
array at sector 63 (as an old DOS-compatible fdisk did) and one at 1 MiB. The kernel's
own alignment_offset of each partition must agree with storpath's verdict, and the
exporter in the guest serves both, without privilege for the partitions' sysfs."""

import lab

SFDISK = "label: dos\\nstart=63, size=4033\\nstart=4096, size=8192\\n"


def _sample(scrape, name, **labels):
    found = [s.value for s in scrape.samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]
    return found[0] if found else None


def test_partition_at_sector_63_of_a_raid0_is_misaligned(md_guest):
    md_guest.sh("mdadm --create /dev/md9 --run --level=0 --chunk=64 --raid-devices=2 --metadata=1.2 /dev/vde /dev/vdf")
    md_guest.sh(f"printf '{SFDISK}' | sfdisk -q /dev/md9 && (partx -u /dev/md9 || true)")
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
