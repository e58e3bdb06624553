"""Replaying another machine's sysfs opens no device node of this host: without
--path.dev, NVMe Identify and SMART (ioctls and nvme-cli on /dev/nvme*) and fio on /dev
paths are not run, and storpath says so once."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pytest

from storpath import cli
from storpath.commands import options
from storpath.scrape.probes.devices import resolve
from storpath.readers import nvme, nvme_health
from storpath.base.roots import NO_DEVICES, Roots
from tests.conftest import ROOT


def roots_of(*argv):
    args = cli.build_parser().parse_args(["check", *argv])
    return options.roots_from(options.resolve_config(args))


def test_replayed_sysfs_without_path_dev_has_no_device_nodes(tmp_path):
    assert roots_of(f"--path.sysfs={tmp_path}").dev == ""
    assert roots_of(f"--path.sysfs={tmp_path}", f"--path.dev={tmp_path}/dev").dev == f"{tmp_path}/dev"
    assert roots_of().dev == "/dev" and roots_of("--path.sysfs=/sys/").dev == "/dev"
    config = tmp_path / "storpath.yml"
    config.write_text(f"paths:\n  dev: {tmp_path}/devices\n")
    assert roots_of(f"--config.file={config}", f"--path.sysfs={tmp_path}").dev == f"{tmp_path}/devices"


@pytest.fixture
def no_device_access(monkeypatch):
    """Fail on any ioctl or nvme-cli run."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"a device node was opened: {args}")
    for module in (nvme, nvme_health):
        monkeypatch.setattr(module, "admin_command", refuse, raising=False)
        monkeypatch.setattr(module, "identify_nvme_cli", refuse, raising=False)
    monkeypatch.setattr(nvme, "run_command", refuse)
    real_open, real_stat = os.open, os.stat

    def guarded(real):
        def call(path, *args, **kwargs):
            if str(path).startswith("/dev/"):
                refuse(path)
            return real(path, *args, **kwargs)
        return call
    monkeypatch.setattr(os, "open", guarded(real_open))
    monkeypatch.setattr(os, "stat", guarded(real_stat))


def test_nvme_reads_open_no_device_node(tmp_path, no_device_access):
    roots = Roots(sysfs=str(tmp_path), dev="")
    result = nvme.identify_namespace(roots, "nvme0", 1)
    assert (result.identify, result.source) == (None, None) and "--path.dev is not given" in result.error
    health = nvme_health.read_health(roots, "nvme0")
    assert "--path.dev is not given" in health.error
    assert nvme_health.read_thresholds(roots, "nvme0") is None
    assert resolve(roots, "device", "/dev/nvme0n1").problem.endswith("--path.dev is not given")
    with pytest.raises(ValueError):
        roots.devpath("nvme0")


def test_said_once_in_the_log(caplog):
    caplog.set_level(logging.WARNING, logger="storpath")
    from storpath.base import log
    log._seen.discard(("no-devices",))
    options.say_no_devices(Roots(sysfs="/elsewhere", dev=""))
    options.say_no_devices(Roots(sysfs="/elsewhere", dev=""))
    options.say_no_devices(Roots(sysfs="/elsewhere", dev="", captured="/captured"))  # nothing left unread
    assert [r.getMessage() for r in caplog.records] == [NO_DEVICES]


def test_check_says_it_as_a_note(machine_tree):
    root = machine_tree("laptop-thinkpad-x1", "healthy")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "exporter"))
    result = subprocess.run([sys.executable, "-m", "storpath", "check", "--json", f"--path.sysfs={root}/sys",
                             f"--path.procfs={root}/proc", "--no-collector.zfs", "--no-collector.probes"],
                            capture_output=True, text=True, env=env, timeout=120)
    report = json.loads(result.stdout)
    assert [n for n in report["notes"] if n["message"] == NO_DEVICES], report["notes"]
