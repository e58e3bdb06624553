"""The RAID tools' systemd drop-in (deploy/systemd/raid-tools.conf) against what each tool needs
(docs/raid-tools.md, read from the kernel drivers' checks): every need granted, nothing more,
the shipped unit's sandbox left as it is, the device nodes it makes the ones the drivers
register without a node, and the drop-in offered by the install script and the .deb."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Dict, List

from storpath.readers.raid import tools as raid_tools

REPO = Path(__file__).resolve().parents[2]
UNIT = REPO / "deploy" / "systemd" / "storpath.service"
DROPIN = REPO / "deploy" / "systemd" / "raid-tools.conf"

# Per tool (the names storpath.readers.raid runs), what docs/raid-tools.md says it needs.
NEEDS = {
    "storcli": {"caps": {"CAP_SYS_ADMIN"}, "devices": {"char-megaraid_sas_ioctl rw"}, "groups": set()},
    "megacli": {"caps": {"CAP_SYS_ADMIN"}, "devices": {"char-megaraid_sas_ioctl rw"}, "groups": set()},
    "ssacli": {"caps": {"CAP_SYS_RAWIO"}, "devices": {"char-sg rw"}, "groups": {"disk"}},
    "arcconf": {"caps": {"CAP_SYS_RAWIO", "CAP_SYS_ADMIN"}, "devices": {"char-aac rw", "char-sg rw"},
                "groups": {"disk"}},
    "smartctl": {"caps": {"CAP_SYS_ADMIN"}, "devices": {"block-sd r", "char-megaraid_sas_ioctl rw"},
                 "groups": {"disk"}},
}
# What the drop-in may set at all: the grants, and the step that makes the device nodes.
KEYS = {"CapabilityBoundingSet", "AmbientCapabilities", "SupplementaryGroups", "DeviceAllow", "ExecStartPre"}


def settings(path: Path) -> Dict[str, List[str]]:
    """[Service] assignments in order, each key's values as listed (systemd's continuation lines joined)."""
    out: Dict[str, List[str]] = {}
    section = None
    for line in path.read_text().replace("\\\n", "").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            section = line
            continue
        if section == "[Service]":
            key, _, value = line.partition("=")
            out.setdefault(key, []).append(value)
    return out


def test_every_tool_storpath_runs_has_its_needs_written_down():
    assert set(NEEDS) == set(raid_tools.ALIASES)
    text = (REPO / "docs" / "raid-tools.md").read_text()
    for name in ("storcli", "perccli", "MegaCli", "ssacli", "hpssacli", "hpacucli", "arcconf", "smartctl"):
        assert f"| {name}" in text or f", {name}" in text, name


def test_the_drop_in_grants_what_each_tool_needs_and_nothing_more():
    unit, dropin = settings(UNIT), settings(DROPIN)
    assert set(dropin) <= KEYS, set(dropin) - KEYS
    caps = set().union(*(need["caps"] for need in NEEDS.values()))
    devices = set().union(*(need["devices"] for need in NEEDS.values()))
    groups = set().union(*(need["groups"] for need in NEEDS.values()))
    # The unit starts from nothing (an empty bounding set resets it), the drop-in adds.
    assert unit["CapabilityBoundingSet"] == [""] and unit["AmbientCapabilities"] == [""]
    for key in ("CapabilityBoundingSet", "AmbientCapabilities"):
        granted = {cap for value in dropin[key] for cap in value.split()}
        assert granted == caps, (key, granted)
    assert set(dropin["DeviceAllow"]) == devices and len(dropin["DeviceAllow"]) == len(devices)
    assert "DeviceAllow" not in unit
    assert {group for value in dropin["SupplementaryGroups"] for group in value.split()} == groups
    for tool, need in NEEDS.items():
        assert need["caps"] <= caps and need["devices"] <= set(dropin["DeviceAllow"]), tool
    # The sandbox stays: only the named devices, no new privileges, no privileged system calls.
    assert unit["DevicePolicy"] == ["closed"] and unit["NoNewPrivileges"] == ["yes"]
    assert "~@privileged" in unit["SystemCallFilter"] and unit["DynamicUser"] == ["yes"]
    assert "CAP_MKNOD" not in caps and "CAP_DAC_OVERRIDE" not in caps


def _node_maker(root: Path) -> str:
    """The drop-in's ExecStartPre as sh runs it, on a fake root, printing what it would do."""
    (command,) = settings(DROPIN)["ExecStartPre"]
    match = re.fullmatch(r"-\+/bin/sh -c '(.*)'", command)
    assert match, command
    body = match.group(1).replace("$$", "$")
    body = body.replace("/sys/class/", f"{root}/sys/class/").replace("/dev/", f"{root}/dev/")
    body = body.replace("</proc/devices", f"<{root}/devices")
    for tool in ("mknod", "chgrp", "chmod"):
        body = re.sub(rf"\b{tool} ", f"echo {tool} ", body)
    return body


