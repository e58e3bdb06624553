"""Linux software RAID (md): array state, level, sync progress and members."""

from __future__ import annotations

from typing import Iterable

from prometheus_client.core import GaugeMetricFamily, Metric

from storpath.analysis.md import member_placement
from storpath.collectors import Collector, register
from storpath.readers.md import ARRAY_STATES, SYNC_ACTIONS, read_md_arrays


@register("md", default=True)
class MdCollector(Collector):
    """md RAID arrays: state, level, degraded disks, sync progress, members and their NUMA nodes."""

    def collect(self) -> Iterable[Metric]:
        arrays = read_md_arrays(self.roots)

        def gauge(name, doc, labels=("device",)):
            return GaugeMetricFamily(f"storpath_md_{name}", doc, labels=list(labels))

        state = gauge("array_state", "The array's array_state, as a state set: 1 for the current value, 0 for the "
                      "others.", ("device", "state"))
        level = gauge("level_info", "The array's RAID level (personality); always 1.", ("device", "level"))
        raid_disks = gauge("raid_disks", "Member slots of the array (raid_disks).")
        degraded = gauge("degraded_disks", "Slots without a working member (degraded); absent for levels without "
                         "redundancy such as raid0.")
        action = gauge("sync_action", "What the array's sync thread does (sync_action), as a state set; absent for "
                       "levels without one such as raid0.", ("device", "action"))
        completed = gauge("sync_completed_ratio", "Fraction done of the running resync, recovery, check, repair or "
                          "reshape (sync_completed); absent when none runs.")
        mismatch = gauge("mismatch_sectors", "512-byte sectors found inconsistent by the last check or repair "
                         "(mismatch_cnt).")
        chunk = gauge("chunk_size_bytes", "Chunk size of a striped level (chunk_size); absent for raid1 and linear.")
        member = gauge("member_info", "A member of an array: `member` its block device, `disk` the whole disk it is "
                       "on (join on `device` with storpath_block_device_info), `slot` its role or \"none\", `state` "
                       "the kernel's flags (in_sync, faulty, spare, write_mostly...); always 1.",
                       ("device", "member", "disk", "slot", "state"))
        numa = gauge("member_numa_nodes", "Distinct NUMA nodes of the PCI functions behind the working members; "
                     "above 1 means the array spans sockets or dies.")

        for array in arrays:
            dev = [array.name]
            if array.array_state is not None:
                for value in ARRAY_STATES:
                    state.add_metric([array.name, value], 1.0 if value == array.array_state else 0.0)
            if array.level:
                level.add_metric([array.name, array.level], 1)
            for family, value in ((raid_disks, array.raid_disks), (degraded, array.degraded),
                                  (mismatch, array.mismatch_count), (chunk, array.chunk_size_bytes)):
                if value is not None:
                    family.add_metric(dev, value)
            if array.sync_action is not None:
                for value in SYNC_ACTIONS:
                    action.add_metric([array.name, value], 1.0 if value == array.sync_action else 0.0)
            if array.sync_completed is not None:
                done, total = array.sync_completed
                completed.add_metric(dev, done / total)
            for m in array.members:
                slot = str(m.slot) if m.slot is not None else ("none" if m.slot_known else "")
                member.add_metric([array.name, m.name, m.disk, slot, ",".join(m.state)], 1)

        if any(a.members for a in arrays):
            # The scrape's shared reads: the PCI tree and block devices are read once for all collectors.
            disk_address = {d.name: d.pci_address for d in self.ctx.facts.blocks()}
            address_node = {d.address: d.static.numa_node for d in self.ctx.facts.pci()}
            for name, placement in sorted(member_placement(arrays, disk_address, address_node).items()):
                if placement.numa_nodes:
                    numa.add_metric([name], len(placement.numa_nodes))

        return [state, level, raid_disks, degraded, action, completed, mismatch, chunk, member, numa]
