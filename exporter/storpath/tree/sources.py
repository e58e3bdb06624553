"""Where the tree's facts come from: a `storpath check` run (storpath.findings.Facts and
its result), or the exporter's last scrape (storpath.facts.ScrapeFacts) for the landing
page, which never reads the machine itself."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from storpath.analysis.pcie import analyse, judge
from storpath.findings import CheckResult, Facts, run_checks
from storpath.tree.model import MD, ZPOOL, Array, TopologyFacts

# The findings the landing page can derive from what a scrape kept, without reading
# anything: the others need reads of their own (NVMe Identify, zpool, SAS PHYs, NUMA nodes).
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


def from_check(facts: Facts, result: CheckResult) -> TopologyFacts:
    """The machine as `storpath check` read it: the arrays and pools its md and zfs
    subsystems read (memoised, so nothing runs twice), the NVMe models from sysfs."""
    from storpath.readers.nvme import read_controllers

    arrays: List[Array] = []
    if "md" in result.ran:
        arrays += md_arrays(facts.memo("md.arrays", lambda: []))
    if "zfs" in result.ran:
        snapshot = facts.memo("zfs.snapshot", lambda: None)
        arrays += zfs_pools(snapshot.pools if snapshot is not None else [])
    models = nvme_models(read_controllers(facts.roots)) if "nvme" in result.ran else {}
    subjects = {f.subject for f in result.findings}
    return TopologyFacts(pci=facts.pci_devices(), links=facts.pcie_links(), blocks=facts.block_devices(),
                         models=models, arrays=arrays, findings=list(result.findings),
                         groups={s: facts.group_of(s) for s in subjects})


def from_scrape(scrape, config: Optional[Dict[str, Any]] = None) -> TopologyFacts:
    """The exporter's last scrape (storpath.facts.ScrapeFacts): the PCI tree and block
    devices it read, the link expectations the pcie collector derived, and what the md,
    zfs and nvme collectors kept. The findings are those SCRAPE_SUBSYSTEMS derive from
    these records alone."""
    from storpath.facts import FrozenReads

    pci, blocks = scrape.pci or [], scrape.blocks or []
    expected = scrape.kept.get("pcie.expectations")
    if expected is not None:
        links = {d.address: judge(d, expected[d.address]) for d in pci if d.address in expected}
    else:
        links = analyse(pci)
    kept_md = scrape.kept.get("md.arrays")
    arrays = md_arrays(kept_md or []) + zfs_pools(scrape.kept.get("zfs.pools") or [])
    facts = Facts(roots=None, config=config or {}, reads=FrozenReads(pci, blocks))
    facts.memo("pcie.links", lambda: links)
    if kept_md is not None:
        facts.memo("md.arrays", lambda: kept_md)
    only = [s for s in SCRAPE_SUBSYSTEMS if s != "md" or kept_md is not None]
    result = run_checks(facts, only=only)
    subjects = {f.subject for f in result.findings}
    models = nvme_models(scrape.kept.get("nvme.controllers") or [])
    return TopologyFacts(pci=pci, links=links, blocks=blocks, models=models, arrays=arrays, findings=list(result.findings),
                         groups={s: facts.group_of(s) for s in subjects})
