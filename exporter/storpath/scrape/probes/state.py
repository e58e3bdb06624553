"""What the probes remember: the latest result, counters and timestamps of every
(target, profile), the bytes read per device in the last hour (the budget), and when
each target was last tried. Kept in a small JSON file so that a restart does not blank
the dashboards, reset a slow-probe alert, or forget the budget already spent.

The file is replaced atomically (storpath.base.atomicfile: a temporary file in the same
folder, fsync, rename), so a crash leaves the old state or the new one, never half of
either. A file that cannot be read or parsed is logged and ignored: the exporter starts
empty. It is never replaced either: a file there that is not a storpath state file (or is no regular
file) is someone else's, and storpath keeps its results in memory only.

The state folder is writable by the exporter's user while root may run `storpath probe`
on it, so nothing planted there is followed: the state file, its temporary file and the
probe lock files are opened relative to their folder with O_NOFOLLOW, and used only when
they are regular files owned by this process's user, root or the state folder's owner.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import stat
from dataclasses import field
from typing import Any, Dict, List, Optional, Set, Tuple

from storpath.base.records import datarecord
from storpath.base import atomicfile, boundedjson, log
from storpath.scrape.probes.fio import FioResult

LOG = log.get("probes")
VERSION = 1
# A state file holds a few records per target: anything much larger is not one.
_MAX_STATE_BYTES = 64 << 20


@datarecord
class ProbeRecord:
    """What is remembered of one (target, profile): the latest result, its times, and run, failure and skip counts."""

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


@datarecord
class ProbeState:
    """What the probes remember: each (target, profile)'s record, the bytes read per device, each target's last try."""

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
        data = boundedjson.loads(text, max_chars=_MAX_STATE_BYTES)
    except ValueError as exc:
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


def take_future_as_now(state: ProbeState, now: float) -> Optional[float]:
    """Set every time in `state` that lies after `now` to `now`; returns how far the
    latest of them lay ahead (seconds), or None when none did.

    A time ahead of the clock was written while the clock ran ahead (and was then set
    back, by NTP say): kept as it is, the target would wait until then to be tried again,
    its reads would hold the budget that long, and its results would never look old."""
    ahead = 0.0

    def held(when: Optional[float]) -> Optional[float]:
        nonlocal ahead
        if when is None or not when > now:
            return when
        ahead = max(ahead, when - now)
        return now

    for target, when in list(state.last_attempt.items()):
        state.last_attempt[target] = held(when)
    for rec in state.records.values():
        rec.last_run = held(rec.last_run)
        rec.last_success = held(rec.last_success)
    for device, entries in state.io.items():
        state.io[device] = [(held(t), b) for t, b in entries]
    return ahead if ahead > 0 else None


class Unsafe(Exception):
    """A file or folder storpath will not use: a symbolic link, not a regular file or
    folder, or someone else's."""


def trusted_owners(folder: str) -> Set[int]:
    """Who may own the files storpath uses in `folder`: this process's user, root, and the
    folder's owner (the exporter's user, whose files root's `storpath probe` shares)."""
    owners = {os.geteuid(), 0}
    try:
        owners.add(os.stat(folder).st_uid)
    except OSError:
        pass
    return owners


def _check(fd: int, shown: str, owners: Set[int], regular: bool = True) -> None:
    info = os.fstat(fd)
    if regular and not stat.S_ISREG(info.st_mode):
        raise Unsafe(f"{shown} is not a regular file: left alone")
    if regular and info.st_nlink != 1:
        raise Unsafe(f"{shown} has other hard links: left alone")
    if info.st_uid not in owners:
        raise Unsafe(f"{shown} is owned by uid {info.st_uid}, not by this user, root or the state folder's "
                     f"owner: left alone")


def _unsafe_open(exc: OSError, shown: str, what: str) -> Optional[Unsafe]:
    """The Unsafe an O_NOFOLLOW open failed with, or None for another error."""
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        return Unsafe(f"{shown} is a symbolic link or otherwise not a {what}: left alone")
    return None


