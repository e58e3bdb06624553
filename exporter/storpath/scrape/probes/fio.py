"""fio, out of process: the command line, a run under a hard timeout, and its JSON.

fio's JSON (--output-format=json, fio 3.x): `jobs[0].read` holds `io_bytes`,
`bw_bytes` (bytes per second), `iops`, `runtime` (ms) and `clat_ns.percentile` with
keys such as "50.000000", "99.000000", "99.900000" (completion latency in ns).
`jobs[0].error` is the job's errno (0 when it ran). fio prints its own error lines
("fio: ...") on stdout before the JSON, so the JSON starts at the first line that is "{".
"""

from __future__ import annotations

import math
import os
import shutil
import signal
import subprocess
from typing import Any, Callable, Dict, List, Optional, Tuple

from storpath.base.records import datarecord
from storpath.base import boundedjson
from storpath.base.subprocesses import kill_group, run_command  # noqa: F401 (kill_group: the engine stops runs)
from storpath.scrape.probes.profiles import Profile

# fio's io_size when no budget limits it: runtime ends the probe long before this.
_UNLIMITED = 1 << 50
_PRIO_CLASS = {"idle": "3", "best-effort": "2"}
QUANTILES = (("0.5", "50.000000"), ("0.99", "99.000000"), ("0.999", "99.900000"))


@datarecord(frozen=True)
class FioResult:
    """What one fio run measured: read bandwidth and IOPS, bytes read and written, runtime and latency."""

    read_bytes_per_second: float
    read_iops: float
    io_bytes: int  # bytes the probe read
    runtime_seconds: float  # fio's own measure of the run
    latency_seconds: Tuple[Tuple[str, float], ...]  # (quantile, seconds) for 0.5, 0.99, 0.999 when fio gave them
    written_bytes: int = 0  # always 0 with --readonly; checked all the same


class FioError(Exception):
    """A probe that did not give a result. `reason` is the bounded label value."""

    def __init__(self, reason: str, message: str, io_bytes: Optional[int] = None):
        super().__init__(message)
        self.reason = reason
        self.io_bytes = io_bytes


def escape_filename(path: str) -> str:
    """A path as fio's `filename` option reads it: ':' separates several files there
    (/dev/disk/by-path/pci-0000:01:00.0-nvme-1 would be three), and fio reads '\\:' as a
    ':' that belongs to the name (fio's get_next_name: only a backslash right before a
    ':' is taken away, so every other backslash stays as it is)."""
    return path.replace(":", "\\:")


def build_command(fio: str, path: str, profile: Profile, runtime: float, io_limit: Optional[int],
                  io_priority: str = "idle", size: Optional[int] = None) -> List[str]:
    """The fio argv. The profile's options come first and storpath's safety options last,
    so nothing in a profile can override them (profiles are checked at load as well).
    `io_limit` is what the whole run may read: fio's io_size counts per job, so each of the
    profile's numjobs jobs gets its share."""
    options = dict(profile.options)
    # --thread: jobs as threads of one process. Forked job processes call setsid() and
    # would escape the process group a timeout kills.
    cmd = [fio, "--output-format=json", "--readonly", "--thread", f"--name={profile.name}",
           f"--filename={escape_filename(path)}"]
    if "ioengine" not in options:
        cmd.append("--ioengine=libaio")
    cmd.extend(f"--{key}={value}" for key, value in profile.options)
    if size is not None:
        cmd.append(f"--size={size}")
    # No time_based: the run ends at runtime or once io_size bytes are read, whichever
    # comes first, and io_size larger than the file makes fio wrap around.
    cmd.extend([
        "--direct=1",
        f"--runtime={max(1, int(round(runtime)))}s",
        f"--io_size={io_limit // profile.jobs if io_limit is not None else _UNLIMITED}",
        f"--prioclass={_PRIO_CLASS[io_priority]}",
        "--prio=7" if io_priority == "best-effort" else "--prio=0",
        "--group_reporting",
    ])
    return cmd


def _json_start(text: str) -> int:
    if text.startswith("{"):
        return 0
    pos = text.find("\n{")
    return pos + 1 if pos >= 0 else -1


