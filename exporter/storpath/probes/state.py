"""What the probes remember: the latest result, counters and timestamps of every
(target, profile), the bytes read per device in the last hour (the budget), and when
each target was last tried. Kept in a small JSON file so that a restart does not blank
the dashboards, reset a slow-probe alert, or forget the budget already spent.

The file is replaced atomically (write a temporary file in the same folder, fsync,
rename), so a crash leaves the old state or the new one, never half of either. A file
that cannot be read or parsed is logged and ignored: the exporter starts empty. It is
never replaced either: a file there that is not a storpath state file (or is no regular
file) is someone else's, and storpath keeps its results in memory only.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import tempfile
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from storpath import log
from storpath.probes.fio import FioResult

LOG = log.get("probes")
VERSION = 1
# A state file holds a few records per target: anything much larger is not one.
_MAX_STATE_BYTES = 64 << 20


@dataclass
class ProbeRecord:
    result: Optional[FioResult] = None
    last_run: Optional[float] = None  # when the latest run started (success or failure)
    last_success: Optional[float] = None  # when the latest successful run started
    duration: Optional[float] = None  # wall seconds of the latest run
    runs: int = 0  # fio runs, successful or not (skips are not runs)
    failures: Dict[str, int] = field(default_factory=dict)  # reason -> count
    skipped: Dict[str, int] = field(default_factory=dict)  # reason -> count
    last_error: Optional[str] = None

    def copy(self) -> "ProbeRecord":
        return ProbeRecord(self.result, self.last_run, self.last_success, self.duration, self.runs,
                           dict(self.failures), dict(self.skipped), self.last_error)


@dataclass
class ProbeState:
    records: Dict[Tuple[str, str], ProbeRecord] = field(default_factory=dict)  # (target, profile)
    io: Dict[str, List[Tuple[float, int]]] = field(default_factory=dict)  # device -> [(time, bytes read)]
    last_attempt: Dict[str, float] = field(default_factory=dict)  # target -> when it was last tried

    def record(self, target: str, profile: str) -> ProbeRecord:
        return self.records.setdefault((target, profile), ProbeRecord())


def _result_to_json(result: Optional[FioResult]) -> Optional[Dict[str, Any]]:
    if result is None:
        return None
    return {"read_bytes_per_second": result.read_bytes_per_second, "read_iops": result.read_iops,
            "io_bytes": result.io_bytes, "runtime_seconds": result.runtime_seconds,
            "latency_seconds": dict(result.latency_seconds)}


def _result_from_json(data: Any) -> Optional[FioResult]:
    if not isinstance(data, dict):
        return None
    latency = data.get("latency_seconds") or {}
    return FioResult(read_bytes_per_second=float(data["read_bytes_per_second"]), read_iops=float(data["read_iops"]),
                     io_bytes=int(data["io_bytes"]), runtime_seconds=float(data["runtime_seconds"]),
                     latency_seconds=tuple((str(q), float(v)) for q, v in sorted(latency.items())))


def _opt_float(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _counts(value: Any) -> Dict[str, int]:
    if not isinstance(value, dict):
        return {}
    return {str(k): int(v) for k, v in value.items() if isinstance(v, int) and not isinstance(v, bool) and v >= 0}


def to_json(state: ProbeState) -> str:
    probes: Dict[str, Dict[str, Any]] = {}
    for (target, profile), rec in sorted(state.records.items()):
        probes.setdefault(target, {})[profile] = {
            "result": _result_to_json(rec.result), "last_run": rec.last_run, "last_success": rec.last_success,
            "duration": rec.duration, "runs": rec.runs, "failures": rec.failures, "skipped": rec.skipped,
            "last_error": rec.last_error}
    return json.dumps({"version": VERSION, "probes": probes,
                       "io": {dev: [[t, b] for t, b in entries] for dev, entries in sorted(state.io.items())},
                       "last_attempt": state.last_attempt}, indent=1, sort_keys=True) + "\n"


def from_json(text: str) -> ProbeState:
    """Parse a state file; raises ValueError when it is not one."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("version") != VERSION:
        raise ValueError(f"not a version {VERSION} probe state file")
    state = ProbeState()
    try:
        for target, profiles in (data.get("probes") or {}).items():
            for profile, rec in profiles.items():
                state.records[(target, profile)] = ProbeRecord(
                    result=_result_from_json(rec.get("result")), last_run=_opt_float(rec.get("last_run")),
                    last_success=_opt_float(rec.get("last_success")), duration=_opt_float(rec.get("duration")),
                    runs=int(rec.get("runs") or 0), failures=_counts(rec.get("failures")),
                    skipped=_counts(rec.get("skipped")),
                    last_error=rec.get("last_error") if isinstance(rec.get("last_error"), str) else None)
        for device, entries in (data.get("io") or {}).items():
            state.io[device] = [(float(t), int(b)) for t, b in entries]
        for target, when in (data.get("last_attempt") or {}).items():
            if _opt_float(when) is not None:
                state.last_attempt[target] = float(when)
    except (AttributeError, KeyError, TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"malformed probe state ({type(exc).__name__}: {exc})") from None
    return state


def load(path: str) -> ProbeState:
    try:
        with open(path, "rb") as handle:
            data = handle.read(_MAX_STATE_BYTES)
    except FileNotFoundError:
        return ProbeState()
    except OSError as exc:
        log.kv(LOG, logging.WARNING, "cannot read the probe state file, starting empty", path=path, err=exc.strerror)
        return ProbeState()
    try:
        state = from_json(data.decode("utf-8"))
    except ValueError as exc:  # UnicodeDecodeError included
        log.kv(LOG, logging.WARNING, "ignoring a broken probe state file", path=path, err=str(exc))
        return ProbeState()
    log.kv(LOG, logging.INFO, "probe results restored", path=path, probes=len(state.records))
    return state


def foreign(path: str) -> Optional[str]:
    """Why the file at `path` is not storpath's to replace, or None (absent, empty, or a
    probe state file)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{path}: {exc.strerror}"
    if not stat.S_ISREG(info.st_mode):
        return f"{path} is not a regular file: left alone"
    if info.st_size == 0:
        return None
    try:
        with open(path, "rb") as handle:
            from_json(handle.read(_MAX_STATE_BYTES).decode("utf-8"))
    except OSError as exc:
        return f"{path}: {exc.strerror}"
    except (UnicodeDecodeError, ValueError):
        return f"{path} is not a storpath probe state file: left alone (remove it to let storpath keep results)"
    return None


def save(path: str, state: ProbeState) -> Optional[str]:
    """Write the state atomically; returns the reason it could not, or None. A file at
    `path` that is not a probe state file is never replaced."""
    problem = foreign(path)
    if problem:
        return problem
    folder = os.path.dirname(path) or "."
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".probes-", suffix=".tmp", dir=folder)
    except OSError as exc:
        return f"{folder}: {exc.strerror}"
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(to_json(state))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return f"{path}: {exc.strerror}"
    try:
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:
        pass  # the rename is done; a folder that cannot be fsynced is no reason to fail
    return None
