"""Data that starts off the drive's physical block or optimal I/O boundary: partitions and
md members. Misaligned to the physical block, every write is a read-modify-write."""


def rules(c):
    cfg = c.cfg
    return [
        c.alert(
            "BlockPartitionMisaligned",
            'storpath_block_partition_misaligned{boundary="physical_block"} == 1',
            cfg.misaligned_for, cfg.misaligned_severity,
            "A partition does not start on its disk's physical block boundary: writes become read-modify-write.",
            f"""{{{{ $labels.device }}}} starts at byte {c.show('storpath_block_partition_start_bytes', ('device',),
            fmt='%.0f')} of {{{{ $labels.disk }}}}, which is not a multiple of the disk's physical block size:
            every write of a block spans two physical blocks that the disk must read, modify and write.
            Recreating the partition at a 1 MiB boundary means moving its data off and back: see the
            runbook.""",
        ),
        c.alert(
            "MdMemberDataMisaligned",
            'storpath_md_member_data_misaligned{boundary="physical_block"} == 1',
            cfg.misaligned_for, cfg.misaligned_severity,
            "An md array's data does not start on a member disk's physical block boundary.",
            f"""The data of {{{{ $labels.array }}}} starts off a physical block boundary on member
            {{{{ $labels.member }}}} (the member's start on its disk plus md's data offset of
            {c.show('storpath_md_member_data_offset_bytes', ('array', 'member'), fmt='%.0f')} bytes): every
            write to the array that lands on that member is a read-modify-write.""",
        ),
    ]
