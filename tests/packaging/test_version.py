"""One version: exporter/storpath/__init__.py. What Debian's tooling and Helm need written down
(debian/changelog, Chart.yaml) must agree with it; the manifests deploy that tag."""

from __future__ import annotations

import re

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
    assert 'license = {text = "Apache-2.0"}' in (REPO / "pyproject.toml").read_text()
    text = (REPO / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text and "END OF TERMS AND CONDITIONS" in text
