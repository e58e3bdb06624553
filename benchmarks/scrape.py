"""Scrape cost of the exporter on synthetic hosts (a benchmark, not a test).

Builds a sysfs tree with N NVMe endpoints, each device with the full attribute set, and
captured Identify data for every namespace (as on a replayed host: the Identify task
reads files instead of running nvme-cli); starts the real `storpath serve` on it;
scrapes it repeatedly over HTTP, as Prometheus does (gzip); and reports scrape latency
(p50, p95), CPU seconds per scrape (the exporter's CPU while it answers; beside it the whole
loop's, which adds what its background tasks spent between scrapes, and their CPU per second
when nobody scrapes) and peak RSS of the exporter process; then the first
scrape (everything rendered anew) and scrapes during which every PCI device's AER count
moves before each scrape (the worst case for what the exporter keeps between scrapes).

Beside it, on the same tree and interleaved with storpath's scrapes (one of each in turn, so
that both see the same machine load), node_exporter with only its pcidevice collector: the
exporter users would otherwise run for PCIe links. Debian's node_exporter (1.5) has no
pcidevice collector, so the benchmark builds NODE_EXPORTER_VERSION with `go install` from the
Go module proxy into `.cache/` on first use (about two minutes) and reuses it after.

Layouts: `ports`, every drive below its own root port (N drives, 2N PCI devices: the
shape the targets are set for); `mixed`, half the drives below their own root port and
half behind PCIe switches of four downstream ports (more PCI devices per drive).

    python -m benchmarks.scrape [--sizes 64,256,1024] [--layouts ports,mixed] [--scrapes 60] [--no-node-exporter]
                                [--accept text|openmetrics]

`--accept openmetrics` asks as Prometheus 2.42 does by default (OpenMetrics first).
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import inspect
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from storpath.readers.pci import AER_FILES  # noqa: E402
from tests.conftest import free_port, run_exporter, stop_process  # noqa: E402
from tests.processes import cpu_seconds, memory_bytes, wait_until_answers  # noqa: E402
from tests.fixtures.builders_nvme import Fmt, identify_namespace, write_captured  # noqa: E402
from tests.fixtures.sysfs_builder import MachineBuilder, Namespace  # noqa: E402

# Every drive offers 512 B and 4 KiB (the common consumer/datacenter table); as captured
# by `storpath capture`, so the Identify task reads files as it would on a replayed host.
FORMATS = [Fmt(512, 0, relative_performance=2), Fmt(4096, 0, relative_performance=0)]

# The first release line with the pcidevice collector's link speed and width metrics is
# 1.9; the targets are set against 1.12.1 (1.10.1 before 2026-11-28).
NODE_EXPORTER_VERSION = "v1.12.1"
NODE_EXPORTER_MODULE = "github.com/prometheus/node_exporter"

IDLE_SECONDS = 5.0  # how long the exporter is left alone to measure its background tasks' CPU


def node_exporter_binary(cache: str = os.path.join(ROOT, ".cache")) -> str:
    """The path of a node_exporter NODE_EXPORTER_VERSION, built on first use."""
    gobin = os.path.join(cache, "bin", f"node_exporter-{NODE_EXPORTER_VERSION}")
    binary = os.path.join(gobin, "node_exporter")
    if os.access(binary, os.X_OK):
        return binary
    go = shutil.which("go") or ("/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None)
    if go is None:
        raise SystemExit("benchmark: node_exporter needs Go to build (apt-get install golang-go); "
                         "or run with --no-node-exporter")
    print(f"  building node_exporter {NODE_EXPORTER_VERSION} with go install (once; about two minutes)",
          file=sys.stderr)
    env = dict(os.environ, GOBIN=gobin, GOFLAGS="-mod=mod", CGO_ENABLED="0")
    subprocess.run([go, "install", f"{NODE_EXPORTER_MODULE}@{NODE_EXPORTER_VERSION}"], env=env, check=True)
    return binary


@contextmanager
def run_node_exporter(binary: str, sysfs: str, workdir: str):
    """node_exporter with only its pcidevice collector on `sysfs`; yields its /metrics URL."""
    port = free_port()
    with open(os.path.join(workdir, f"node_exporter-{port}.log"), "w") as log:
        proc = subprocess.Popen([binary, f"--web.listen-address=127.0.0.1:{port}", "--collector.disable-defaults",
                                 "--collector.pcidevice", f"--path.sysfs={sysfs}"], stdout=log,
                                stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        wait_until_answers(proc, url, "node_exporter", timeout=60)  # its first answer is a whole scrape
        yield proc, url
    finally:
        stop_process(proc)


def build_host(root: str, n: int, layout: str = "mixed") -> int:
    """N drives; returns the number of PCI devices in the tree."""
    b = MachineBuilder(root)
    b.cpus(sockets=2, cores_per_socket=8, threads_per_core=2, numa_nodes=2)
    drive = 0
    domain = 0
    while drive < n:
        host = b.host_bridge(f"{domain:04x}:00")
        node = domain % 2
        bus = 1
        for rp in range(1, 32):
            if drive >= n or bus > 250:
                break
            port = f"{domain:04x}:00:{rp:02x}.0"
            if layout == "ports" or rp % 2:  # a drive straight below a root port
                b.root_port(host, port, speed=16.0, width=4, numa_node=node)
                _drive(b, port, f"{domain:04x}:{bus:02x}:00.0", drive)
                drive += 1
                bus += 1
            else:  # a switch with four drives
                b.root_port(host, port, speed=16.0, width=16, numa_node=node)
                b.attach(port, 16.0, 16)
                up = f"{domain:04x}:{bus:02x}:00.0"
                downs = [f"{domain:04x}:{bus + 1:02x}:{i:02x}.0" for i in range(4)]
                b.switch(port, up, downs, speed=16.0, up_width=16, down_width=4, numa_node=node)
                bus += 2
                for down in downs:
                    if drive >= n:
                        break
                    _drive(b, down, f"{domain:04x}:{bus:02x}:00.0", drive)
                    drive += 1
                    bus += 1
        domain += 1
    for index in range(drive):
        data = identify_namespace(FORMATS, 1, 3_840_755_982_336)
        write_captured(b, f"nvme{index}", 1, data, "id-ns")
    return len(b.nodes)


def _drive(b, port, address, index):
    b.nvme(port, address, model="Bench NVMe 3.84TB", serial=f"BENCH{index:08d}", firmware="1.0", vendor=0x144d,
           device=0xa824, speed=16.0, width=4, namespaces=[Namespace(size_bytes=3_840_755_982_336, lba_bytes=4096)])


def bare_reads(root: str, runs: int = 15) -> tuple:
    """(median ms, files) of the kernel's part of a scrape: the listings and the reads every
    scrape makes of files that change (each PCI device's driver link, runtime PM status,
    current link speed and width and AER counters; each NVMe namespace's logical block size;
    the NUMA nodes' CPU lists and each CPU's socket; not a local NVMe drive's controller
    state, which the nvme-controller-states task reads between scrapes), in the cheapest
    form Python has (open, read, close relative to each device's directory held open, as
    the exporter reads them), with nothing parsed or written. What a scrape costs beyond
    this is the exporter's own work."""
    sysfs = os.path.join(root, "sys")
    pci = os.path.join(sysfs, "bus", "pci", "devices")
    block = os.path.join(sysfs, "class", "block")
    held, files = [], 0
    for name in sorted(os.listdir(pci)):
        fd = os.open(os.path.realpath(os.path.join(pci, name)), os.O_RDONLY | os.O_DIRECTORY)
        names = [f for f in ("power/runtime_status", "current_link_speed", "current_link_width",
                             *(aer for _, aer in AER_FILES))
                 if os.path.exists(os.path.join(pci, name, f))]
        held.append((fd, names, True))
        files += len(names) + 1
    for name in sorted(os.listdir(block)):
        if os.path.exists(os.path.join(block, name, "queue", "logical_block_size")) and name.startswith("nvme"):
            held.append((os.open(os.path.realpath(os.path.join(block, name)), os.O_RDONLY | os.O_DIRECTORY),
                         ["queue/logical_block_size"], False))
            files += 1
    controllers = os.path.join(sysfs, "class", "nvme")
    # The NUMA nodes' CPUs and each CPU's socket (the topology is read every scrape too).
    system = os.path.join(sysfs, "devices", "system")
    for folder, pattern in (("node", "node*/cpulist"), ("cpu", "cpu*/topology/physical_package_id")):
        where = os.path.join(system, folder)
        names = sorted(os.path.relpath(f, where) for f in glob.glob(os.path.join(where, pattern)))
        if folder == "cpu" and os.path.exists(os.path.join(where, "possible")):
            names.insert(0, "possible")
        if names:
            held.append((os.open(where, os.O_RDONLY | os.O_DIRECTORY), names, False))
            files += len(names)
    listings = [d for d in (pci, block, controllers, os.path.join(sysfs, "class", "nvme-subsystem"),
                            os.path.join(system, "node"), os.path.join(system, "cpu")) if os.path.isdir(d)]
    times = []
    try:
        for _ in range(runs):
            start = time.perf_counter()
            for listing in listings:
                with os.scandir(listing) as it:
                    [(entry.name, entry.inode()) for entry in it]
            for dir_fd, names, driver in held:
                if driver:
                    try:
                        os.readlink("driver", dir_fd=dir_fd)
                    except OSError:
                        pass
                for name in names:
                    fd = os.open(name, os.O_RDONLY, dir_fd=dir_fd)
                    try:
                        os.read(fd, 4096)
                    finally:
                        os.close(fd)
            times.append(time.perf_counter() - start)
    finally:
        for dir_fd, _, _ in held:
            os.close(dir_fd)
    return _ms(statistics.median(times)), files


