"""Where the tree's facts come from: a `storpath check` run (storpath.findings.Facts and
its result), or the exporter's last snapshot (storpath.snapshot.Snapshot) for the landing
page, which never reads the machine itself."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from storpath.findings import CheckResult, Facts, run_checks
from storpath.snapshot import Snapshot
from storpath.tree.model import MD, ZPOOL, Array, TreeInput, disk_link_texts

# The findings the landing page derives from the last snapshot (the others run privileged
# commands in `storpath check`: NVMe Identify, the SMART log, zpool).
SCRAPE_SUBSYSTEMS = ("pcie", "md")


def md_arrays(arrays) -> List[Array]:
    """storpath.readers.md.MdArray records as the tree's arrays."""
    return [Array(name=a.name, kind=MD, detail=a.level or "not started",
                  members=tuple(m.name for m in a.members)) for a in arrays]


def zfs_pools(pools) -> List[Array]:
    """storpath.readers.zfs.ZfsPool records as the tree's pools: every leaf vdev (data,
    log, cache, spare) is a member; the detail is the layout of the data vdevs."""
    result = []
    for pool in pools:
        tops = [v for v in pool.vdevs if v.parent == pool.name and v.vdev_class == "normal"]
        layouts = sorted({_layout(v) for v in tops})
        result.append(Array(name=pool.name, kind=ZPOOL, detail="+".join(layouts),
                            members=tuple(v.name for v in pool.vdevs if v.leaf)))
    return result


def _layout(vdev) -> str:
    """'raidz2' for raidz2-0 (the JSON's type says only 'raidz'), 'mirror', 'stripe' for a plain disk."""
    if vdev.leaf:
        return "stripe"
    name, _, number = vdev.name.rpartition("-")
    return name if name and number.isdigit() else (vdev.type or vdev.name)


def nvme_models(controllers) -> Dict[str, str]:
    """PCI address -> model of the NVMe controllers there (storpath.readers.nvme)."""
    models: Dict[str, str] = {}
    for ctrl in controllers:
        if ctrl.address and ctrl.model:
            models.setdefault(ctrl.address, ctrl.model)
    return models


def from_check(facts: Facts, result: CheckResult) -> TreeInput:
    """The machine as `storpath check` read it: its snapshot, the pools its zfs subsystem
    read (memoised, so nothing runs twice)."""
    snapshot = facts.snapshot
    arrays: List[Array] = []
    if "md" in result.ran:
        arrays += md_arrays(snapshot.md or [])
    if "zfs" in result.ran:
        zpool = facts.memo("zfs.snapshot", lambda: None)
        arrays += zfs_pools(zpool.pools if zpool is not None else [])
    models = nvme_models(snapshot.nvme_controllers or []) if "nvme" in result.ran else {}
    subjects = {f.subject for f in result.findings}
    drives = snapshot.sas_drive_phys  # read now for the sas check (storpath.snapshot.read_now_sources)
    return TreeInput(pci=facts.pci_devices(), links=facts.pcie_links(), blocks=facts.block_devices(),
                     models=models, arrays=arrays, findings=list(result.findings),
                     groups={s: facts.group_of(s) for s in subjects},
                     disk_links=disk_link_texts(snapshot.sas_phys or [], snapshot.ata_links or [], drives))


def from_scrape(snapshot: Snapshot, config: Optional[Dict[str, Any]] = None) -> TreeInput:
    """The exporter's last scrape (storpath.snapshot.Snapshot): the PCI tree and block
    devices it read, the md arrays, the pools and NVMe models of the background tasks'
    latest results. The findings are those SCRAPE_SUBSYSTEMS derive from these records alone."""
    pci, blocks = snapshot.pci or [], snapshot.blocks or []
    facts = Facts(roots=None, config=config or {}, snapshot=snapshot)
    links = facts.pcie_links() if snapshot.pci is not None else {}
    zpool = snapshot.zpool.snapshot if snapshot.zpool is not None else None
    arrays = md_arrays(snapshot.md or []) + zfs_pools(zpool.pools if zpool is not None else [])
    only = [s for s in SCRAPE_SUBSYSTEMS if s != "md" or snapshot.md is not None]
    result = run_checks(facts, only=only)
    subjects = {f.subject for f in result.findings}
    models = nvme_models(snapshot.nvme_controllers or [])
    return TreeInput(pci=pci, links=links, blocks=blocks, models=models, arrays=arrays, findings=list(result.findings),
                     groups={s: facts.group_of(s) for s in subjects},
                     disk_links=disk_link_texts(snapshot.sas_phys or [], snapshot.ata_links or [],
                                                snapshot.sas_drive_phys))
