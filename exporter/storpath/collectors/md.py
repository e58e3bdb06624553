"""Linux software RAID (md): array state, level, sync progress and members."""

from __future__ import annotations

from storpath.analysis.md import member_placement
from storpath.collectors import Collector, register
from storpath.scrape.families import GAUGE, Family, Rows
from storpath.readers.md import ARRAY_STATES, SYNC_ACTIONS

ARRAY_STATE = Family(
    "storpath_md_array_state", GAUGE,
    "The array's array_state, as a state set: 1 for the current value, 0 for the others.", ("device", "state"),
    doc="state set over `array_state`: `clear`, `inactive`, `suspended`, `readonly`, `read-auto`, `clean`, "
        "`active`, `write-pending`, `active-idle`, `broken`; 1 for the current value")
LEVEL_INFO = Family(
    "storpath_md_level_info", GAUGE,
    "The array's RAID level (personality); always 1.", ("device", "level"),
    doc="the personality (`raid0`, `raid1`, `raid10`, `raid5`, `raid6`, `linear`); absent while an array is not "
        "started; always 1")
RAID_DISKS = Family(
    "storpath_md_raid_disks", GAUGE,
    "Member slots of the array (raid_disks).", ("device",),
    doc="member slots (`raid_disks`; during a reshape the new count)")
DEGRADED_DISKS = Family(
    "storpath_md_degraded_disks", GAUGE,
    "Slots without a working member (degraded); absent for levels without redundancy such as raid0.", ("device",),
    doc="slots without a working member (`degraded`)")
SYNC_ACTION = Family(
    "storpath_md_sync_action", GAUGE,
    "What the array's sync thread does (sync_action), as a state set; absent for levels without one such as "
    "raid0.", ("device", "action"),
    doc="state set over `sync_action`: `idle`, `resync`, `recover`, `check`, `repair`, `reshape`, `frozen`")
SYNC_COMPLETED = Family(
    "storpath_md_sync_completed_ratio", GAUGE,
    "Fraction done of the running resync, recovery, check, repair or reshape (sync_completed); absent when none "
    "runs.", ("device",), "ratio",
    doc="fraction done of the running sync (`sync_completed` done/total sectors); absent when none runs or it "
        "waits (`delayed`)")
SYNC_WAITING = Family(
    "storpath_md_sync_waiting", GAUGE,
    "1 while the array's sync waits instead of running: sync_completed reads delayed, or /proc/mdstat shows "
    "resync=DELAYED or resync=PENDING; else 0. Absent for levels without a sync thread.", ("device",),
    doc="1 while a sync waits rather than runs: `sync_completed` reads `delayed` or /proc/mdstat shows "
        "`resync=DELAYED` (another array on the same disks syncs first) or `resync=PENDING` (not started, e.g. "
        "auto-read-only); `sync_action` then still reads what the kernel says (`resync` while delayed), so read "
        "it together with this; 0 otherwise")
MISMATCH_BYTES = Family(
    "storpath_md_mismatch_bytes", GAUGE,
    "Bytes found inconsistent by the last check or repair (mismatch_cnt, 512-byte sectors, times 512).", ("device",),
    "bytes", doc="bytes the last `check`/`repair` found inconsistent: `mismatch_cnt` (the kernel counts 512-byte "
                 "sectors) times 512; reset when the next one starts. In base units as every storpath size")
CHUNK_SIZE = Family(
    "storpath_md_chunk_size_bytes", GAUGE,
    "Chunk size of a striped level (chunk_size); absent for raid1 and linear.", ("device",), "bytes",
    doc="chunk size of striped levels; absent for raid1 and linear (the kernel reads 0)")
