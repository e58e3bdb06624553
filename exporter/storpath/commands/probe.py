"""`storpath probe TARGET`: run one read-only fio probe now and show it next to what the
target should give.

TARGET is a target of the config file's `probes.targets` (its name or path), a block
device (/dev/...), or a file (created once, as the exporter would). The same safety
rules hold as in the exporter: read-only, direct I/O, lowest I/O priority, the I/O
budget already spent (read from the exporter's state file), the busy check, and one
probe per device at a time. The result is not written to the exporter's state file.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from typing import Dict, List, Optional

from storpath.commands.options import roots_from
from storpath.base.config import ConfigError
from storpath.analysis.pcie import analyse
from storpath.scrape.probes import config as probes_config
from storpath.scrape.probes.engine import Outcome, ProbeEngine
from storpath.base.progress import Progress
from storpath.scrape.snapshot import take_once
from storpath.base.units import human_bytes_per_second, parse_duration


def add_parser(sub, common):
    parser = sub.add_parser("probe", parents=[common], help="Run one read-only fio probe now.",
                            description="Run one read-only fio probe of TARGET now and print it next to what the "
                                        "target should give (configured, or what its PCIe path allows).")
    parser.add_argument("target", metavar="TARGET",
                        help="A configured probe target (name or path), a block device (/dev/nvme0n1, /dev/md0) or "
                             "a file on a filesystem (created once if missing, never a device node).")
    parser.add_argument("--profile", action="append", metavar="NAME",
                        help="Profile to run (repeatable). Default: the target's profiles, or seqread and randread.")
    parser.add_argument("--runtime", metavar="DURATION", help="How long fio reads per profile (default from the "
                                                               "config, 5s).")
    parser.add_argument("--json", action="store_true", help="Print the results as JSON (for scripts).")
    parser.set_defaults(run=run)


def _choose_target(probes: probes_config.ProbesConfig, text: str, profiles: Optional[List[str]]):
    target = probes.target(text) or (probes.target(os.path.normpath(text)) if text.startswith("/") else None)
    if target is None:
        if not text.startswith("/"):
            raise ConfigError(f"{text!r} is neither a configured probe target nor an absolute path")
        kind = "device" if text.startswith("/dev/") else "file"
        raw = {kind: text}
        if profiles:
            raw["profiles"] = profiles
        return probes_config.check_target(raw, probes.profiles, where="TARGET")
    if profiles:
        for name in profiles:
            if name not in probes.profiles:
                raise ConfigError(f"--profile: unknown profile {name!r} (known: {', '.join(sorted(probes.profiles))})")
        target = probes_config.Target(**{**target.__dict__, "profiles": tuple(profiles)})
    return target


def _ms(seconds: Optional[float]) -> str:
    if seconds is None:
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} us"
    return f"{seconds * 1e3:.3g} ms"


def _count(value: float) -> str:
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g}{unit}"
    return f"{value:.0f}"


def _row(engine: ProbeEngine, target, outcome: Outcome) -> Dict:
    expected, source = engine.expected(target, outcome.profile)
    row = {"target": target.name, "profile": outcome.profile, "device": outcome.device, "status": outcome.status,
           "reason": outcome.reason, "message": outcome.message, "duration_seconds": outcome.duration,
           "expected_read_bytes_per_second": expected, "expected_source": source}
    result = outcome.result
    if result is not None:
        row.update({"read_bytes_per_second": result.read_bytes_per_second, "read_iops": result.read_iops,
                    "read_latency_seconds": dict(result.latency_seconds), "io_bytes": result.io_bytes,
                    "ratio_to_expected": (result.read_bytes_per_second / expected) if expected else None})
    return row


def render_table(rows: List[Dict], header: str, limits: str) -> str:
    columns = ["profile", "read", "IOPS", "p50", "p99", "p99.9", "expected", "of expected"]
    lines = []
    for row in rows:
        lat = row.get("read_latency_seconds") or {}
        expected = row["expected_read_bytes_per_second"]
        exp_text = f"{human_bytes_per_second(expected)} ({row['expected_source']})" if expected else "-"
        if row["status"] != "ok":
            verb = "FAILED" if row["status"] == "failed" else "skipped"
            lines.append([row["profile"], f"{verb}: {row['reason']}", "", "", "", "", exp_text, ""])
            continue
        ratio = row.get("ratio_to_expected")
        lines.append([row["profile"], human_bytes_per_second(row["read_bytes_per_second"]), _count(row["read_iops"]),
                      _ms(lat.get("0.5")), _ms(lat.get("0.99")), _ms(lat.get("0.999")), exp_text,
                      f"{ratio:.0%}" if ratio is not None else "-"])
    widths = [max(len(columns[i]), *(len(line[i]) for line in lines)) for i in range(len(columns))]
    out = [header, ""]
    out.append("  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip())
    out.append("  ".join("-" * w for w in widths))
    for line in lines:
        out.append("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip())
    notes = [f"  {row['profile']}: {row['message']}" for row in rows if row["status"] != "ok" and row["message"]]
    if notes:
        out += ["", *notes]
    if limits:
        out += ["", limits]
    return "\n".join(out) + "\n"


def run(args, config) -> int:
    if not getattr(args, "log_level", None):  # the table says it all; keep the log for warnings
        logging.getLogger("storpath.probes").setLevel(logging.WARNING)
    roots = roots_from(config)
    probes = probes_config.from_full_config(config)
    try:
        if args.runtime:
            runtime = parse_duration(args.runtime)
            if runtime < 1:
                raise ConfigError("--runtime: at least 1s")
            timeout = probes.timeout if probes.timeout and probes.timeout > runtime else None
            probes = probes_config.ProbesConfig(**{**probes.__dict__, "runtime": runtime, "timeout": timeout})
        target = _choose_target(probes, args.target, args.profile)
    except (ConfigError, ValueError) as exc:
        print(f"storpath probe: {exc}", file=sys.stderr)
        return 2
    state_dir = os.path.dirname(probes.state_file or probes_config.default_state_file())
    # Lock files beside the exporter's state file keep this probe and the exporter's apart;
    # a machine without the exporter's state folder has nobody else to keep apart from.
    engine = ProbeEngine(probes, roots, persist=False,
                         lock_dir=os.path.join(state_dir, "locks") if os.path.isdir(state_dir) else None)
    try:
        snapshot = take_once(roots, ["pci", "pcie_expected", "blocks", "md"])
        why = snapshot.why_missing(("pci", "pcie_expected", "blocks"))
        if why is not None:
            raise RuntimeError(why)
        engine.refresh_expectations(snapshot.pci, analyse(snapshot.pci, expected=snapshot.pcie_expected),
                                    snapshot.blocks, snapshot.md or [])
    except Exception as exc:  # the probe itself is still worth running
        print(f"storpath probe: cannot work out the path's expectation: {exc}", file=sys.stderr)
    progress = Progress(sys.stderr, probes.runtime)
    outcomes = []
    for profile in target.profiles:
        progress.start(f"{target.name} {profile}")
        started = time.monotonic()
        try:
            outcomes.append(engine.run_probe(target, profile, tick=progress.tick))
        finally:
            progress.end()
        if not progress.tty:
            print(f"  done in {time.monotonic() - started:.1f}s", file=sys.stderr)
    rows = [_row(engine, target, outcome) for outcome in outcomes]
    path = engine.expectations.get(target.name)
    if args.json:
        print(json.dumps({"target": target.name, "kind": target.kind, "path": target.path,
                          "device": engine.target_devices.get(target.name),
                          "path_limited_by": list(path.limited_by) if path else [],
                          "results": rows}, indent=2))
    else:
        device = engine.target_devices.get(target.name)
        header = (f"{target.name} ({target.kind}{', ' + device if device else ''}): read-only fio, "
                  f"{probes.runtime:g}s per profile, direct I/O, {probes.io_priority} I/O priority")
        limits = ""
        if path is not None and path.bytes_per_second is not None:
            limits = (f"path allows {human_bytes_per_second(path.bytes_per_second)}, set by the link(s) of "
                      f"{', '.join(path.limited_by)}")
            if path.members:
                limits += f"; members: {', '.join(path.members)}"
        elif path is not None and path.reason:
            limits = f"no path expectation: {path.reason}"
        sys.stdout.write(render_table(rows, header, limits))
    return 0 if all(o.status == "ok" for o in outcomes) else 1
