"""Function hops a value takes from the file it is read from to the HTTP body (a
measurement, not a test; CONTRIBUTING.md's "Count the hops").

How it counts: builds a fixture machine, builds the collectors as `storpath serve` does,
and runs one scrape in this process the way the server does (StorpathExporter.collect, then
the flight's body, http.scrape.Flight.chunks) while watching it:
- the read: an audit hook sees the file opened (`open` events) and takes the stack of the
  reading thread from the snapshot's job (snapshot._Job.run) down to the open; the job
  hands the record to the snapshot being taken (Snapshotter.take, or its _take in older trees, from
  StorpathExporter.collect);
- the value's way to its text: a profile hook takes the stack at every call that is handed
  the value's family (a local named `family` or `spec` whose name is the family's), from
  StorpathExporter.collect down;
- the body: the stack at exposition.pieces, from Flight.chunks down.
A hop is one distinct function on those stacks (the functions the value, or the record
holding it, passes through: each returns it to its caller or hands it on); the count is
how many there are, and in how many files.

    python -m benchmarks.hops [--verbose]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
from typing import Dict, List, Optional, Set, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "exporter"))
sys.path.insert(0, ROOT)

# (what, fixture machine, variant, file read (relative to sys/), family)
WALKS = (
    ("PCIe current_link_speed", "am4-x570-firecuda", "healthy", "/0000:00:01.2/current_link_speed",
     "storpath_pcie_current_link_speed_transfers_per_second"),
    ("SAS negotiated_linkrate", "supermicro-x11ssh-sas3008", "healthy", "negotiated_linkrate",
     "storpath_sas_phy_negotiated_link_rate_transfers_per_second"),
    ("md degraded", "epyc-7443-highpoint", "md-degraded", "md/degraded", "storpath_md_degraded_disks"),
)

Frame = Tuple[str, str]  # (file relative to the package, function)


def _package_frames(frame, stop) -> List[Frame]:
    """The package's frames from `frame` up to and including the first named in `stop`."""
    out: List[Frame] = []
    while frame is not None:
        path = frame.f_code.co_filename
        if "/storpath/" in path:
            rel = path.split("/storpath/", 1)[1]
            name = frame.f_code.co_qualname if hasattr(frame.f_code, "co_qualname") else frame.f_code.co_name
            out.append((rel, name))
            if name in stop:
                return out
        frame = frame.f_back
    return []  # not below a root: not part of the walk


def profiled_scrape(roots, profile) -> None:
    """One scrape of the machine at `roots` and its answer's body, with `profile` set as the
    profile function of every thread (sys.setprofile): how both this count and the
    walkthrough test (tests/unit/test_walkthrough.py) trace a scrape."""
    from storpath.background import Scheduler
    from storpath.collectors import load_all
    from storpath.config import validate
    from storpath.exporter import StorpathExporter, build_collectors
    from storpath.http.scrape import Flight

    config = validate({}, {n: s.cls.config_defaults for n, s in load_all().items()})
    scheduler = Scheduler()
    exporter = StorpathExporter(build_collectors(roots, config, scheduler), roots)
    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        flight = Flight()
        flight.families = exporter.collect(30.0)
        flight.chunks(False, False)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
        exporter.close()
        scheduler.stop()


def walk(machine: str, variant: str, read_suffix: str, family: str) -> Set[Frame]:
    from storpath.roots import Roots
    from tests.fixtures import machines

    root = tempfile.mkdtemp(prefix="hops-")
    machines.load(machine).build(root, variant)
    roots = Roots(sysfs=os.path.join(root, "sys"), procfs=os.path.join(root, "proc"),
                  captured=os.path.join(root, "captured") if os.path.isdir(os.path.join(root, "captured")) else None)
    found: Set[Frame] = set()
    watching = [True]

    def audit(event, args):
        if watching[0] and event == "open" and isinstance(args[0], str) and args[0].endswith(read_suffix):
            found.update(_package_frames(sys._getframe(1), ("_Job.run",)))

    def profile(frame, event, arg):
        if event != "call" or "/storpath/" not in frame.f_code.co_filename:
            return
        local = frame.f_locals
        spec = local.get("family", local.get("spec"))
        if getattr(spec, "name", None) == family:
            found.update(_package_frames(frame, ("StorpathExporter.collect",)))
        elif frame.f_code.co_name == "pieces":
            found.update(_package_frames(frame, ("Flight.chunks",)))
        elif frame.f_code.co_name in ("take", "_take") and frame.f_code.co_filename.endswith("snapshot.py"):
            # The reading thread's job hands the record to the snapshot being taken.
            found.update(_package_frames(frame, ("StorpathExporter.collect",)))

    sys.addaudithook(audit)
    try:
        profiled_scrape(roots, profile)
    finally:
        watching[0] = False
    return found


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verbose", action="store_true", help="list the functions of each walk")
    args = parser.parse_args(argv)
    results: Dict[str, Set[Frame]] = {}
    for what, machine, variant, suffix, family in WALKS:
        results[what] = frames = walk(machine, variant, suffix, family)
        files = {path for path, _ in frames}
        print(f"{what:26} {len(frames):3d} function hops over {len(files):2d} files")
        if args.verbose:
            for path, name in sorted(frames):
                print(f"    {path}: {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
