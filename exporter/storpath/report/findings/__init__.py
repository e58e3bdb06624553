"""Findings: what `storpath check` tells a person at a terminal.

A finding is one thing wrong (or worth knowing) about one subject (a PCI function, a
block device, a SAS PHY, an array, a pool), with the evidence in human units, what it
costs in throughput, and what to do about it. Findings come from the same readers and
analysis functions the collectors use (e.g. `storpath.analysis.pcie.analyse`), so the
report and the alerts never disagree.

Each module of this package covers one subsystem and registers a function with
`@register(name, collector=...)`: `storpath check` runs every registered subsystem whose
collector is enabled, so a subsystem plugs in without touching the command. A module
whose reader is not there (ImportError) is skipped and listed as such; a subsystem that
raises is reported as a finding about storpath itself, and the others still run.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
from dataclasses import asdict, field, replace
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from storpath.base.records import datarecord
from storpath import collectors
from storpath.base import log
from storpath.analysis.demand import link_demands
from storpath.analysis.pcie import analyse, judge, port_end
from storpath.readers.pci import PCI_ADDRESS, path_to_root
from storpath.collectors.base import SourceFailed
from storpath.base.parse import natural_key
from storpath.base.roots import Roots
from storpath.scrape.slow import COLLECTORS as SLOW_COLLECTORS, SlowRunner
from storpath.scrape.snapshot import Snapshot, take_once

LOG = log.get("findings")

CRITICAL, WARNING, INFO = "critical", "warning", "info"
SEVERITIES = (CRITICAL, WARNING, INFO)  # worst first
_RANK = {s: i for i, s in enumerate(SEVERITIES)}


@datarecord(frozen=True)
class Finding:
    """One thing wrong (or worth knowing) about one subject: the evidence, what it costs, what to do."""

    subject: str  # PCI address, block device, SAS phy, md array, zpool: the key findings are grouped by
    severity: str  # critical | warning | info
    title: str  # one line: what is wrong
    evidence: str  # what was read against what was expected, in GT/s, lanes, Gbit/s, bytes
    impact: str  # why it matters: the throughput lost
    remedy: str  # what to do
    kind: str = ""  # stable identifier for scripts and tests, e.g. "pcie.link_width_below_expected"
    subsystem: str = ""  # filled in by the runner
    related: Tuple[str, ...] = ()  # other subjects it affects (block devices below a slow hop)

    def __post_init__(self):
        if self.severity not in _RANK:
            raise ValueError(f"unknown severity {self.severity!r}")

    def as_dict(self) -> Dict[str, Any]:
        data = asdict(self)
        data["related"] = list(self.related)
        return data


def worst(severities: Iterable[str]) -> Optional[str]:
    ranked = sorted(severities, key=_RANK.__getitem__)
    return ranked[0] if ranked else None


def severity_rank(severity: str) -> int:
    return _RANK[severity]


class Facts:
    """What `storpath check` knows of the machine: one snapshot (storpath.scrape.snapshot), read
    once per check or handed over from the exporter's last scrape, shared by every
    subsystem (the PCI tree is needed by the NVMe, SAS and NUMA findings too), and what
    the subsystems derived from it (`memo`)."""

    def __init__(self, roots: Optional[Roots], config: Optional[Dict[str, Any]] = None,
                 snapshot: Optional[Snapshot] = None):
        self.roots = roots
        self.config = config or {}
        self._memo: Dict[str, Any] = {}
        self.snapshot = snapshot if snapshot is not None else take_snapshot(roots, self.config)
        self._labels: Dict[str, List[str]] = {}
        self._groups: Dict[str, str] = {}

    def part(self, name: str) -> Any:
        """A part of the snapshot (a field of storpath.scrape.snapshot.Snapshot); SourceFailed when
        it could not be read."""
        why = self.snapshot.why_missing((name,))
        if why is not None:
            raise SourceFailed(why)
        value = getattr(self.snapshot, name)
        if value is None:
            raise SourceFailed(f"{name}: not read")
        return value

    def memo(self, key: str, compute: Callable[[], Any]) -> Any:
        """The value of `compute()`, computed once per check."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def collector_config(self, name: str) -> Dict[str, Any]:
        """A collector's settings with its defaults applied, as the exporter would use them."""
        spec = collectors.load_all().get(name)
        section = self.config.get("collectors", {}).get(name, {})
        return spec.cls.settings(section) if spec else {k: v for k, v in section.items() if k != "enabled"}

    # ---- shared facts -------------------------------------------------------
    def pci_devices(self):
        return self.part("pci")

    def pci_by_address(self):
        return self.memo("pci.by_address", lambda: {d.address: d for d in self.pci_devices()})

    def pcie_links(self):
        return self.memo("pcie.links", self._pcie_links)

    def _pcie_links(self):
        """The snapshot's link expectations judged; derived here when the snapshot has none
        (the pcie collector off)."""
        expected = self.snapshot.pcie_expected
        if expected is None:
            host = self.snapshot.host
            return analyse(self.pci_devices(), guest=host.virtual if host is not None else False)
        by_address = {d.address: d for d in self.pci_devices()}
        return {d.address: judge(d, expected[d.address], port_end(d, expected[d.address], by_address))
                for d in self.pci_devices() if d.address in expected}

    def pcie_demands(self):
        """What the device below each link can use (analysis.demand), where it is known."""
        return self.memo("pcie.demands", lambda: link_demands(self.pci_devices(), self.pcie_links(),
                                                              self.snapshot.net_ports or ()))

    def host(self):
        """DMI identity and whether this is a virtual machine (storpath.readers.host)."""
        return self.part("host")

    def block_devices(self):
        return self.part("blocks")

    def block_listing(self):
        return self.part("block_listing")

    def blocks_at(self, address: str) -> List[str]:
        """Block devices whose nearest PCI function is `address`."""
        return sorted((b.name for b in self.block_devices() if b.pci_address == address), key=natural_key)

    def blocks_below(self, address: str) -> List[str]:
        """Block devices whose PCI path passes through `address` (itself included)."""
        return list(self.memo("blocks_below", self._blocks_below).get(address, ()))

    def _blocks_below(self) -> Dict[str, List[str]]:
        # Each block device's path walked once (asking per address walked every path for every
        # address: 1.3 s of the landing page's drawing on a host of 1024 drives).
        by_address = self.pci_by_address()
        below: Dict[str, set] = {}
        for dev in self.block_devices():
            if dev.pci_address is None:
                continue
            below.setdefault(dev.pci_address, set()).add(dev.name)
            for node in path_to_root(by_address.get(dev.pci_address), by_address):
                below.setdefault(node.address, set()).add(dev.name)
        return {address: sorted(names, key=natural_key) for address, names in below.items()}

    # ---- how subjects are named in the report ------------------------------
    def add_label(self, subject: str, text: str) -> None:
        """A subsystem names a subject (e.g. the NVMe findings add the drive's model)."""
        labels = self._labels.setdefault(subject, [])
        if text and text not in labels:
            labels.append(text)

    def group_of(self, subject: str) -> str:
        """The report groups findings by the hardware they are about: a block device's
        findings go with its PCI function (the drive), a subsystem may say otherwise."""
        if subject in self._groups:
            return self._groups[subject]
        for dev in self.block_devices():
            if dev.name == subject and dev.pci_address and not dev.virtual:
                return dev.pci_address if dev.controller and dev.controller.startswith("nvme") else subject
        return subject

    def set_group(self, subject: str, group: str) -> None:
        self._groups[subject] = group

    def describe(self, subject: str) -> str:
        parts: List[str] = []
        device = self.pci_by_address().get(subject) if PCI_ADDRESS.match(subject) else None
        if device is not None:
            parts.append(pci_kind(device))
            controllers = sorted({b.controller for b in self.block_devices()
                                  if b.pci_address == subject and b.controller}, key=natural_key)
            blocks = self.blocks_at(subject)
            if controllers and controllers[0].startswith("nvme"):
                parts[-1] = ", ".join(controllers)
            parts.extend(self._labels.get(subject, []))
            if blocks:
                parts.append(_short_list(blocks))
            elif device.port_type in _PORT_NAMES:
                below = self.blocks_below(subject)
                if below:
                    parts.append("above " + _short_list(below))
        else:
            parts.extend(self._labels.get(subject, []))
        return " · ".join(parts)


