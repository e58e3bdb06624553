"""A scrape deadline for collectors whose reads can block.

sysfs reads normally take microseconds, but a hung driver attribute (or a FIFO in a test
tree) blocks `read()` forever, and a thread blocked in a read cannot be interrupted from
Python. So each step of a scrape runs in a thread of its own and the scrape waits only for
that step's share of the deadline; a step that overruns is reported failed and the scrape
goes on. Its thread is left to finish on its own, and until it does the step is not started
again (it is reported failed at once): one stuck read costs one thread, not one per scrape.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional

from storpath import log

LOG = log.get("exporter")

MIN_RESERVE = 0.1  # seconds kept for a step that has not run yet (sysfs reads take milliseconds)


@dataclass
class Result:
    ok: bool
    value: Any = None
    error: Optional[str] = None
    seconds: float = 0.0
    exception: Optional[BaseException] = None  # what the step raised, when it raised


class _Run:
    def __init__(self, func: Callable[[], Any]):
        self.func = func
        self.done = threading.Event()
        self.started = time.monotonic()
        self.value: Any = None
        self.error: Optional[BaseException] = None

    def __call__(self) -> None:
        try:
            self.value = self.func()
        except BaseException as exc:  # handed to the scrape, which reports it
            self.error = exc
        finally:
            self.done.set()


class Guard:
    """Runs named steps under a time limit, at most one stuck run per name."""

    def __init__(self) -> None:
        self._stuck: Dict[str, _Run] = {}
        self._lock = threading.Lock()
        self._last: Dict[str, float] = {}  # name -> seconds its last successful run took

    def reserve(self, name: str) -> float:
        """Time to keep for a step that is still to run: twice what it took last time."""
        return max(MIN_RESERVE, 2 * self._last.get(name, 0.0))

    def stuck(self) -> Dict[str, float]:
        """Steps still blocked in an earlier run: name -> seconds since that run started."""
        now = time.monotonic()
        with self._lock:
            return {name: now - run.started for name, run in self._stuck.items() if not run.done.is_set()}

    def run(self, name: str, func: Callable[[], Any], timeout: float) -> Result:
        with self._lock:
            previous = self._stuck.get(name)
            if previous is not None:
                if not previous.done.is_set():
                    age = time.monotonic() - previous.started
                    return Result(False, error=f"its run of {age:.0f} s ago is still blocked; not started again")
                del self._stuck[name]
                log.kv(LOG, logging.INFO, "blocked step returned", step=name,
                       seconds=round(time.monotonic() - previous.started, 1))
        run = _Run(func)
        thread = threading.Thread(target=run, name=f"scrape-{name}", daemon=True)
        start = time.perf_counter()
        thread.start()
        if not run.done.wait(max(timeout, 0.0)):
            with self._lock:
                self._stuck[name] = run
            return Result(False, error=f"did not finish within its {timeout:.2f} s share of the scrape deadline "
                                       "(a read blocks?)", seconds=time.perf_counter() - start)
        seconds = time.perf_counter() - start
        self._last[name] = seconds
        if run.error is not None:
            exc = run.error
            return Result(False, error=f"{type(exc).__name__}: {exc}", seconds=seconds, exception=exc)
        return Result(True, run.value, seconds=seconds)


def share(remaining: float, later: List[float]) -> float:
    """A step's share of what is left of the deadline: all of it but what the steps after it
    are expected to need (`later`, their reserves), and never less than an even split, so a
    step that blocks leaves the others the time they need, and a slow one (the first scrape
    of a large host reads everything) is not cut short while there is time."""
    return max(remaining - sum(later), remaining / (len(later) + 1))
