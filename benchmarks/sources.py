"""CPU of each part of a scrape, in-process (a benchmark, not a test).

Builds the collectors as `storpath serve` does (commands.serve.Built) on a benchmark host tree
(benchmarks.scrape's, N drives each below its own root port), starts its background tasks, lets
it scrape a few times, then reads each snapshot source in turn with what it needs (as the
reading lane does) and runs each collector's `values()` and family texts on the last snapshot,
timing each with the process's CPU clock. Prints the median per scrape of each part, largest
first, and their sum. Where benchmarks.scrape says what a scrape costs, this says where.

    python -m benchmarks.sources [--size 1024] [--scrapes 20] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.scrape import host_tree  # noqa: E402


def parts(root: str, scrapes: int) -> dict:
    """{part: [CPU seconds of each scrape]}: `source NAME`, `values NAME`, `texts NAME`."""
    from storpath.cli import build_parser
    from storpath.commands.options import resolve_config
    from storpath.commands.serve import Built

    args = build_parser("serve").parse_args(["serve", f"--path.sysfs={root}/sys", f"--path.procfs={root}/proc",
                                             f"--path.captured={root}/captured", "--log.level=error"])
    built = Built(resolve_config(args))
    built.start()
    try:
        for _ in range(3):  # the background tasks' first passes, the instance caches filled
            built.scraper.scrape(30.0)
            time.sleep(0.2)
        built.settle()
        snapshotter = built.exporter.snapshotter
        last = snapshotter.last
        times: dict = {}
        clock = time.process_time
        for _ in range(scrapes):
            for source in snapshotter.sources:
                if source.once:
                    continue
                needs = [getattr(last, name) for name in source.needs]
                start = clock()
                source.read(*needs)
                times.setdefault(f"source {source.name}", []).append(clock() - start)
            for collector in built.collectors:
                start = clock()
                rows = collector.values(last)
                times.setdefault(f"values {collector.name}", []).append(clock() - start)
                if rows is not None:
                    start = clock()
                    collector.texts.families(rows)
                    times.setdefault(f"texts {collector.name}", []).append(clock() - start)
        return times
    finally:
        built.close(wait=1.0)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024, help="drives (2 PCI functions each)")
    parser.add_argument("--scrapes", type=int, default=20)
    parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "storpath-bench"))
    args = parser.parse_args(argv)
    root = os.path.join(args.workdir, f"host-ports-{args.size}")
    functions = host_tree(root, args.size, "ports")
    medians = {name: statistics.median(each) * 1000 for name, each in parts(root, args.scrapes).items()}
    print(f"{args.size} drives ({functions} PCI functions), CPU per scrape, median of {args.scrapes}:")
    for name, ms in sorted(medians.items(), key=lambda item: -item[1]):
        print(f"  {name:32s} {ms:8.2f} ms")
    print(f"  {'sum':32s} {sum(medians.values()):8.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
