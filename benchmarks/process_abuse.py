"""What the serving process does under a full descriptor table and under a signal burst (a
benchmark, not a test: it counts outcomes over rounds; tests/e2e/test_serve_descriptors.py
and tests/e2e/test_serve_signals.py are the pass/fail checks). docs/serving.md quotes it.

    python -m benchmarks.process_abuse descriptors [--rounds 4] [--source DIR]
    python -m benchmarks.process_abuse sighup [--rounds 20] [--source DIR]
    python -m benchmarks.process_abuse memory [--source DIR]

`descriptors`: each round starts `storpath serve` under RLIMIT_NOFILE 1024 (soft and hard) on
the am4-x570-firecuda fixture machine, opens 1100 idle connections from five loopback
addresses, and reports the health check's latency while they are held (no answer within
15 s: null), the exporter's CPU share meanwhile, then, 2 s after the clients closed them all,
the health check's latency and the server's sockets in CLOSE-WAIT.

`sighup`: each round starts `storpath serve` with a config file, sends 5000 SIGHUPs 0-200 us
apart, then changes the file and sends one more: "ok" when that reload shows in /metrics
within 10 s and SIGTERM then stops the process within 5 s, "dead" when the process ended
during the burst, "stuck" otherwise.

`memory`: `storpath serve` under the unit's LimitNOFILE=8192, 7000 idle connections from 30
loopback addresses: its resident memory before and while they are held (what LimitNOFILE is
weighed against MemoryMax with).

`--source DIR` runs the exporter from another checkout (DIR/exporter), to compare.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time
from typing import Optional

import requests

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tests.conftest import free_port  # noqa: E402
from tests.e2e.test_serve_descriptors import SOURCES, close_all, close_wait, open_idle  # noqa: E402
from tests.e2e.test_serve_signals import BURST, send_burst  # noqa: E402
from tests.fixtures import machines  # noqa: E402
from tests.processes import cpu_seconds, memory_bytes  # noqa: E402


def _start(source: str, tree: str, port: int, *extra: str, limit: Optional[tuple] = None) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.path.join(source, "exporter"))
    proc = subprocess.Popen([sys.executable, "-m", "storpath", "serve", f"--web.listen-address=127.0.0.1:{port}",
                             f"--path.sysfs={tree}/sys", f"--path.procfs={tree}/proc", *extra], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            preexec_fn=(lambda: resource.setrlimit(resource.RLIMIT_NOFILE, limit)) if limit else None)
    end = time.monotonic() + 30
    while time.monotonic() < end:
        try:
            if requests.get(f"http://127.0.0.1:{port}/-/healthy", timeout=1).status_code == 200:
                return proc
        except requests.RequestException:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("storpath did not start")


def _health(port: int, timeout: float = 15) -> Optional[float]:
    start = time.monotonic()
    try:
        requests.get(f"http://127.0.0.1:{port}/-/healthy", timeout=timeout).raise_for_status()
    except requests.RequestException:
        return None
    return round(time.monotonic() - start, 3)


def descriptors(source: str, tree: str) -> dict:
    port = free_port()
    proc = _start(source, tree, port, limit=(1024, 1024))
    try:
        opened = open_idle(port, 1100, SOURCES)
        time.sleep(1)
        cpu, start = cpu_seconds(proc.pid), time.monotonic()
        held = _health(port)
        time.sleep(max(0.0, 4 - (time.monotonic() - start)))
        share = (cpu_seconds(proc.pid) - cpu) / (time.monotonic() - start)
        close_all(opened)
        time.sleep(2)
        return {"health_while_held_s": held, "cpu_share_while_held": round(share, 2),
                "health_after_close_s": _health(port), "close_wait_after_close": close_wait(port)}
    finally:
        proc.kill()
        proc.wait()


def memory(source: str, tree: str, count: int = 7000) -> dict:
    port = free_port()
    proc = _start(source, tree, port, "--web.disable-exporter-metrics", limit=(8192, 8192))
    try:
        requests.get(f"http://127.0.0.1:{port}/metrics", timeout=30)
        time.sleep(0.5)
        before = memory_bytes(proc.pid)
        opened = open_idle(port, count, [f"127.0.0.{n}" for n in range(1, 31)])
        time.sleep(2)
        held = memory_bytes(proc.pid)
        close_all(opened)
        return {"rss_before_mib": round(before / 2**20, 1), f"rss_with_{count}_idle_mib": round(held / 2**20, 1),
                "kib_per_connection": round((held - before) / count / 1024, 1)}
    finally:
        proc.kill()
        proc.wait()


def sighup(source: str, tree: str, seed: int) -> str:
    port = free_port()
    with tempfile.TemporaryDirectory() as folder:
        config = os.path.join(folder, "storpath.yml")
        with open(config, "w") as handle:
            handle.write("collectors:\n  md:\n    enabled: true\n")
        proc = _start(source, tree, port, f"--config.file={config}")
        try:
            send_burst(proc.pid, BURST, random.Random(seed))
            if proc.poll() is not None:
                return "dead"
            with open(config, "w") as handle:
                handle.write("collectors:\n  md:\n    enabled: false\n")
            proc.send_signal(signal.SIGHUP)
            end = time.monotonic() + 10
            while time.monotonic() < end:
                try:
                    text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
                except requests.RequestException:
                    text = ""
                if text and 'collector="md"' not in text:
                    break
                time.sleep(0.1)
            else:
                return "dead" if proc.poll() is not None else "stuck"
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                return "stuck"
            return "ok"
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("descriptors", "sighup", "memory"))
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--source", default=ROOT, help="checkout whose exporter/ runs (default: this one)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        tree = os.path.join(folder, "machine")
        machines.load("am4-x570-firecuda").build(tree, "healthy")
        if args.what == "descriptors":
            for _ in range(args.rounds or 4):
                print(json.dumps(descriptors(args.source, tree)), flush=True)
        elif args.what == "memory":
            print(json.dumps(memory(args.source, tree)))
        else:
            outcomes = [sighup(args.source, tree, seed) for seed in range(args.rounds or 20)]
            print(json.dumps({outcome: outcomes.count(outcome) for outcome in ("ok", "stuck", "dead")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
