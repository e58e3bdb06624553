"""Running an external command (nvme-cli, zpool, fio) with a deadline that holds.

A command that touches a device can hang in the kernel (uninterruptible sleep: a pool
stuck in I/O, a drive that stopped answering). Such a process cannot be killed until the
kernel lets go of it, and its pipes stay open as long as it lives, so waiting for its
exit or its output's end would wait forever: `subprocess.run(timeout=...)` does exactly
that after the timeout (it kills, then reads the pipes to their end with no limit).
`run_command` starts the command in its own process group (so the processes it forks go
with it), kills the group at the deadline, waits at most `grace` more, and hands back a
process that is still there as `stuck` instead of waiting for it: the caller decides not
to start another one while it lives.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

# How long a killed process group gets to go before it is given up on.
GRACE = 1.0


@dataclass
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
                grace: float = GRACE) -> Finished:
    """Run `argv` with stdin closed and its output captured, for at most `timeout` seconds
    (plus `grace` twice to kill it). Raises OSError (FileNotFoundError, PermissionError)
    when it cannot be started. `tick(elapsed)` is called about four times a second while
    it runs; `started(proc)` once it runs (to stop it on shutdown)."""
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            start_new_session=True)
    if started:
        started(proc)
    deadline = start + timeout
    while True:
        step = deadline - time.monotonic()
        if tick:
            step = min(0.25, step)
        try:
            out, err = proc.communicate(timeout=max(0.01, step))
        except subprocess.TimeoutExpired:
            pass
        else:
            if proc.returncode < 0:
                # Killed by a signal: what it forked must not carry on without it.
                kill_group(proc, grace)
            return Finished(argv, proc.returncode, out, err, time.monotonic() - start)
        if proc.poll() is not None:
            # The command is gone but processes it forked still hold the pipes: stop them.
            kill_group(proc, grace)
            out, err = _drain(proc, grace)
            return Finished(argv, proc.returncode, out, err, time.monotonic() - start)
        if time.monotonic() >= deadline:
            gone = kill_group(proc, grace)
            out, err = _drain(proc, grace)
            return Finished(argv, None, out, err, time.monotonic() - start, stuck=None if gone else proc)
        if tick:
            tick(time.monotonic() - start)


def _drain(proc: subprocess.Popen, grace: float):
    """What is left in the pipes, waiting at most `grace` for their end."""
    try:
        return proc.communicate(timeout=grace)
    except subprocess.TimeoutExpired:
        return b"", b""  # a process that holds them cannot be waited for
