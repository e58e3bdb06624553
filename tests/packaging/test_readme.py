"""README.md as a newcomer follows it: in a fresh copy of the repository (what a clone has: no
.venv, no .cache, no dist/), the Quick start's commands one after the other, exactly as written
(`./scripts/install` links `storpath` into a folder on the PATH: here a temporary one, through
STORPATH_BIN_DIR, so the test leaves no link behind), then `make dist` of the Install section.
Each step's time is printed and written to $STORPATH_ARTIFACTS (or .artifacts/)
readme-timings.txt, for the record.

`make dist` as a whole also builds the container image (a private Docker engine, debootstrap)
and helm (Go): set STORPATH_README_DIST=all for it (CI does, through scripts/test's CI=true);
otherwise `make dist-python dist-mixin`, the steps a fresh clone used to fail on."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from pathlib import Path

import pytest
import requests

from tests.conftest import free_port, stop_process
from tests.processes import wait_until_answers

from .conftest import REPO, VERSION

pytestmark = pytest.mark.integration

ARTIFACTS = Path(os.environ.get("STORPATH_ARTIFACTS") or REPO / ".artifacts")


def quick_start() -> list:
    """The Quick start's command lines (comments dropped), in order."""
    text = (REPO / "README.md").read_text()
    section = re.search(r"^## Quick start\n(.*?)^## ", text, re.M | re.S).group(1)
    block = re.search(r"^```sh\n(.*?)^```", section, re.M | re.S).group(1)
    return [re.split(r"\s+#", line)[0].strip() for line in block.splitlines() if line.strip()]


def test_quick_start_names_the_demo_check_tree_and_the_exporter():
    lines = quick_start()
    assert lines[0] == "./scripts/install" and lines[-1] == "./scripts/run-exporter", lines
    assert {"storpath check", "storpath tree", "storpath check --example list"} <= set(lines), lines
    assert any(line.startswith("storpath check --example ") and line != "storpath check --example list"
               for line in lines), lines


def fresh_copy(dest: Path) -> Path:
    files = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "-co", "--exclude-standard"],
                           capture_output=True, check=True).stdout
    tar = subprocess.run(["tar", "--null", "-T", "-", "-c"], input=files, capture_output=True, cwd=REPO,
                         check=True).stdout
    dest.mkdir()
    subprocess.run(["tar", "-x", "-C", str(dest)], input=tar, check=True)
    # make dist-buildinfo asks git for the revision, as in a clone
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    return dest


def test_readme_in_a_fresh_copy(tmp_path):
    clone = fresh_copy(tmp_path / "storpath")
    bin_dir = tmp_path / "bin"
    env = {**os.environ, "STORPATH_BIN_DIR": str(bin_dir), "PATH": f"{bin_dir}:/usr/sbin:/usr/bin:/sbin:/bin",
           "COLUMNS": "80"}
    env.pop("VIRTUAL_ENV", None)
    timings = []

    def step(command: str, *, statuses=(0,), timeout=1800) -> str:
        started = time.monotonic()
        result = subprocess.run(["bash", "-c", command], cwd=clone, env=env, capture_output=True, text=True,
                                timeout=timeout)
        timings.append((command, time.monotonic() - started))
        assert result.returncode in statuses, f"{command}: exit {result.returncode}\n{result.stdout[-3000:]}\n" \
                                              f"{result.stderr[-3000:]}"
        return result.stdout

    try:
        for line in quick_start():
            if line.startswith("./scripts/run-exporter"):
                serve(line, clone, env, timings)
            elif line.startswith("storpath check --example list"):
                assert step(line).splitlines()[0].startswith("healthy-server ")
            elif line.startswith("storpath ") and "--example" in line:
                out = step(line, statuses=(1, 2))
                assert "CRITICAL" in out or "WARNING" in out, out
            elif line.startswith("storpath "):
                # this machine: whatever it finds, it runs (3 would be "could not run")
                assert "summary:" in step(line, statuses=(0, 1, 2))
            else:
                step(line)
        assert (bin_dir / "storpath").resolve() == (clone / ".venv/bin/storpath").resolve()
        everything = os.environ.get("STORPATH_README_DIST") == "all" or os.environ.get("CI") == "true"
        dist = "make dist" if everything else "make dist-python dist-mixin"
        step(f"{dist} DIST_DIR={tmp_path / 'dist'}", timeout=3600)
        built = sorted(p.name for p in (tmp_path / "dist").iterdir())
        assert f"storpath-{VERSION}-py3-none-any.whl" in built and f"storpath-mixin-{VERSION}.tar.gz" in built, built
        if everything:
            assert "SHA256SUMS" in built and any(name.endswith(".deb") for name in built), built
    finally:
        report = "".join(f"{seconds:7.1f} s  {command}\n" for command, seconds in timings)
        print("\n" + report)
        ARTIFACTS.mkdir(exist_ok=True)
        (ARTIFACTS / "readme-timings.txt").write_text(report)


def serve(line: str, clone: Path, env: dict, timings: list) -> None:
    """The exporter the Quick start leaves running: up, scraped, stopped."""
    port = free_port()
    started = time.monotonic()
    log = clone / "run-exporter.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(["bash", "-c", f"exec {line} --web.listen-address=127.0.0.1:{port}"], cwd=clone,
                                env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_answers(proc, f"{url}/-/healthy", line, log=log.read_text, timeout=600)
        text = requests.get(url + "/metrics", timeout=30).text
        timings.append((f"{shlex.join(line.split())} (until /metrics answers)", time.monotonic() - started))
        assert "storpath_build_info{" in text
    finally:
        stop_process(proc)
