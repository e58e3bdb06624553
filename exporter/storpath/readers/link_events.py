"""The kernel's own account of PCIe link changes: the `pcie_link_event` tracepoint (Linux 7.0,
include/trace/events/pci.h), read from a tracefs instance's trace_pipe.

The kernel fires the event each time it updates a bus's link speed (drivers/pci/pci.h,
`__pcie_update_link_speed`): after a retrain, when a bus is added, when the bandwidth controller
is enabled or its interrupt fires (drivers/pci/pcie/bwctrl.c), on hotplug. Its text, per the
event's TP_printk,

    "%s type:%d, reason:%d, cur_bus_speed:%d, max_bus_speed:%d, width:%u, flit_mode:%u, status:%s"

names the port above the link (`pci_name(bus->self)`), the port's PCIe type, the reason
(`enum pcie_link_change_reason`: 0 PCIE_LINK_RETRAIN, 1 PCIE_ADD_BUS, 2 PCIE_BWCTRL_ENABLE,
3 PCIE_BWCTRL_IRQ, 4 PCIE_HOTPLUG), the link's speed now and the bus's maximum as
`enum pci_bus_speed` numbers (include/linux/pci.h: 0x14 2.5 GT/s ... 0x19 64 GT/s, 0xff
unknown), the negotiated width, whether the link is in Flit mode, and the Link Status flags
set (LT, DLLLA, LBMS, LABS, `|`-separated). trace_pipe prefixes each event with the task, CPU,
flags and timestamp (Documentation/trace/ftrace.rst, "The File System"), then `pcie_link_event: `.

Enabling an event or making an instance needs root (tracefs is mode 0700 by default), so
storpath never does either: it reads an instance the operator made and enabled
(docs/metrics.md, "PCIe (`pcie` collector)") and tells why it cannot where it cannot.
Reading trace_pipe consumes the events: one reader per instance. The reads here never block
(O_NONBLOCK) and take at most `max_bytes` a pass; what is left is read by the next pass.
"""

from __future__ import annotations

import errno
import os
import re
from typing import List, Optional, Tuple

from storpath.base.records import datarecord

# enum pcie_link_change_reason (drivers/pci/pci.h): the `cause` label. A fixed set, so the
# label's values are bounded; a number the kernel adds later is "other".
REASONS = {0: "retrain", 1: "add_bus", 2: "bwctrl_enable", 3: "bwctrl_irq", 4: "hotplug"}
OTHER_REASON = "other"
CAUSES = (*REASONS.values(), OTHER_REASON)

# enum pci_bus_speed (include/linux/pci.h) of a PCIe link -> transfers per second.
BUS_SPEEDS = {0x14: 2.5e9, 0x15: 5e9, 0x16: 8e9, 0x17: 16e9, 0x18: 32e9, 0x19: 64e9}

EVENT = "events/pci/pcie_link_event"
MAX_LINE = 512  # an event's line is about 150 bytes; a longer one is not an event of this format

_LINE = re.compile(r"pcie_link_event: (?P<port>[0-9a-fA-F]{4,}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]) "
                   r"type:-?\d+, reason:(?P<reason>\d+), cur_bus_speed:(?P<speed>\d+), "
                   r"max_bus_speed:\d+, width:(?P<width>\d+), flit_mode:\d+, status:\S*\s*$")


@datarecord(frozen=True)
class LinkEvent:
    """One pcie_link_event: the port above the link, why it fired, the link's speed and width."""

    port: str  # the port above the link (its PCI address)
    cause: str  # a name of REASONS, or "other"
    speed: Optional[float]  # transfers per second; None: unknown to the kernel
    width: int


def parse_event(line: str) -> Optional[LinkEvent]:
    """One trace_pipe line -> its event; None for a line that is not a pcie_link_event in the
    documented format. No I/O."""
    if "pcie_link_event: " not in line or len(line) > MAX_LINE:
        return None
    m = _LINE.search(line)
    if m is None:
        return None
    return LinkEvent(m["port"].lower(), REASONS.get(int(m["reason"]), OTHER_REASON),
                     BUS_SPEEDS.get(int(m["speed"])), int(m["width"]))


def instance_dir(tracefs: str, instance: str) -> str:
    """The folder events are read from: the instance `instance`, or tracefs's top when ""."""
    return os.path.join(tracefs, "instances", instance) if instance else tracefs


def unavailable(tracefs: str, instance: str) -> Optional[str]:
    """Why the tracepoint cannot be read here (None: it can): no tracefs, a kernel without the
    event, an instance not made, the event not enabled in it, trace_pipe not readable."""
    if not os.path.isdir(tracefs):
        return f"no tracefs at {tracefs} (mounted elsewhere? see --path.tracefs)"
    if not os.access(tracefs, os.R_OK | os.X_OK):
        return f"{tracefs} is not readable by this user (tracefs is root's by default)"
    if not os.path.isdir(os.path.join(tracefs, EVENT)):
        return f"this kernel has no pcie_link_event tracepoint ({os.path.join(tracefs, EVENT)} absent; Linux 7.0 has it)"
    where = instance_dir(tracefs, instance)
    if not os.path.isdir(where):
        return f"no tracefs instance {where} (made by root: mkdir {where})"
    try:
        with open(os.path.join(where, EVENT, "enable")) as f:
            enabled = f.read().strip()
    except OSError as exc:
        return f"cannot read {os.path.join(where, EVENT, 'enable')}: {exc.strerror or exc}"
    if enabled not in ("1", "X"):
        return f"pcie_link_event is not enabled in {where} (root: echo 1 > {os.path.join(where, EVENT, 'enable')})"
    pipe = os.path.join(where, "trace_pipe")
    if not os.access(pipe, os.R_OK):
        return f"{pipe} is not readable by this user"
    return None


class TracePipe:
    """A trace_pipe opened once, read without blocking, a bounded amount a pass. Not
    thread-safe: its owner locks."""

    def __init__(self, path: str, max_bytes: int = 1 << 20):
        self.path = path
        self.max_bytes = max_bytes
        self._fd: Optional[int] = None
        self._partial = b""

    def read(self) -> Tuple[List[LinkEvent], int, bool]:
        """(the events read, lines that were not events of the documented format, whether
        `max_bytes` was reached: more is waiting). Raises OSError where the pipe cannot be opened
        or read."""
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        chunks = []
        taken = 0
        while taken < self.max_bytes:
            try:
                chunk = os.read(self._fd, min(65536, self.max_bytes - taken))
            except OSError as exc:
                if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                    break
                raise
            if not chunk:
                break
            chunks.append(chunk)
            taken += len(chunk)
        data = self._partial + b"".join(chunks)
        lines = data.split(b"\n")
        self._partial = lines.pop()
        if len(self._partial) > MAX_LINE:  # no line end in sight: not an event line, dropped
            lines.append(self._partial[:MAX_LINE + 1])
            self._partial = b""
        events, bad = [], 0
        for raw in lines:
            if not raw.strip():
                continue
            event = parse_event(raw.decode("utf-8", "replace"))
            if event is None:
                bad += 1
            else:
                events.append(event)
        return events, bad, taken >= self.max_bytes

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
