"""Where the tree's facts come from: a `storpath check` run (storpath.report.findings.Facts and
its result), or the exporter's last snapshot (storpath.scrape.snapshot.Snapshot) for the landing
page, which never reads the machine itself."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from storpath.analysis.paths import judge_map, map_count, multipathed, path_verdict, subsystem_count
from storpath.analysis.raid import judged, own_link_rate
from storpath.report.findings import CheckResult, Facts, run_checks
from storpath.scrape.snapshot import Snapshot
from storpath.report.tree.model import MD, MULTIPATH, RAID, ZPOOL, Array, Node, TreeInput, disk_link_texts

# The findings the landing page derives from the last snapshot (the others run privileged
# commands in `storpath check`: NVMe Identify, the SMART log, zpool).
SCRAPE_SUBSYSTEMS = ("pcie", "md", "nvme_paths", "multipath")


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


def path_arrays(subsystems, maps, dmsetup, blocks) -> List[Array]:
    """NVMe subsystems (readers.nvme_subsystem) and dm-multipath maps (readers.dm_multipath)
    as the tree's arrays: each path a member, under its controller or HBA, with its state."""
    result = []
    for sub in subsystems or ():
        if not multipathed(sub):
            continue
        count = subsystem_count(sub)
        notes = []
        for path in sub.paths:
            ana = ", ".join(f"{ns.namespace} {ns.ana_state}" for ns in path.namespace_paths if ns.ana_state)
            notes.append(" · ".join(filter(None, (f"{path.transport or '?'} {path.address or ''}".strip(),
                                                  path.state, ana))))
        result.append(Array(name=sub.name, kind=MULTIPATH,
                            detail=f"NVMe subsystem {sub.model or ''} · {count.live}/{count.paths} paths live".replace(
                                "  ", " "),
                            members=tuple(p.controller for p in sub.paths), notes=tuple(notes)))
    hba = {b.name: b.controller for b in blocks or ()}
    for found in maps or ():
        judged_paths = judge_map(found, dmsetup)
        count = map_count(judged_paths)
        notes = tuple(" · ".join(filter(None, (hba.get(j.path.device), j.path.state or "no state",
                                               "" if path_verdict(j) == "active" else path_verdict(j))))
                      for j in judged_paths)
        result.append(Array(name=found.device, kind=MULTIPATH,
                            detail=f"multipath {found.name or ''} · {count.live}/{count.paths} paths active"
                                   + (f", {count.unknown} unknown" if count.unknown else ""),
                            members=tuple(j.path.device for j in judged_paths), notes=notes))
    return result


def _layout(vdev) -> str:
    """'raidz2' for raidz2-0 (the JSON's type says only 'raidz'), 'mirror', 'stripe' for a plain disk."""
    if vdev.leaf:
        return "stripe"
    name, _, number = vdev.name.rpartition("-")
    return name if name and number.isdigit() else (vdev.type or vdev.name)


def raid_nodes(raid, blocks) -> Dict[str, tuple]:
    """A RAID controller's volumes and drives (readers.raid.RaidRun) as nodes below its
    PCI function: a volume below the block device it is (when the tool names it and the
    kernel has it), its drives below the volume, spares and JBOD drives below the controller.
    Node ids are the subjects of the raid findings, so those attach where they belong."""
    if raid is None:
        return {}
    inventory = raid.inventory
    address = {c.name: c.pci_address for c in inventory.controllers}
    names = {b.name for b in blocks}
    drive_nodes: Dict[tuple, List[Node]] = {}
    for drive, _, expectation in judged(inventory.drives, inventory.controllers):
        own = own_link_rate(drive)
        rate = "?" if own is None else f"{own / 1e9:g}"
        expected = f" (expected {expectation.expected / 1e9:g})" if expectation.verifiable and expectation.expected \
            else " (unverifiable)"
        what = f"{drive.interface or 'drive'} {rate} Gbit/s{expected} · {drive.state_word or drive.state}"
        drive_nodes.setdefault((drive.controller, drive.volume), []).append(
            Node(id=f"{drive.controller} {drive.slot}", kind=RAID, what=what, model=drive.model or ""))
    out: Dict[str, List[Node]] = {}
    for volume in inventory.volumes:
        progress = f" {volume.progress:.0%}" if volume.progress is not None else ""
        cache = "" if volume.write_back_current is None else (" · write-back" if volume.write_back_current
                                                              else " · write-through")
        what = f"{volume.level or 'RAID'} volume · {volume.state}{progress}{cache}"
        node = Node(id=f"{volume.controller} volume {volume.id}", kind=RAID, what=what, model=volume.name or "",
                    children=tuple(drive_nodes.pop((volume.controller, volume.id), [])))
        parent = volume.device if volume.device in names else address.get(volume.controller)
        if parent:
            out.setdefault(parent, []).append(node)
    for (controller, _), nodes in drive_nodes.items():
        if address.get(controller):
            out.setdefault(address[controller], []).extend(nodes)
    return {key: tuple(nodes) for key, nodes in out.items()}


