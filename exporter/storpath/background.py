"""Background tasks: slow or privileged work on its own schedule, off the scrape path.

A task runs once at start, then every `interval` seconds (plus a random jitter so a
fleet does not act at once), and can be asked to run early with `trigger()` (for
example when a new NVMe namespace appears). A task that raises is logged and runs
again at its next time: it never stops the exporter.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from typing import Callable, Dict, List, Optional

from storpath import log

LOG = log.get("background")


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
        self.last_error: Optional[str] = None
        self.last_run_end: Optional[float] = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

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

    def _loop(self) -> None:
        delay = self.initial_delay
        while not self._stop.is_set():
            if delay > 0:
                self._wake.wait(delay)
                self._wake.clear()
                if self._stop.is_set():
                    return
            self.run_once()
            delay = self.interval + (random.uniform(0, self.jitter) if self.jitter > 0 else 0)

    def start(self) -> None:
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

    def stop(self) -> None:
        tasks: List[Task] = list(self.tasks.values())
        for task in tasks:
            task._stop.set()
            task._wake.set()
        for task in tasks:
            task.stop()
