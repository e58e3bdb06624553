"""A parse run under a time limit that fails a test instead of hanging it: for patterns that
could backtrack on hostile input. The limit is a hang guard, not a speed target."""

from __future__ import annotations

import multiprocessing

# How long a parse may take before the test calls it hung: not a speed target (each parse
# here takes milliseconds), a guard that fails a pattern that backtracks (seconds to minutes
# per line) instead of hanging the test run.
HANG_GUARD_SECONDS = 10


def finishes(parse, *args):
    """parse(*args) in a child process; its result, or its exception re-raised. Fails when no
    answer came within HANG_GUARD_SECONDS (the child is killed). A process, not a thread: one
    pattern match holds the GIL until it ends, so a thread's join(timeout) cannot return before
    a backtracking match does."""
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)

    def run():
        try:
            send.send(("value", parse(*args)))
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            send.send(("error", exc))

    child = context.Process(target=run, daemon=True)
    child.start()
    try:
        answered = receive.poll(HANG_GUARD_SECONDS)
        assert answered, f"{getattr(parse, '__name__', parse)} still running after {HANG_GUARD_SECONDS} s"
        kind, value = receive.recv()
    finally:
        child.kill()
        child.join()
    if kind == "error":
        raise value
    return value
