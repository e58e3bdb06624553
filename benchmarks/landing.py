"""The landing page on a host of many dm-multipath maps (a benchmark, not a test): the time to
draw `/` from one scrape's snapshot.

Builds the synthetic multipath host of benchmarks.paths (N maps of P SCSI paths each, a
captured `dmsetup status`), takes one snapshot of it as a scrape does, then times the landing
page's first drawing of that snapshot's tree (storpath.http.landing.Landing.page: the tree
model and its HTML) and its size.

    python -m benchmarks.landing [--maps 10000] [--paths 2] [--runs 3] [--host DIR]

`--host DIR`: build the host there, or take the one already built there (building 10,000 maps
takes minutes): run it with PYTHONPATH at another checkout's exporter/ to measure before and after.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.paths import build_host  # noqa: E402
from storpath.base.roots import Roots  # noqa: E402
from storpath.http.landing import Landing  # noqa: E402
from storpath.scrape.snapshot import take_once  # noqa: E402


class _Exporter:
    def __init__(self, snapshot):
        self.snapshot = snapshot

    def last_snapshot(self):
        return self.snapshot


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--maps", type=int, default=10000)
    parser.add_argument("--paths", type=int, default=2)
    parser.add_argument("--host", default=None)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    work = tempfile.mkdtemp(prefix="storpath-bench-landing-")
    try:
        root = args.host or os.path.join(work, "host")
        if not os.path.isdir(os.path.join(root, "sys")):
            build_host(root, args.maps, args.paths, 0, 0)
        roots = Roots(sysfs=f"{root}/sys", procfs=f"{root}/proc", dev="", captured=f"{root}/captured")
        snapshot = take_once(roots, timeout=600.0)
        times, cpu, size = [], [], 0
        for _ in range(args.runs):
            landing = Landing(["pcie", "block", "multipath"])
            start, start_cpu = time.perf_counter(), time.process_time()
            size = len(landing.page(_Exporter(snapshot)))
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
        start = time.perf_counter()
        try:
            other = len(landing.page(_Exporter(snapshot), 2))
        except TypeError:  # a checkout before the page was paged
            other = 0
        second = time.perf_counter() - start
        print(f"{len(snapshot.multipath_maps or ())} maps, {len(snapshot.blocks or ())} block devices: landing page "
              f"drawn in {min(times):.2f}-{max(times):.2f} s ({min(cpu):.2f}-{max(cpu):.2f} s of CPU, {args.runs} "
              f"runs), {size / 1e6:.1f} MB"
              + (f"; page 2 of the same scrape after it: {second * 1000:.0f} ms, {other / 1e6:.1f} MB" if other else ""))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
