"""The exporter's own process and Python runtime metrics: `process_*`, `python_info`, `python_gc_*`.

The same families, help, types and labels prometheus_client's ProcessCollector,
PlatformCollector and GCCollector give (dashboards and users expect those; a unit test
compares the two), in the same order, but built on storpath's family tables, so that the serve
path does not import prometheus_client (storpath.exposition). Measured with VmRSS: its import
costs 13 MB on a bare interpreter but only 1 MB on top of what serving imports anyway (cheroot,
`ssl`, `http.server`, `email`); its collectors' per-scrape objects go too.

Like prometheus_client, they read this process's own /proc/self, never the --path.procfs of
the host being observed. A file that cannot be read leaves its families out, as there.
"""

from __future__ import annotations

import gc
import os
import platform
import resource
from typing import List, Optional

from storpath.exposition import SeriesFamily
from storpath.families import COUNTER, GAUGE, Family, FamilyTexts, Rows

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


def _boot_time(proc: str) -> Optional[float]:
    try:
        with open(os.path.join(proc, "stat"), "rb") as stat:
            for line in stat:
                if line.startswith(b"btime "):
                    return float(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


class Runtime:
    """`collect()` gives the families of this process's runtime, as storpath.exporter's
    collectors give theirs. One scrape at a time (the server's single flight)."""

    def __init__(self, proc: str = PROC):
        self.proc = proc
        self.self_dir = os.path.join(proc, "self")
        self.ticks = float(os.sysconf("SC_CLK_TCK")) if "SC_CLK_TCK" in os.sysconf_names else 100.0
        self.pagesize = resource.getpagesize()
        self.btime = _boot_time(proc)
        major, minor, patchlevel = platform.python_version_tuple()
        self.info = (platform.python_version(), platform.python_implementation(), major, minor, patchlevel)
        # As GCCollector: gc.get_stats() means nothing outside CPython.
        self.gc = hasattr(gc, "get_stats") and platform.python_implementation() == "CPython"
        self._texts = FamilyTexts(FAMILIES)
        self._fd_dir_size_counts: Optional[bool] = None

    def rows(self) -> Rows:
        rows = Rows()
        if self.btime is not None:  # prometheus_client's test that /proc is there at all
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
        try:
            with open(os.path.join(self.self_dir, "stat"), "rb") as stat:
                # After the command name, which may hold spaces and parentheses.
                parts = stat.read().rsplit(b")", 1)[-1].split()
            rows.add(VIRTUAL_MEMORY, (), float(parts[20]))
            rows.add(RESIDENT_MEMORY, (), float(parts[21]) * self.pagesize)
            rows.add(START_TIME, (), float(parts[19]) / self.ticks + self.btime)
            rows.add(CPU_SECONDS, (), (float(parts[11]) + float(parts[12])) / self.ticks)
        except (OSError, ValueError, IndexError):
            pass
        try:
            max_fds = None
            with open(os.path.join(self.self_dir, "limits"), "rb") as limits:
                for line in limits:
                    if line.startswith(b"Max open files"):
                        max_fds = float(line.split()[3])
                        break
            rows.add(OPEN_FDS, (), self._open_fds())
            if max_fds is not None:
                rows.add(MAX_FDS, (), max_fds)
        except (OSError, ValueError, IndexError):
            pass

    def _open_fds(self) -> int:
        """Open descriptors of this process. Linux 6.2 and later give their number as the
        size of /proc/self/fd; elsewhere the directory is listed, as prometheus_client does
        (a listing counts its own descriptor too). An exporter that holds a directory per
        device has thousands open, and listing 3 000 costs 1.4 ms of every scrape."""
        fd_dir = os.path.join(self.self_dir, "fd")
        if self._fd_dir_size_counts is None:  # first call: does the size count them here?
            size, listed = os.stat(fd_dir).st_size, len(os.listdir(fd_dir))
            self._fd_dir_size_counts = size == listed - 1
            return size if self._fd_dir_size_counts else listed
        if self._fd_dir_size_counts:
            return os.stat(fd_dir).st_size
        return len(os.listdir(fd_dir))

    def collect(self) -> List[SeriesFamily]:
        rows = self.rows()
        # A family that got no row is left out, header and all.
        return [family for family in self._texts.families(rows) if family.spec in rows]
