"""The exporter's landing page (`/`): the storage topology tree (storpath.report.tree.model) as
HTML with inline CSS, drawn from the last scrape's snapshot of the machine
(storpath.scrape.snapshot.Snapshot). Rendering never reads the machine: before the
first scrape the page says so.

Every string the hardware or the kernel provides (model names, device names, finding
texts that quote them) goes through `_text`: storpath.base.safetext.display (one line of
printable text), then html.escape. Runbooks are linked at `<runbook base><Name>.md`,
the base configurable (`web.runbook_url_base`) like the alerts' runbook_url
(rules/config/thresholds.yml); the default is the exporter's own copy (`runbooks/`, served
by storpath.http.runbooks).

The HTTP server keeps a `Landing(collectors, metrics_path, runbook_base, config)` and calls
its `page(exporter, number)` (`/?page=N`); that is the whole of its side.

A large host's tree (10,000 dm-multipath maps: 30,000 nodes, 5 MB of HTML) is paged: a page
holds PAGE_NODES nodes of the tree in order, the first one's ancestors drawn above it (marked
"continued"), so the cost of a visit is bounded whatever the host's size.
"""

from __future__ import annotations

import html
import threading
import time
from typing import Dict, List, Optional, Sequence, Tuple

from storpath import __version__
from storpath.base.config import DEFAULTS
from storpath.base.safetext import display
from storpath.report.findings.pcie import CAP_CAUSE_TEXT, link_text
from storpath.report.tree import model, sources
from storpath.report.tree.model import (BELOW_EXPECTED, BLOCK, HEALTHY, LIMITED_BY_PLACEMENT, MEMBER, STATE_TEXT,
                                 SUSPENDED, UNVERIFIABLE,
                                 Node, Topology, hop_text)

DEFAULT_RUNBOOK_BASE = DEFAULTS["web"]["runbook_url_base"]

