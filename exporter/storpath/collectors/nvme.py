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
import threading
from typing import Dict, Iterable, List, Optional, Tuple

from prometheus_client.core import Metric

from storpath import log
from storpath.analysis.nvme import judge
from storpath.collectors import Collector, register
from storpath.config import Duration
from storpath.exposition import SeriesFamily
from storpath.readers.nvme import IdentifyResult, NvmeController, NvmeNamespace, NvmeReader, identify_namespace
from storpath.sysfs import same_objects

TASK = "nvme-identify"
_CONTROLLER_NAME = re.compile(r"\bnvme\d+\b")


@register("nvme", default=True)
class NvmeCollector(Collector):
    """NVMe namespaces: LBA format in use against the best supported one (Identify Namespace), and controllers."""

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

    def __init__(self, ctx):
        super().__init__(ctx)
        cfg = {**self.config_defaults, **(ctx.config or {})}
        self.timeout = float(cfg["identify_timeout"])
        self.nvme_cli = str(cfg["nvme_cli"])
        self.startup_wait = float(cfg["startup_wait"])
        interval = float(cfg["identify_interval"])
        self._lock = threading.Lock()
        # device -> (fingerprint of the namespace when read, result)
        self._results: Dict[str, Tuple[Tuple, IdentifyResult]] = {}
        self._fingerprints_read: Optional[Dict[str, Tuple]] = None  # what the last pass saw
        self._triggered_for: Optional[Dict[str, Tuple]] = None
        self._compared: Tuple[List[NvmeNamespace], Optional[Dict[str, Tuple]]] = ([], None)
        self._first_pass = threading.Event()
        self._served_from: Optional[tuple] = None  # (controllers, namespaces, Identify results) last served
        self.reader = NvmeReader(self.roots, hold_dirs=True)
        self.task = ctx.scheduler.add(TASK, self.identify_all, interval=interval, jitter=interval / 10)

    # ---- background ------------------------------------------------------------
    def identify_all(self) -> None:
        try:
            namespaces = self.reader.namespaces()
            results: Dict[str, Tuple[Tuple, IdentifyResult]] = {}
            for ns in namespaces:
                if ns.controller is None or ns.nsid is None:
                    continue
                result = identify_namespace(self.roots, ns.controller, ns.nsid, self.nvme_cli, self.timeout)
                results[ns.device] = (ns.fingerprint, result)
                if result.error is None:
                    log.kv(self.log, logging.DEBUG, "Identify Namespace read", device=ns.device, source=result.source)
            with self._lock:
                self._results = results
                self._fingerprints_read = {ns.device: ns.fingerprint for ns in namespaces}
        finally:
            self._first_pass.set()

    def _maybe_trigger(self, namespaces: List[NvmeNamespace]) -> None:
        # The outcome depends only on the namespace records (the same objects while nothing
        # changes) and on what the last Identify pass saw (a new dict per pass).
        with self._lock:
            seen = self._fingerprints_read
        last_namespaces, last_seen = self._compared
        if seen is last_seen and same_objects(last_namespaces, namespaces):
            return
        self._compared = (namespaces, seen)
        current = {ns.device: ns.fingerprint for ns in namespaces}
        with self._lock:
            if seen is None or current == seen or current == self._triggered_for:
                return
            self._triggered_for = current
        log.kv(self.log, logging.INFO, "NVMe namespaces changed, reading Identify Namespace again",
               devices=",".join(sorted(set(current) ^ set(seen) | {d for d in current if current[d] != seen.get(d)})))
        self.task.trigger()

    # ---- scrape ------------------------------------------------------------------
    @staticmethod
    def _families() -> Dict[str, SeriesFamily]:
        def gauge(name: str, doc: str, labels=("device",)) -> SeriesFamily:
            return SeriesFamily(f"storpath_nvme_{name}", doc, labels)

        return dict(
            ctrl_info=gauge("controller_info", "An NVMe controller: its PCI function (empty for fabrics), identity "
                            "and transport; always 1.",
                            ("controller", "address", "model", "serial", "firmware", "transport")),
            ns_info=gauge("namespace_info", "An NVMe namespace's block device, the controller Identify is sent to, "
                          "and its namespace ID; always 1.", ("device", "controller", "nsid")),
            lba=gauge("namespace_lba_size_bytes", "Data size of the LBA format in use (queue/logical_block_size)."),
            physical=gauge("namespace_physical_block_size_bytes", "Physical block size the drive reports "
                           "(queue/physical_block_size)."),
            optimal=gauge("namespace_optimal_io_size_bytes", "Optimal I/O size the drive reports "
                          "(queue/optimal_io_size); absent when the drive states none."),
            best=gauge("namespace_best_lba_size_bytes", "Data size of the best LBA format the namespace supports "
                       "with the metadata size in use, ranked by Relative Performance, then data size (Identify "
                       "Namespace)."),
            formats=gauge("namespace_lba_format_info", "One LBA format the namespace supports (Identify "
                          "Namespace); always 1.", ("device", "index", "data_size_bytes", "metadata_size_bytes",
                                                    "relative_performance", "in_use")),
            available=gauge("identify_available", "1 if the LBA formats of every namespace of this controller are "
                            "known (Identify Namespace read), 0 if not; the reason is logged.", ("controller",)),
            read_at=gauge("identify_timestamp_seconds", "When the Identify Namespace data served for this "
                          "controller was read (captured data: when it was captured); the oldest of its "
                          "namespaces.", ("controller",)),
        )

    ORDER = ("ctrl_info", "ns_info", "lba", "physical", "optimal", "best", "formats", "available", "read_at")
    def _render(self, controllers: List[NvmeController], namespaces: List[NvmeNamespace],
                results: Dict[str, Tuple[Tuple, IdentifyResult]], families: Dict[str, SeriesFamily]) -> None:
        """Fill every family from the records of one scrape."""
        for ctrl in controllers:
            families["ctrl_info"].add((ctrl.name, ctrl.address or "", ctrl.model or "", ctrl.serial or "",
                                       ctrl.firmware or "", ctrl.transport or ""), 1)
        per_controller: Dict[str, List[Optional[IdentifyResult]]] = {}
        for ns in namespaces:
            entry = results.get(ns.device)
            result = entry[1] if entry is not None and entry[0] == ns.fingerprint else None
            if ns.controller is not None:
                per_controller.setdefault(ns.controller, []).append(result)
            self._render_namespace(ns, result, families)

        unknown: Dict[str, List[str]] = {}  # reason, without the controller's name -> controllers
        for controller, ctrl_results in sorted(per_controller.items()):
            known = [r for r in ctrl_results if r is not None]
            if not known:
                continue  # not read yet: neither known nor unknown
            failed = [r for r in known if r.identify is None]
            for reason in sorted({_CONTROLLER_NAME.sub("nvme*", r.error or "") for r in failed}):
                unknown.setdefault(reason, []).append(controller)
            families["available"].add((controller,), 0 if failed or len(known) < len(ctrl_results) else 1)
            if len(known) > len(failed):
                families["read_at"].add((controller,), min(r.read_at for r in known if r.identify is not None))
        # One line per reason, not one per controller: a host of 1024 drives without root
        # has one reason.
        for reason, names in unknown.items():
            shown = ",".join(names[:8]) + (f",... ({len(names)} controllers)" if len(names) > 8 else "")
            log.once(self.log, logging.WARNING, ("identify", reason, tuple(names)),
                     "NVMe LBA formats unknown: Identify Namespace could not be read; exporting what sysfs gives",
                     controllers=shown, reason=reason)

    def _render_namespace(self, ns: NvmeNamespace, result: Optional[IdentifyResult],
                          families: Dict[str, SeriesFamily]) -> None:
        dev = families["lba"].label_text((ns.device,))
        families["ns_info"].add((ns.device, ns.controller or "", str(ns.nsid) if ns.nsid is not None else ""), 1)
        for name, value in (("lba", ns.logical_block_size), ("physical", ns.physical_block_size),
                            ("optimal", ns.optimal_io_size)):
            if value:
                families[name].add_text(dev, value)
        verdict = judge(result.identify) if result is not None and result.identify is not None else None
        if verdict is not None and ns.logical_block_size and verdict.in_use.data_size != ns.logical_block_size:
            # Identify and the block layer disagree: the data is from before a format.
            log.once(self.log, logging.WARNING, ("stale", ns.device, verdict.in_use.data_size),
                     "Identify Namespace data disagrees with sysfs: leaving the formats out until read again",
                     device=ns.device, identify_lba_bytes=verdict.in_use.data_size,
                     sysfs_lba_bytes=ns.logical_block_size)
            verdict = None
        if verdict is not None:
            families["best"].add_text(dev, verdict.best.data_size)
            for fmt in result.identify.formats:
                families["formats"].add((ns.device, str(fmt.index), str(fmt.data_size), str(fmt.metadata_size),
                                         fmt.relative_performance_name,
                                         "true" if fmt.index == verdict.in_use.index else "false"), 1)

    def collect(self) -> Iterable[Metric]:
        controllers = self.reader.controllers()
        namespaces = self.reader.namespaces()
        if self.ctx.scheduler.started and not self._first_pass.is_set():
            self._first_pass.wait(self.startup_wait)
        self._maybe_trigger(namespaces)
        with self._lock:
            results = self._results  # replaced, never changed, by each Identify pass
        # The readers hand out the same records while nothing changes, and each Identify
        # pass makes a new result dict: then every line is what the last scrape served,
        # and the writer, which keeps that text, does not ask for it (SeriesFamily.set_text).
        last = self._served_from
        if last is None or results is not last[2] or not same_objects(controllers, last[0]) or not same_objects(
                namespaces, last[1]):
            last = self._served_from = (controllers, namespaces, results)
        families = self._families()
        staged: List[Dict[str, SeriesFamily]] = []

        def text(name: str) -> str:
            if not staged:
                staged.append(self._families())
                self._render(controllers, namespaces, results, staged[0])
            return "".join(staged[0][name].lines)

        for name in self.ORDER:
            families[name].set_text(last, lambda name=name: text(name))
        return [families[name] for name in self.ORDER]
