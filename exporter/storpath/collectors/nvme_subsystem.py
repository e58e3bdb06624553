"""NVMe native multipath: each subsystem's paths (controllers), their state, transport and
NUMA node, each namespace path's ANA state, and the verdicts of analysis.paths."""

from __future__ import annotations

from typing import Optional

from storpath.analysis.paths import crosses_numa, multipathed, optimized_paths, subsystem_count
from storpath.base.config import Duration
from storpath.collectors import Collector, register
from storpath.scrape.families import GAUGE, Family, Rows
from storpath.readers.nvme_subsystem import ANA_STATES, PATH_STATES

SUBSYSTEM_INFO = Family(
    "storpath_nvme_subsystem_info", GAUGE,
    "An NVMe subsystem: its NQN, model, serial and I/O policy (iopolicy); always 1.",
    ("subsystem", "nqn", "model", "serial", "iopolicy"),
    doc="one per /sys/class/nvme-subsystem entry: `nqn` (subsysnqn), `model`, `serial`, `iopolicy` (`numa`, "
        "`round-robin`, `queue-depth`: how the kernel picks a path for each I/O); always 1")
NAMESPACE_INFO = Family(
    "storpath_nvme_subsystem_namespace_info", GAUGE,
    "A namespace's block device (the multipath head disk) and its subsystem; always 1.", ("subsystem", "device"),
    doc="the join from a namespace's block device (`device`, as node_disk_* names it) to its subsystem; always 1")
PATHS = Family(
    "storpath_nvme_subsystem_paths", GAUGE,
    "Controllers (paths) the kernel lists for the subsystem, whatever their state.", ("subsystem",),
    doc="controllers (paths) the kernel lists for the subsystem, whatever their state; a controller deleted after "
        "`ctrl_loss_tmo` is no longer listed (StoragePathsMissing compares with the last day's maximum)")
PATHS_LIVE = Family(
    "storpath_nvme_subsystem_paths_live", GAUGE,
    "Controllers of the subsystem in state live: the paths that carry I/O.", ("subsystem",),
    doc="controllers in state `live`; below `paths` the subsystem runs on fewer legs (StoragePathsDegraded), 0 "
        "none at all (StoragePathLost)")
PATH_STATE = Family(
    "storpath_nvme_path_state", GAUGE,
    "A controller path's state, as a state set: 1 for the current value, 0 for the others.",
    ("subsystem", "controller", "transport", "state"),
    doc="state set over the controller's `state`: `new`, `live`, `resetting`, `connecting`, `deleting` (also "
        "`deleting (no IO)`), `dead`, `unknown` (unreadable or a word the kernel did not print before); "
        "`transport` `pcie`, `tcp`, `rdma`, `fc`, `loop`")
PATH_INFO = Family(
    "storpath_nvme_path_info", GAUGE,
    "A controller path's transport address (PCI address, traddr/trsvcid, FC node and port names); always 1.",
    ("subsystem", "controller", "transport", "address"),
    doc="where the path goes: `address` the controller's `address` attribute (a PCI address for pcie, "
        "`traddr=...,trsvcid=...` for tcp and rdma, `nn-0x...:pn-0x...` for fc); always 1")
PATH_NUMA_NODE = Family(
    "storpath_nvme_path_numa_node", GAUGE,
    "The NUMA node of a controller path (numa_node); absent when the kernel does not know (-1).",
    ("subsystem", "controller"),
    doc="the controller's `numa_node`: for pcie its PCI function's node, for fabrics the node of the adapter it "
        "was bound to; absent when -1")
ANA_STATE = Family(
    "storpath_nvme_path_ana_state", GAUGE,
    "A namespace path's ANA state (ana_state), as a state set; absent where the controller reports no ANA.",
    ("subsystem", "controller", "device", "path", "state"),
    doc="state set over the path disk's (`path`, nvmeXcYnZ) `ana_state`: `optimized`, `non-optimized`, "
        "`inaccessible`, `persistent-loss`, `change`; `device` the namespace's block device; absent where the "
        "controller does not report Asymmetric Namespace Access")
