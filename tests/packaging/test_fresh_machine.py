"""A release from a fresh machine: a Debian container that has nothing but debootstrap's minimal
system (local/bookworm:minbase) and a fresh copy of the repository runs the README's
`./scripts/install`, then `make dist-deb`. Everything the package is built with must come from
there: `make dist-setup` (scripts/apt-packages-dist.txt and debian/control's Build-Depends through
scripts/build-depends), never from what this machine happens to have. The .deb it writes must be
the package: installable contents, the exporter and its runbooks.

Only the machine's network settings go in with it: the certificate authorities this machine
trusts beyond Debian's (/usr/local/share/ca-certificates, which apt's ca-certificates takes in
when it is installed) and its proxy and pip settings, so that apt and pip reach their mirrors
as they do here. The whole `make dist` (the image needs a Docker engine of its own inside, the
chart a Go toolchain) is what tests/packaging/test_readme.py runs on this machine."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from .conftest import VERSION, docker
from .test_readme import ARTIFACTS, fresh_copy

pytestmark = pytest.mark.integration

BASE = "local/bookworm:minbase"
PACKAGE = "prometheus-storpath-exporter"
# What of this machine's environment reaches the mirrors (nothing else is passed in).
NETWORK_ENV = ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
               "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST", "PIP_DEFAULT_TIMEOUT")
CA_DIR = Path("/usr/local/share/ca-certificates")

SCRIPT = """\
set -eu
cd /src
! command -v make >/dev/null && ! command -v dpkg-buildpackage >/dev/null && ! command -v git >/dev/null
./scripts/install
dpkg-query -W -f '${Package}\\n' | sort >/out/after-install.txt
make --no-print-directory dist-deb DIST_DIR=/out
dpkg-query -W -f '${Package}\\n' | sort >/out/installed.txt
"""


@pytest.fixture(scope="module")
def base_image(docker_host) -> str:
    if docker("image", "inspect", BASE, check=False).returncode != 0:
        from tests.integration import harness

        harness.build_images(["storpath"])  # and the base image under it
    return BASE


def test_dist_setup_alone_builds_the_deb_in_a_fresh_container(base_image, tmp_path):
    src = fresh_copy(tmp_path / "src")
    for leftover in (".venv", ".cache", "dist"):
        assert not (src / leftover).exists(), leftover
    out = tmp_path / "out"
    out.mkdir()
    env = []
    for name in NETWORK_ENV:
        if os.environ.get(name):
            env += ["-e", f"{name}={os.environ[name]}"]
    cas = sorted(CA_DIR.glob("*.crt")) if CA_DIR.is_dir() else []
    mounts = ["-v", f"{src}:/src", "-v", f"{out}:/out"]
    if cas:
        ca_copy = tmp_path / "ca"
        ca_copy.mkdir()
        for ca in cas:
            shutil.copy(ca, ca_copy)
        mounts += ["-v", f"{ca_copy}:{CA_DIR}:ro"]
        # pip's own bundle knows only the public authorities: point it at the system's.
        env += ["-e", "PIP_CERT=/etc/ssl/certs/ca-certificates.crt"]
    started = time.monotonic()
    result = docker("run", "--rm", *mounts, *env, base_image, "bash", "-c", SCRIPT, timeout=2400, check=False)
    took = time.monotonic() - started
    assert result.returncode == 0, f"{result.stdout[-6000:]}\n{result.stderr[-6000:]}"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with open(ARTIFACTS / "fresh-machine-timings.txt", "a") as record:
        record.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} install + make dist-deb in {base_image}: {took:.0f} s\n")
    print(f"./scripts/install and make dist-deb in a fresh {base_image} container: {took:.0f} s")

    (deb,) = out.glob(f"{PACKAGE}_{VERSION}-1_all.deb")
    contents = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True, check=True).stdout
    assert "./usr/bin/storpath" in contents
    assert f"./lib/systemd/system/{PACKAGE}.service" in contents
    assert "/storpath/http/runbooks/PcieLinkSpeedBelowExpected.md" in contents  # served at /runbooks/
    after_install = set((out / "after-install.txt").read_text().split())
    installed = set((out / "installed.txt").read_text().split())
    # what made it: the README's install (make among it), then dist-setup: debian/control's
    # Build-Depends (the three once missed included) came with make dist-deb, not before it
    build_depends = {"debhelper", "dh-python", "python3-cheroot", "python3-bcrypt", "python3-prometheus-client"}
    assert "make" in after_install and not build_depends & after_install
    assert build_depends | {"dpkg-dev", "fakeroot"} <= installed
