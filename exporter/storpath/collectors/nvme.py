"""NVMe namespaces: the LBA format in use against the best one the namespace supports.

sysfs gives the block sizes in use on every scrape. The supported formats need Identify
Namespace, which is privileged and may be slow: it runs in the background task
`nvme-identify` at start, again whenever a namespace appears, disappears or changes size
or block size (seen on a scrape, which only compares cheap sysfs values), and on a long
interval. A scrape serves the latest Identify data, never Identify data older than the
namespace's current format.
"""

from __future__ import annotations

import logging
import re
from typing import Dict, List, Optional

from storpath.base import log
from storpath.analysis.nvme import Identified
from storpath.collectors import Collector, register
from storpath.base.config import Duration
from storpath.scrape.families import GAUGE, Family, Rows
from storpath.readers.nvme import IdentifyResult, NvmeNamespace

_DEVICE = ("device",)
_CONTROLLER = ("controller",)

CONTROLLER_INFO = Family(
    "storpath_nvme_controller_info", GAUGE,
    "An NVMe controller: its PCI function (empty for fabrics), identity and transport; always 1.",
    ("controller", "address", "model", "serial", "firmware", "transport"),
    doc="an NVMe controller (`nvme0`), its PCI function (empty for fabrics transports) and identity; always 1")
NAMESPACE_INFO = Family(
    "storpath_nvme_namespace_info", GAUGE,
    "An NVMe namespace's block device, the controller Identify is sent to, and its namespace ID; always 1.",
    ("device", "controller", "nsid"),
    doc="a namespace's block device, the controller Identify goes to (with native multipath: the first path's "
        "controller; `nvme1n1` may belong to `nvme3`), and its namespace ID; always 1")
LBA_SIZE = Family(
    "storpath_nvme_namespace_lba_size_bytes", GAUGE,
    "Data size of the LBA format in use (queue/logical_block_size).", _DEVICE, "bytes",
    doc="data size of the LBA format in use (`queue/logical_block_size`)")
PHYSICAL_BLOCK_SIZE = Family(
    "storpath_nvme_namespace_physical_block_size_bytes", GAUGE,
    "Physical block size the drive reports (queue/physical_block_size).", _DEVICE, "bytes",
    doc="physical block size the drive reports (`queue/physical_block_size`)")
OPTIMAL_IO_SIZE = Family(
    "storpath_nvme_namespace_optimal_io_size_bytes", GAUGE,
    "Optimal I/O size the drive reports (queue/optimal_io_size); absent when the drive states none.", _DEVICE,
    "bytes",
    doc="optimal I/O size the drive reports (`queue/optimal_io_size`, from NOWS/NPWG); absent when 0 (the drive "
        "states none)")
BEST_LBA_SIZE = Family(
    "storpath_nvme_namespace_best_lba_size_bytes", GAUGE,
    "Data size of the best LBA format the namespace supports with the metadata size in use, ranked by Relative "
    "Performance, then data size (Identify Namespace).", _DEVICE, "bytes",
    doc="data size of the best format the namespace supports **with the metadata size in use**, ranked by "
        "Relative Performance (Best > Better > Good > Degraded), then by data size. Absent while the formats are "
        "unknown")
LBA_FORMAT_INFO = Family(
    "storpath_nvme_namespace_lba_format_info", GAUGE,
    "One LBA format the namespace supports (Identify Namespace); always 1.",
    ("device", "index", "data_size_bytes", "metadata_size_bytes", "relative_performance", "in_use"),
    doc="one supported LBA format (formats with LBADS below 9 are \"not available\" and left out); "
        "`relative_performance` is `best`, `better`, `good` or `degraded`, `in_use` is `true` or `false`; always 1")
IDENTIFY_AVAILABLE = Family(
    "storpath_nvme_identify_available", GAUGE,
    "1 if the LBA formats of every namespace of this controller are known (Identify Namespace read), 0 if not; "
    "the reason is logged.", _CONTROLLER,
    doc="1 if the formats of every namespace of the controller are known, 0 if Identify could not be read "
        "(reason in the log). Absent until the first Identify pass and for controllers without namespaces")
IDENTIFY_TIMESTAMP = Family(
    "storpath_nvme_identify_timestamp_seconds", GAUGE,
    "When the Identify Namespace data served for this controller was read (captured data: when it was "
    "captured); the oldest of its namespaces.", _CONTROLLER, "seconds",
    doc="when the Identify data served was read (the oldest of the controller's namespaces); for captured data, "
        "the capture file's mtime")

