"""The exporter's own `process_*`, `python_info` and `python_gc_*` families, as Prometheus'
Python client names them (its ProcessCollector, PlatformCollector and GCCollector: the same
names, help, types and labels, in the same order; tests/unit/test_exporter_metrics.py
compares the two), built on storpath's family tables so that `storpath serve` does not import
prometheus_client: its package loads `http.server`, `urllib.request` and the e-mail modules
with it: 8 ms of the import, 13-16 ms of the start (docs/performance.md, "Serving without
prometheus_client").

Like the client's, they describe this process from its own /proc/self, never the
--path.procfs of the host being observed. A file that cannot be read leaves its families
out of that scrape, as there; `python_info` and the collector's counts are always served.
"""

from __future__ import annotations

import gc
import os
import platform
import resource
from typing import List, Optional

from storpath.base.sysfs import WHOLE_FILE, read_bytes
from storpath.scrape.exposition import FamilyTexts, SeriesFamily
from storpath.scrape.families import COUNTER, GAUGE, Family, Rows

PROC = "/proc"

VIRTUAL_MEMORY = Family("process_virtual_memory_bytes", GAUGE, "Virtual memory size in bytes.")
RESIDENT_MEMORY = Family("process_resident_memory_bytes", GAUGE, "Resident memory size in bytes.")
START_TIME = Family("process_start_time_seconds", GAUGE, "Start time of the process since unix epoch in seconds.")
CPU_SECONDS = Family("process_cpu_seconds", COUNTER, "Total user and system CPU time spent in seconds.")
OPEN_FDS = Family("process_open_fds", GAUGE, "Number of open file descriptors.")
MAX_FDS = Family("process_max_fds", GAUGE, "Maximum number of open file descriptors.")
PYTHON_INFO = Family("python_info", GAUGE, "Python platform information",
                     ("version", "implementation", "major", "minor", "patchlevel"))
GC_COLLECTED = Family("python_gc_objects_collected", COUNTER, "Objects collected during gc", ("generation",))
GC_UNCOLLECTABLE = Family("python_gc_objects_uncollectable", COUNTER, "Uncollectable objects found during GC",
                          ("generation",))
GC_COLLECTIONS = Family("python_gc_collections", COUNTER, "Number of times this generation was collected",
                        ("generation",))

FAMILIES = (VIRTUAL_MEMORY, RESIDENT_MEMORY, START_TIME, CPU_SECONDS, OPEN_FDS, MAX_FDS, PYTHON_INFO,
            GC_COLLECTED, GC_UNCOLLECTABLE, GC_COLLECTIONS)


def boot_time(proc: str = PROC) -> Optional[float]:
    """The `btime` of /proc/stat (seconds since the epoch), None where it cannot be read.
    Read whole (bounded): the per-CPU and interrupt lines before it run to tens of KB."""
    raw = read_bytes(os.path.join(proc, "stat"), WHOLE_FILE)
    found = (b"\n" + (raw or b"")).partition(b"\nbtime ")[2]
    try:
        return float(found.split(b"\n", 1)[0]) if found else None
    except ValueError:
        return None


class Runtime:
    """`families()` gives this process's runtime families for a scrape. One scrape at a
    time calls it (the server's single flight)."""

    def __init__(self, proc: str = PROC):
        self.self_dir = os.path.join(proc, "self")
        try:
            self.ticks = float(os.sysconf("SC_CLK_TCK"))
        except (ValueError, OSError):
            self.ticks = 100.0
        self.pagesize = resource.getpagesize()
        self.btime = boot_time(proc)  # None: no /proc to read (the client then serves no process_*)
        major, minor, patchlevel = platform.python_version_tuple()
        self.info = (platform.python_version(), platform.python_implementation(), major, minor, patchlevel)
        # As the client's GCCollector: gc.get_stats() counts mean something in CPython only.
        self.gc = hasattr(gc, "get_stats") and platform.python_implementation() == "CPython"
        self._texts = FamilyTexts(FAMILIES)

    def families(self) -> List[SeriesFamily]:
        return self._texts.families(self.rows())

    def rows(self) -> Rows:
        rows = Rows()
        if self.btime is not None:
            self._process(rows)
        rows.add(PYTHON_INFO, self.info, 1)
        if self.gc:
            for generation, stat in enumerate(gc.get_stats()):
                labels = (str(generation),)
                rows.add(GC_COLLECTED, labels, stat["collected"])
                rows.add(GC_UNCOLLECTABLE, labels, stat["uncollectable"])
                rows.add(GC_COLLECTIONS, labels, stat["collections"])
        return rows

    def _process(self, rows: Rows) -> None:
        # The fields after the command name, which may itself hold spaces and ")".
        fields = (read_bytes(os.path.join(self.self_dir, "stat")) or b"").rpartition(b")")[2].split()
        try:
            virtual, resident = float(fields[20]), float(fields[21]) * self.pagesize
            started = float(fields[19]) / self.ticks + self.btime
            cpu = (float(fields[11]) + float(fields[12])) / self.ticks
        except (ValueError, IndexError):
            pass
        else:
            rows.add(VIRTUAL_MEMORY, (), virtual)
            rows.add(RESIDENT_MEMORY, (), resident)
            rows.add(START_TIME, (), started)
            rows.add(CPU_SECONDS, (), cpu)
        max_fds = open_fds = None
        limits = read_bytes(os.path.join(self.self_dir, "limits")) or b""
        for line in limits.splitlines():
            if line.startswith(b"Max open files"):
                try:
                    max_fds = float(line.split()[3])  # the soft limit ("unlimited": left out)
                except (ValueError, IndexError):
                    pass
                break
        try:
            # Listed, as the client counts them (the listing's own descriptor included).
            open_fds = len(os.listdir(os.path.join(self.self_dir, "fd")))
        except OSError:
            pass
        rows.add(OPEN_FDS, (), open_fds)
        rows.add(MAX_FDS, (), max_fds)