def take_snapshot(roots: Roots, config: Optional[Dict[str, Any]] = None, timeout: float = 30.0) -> Snapshot:
    """One snapshot of everything sysfs and procfs hold, for a one-shot command; with the sas,
    nvme, nvme_health, multipath, raid and zfs collectors enabled, what their tasks read (link
    error counters, SAS drives' PHYs, Identify, SMART logs, dmsetup status, the RAID tools,
    zpool), read now. The deadline is `timeout` plus the RAID tools' and zpool's own timeouts:
    a check waits for a slow tool as the exporter's task would."""
    config = config or {}
    specs = collectors.load_all()
    slow = SlowRunner(roots, full_config=config)  # no scheduler: every slow source read now, in the snapshot
    for name in SLOW_COLLECTORS:
        if name in specs and collector_enabled(config, name):
            slow.enable(name, specs[name].cls.settings(config.get("collectors", {}).get(name, {})))
    try:
        return take_once(roots, extra=slow.sources(), timeout=timeout + slow.deadline())
    finally:
        slow.close()


# PCI class codes (base class, subclass) in the words of lspci.
_CLASS_NAMES = {
    (0x01, 0x00): "SCSI controller", (0x01, 0x01): "IDE controller", (0x01, 0x04): "RAID controller",
    (0x01, 0x06): "SATA controller", (0x01, 0x07): "SAS controller", (0x01, 0x08): "NVMe controller",
    (0x02, 0x00): "Ethernet controller", (0x02, 0x07): "InfiniBand controller", (0x03, 0x00): "VGA controller",
    (0x03, 0x02): "3D controller", (0x0c, 0x03): "USB controller",
}
_PORT_NAMES = {"root_port": "root port", "upstream_port": "switch upstream port",
               "downstream_port": "switch downstream port"}


