"""Running an external command (nvme-cli, zpool, fio) with a deadline that holds.

A command that touches a device can hang in the kernel (uninterruptible sleep: a pool
stuck in I/O, a drive that stopped answering). Such a process cannot be killed until the
kernel lets go of it, and its pipes stay open as long as it lives, so waiting for its
exit or its output's end would wait forever: `subprocess.run(timeout=...)` does exactly
that after the timeout (it kills, then reads the pipes to their end with no limit).
`run_command` starts the command in its own process group (so the processes it forks go
with it), reads its output as it comes (at most MAX_OUTPUT bytes: past that it is killed),
kills the group at the deadline, waits at most `grace` more, and hands back a process that
is still there as `stuck` instead of waiting for it: the caller decides not to start
another one while it lives.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from typing import Callable, Dict, List, Optional

from storpath.base.records import datarecord

# How long a killed process group gets to go before it is given up on.
GRACE = 1.0
# The most output kept from one command (stdout and stderr together). The largest expected is
# `zpool status -j` of a big pool or a vendor RAID tool's drive list: a few MiB.
MAX_OUTPUT = 64 << 20


@datarecord
class Finished:
    """How a command ended. `returncode` None: it ran past its deadline and was killed."""

    argv: List[str]
    returncode: Optional[int]
    stdout: bytes
    stderr: bytes
    elapsed: float  # seconds from start to exit (or to giving up on it)
    stuck: Optional[subprocess.Popen] = None  # killed but still there (in the kernel): reap it later

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    def first_error_line(self) -> str:
        lines = (self.stderr or self.stdout).decode("utf-8", "replace").strip().splitlines()
        return lines[0] if lines else ""


def kill_group(proc: subprocess.Popen, grace: float = GRACE) -> bool:
    """Stop the process group `proc` leads: SIGTERM, then SIGKILL, waiting at most `grace`
    after each. False when the leader is still there after that (stuck in the kernel)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass
        try:
            proc.wait(grace)
            return True
        except subprocess.TimeoutExpired:
            continue
    return False


def run_command(argv: List[str], timeout: float, env: Optional[Dict[str, str]] = None,
                tick: Optional[Callable[[float], None]] = None,
                started: Optional[Callable[[subprocess.Popen], None]] = None,
                grace: float = GRACE, max_output: int = MAX_OUTPUT) -> Finished:
    """Run `argv` with stdin closed and its output captured, for at most `timeout` seconds
    (plus `grace` twice to kill it). Raises OSError (FileNotFoundError, PermissionError)
    when it cannot be started. `tick(elapsed)` is called about four times a second while
    it runs; `started(proc)` once it runs (to stop it on shutdown). A command that writes
    more than `max_output` bytes (stdout and stderr together) is killed there: it ends as
    a failure whose error line says so, and nothing past the bound is kept in memory."""
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            start_new_session=True)
    if started:
        started(proc)
    deadline = start + timeout
    read: Dict[int, List[bytes]] = {proc.stdout.fileno(): [], proc.stderr.fileno(): []}
    total = 0
    exited_at: Optional[float] = None  # when the command was seen gone with its pipes still open
    with selectors.DefaultSelector() as selector:
        for pipe in (proc.stdout, proc.stderr):
            os.set_blocking(pipe.fileno(), False)
            selector.register(pipe.fileno(), selectors.EVENT_READ)
        try:
            while selector.get_map():
                now = time.monotonic()
                if now >= deadline:
                    gone = kill_group(proc, grace)
                    return _finished(argv, None, read, start, stuck=None if gone else proc)
                if exited_at is not None and now >= exited_at + grace:
                    break  # forked processes still hold the pipes after their group was stopped
                # At most a quarter second: the command's exit must be seen while something it
                # forked keeps the pipes open and quiet.
                wait = min(deadline, exited_at + grace if exited_at is not None else deadline, now + 0.25) - now
                for key, _ in selector.select(max(0.0, wait)):
                    try:
                        data = os.read(key.fd, 65536)
                    except BlockingIOError:
                        continue
                    if not data:
                        selector.unregister(key.fd)
                        continue
                    read[key.fd].append(data)
                    total += len(data)
                if total > max_output:
                    kill_group(proc, grace)
                    read[proc.stderr.fileno()] = [f"output over {max_output} bytes: stopped".encode()]
                    read[proc.stdout.fileno()] = []
                    return _finished(argv, proc.returncode if proc.returncode is not None else -9, read, start)
                if exited_at is None and selector.get_map() and proc.poll() is not None:
                    # The command is gone but processes it forked still hold the pipes: stop them.
                    kill_group(proc, grace)
                    exited_at = time.monotonic()
                if tick:
                    tick(time.monotonic() - start)
        finally:
            proc.stdout.close()
            proc.stderr.close()
    try:
        proc.wait(max(0.01, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        gone = kill_group(proc, grace)
        return _finished(argv, None, read, start, stuck=None if gone else proc)
    if proc.returncode < 0 and exited_at is None:
        # Killed by a signal: what it forked must not carry on without it.
        kill_group(proc, grace)
    return _finished(argv, proc.returncode, read, start)


def _finished(argv: List[str], returncode: Optional[int], read: Dict[int, List[bytes]], start: float,
              stuck: Optional[subprocess.Popen] = None) -> Finished:
    out, err = (b"".join(chunks) for chunks in read.values())
    return Finished(argv, returncode, out, err, time.monotonic() - start, stuck=stuck)


