"""`storpath check --probe`: run the configured read-only fio probes now (the same
engine as the `probes` collector and `storpath probe`) and turn results far below the
path's expectation into findings. Not a registered subsystem: probes take the probes'
runtime and read the drives, so they only run when asked."""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Dict, List, TextIO

from storpath.base import safetext
from storpath.report.findings import INFO, WARNING, CheckResult, Facts, Finding
from storpath.scrape.probes import config as probes_config
from storpath.scrape.probes.engine import ProbeEngine
from storpath.base.progress import Progress
from storpath.base.units import human_bytes_per_second

# As rules/config/thresholds.yml `probes.throughput_ratio_threshold`.
RATIO_THRESHOLD = 0.70


def run_probes(facts: Facts, config: Dict[str, Any], result: CheckResult, progress: TextIO) -> List[Dict[str, Any]]:
    logging.getLogger("storpath.probes").setLevel(logging.WARNING)
    probes = probes_config.from_full_config(config)
    if not probes.targets:
        progress.write("storpath check --probe: no probe targets configured (probes.targets in the config "
                       "file; see docs/probes.md): nothing to probe\n")
        return []
    state_dir = os.path.dirname(probes.state_file or probes_config.default_state_file())
    engine = ProbeEngine(probes, facts.roots, persist=False,
                         lock_dir=os.path.join(state_dir, "locks") if os.path.isdir(state_dir) else None)
    rows: List[Dict[str, Any]] = []
    try:
        engine.refresh_expectations(facts.pci_devices(), facts.pcie_links(), facts.block_devices(),
                                    facts.snapshot.md or [])
        total = sum(len(t.profiles) for t in probes.targets)
        done = 0
        for target in probes.targets:
            for profile in target.profiles:
                done += 1
                label = f"[{done}/{total}] {target.name} {profile}"
                bar = Progress(progress, probes.runtime)
                bar.start(label)
                started = time.monotonic()
                try:
                    outcome = engine.run_probe(target, profile, tick=bar.tick)
                finally:
                    bar.end()
                if bar and not bar.tty:
                    progress.write(f"  done in {time.monotonic() - started:.1f}s\n")
                rows.append(_judge(engine, target, outcome, result))
    finally:
        engine.close()
    return rows


def _judge(engine, target, outcome, result: CheckResult) -> Dict[str, Any]:
    expected, source = engine.expected(target, outcome.profile)
    row: Dict[str, Any] = {"target": target.name, "profile": outcome.profile, "status": outcome.status,
                           "reason": outcome.reason, "message": outcome.message,
                           "expected_read_bytes_per_second": expected, "expected_source": source}
    measured = outcome.result.read_bytes_per_second if outcome.result is not None else None
    row["read_bytes_per_second"] = measured
    row["read_iops"] = outcome.result.read_iops if outcome.result is not None else None
    subject = engine.target_devices.get(target.name) or target.name
    if outcome.status != "ok":
        result.findings.append(Finding(
            subject=subject, severity=INFO if outcome.status == "skipped" else WARNING, subsystem="probes",
            kind=f"probe.{outcome.status}",
            title=f"probe {outcome.profile} of {target.name} {outcome.status}: {outcome.reason}",
            evidence=outcome.message or outcome.reason or "",
            impact="no measurement: the throughput of this target is not verified",
            remedy="See `storpath probe " + target.path + " --profile " + outcome.profile + "` for details."))
    elif expected and measured is not None and measured < RATIO_THRESHOLD * expected:
        path = engine.expectations.get(target.name)
        limits = f", set by the link(s) of {', '.join(path.limited_by)}" if path and path.limited_by else ""
        result.findings.append(Finding(
            subject=subject, severity=WARNING, subsystem="probes", kind="probe.below_expected",
            title=f"{outcome.profile} read {human_bytes_per_second(measured)}, "
                  f"{measured / expected:.0%} of the expected {human_bytes_per_second(expected)}",
            evidence=f"fio {outcome.profile} on {target.path}: {human_bytes_per_second(measured)}; expected "
                     f"{human_bytes_per_second(expected)} ({source}{limits})",
            impact=f"{human_bytes_per_second(expected - measured)} below what the "
                   f"{'path allows' if source == 'path' else 'configuration expects'}",
            remedy="Look at the other findings for this device (link, format, NUMA); otherwise check the "
                   "drive's temperature and firmware, and what else was reading it during the probe."))
    return row


def render(rows: List[Dict[str, Any]], width: int) -> List[str]:
    lines = ["probes (read-only fio, run now):"]
    for row in rows:
        expected = row.get("expected_read_bytes_per_second")
        measured = row.get("read_bytes_per_second")
        if row["status"] != "ok":
            text = f"{row['status']}: {row.get('reason')}"
        else:
            text = human_bytes_per_second(measured)
            if expected:
                text += f" of {human_bytes_per_second(expected)} expected ({measured / expected:.0%})"
        line = safetext.display(f"{row['target']} {row['profile']}: {text}")
        lines.append(f"  {line}"[:max(width, 60)])
    return lines
