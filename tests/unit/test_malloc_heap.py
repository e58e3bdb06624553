"""`storpath serve` keeps one malloc heap for all its threads (storpath.http.process.one_malloc_heap).

glibc's malloc_stats() prints one "Arena N:" block per heap to standard error; a process whose
threads allocate has one heap per thread without the setting and one with it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PROGRAM = """
import ctypes, sys, threading
sys.path.insert(0, {exporter!r})
from storpath.http.process import one_malloc_heap
if {call}:
    assert one_malloc_heap()
def work():
    blocks = [bytearray(64 * 1024) for _ in range(20)]  # malloc, not the interpreter's small-object pools
    del blocks
threads = [threading.Thread(target=work) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
sys.stderr.flush()
ctypes.CDLL(None).malloc_stats()
"""


def _heaps(call: bool) -> int:
    done = subprocess.run([sys.executable, "-c", PROGRAM.format(exporter=os.path.join(ROOT, "exporter"), call=call)],
                          capture_output=True, text=True, check=True, timeout=60)
    return sum(1 for line in done.stderr.splitlines() if line.startswith("Arena "))


def _glibc() -> bool:
    try:
        return bool(os.confstr("CS_GNU_LIBC_VERSION"))
    except (ValueError, OSError):
        return False


@pytest.mark.skipif(not _glibc(), reason="malloc arenas and malloc_stats() are glibc's: this C library is another")
def test_threads_share_one_heap():
    assert _heaps(call=False) > 1  # each thread that allocates gets a heap of its own
    assert _heaps(call=True) == 1
