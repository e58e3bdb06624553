"""One probe end to end, and the bookkeeping of all of them.

A probe of (target, profile):
1. resolves the target (block device node, or regular file) and the devices its reads reach;
2. takes every one of those devices' locks (in this process, and a lock file beside the
   state file so `storpath probe` and `storpath serve` never probe one device at once);
3. is skipped (`budget`) when the device has read its I/O budget for the last hour, and
   (`busy`) when /proc/diskstats shows the device busy above the threshold;
4. creates a file target once (then reuses it);
5. runs fio (read-only, direct I/O, lowest I/O priority, capped at the budget left)
   under a hard timeout;
6. records the result or the failure reason, charges the bytes read to the budget, and
   saves the state file.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import random
import re
import subprocess
import threading
import time
from typing import Callable, Dict, Iterator, List, Optional, Tuple

from storpath.base.records import datarecord
from storpath.base import log
from storpath.analysis.throughput import PathExpectation, expected_read_bandwidth
from storpath.scrape.probes import devices, fio, state as state_file
from storpath.scrape.probes.config import ProbesConfig, Target, default_state_file
from storpath.base.roots import Roots

LOG = log.get("probes")
HOUR = 3600.0
# A probe that could read less than this before its budget runs out is not worth running.
MIN_PROBE_BYTES = 1 << 20


@datarecord(frozen=True)
class Outcome:
    """How one probe of (target, profile) ended: ok, failed or skipped, with fio's result or the reason."""

    target: str
    profile: str
    status: str  # ok, failed, skipped
    reason: Optional[str] = None  # failure or skip reason (a label value)
    message: Optional[str] = None
    result: Optional[fio.FioResult] = None
    started: float = 0.0
    duration: Optional[float] = None
    device: Optional[str] = None


# ---- one probe per device at a time ---------------------------------------------------

_LOCKS: Dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def _thread_lock(key: str) -> threading.Lock:
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(key, threading.Lock())


def open_lock_file(lock_dir: str, key: str) -> int:
    """A read-only fd of the device's lock file (flock needs no more), the folder and file
    created when absent; state.Unsafe when either is a link or not storpath's (root's
    `storpath probe` must not create or open a file a planted link points at)."""
    owners = state_file.trusted_owners(os.path.dirname(lock_dir) or ".")
    dir_fd = state_file.open_folder(lock_dir, owners)
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", key) + ".lock"
    try:
        # 0644: the exporter's user and root both take the lock, whichever created the file.
        return state_file.open_in(dir_fd, name, os.path.join(lock_dir, name), owners, os.O_RDONLY | os.O_CREAT,
                                  0o644)
    finally:
        os.close(dir_fd)


@contextlib.contextmanager
def hold_devices(keys: List[str], wait: float, lock_dir: Optional[str]) -> Iterator[bool]:
    """Hold every device's lock (sorted, so two probes never wait on each other), or
    yield False when one stays taken for `wait` seconds. Raises state.Unsafe when a lock
    file or its folder is one storpath must not use: the probe is not run."""
    deadline = time.monotonic() + wait
    held: List[threading.Lock] = []
    files: List[int] = []
    ok = True
    try:
        for key in sorted(set(keys)):
            lock = _thread_lock(key)
            if not lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
                ok = False
                break
            held.append(lock)
            if lock_dir is None:
                continue
            try:
                fd = open_lock_file(lock_dir, key)
            except OSError as exc:
                log.once(LOG, logging.INFO, ("lockdir", lock_dir), "probe lock files unavailable: only probes of "
                         "this process are kept apart", dir=lock_dir, err=exc.strerror)
                continue
            files.append(fd)
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        ok = False
                        break
                    time.sleep(0.1)
            if not ok:
                break
        yield ok
    finally:
        for fd in files:
            os.close(fd)  # closing drops the flock
        for lock in held:
            lock.release()


