"""Fixtures for the packaging tests: artifacts built by `make dist-*` into a temporary dist/,
and a started `storpath serve` of an installed artifact, scraped over HTTP."""

from __future__ import annotations

import os
import re
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, List

import pytest
import requests

from tests.conftest import free_port, stop_process
from tests.integration.sysfs_tree import make_nvme_pcie_tree

REPO = Path(__file__).resolve().parents[2]
VERSION = re.search(r'^__version__ = "(.*)"$', (REPO / "exporter/storpath/__init__.py").read_text(), re.M).group(1)
# The fixture tree's NVMe drive trained at 8 GT/s (tests/integration/sysfs_tree.py).
NVME_SPEED = re.compile(r'^storpath_pcie_current_link_speed_transfers_per_second\{[^}]*address="0000:01:00.0"[^}]*\} 8e\+09$',
                        re.M)


def pytest_collection_modifyitems(config, items):
    # Every packaging test runs alone in the full suite (scripts/test): they build with make,
    # dpkg and the Docker engine, and install into temporary machines, each taking both cores.
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.alone)


@pytest.fixture(scope="session")
def dist_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("dist")


def make_dist(target: str, dist: Path) -> None:
    """`make <target>` writing into ``dist`` (fails the test with make's output)."""
    result = subprocess.run(["make", "--no-print-directory", "-C", str(REPO), target, f"DIST_DIR={dist}"],
                            capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, f"make {target}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"


@pytest.fixture(scope="session")
def sysfs_tree(tmp_path_factory) -> Path:
    root = make_nvme_pcie_tree(tmp_path_factory.mktemp("sys"))
    # Readable for the unprivileged users the packages run the exporter as.
    for path in [root, *root.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)
    return root


@contextmanager
def serving(argv: List[str], log: Path, env=None) -> Iterator[str]:
    """Run ``argv`` (a `storpath serve` command line without --web.listen-address) and yield its URL."""
    port = free_port()
    with open(log, "w") as out:
        proc = subprocess.Popen([*argv, f"--web.listen-address=127.0.0.1:{port}"], stdout=out,
                                stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, lambda: proc.poll() is None, log)
        yield url
    finally:
        stop_process(proc)


def wait_healthy(url: str, alive, log: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        assert alive(), f"the exporter exited:\n{log.read_text()[-3000:]}"
        try:
            if requests.get(url + "/-/healthy", timeout=1).status_code == 200:
                return
        except requests.RequestException:
            pass
        assert time.monotonic() < deadline, f"no answer from {url} in {timeout} s:\n{log.read_text()[-3000:]}"
        time.sleep(0.1)


def scrape(url: str) -> str:
    response = requests.get(url + "/metrics", timeout=10)
    assert response.status_code == 200, response.text[:500]
    return response.text


def check_runbook_served(url: str, name: str = "PcieLinkSpeedBelowExpected") -> None:
    """The installed artifact serves the runbooks every alert links to by default, as docs/runbooks/ has them."""
    response = requests.get(f"{url}/runbooks/{name}.md", timeout=10)
    assert response.status_code == 200, response.text[:500]
    assert response.content == (REPO / "docs" / "runbooks" / f"{name}.md").read_bytes()


@pytest.fixture(scope="session")
def docker_host() -> str:
    from tests.integration import harness
    from tests.integration.conftest import missing

    try:
        return harness.ensure_docker()
    except harness.Missing as err:
        missing(str(err))


def docker(*args: str, timeout: float = 900, check: bool = True, input=None) -> subprocess.CompletedProcess:
    result = subprocess.run(["docker", *args], capture_output=True, timeout=timeout, input=input,
                            text=input is None or isinstance(input, str), env=dict(os.environ))
    if check:
        assert result.returncode == 0, f"docker {' '.join(args)}:\n{result.stdout}\n{result.stderr}"
    return result


class ContainerLog:
    """What wait_healthy shows when a container's exporter dies or does not answer: its log."""

    def __init__(self, cid: str):
        self.cid = cid

    def read_text(self) -> str:
        result = docker("logs", self.cid, check=False)
        return result.stdout + result.stderr


def container_url(cid: str, port: int = 9866) -> str:
    """The exporter of container ``cid``, once it answers on its published ``port``."""
    host_port = docker("port", cid, f"{port}/tcp").stdout.split()[0].rsplit(":", 1)[1]
    url = f"http://127.0.0.1:{host_port}"
    wait_healthy(url, lambda: docker("inspect", "-f", "{{.State.Running}}", cid).stdout.strip() == "true",
                 ContainerLog(cid))
    return url
