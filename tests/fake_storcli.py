"""A storcli for tests of the RAID task and of `storpath serve`: a shell script that answers
from a folder's JSON files, or hangs (a controller whose firmware stopped answering leaves
storcli asleep in the kernel), and notes in runs.log every start, every end, and every start
while an earlier run's process was still alive (an overlap)."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from typing import List, Optional, Tuple


def write(tmp_path: Path, folder: Optional[Path] = None) -> str:
    """The script at tmp_path/storcli. With `folder`: answers `/call`, `/call/eall/sall` and
    `/call/vall` from its controllers.json, drives.json and volumes.json, and sleeps first
    while a file named `hang` is there. Without: sleeps ten minutes every run."""
    hang = f"if [ -e {folder}/hang ]; then sleep 60; fi" if folder is not None else "sleep 600"
    answer = textwrap.dedent(f"""\
        case "$1" in
          /call) cat {folder}/controllers.json ;;
          /call/eall/sall) cat {folder}/drives.json ;;
          /call/vall) cat {folder}/volumes.json ;;
        esac
        """) if folder is not None else ""
    path = tmp_path / "storcli"
    path.write_text("#!/bin/sh\n" + textwrap.dedent(f"""\
        for pid in $(cat {tmp_path}/runs.pids 2>/dev/null); do
          kill -0 "$pid" 2>/dev/null && echo "overlap $pid" >> {tmp_path}/runs.log
        done
        echo $$ >> {tmp_path}/runs.pids
        echo "start $$" >> {tmp_path}/runs.log
        {hang}
        """) + answer + f'echo "end $$" >> {tmp_path}/runs.log\n')
    path.chmod(0o755)
    return str(path)


def runs(tmp_path: Path) -> Tuple[int, int]:
    """(runs started, runs started while an earlier run's process lived) from runs.log."""
    log = tmp_path / "runs.log"
    lines = log.read_text().splitlines() if log.exists() else []
    return sum(line.startswith("start") for line in lines), sum(line.startswith("overlap") for line in lines)


def alive(tmp_path: Path) -> List[str]:
    """PIDs of the script's processes alive now (zombies left out: they are gone, only not reaped)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                cmdline = handle.read()
            with open(f"/proc/{pid}/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if str(tmp_path / "storcli").encode() in cmdline and state != b"Z":
            found.append(pid)
    return found