def nvme_models(controllers) -> Dict[str, str]:
    """PCI address -> model of the NVMe controllers there (storpath.readers.nvme)."""
    models: Dict[str, str] = {}
    for ctrl in controllers:
        if ctrl.address and ctrl.model:
            models.setdefault(ctrl.address, ctrl.model)
    return models


def from_check(facts: Facts, result: CheckResult) -> TreeInput:
    """The machine as `storpath check` read it: its snapshot, with the RAID tools' pass and the
    pools zpool listed (read now by storpath.scrape.slow.SlowRunner)."""
    snapshot = facts.snapshot
    arrays: List[Array] = []
    if "md" in result.ran:
        arrays += md_arrays(snapshot.md or [])
    if "zfs" in result.ran and snapshot.zpool is not None and snapshot.zpool.run is not None:
        arrays += zfs_pools(snapshot.zpool.run.pools)
    arrays += path_arrays(snapshot.nvme_subsystems if "nvme_paths" in result.ran else None,
                          snapshot.multipath_maps if "multipath" in result.ran else None, snapshot.dmsetup,
                          snapshot.blocks)
    models = nvme_models(snapshot.nvme_controllers or []) if "nvme" in result.ran else {}
    subjects = {f.subject for f in result.findings}
    drives = snapshot.sas_drive_phys  # read now for the sas check (storpath.scrape.slow.SlowRunner, read now)
    return TreeInput(pci=facts.pci_devices(), links=facts.pcie_links(), blocks=facts.block_devices(),
                     models=models, arrays=arrays, findings=list(result.findings),
                     groups={s: facts.group_of(s) for s in subjects},
                     disk_links=disk_link_texts(snapshot.sas_phys or [], snapshot.ata_links or [], drives),
                     extra_children=raid_nodes(snapshot.raid.run if "raid" in result.ran and snapshot.raid
                                               else None, facts.block_devices()))


def from_scrape(snapshot: Snapshot, config: Optional[Dict[str, Any]] = None) -> TreeInput:
    """The exporter's last scrape (storpath.scrape.snapshot.Snapshot): the PCI tree and block
    devices it read, the md arrays, the pools and NVMe models of the background tasks'
    latest results. The findings are those SCRAPE_SUBSYSTEMS derive from these records alone."""
    pci, blocks = snapshot.pci or [], snapshot.blocks or []
    facts = Facts(roots=None, config=config or {}, snapshot=snapshot)
    links = facts.pcie_links() if snapshot.pci is not None else {}
    zpool = snapshot.zpool.run if snapshot.zpool is not None else None
    arrays = md_arrays(snapshot.md or []) + zfs_pools(zpool.pools if zpool is not None else []) + path_arrays(
        snapshot.nvme_subsystems, snapshot.multipath_maps, snapshot.dmsetup, blocks)
    read = {"md": snapshot.md, "nvme_paths": snapshot.nvme_subsystems, "multipath": snapshot.multipath_maps}
    only = [s for s in SCRAPE_SUBSYSTEMS if s not in read or read[s] is not None]
    result = run_checks(facts, only=only)
    subjects = {f.subject for f in result.findings}
    models = nvme_models(snapshot.nvme_controllers or [])
    return TreeInput(pci=pci, links=links, blocks=blocks, models=models, arrays=arrays, findings=list(result.findings),
                     groups={s: facts.group_of(s) for s in subjects},
                     disk_links=disk_link_texts(snapshot.sas_phys or [], snapshot.ata_links or [],
                                                snapshot.sas_drive_phys),
                     extra_children=raid_nodes(snapshot.raid.run if snapshot.raid is not None else None, blocks))
