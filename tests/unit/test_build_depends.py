"""`make dist-setup` installs the Debian package's Build-Depends from debian/control itself:
scripts/build-depends reads the whole field (continuation lines included), and apt reads
what it prints as a relation string (apt-get satisfy --simulate, nothing installed)."""

import os
import re
import shutil
import subprocess

import pytest

from tests.conftest import ROOT


def _control_build_depends():
    """The field as debian/control writes it, read here independently of the script."""
    text = open(os.path.join(ROOT, "debian", "control"), encoding="utf-8").read()
    match = re.search(r"^Build-Depends:(.*(?:\n[ \t].*)*)", text, re.M)
    return [part.strip().split()[0] for part in match.group(1).replace("\n", " ").split(",") if part.strip()]


def _printed(control_dir=None):
    script = os.path.join(ROOT, "scripts", "build-depends")
    if control_dir is None:
        return subprocess.run([script], capture_output=True, text=True, check=True).stdout.strip()
    copy = os.path.join(control_dir, "scripts")
    os.makedirs(copy, exist_ok=True)
    shutil.copy(script, copy)
    return subprocess.run([os.path.join(copy, "build-depends")], capture_output=True, text=True)


def test_every_build_depends_of_debian_control_is_printed():
    printed = [part.strip().split()[0] for part in _printed().split(",")]
    assert printed == _control_build_depends()
    assert "python3-prometheus-client" in printed and "python3-cheroot" in printed  # the ones once missed


def test_dist_setup_runs_it_and_keeps_no_second_list():
    recipe = open(os.path.join(ROOT, "mk", "dist.mk"), encoding="utf-8").read()
    assert re.search(r"^dist-setup:.*\n(\t.*\n)*\tscripts/build-depends --install$", recipe, re.M)
    listed = open(os.path.join(ROOT, "scripts", "apt-packages-dist.txt"), encoding="utf-8").read()
    names = {line.split("#")[0].strip() for line in listed.splitlines()} - {""}
    assert not names & set(_control_build_depends())


def test_a_control_file_without_the_field_is_refused(tmp_path):
    (tmp_path / "debian").mkdir()
    (tmp_path / "debian" / "control").write_text("Source: x\nMaintainer: y\n")
    result = _printed(str(tmp_path))
    assert result.returncode == 1 and "no Build-Depends" in result.stderr


@pytest.mark.skipif(not shutil.which("apt-get"), reason="apt-get is not installed (not a Debian machine)")
def test_apt_reads_what_it_prints():
    result = subprocess.run(["apt-get", "satisfy", "--simulate", "build-essential, dpkg-dev, " + _printed()],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
