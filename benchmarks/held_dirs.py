"""Whether holding each device's sysfs directory open (sysfs.HeldDirs) makes the reads a
scrape repeats cheaper (a benchmark, not a test).

Reads every PCI device's per-scrape attributes (driver link, current link speed and
width, the AER counters) through PciReader, and every NVMe namespace's LBA size through
NvmeReader, with and without held directories, in alternating rounds so both see the
same machine load. Meant for a real kernel's sysfs (the lab boots one:
`python3 tests/lab/lab.py run nvme -- python3 /mnt/repo/benchmarks/held_dirs.py`); on a
plain directory tree it measures the filesystem, not sysfs.

    python -m benchmarks.held_dirs [--sysfs /sys] [--rounds 20] [--reads 50]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "exporter"))

from storpath.readers.nvme import NvmeReader  # noqa: E402
from storpath.readers.pci import PciReader  # noqa: E402
from storpath.roots import Roots  # noqa: E402


def _per_read(read, reads: int) -> float:
    start = time.perf_counter()
    for _ in range(reads):
        read()
    return (time.perf_counter() - start) / reads


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sysfs", default="/sys")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--reads", type=int, default=50)
    args = parser.parse_args(argv)
    roots = Roots(sysfs=args.sysfs)
    readers = {}
    for held in (False, True):
        readers[held] = (PciReader(roots, hold_dirs=held), NvmeReader(roots, hold_dirs=held))
        for reader in readers[held]:
            (reader.read if isinstance(reader, PciReader) else reader.namespaces)()  # per-instance records read
    devices = len(readers[False][0].read())
    namespaces = len(readers[False][1].namespaces())
    times = {(kind, held): [] for kind in ("pci", "nvme") for held in (False, True)}
    for _ in range(args.rounds):
        for held in (False, True):
            pci, nvme = readers[held]
            times[("pci", held)].append(_per_read(pci.read, args.reads))
            times[("nvme", held)].append(_per_read(nvme.namespaces, args.reads))
    result = {"sysfs": args.sysfs, "kernel": os.uname().release, "pci_devices": devices, "namespaces": namespaces}
    for kind, count in (("pci", devices), ("nvme", namespaces)):
        by_path = statistics.median(times[(kind, False)])
        held = statistics.median(times[(kind, True)])
        result[kind] = {"by_path_us": round(by_path * 1e6, 1), "held_us": round(held * 1e6, 1),
                        "saved_per_device_us": round((by_path - held) / max(1, count) * 1e6, 2),
                        "saved_ratio": round(1 - held / by_path, 3) if by_path else None}
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
