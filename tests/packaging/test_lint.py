"""The Debian package and the systemd units as Debian's own tools judge them: `lintian --pedantic`
on the .deb of `make dist-deb` reports nothing but the overrides of
debian/prometheus-storpath-exporter.lintian-overrides (each with its reason), and
`systemd-analyze security --offline` finds in deploy/systemd/storpath.service and in the
package's unit only the exposures justified below."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import require_tool

from .conftest import REPO, VERSION, make_dist

PACKAGE = "prometheus-storpath-exporter"
OVERRIDES = REPO / "debian" / f"{PACKAGE}.lintian-overrides"


@pytest.fixture(scope="module")
def deb(dist_dir) -> Path:
    make_dist("dist-deb", dist_dir)
    (found,) = dist_dir.glob(f"{PACKAGE}_{VERSION}-1_all.deb")
    return found


def lintian(*args: str) -> str:
    binary = require_tool("lintian", "lintian")
    result = subprocess.run([binary, "--pedantic", "--display-info", "--show-overrides", "--no-tag-display-limit",
                             *args], capture_output=True, text=True, timeout=600)
    assert result.returncode in (0, 1, 2), result.stderr
    return result.stdout + result.stderr


def test_lintian_pedantic_reports_nothing_but_the_justified_overrides(deb):
    out = lintian(str(deb))
    tags = [line for line in out.splitlines() if re.match(r"[EWIPXC]: ", line)]
    assert not tags, "\n".join(tags)
    overridden = {line.split()[2] for line in out.splitlines() if line.startswith("O: ")}
    declared = {line.split()[0] for line in OVERRIDES.read_text().splitlines() if line and not line.startswith("#")}
    # Every override is still needed (lintian reports it as overridden), and none is silent.
    assert overridden == declared, (overridden, declared)


def test_every_lintian_override_says_why():
    reason = False
    for line in OVERRIDES.read_text().splitlines():
        if line.startswith("#"):
            reason = True
        elif line:
            assert reason, f"no comment above {line!r}"
        else:
            reason = False


def test_the_package_carries_the_manual_and_recommends_the_optional_tools(deb):
    contents = subprocess.run(["dpkg-deb", "--contents", str(deb)], capture_output=True, text=True, check=True).stdout
    assert "./usr/share/man/man1/storpath.1.gz" in contents
    fields = subprocess.run(["dpkg-deb", "--field", str(deb), "Depends", "Recommends"], capture_output=True,
                            text=True, check=True).stdout
    depends = re.search(r"^Depends: (.*)$", fields, re.M).group(1)
    recommends = re.search(r"^Recommends: (.*)$", fields, re.M).group(1)
    for tool in ("fio", "nvme-cli", "sg3-utils"):
        assert tool not in depends and tool in recommends, tool


# What systemd-analyze still counts against the units, and why each stays.
JUSTIFIED = {
    "SystemCallFilter=~@resources": "fio (read probes) sets its I/O priority and CPU affinity",
    "RootDirectory=/RootImage=": "the exporter reads the host's /sys, /proc and /dev: that is its job",
    "PrivateDevices=": "DevicePolicy=closed already denies device nodes; the nvme-identify and raw-device-probes "
                       "drop-ins add the few the optional features open, which PrivateDevices would hide",
    "PrivateMounts=": "ProtectSystem=strict and ReadOnlyPaths already give it a mount namespace of its own",
    "MemoryDenyWriteExecute=": "ctypes (NVMe ioctls) makes a libffi closure, which needs W+X memory "
                               "(the unit's comment)",
    "RestrictAddressFamilies=~AF_UNIX": "logging to journald and running nvme/zpool/fio use local sockets",
    "RestrictAddressFamilies=~AF_(INET|INET6)": "it serves /metrics over TCP",
    "ProcSubset=": "it reads /proc/mdstat, /proc/partitions and the like, which subset=pid hides",
    "PrivateNetwork=": "it serves /metrics on the host's network",
    "PrivateUsers=": "a user namespace would make the sysfs files' owners unknown and break the drop-ins' "
                     "capabilities",
    "DeviceAllow=": "the pseudo-devices DevicePolicy=closed leaves (char-rtc read): nothing of the storage",
    "IPAddressDeny=": "Prometheus scrapes it from addresses only the site knows; --web.config.file and the "
                      "firewall restrict them",
    "UMask=": "UMask=0027: its state files are readable by its own group on purpose (no one else)",
}


def units(deb: Path, tmp: Path):
    yield "storpath.service", REPO / "deploy" / "systemd" / "storpath.service"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp)], check=True)
    yield f"{PACKAGE}.service", tmp / "lib" / "systemd" / "system" / f"{PACKAGE}.service"


def test_systemd_analyze_security_finds_only_justified_exposures(deb, tmp_path):
    analyze = require_tool("systemd-analyze", "systemd")
    for name, unit in units(deb, tmp_path):
        result = subprocess.run([analyze, "security", "--offline=true", "--no-pager", str(unit)],
                                capture_output=True, text=True, timeout=120)
        out = result.stdout + result.stderr
        level = re.search(rf"Overall exposure level for {re.escape(name)}: ([\d.]+)", out)
        assert level, out
        exposed = {re.match(r"✗ (\S+)", line).group(1) for line in out.splitlines() if line.startswith("✗ ")}
        assert exposed <= set(JUSTIFIED), f"{name}: not justified: {sorted(exposed - set(JUSTIFIED))}"
        assert float(level.group(1)) <= 2.0, f"{name}: exposure {level.group(1)}\n{out}"