FAMILIES = (CONTROLLER_INFO, NAMESPACE_INFO, LBA_SIZE, PHYSICAL_BLOCK_SIZE, OPTIMAL_IO_SIZE, BEST_LBA_SIZE,
            LBA_FORMAT_INFO, IDENTIFY_AVAILABLE, IDENTIFY_TIMESTAMP)

_CONTROLLER_NAME = re.compile(r"\bnvme\d+\b")


@register("nvme", default=True)
class NvmeCollector(Collector):
    """NVMe namespaces: LBA format in use against the best supported one (Identify Namespace), and controllers."""

    families = FAMILIES
    reads = ("nvme_controllers", "nvme_namespaces")
    enriches = ("nvme_identify",)  # a failed Identify pass leaves out its rows, not the sysfs ones
    config_defaults = {
        # Formats only change with `nvme format`, which changes sysfs and triggers a read
        # anyway: the interval is a backstop.
        "identify_interval": Duration(6 * 3600),
        # A drive that does not answer Identify must not hold the task for long.
        "identify_timeout": Duration(10),
        "nvme_cli": "nvme",
        # How long the first scrapes after start wait for the first Identify pass.
        "startup_wait": Duration(5),
    }

    # ---- scrape ------------------------------------------------------------------
    def values(self, snapshot) -> Rows:
        controllers, namespaces = snapshot.nvme_controllers, snapshot.nvme_namespaces
        results = snapshot.nvme_identify if snapshot.nvme_identify is not None else {}
        rows = Rows()
        for c in controllers:
            rows.add(CONTROLLER_INFO, (c.name, c.address or "", c.model or "", c.serial or "", c.firmware or "",
                                       c.transport or ""), 1)
        per_controller: Dict[str, List[Optional[IdentifyResult]]] = {}
        for ns in namespaces:
            identified = results.get(ns.device)
            if identified is not None and identified.fingerprint != ns.fingerprint:
                identified = None  # read before the namespace changed: a new pass is due
            if ns.controller is not None:
                per_controller.setdefault(ns.controller, []).append(
                    identified.result if identified is not None else None)
            self._namespace_rows(ns, identified, rows)
        self._identify_rows(per_controller, rows)
        return rows

    def _namespace_rows(self, ns: NvmeNamespace, identified: Optional[Identified],
                        rows: Rows) -> None:
        dev = (ns.device,)
        rows.add(NAMESPACE_INFO, (ns.device, ns.controller or "", str(ns.nsid) if ns.nsid is not None else ""), 1)
        for family, value in ((LBA_SIZE, ns.logical_block_size), (PHYSICAL_BLOCK_SIZE, ns.physical_block_size),
                              (OPTIMAL_IO_SIZE, ns.optimal_io_size)):
            if value:
                rows.add(family, dev, value)
        if identified is None or identified.in_use_size is None:
            return
        if ns.logical_block_size and identified.in_use_size != ns.logical_block_size:
            # Identify and the block layer disagree: the data is from before a format.
            log.once(self.log, logging.WARNING, ("stale", ns.device, identified.in_use_size),
                     "Identify Namespace data disagrees with sysfs: leaving the formats out until read again",
                     device=ns.device, identify_lba_bytes=identified.in_use_size,
                     sysfs_lba_bytes=ns.logical_block_size)
            return
        rows.add(BEST_LBA_SIZE, dev, identified.best_size)
        for labels in identified.formats:
            rows.add(LBA_FORMAT_INFO, labels, 1)

    def _identify_rows(self, per_controller: Dict[str, List[Optional[IdentifyResult]]],
                       rows: Rows) -> None:
        unknown: Dict[str, List[str]] = {}  # reason, without the controller's name -> controllers
        for controller, ctrl_results in sorted(per_controller.items()):
            known = [r for r in ctrl_results if r is not None]
            if not known:
                continue  # not read yet: neither known nor unknown
            failed = [r for r in known if r.identify is None]
            for reason in sorted({_CONTROLLER_NAME.sub("nvme*", r.error or "") for r in failed}):
                unknown.setdefault(reason, []).append(controller)
            rows.add(IDENTIFY_AVAILABLE, (controller,), 0 if failed or len(known) < len(ctrl_results) else 1)
            if len(known) > len(failed):
                rows.add(IDENTIFY_TIMESTAMP, (controller,), min(r.read_at for r in known if r.identify is not None))
        # One line per reason, not one per controller: a host of 1024 drives without root
        # has one reason.
        for reason, names in unknown.items():
            shown = ",".join(names[:8]) + (f",... ({len(names)} controllers)" if len(names) > 8 else "")
            log.once(self.log, logging.WARNING, ("identify", reason, tuple(names)),
                     "NVMe LBA formats unknown: Identify Namespace could not be read; exporting what sysfs gives",
                     controllers=shown, reason=reason)