def test_the_device_nodes_made_are_those_the_drivers_register_without_one(tmp_path):
    # /proc/devices and /sys/class/scsi_host as a host with two aacraid controllers and a
    # MegaRAID one gives them (Documentation/admin-guide/devices.rst: sg is 21, sd 8).
    (tmp_path / "devices").write_text("Character devices:\n  1 mem\n 21 sg\n241 megaraid_sas_ioctl\n242 aac\n"
                                      "\nBlock devices:\n  8 sd\n")
    for host, driver in (("host0", "aacraid"), ("host1", "aacraid"), ("host2", "megaraid_sas")):
        (tmp_path / "sys" / "class" / "scsi_host" / host).mkdir(parents=True)
        (tmp_path / "sys" / "class" / "scsi_host" / host / "proc_name").write_text(driver + "\n")
    (tmp_path / "dev").mkdir()
    done = subprocess.run(["sh", "-c", _node_maker(tmp_path)], capture_output=True, text=True, timeout=10)
    assert done.returncode == 0, done.stderr
    made = [line.replace(str(tmp_path), "") for line in done.stdout.splitlines() if line.startswith("mknod")]
    assert made == ["mknod -m 0660 /dev/megaraid_sas_ioctl_node c 241 0", "mknod -m 0660 /dev/aac0 c 242 0",
                    "mknod -m 0660 /dev/aac1 c 242 1"]
    owned = [line.replace(str(tmp_path), "") for line in done.stdout.splitlines() if line.startswith("chgrp")]
    assert owned == ["chgrp storpath /dev/megaraid_sas_ioctl_node", "chgrp storpath /dev/aac0",
                     "chgrp storpath /dev/aac1"]


def test_a_host_without_those_drivers_gets_no_node(tmp_path):
    (tmp_path / "devices").write_text("Character devices:\n  1 mem\n 21 sg\n")
    (tmp_path / "dev").mkdir()
    done = subprocess.run(["sh", "-c", _node_maker(tmp_path)], capture_output=True, text=True, timeout=10)
    assert done.returncode == 0 and done.stdout == "", done


def test_installed_by_the_install_script_and_the_package():
    install = (REPO / "deploy" / "systemd" / "install").read_text()
    assert '--raid-tools) raid=1' in install
    assert 'install -m 0644 "$HERE/raid-tools.conf" "$helper_dropins/raid-tools.conf"' in install
    lines = (REPO / "debian" / "prometheus-storpath-exporter.install").read_text().splitlines()
    assert "deploy/systemd/raid-tools.conf usr/share/prometheus-storpath-exporter/systemd/" in lines
    # The package's user and group, which the nodes are given (postinst: adduser --group storpath).
    assert "adduser --quiet --system --group" in (REPO / "debian" / "prometheus-storpath-exporter.postinst").read_text()
