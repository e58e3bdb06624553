"""The wheel and sdist of `make dist-python`: installed into a fresh venv and with pipx, as a user
would, then `storpath --help` and `storpath serve` on a fixture tree, scraped."""

from __future__ import annotations

import os
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest

from storpath.examples import EXAMPLES
from tests.conftest import require_tool

from .conftest import NVME_SPEED, REPO, VERSION, check_runbook_served, make_dist, scrape, serving

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def python_dist(dist_dir) -> Path:
    make_dist("dist-python", dist_dir)
    return dist_dir


def wheel(dist: Path) -> Path:
    (found,) = dist.glob(f"storpath-{VERSION}-py3-none-any.whl")
    return found


def test_wheel_and_sdist_carry_version_and_license(python_dist):
    with zipfile.ZipFile(wheel(python_dist)) as whl:
        names = whl.namelist()
        metadata = whl.read(f"storpath-{VERSION}.dist-info/METADATA").decode()
    assert f"Version: {VERSION}\n" in metadata
    assert "License-Expression: Apache-2.0\n" in metadata and "Project-URL: Source, " in metadata
    assert any(n.startswith(f"storpath-{VERSION}.dist-info/") and n.endswith("LICENSE") for n in names), names
    assert "storpath/cli.py" in names
    shipped = [f"storpath/examples/{example.name}.tar.gz" for example in EXAMPLES]
    # the runbooks it serves at /runbooks/: docs/runbooks/, every one
    shipped += [f"storpath/http/runbooks/{runbook.name}" for runbook in (REPO / "docs" / "runbooks").glob("*.md")]
    assert set(shipped) <= set(names), sorted(set(shipped) - set(names))
    with tarfile.open(python_dist / f"storpath-{VERSION}.tar.gz") as sdist:
        assert f"storpath-{VERSION}/LICENSE" in sdist.getnames()
        assert {f"storpath-{VERSION}/exporter/{name}" for name in shipped} <= set(sdist.getnames())


def check_installed(storpath: Path, sysfs_tree: Path, log: Path) -> None:
    result = subprocess.run([str(storpath), "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "serve" in result.stdout, result.stdout + result.stderr
    with serving([str(storpath), "serve", f"--path.sysfs={sysfs_tree}"], log) as url:
        text = scrape(url)
        assert NVME_SPEED.search(text)
        check_runbook_served(url)
    # The example machines come with the package: a demonstration needs no clone.
    result = subprocess.run([str(storpath), "check", "--example", "gen4-at-gen3"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 1 and "PCIe link trained at 8 GT/s (Gen3)" in result.stdout, result.stdout + result.stderr
    # Installed, storpath has no .git beside it: the build wrote the revision it was made from.
    revision = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert f'revision="{revision}"' in text, [line for line in text.splitlines() if "build_info{" in line]


def test_wheel_in_a_fresh_venv(python_dist, sysfs_tree, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", str(venv)], check=True, timeout=120)
    result = subprocess.run([str(venv / "bin/pip"), "install", "-q", str(wheel(python_dist))],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    check_installed(venv / "bin/storpath", sysfs_tree, tmp_path / "venv.log")


def test_wheel_with_pipx(python_dist, sysfs_tree, tmp_path):
    pipx = require_tool("pipx", "pipx")
    env = {**os.environ, "PIPX_HOME": str(tmp_path / "pipx"), "PIPX_BIN_DIR": str(tmp_path / "bin"),
           "PIPX_MAN_DIR": str(tmp_path / "man"), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    env.pop("VIRTUAL_ENV", None)
    result = subprocess.run([pipx, "install", str(wheel(python_dist))], capture_output=True, text=True,
                            timeout=600, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"storpath {VERSION}" in result.stdout, result.stdout
    check_installed(tmp_path / "bin/storpath", sysfs_tree, tmp_path / "pipx.log")