NAMESPACE_OPTIMIZED = Family(
    "storpath_nvme_namespace_optimized_paths", GAUGE,
    "Live paths whose ANA state is optimized, per namespace; absent where no path reports ANA.",
    ("subsystem", "device"),
    doc="live paths in ANA state `optimized`; 0 (StorageNoOptimizedPath): every I/O goes through the array's "
        "non-owning controller or waits; absent where no path of the namespace reports ANA")
NUMA_CROSSING = Family(
    "storpath_nvme_subsystem_numa_crossing", GAUGE,
    "1 when the subsystem's live paths sit on several NUMA nodes and its iopolicy spreads I/O over all of them "
    "(round-robin, queue-depth); else 0.", ("subsystem",),
    doc="1 when live paths sit on more than one NUMA node and `iopolicy` is `round-robin` or `queue-depth`: part "
        "of the I/O crosses sockets though a near path exists (iopolicy `numa` picks the nearest); 0 otherwise")

FAMILIES = (SUBSYSTEM_INFO, NAMESPACE_INFO, PATHS, PATHS_LIVE, PATH_STATE, PATH_INFO, PATH_NUMA_NODE, ANA_STATE,
            NAMESPACE_OPTIMIZED, NUMA_CROSSING)


@register("nvme_subsystem", default=True)
class NvmeSubsystemCollector(Collector):
    """NVMe native multipath: each subsystem's controller paths, their states, ANA states and NUMA nodes.

    Only subsystems of more than one path, or with a fabrics path or a path down
    (analysis.paths.multipathed); none of them: nothing exported, no family headers."""

    families = FAMILIES
    reads = ("nvme_subsystems",)
    config_defaults = {
        # How often every controller's state is read for the local drives (one PCIe controller
        # each), whose subsystems a scrape then reads nothing of: a local controller found
        # resetting or dead shows within this (storpath.scrape.slow.NvmeControllerStates).
        "state_interval": Duration(15),
    }

    def values(self, snapshot) -> Optional[Rows]:
        # A local single-port drive is a subsystem of one live PCIe controller: the nvme
        # collector has it, and 13 series of one path each would cost a 2048-drive host 26000.
        subsystems = [sub for sub in snapshot.nvme_subsystems if multipathed(sub)]
        if not subsystems:
            return None
        rows = Rows()
        for sub in subsystems:
            name = sub.name
            rows.add(SUBSYSTEM_INFO, (name, sub.nqn or "", sub.model or "", sub.serial or "", sub.iopolicy or ""), 1)
            for device in sub.namespaces:
                rows.add(NAMESPACE_INFO, (name, device), 1)
            count = subsystem_count(sub)
            rows.add(PATHS, (name,), count.paths)
            rows.add(PATHS_LIVE, (name,), count.live)
            for path in sub.paths:
                transport = path.transport or ""
                for state in PATH_STATES:
                    rows.add(PATH_STATE, (name, path.controller, transport, state), 1.0 if state == path.state else 0.0)
                rows.add(PATH_INFO, (name, path.controller, transport, path.address or ""), 1)
                rows.add(PATH_NUMA_NODE, (name, path.controller), path.numa_node)
                for ns in path.namespace_paths:
                    if ns.ana_state is None:
                        continue
                    for state in ANA_STATES:
                        rows.add(ANA_STATE, (name, path.controller, ns.namespace, ns.disk, state),
                                 1.0 if state == ns.ana_state else 0.0)
            for device, live_optimized in optimized_paths(sub).items():
                rows.add(NAMESPACE_OPTIMIZED, (name, device), live_optimized)
            rows.add(NUMA_CROSSING, (name,), 1.0 if crosses_numa(sub) else 0.0)
        return rows
