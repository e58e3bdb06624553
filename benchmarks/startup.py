"""Start-up of the exporter (a benchmark, not a test): from starting `storpath serve` to its
first complete scrape.

Builds a small fixture machine (its sysfs, procfs and captured command output), then N times:
starts the real `python -m storpath serve` on it, polls /metrics every millisecond from the
moment the process is started until an answer comes whose every
`storpath_scrape_collector_success` is 1 (every collector's rows, the background tasks'
first results included), and stops it. Reports the median and range of that time, the
exporter's VmRSS at that moment, and `python -X importtime`'s total for
`import storpath.commands.serve` and `import storpath.cli` (median of 5, in a fresh
interpreter each).

    python -m benchmarks.startup [--runs 15] [--machine desktop-z690-single-socket] [--variant healthy]
                                 [--exporter DIR]

`--exporter DIR`: the folder holding the `storpath` package to start (default this checkout's
exporter/): point it at another checkout's to measure before and after on the same machine.

Bytecode is cached (under a temporary PYTHONPYCACHEPREFIX, whatever PYTHONDONTWRITEBYTECODE
says) as an installed package's is: compiling storpath's sources at every start would cost
about 70 ms of its own.
"""

from __future__ import annotations

import argparse
import http.client
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tests.conftest import free_port, stop_process  # noqa: E402
from tests.fixtures import machines  # noqa: E402
from tests.processes import memory_bytes  # noqa: E402

SUCCESS = re.compile(r"^storpath_scrape_collector_success\{[^}]*\} (\S+)$", re.M)


def complete(body: str) -> bool:
    values = SUCCESS.findall(body)
    return bool(values) and all(float(v) == 1 for v in values)


def environment(exporter: str, cache: str) -> dict:
    env = dict(os.environ, PYTHONPATH=exporter, PYTHONPYCACHEPREFIX=cache)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def first_complete_scrape(env: dict, root: str, timeout: float = 20.0) -> dict:
    port = free_port()
    args = [sys.executable, "-m", "storpath", "serve", f"--web.listen-address=127.0.0.1:{port}",
            f"--path.sysfs={root}/sys", f"--path.procfs={root}/proc", f"--path.captured={root}/captured",
            "--log.level=warn"]
    started = time.perf_counter()
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    polls = 0
    try:
        while time.perf_counter() - started < timeout:
            if proc.poll() is not None:
                raise RuntimeError(f"storpath serve exited {proc.returncode}: {proc.stderr.read().decode()}")
            polls += 1
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
                conn.request("GET", "/metrics")
                response = conn.getresponse()
                body = response.read().decode()
                conn.close()
            except OSError:
                time.sleep(0.001)
                continue
            if response.status == 200 and complete(body):
                elapsed = time.perf_counter() - started
                return {"ms": elapsed * 1000, "rss": memory_bytes(proc.pid), "polls": polls,
                        "series": sum(1 for line in body.splitlines() if line and not line.startswith("#"))}
            time.sleep(0.001)
        raise RuntimeError(f"no complete scrape within {timeout} s")
    finally:
        stop_process(proc)
        proc.stderr.close()


def import_ms(env: dict, module: str, runs: int = 5) -> float:
    """importtime's cumulative microseconds for `module` (a fresh interpreter each run), as ms."""
    found = []
    for _ in range(runs):
        done = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"], check=True,
                              env=env, capture_output=True, text=True)
        line = [ln for ln in done.stderr.splitlines() if ln.rstrip().endswith(f"| {module}")][-1]
        found.append(int(line.split("|")[1]) / 1000)
    return statistics.median(found)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--machine", default="desktop-z690-single-socket")
    parser.add_argument("--variant", default="healthy")
    parser.add_argument("--exporter", default=os.path.join(ROOT, "exporter"))
    args = parser.parse_args(argv)
    root = tempfile.mkdtemp(prefix="storpath-startup-")
    env = environment(args.exporter, os.path.join(root, "pycache"))
    try:
        machines.load(args.machine).build(root, args.variant)
        first_complete_scrape(env, root)  # writes the bytecode, warms the page cache
        runs = [first_complete_scrape(env, root) for _ in range(args.runs)]
        imports = {module: import_ms(env, module) for module in ("storpath.commands.serve", "storpath.cli")}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    times = sorted(r["ms"] for r in runs)
    print(f"{args.machine}:{args.variant} ({runs[0]['series']} series), exporter {args.exporter}")
    print(f"  start to first complete scrape: median {statistics.median(times):.1f} ms "
          f"(min {times[0]:.1f}, max {times[-1]:.1f}, {args.runs} runs)")
    print(f"  VmRSS then: median {statistics.median(r['rss'] for r in runs) / 2**20:.1f} MB")
    for module, ms in imports.items():
        print(f"  import {module}: {ms:.1f} ms (importtime, median of 5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
