"""Background tasks: slow or privileged work on its own schedule, off the scrape path.

A task runs once at start, then every `interval` seconds (plus a random jitter so a
fleet does not act at once), and can be asked to run early with `trigger()` (for
example when a new NVMe namespace appears). A task that raises is logged and runs
again at its next time: it never stops the exporter, and neither does a schedule that
makes no sense (a NaN, infinite or zero interval): its delay is held between MIN_DELAY
and MAX_DELAY.

A run that raises (anything: a RecursionError in a parser included) is that task's
failure, never a success that left the last results in place: until a run returns, the
source that serves the task's results raises TaskFailed (storpath.scrape.slow: `SlowRead.failed`), so the
scrape reports the source and its collectors failed with the reason, or the collector
reports the failure its own way (the zpool task: `storpath_zfs_zpool_up 0`). So does a run
that has had one read outstanding longer than the server's bound (TaskBlocked: a device that
stopped answering, the source reported blocked), until that read returns.
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from typing import Callable, Dict, List, Optional

from storpath.base import log

LOG = log.get("background")
# No task runs back to back, whatever its interval; none waits longer than the longest
# duration a setting takes, nor longer than a thread can wait (threading.TIMEOUT_MAX).
MIN_DELAY = 1.0
MAX_DELAY = min(366 * 86400.0, threading.TIMEOUT_MAX)


class TaskFailed(Exception):
    """The latest run of a background task raised: what it produced before is not current."""


class TaskBlocked(TaskFailed):
    """The run of a background task in progress has had one read outstanding longer than the
    server's bound (web.read_blocked_after): a device that stopped answering. What the task
    produced before is not current either; the scrape reports its source blocked."""


class Task:
    def __init__(self, name: str, func: Callable[[], None], interval: float, jitter: float = 0.0,
                 initial_delay: float = 0.0):
        self.name = name
        self.func = func
        self.interval = interval
        self.jitter = jitter
        self.initial_delay = initial_delay
        self.runs = 0
        self.failures = 0
        self.last_error: Optional[str] = None  # why the latest run raised; None once a run returns
        self.last_run_end: Optional[float] = None
        self.first_run = threading.Event()  # set once the first run has ended, however it ended
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._started = 0.0  # time.monotonic() of start()

    @property
    def thread_id(self) -> Optional[int]:
        """The identifier of the thread the task runs in; None before start() (and for a task
        a one-shot command runs inline)."""
        thread = self._thread
        return thread.ident if thread is not None else None

    def trigger(self) -> None:
        self._wake.set()

    def run_once(self) -> None:
        try:
            self.func()
            self.last_error = None
        except Exception as exc:  # a task must never take the exporter down
            self.failures += 1
            self.last_error = f"{type(exc).__name__}: {exc}"
            log.kv(LOG, logging.ERROR, "background task failed", task=self.name, err=self.last_error)
        finally:
            self.runs += 1
            self.last_run_end = time.time()
            self.first_run.set()

    def next_delay(self) -> float:
        """Seconds until the next run: interval plus jitter, held between MIN_DELAY and MAX_DELAY."""
        try:
            jitter = random.uniform(0, min(self.jitter, MAX_DELAY)) if self.jitter > 0 else 0.0
            delay = self.interval + jitter
        except (ArithmeticError, TypeError, ValueError):
            delay = math.nan
        if math.isnan(delay):
            log.once(LOG, logging.ERROR, ("delay", self.name), "background task has no valid interval: runs at the "
                     "longest", task=self.name, interval=self.interval, jitter=self.jitter)
            return MAX_DELAY
        return min(max(delay, MIN_DELAY), MAX_DELAY)

    def _wait(self, delay: float) -> None:
        if not delay > 0:  # 0, negative or NaN: no wait
            return
        self._wake.wait(min(delay, MAX_DELAY))
        self._wake.clear()

    def _loop(self) -> None:
        delay = self.initial_delay
        while not self._stop.is_set():
            try:
                self._wait(delay)
                if self._stop.is_set():
                    return
                self.run_once()
                delay = self.next_delay()
            except Exception as exc:  # the schedule itself failed: log, and never let the thread die
                log.kv(LOG, logging.ERROR, "background task schedule failed", task=self.name,
                       err=f"{type(exc).__name__}: {exc}")
                delay = 60.0

    def wait_first_run(self, timeout: float) -> None:
        """While the task runs on its schedule, wait for its first run to end until `timeout`
        seconds after the task started: the first scrapes after start serve its result rather
        than nothing, and a first run that hangs costs the scrapes of those seconds only.
        (A one-shot command runs the task inline instead: nothing to wait for.)"""
        if self._thread is not None:
            left = self._started + timeout - time.monotonic()
            if left > 0:
                self.first_run.wait(left)

    def start(self) -> None:
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._loop, name=f"task-{self.name}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)


class Scheduler:
    """Holds the background tasks of all collectors. Tasks only start with `start()`,
    so one-shot commands (`storpath check`) can run a task inline instead."""

    def __init__(self) -> None:
        self.tasks: Dict[str, Task] = {}
        self.started = False

    def add(self, name: str, func: Callable[[], None], interval: float, jitter: float = 0.0,
            initial_delay: float = 0.0) -> Task:
        if name in self.tasks:
            raise ValueError(f"background task {name!r} exists already")
        task = Task(name, func, interval, jitter, initial_delay)
        self.tasks[name] = task
        if self.started:
            task.start()
        return task

    def run_all_once(self) -> None:
        for task in list(self.tasks.values()):
            task.run_once()

    def start(self) -> None:
        self.started = True
        for task in self.tasks.values():
            task.start()

    def stop(self, wait: float = 2.0) -> None:
        """Stop every task; wait at most `wait` seconds in all for those running to finish
        (a task blocked in a read is left behind: its thread is a daemon)."""
        tasks: List[Task] = list(self.tasks.values())
        for task in tasks:
            task._stop.set()
            task._wake.set()
        end = time.monotonic() + wait
        for task in tasks:
            task.stop(max(0.0, end - time.monotonic()))