def parse_output(text: str) -> FioResult:
    """fio's JSON output -> FioResult; raises FioError('bad_output' or 'fio_error')."""
    start = _json_start(text)
    if start < 0:
        raise FioError("bad_output", f"no JSON in fio's output: {text.strip()[:200]!r}")
    try:
        data = boundedjson.loads(text[start:])
    except ValueError as exc:
        raise FioError("bad_output", f"fio's JSON does not parse: {exc}") from None
    try:
        job: Dict[str, Any] = data["jobs"][0]
        read = job["read"]
        error = int(job.get("error", 0))
        io_bytes = int(read["io_bytes"])
        written = int(job.get("write", {}).get("io_bytes", 0))
        if error:
            raise FioError("fio_error", f"fio job failed: {os.strerror(error)} (errno {error})", io_bytes)
        bw = float(read["bw_bytes"])
        iops = float(read["iops"])
        runtime = float(read["runtime"]) / 1000.0
        percentiles = read.get("clat_ns", {}).get("percentile", {})
    except FioError:
        raise
    except (KeyError, IndexError, TypeError, ValueError, OverflowError) as exc:
        raise FioError("bad_output", f"fio's JSON lacks the read results ({type(exc).__name__}: {exc})") from None
    if not all(math.isfinite(v) and v >= 0 for v in (bw, iops, runtime)) or written < 0:
        raise FioError("bad_output", f"fio's JSON has impossible read results (bw_bytes {bw}, iops {iops}, "
                                     f"runtime {runtime} s, written {written} bytes)")
    if io_bytes <= 0 or runtime <= 0:
        raise FioError("fio_error", "fio read nothing", io_bytes)
    latency = []
    for quantile, key in QUANTILES:
        if key in percentiles:
            try:
                seconds = float(percentiles[key]) / 1e9
            except (TypeError, ValueError):
                continue
            if math.isfinite(seconds) and seconds >= 0:
                latency.append((quantile, seconds))
    return FioResult(read_bytes_per_second=bw, read_iops=iops, io_bytes=io_bytes, runtime_seconds=runtime,
                     latency_seconds=tuple(latency), written_bytes=written)


def find_fio(name: str) -> Optional[str]:
    if os.sep in name:
        return name if os.access(name, os.X_OK) and os.path.isfile(name) else None
    return shutil.which(name)


def run(cmd: List[str], timeout: float, tick: Optional[Callable[[float], None]] = None,
        started: Optional[Callable[[subprocess.Popen], None]] = None) -> Tuple[FioResult, float]:
    """Run fio (storpath.base.subprocesses.run_command: its process group is killed at the deadline
    and never waited for beyond it); returns (result, wall seconds). Raises FioError with
    reason fio_missing, timeout (hung: the process group was killed), crashed (killed by
    a signal), fio_error (non-zero exit) or bad_output. `tick(elapsed)` is called about
    four times a second while fio runs; `started(proc)` once it runs (to stop it on
    shutdown)."""
    try:
        done = run_command(cmd, timeout, tick=tick or (lambda _elapsed: None), started=started, grace=2.0)
    except FileNotFoundError:
        raise FioError("fio_missing", f"fio not found: {cmd[0]}") from None
    except PermissionError as exc:
        raise FioError("fio_missing", f"cannot run {cmd[0]}: {exc.strerror}") from None
    if done.timed_out:
        raise FioError("timeout", f"fio still running after {timeout:g}s: killed")
    out, err, elapsed = done.stdout, done.stderr, done.elapsed
    text = out.decode("utf-8", "replace")
    stderr = err.decode("utf-8", "replace").strip()
    if done.returncode < 0:
        try:
            name = signal.Signals(-done.returncode).name
        except ValueError:
            name = f"signal {-done.returncode}"
        raise FioError("crashed", f"fio was killed by {name} after {elapsed:.1f}s")
    if done.returncode != 0:
        detail = (stderr or text.split("\n{", 1)[0]).strip().splitlines()
        message = f"fio exited with status {done.returncode}: {detail[-1] if detail else 'no message'}"
        try:
            result = parse_output(text)
        except FioError as exc:
            raise FioError("fio_error", message, exc.io_bytes) from None
        raise FioError("fio_error", message, result.io_bytes)
    return parse_output(text), elapsed
