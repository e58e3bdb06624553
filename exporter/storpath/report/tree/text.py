"""The topology tree as text for a terminal: one line per node, the hop's link under it,
its worst finding under that; Unicode box drawing or plain ASCII; colour only when asked
(storpath.commands.check.use_colour decides); every line within `width` columns, long
descriptions elided in the middle of the text the hardware provides (a model name),
never the address, the state or the numbers. Every text the hardware or the kernel named
(ids, models, member names, finding titles that quote them) is shown through
storpath.base.safetext.display: one line of plain text, whatever bytes it holds."""

from __future__ import annotations

from typing import List, Optional

from storpath.base.safetext import display
from storpath.report.tree.model import (BELOW_EXPECTED, BLOCK, HEALTHY, LIMITED_BY_PLACEMENT, MEMBER, STATE_TEXT,
                                 SUSPENDED, UNVERIFIABLE, Node, Topology, hop_text)

_UNICODE = {"tee": "├─ ", "last": "└─ ", "pipe": "│  ", "gap": "   ", "detail": "│ ", "arrow": "→",
            "ellipsis": "…", "limits": "◀ limits", "bad": "✗", "sep": " · "}
_ASCII = {"tee": "|- ", "last": "`- ", "pipe": "|  ", "gap": "   ", "detail": "| ", "arrow": "->",
          "ellipsis": "...", "limits": "<- limits", "bad": "!!", "sep": " - "}

# The characters of the Unicode drawing, for a caller to tell whether its output can hold them.
GLYPHS = "".join(sorted(set("".join(_UNICODE.values()))))

_SGR = {BELOW_EXPECTED: "1;31", LIMITED_BY_PLACEMENT: "1;33", UNVERIFIABLE: "36", SUSPENDED: "34",
        "limits": "1;35", "critical": "1;31", "warning": "1;33", "info": "36", "id": "1", "dim": "2"}
_SEVERITY = {"critical": "CRITICAL", "warning": "WARNING", "info": "INFO"}


def render(topology: Topology, width: int = 80, ascii: bool = False, colour: bool = False) -> str:
    glyphs = _ASCII if ascii else _UNICODE
    lines: List[str] = []
    for root in topology.roots:
        _node(root, "", None, glyphs, width, colour, lines)
        lines.append("")
    if topology.elsewhere:
        lines.append(_paint("not about one device:", "dim", colour))
        for finding in topology.elsewhere:
            lines.append(_finding_line("  ", finding, f"{finding.subject}: {finding.title}", 0, width, glyphs, colour))
        lines.append("")
    if not topology.roots and not topology.elsewhere:
        lines.extend(["no PCIe storage path found (no storage controller or block device on a PCI device)", ""])
    text = "\n".join(lines) + "\n"
    # --ascii promises plain ASCII: findings and models may carry "°C", "…" or vendor text.
    return _plain(text) if ascii else text


def _plain(text: str) -> str:
    for char, spelled in (("°", "deg "), ("…", "..."), ("µ", "u"), ("–", "-"), ("—", "-")):
        text = text.replace(char, spelled)
    return text.encode("ascii", "replace").decode("ascii")


def _paint(text: str, style: str, colour: bool) -> str:
    return f"\033[{_SGR[style]}m{text}\033[0m" if colour and text else text


def _clip(text: str, room: int, glyphs) -> str:
    """`text` within `room` columns: cut at the end with an ellipsis."""
    if len(text) <= room:
        return text
    mark = glyphs["ellipsis"]
    return text[:max(0, room - len(mark))].rstrip() + mark if room > len(mark) else text[:max(room, 0)]


def _elide_middle(text: str, room: int, glyphs) -> str:
    """A long model name keeps its start and its end (the capacity or part number)."""
    if len(text) <= room:
        return text
    mark = glyphs["ellipsis"]
    if room <= len(mark) + 2:
        return _clip(text, room, glyphs)
    head = (room - len(mark) + 1) // 2
    tail = room - len(mark) - head
    return text[:head].rstrip() + mark + text[len(text) - tail:].lstrip()