STAMP = ".built-by"  # in a host tree: the digest of the code that built it


def builder_digest() -> str:
    """A digest of the code that builds host trees: this benchmark's layouts and the fixture
    builders. A tree another version of that code built is built again, not measured."""
    digest = hashlib.sha256(inspect.getsource(build_host).encode() + inspect.getsource(_drive).encode())
    fixtures = os.path.join(ROOT, "tests", "fixtures")
    for name in sorted(os.listdir(fixtures)):
        if name.endswith(".py"):
            with open(os.path.join(fixtures, name), "rb") as source:
                digest.update(name.encode() + source.read())
    return digest.hexdigest()


def host_tree(root: str, n: int, layout: str) -> int:
    """The host tree of N drives at `root`, built if absent or built by other code; returns
    its number of PCI devices."""
    digest = builder_digest()
    stamp = os.path.join(root, STAMP)
    if os.path.isdir(root):
        try:
            with open(stamp) as handle:
                built_by = handle.read().strip()
        except OSError:
            built_by = None
        if built_by == digest:
            return len(os.listdir(os.path.join(root, "sys", "bus", "pci", "devices")))
        if built_by is None and not os.path.isdir(os.path.join(root, "sys", "bus", "pci")):
            raise SystemExit(f"benchmark: {root} exists and is no host tree of this benchmark: "
                             "move it away or pass another --workdir")
        print(f"  {root} was built by other code: building it again", file=sys.stderr)
        shutil.rmtree(root)
    t0 = time.monotonic()
    devices = build_host(root, n, layout)
    with open(stamp, "w") as handle:
        handle.write(digest + "\n")
    print(f"  built host of {n} drives ({devices} PCI devices) in {time.monotonic() - t0:.1f} s", file=sys.stderr)
    return devices


