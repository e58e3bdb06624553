"""NVMe findings: a namespace formatted with an LBA format its drive rates below another
one with the same metadata size (the FireCuda 530 ships at 512 B, its 4 KiB format is
"Best"), and namespaces whose formats could not be read.

The verdict is storpath.analysis.nvme.judge, the one behind
`storpath_nvme_namespace_best_lba_size_bytes`. Identify Namespace runs inline here (a
one-shot command may wait for it), from Roots.captured when set, as the collector's
background task does.
"""

from __future__ import annotations

from typing import Dict, List

from storpath.analysis.nvme import judge
from storpath.report.findings import INFO, WARNING, Facts, Finding, Outcome, natural_key, register

_RP_NAMES = {0: "Best", 1: "Better", 2: "Good", 3: "Degraded"}


def _size(n: int, adjective: bool = False) -> str:
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024} KiB"
    return f"{n}-byte" if adjective else f"{n} bytes"


def _fmt(f) -> str:
    meta = f" + {f.metadata_size} bytes metadata" if f.metadata_size else ""
    return f"format {f.index}: {_size(f.data_size)}{meta}, rated {_RP_NAMES.get(f.relative_performance, '?')}"


@register("nvme", collector="nvme", order=20)
def check(facts: Facts, out: Outcome) -> None:
    results = facts.part("nvme_identify")
    controllers = {c.name: c for c in facts.part("nvme_controllers")}
    for ctrl in controllers.values():
        if ctrl.address and ctrl.model:
            facts.add_label(ctrl.address, ctrl.model)
    namespaces = sorted(facts.part("nvme_namespaces"), key=lambda n: natural_key(n.device))
    unknown: Dict[str, List[str]] = {}
    judged = 0
    for ns in namespaces:
        if ns.controller is None or ns.nsid is None:
            continue
        ctrl = controllers.get(ns.controller)
        if ctrl is not None and ctrl.address:
            facts.set_group(ns.device, ctrl.address)
        result = results[ns.device].result
        if result.identify is None:
            unknown.setdefault(result.error or "unknown reason", []).append(ns.device)
            continue
        verdict = judge(result.identify)
        if verdict is None:
            continue
        if ns.logical_block_size and verdict.in_use.data_size != ns.logical_block_size:
            unknown.setdefault(f"Identify says {verdict.in_use.data_size}-byte LBAs in use, sysfs says "
                               f"{ns.logical_block_size} (data from before a format?)", []).append(ns.device)
            continue
        judged += 1
        if not verdict.improvable:
            continue
        in_use, best = verdict.in_use, verdict.best
        char_device = f"/dev/{ns.device}"
        bigger = best.data_size > in_use.data_size
        if best.relative_performance < in_use.relative_performance:
            impact = (f"the drive rates {_size(best.data_size)} {_RP_NAMES.get(best.relative_performance)} and "
                      f"{_size(in_use.data_size)} only {_RP_NAMES.get(in_use.relative_performance)}")
        else:
            impact = f"the drive rates both {_RP_NAMES.get(best.relative_performance)}, the larger blocks win"
        if bigger and in_use.data_size < 4096:
            impact += (f"; at {_size(in_use.data_size)} a 4 KiB page takes {4096 // in_use.data_size} LBAs, "
                       "which costs small random I/O most")
        out.add(Finding(
            subject=ns.device, severity=WARNING, kind="nvme.lba_format_not_best",
            title=f"formatted with {_size(in_use.data_size, True)} LBAs, the drive rates {_size(best.data_size)} "
                  f"{_RP_NAMES.get(best.relative_performance)}",
            evidence=f"in use {_fmt(in_use)}; best {_fmt(best)} (Identify Namespace, {result.source})",
            impact=impact,
            remedy=f"`nvme format {char_device} --lbaf={best.index}` ERASES ALL DATA on the namespace: back up, "
                   "stop what uses it (filesystems, md, ZFS), format, then recreate partitions and filesystems.",
            related=(ns.device,)))
    for reason, devices in sorted(unknown.items()):
        out.add(Finding(
            subject=devices[0] if len(devices) == 1 else "nvme", severity=INFO, kind="nvme.formats_unknown",
            title=f"LBA formats of {', '.join(devices)} could not be read",
            evidence=reason,
            impact="whether a faster LBA format exists is unknown",
            remedy="Run `storpath check` as root (Identify Namespace needs CAP_SYS_ADMIN) or install nvme-cli; "
                   "a capture made as root (`sudo storpath capture`) carries the data.",
            related=tuple(devices)))
    out.count(len(namespaces), "NVMe namespaces")