def pci_kind(device) -> str:
    if device.port_type in _PORT_NAMES:
        return _PORT_NAMES[device.port_type]
    code = device.static.class_code
    if code is None:
        return "PCI device"
    return _CLASS_NAMES.get((code >> 16, (code >> 8) & 0xFF)) or {0x01: "storage controller", 0x02: "network controller",
                                                                   0x03: "display controller"}.get(code >> 16, "PCI device")


def _short_list(names: List[str], limit: int = 4) -> str:
    if len(names) <= limit:
        return ", ".join(names)
    return ", ".join(names[:limit - 1]) + f" and {len(names) - limit + 1} more"


class Outcome:
    """What one subsystem found, and what it looked at (for the summary line)."""

    def __init__(self, subsystem: str):
        self.subsystem = subsystem
        self.findings: List[Finding] = []
        self.checked: List[Tuple[int, str]] = []  # (count, what), e.g. (22, "PCIe links")

    def add(self, finding: Finding) -> None:
        if not finding.subsystem:
            finding = replace(finding, subsystem=self.subsystem)
        self.findings.append(finding)

    def count(self, n: int, what: str) -> None:
        """`what` in the plural ("PCIe links"); the report says "1 PCIe link"."""
        if n:
            self.checked.append((n, what))


CheckFunc = Callable[[Facts, Outcome], None]


@datarecord(frozen=True)
class Subsystem:
    """One registered findings subsystem: its check function, the collector it needs, and its place in the run."""

    name: str
    func: CheckFunc
    collector: Optional[str]  # skipped when this collector is disabled
    order: int


REGISTRY: Dict[str, Subsystem] = {}
UNAVAILABLE: Dict[str, str] = {}  # module name -> why it could not be loaded


def register(name: str, collector: Optional[str] = None, order: int = 50) -> Callable[[CheckFunc], CheckFunc]:
    def wrap(func: CheckFunc) -> CheckFunc:
        if name in REGISTRY and REGISTRY[name].func.__qualname__ != func.__qualname__:
            raise RuntimeError(f"findings subsystem {name!r} registered twice")
        REGISTRY[name] = Subsystem(name=name, func=func, collector=collector, order=order)
        return func

    return wrap