# Finding kind -> the runbook (docs/runbooks/<Name>.md) of the alert that watches the same thing.
RUNBOOKS: Dict[str, str] = {
    "pcie.link_down": "PcieLinkDown",
    "pcie.link_trained_low": "PcieLinkWidthBelowExpected",
    "pcie.link_width_below_expected": "PcieLinkWidthBelowExpected",
    "pcie.link_speed_below_expected": "PcieLinkSpeedBelowExpected",
    "pcie.link_capped": "PcieLinkCapped",
    "pcie.placement_below_capability": "PcieDeviceLimitedByPort",
    "pcie.slot_below_device_demand": "PcieSlotBelowDeviceDemand",
    "pcie.path_limited_upstream": "PcieDeviceLimitedByPort",
    "pcie.aer_uncorrectable": "PcieAerUncorrectableErrors",
    "pcie.aer_correctable": "PcieAerCorrectableErrorsRising",
    "md.degraded": "MdArrayDegraded",
    "md.member_faulty": "MdMemberFaulty",
    "md.mismatches": "MdMismatchCountHigh",
    "md.spans_numa_nodes": "MdArraySpansNumaNodes",
    "paths.nvme_lost": "StoragePathLost",
    "paths.map_lost": "StoragePathLost",
    "paths.nvme_degraded": "StoragePathsDegraded",
    "paths.map_degraded": "StoragePathsDegraded",
    "paths.map_unknown": "StorageMultipathStateUnknown",
    "paths.no_optimized_path": "StorageNoOptimizedPath",
    "paths.numa_crossing": "StoragePathsCrossNuma",
    "paths.mixed_link_rates": "StorageMultipathMixedLinkRates",
    "paths.drive_path_missing": "StorageDrivePathMissing",
    "numa.node_unknown": "StorageNumaNodeUnknown",
    "nvme.lba_format_not_best": "NvmeNamespaceLbaFormatNotBest",
    "nvme.formats_unknown": "NvmeIdentifyUnavailable",
    "sas.phy_at_lowered_minimum": "SasPhyNegotiatedAtLoweredMinimum",
    "sas.phy_below_hardware_maximum": "SasPhyLinkRateBelowMaximum",
    "sas.phy_errors": "SasPhyErrorsRising",
    "sata.link_below_hardware_limit": "SataLinkBelowHardwareLimit",
    "sata.link_limited_by_libata": "SataLinkBelowHardwareLimit",
    "zfs.pool_not_online": "ZfsPoolNotOnline",
    "zfs.vdev_not_online": "ZfsVdevNotOnline",
    "zfs.vdev_errors": "ZfsVdevErrorsRising",
    "zfs.capacity_high": "ZfsPoolCapacityHigh",
    "zfs.ashift_below_sector_size": "ZfsPoolAshiftBelowSectorSize",
    "probe.below_expected": "ProbeThroughputBelowExpected",
}

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#1d2327;background:#fff}
h1{font-size:1.4em;margin:0 0 .2em}
p.meta{color:#555;margin:.2em 0 1em}
nav a{margin-right:1em}
ul.tree,ul.tree ul{list-style:none;margin:0;padding-left:1.4em}
ul.tree{padding-left:0}
ul.tree ul{border-left:1px solid #bbb}
li{margin:.25em 0}
.node{display:inline-block;padding:.15em .5em;border-radius:4px;border-left:5px solid #ccc;background:#f6f7f7}
.node .id{font-family:ui-monospace,monospace;font-weight:600}
.node .what{color:#333}
.node .model{color:#333;font-style:italic}
.node .numa{color:#555;font-size:.9em}
.node .link{display:block;font-family:ui-monospace,monospace;font-size:.9em;color:#333}
.node.healthy{border-left-color:#2e7d32;background:#eef7ee}
.node.below-expected{border-left-color:#c62828;background:#fdecea}
.node.limited-by-placement{border-left-color:#ef6c00;background:#fff3e0}
.node.unverifiable{border-left-color:#6a6a6a;background:#eeeeee}
.node.suspended{border-left-color:#5c6bc0;background:#eef0fb}
.state{font-weight:600;margin-left:.4em}
.below-expected .state{color:#b71c1c}
.limited-by-placement .state{color:#e65100}
.unverifiable .state{color:#424242}
.suspended .state{color:#283593}
.node .cap{display:block;font-size:.9em;color:#0d47a1;font-weight:600}
.limits{margin-left:.4em;color:#6a1b9a;font-weight:600}
.finding{display:block;font-size:.92em}
.sev{font-weight:700;font-size:.8em;padding:0 .35em;border-radius:3px;color:#fff;margin-right:.3em}
.sev.critical{background:#c62828}.sev.warning{background:#ef6c00}.sev.info{background:#0277bd}
.more{color:#555}
.legend span.node{margin-right:.5em}
section{margin-top:1.2em}
"""


PAGE_NODES = 1000  # nodes of the tree drawn on one page


class _Flat:
    """A topology in the order the page draws it: (depth, node, index of its parent or -1)."""

    def __init__(self, topology: Topology):
        self.topology = topology
        self.nodes: List[Tuple[int, Node, int]] = []
        nodes = self.nodes
        # Depth first, each node's children in order; a stack of (children, next index, depth, parent).
        stack = [(topology.roots, 0, 0, -1)]
        while stack:
            children, index, depth, parent = stack.pop()
            if index == len(children):
                continue
            stack.append((children, index + 1, depth, parent))
            node = children[index]
            nodes.append((depth, node, parent))
            if node.children:
                stack.append((node.children, 0, depth + 1, len(nodes) - 1))

    def pages(self) -> int:
        return max(1, -(-len(self.nodes) // PAGE_NODES))


class Landing:
    """The landing page of one configuration, for the exporter's last scrape
    (`exporter.last_snapshot()`).

    Building the tree of a large host costs about as much CPU as a scrape, so it is built at
    most once per scrape: the tree of the last scrape is kept, and visitors who arrive
    while it is built wait for it instead of building it again (single flight). A page of
    it (PAGE_NODES nodes) is drawn once and kept for that scrape; the page's frame (the
    scrape's age) is made per visit.
    """

    def __init__(self, collectors: Sequence[str], metrics_path: str = "metrics",
                 runbook_base: str = DEFAULT_RUNBOOK_BASE, config: Optional[dict] = None):
        self.collectors = list(collectors)
        self.metrics_path = metrics_path
        self.runbook_base = runbook_base
        self.config = config
        self.drawings = 0  # trees drawn (for tests)
        self._lock = threading.Lock()
        # (id, taken_at) of the scrape whose tree is kept (no reference that would keep it alive),
        # the tree, and the pages of it drawn (number -> HTML)
        self._drawn: Optional[Tuple[tuple, _Flat, Dict[int, str]]] = None

    def page(self, exporter, number: int = 1) -> bytes:
        """Page `number` of the tree of the last scrape (the last page for a number past it)."""
        scrape = exporter.last_snapshot() if exporter is not None else None
        body: List[str] = []
        if scrape is None:
            body.append("<p id=\"no-scrape\">No scrape has happened yet: the tree is drawn from the last scrape's "
                        f"facts. Scrape <a href=\"{_attr(self.metrics_path)}\">{html.escape(self.metrics_path)}</a> "
                        "once, then reload this page.</p>")
        elif scrape.pci is None:
            body.append("<p id=\"no-pci\">The last scrape did not read the PCI tree (the pcie, block and numa "
                        "collectors are disabled, or /sys/bus/pci could not be read).</p>")
        else:
            age = max(0.0, time.time() - scrape.taken_at)
            body.append(f"<p class=\"meta\">From the scrape that finished "
                        f"{html.escape(time.strftime('%Y-%m-%d %H:%M:%S %Z', time.localtime(scrape.taken_at)))} "
                        f"({age:.0f} s ago). Findings shown: PCIe links and md arrays, which the scrape's own "
                        "records tell; <code>storpath check</code> on the host has all of them.</p>")
            body.append(self._tree(scrape, number))
        return _document(body, self.collectors, self.metrics_path).encode()

    def _tree(self, scrape, number: int) -> str:
        key = (id(scrape), scrape.taken_at)
        with self._lock:
            if self._drawn is None or self._drawn[0] != key:
                flat = _Flat(model.build(sources.from_scrape(scrape, self.config)))
                self._drawn = (key, flat, {})
                self.drawings += 1
            _, flat, drawn = self._drawn
            number = min(max(number, 1), flat.pages())
            if number not in drawn:
                drawn[number] = _page_html(flat, number, self.runbook_base)
            return drawn[number]


def _document(body: List[str], collectors: Sequence[str], metrics_path: str) -> str:
    legend = "".join(f"<span class=\"node {state}\">{html.escape(STATE_TEXT[state])}</span>"
                     for state in (HEALTHY, BELOW_EXPECTED, LIMITED_BY_PLACEMENT, UNVERIFIABLE, SUSPENDED))
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width\">"
            "<title>storpath exporter</title><link rel=\"icon\" href=\"data:,\">"
            f"<style>{_CSS}</style></head>\n<body>\n<h1>storpath exporter</h1>\n"
            "<p class=\"meta\">Shows when Linux storage runs below the speed its hardware can deliver: the path "
            "from each PCIe root port down to the block devices, md arrays and ZFS pools.</p>\n"
            f"<nav><a id=\"metrics\" href=\"{_attr(metrics_path)}\">Metrics</a>"
            "<a href=\"-/healthy\">Health</a><a id=\"runbooks\" href=\"runbooks/\">Runbooks</a></nav>\n"
            f"<p class=\"legend\">{legend}</p>\n" + "\n".join(body)
            + f"\n<p class=\"meta\">Collectors enabled: {html.escape(', '.join(collectors) or 'none')}. "
              f"storpath {html.escape(__version__)}.</p>\n</body></html>\n")


def _text(text: str) -> str:
    """Text for the page: one line of printable text (storpath.base.safetext.display: a byte
    that is not UTF-8, a control or a bidi override in a name shows as an escape), then
    HTML's escapes."""
    return html.escape(display(text), quote=True)


_attr = _text


def _page_html(flat: _Flat, number: int, runbook_base: str) -> str:
    """Page `number` of the tree: its PAGE_NODES nodes in order, under the first one's
    ancestors (drawn as "continued"), with links to the other pages; the findings about no
    one device on the first page."""
    start = (number - 1) * PAGE_NODES
    end = min(start + PAGE_NODES, len(flat.nodes))
    pages = flat.pages()
    parts: List[str] = []
    if pages > 1:
        links = [f"<a href=\"?page={n}\" rel=\"{rel}\">{label}</a>"
                 for n, rel, label in ((1, "first", "first"), (number - 1, "prev", "previous"),
                                       (number + 1, "next", "next"), (pages, "last", "last"))
                 if 1 <= n <= pages and n != number]
        parts.append(f"<p class=\"pages\" id=\"pages\">Page {number} of {pages}: nodes {start + 1}-{end} of "
                     f"{len(flat.nodes)} in the tree. {' '.join(links)}</p>")
    parts.append("<ul class=\"tree\">")
    chain: List[int] = []
    if start < end:
        parent = flat.nodes[start][2]
        while parent >= 0:
            chain.append(parent)
            parent = flat.nodes[parent][2]
    for index in reversed(chain):
        parts.append(_node_open(flat.nodes[index][1], runbook_base, continued=True))
        parts.append("<ul>")
    previous: Optional[int] = None
    for depth, node, _ in flat.nodes[start:end]:
        if previous is not None:
            if depth > previous:
                parts.append("<ul>")
            else:
                parts.append("</li>" + "</ul></li>" * (previous - depth))
        parts.append(_node_open(node, runbook_base))
        previous = depth
    if previous is not None:
        parts.append("</li>" + "</ul></li>" * previous)
    parts.append("</ul>")
    if number == 1:
        _after_tree(flat.topology, runbook_base, parts)
    return "\n".join(parts)


def _after_tree(topology: Topology, runbook_base: str, parts: List[str]) -> None:
    if topology.elsewhere:
        parts.append("<section id=\"elsewhere\"><h2>Not about one device</h2>")
        for finding in topology.elsewhere:
            parts.append(_finding(finding, f"{finding.subject}: {finding.title}", 0, runbook_base))
        parts.append("</section>")
    if not topology.roots:
        parts.append("<p>No PCIe storage path found (no storage controller or block device on a PCI device).</p>")


def _node(node: Node, runbook_base: str, out: List[str]) -> None:
    out.append(_node_open(node, runbook_base))
    if node.children:
        out.append("<ul>")
        for child in node.children:
            _node(child, runbook_base, out)
        out.append("</ul>")
    out.append("</li>")


def _node_open(node: Node, runbook_base: str, continued: bool = False) -> str:
    """A node's `<li>` and its box, its children's list left to the caller."""
    classes = ["node", node.kind] + ([node.state] if node.state else [])
    if node.limits:
        classes.append("limiting")
    name = node.id.split("/", 1)[1] if node.kind == MEMBER else node.id
    bits = [f"<span class=\"id\">{_text(name)}</span>"]
    what = node.what + (" (empty)" if node.empty else "")
    if node.kind == BLOCK and node.member_of:
        what = "in " + ", ".join(node.member_of)
    if what:
        bits.append(f" <span class=\"what\">{_text(what)}</span>")
    if node.model:
        bits.append(f" <span class=\"model\">{_text(node.model)}</span>")
    if node.numa_node is not None:
        bits.append(f" <span class=\"numa\">NUMA node {node.numa_node}</span>")
    if node.state not in (None, HEALTHY):
        bits.append(f" <span class=\"state\">{_text(STATE_TEXT[node.state])}</span>")
    if node.limits:
        shown = ", ".join(node.limits[:4]) + (f" and {len(node.limits) - 4} more" if len(node.limits) > 4 else "")
        bits.append(f" <span class=\"limits\">&#9664; limiting hop for {_text(shown)}</span>")
    if node.link is not None:
        bits.append(f"<span class=\"link\">{_text(hop_text(node.link, node.port))}</span>")
        if node.link.cap_cause is not None:  # trained as told: the cause, not a fault (storpath_pcie_link_capped)
            bits.append(f"<span class=\"cap\">{_text(cap_text(node.link))}</span>")
    if node.disk_link:  # a SAS or SATA disk: its link, the rate both ends allow, which end limits it
        bits.append(f"<span class=\"link\">{_text(node.disk_link)}</span>")
    if node.findings:
        first = node.findings[0]
        title = first.title if first.subject == node.id or node.kind == MEMBER else f"{first.subject}: {first.title}"
        bits.append(_finding(first, title, len(node.findings) - 1, runbook_base))
    if continued:  # an ancestor of the page's first node, drawn again above it
        classes.append("continued")
        bits.append(" <span class=\"more\">(continued)</span>")
    dom_id = "" if continued else f" id=\"{_attr(_dom_id(node.id))}\""
    return (f"<li><div class=\"{' '.join(classes)}\"{dom_id} "
            f"data-node=\"{_attr(node.id)}\">{''.join(bits)}</div>")


def cap_text(link) -> str:
    """'capped at 8 GT/s (Gen3) by the kernel's PCIe bandwidth controller, ...': a capped link's
    target and its cause, in the words of check's finding (report.findings.pcie)."""
    cause = CAP_CAUSE_TEXT.get(link.cap_cause, CAP_CAUSE_TEXT["unknown"])
    joined = cause if cause.startswith("by ") else f"({cause})"
    return f"capped at {link_text(link.target_speed, None)} {joined}"


def _dom_id(node_id: str) -> str:
    """A DOM id from a node id: '0000:d8:00.0' -> 'node-0000-d8-00-0' (selectors need no escaping)."""
    return "node-" + "".join(c if c.isalnum() or c in "-_" else "-" for c in node_id)


def _finding(finding, title: str, more: int, runbook_base: str) -> str:
    runbook = RUNBOOKS.get(finding.kind)
    text = _text(title)
    if runbook:
        text = f"<a href=\"{_attr(runbook_base + runbook + '.md')}\" title=\"runbook\">{text}</a>"
    extra = f" <span class=\"more\">(+{more} more)</span>" if more else ""
    tip = _attr(f"{finding.evidence} — {finding.remedy}")
    return (f"<span class=\"finding {finding.severity}\" title=\"{tip}\"><span class=\"sev {finding.severity}\">"
            f"{finding.severity.upper()}</span>{text}{extra}</span>")


__all__ = ["Landing", "RUNBOOKS", "DEFAULT_RUNBOOK_BASE", "PAGE_NODES"]
