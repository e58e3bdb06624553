"""The image archive of `make dist-image`: `docker load` gives storpath:<version>, which runs as
the user the image names and serves the host tree it is given."""

from __future__ import annotations

import pytest

from .conftest import NVME_SPEED, VERSION, check_runbook_served, container_url, docker, make_dist, scrape

pytestmark = pytest.mark.integration

TAG = f"storpath:{VERSION}"


@pytest.fixture(scope="module")
def loaded_image(docker_host, dist_dir) -> str:
    make_dist("dist-image", dist_dir)
    archive = dist_dir / f"storpath-image-{VERSION}.tar.gz"
    # Only the archive brings the tag back: drop the one `make dist-image` left on the engine.
    docker("rmi", TAG)
    with open(archive, "rb") as handle:
        out = docker("load", input=handle.read()).stdout.decode()
    assert f"Loaded image: {TAG}" in out, out
    return TAG


def test_loaded_image_runs_and_serves(loaded_image, sysfs_tree):
    cid = docker("run", "-d", "--read-only", "-p", "127.0.0.1::9866", "-v", f"{sysfs_tree}:/host/sys:ro",
                 loaded_image).stdout.strip()
    try:
        url = container_url(cid)
        assert NVME_SPEED.search(scrape(url))
        check_runbook_served(url)
        assert docker("inspect", "-f", "{{.Config.User}}", loaded_image).stdout.strip() == "9866:9866"
    finally:
        docker("rm", "-f", cid, check=False)
