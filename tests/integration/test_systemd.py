"""deploy/systemd: the unit and its drop-ins pass `systemd-analyze verify`, the installer works.

The unit is verified inside a temporary root (--root): deploy/systemd/install writes the unit and
drop-ins there (DESTDIR), the system's own unit directory is copied in (targets the unit refers to),
and ExecStart's binary exists, from a real venv install or a stub; so does ExecReload's /bin/kill.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from . import harness
from .conftest import missing

SYSTEMD_DIR = harness.REPO / "deploy" / "systemd"
INSTALL = SYSTEMD_DIR / "install"
SYSTEM_UNITS = next((p for p in (Path("/usr/lib/systemd/system"), Path("/lib/systemd/system")) if p.is_dir()), None)


@pytest.fixture(scope="module")
def analyze() -> str:
    path = shutil.which("systemd-analyze")
    if not path or SYSTEM_UNITS is None:
        missing("systemd-analyze not installed (Debian package systemd)")
    return path


def make_root(tmp_path: Path, *install_args: str) -> Path:
    root = tmp_path / "root"
    (root / "usr/lib/systemd").mkdir(parents=True)
    shutil.copytree(SYSTEM_UNITS, root / "usr/lib/systemd/system", symlinks=True)
    r = subprocess.run([str(INSTALL), *install_args], env={"DESTDIR": str(root), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    kill = root / "bin/kill"  # ExecReload's
    kill.parent.mkdir(parents=True)
    kill.write_text("#!/bin/sh\nexit 0\n")
    kill.chmod(0o755)
    return root


def verify(analyze: str, root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([analyze, "verify", f"--root={root}", "storpath.service"], capture_output=True, text=True)


@pytest.mark.parametrize("dropins", [(), ("--nvme-identify",), ("--nvme-identify", "--raw-device-probes")],
                         ids=["default", "nvme-identify", "all-drop-ins"])
def test_unit_verifies(analyze, tmp_path, dropins):
    root = make_root(tmp_path, "--unit-only", *dropins)
    stub = root / "opt/storpath/bin/storpath"
    stub.parent.mkdir(parents=True)
    stub.write_text("#!/bin/sh\nexit 0\n")
    stub.chmod(0o755)
    r = verify(analyze, root)
    # Unknown keys and bad values are only warnings: any output is a failure.
    assert r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(), r.stdout + r.stderr


def test_unit_verify_fails_without_binary(analyze, tmp_path):
    """The check above is meaningful: without ExecStart's binary, verify complains."""
    root = make_root(tmp_path, "--unit-only")
    r = verify(analyze, root)
    assert r.returncode != 0 and "not executable" in r.stderr


def test_unit_reloads_and_sets_the_open_files_limit(analyze, tmp_path):
    """`systemctl reload` sends SIGHUP (as Debian's units for Prometheus, Alertmanager and
    node_exporter do), and the soft open files limit storpath raises to is not systemd's 1024."""
    root = make_root(tmp_path, "--unit-only")
    unit = (root / "etc/systemd/system/storpath.service").read_text()
    assert re.search(r"^ExecReload=/bin/kill -HUP \$MAINPID$", unit, re.M)
    limit = re.search(r"^LimitNOFILE=(\d+)$", unit, re.M)
    assert limit and int(limit.group(1)) >= 8192
    # Every --web.listen-address given is listened on: the unit gives none, so STORPATH_ARGS can.
    assert "--web.listen-address" not in re.search(r"^ExecStart=.*$", unit, re.M).group(0)


def test_unit_sandbox(analyze, tmp_path):
    root = make_root(tmp_path, "--unit-only")
    unit = (root / "etc/systemd/system/storpath.service").read_text()
    for setting in ("ProtectSystem=strict", "ProtectHome=yes", "NoNewPrivileges=yes", "PrivateTmp=yes",
                    "ReadOnlyPaths=/sys", "StateDirectory=storpath", "DynamicUser=yes", "DevicePolicy=closed"):
        assert re.search(rf"^{re.escape(setting)}$", unit, re.M), setting
    assert re.search(r"^CapabilityBoundingSet=$", unit, re.M), "no capabilities by default"
    r = subprocess.run([analyze, "security", "--offline=true", f"--root={root}", "--threshold=30",
                        "storpath.service"], capture_output=True, text=True)
    level = re.search(r"Overall exposure level for storpath.service: ([\d.]+)", r.stdout + r.stderr)
    assert level, r.stdout + r.stderr
    print(f"systemd-analyze security exposure: {level.group(1)}")
    assert float(level.group(1)) <= 3.0, r.stdout


def test_install_into_venv(analyze, tmp_path, require_exporter):
    """Full install (venv with Debian's prometheus-client, yaml, cheroot, bcrypt): ExecStart's binary runs."""
    r = subprocess.run(["/usr/bin/python3", "-c", "import prometheus_client, yaml, cheroot, bcrypt, venv"],
                       capture_output=True)
    if r.returncode != 0:
        missing("Debian's python3-venv, python3-prometheus-client, python3-yaml, python3-cheroot, python3-bcrypt "
                "are needed for the venv install")
    root = make_root(tmp_path, "--debian-deps")
    binary = root / "opt/storpath/bin/storpath"
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and "storpath" in out.stdout + out.stderr, out
    r = verify(analyze, root)
    assert r.returncode == 0 and not (r.stdout + r.stderr).strip(), r.stdout + r.stderr
