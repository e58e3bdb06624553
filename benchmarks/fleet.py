"""What a fleet costs one Prometheus: N simulated storpath hosts scraped every 15 s (a benchmark,
not a test; `make bench-fleet`).

1. Sources: the real `storpath serve` runs once on every fixture machine variant
   (tests/fixtures/machines) and every lab capture (tests/lab/captures); each answer is kept.
2. Fleet: benchmarks/fleet_targets.py serves N hosts from those answers, host i being source
   i mod sources with its own serials and SAS addresses; Prometheus (Debian's) scrapes each as a
   target of its own (`instance` = the host's name) every 15 s.
3. Per size, three phases on the same Prometheus: without rules; the shipped alerting rules
   without the recording rules (and without the alerts that read recorded series); then all the
   shipped rules (rules/*.yml, reloaded each time). After each phase: series in the head (per host
   and in total), samples ingested per second, resident memory and Go heap, evaluation time of
   every rule group (its median evaluation in the phase), and, with the shipped rules, the time of
   every dashboard panel query (dashboards/*.json, read at run time) as an instant query and as a
   1-hour range query at a 15 s step (one run each: the figures are a few milliseconds noisy).
   The panels that read recorded series are also timed in the phase without recording rules, with
   each recorded name replaced by its expression: what a dashboard costs when nothing records
   for it.

    python -m benchmarks.fleet [--sizes 100,500,2000] [--phase 60] [--json results.json]

Prints a Markdown report (docs/fleet-scale.md keeps the one measured there).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Dict, Optional

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import free_port, run_exporter, stop_process  # noqa: E402
from tests.fixtures import machines  # noqa: E402
from tests.integration import fleet_engines  # noqa: E402
from tests.processes import memory_bytes  # noqa: E402

from benchmarks.fleet_targets import host_name  # noqa: E402

CAPTURES = ROOT / "tests" / "lab" / "captures"
RULES = ROOT / "rules"
INTERVAL = "15s"


# --------------------------------------------------------------------------- sources


def collect_sources(dest: Path, work: Path) -> dict:
    """Scrape the real exporter once per fixture machine variant and lab capture into dest/*.prom;
    returns {source: series in its answer}."""
    dest.mkdir(parents=True)
    roots = []
    for name, variant in machines.all_cases():
        root = work / f"{name}-{variant}"
        machines.load(name).build(str(root), variant)
        roots.append((f"{name}-{variant}", root))
    for archive in sorted(CAPTURES.glob("*.tar.gz")):
        root = work / f"lab-{archive.name.split('.')[0]}"
        with tarfile.open(archive) as tar:
            tar.extractall(root)
        roots.append((f"lab-{archive.name.split('.')[0]}", root))
    counts = {}
    for label, root in roots:
        args = [f"--path.sysfs={root}/sys", f"--path.procfs={root}/proc", f"--path.captured={root}/captured"]
        if (root / "dev").is_dir():
            args.append(f"--path.dev={root}/dev")
        with run_exporter(args, str(work)) as exporter:
            text = exporter.metrics()
            # NVMe Identify runs in the background: wait for its formats, as a scrape 15 s in would.
            deadline = time.monotonic() + 20
            while "storpath_nvme_controller_info{" in text and "storpath_nvme_namespace_best_lba_size_bytes{" \
                    not in text and time.monotonic() < deadline:
                time.sleep(0.2)
                text = exporter.metrics()
        (dest / f"{label}.prom").write_text(text)
        counts[label] = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    return counts


# --------------------------------------------------------------------------- Prometheus


def prometheus_config(hosts: int, port: int, rules_dir: Path) -> dict:
    return {
        "global": {"scrape_interval": INTERVAL, "evaluation_interval": INTERVAL},
        "rule_files": [f"{rules_dir}/*.yml"],
        "scrape_configs": [
            {
                "job_name": "storpath",
                "static_configs": [{"targets": [host_name(i) for i in range(hosts)]}],
                # Every host is its own target, named after the host; all are served by one process.
                "relabel_configs": [
                    {"source_labels": ["__address__"], "target_label": "instance"},
                    {"source_labels": ["__address__"], "target_label": "__metrics_path__",
                     "replacement": "/hosts/$1/metrics"},
                    {"target_label": "__address__", "replacement": f"127.0.0.1:{port}"},
                ],
            },
            {"job_name": "prometheus", "scrape_interval": "5s",
             "static_configs": [{"targets": ["PROMETHEUS"]}]},
        ],
    }


def _instant(prom, expr: str) -> list:
    """An instant query with a long timeout: a loaded 2-core machine answers slowly at 2000 hosts."""
    url = f"{prom.url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
    with urllib.request.urlopen(url, timeout=120) as response:
        return json.load(response)["data"]["result"]


def _query(prom, expr: str) -> float:
    result = _instant(prom, expr)
    return float(result[0]["value"][1]) if result else float("nan")


def recording_rules() -> Dict[str, str]:
    """Recorded name -> its expression, over the shipped rule files."""
    out = {}
    for path in sorted(RULES.glob("*.yml")):
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                if "record" in rule:
                    out[rule["record"]] = rule["expr"]
    return out


def _reads_recorded(expr: str, recorded: Dict[str, str]) -> bool:
    return any(re.search(re.escape(name) + r"(?![\w:])", expr) for name in recorded)


def write_alerting_rules(dest: Path) -> int:
    """The shipped rule files without recording rules and without the alerts that read recorded
    series (they would be evaluated on nothing); returns how many alerts were left out."""
    recorded = recording_rules()
    dropped = 0
    for path in sorted(RULES.glob("*.yml")):
        doc = yaml.safe_load(path.read_text())
        for group in doc["groups"]:
            kept = [r for r in group["rules"] if "alert" in r and not _reads_recorded(r["expr"], recorded)]
            dropped += sum(1 for r in group["rules"] if "alert" in r) - len(kept)
            group["rules"] = kept
        doc["groups"] = [g for g in doc["groups"] if g["rules"]]
        (dest / path.name).write_text(yaml.safe_dump(doc, sort_keys=False))
    return dropped


_ALL = re.compile(r'^\s*\w+\s*=~\s*"\.\*"\s*$')


def inline_recorded(expr: str, recorded: Dict[str, str]) -> Optional[str]:
    """`expr` with every recorded name replaced by its expression (recursively, `name[5m]` as the
    subquery `(expr)[5m:]`); None when a
    recorded name carries a matcher other than `label=~".*"` (a dashboard variable at All),
    which an expression cannot take."""
    pattern = re.compile(r"(?<![\w:])(" + "|".join(re.escape(n) for n in sorted(recorded, key=len, reverse=True))
                         + r")(?![\w:])(\{[^}]*\})?(\[[^\]:]+\])?")
    for _ in range(10):
        failed = []

        def replace(match):
            matchers = match.group(2)
            if matchers and not all(_ALL.match(m) for m in matchers[1:-1].split(",") if m.strip()):
                failed.append(match.group(0))
                return match.group(0)
            # A range over a recorded series becomes a subquery at the default resolution.
            window = match.group(3)[:-1] + ":]" if match.group(3) else ""
            # `group_left name` would read `group_left (expr)` as a label list: give it an empty one.
            before = match.string[:match.start()].rstrip()
            lead = "() " if before.endswith(("group_left", "group_right")) else ""
            return lead + "(" + recorded[match.group(1)].strip() + ")" + window

        new = pattern.sub(replace, expr)
        if failed:
            return None
        if new == expr:
            return expr
        expr = new
    return None


def _timed(prom, path: str, params: dict, runs: int = 1) -> float:
    """Median wall time of a query over HTTP, in seconds; raises when Prometheus rejects it."""
    url = f"{prom.url}{path}?{urllib.parse.urlencode(params)}"
    times = []
    wait = 45 if "timeout" in params else 120
    for _ in range(runs):
        start = time.perf_counter()
        with urllib.request.urlopen(url, timeout=wait) as response:
            body = json.load(response)
        times.append(time.perf_counter() - start)
        if body.get("status") != "success":
            raise RuntimeError(f"{params['query']}: {body}")
    return statistics.median(times)


def _timed_or_nan(prom, path: str, params: dict) -> float:
    try:
        return _timed(prom, path, params)
    except (OSError, RuntimeError) as exc:  # a timeout or a query Prometheus gives up on
        print(f"  query failed: {str(exc)[:200]}", file=sys.stderr)
        return float("nan")


def measure_phase(prom, pid: int, hosts: int, phase: float, panels: bool, inlined: bool = False) -> dict:
    now = time.time()
    window = f"{int(phase)}s"
    out = {
        "head_series": _query(prom, "prometheus_tsdb_head_series"),
        "storpath_series": _query(prom, 'count({job="storpath"})'),
        "targets_up": _query(prom, 'count(up{job="storpath"} == 1)'),
        "samples_per_second": _query(prom, "rate(prometheus_tsdb_head_samples_appended_total[1m])"),
        "rss_bytes": memory_bytes(pid),
        "peak_rss_bytes": memory_bytes(pid, "VmHWM"),
        "heap_inuse_bytes": _query(prom, 'go_memstats_heap_inuse_bytes{job="prometheus"}'),
        "scrape_duration_p50_seconds": _query(prom, 'quantile(0.5, scrape_duration_seconds{job="storpath"})'),
        # The median evaluation of each group in the phase (the first after a reload runs cold).
        "rule_groups": {
            s["metric"]["rule_group"].rsplit(";", 1)[-1]: float(s["value"][1])
            for s in _instant(prom, f"quantile_over_time(0.5, prometheus_rule_group_last_duration_seconds[{window}])")
        },
        "panels": [],
    }
    out["series_per_host"] = out["storpath_series"] / hosts
    # (dashboard, panel, query, bounded): with `inlined`, the panels that read recorded series
    # with each recorded name replaced by its expression, bounded (a replaced 7-day subquery can
    # take minutes at 2000 hosts).
    queries = []
    if inlined:
        recorded = recording_rules()
        for uid, title, expr in fleet_engines.panel_queries():
            query = inline_recorded(expr, recorded) if _reads_recorded(expr, recorded) else None
            if query is not None:
                queries.append((uid, title, query, True))
    if panels:
        queries += [(uid, title, expr, False) for uid, title, expr in fleet_engines.panel_queries()]
    for uid, title, query, bounded in queries:
        out["panels"].append({"dashboard": uid, "panel": title, **_panel_times(prom, query, now, bounded)})
    return out


def _panel_times(prom, query: str, now: float, bounded: bool) -> dict:
    """A panel query's time as an instant query and as a 1-hour range query. Bounded: NaN when
    Prometheus gives up at 30 s (the range query is then not tried); else a failure raises."""
    params, timed = ({"query": query, "timeout": "30s"}, _timed_or_nan) if bounded else ({"query": query}, _timed)
    instant = timed(prom, "/api/v1/query", {**params, "time": f"{now:.3f}"})
    ranged = float("nan") if instant != instant else timed(
        prom, "/api/v1/query_range", {**params, "start": f"{now - 3600:.3f}", "end": f"{now:.3f}", "step": INTERVAL})
    return {"instant_seconds": instant, "range_1h_seconds": ranged}


def run_size(hosts: int, phase: float, sources: Path, work: Path) -> dict:
    port = free_port()
    server_log = open(work / f"targets-{hosts}.log", "w")
    server = subprocess.Popen([sys.executable, "-m", "benchmarks.fleet_targets", "--sources", str(sources),
                               "--hosts", str(hosts), "--port", str(port)], cwd=ROOT, stdout=server_log,
                              stderr=subprocess.STDOUT)
    engines = fleet_engines.Engines(work / f"engines-{hosts}")
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/hosts/{host_name(hosts - 1)}/metrics", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the fleet server did not start: {(work / f'targets-{hosts}.log').read_text()}")
                time.sleep(0.5)
        rules_dir = work / f"rules-{hosts}"
        rules_dir.mkdir()
        config = prometheus_config(hosts, port, rules_dir)
        prom_port = free_port()
        config["scrape_configs"][1]["static_configs"][0]["targets"] = [f"127.0.0.1:{prom_port}"]
        prom = engines.prometheus(config, port=prom_port)
        pid = prom.extra["process"].pid
        started = time.monotonic()
        while _query(prom, 'count(up{job="storpath"} == 1)') < hosts:
            if time.monotonic() - started > 120:
                raise RuntimeError(f"not every target up after 120 s: {_instant(prom, 'count by (job) (up == 1)')}")
            time.sleep(1)
        result = {"hosts": hosts}
        time.sleep(phase)
        result["without_rules"] = measure_phase(prom, pid, hosts, phase, panels=False)
        result["alerts_dropped"] = write_alerting_rules(rules_dir)
        urllib.request.urlopen(urllib.request.Request(f"{prom.url}/-/reload", method="POST"), timeout=60)
        time.sleep(phase)
        result["alerting_rules"] = measure_phase(prom, pid, hosts, phase, panels=False, inlined=True)
        for path in RULES.glob("*.yml"):
            shutil.copy(path, rules_dir / path.name)
        urllib.request.urlopen(urllib.request.Request(f"{prom.url}/-/reload", method="POST"), timeout=60)
        time.sleep(phase)
        result["shipped_rules"] = measure_phase(prom, pid, hosts, phase, panels=True)
        return result
    finally:
        engines.close()
        stop_process(server)
        server_log.close()


# --------------------------------------------------------------------------- report


def _mb(n: float) -> str:
    return f"{n / 2**20:.0f} MiB"


def report(results: list, sources: dict) -> str:
    lines = [f"Sources: {len(sources)} expositions, {min(sources.values())}-{max(sources.values())} series each.", ""]
    lines += ["| hosts | phase | series/host | series (head) | samples/s | RSS | Go heap | slowest rule group |",
              "|---|---|---|---|---|---|---|---|"]
    for r in results:
        for phase in ("without_rules", "alerting_rules", "shipped_rules"):
            m = r[phase]
            groups = m["rule_groups"]
            slowest = max(groups.items(), key=lambda kv: kv[1]) if groups else None
            name = {"alerting_rules": "alerts, no recording rules"}.get(phase, phase.replace("_", " "))
            lines.append(f"| {r['hosts']} | {name} | {m['series_per_host']:.0f} | "
                         f"{m['head_series']:.0f} | {m['samples_per_second']:.0f} | {_mb(m['rss_bytes'])} | "
                         f"{_mb(m['heap_inuse_bytes'])} | "
                         + (f"{slowest[0]} {slowest[1] * 1000:.1f} ms" if slowest else "-") + " |")
    lines += ["", "Rule group evaluation (median over the phase, ms):", "",
              "| group | " + " | ".join(f"{r['hosts']} hosts" for r in results) + " |",
              "|---|" + "---|" * len(results)]
    groups = sorted({g for r in results for g in r["shipped_rules"]["rule_groups"]})
    for g in groups:
        lines.append(f"| {g} | " + " | ".join(f"{r['shipped_rules']['rule_groups'].get(g, float('nan')) * 1000:.1f}"
                                              for r in results) + " |")
    lines += ["", "Dashboard panel queries with the shipped rules (instant / 1 h range at 15 s, ms):", "",
              "| dashboard | panel | " + " | ".join(f"{r['hosts']} hosts" for r in results) + " |",
              "|---|---|" + "---|" * len(results)]
    for i, panel in enumerate(results[0]["shipped_rules"]["panels"]):
        cells = [f"{r['shipped_rules']['panels'][i]['instant_seconds'] * 1000:.0f} / "
                 f"{r['shipped_rules']['panels'][i]['range_1h_seconds'] * 1000:.0f}" for r in results]
        lines.append(f"| {panel['dashboard']} | {panel['panel']} | " + " | ".join(cells) + " |")
    lines += ["", f"Alerting rules without recording rules: {results[0]['alerts_dropped']} alerts read recorded "
              "series and were left out of that phase. Rule evaluation in it (ms):", "",
              "| group | " + " | ".join(f"{r['hosts']} hosts" for r in results) + " |",
              "|---|" + "---|" * len(results)]
    for g in sorted({g for r in results for g in r["alerting_rules"]["rule_groups"]}):
        lines.append(f"| {g} | " + " | ".join(f"{r['alerting_rules']['rule_groups'].get(g, float('nan')) * 1000:.1f}"
                                              for r in results) + " |")
    lines += ["", "Panels that read recorded series: as shipped / with each recorded name replaced by its "
              "expression and no recording rules (instant and 1 h range, ms):", "",
              "| dashboard | panel | " + " | ".join(f"{r['hosts']} hosts" for r in results) + " |",
              "|---|---|" + "---|" * len(results)]
    for i, panel in enumerate(results[0]["alerting_rules"]["panels"]):
        cells = []
        for r in results:
            inlined = r["alerting_rules"]["panels"][i]
            shipped = next(p for p in r["shipped_rules"]["panels"]
                           if (p["dashboard"], p["panel"]) == (inlined["dashboard"], inlined["panel"]))
            cells.append(f"{shipped['instant_seconds'] * 1000:.0f} / {inlined['instant_seconds'] * 1000:.0f}; "
                         f"{shipped['range_1h_seconds'] * 1000:.0f} / {inlined['range_1h_seconds'] * 1000:.0f}")
        lines.append(f"| {panel['dashboard']} | {panel['panel']} | " + " | ".join(cells) + " |")
    if len(results) >= 2:
        lines += ["", extrapolate(results)]
    return "\n".join(lines)


def extrapolate(results: list) -> str:
    """Linear fits through the smallest and largest measured size: clearly an extrapolation."""
    a, b = results[0], results[-1]
    ma, mb = a["shipped_rules"], b["shipped_rules"]
    hosts = b["hosts"] - a["hosts"]
    rss_per_host = (mb["rss_bytes"] - ma["rss_bytes"]) / hosts
    slowest = lambda m: max(m["rule_groups"].values())  # noqa: E731
    eval_per_host = (slowest(mb) - slowest(ma)) / hosts
    out = [f"Extrapolated (linear through {a['hosts']} and {b['hosts']} hosts, not measured): "
           f"{rss_per_host / 2**10:.0f} KiB of RSS and {(mb['head_series'] - ma['head_series']) / hosts:.0f} "
           f"series per host;"]
    for limit in (16, 64):
        n = b["hosts"] + (limit * 2**30 - mb["rss_bytes"]) / rss_per_host if rss_per_host > 0 else float("inf")
        out.append(f"{limit} GiB of RSS at about {n:,.0f} hosts;")
    if eval_per_host > 0:
        n = b["hosts"] + (15 - slowest(mb)) / eval_per_host
        out.append(f"the slowest rule group would take the whole 15 s interval at about {n:,.0f} hosts.")
    return " ".join(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,500,2000", help="hosts per run, comma-separated")
    parser.add_argument("--phase", type=float, default=60,
                        help="seconds per phase (without rules, alerting rules only, all shipped rules)")
    parser.add_argument("--json", help="also write the raw results here")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    work = Path(tempfile.mkdtemp(prefix="storpath-fleet-"))
    try:
        sources = collect_sources(work / "sources", work / "machines")
        print(f"sources: {json.dumps(sources)}", file=sys.stderr)
        results = []
        for n in sizes:
            started = time.monotonic()
            results.append(run_size(n, args.phase, work / "sources", work))
            print(f"{n} hosts measured in {time.monotonic() - started:.0f} s", file=sys.stderr)
        if args.json:
            Path(args.json).write_text(json.dumps({"sources": sources, "results": results}, indent=1))
        print(report(results, sources))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
