"""What a running fio probe costs the exporter (a benchmark, not a test).

Starts the real `storpath serve` on this host with one file target (a real fio read
probe, `--runtime` seconds); the state file is seeded so the probe starts a few seconds
after the exporter. Meanwhile it scrapes /metrics at a steady rate and samples the
exporter process (/proc/<pid>/stat and status) and reports, for the time before the
probe and the time while fio runs:

- scrape latency (p50, p95, max) over HTTP,
- the exporter's own CPU (user+system seconds per second; fio's CPU is fio's, shown apart),
- the exporter's RSS (peak).

    python -m benchmarks.probe_overhead [--runtime 10] [--scrape-interval 0.1] [--json]

Bounded: one probe, scrapes on 127.0.0.1 only, stops by itself.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tests.conftest import run_exporter  # noqa: E402
from tests.processes import cpu_seconds, fio_children, memory_bytes  # noqa: E402

def summarise(latencies, cpu, seconds, rss):
    ordered = sorted(latencies)
    return {
        "scrapes": len(ordered),
        "scrape_p50_ms": round(statistics.median(ordered) * 1e3, 2) if ordered else None,
        "scrape_p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))] * 1e3, 2) if ordered else None,
        "scrape_max_ms": round(ordered[-1] * 1e3, 2) if ordered else None,
        "exporter_cpu_seconds_per_second": round(cpu / seconds, 4) if seconds else None,
        "exporter_rss_peak_mib": round(rss / (1 << 20), 1),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime", type=float, default=10.0, help="fio runtime of the probe (s)")
    parser.add_argument("--baseline", type=float, default=15.0,
                        help="seconds from now until the probe starts (exporter start-up included)")
    parser.add_argument("--scrape-interval", type=float, default=0.1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="storpath-probe-bench-") as tmp:
        state = os.path.join(tmp, "probes.json")
        interval = 3600.0
        # The probe waits out its interval from the last attempt: seed it to start after the baseline.
        with open(state, "w") as handle:
            json.dump({"version": 1, "probes": {}, "io": {},
                       "last_attempt": {"bench": time.time() - interval + args.baseline}}, handle)
        config = os.path.join(tmp, "storpath.yml")
        with open(config, "w") as handle:
            yaml.safe_dump({"probes": {"runtime": f"{args.runtime:g}s", "jitter": 0, "busy_threshold": None,
                                       "interval": "1h", "file_size": "256MiB", "state_file": state,
                                       "targets": [{"file": os.path.join(tmp, "probe.dat"), "name": "bench",
                                                    "profiles": ["seqread"]}]}}, handle)
        # The file target is created before the probe: do it now so creation is not measured.
        from storpath.scrape.probes.devices import ensure_file
        ensure_file(os.path.join(tmp, "probe.dat"), 256 << 20)

        with run_exporter([f"--config.file={config}"], tmp, env={"STATE_DIRECTORY": tmp}) as exporter:
            pid = exporter.proc.pid
            phases = {"before": {"lat": [], "cpu": 0.0, "secs": 0.0, "rss": 0},
                      "during": {"lat": [], "cpu": 0.0, "secs": 0.0, "rss": 0}}
            fio_cpu = 0.0
            deadline = time.monotonic() + args.baseline + args.runtime + 30
            seen_probe = False
            last_cpu, last_t = cpu_seconds(pid), time.monotonic()
            while time.monotonic() < deadline:
                running = fio_children(pid)
                if running:
                    seen_probe = True
                elif seen_probe:
                    break  # the probe is over
                phase = phases["during" if running else "before"]
                start = time.monotonic()
                exporter.metrics()
                phase["lat"].append(time.monotonic() - start)
                for fio_pid in running:
                    try:
                        fio_cpu = max(fio_cpu, cpu_seconds(fio_pid))
                    except OSError:
                        pass
                time.sleep(max(0.0, args.scrape_interval - (time.monotonic() - start)))
                now_cpu, now_t = cpu_seconds(pid), time.monotonic()
                phase["cpu"] += now_cpu - last_cpu
                phase["secs"] += now_t - last_t
                phase["rss"] = max(phase["rss"], memory_bytes(pid))
                last_cpu, last_t = now_cpu, now_t
            text = exporter.metrics()
        probe_bw = next((line.rsplit(" ", 1)[1] for line in text.splitlines()
                         if line.startswith("storpath_probe_read_bytes_per_second{")), None)

    report = {name: summarise(p["lat"], p["cpu"], p["secs"], p["rss"]) for name, p in phases.items()}
    report["probe"] = {"ran": seen_probe, "runtime_s": args.runtime, "fio_cpu_seconds": round(fio_cpu, 2),
                       "read_bytes_per_second": float(probe_bw) if probe_bw else None}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0 if seen_probe else 1
    print(f"probe overhead: one seqread probe of {args.runtime:g}s on a file target, scrapes every "
          f"{args.scrape_interval:g}s")
    print(f"{'':22}{'before probe':>14}{'during probe':>14}")
    for key, label in (("scrapes", "scrapes"), ("scrape_p50_ms", "scrape p50 (ms)"), ("scrape_p95_ms", "scrape p95 (ms)"),
                       ("scrape_max_ms", "scrape max (ms)"),
                       ("exporter_cpu_seconds_per_second", "exporter CPU (s/s)"),
                       ("exporter_rss_peak_mib", "exporter RSS (MiB)")):
        print(f"{label:22}{str(report['before'][key]):>14}{str(report['during'][key]):>14}")
    print(f"fio itself: {report['probe']['fio_cpu_seconds']} CPU seconds; measured "
          f"{(report['probe']['read_bytes_per_second'] or 0) / 1e6:.0f} MB/s")
    return 0 if seen_probe else 1


if __name__ == "__main__":
    sys.exit(main())
