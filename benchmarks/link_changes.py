"""CPU of the link change sampler (storpath.scrape.slow.LinkChanges), one pass, in-process (a
benchmark, not a test).

Builds benchmarks.scrape's host tree (N drives each below its own root port: 2N PCI functions),
reads its PCI tree once as a scrape does, names the watched links to the sampler (the scrape's
part, `scraped`) and times passes of the sampler (`read`: two sysfs reads per watched function
and the count) with the process's CPU clock, for the default classes and for `all`. At the
default interval (1 s) a pass's CPU time is the share of one core the sampler takes.

It also times the tracepoint source (`link_change_source: tracepoint`): `--events` pcie_link_event
lines in the kernel's format (readers.link_events) in a tracefs instance of the same tree, read
and counted by passes of at most `link_trace_max_bytes`.

    python -m benchmarks.link_changes [--size 1024] [--passes 50] [--events 20000] [--workdir DIR]
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


def passes(root: str, classes: list, count: int) -> tuple:
    """(functions watched, [CPU seconds of each pass], CPU seconds of the scrape's part)."""
    from storpath.base.roots import Roots
    from storpath.collectors.pcie import PcieCollector
    from storpath.scrape.slow import LinkChanges
    from storpath.scrape.snapshot import sysfs_sources

    roots = Roots(sysfs=f"{root}/sys", procfs=f"{root}/proc", dev="")
    devices, _ = sysfs_sources(roots)["pci"].read()
    sampler = LinkChanges(roots, dict(PcieCollector.config_defaults, link_sample_classes=classes))
    clock = time.process_time
    start = clock()
    watched = sampler.scraped(devices)
    scrape_part = clock() - start
    times = []
    for _ in range(count):
        start = clock()
        sampler.read(None, devices)
        times.append(clock() - start)
    return len(watched.counts), times, scrape_part


def tracepoint(root: str, events: int) -> tuple:
    """(passes, CPU seconds to read and count `events` events of the watched ports)."""
    from storpath.base.roots import Roots
    from storpath.collectors.pcie import PcieCollector
    from storpath.scrape.slow import LinkChanges
    from storpath.scrape.snapshot import sysfs_sources

    roots = Roots(sysfs=f"{root}/sys", procfs=f"{root}/proc", dev="")
    devices, _ = sysfs_sources(roots)["pci"].read()
    ports = sorted({d.static.parent for d in devices if d.static.parent and d.static.has_link
                    and d.static.class_code is not None and d.static.class_code >> 16 == 0x01})
    tracing = f"{root}/sys/kernel/tracing"
    where = f"{tracing}/instances/storpath"
    os.makedirs(f"{tracing}/events/pci/pcie_link_event", exist_ok=True)
    os.makedirs(f"{where}/events/pci/pcie_link_event", exist_ok=True)
    with open(f"{where}/events/pci/pcie_link_event/enable", "w") as f:
        f.write("1\n")
    with open(f"{where}/trace_pipe", "w") as f:
        for i in range(events):
            speed, width = (20, 1) if i % 2 == 0 else (23, 4)
            f.write(f"  irq/27-bwctrl-143     [003] d..1.   {1000 + i / 1000:.6f}: pcie_link_event: "
                    f"{ports[i % len(ports)]} type:4, reason:3, cur_bus_speed:{speed}, max_bus_speed:23, "
                    f"width:{width}, flit_mode:0, status:DLLLA\n")
    sampler = LinkChanges(roots, dict(PcieCollector.config_defaults, link_change_source="tracepoint"))
    assert sampler.source == "tracepoint"
    sampler.scraped(devices)
    clock = time.process_time
    start = clock()
    passes = 0
    while True:
        passes += 1
        _, problems = sampler.read(None, devices)
        if not any("more link events" in p.message for p in problems):
            break
    return passes, clock() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024, help="drives (2 PCI functions each)")
    parser.add_argument("--passes", type=int, default=50)
    parser.add_argument("--events", type=int, default=20000, help="pcie_link_event lines for the tracepoint source")
    parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "storpath-bench"))
    args = parser.parse_args(argv)
    root = os.path.join(args.workdir, f"host-ports-{args.size}")
    functions = host_tree(root, args.size, "ports")
    print(f"{args.size} drives ({functions} PCI functions), CPU per sampler pass, {args.passes} passes:")
    for classes in (["storage", "network", "gpu"], ["all"]):
        watched, times, scrape_part = passes(root, classes, args.passes)
        print(f"  {','.join(classes):24s} {watched:5d} links  median {statistics.median(times) * 1000:7.2f} ms"
              f"  max {max(times) * 1000:7.2f} ms  scrape's part {scrape_part * 1000:6.2f} ms")
    count, cpu = tracepoint(root, args.events)
    print(f"  tracepoint: {args.events} events read and counted in {count} passes, {cpu * 1000:.1f} ms CPU "
          f"({cpu / args.events * 1e6:.1f} us an event)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
