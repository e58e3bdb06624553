"""The one runner for external commands (nvme-cli, zpool, fio): its deadline holds even when
something it cannot kill keeps the output pipes open, as a process stuck in the kernel
does; subprocess.run(timeout=...) would wait for those pipes to close."""

import os
import signal
import time

import pytest

from storpath.base.subprocesses import run_command


def test_output_and_exit_status():
    done = run_command(["sh", "-c", "echo out; echo err >&2; exit 3"], timeout=10)
    assert (done.returncode, done.stdout, done.stderr, done.timed_out) == (3, b"out\n", b"err\n", False)
    assert done.first_error_line() == "err"


def test_the_deadline_holds_while_an_unkillable_process_holds_the_pipes(tmp_path):
    pidfile = tmp_path / "holder.pid"
    # The holder leaves the command's process group (setsid), so killing the group cannot
    # reach it: like a process in uninterruptible sleep, it keeps stdout open for a minute.
    script = f'setsid sh -c \'echo $$ > {pidfile}; exec sleep 60\' & sleep 60'
    start = time.monotonic()
    try:
        done = run_command(["sh", "-c", script], timeout=0.5, grace=0.5)
        waited = time.monotonic() - start
        assert done.timed_out and done.stuck is None  # the command itself died; the holder is not waited for
        assert waited < 30, f"waited {waited:.1f} s for pipes held by a process it cannot kill"
    finally:
        for _ in range(50):
            if pidfile.exists() and pidfile.read_text().strip():
                break
            time.sleep(0.1)
        if pidfile.exists():
            try:
                os.kill(int(pidfile.read_text()), signal.SIGKILL)
            except (ValueError, ProcessLookupError):
                pass


def test_a_command_that_cannot_start_raises():
    with pytest.raises(FileNotFoundError):
        run_command([os.path.join(os.sep, "no", "such", "zpool")], timeout=1)


def test_output_past_the_bound_stops_the_command():
    """A command that never stops writing (a tool printing garbage in a loop) is killed at the
    bound, not read into memory without end."""
    start = time.monotonic()
    done = run_command(["yes", "garbage"], timeout=30, max_output=1 << 20)
    assert time.monotonic() - start < 10
    assert done.returncode != 0 and not done.timed_out
    assert done.first_error_line() == f"output over {1 << 20} bytes: stopped"
    assert done.stdout == b""


def test_large_output_within_the_bound_is_kept_whole():
    done = run_command(["sh", "-c", "head -c 3000000 /dev/zero; echo done >&2"], timeout=30)
    assert (done.returncode, len(done.stdout), done.stderr) == (0, 3000000, b"done\n")


def test_a_command_that_exits_while_its_child_holds_the_pipes_keeps_its_status():
    start = time.monotonic()
    done = run_command(["sh", "-c", "echo early; sleep 60 & exit 4"], timeout=30, grace=0.5)
    assert (done.returncode, done.stdout) == (4, b"early\n")
    assert time.monotonic() - start < 10
