"""What `storpath serve` sets up for its own process: the descriptor limit, one malloc heap,
and signals turned into events its main loop handles.

Signals: a Python signal handler runs in the main thread between two bytecodes, wherever
that thread is, and a second signal can run the handler again inside the first. A handler
that takes a lock (threading.Event.set does) then waits on itself for ever, and one that runs
Python code nests until RecursionError; a burst of SIGHUPs did both. So the handler here is a
C function that only records the signal (dict.__setitem__: no Python frame, no lock, nothing
to nest in), and `signal.set_wakeup_fd` writes each signal's number to a pipe the main loop
waits on. Reloading and stopping happen in that loop, never in a handler. No signal is
blocked with pthread_sigmask: a mask would be inherited by every child (fio, nvme, zpool).
"""

from __future__ import annotations

import ctypes
import logging
import os
import resource
import select
import signal
from typing import Dict, Optional, Set, Tuple

from storpath.base import log

LOG = log.get("serve")

STOP = (signal.SIGTERM, signal.SIGINT)
RELOAD = signal.SIGHUP
_ABSENT = object()


def raise_open_files_limit() -> Tuple[int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard limit, as node_exporter does: systemd gives a
    service a soft limit of 1024, which a few hundred client connections and the scrape's own
    reads would share. Returns (soft, hard) as they are now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard:
        return soft, hard
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (OSError, ValueError) as exc:  # a hard limit the kernel refuses (above fs.nr_open)
        log.kv(LOG, logging.WARNING, "cannot raise the open files limit", soft=soft, hard=hard, err=str(exc))
        return soft, hard
    log.kv(LOG, logging.INFO, "raised the open files limit", before=soft, now=hard)
    return hard, hard


# glibc's mallopt() parameters (malloc.h).
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8
# glibc's own first threshold (128 KiB), fixed rather than raised as blocks above it are freed.
MMAP_THRESHOLD = 128 * 1024


def one_malloc_heap() -> bool:
    """Have glibc's malloc keep one heap (arena) for every thread, and give memory blocks of
    128 KiB and more back to the kernel when they are freed. Called before any thread starts.

    By default each thread that allocates gets a heap of its own (up to eight per core), and
    what one thread frees stays in its heap: the reading lane, the scraper and each HTTP worker
    kept their own pages of a scrape's records and texts. Almost every allocation is made holding
    the interpreter's lock, so threads seldom wait on the one heap's own; peak RSS of the 2048-function
    benchmark host fell by about 5 MB (docs/performance.md). A family's text above the threshold
    (a few hundred KB on a big host) is mapped and unmapped whole instead of the threshold
    growing past it and leaving it in the heap. False where the C library is not glibc (nothing
    is changed there) or it refused."""
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return False
    except (ValueError, OSError):
        return False
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is None:
        return False
    return bool(mallopt(_M_ARENA_MAX, 1)) and bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))


class Signals:
    """SIGTERM, SIGINT and SIGHUP, recorded by their handlers and handed to the main loop by
    `wait`. Made in the main thread (set_wakeup_fd must be)."""

    def __init__(self) -> None:
        # Non-inheritable (os.pipe's default): no child holds it open.
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)
        # The signal's number is written here by the interpreter's own C-level handler, before
        # any Python handler runs. A full pipe drops the byte (no warning: the handler's record
        # below still says the signal came).
        signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        self._received: Dict[int, object] = {}
        for signum in (*STOP, RELOAD):
            # Called as handler(signum, frame): records the signal and nothing else. The frame is
            # kept only until the next `wait`.
            signal.signal(signum, self._received.__setitem__)

    def wait(self, timeout: Optional[float] = None) -> Set[int]:
        """The signals received since the last call, waiting up to `timeout` seconds for one.
        Every pending one is taken at once: a burst of SIGHUPs is one reload."""
        select.select([self._read], [], [], timeout)
        got: Set[int] = set()
        while True:
            try:
                data = os.read(self._read, 4096)
            except (BlockingIOError, InterruptedError):
                break
            if not data:
                break
            got.update(data)
        # A signal whose byte did not fit in the pipe.
        for signum in (*STOP, RELOAD):
            if self._received.pop(signum, _ABSENT) is not _ABSENT:
                got.add(signum)
        return {signum for signum in got if signum in (*STOP, RELOAD)}
