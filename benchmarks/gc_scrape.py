"""What the cyclic garbage collector costs a scrape, and what `gc.freeze()` after the first
complete scrape saves (a benchmark, not a test).

On the synthetic hosts of benchmarks/scrape.py (`ports` layout: N drives, 2N PCI functions),
in one process as `storpath serve` builds it (the collectors of the default config, the
scraper, gzip as Prometheus asks): the first scrape, then blocks of scrapes in turn, one
block with every object left to the collector, the next after `gc.freeze()` (undone by
`gc.unfreeze()` before the next unfrozen block), so that both see the same machine load.
Per scrape: wall time, the time spent in collections (gc.callbacks), and collections of the
oldest generation; at the end, VmRSS and the frozen object count, and whether anything
frozen became cyclic garbage the collector could no longer free (gc.collect() after
gc.unfreeze() finding objects that were frozen).

    python -m benchmarks.gc_scrape [--sizes 1024] [--scrapes 10] [--blocks 6] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.scrape import host_tree  # noqa: E402
from storpath import cli  # noqa: E402
from storpath.commands import serve  # noqa: E402
from storpath.commands.options import resolve_config  # noqa: E402
from tests.processes import memory_bytes  # noqa: E402


class GcClock:
    """Time spent in the cyclic collector, and its collections of the oldest generation."""

    def __init__(self):
        self.seconds, self.full, self._start = 0.0, 0, None
        gc.callbacks.append(self._callback)

    def _callback(self, phase, info):
        if phase == "start":
            self._start = time.perf_counter()
        elif self._start is not None:
            self.seconds += time.perf_counter() - self._start
            self.full += info["generation"] == 2
            self._start = None

    def close(self):
        gc.callbacks.remove(self._callback)


def scrape(built) -> None:
    flight = built.scraper.scrape(30.0)
    flight.chunks(False, True)  # what Prometheus asks for: text, gzipped


def measure(n: int, scrapes: int, blocks: int, workdir: str) -> dict:
    root = os.path.join(workdir, f"host-ports-{n}")
    functions = host_tree(root, n, "ports")
    args = cli.build_parser("serve").parse_args(
        ["serve", f"--path.sysfs={root}/sys", f"--path.procfs={root}/proc", f"--path.captured={root}/captured",
         "--log.level=error"])
    built = serve.Built(resolve_config(args))
    built.start()
    clock = GcClock()
    try:
        start = time.perf_counter()
        scrape(built)  # the first complete scrape: everything rendered, every record made
        first = time.perf_counter() - start
        seconds = clock.seconds
        built.settle()  # what serve's main loop does next: gc.collect(), gc.freeze()
        served_collect = clock.seconds - seconds
        served_frozen = gc.get_freeze_count()  # what `storpath serve` froze after it
        gc.unfreeze()
        results = {"unfrozen": [], "frozen": []}
        frozen_count = 0
        for block in range(blocks):
            frozen = block % 2 == 1
            if frozen:
                gc.collect()  # as serve does: no garbage frozen with the rest
                gc.freeze()
                frozen_count = gc.get_freeze_count()
            for _ in range(scrapes):
                seconds, full = clock.seconds, clock.full
                start = time.perf_counter()
                scrape(built)
                results["frozen" if frozen else "unfrozen"].append(
                    (time.perf_counter() - start, clock.seconds - seconds, clock.full - full))
            if frozen:
                gc.unfreeze()
        # Frozen objects that became unreachable cycles: only a collection after unfreeze frees
        # them. The collection before it frees every other cycle, so what the second finds
        # was frozen.
        gc.collect()
        gc.freeze()
        for _ in range(scrapes):
            scrape(built)
        gc.collect()
        gc.unfreeze()
        leaked = gc.collect()
        rss = memory_bytes(os.getpid())
    finally:
        clock.close()
        built.close(wait=0)
    summary = {"functions": functions, "frozen_objects": frozen_count, "served_frozen": served_frozen,
               "first_ms": first * 1000, "first_gc_ms": served_collect * 1000, "cyclic_garbage_after_unfreeze": leaked,
               "rss_mb": rss / 2**20}
    for name, rows in results.items():
        summary[name] = {"wall_ms": statistics.median(r[0] for r in rows) * 1000,
                         "gc_ms": statistics.mean(r[1] for r in rows) * 1000,
                         "full_per_scrape": sum(r[2] for r in rows) / len(rows)}
    return summary


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1024", help="drives per host, comma-separated (2 PCI functions each)")
    parser.add_argument("--scrapes", type=int, default=10)
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "storpath-bench"))
    args = parser.parse_args(argv)
    os.makedirs(args.workdir, exist_ok=True)
    for n in (int(s) for s in args.sizes.split(",")):
        r = measure(n, args.scrapes, args.blocks, args.workdir)
        print(f"{n} drives ({r['functions']} PCI functions): frozen objects {r['frozen_objects']} "
              f"(serve froze {r['served_frozen']} after its first complete scrape), "
              f"VmRSS {r['rss_mb']:.1f} MB, cyclic garbage among frozen objects {r['cyclic_garbage_after_unfreeze']}")
        print(f"  first scrape {r['first_ms']:.1f} ms; serve's gc.collect() before its gc.freeze() after it "
              f"{r['first_gc_ms']:.1f} ms")
        for name in ("unfrozen", "frozen"):
            s = r[name]
            print(f"  {name:8s} scrape p50 {s['wall_ms']:7.1f} ms, in the collector {s['gc_ms']:5.2f} ms/scrape, "
                  f"full collections {s['full_per_scrape']:.2f}/scrape")
    return 0


if __name__ == "__main__":
    sys.exit(main())