def open_in(dir_fd: int, name: str, shown: str, owners: Set[int], flags: int, mode: int = 0o644) -> int:
    """An fd of the regular file `name` in the folder `dir_fd`, never through a symbolic
    link, never blocking on a FIFO; Unsafe when it is not a regular file of `owners`."""
    try:
        fd = os.open(name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode, dir_fd=dir_fd)
    except OSError as exc:
        raise _unsafe_open(exc, shown, "regular file") or exc
    try:
        _check(fd, shown, owners)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_folder(path: str, owners: Set[int], follow: bool = False) -> int:
    """An fd of the folder `path`, created when absent (parents too); Unsafe when it is a
    symbolic link (unless `follow`: a folder the administrator configured, such as
    systemd's StateDirectory, may be one) or someone else's."""
    os.makedirs(os.path.dirname(path) or ".", mode=0o755, exist_ok=True)
    try:
        os.mkdir(path, 0o755)  # not makedirs: that follows a link planted at `path`
    except FileExistsError:
        pass
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise _unsafe_open(exc, path, "folder") or exc
    try:
        _check(fd, path, owners, regular=False)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read(dir_fd: int, name: str, shown: str, owners: Set[int]) -> Optional[bytes]:
    """The start of the state file, or None when there is none."""
    try:
        fd = open_in(dir_fd, name, shown, owners, os.O_RDONLY)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as handle:
        return handle.read(_MAX_STATE_BYTES)


def _read_path(path: str) -> Optional[bytes]:
    folder = os.path.dirname(path) or "."
    dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return _read(dir_fd, os.path.basename(path), path, trusted_owners(folder))
    finally:
        os.close(dir_fd)


def load(path: str) -> ProbeState:
    try:
        data = _read_path(path)
    except FileNotFoundError:
        return ProbeState()
    except Unsafe as exc:
        log.kv(LOG, logging.WARNING, "not reading the probe state file, starting empty", path=path, err=str(exc))
        return ProbeState()
    except OSError as exc:
        log.kv(LOG, logging.WARNING, "cannot read the probe state file, starting empty", path=path, err=exc.strerror)
        return ProbeState()
    if data is None:
        return ProbeState()
    try:
        state = from_json(data.decode("utf-8"))
    except ValueError as exc:  # UnicodeDecodeError included
        log.kv(LOG, logging.WARNING, "ignoring a broken probe state file", path=path, err=str(exc))
        return ProbeState()
    log.kv(LOG, logging.INFO, "probe results restored", path=path, probes=len(state.records))
    return state


def _foreign(dir_fd: int, name: str, shown: str, owners: Set[int]) -> Optional[str]:
    """Why the file `name` is not storpath's to replace, or None (absent, empty, or a
    probe state file)."""
    try:
        data = _read(dir_fd, name, shown, owners)
    except Unsafe as exc:
        return str(exc)
    except OSError as exc:
        return f"{shown}: {exc.strerror}"
    if not data:
        return None
    try:
        from_json(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return f"{shown} is not a storpath probe state file: left alone (remove it to let storpath keep results)"
    return None


def save(path: str, state: ProbeState) -> Optional[str]:
    """Write the state atomically; returns the reason it could not, or None. A file at
    `path` that is not a probe state file is never replaced. Every step works in the
    folder's fd: a link planted at the file's name or the temporary's is never followed."""
    folder = os.path.dirname(path) or "."
    name = os.path.basename(path)
    try:
        dir_fd = open_folder(folder, trusted_owners(folder), follow=True)
    except (OSError, Unsafe) as exc:
        return f"{folder}: {getattr(exc, 'strerror', None) or exc}"
    try:
        problem = _foreign(dir_fd, name, path, trusted_owners(folder))
        if problem:
            return problem
        return _replace(dir_fd, name, path, to_json(state).encode("utf-8"))
    finally:
        os.close(dir_fd)


def _replace(dir_fd: int, name: str, shown: str, data: bytes) -> Optional[str]:
    try:
        atomicfile.replace_file(name, data, mode=0o600, dir_fd=dir_fd)
    except OSError as exc:
        return f"{shown}: {exc.strerror or exc}"
    return None