@contextmanager
def _logs(workdir: str):
    """A directory for the exporters' logs of one measurement: removed when it went well,
    kept (and named) when it did not."""
    logs = tempfile.mkdtemp(prefix="logs-", dir=workdir)
    try:
        yield logs
    except BaseException:
        print(f"  the exporters' logs are kept in {logs}", file=sys.stderr)
        raise
    shutil.rmtree(logs, ignore_errors=True)


ACCEPT = {
    "text": "text/plain;version=0.0.4;q=1,*/*;q=0.1",
    "openmetrics": "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
                   "text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
}


def measure(n: int, layout: str, scrapes: int, workdir: str, node_exporter: str = None, accept: str = "text") -> dict:
    root = os.path.join(workdir, f"host-{layout}-{n}")
    devices = host_tree(root, n, layout)
    args = [f"--path.sysfs={root}/sys", f"--path.procfs={root}/proc", f"--path.captured={root}/captured"]
    peer = None
    with _logs(workdir) as logs, run_exporter(args, logs) as exporter, (
            run_node_exporter(node_exporter, f"{root}/sys", logs) if node_exporter else _nothing()) as ne:
        import requests

        session = requests.Session()
        session.headers["Accept"] = ACCEPT[accept]
        url = exporter.url + "/metrics"
        start = time.perf_counter()
        first = session.get(url).text  # the first scrape renders everything
        first_ms = (time.perf_counter() - start) * 1000
        series = sum(1 for line in first.splitlines() if line and not line.startswith("#"))
        if ne is not None:
            ne_session = requests.Session()
            ne_first = ne_session.get(ne[1]).text
            peer = {"series": sum(1 for line in ne_first.splitlines() if line and not line.startswith("#")),
                    "latencies": []}
            ne_cpu_before = cpu_seconds(ne[0].pid)

            def peer_scrape(_i):  # interleaved: one node_exporter scrape before each of storpath's
                t0 = time.perf_counter()
                ne_session.get(ne[1]).raise_for_status()
                peer["latencies"].append(time.perf_counter() - t0)
        cpu_before = cpu_seconds(exporter.proc.pid)
        # storpath's CPU includes nothing of node_exporter's: separate processes. Its CPU while
        # it answers (`during`) is the scrape's; the whole loop's also holds what its background
        # tasks (the link samplers: each second) spent while node_exporter was being scraped.
        during: list = []
        latencies = _scrapes(session, url, scrapes, before=peer_scrape if ne is not None else None,
                             cpu=(exporter.proc.pid, during))
        cpu_all = (cpu_seconds(exporter.proc.pid) - cpu_before) / scrapes
        cpu = sum(during) / scrapes
        if ne is not None:
            peer["cpu"] = (cpu_seconds(ne[0].pid) - ne_cpu_before) / scrapes
            peer["rss"] = memory_bytes(ne[0].pid, "VmHWM")
        # The worst case for what the exporter keeps between scrapes: every PCI device's
        # correctable AER count moves before every scrape.
        aer_files = _aer_files(root)
        churn = _scrapes(session, url, max(10, scrapes // 3), before=lambda i: _bump(aer_files, i))
        rss = memory_bytes(exporter.proc.pid, "VmHWM")
        # Between scrapes: what the background tasks cost by themselves, per second.
        idle_before, idle_start = cpu_seconds(exporter.proc.pid), time.perf_counter()
        time.sleep(IDLE_SECONDS)
        idle = (cpu_seconds(exporter.proc.pid) - idle_before) / (time.perf_counter() - idle_start)
    floor_ms, floor_files = bare_reads(root)
    result = {
        "layout": layout,
        "accept": accept,
        "drives": n,
        "pci_devices": devices,
        "series": series,
        "scrapes": scrapes,
        "first_ms": round(first_ms, 1),
        "p50_ms": _ms(statistics.median(latencies)),
        "p95_ms": _ms(latencies[int(0.95 * (len(latencies) - 1))]),
        "cpu_ms_per_scrape": round(cpu * 1000, 1),
        "cpu_ms_per_scrape_with_background": round(cpu_all * 1000, 1),
        "background_cpu_ms_per_second": round(idle * 1000, 1),
        "p50_all_aer_moving_ms": _ms(statistics.median(churn)),
        "peak_rss_mb": round(rss / 1e6, 1),
        "bare_reads_ms": floor_ms,
        "bare_reads_files": floor_files,
    }
    if peer is not None:
        ne_p50 = statistics.median(peer["latencies"])
        result["node_exporter"] = {
            "version": NODE_EXPORTER_VERSION,
            "collectors": "pcidevice",
            "series": peer["series"],
            "p50_ms": _ms(ne_p50),
            "p95_ms": _ms(sorted(peer["latencies"])[int(0.95 * (len(peer["latencies"]) - 1))]),
            "cpu_ms_per_scrape": round(peer["cpu"] * 1000, 1),
            "peak_rss_mb": round(peer["rss"] / 1e6, 1),
        }
        result["p50_ratio_to_node_exporter"] = round(statistics.median(latencies) / ne_p50, 3)
    return result


@contextmanager
def _nothing():
    yield None


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def _scrapes(session, url: str, count: int, before=None, cpu=None) -> list:
    """Sorted latencies of `count` scrapes (gzip, as Prometheus asks). `cpu`: (pid, list) to
    append that process's CPU seconds during each scrape to (clock ticks: a hundredth of a
    second each, which averages out over the scrapes)."""
    latencies = []
    for i in range(count):
        if before is not None:
            before(i)
        cpu_before = cpu_seconds(cpu[0]) if cpu is not None else 0.0
        start = time.perf_counter()
        response = session.get(url)
        latencies.append(time.perf_counter() - start)
        if cpu is not None:
            cpu[1].append(cpu_seconds(cpu[0]) - cpu_before)
        response.raise_for_status()
    return sorted(latencies)


def _aer_files(root: str) -> list:
    base = os.path.join(root, "sys", "bus", "pci", "devices")
    paths = [os.path.join(base, name, "aer_dev_correctable") for name in sorted(os.listdir(base))]
    return [p for p in paths if os.path.exists(p)]


def _bump(paths: list, count: int) -> None:
    text = f"RxErr {count + 1}\nBadTLP 0\nBadDLLP 0\nRollover 0\nTimeout 0\nNonFatalErr 0\nCorrIntErr 0\n" \
           f"HeaderOF 0\nTOTAL_ERR_COR {count + 1}\n"
    for path in paths:
        with open(path, "w") as handle:
            handle.write(text)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="64,256,1024", help="drive counts, comma-separated")
    parser.add_argument("--layouts", default="ports,mixed", help="ports, mixed or both, comma-separated")
    parser.add_argument("--scrapes", type=int, default=60)
    parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "storpath-bench"))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--accept", choices=sorted(ACCEPT), default="text", help="format to ask for")
    parser.add_argument("--no-node-exporter", action="store_true",
                        help="leave out the node_exporter (pcidevice collector) scrapes beside storpath's")
    args = parser.parse_args(argv)
    os.makedirs(args.workdir, exist_ok=True)
    node_exporter = None if args.no_node_exporter else node_exporter_binary()
    results = []
    runs = [(layout, int(n)) for layout in args.layouts.split(",") for n in args.sizes.split(",")]
    for layout, n in runs:
        results.append(measure(n, layout, args.scrapes, args.workdir, node_exporter, args.accept))
        if not args.json:
            r = results[-1]
            print(f"{layout:<5} {r['drives']:>5} drives {r['pci_devices']:>5} PCI devices {r['series']:>6} series  "
                  f"p50 {r['p50_ms']:>6.1f} ms  p95 {r['p95_ms']:>6.1f} ms  "
                  f"CPU {r['cpu_ms_per_scrape']:>6.1f} ms/scrape ({r['cpu_ms_per_scrape_with_background']:.1f} with the "
                  f"background between scrapes; {r['background_cpu_ms_per_second']:.1f} ms/s idle)  "
                  f"peak RSS {r['peak_rss_mb']:>5.1f} MB  "
                  f"first scrape {r['first_ms']:>6.1f} ms  p50 with all AER counts moving "
                  f"{r['p50_all_aer_moving_ms']:>6.1f} ms", flush=True)
            print(f"{'':<5} the kernel's part: the listings and {r['bare_reads_files']} file reads of a scrape, bare, "
                  f"{r['bare_reads_ms']:.1f} ms", flush=True)
            ne = r.get("node_exporter")
            if ne:
                print(f"{'':<5} node_exporter {ne['version']} pcidevice only: {ne['series']:>6} series  "
                      f"p50 {ne['p50_ms']:>6.1f} ms  p95 {ne['p95_ms']:>6.1f} ms  CPU {ne['cpu_ms_per_scrape']:>6.1f} "
                      f"ms/scrape  peak RSS {ne['peak_rss_mb']:>5.1f} MB  storpath/node_exporter p50 "
                      f"{r['p50_ratio_to_node_exporter']:.3f}", flush=True)
    if args.json:
        print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