class ProbeEngine:
    _DEFAULT = object()

    def __init__(self, config: ProbesConfig, roots: Roots, persist: bool = True, lock_dir=_DEFAULT,
                 clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep):
        """`persist`: keep results in the state file (the exporter). A one-off probe passes
        False: it still reads the file for the budget spent, but leaves the file to the
        exporter. `lock_dir`: where the per-device lock files go (None: this process only)."""
        self.config = config
        self.roots = roots
        self.clock = clock
        self.sleep = sleep
        self.state_path = config.state_file or default_state_file()
        self.persist = persist
        self.lock_dir = os.path.join(os.path.dirname(self.state_path) or ".", "locks") \
            if lock_dir is ProbeEngine._DEFAULT else lock_dir
        self.state = state_file.load(self.state_path)
        self._lock = threading.Lock()
        self._take_future_as_now()
        self.expectations: Dict[str, PathExpectation] = {}  # target name -> what its path allows
        self.md_arrays: Dict[str, devices.MdShape] = {}  # the last snapshot's md arrays: the members a probe locks
        self.target_devices: Dict[str, Optional[str]] = {}  # target name -> its disk or array, once looked up
        self._running: Dict[int, subprocess.Popen] = {}
        self._closed = False

    # ---- scheduling ---------------------------------------------------------------
    def _take_future_as_now(self) -> None:
        """Times remembered from ahead of the clock are taken as now (the clock was set back
        since they were written): a target then waits one interval at most, not until the
        clock catches up, and says so once per correction."""
        now = self.clock()
        with self._lock:
            ahead = state_file.take_future_as_now(self.state, now)
        if ahead is not None:
            log.kv(LOG, logging.WARNING, "probe times remembered from ahead of the clock are taken as now (the "
                   "clock was set back)", path=self.state_path, ahead_seconds=round(ahead, 1))

    def initial_delay(self, target: Target, rng: random.Random = random.Random()) -> float:
        """After a restart, a target waits out its interval from the last attempt (no
        probe storm when a fleet restarts), plus jitter; one interval at most."""
        last = self.state.last_attempt.get(target.name)
        now = self.clock()
        base = 0.0 if last is None else max(0.0, min(last, now) + self.config.interval - now)
        return base + (rng.uniform(0, self.config.jitter) if self.config.jitter > 0 else 0.0)

    def run_target(self, target: Target) -> List[Outcome]:
        outcomes = []
        for profile in target.profiles:
            if self._closed:
                break
            outcomes.append(self.run_probe(target, profile))
        return outcomes

    # ---- expectations ---------------------------------------------------------------
    def expectation_device(self, target: Target) -> Optional[str]:
        resolved = devices.resolve(self.roots, target.kind, target.path, target.device_name)
        if resolved.disk:
            return resolved.disk
        if target.kind == "device":  # not openable here (e.g. a replayed fixture machine): go by its name
            return devices.whole_disk(self.roots, os.path.basename(target.path))
        return None

    def refresh_expectations(self, pci_devices, links, block_devices, md_arrays) -> None:
        """What each target's PCIe path allows, from a snapshot (storpath.scrape.snapshot): its PCI
        devices, their links as the scrape judged them (pcie.analyse with the snapshot's
        expectations, so a guest's links are judged as the scrape judges them), block
        devices and md arrays."""
        pci = {d.address: d for d in pci_devices}
        block = {d.name: d for d in block_devices}
        md = devices.md_shapes(md_arrays)
        found: Dict[str, PathExpectation] = {}
        names: Dict[str, Optional[str]] = {}
        for target in self.config.targets:
            name = self.expectation_device(target)
            names[target.name] = name
            if name is None:
                log.once(LOG, logging.INFO, ("noexpect", target.name), "no block device behind the probe target: "
                         "no path expectation (set expected_read_bytes_per_second)", target=target.name)
                continue
            expectation = expected_read_bandwidth(name, block, pci, links, md)
            if expectation.bytes_per_second is None:
                log.once(LOG, logging.INFO, ("noexpect", target.name, expectation.reason),
                         "no path expectation for probe target", target=target.name, reason=expectation.reason)
            found[target.name] = expectation
        with self._lock:
            self.expectations = found
            self.target_devices = names
            self.md_arrays = md

    def expected(self, target: Target, profile: str) -> Tuple[Optional[float], Optional[str]]:
        """(bytes per second, source): the configured value, else what the path allows."""
        configured = self.config.expected_for(target, profile)
        if configured is not None:
            return configured, "configured"
        prof = self.config.profiles.get(profile)
        path = self.expectations.get(target.name)
        if prof is not None and prof.path_expectation and path is not None and path.bytes_per_second is not None:
            return path.bytes_per_second, "path"
        return None, None

    # ---- state ------------------------------------------------------------------------
    def snapshot(self) -> Dict[Tuple[str, str], state_file.ProbeRecord]:
        with self._lock:
            return {key: rec.copy() for key, rec in self.state.records.items()}

    def budget_used(self, key: str, now: float) -> int:
        with self._lock:
            entries = [(t, b) for t, b in self.state.io.get(key, []) if now - t < HOUR]
            self.state.io[key] = entries
            return sum(b for _, b in entries)

    def _charge(self, key: str, when: float, io_bytes: int) -> None:
        if io_bytes > 0:
            with self._lock:
                self.state.io.setdefault(key, []).append((when, io_bytes))

    def _save(self) -> None:
        if not self.persist:
            return
        with self._lock:
            snapshot = state_file.ProbeState(records={k: r.copy() for k, r in self.state.records.items()},
                                             io={k: list(v) for k, v in self.state.io.items()},
                                             last_attempt=dict(self.state.last_attempt))
        problem = state_file.save(self.state_path, snapshot)
        if problem:
            log.once(LOG, logging.WARNING, ("save", self.state_path), "cannot save probe results: they will not "
                     "survive a restart", path=self.state_path, err=problem)

    def _finish(self, outcome: Outcome) -> Outcome:
        with self._lock:
            rec = self.state.record(outcome.target, outcome.profile)
            if outcome.status == "skipped":
                rec.skipped[outcome.reason] = rec.skipped.get(outcome.reason, 0) + 1
            else:
                rec.runs += 1
                rec.last_run = outcome.started
                rec.duration = outcome.duration
                if outcome.status == "ok":
                    rec.result = outcome.result
                    rec.last_success = outcome.started
                    rec.last_error = None
                else:
                    rec.failures[outcome.reason] = rec.failures.get(outcome.reason, 0) + 1
                    rec.last_error = outcome.message
        fields = dict(target=outcome.target, profile=outcome.profile)
        if outcome.status == "ok":
            result = outcome.result
            log.kv(LOG, logging.INFO, "probe done", **fields, read_bytes_per_second=round(result.read_bytes_per_second),
                   read_iops=round(result.read_iops), seconds=round(outcome.duration or 0, 2))
        elif outcome.status == "failed":
            log.kv(LOG, logging.WARNING, "probe failed", **fields, reason=outcome.reason, err=outcome.message)
        else:
            log.kv(LOG, logging.INFO, "probe skipped", **fields, reason=outcome.reason, detail=outcome.message)
        self._save()
        return outcome

    # ---- one probe ---------------------------------------------------------------------
    def _lock_keys(self, target: Target, resolved: devices.Resolved) -> List[str]:
        if resolved.device is None:
            return [f"file:{target.path}"]
        keys = {resolved.device}
        if resolved.disk:
            keys.add(resolved.disk)
            with self._lock:
                md = self.md_arrays.get(resolved.disk)
            if md is not None:
                keys.update(md.members)
        return sorted(keys)

    def _track(self, proc: subprocess.Popen) -> None:
        with self._lock:
            self._running[proc.pid] = proc
        if self._closed:
            fio.kill_group(proc)

    def run_probe(self, target: Target, profile_name: str,
                  tick: Optional[Callable[[float], None]] = None) -> Outcome:
        cfg = self.config
        profile = cfg.profiles[profile_name]
        self._take_future_as_now()  # the clock may have been set back while the exporter ran
        started = self.clock()
        with self._lock:
            self.state.last_attempt[target.name] = started

        def outcome(status: str, reason: Optional[str] = None, message: Optional[str] = None,
                    result: Optional[fio.FioResult] = None, duration: Optional[float] = None,
                    device: Optional[str] = None) -> Outcome:
            return self._finish(Outcome(target.name, profile_name, status, reason, message, result, started,
                                        duration, device))

        resolved = devices.resolve(self.roots, target.kind, target.path, target.device_name)
        if resolved.problem:
            return outcome("failed", "target_unusable", resolved.problem, duration=0.0)
        keys = self._lock_keys(target, resolved)
        budget_key = resolved.disk or resolved.device or f"file:{target.path}"
        with contextlib.ExitStack() as stack:
            try:
                ok = stack.enter_context(hold_devices(keys, cfg.hard_timeout + cfg.busy_sample + 5.0, self.lock_dir))
            except state_file.Unsafe as exc:
                return outcome("failed", "target_unusable", f"probe lock refused: {exc}", duration=0.0,
                               device=resolved.device)
            if not ok:
                return outcome("skipped", "concurrent_probe", "another probe of the device did not finish in time",
                               device=resolved.device)
            used = self.budget_used(budget_key, self.clock())
            left = cfg.io_budget_per_hour - used
            if left < MIN_PROBE_BYTES:
                return outcome("skipped", "budget", f"{budget_key} read {used} of its {cfg.io_budget_per_hour} "
                               f"bytes per hour", device=resolved.device)
            if cfg.busy_threshold is not None and resolved.device is not None:
                ratios = devices.sample_busy(self.roots, [k for k in keys if not k.startswith("file:")],
                                             cfg.busy_sample, self.sleep)
                busy = {k: v for k, v in ratios.items() if v is not None and v > cfg.busy_threshold}
                for name, ratio in ratios.items():
                    if ratio is None:
                        log.once(LOG, logging.INFO, ("nostats", name), "device not in diskstats: busy check "
                                 "skipped for it", device=name)
                if busy:
                    detail = ", ".join(f"{k} busy {v:.0%}" for k, v in sorted(busy.items()))
                    return outcome("skipped", "busy", f"{detail} (threshold {cfg.busy_threshold:.0%})",
                                   device=resolved.device)
            size = None
            if target.kind == "file":
                size, problem = devices.ensure_file(resolved.fio_path, target.file_size or cfg.file_size)
                if problem:
                    return outcome("failed", "target_unusable", problem, duration=0.0, device=resolved.device)
            binary = fio.find_fio(cfg.fio)
            if binary is None:
                return outcome("failed", "fio_missing", f"fio not found ({cfg.fio}): install fio",
                               duration=0.0, device=resolved.device)
            cmd = fio.build_command(binary, resolved.fio_path, profile, cfg.runtime, left, cfg.io_priority, size)
            began = time.monotonic()
            try:
                result, elapsed = fio.run(cmd, cfg.hard_timeout, tick, started=self._track)
            except fio.FioError as exc:
                elapsed = time.monotonic() - began
                # Unknown how much a hung or killed fio read: charge all it was allowed.
                charged = exc.io_bytes if exc.io_bytes is not None else (
                    left if exc.reason in ("timeout", "crashed") else 0)
                self._charge(budget_key, started, charged)
                if self._closed:
                    # Killed by the exporter's shutdown or reload, not a fault of the device: the
                    # bytes it read stay charged (and saved), no failure is counted.
                    log.kv(LOG, logging.INFO, "probe interrupted by shutdown", target=target.name,
                           profile=profile_name)
                    self._save()
                    return Outcome(target.name, profile_name, "skipped", "shutdown", str(exc), None, started,
                                   elapsed, resolved.device)
                return outcome("failed", exc.reason, str(exc), duration=elapsed, device=resolved.device)
            finally:
                with self._lock:
                    self._running = {pid: p for pid, p in self._running.items() if p.poll() is None}
            self._charge(budget_key, started, result.io_bytes)
            if result.written_bytes:
                return outcome("failed", "fio_error", f"fio reports {result.written_bytes} bytes written",
                               duration=elapsed, device=resolved.device)
            return outcome("ok", result=result, duration=elapsed, device=resolved.device)

    def close(self) -> None:
        """Stop running probes (exporter shutdown)."""
        self._closed = True
        with self._lock:
            running = list(self._running.values())
        for proc in running:
            if proc.poll() is None:
                fio.kill_group(proc)