def load_all() -> Dict[str, Subsystem]:
    """Import every module of this package so that each registers itself. A module that
    needs a reader which is not installed yet is skipped, not fatal."""
    for module in pkgutil.iter_modules(__path__):
        if module.name.startswith("_"):
            continue
        try:
            importlib.import_module(f"{__name__}.{module.name}")
        except ImportError as exc:
            UNAVAILABLE[module.name] = str(exc)
            log.once(LOG, logging.DEBUG, ("findings-import", module.name), "findings module unavailable",
                     module=module.name, err=str(exc))
    return dict(sorted(REGISTRY.items(), key=lambda item: (item[1].order, item[0])))


@datarecord
class CheckResult:
    """What one `storpath check` found: the findings, what was checked, the subsystems that ran or were skipped."""

    findings: List[Finding] = field(default_factory=list)
    checked: List[Tuple[int, str]] = field(default_factory=list)
    ran: List[str] = field(default_factory=list)  # subsystems that ran
    skipped: Dict[str, str] = field(default_factory=dict)  # subsystem -> reason

    def counts(self) -> Dict[str, int]:
        counts = {s: 0 for s in SEVERITIES}
        for finding in self.findings:
            counts[finding.severity] += 1
        return counts

    def status(self) -> str:
        return worst(f.severity for f in self.findings if f.severity != INFO) or "clean"

    def exit_code(self) -> int:
        return {"clean": 0, WARNING: 1, CRITICAL: 2}[self.status()]


def collector_enabled(config: Dict[str, Any], name: str) -> bool:
    specs = collectors.load_all()
    if name not in specs:
        return True  # the collector is not there yet; the findings module decides for itself
    section = config.get("collectors", {}).get(name, {})
    return bool(section.get("enabled", specs[name].default_enabled))


def run_checks(facts: Facts, only: Optional[Iterable[str]] = None) -> CheckResult:
    """Run every registered (and enabled) subsystem over `facts`."""
    result = CheckResult()
    wanted = set(only) if only else None
    for name, sub in load_all().items():
        if wanted is not None and name not in wanted:
            continue
        if sub.collector and not collector_enabled(facts.config, sub.collector):
            result.skipped[name] = f"collector {sub.collector} disabled"
            continue
        outcome = Outcome(name)
        try:
            sub.func(facts, outcome)
        except Exception as exc:  # one broken subsystem must not hide the others
            LOG.debug("findings traceback", exc_info=True)
            outcome.findings = [Finding(
                subject="storpath", severity=WARNING, kind="storpath.check_failed", subsystem=name,
                title=f"the {name} check failed, its findings are missing",
                evidence=f"{type(exc).__name__}: {exc}",
                impact="problems of this subsystem may go unreported",
                remedy="run with --log.level=debug for the traceback and report it with a `storpath capture` archive")]
            outcome.checked = []
        result.ran.append(name)
        result.findings.extend(outcome.findings)
        result.checked.extend(outcome.checked)
    for name, reason in UNAVAILABLE.items():
        if wanted is None or name in wanted:
            result.skipped.setdefault(name, f"not available: {reason}")
    result.findings.sort(key=lambda f: (severity_rank(f.severity), natural_key(f.subject), f.kind))
    return result


def counted(n: int, what: str) -> str:
    """'1 PCIe link', '8 SAS PHYs in use', '1 NUMA node'."""
    if n != 1:
        return f"{n} {what}"
    words = what.split(" ")
    for i, word in enumerate(words):
        if word.endswith("s") and len(word) > 2:
            words[i] = word[:-1]
            break
    return f"{n} {' '.join(words)}"


__all__ = ["counted", "CRITICAL", "WARNING", "INFO", "SEVERITIES", "Finding", "Facts", "Outcome", "CheckResult", "register",
           "load_all", "run_checks", "worst", "natural_key", "pci_kind"]
