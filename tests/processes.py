"""What /proc says about a process, and waiting for a server process to answer: used by
the benchmarks and by tests that watch the exporter and the fio it runs."""

from __future__ import annotations

import os
import subprocess
import time
from typing import Callable, List, Optional

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process itself (not its children)."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def memory_bytes(pid: int, field: str = "VmRSS") -> int:
    """A memory line of /proc/PID/status (VmRSS now, VmHWM the peak), in bytes."""
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def fio_children(pid: int) -> List[int]:
    """The fio processes whose parent is `pid`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/comm") as handle:
                comm = handle.read().strip()
        except OSError:
            continue
        if int(fields[1]) == pid and comm == "fio":
            found.append(int(entry))
    return found


def wait_until_answers(proc: subprocess.Popen, url: str, what: str, log: Callable[[], str] = lambda: "",
                       timeout: float = 20, get: Optional[Callable[..., object]] = None) -> None:
    """Wait until GET `url` answers 200 (through `get(url, timeout=...)` when given: TLS, auth);
    RuntimeError (with `log()`) if `proc` exits first or `timeout` seconds pass."""
    import requests

    get = get or requests.get

    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}:\n{log()}")
        try:
            # Each try may take as long as one answer does (an exporter's first answer is a whole
            # scrape: node_exporter's of 2048 PCI functions took over a second on a slow VM).
            if get(url, timeout=max(1.0, min(10.0, deadline - time.monotonic()))).status_code == 200:
                return
        except requests.RequestException:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not answer within {timeout:g} s:\n{log()}")
        time.sleep(0.05)
