"""Background tasks never die: not on a task that raises, not on a schedule that makes no sense."""

from __future__ import annotations

import math
import threading
import time

import pytest

from storpath.base import background
from storpath.base.background import Task


def _wait_for(check, seconds=5.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.01)
    return False


@pytest.mark.parametrize("error", [OverflowError("timeout value is too large"), ValueError("x"), KeyError("k")])
def test_a_task_that_raises_is_logged_and_runs_again(error):
    calls = []

    def func():
        calls.append(1)
        raise error

    task = Task("failing", func, interval=3600)
    task.start()
    try:
        assert _wait_for(lambda: task.runs == 1)
        task.trigger()
        assert _wait_for(lambda: task.runs == 2), "the task's thread died after its function raised"
        assert task.failures == 2 and type(error).__name__ in task.last_error
    finally:
        task.stop()


@pytest.mark.parametrize("interval,jitter", [(math.inf, 0.0), (math.nan, 0.0), (1e30, 0.0), (3600.0, math.inf),
                                             (3600.0, math.nan), (0.0, 0.0), (-5.0, 0.0)])
def test_the_next_delay_is_always_a_wait_a_thread_can_do(interval, jitter):
    delay = Task("t", lambda: None, interval=interval, jitter=jitter).next_delay()
    assert background.MIN_DELAY <= delay <= background.MAX_DELAY
    threading.Event().wait(min(delay, 0.001))  # the wait itself never raises OverflowError


@pytest.mark.parametrize("interval", [math.inf, math.nan, 99999999999999999999 * 604800.0])
def test_an_impossible_interval_keeps_the_thread_alive_and_triggerable(interval):
    """Before: Event.wait(inf) raised OverflowError in the task's thread, which died and never ran again."""
    task = Task("odd", lambda: None, interval=interval)
    task.start()
    try:
        assert _wait_for(lambda: task.runs == 1)
        time.sleep(0.05)
        assert task._thread.is_alive()
        task.trigger()
        assert _wait_for(lambda: task.runs == 2)
    finally:
        task.stop()


def test_a_zero_interval_does_not_run_back_to_back(monkeypatch):
    monkeypatch.setattr(background, "MIN_DELAY", 0.2)
    task = Task("zero", lambda: None, interval=0.0)
    task.start()
    try:
        time.sleep(0.5)
        assert 1 <= task.runs <= 4, task.runs
    finally:
        task.stop()


def test_a_first_run_that_hangs_is_waited_for_only_in_the_seconds_after_start():
    release = threading.Event()
    task = Task("hangs", lambda: release.wait(30), interval=3600)
    task.start()
    try:
        start = time.monotonic()
        task.wait_first_run(0.5)
        first = time.monotonic() - start
        start = time.monotonic()
        task.wait_first_run(0.5)  # a later scrape: the 0.5 s after start are over
        later = time.monotonic() - start
        assert 0.3 < first < 2 and later < 0.1, (first, later)
    finally:
        release.set()
        task.stop()
