"""Fixtures for the integration tier: real Prometheus, Alertmanager, node_exporter and storpath.

Environment:
  STORPATH_IT_MODE   containers (default) | processes. containers: images from
                     deploy/container/build-base-images on the engine of scripts/docker-daemon
                     (or DOCKER_HOST), run with testcontainers; processes: the Debian binaries
                     /usr/bin/prometheus, /usr/bin/prometheus-alertmanager, /usr/bin/prometheus-node-exporter.
  CI                 when set, anything missing (engine, binaries, images) fails the test instead of skipping it.
  STORPATH_IT_BUILD  1 (default): build images once per session (cheap when cached); 0: use existing images only.
  DOCKER_HOST        engine to use; unset: scripts/docker-daemon start.

Fixtures:
  it_mode            "containers" or "processes"
  backend            function-scoped harness.Backend (ContainerBackend or ProcessBackend); everything it
                     started is stopped at the end of the test. Methods: prometheus(config, rules_dir),
                     alertmanager(config), node_exporter(args), host_exporter(sysfs, ...).
  container_backend  a ContainerBackend whatever the mode (tests of the images themselves); adds storpath(sysfs).
  docker_engine      DOCKER_HOST of a working engine (session)
  built_images       the image tags, built once per session
  sysfs_tree         a tiny fixture sysfs: one PCIe root port and one NVMe drive whose link trained at
                     8 GT/s below the 16 GT/s both ends support (tests/integration/sysfs_tree.py)
  rules_dir          the repository's rules/ directory
  require_exporter   skips while the exporter has no command-line entry point yet
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from . import harness
from .sysfs_tree import make_nvme_pcie_tree

IN_CI = bool(os.environ.get("CI"))


def missing(reason: str):
    """Fail in CI, skip elsewhere, naming what is missing."""
    if IN_CI:
        pytest.fail(f"CI: {reason}", pytrace=False)
    pytest.skip(reason)


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def it_mode() -> str:
    mode = os.environ.get("STORPATH_IT_MODE", "containers")
    if mode not in ("containers", "processes"):
        pytest.fail(f"STORPATH_IT_MODE={mode!r}: expected containers or processes", pytrace=False)
    return mode


@pytest.fixture(scope="session")
def docker_engine() -> str:
    try:
        return harness.ensure_docker()
    except harness.Missing as e:
        missing(str(e))


@pytest.fixture(scope="session")
def built_images(docker_engine) -> dict:
    """Build (or find in the cache) every image once per session."""
    try:
        harness.build_images()
    except harness.Missing as e:
        missing(str(e))
    return dict(harness.IMAGES)


@pytest.fixture(scope="session")
def process_binaries() -> dict:
    try:
        harness.check_binaries()
    except harness.Missing as e:
        missing(str(e))
    return dict(harness.BINARIES)


@pytest.fixture
def container_backend(built_images, tmp_path_factory):
    b = harness.ContainerBackend(tmp_path_factory.mktemp("containers"))
    yield b
    b.close()


@pytest.fixture
def backend(request, it_mode, tmp_path_factory):
    if it_mode == "containers":
        request.getfixturevalue("built_images")
        b = harness.ContainerBackend(tmp_path_factory.mktemp("containers"))
    else:
        request.getfixturevalue("process_binaries")
        b = harness.ProcessBackend(tmp_path_factory.mktemp("processes"))
    yield b
    b.close()


@pytest.fixture
def require_exporter():
    if not harness.exporter_present():
        pytest.skip("the storpath exporter is not implemented yet (no exporter/storpath/cli.py)")


@pytest.fixture
def sysfs_tree(tmp_path) -> Path:
    root = make_nvme_pcie_tree(tmp_path / "sys")
    harness.make_world_readable(root)
    return root


@pytest.fixture(scope="session")
def rules_dir() -> Path:
    return harness.REPO / "rules"


@pytest.fixture
def host_exporter(backend, require_exporter, sysfs_tree):
    """The storpath exporter as a host process on ``sysfs_tree``; Prometheus in either mode scrapes it."""
    try:
        return backend.host_exporter(sysfs_tree)
    except harness.Missing as e:
        missing(str(e))