def _node(node: Node, prefix: str, last: Optional[bool], glyphs, width: int, colour: bool, out: List[str]) -> None:
    connector = "" if last is None else glyphs["last" if last else "tee"]
    below = prefix + ("" if last is None else glyphs["gap" if last else "pipe"])
    detail = below + (glyphs["detail"] if node.children else "  ")
    out.append(_head(node, prefix + connector, glyphs, width, colour))
    if node.link is not None:
        text = hop_text(node.link, node.port)
        out.append(detail + _clip(text, width - len(detail), glyphs))
    if node.disk_link:
        out.append(detail + _clip(display(node.disk_link), width - len(detail), glyphs))
    if node.findings:
        first = node.findings[0]
        out.append(_finding_line(detail, first, first.title if first.subject == node.id or node.kind == MEMBER
                                 else f"{first.subject}: {first.title}", len(node.findings) - 1, width, glyphs,
                                 colour))
    for i, child in enumerate(node.children):
        _node(child, below, i == len(node.children) - 1, glyphs, width, colour, out)


def _head(node: Node, lead: str, glyphs, width: int, colour: bool) -> str:
    """'0000:05:00.0  NVMe controller nvme1 · Seagate FireCuda 530  ✗ below expected'."""
    tags: List[tuple] = []
    if node.state not in (None, HEALTHY):
        mark = glyphs["bad"] + " " if node.state == BELOW_EXPECTED else ""
        tags.append((mark + STATE_TEXT[node.state], node.state))
    if node.limits:
        tags.append((f"{glyphs['limits']} {display(_devices(node.limits))}", "limits"))
    plain_tags = "".join("  " + text for text, _ in tags)
    name = _member_name(node)
    if node.kind == BLOCK:
        desc = (f" {glyphs['arrow']} " + display(", ".join(node.member_of))) if node.member_of else ""
        fixed = lead + name
        line = fixed + _clip(desc, width - len(fixed) - len(plain_tags), glyphs)
        return _paint_id(line, lead, name, colour) + _paint_tags(tags, colour)
    parts = [display(node.what)] if node.what else []
    numa = f"NUMA {node.numa_node}" if node.numa_node is not None else ""
    if node.empty:
        parts.append("empty")
    fixed = lead + name + "  "
    tail = (glyphs["sep"] + numa) if numa else ""
    room = width - len(fixed) - len(tail) - len(plain_tags)
    desc = glyphs["sep"].join(parts)
    model = display(node.model)
    if model:
        joined = desc + glyphs["sep"] if desc else ""
        if len(joined) + len(model) > room:
            desc = joined + _elide_middle(model, max(room - len(joined), 0), glyphs)
            if room - len(joined) < 6:  # no room worth showing a fragment of the model in
                desc = _clip(desc, room, glyphs)
        else:
            desc = joined + model
    desc = _clip(desc, room, glyphs)
    line = (fixed + desc + tail).rstrip()
    return _paint_id(line, lead, name, colour) + _paint_tags(tags, colour)


def _member_name(node: Node) -> str:
    return display(node.id.split("/", 1)[1] if node.kind == MEMBER else node.id)


def _paint_id(line: str, lead: str, name: str, colour: bool) -> str:
    if not colour:
        return line
    return lead + _paint(name, "id", colour) + line[len(lead) + len(name):]


def _paint_tags(tags, colour: bool) -> str:
    return "".join("  " + _paint(text, style, colour) for text, style in tags)


def _devices(names) -> str:
    if len(names) == 1:
        return names[0]
    if len(names) <= 2:
        return ", ".join(names)
    return f"{names[0]} and {len(names) - 1} more"


def _finding_line(lead: str, finding, title: str, more: int, width: int, glyphs, colour: bool) -> str:
    label = _SEVERITY[finding.severity]
    extra = f" (+{more} more)" if more else ""
    room = width - len(lead) - len(label) - 1 - len(extra)
    return lead + _paint(label, finding.severity, colour) + " " + _clip(display(title), room, glyphs) + extra


__all__ = ["render", "GLYPHS"]
