"""Drives behind hardware RAID controllers: one pass of the vendor tools (or one read of their
captured outputs) into one readers.raid.records.RaidInventory, as the raid collector's
background task and `storpath check` take it.

Three modules do the work, one job each: readers.raid.tools runs the tools (which a host
needs, where they are, one command at a time with a deadline, smartctl only on a block
device below the controller), readers.raid.merge parses and merges their outputs in the
captured layout (each tool's parse fenced, one record per identity, the last known state of a
failed tool), readers.raid.capture writes that layout for `storpath capture`. A tool that is
missing, fails, hangs or prints what its parser does not understand is reported per tool
(`ToolStatus`), never raised.

Live, smartctl runs (when installed) for the SATA drives behind a MegaRAID/PERC whose
capability or rate storcli does not give (old firmware says "Unknown"), through a volume's
block device on the same controller: `smartctl -j -i -d sat+megaraid,<DID> /dev/sdX`, IDENTIFY
words 76/77 passed through by the firmware. ssacli's drives have no number smartctl's
`cciss,N` is known to match: their smartctl outputs come from captures only.

A failed tool's last successful inventory is kept (`RaidRun.succeeded` says when that
pass ended) until a pass of that tool succeeds or the exporter restarts: a hung storcli never
turns a degraded volume into no volume (docs/metrics.md, "Last known state").
"""

from __future__ import annotations

import os
import time
from dataclasses import field
from typing import Dict, List, NamedTuple, Optional, Tuple

from storpath.base.records import datarecord
from storpath.base.problems import INFO, Problem
from storpath.readers.raid.merge import (Kept, ToolStatus, deduplicated, fill_addresses, fill_devices,
                                         parse_outputs, parse_storcli, with_last_known)
from storpath.readers.raid.records import RaidController, RaidDrive, RaidInventory
from storpath.readers.raid.tools import DRIVERS, ToolRunner, addresses_by_tool, bound_controllers, find_tool, \
    tools_needed
from storpath.base.roots import Roots
from storpath.base.sysfs import WHOLE_FILE, read_attr

# What this reader reads of sysfs (storpath capture takes it): the drivers' bound functions.
CAPTURE_SYSFS = tuple(f"bus/pci/drivers/{driver}" for driver in DRIVERS)


# The tools whose path is configurable (collectors.raid's `<tool>_path`).
TOOLS = ("storcli", "megacli", "ssacli", "arcconf", "smartctl")

REPLAY_WITHOUT_CAPTURE = Problem(
    "RAID tools not run: --path.sysfs replays another machine and --path.captured is not given, so this host's "
    "controllers would be reported as the replayed one's", level=INFO)


@datarecord
class RaidRun:
    """One pass of the tools (or one read of their captured outputs)."""

    inventory: RaidInventory  # a failed tool's records are those of its last successful pass
    tools: Dict[str, ToolStatus]  # tool -> how its run went; only the tools this host needed
    finished_at: float
    source: str  # "live", "captured", "none"
    problems: Tuple[Problem, ...] = ()
    # tool -> when its last successful live pass ended (a failed tool's records are that old)
    succeeded: Dict[str, float] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        """No RAID controller here and nothing captured: no families, no findings."""
        return self.source == "none" and not self.tools

    @property
    def all_succeeded(self) -> bool:
        """Every tool this host needed ran live and succeeded (when `finished_at` is the last success)."""
        return self.source == "live" and bool(self.tools) and all(s.ok for s in self.tools.values())


class RaidPass(NamedTuple):
    """The raid background task's last pass, as the snapshot carries it."""

    run: Optional[RaidRun]  # None: no RAID controller here, nothing captured
    last_success: Optional[float]  # when every tool last succeeded in one pass


class RaidReader:
    """Runs (or replays) the RAID tools. `paths`: tool -> configured path or name. Keeps each
    tool's last successful inventory between passes."""

    def __init__(self, roots: Roots, paths: Optional[Dict[str, str]] = None, timeout: float = 30.0):
        self.roots = roots
        self.runner = ToolRunner(roots, paths, timeout)
        self._kept: Dict[str, Kept] = {}

    @property
    def timeout(self) -> float:
        return self.runner.timeout

    def close(self) -> None:
        """Kill the tools running now; start none again (exporter stop, reload)."""
        self.runner.close()

    def read(self) -> RaidRun:
        bound = bound_controllers(self.roots)
        tools: Dict[str, ToolStatus] = {}
        if self.roots.captured:
            path = self.roots.captured_path
            inventory = parse_outputs(lambda folder, name: _read(path(folder, name)),
                                      lambda folder: _listing(path(folder)), tools)
            source = "captured" if tools else "none"
        elif not bound:
            return RaidRun(RaidInventory(), {}, time.time(), "none")
        elif not self.roots.devices:
            # --path.sysfs replays another machine (storpath.base.roots): this host's controllers are
            # not its controllers. Its tools' outputs need --path.captured.
            return RaidRun(RaidInventory(), {}, time.time(), "none", (REPLAY_WITHOUT_CAPTURE,))
        else:
            outputs, tools = self.runner.run_tools(bound)
            inventory = parse_outputs(lambda folder, name: outputs.get((folder, name)),
                                      lambda folder: sorted(n for f, n in outputs if f == folder), tools)
            source = "live"
        inventory = fill_devices(fill_addresses(inventory, addresses_by_tool(bound)), self.roots)
        finished = time.time()
        inventory, self._kept = with_last_known(deduplicated(inventory), tools, finished, self._kept)
        succeeded = {t: k.at for t, k in self._kept.items() if t in tools} if source == "live" else {}
        return RaidRun(inventory, tools, finished, source, tuple(inventory.problems), succeeded)


def _read(path: Optional[str]) -> Optional[str]:
    return read_attr(path, WHOLE_FILE) if path else None


def _listing(folder: Optional[str]) -> List[str]:
    if not folder or not os.path.isdir(folder):
        return []
    try:
        return sorted(os.listdir(folder))
    except OSError:
        return []


__all__ = ["TOOLS", "RaidReader", "RaidRun", "RaidPass", "ToolStatus", "RaidController", "RaidDrive",
           "bound_controllers", "find_tool", "tools_needed", "parse_storcli"]
