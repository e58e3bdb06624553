"""The storpath container image: builds, runs as non-root on a read-only host tree, serves metrics."""

from __future__ import annotations

import re

import pytest

from . import harness


@pytest.fixture
def storpath_container(container_backend, require_exporter, sysfs_tree):
    return container_backend.storpath(sysfs_tree, read_only=True)


def test_image_runs_as_non_root(storpath_container):
    container = storpath_container.extra["container"].get_wrapped_container()
    container.reload()
    user = container.attrs["Config"]["User"]
    assert user and not user.startswith(("0", "root")), f"image user is {user!r}"
    code, out = container.exec_run(["id", "-u"])
    assert code == 0 and out.decode().strip() == str(harness.STORPATH_UID), out
    # PID 1 is the exporter itself, under the same non-root uid.
    status = container.exec_run(["cat", "/proc/1/status"])[1].decode()
    uids = re.search(r"^Uid:\s+(\d+)\s+(\d+)", status, re.M).groups()
    assert uids == (str(harness.STORPATH_UID),) * 2, status


def test_image_serves_pcie_metrics_from_read_only_sysfs(storpath_container):
    container = storpath_container.extra["container"].get_wrapped_container()
    mounts = {m["Destination"]: m for m in container.attrs["Mounts"]}
    assert mounts["/host/sys"]["RW"] is False
    assert container.attrs["HostConfig"]["ReadonlyRootfs"] is True

    status, body = storpath_container.get("/metrics")
    assert status == 200, body[:500]
    current = re.findall(r'^storpath_pcie_current_link_speed_transfers_per_second\{[^}]*address="0000:01:00.0"[^}]*\} (\S+)$',
                         body, re.M)
    assert current and float(current[0]) == 8e9, body[:3000]
    assert re.search(r'^storpath_scrape_collector_success\{collector="pcie"\} 1(\.0)?$', body, re.M), body[:3000]

    status, _ = storpath_container.get("/-/healthy")
    assert status == 200


def test_image_has_probe_tools(container_backend, built_images):
    """fio and nvme-cli come from Debian inside the image; the exporter's dependencies import."""
    import docker

    client = docker.from_env()
    container = client.containers.run(
        built_images["storpath"], detach=True, entrypoint=["sh", "-c"],
        command=["fio --version && nvme version && python3 -c 'import prometheus_client, yaml, storpath' && echo ok"])
    try:
        status = container.wait(timeout=60)
        out = container.logs().decode()
    finally:
        container.remove(force=True, v=True)  # v: the image's /var/lib/storpath volume too
    assert status["StatusCode"] == 0 and out.strip().endswith("ok"), out