MEMBER_INFO = Family(
    "storpath_md_member_info", GAUGE,
    "A member of an array: `member` its block device, `disk` the whole disk it is on (join on `device` with "
    "storpath_block_device_info), `slot` its role, \"none\" or empty when unknown, `state` the kernel's flags "
    "(in_sync, faulty, spare, write_mostly...); always 1.", ("device", "member", "disk", "slot", "state"),
    doc="one per member: `member` its block device (`nvme1n1`, `sda2`), `disk` the whole disk (`sda` for `sda2`; "
        "join with `storpath_block_device_info{device=...}` through `label_replace`), `slot` the role number or "
        "`none` (spares, failed members, whose `slot` reads `none`); empty when the member has no `slot` file, as "
        "when only /proc/mdstat described it; `state` the kernel's "
        "comma-separated flags (`in_sync`, `faulty`, `spare`, `write_mostly`, `blocked`, `write_error`, "
        "`want_replacement`, `replacement`, `journal`...; a member being rebuilt reads `spare` with a slot "
        "number); always 1")
MEMBER_NUMA_NODES = Family(
    "storpath_md_member_numa_nodes", GAUGE,
    "Distinct NUMA nodes of the PCI functions behind the working members; above 1 means the array spans sockets "
    "or dies.", ("device",),
    doc="distinct NUMA nodes of the PCI functions behind the working (not faulty) members; above 1: the array "
        "spans sockets or dies. Absent when no member's node is known, or the PCI tree or block devices could not be "
        "read on this scrape (the array's other series are served all the same)")

FAMILIES = (ARRAY_STATE, LEVEL_INFO, RAID_DISKS, DEGRADED_DISKS, SYNC_ACTION, SYNC_COMPLETED, SYNC_WAITING,
            MISMATCH_BYTES,
            CHUNK_SIZE, MEMBER_INFO, MEMBER_NUMA_NODES)


@register("md", default=True)
class MdCollector(Collector):
    """md RAID arrays: state, level, degraded disks, sync progress, members and their NUMA nodes."""

    families = FAMILIES
    reads = ("md",)
    enriches = ("blocks", "pci")  # members' NUMA nodes: md state never waits on the PCI tree

    def values(self, snapshot) -> Rows:
        arrays = snapshot.md
        rows = Rows()
        for array in arrays:
            dev = (array.name,)
            if array.array_state is not None:
                for value in ARRAY_STATES:
                    rows.add(ARRAY_STATE, (array.name, value), 1.0 if value == array.array_state else 0.0)
            if array.level:
                rows.add(LEVEL_INFO, (array.name, array.level), 1)
            rows.add(RAID_DISKS, dev, array.raid_disks)
            rows.add(DEGRADED_DISKS, dev, array.degraded)  # None for a container (readers.md)
            if array.sync_action is not None:
                for value in SYNC_ACTIONS:
                    rows.add(SYNC_ACTION, (array.name, value), 1.0 if value == array.sync_action else 0.0)
            if array.sync_action is not None or array.sync_waiting is not None:
                rows.add(SYNC_WAITING, dev, 1.0 if array.sync_waiting else 0.0)
            if array.sync_completed is not None:
                done, total = array.sync_completed
                rows.add(SYNC_COMPLETED, dev, done / total)
            rows.add(MISMATCH_BYTES, dev, None if array.mismatch_count is None else array.mismatch_count * 512)
            rows.add(CHUNK_SIZE, dev, array.chunk_size_bytes)
            for m in array.members:
                slot = str(m.slot) if m.slot is not None else ("none" if m.slot_known else "")
                rows.add(MEMBER_INFO, (array.name, m.name, m.disk, slot, ",".join(m.state)), 1)

        if any(a.members for a in arrays) and snapshot.blocks is not None and snapshot.pci is not None:
            disk_address = {d.name: d.pci_address for d in snapshot.blocks}
            address_node = {d.address: d.static.numa_node for d in snapshot.pci}
            for name, placement in sorted(member_placement(arrays, disk_address, address_node).items()):
                if placement.numa_nodes:
                    rows.add(MEMBER_NUMA_NODES, (name,), len(placement.numa_nodes))
        return rows
