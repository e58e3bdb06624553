"""One version: exporter/storpath/__init__.py. What Debian's tooling and Helm need written down
(debian/changelog, Chart.yaml) must agree with it; the manifests deploy that tag."""

from __future__ import annotations

import re
import subprocess
import tomllib

import yaml

from .conftest import REPO, VERSION


def test_debian_changelog_chart_and_manifests_follow_the_version():
    top = (REPO / "debian" / "changelog").read_text().splitlines()[0]
    assert re.match(rf"^storpath \({re.escape(VERSION)}-\d+\) ", top), top
    chart = yaml.safe_load((REPO / "deploy/helm/storpath/Chart.yaml").read_text())
    assert chart["version"] == chart["appVersion"] == VERSION
    kustomization = yaml.safe_load((REPO / "deploy/kubernetes/base/kustomization.yaml").read_text())
    assert [i["newTag"] for i in kustomization["images"]] == [VERSION]


def test_license_is_the_apache_license_pyproject_names():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    # An SPDX expression (PEP 639): setuptools deprecates the {text = ...} table and refuses it
    # after 2027-02-18; 77 is the first setuptools that reads the string.
    assert project["project"]["license"] == "Apache-2.0"
    assert project["project"]["license-files"] == ["LICENSE"]
    assert project["build-system"]["requires"] == ["setuptools>=77"]
    assert not [c for c in project["project"]["classifiers"] if c.startswith("License ::")]
    text = (REPO / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text and "END OF TERMS AND CONDITIONS" in text


def test_project_urls():
    urls = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["urls"]
    assert {"Homepage", "Documentation", "Source", "Issues", "Changelog"} <= set(urls)
    assert all(u.startswith("https://github.com/storpath/storpath") for u in urls.values())


def test_the_debian_patch_still_applies_to_pyproject(tmp_path):
    """Debian bookworm's setuptools (66) reads only the license table: debian/patches/ gives it
    that form. The patch must apply as the file stands (dpkg-source allows no fuzz)."""
    (tmp_path / "pyproject.toml").write_text((REPO / "pyproject.toml").read_text())
    patch = REPO / "debian" / "patches" / "bookworm-setuptools-license-table.patch"
    assert patch.name in (REPO / "debian" / "patches" / "series").read_text().split()
    result = subprocess.run(["patch", "-p1", "--fuzz=0", "-i", str(patch)], cwd=tmp_path, capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    patched = tomllib.loads((tmp_path / "pyproject.toml").read_text())
    assert patched["project"]["license"] == {"text": "Apache-2.0"}
    assert patched["tool"]["setuptools"]["license-files"] == ["LICENSE"]
    # The container image and deploy/systemd/install --debian-deps do the same with a script.
    (tmp_path / "script").mkdir()
    (tmp_path / "script" / "pyproject.toml").write_text((REPO / "pyproject.toml").read_text())
    subprocess.run([str(REPO / "deploy" / "pyproject-license-table"), str(tmp_path / "script")], check=True)
    assert (tmp_path / "script" / "pyproject.toml").read_text() == (tmp_path / "pyproject.toml").read_text()
