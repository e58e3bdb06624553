"""The Debian package of `make dist-deb`, installed with apt into a clean Debian container
(local/bookworm:minbase; apt fetches its dependencies from Debian's mirror), then started the way
its unit starts it and scraped.

systemd cannot run as the container's init on this kind of machine (a nested container with
cgroup v1), so the container's init does what the unit says: the environment of the
EnvironmentFile, ExecStart as User=. The enablement that makes systemd start it on a real host
is checked where postinst leaves it (multi-user.target.wants)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from .conftest import NVME_SPEED, VERSION, check_runbook_served, container_url, docker, make_dist, scrape

pytestmark = pytest.mark.integration

PACKAGE = "prometheus-storpath-exporter"
UNIT = f"/lib/systemd/system/{PACKAGE}.service"
DEFAULT = f"/etc/default/{PACKAGE}"
IMAGE = f"local/storpath-deb-test:{VERSION}"

DOCKERFILE = f"""\
FROM local/bookworm:minbase
COPY {PACKAGE}_{VERSION}-1_all.deb /tmp/
RUN apt-get update && apt-get install -y /tmp/{PACKAGE}_{VERSION}-1_all.deb && rm -rf /var/lib/apt/lists/*
"""

# The unit's Environment=, EnvironmentFile= and ExecStart= under its User=, as systemd would run it.
INIT = f"""\
set -eu
eval "export $(sed -n 's/^Environment=//p' {UNIT})"
set -a; . {DEFAULT}; set +a
user=$(sed -n 's/^User=//p' {UNIT})
exec setpriv --reuid="$user" --regid="$user" --init-groups sh -c "exec $(sed -n 's/^ExecStart=//p' {UNIT})"
"""


@pytest.fixture(scope="module")
def deb(dist_dir) -> Path:
    make_dist("dist-deb", dist_dir)
    (found,) = dist_dir.glob(f"{PACKAGE}_{VERSION}-1_all.deb")
    return found


@pytest.fixture(scope="module")
def installed_image(docker_host, deb, tmp_path_factory) -> str:
    from tests.integration import harness

    harness.build_images(["storpath"])  # and local/bookworm:minbase under it
    context = tmp_path_factory.mktemp("deb-image")
    shutil.copy(deb, context)
    (context / "Dockerfile").write_text(DOCKERFILE)
    docker("build", "-t", IMAGE, str(context), timeout=1200)
    return IMAGE


def run(image: str, script: str) -> str:
    return docker("run", "--rm", image, "sh", "-c", script).stdout


def test_package_installs_binary_unit_config_user_and_enables_the_service(installed_image):
    out = run(installed_image, f"""
        set -e
        dpkg-query -W -f '${{Status}} ${{Version}}\\n' {PACKAGE}
        storpath --help | head -n 3
        id storpath
        ls {UNIT} /etc/storpath/storpath.yml {DEFAULT}
        readlink /etc/systemd/system/multi-user.target.wants/{PACKAGE}.service
        dpkg-query -W -f '${{Conffiles}}\\n' {PACKAGE}
        grep -E '^(User|ExecStart|ExecReload|LimitNOFILE|EnvironmentFile)=' {UNIT}
    """)
    assert f"install ok installed {VERSION}-1" in out
    assert "usage: storpath" in out
    assert "uid=" in out and "(storpath)" in out
    assert f"{UNIT}\n" in out  # enabled: postinst linked it into multi-user.target.wants
    assert "/etc/storpath/storpath.yml" in out and DEFAULT in out.split("Conffiles")[-1]
    assert "ExecStart=/usr/bin/storpath serve $ARGS" in out and "User=storpath" in out
    assert f"EnvironmentFile=-{DEFAULT}" in out
    assert "ExecReload=/bin/kill -HUP $MAINPID" in out and "LimitNOFILE=8192" in out


def test_service_starts_as_the_unit_says_and_serves_metrics(installed_image, sysfs_tree):
    # An operator's change in /etc/default: the fixture tree instead of the container's /sys.
    script = f"echo 'ARGS=\"$ARGS --path.sysfs=/srv/sys\"' >>{DEFAULT}\n" + INIT
    started = time.monotonic()
    cid = docker("run", "-d", "-p", "127.0.0.1::9866", "-v", f"{sysfs_tree}:/srv/sys:ro", installed_image,
                 "sh", "-c", script).stdout.strip()
    try:
        url = container_url(cid)
        assert NVME_SPEED.search(scrape(url))
        check_runbook_served(url)
        status = docker("exec", cid, "sh", "-c", "grep ^Uid: /proc/1/status; id -u storpath").stdout.split()
        assert status[1] == status[-1] != "0", status  # PID 1 is the exporter, as the storpath user
        print(f"deb service answered {time.monotonic() - started:.1f} s after docker run")
    finally:
        docker("rm", "-f", cid, check=False)

