"""The raid collector's background task against tools that fail the way they do in the field: a
storcli that hangs while a volume is degraded (the volume stays degraded, its age says how old),
a controller listed twice (one series, the worst state), a volume naming /dev/watchdog (smartctl
never opens it), a parser that raises (that tool alone is down), and a reload or stop while a
tool hangs (never two tool runs at once, no tool process left)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import threading
import time
from types import SimpleNamespace

import pytest

from storpath.base.background import Scheduler
from storpath.collectors.base import Context
from storpath.collectors.raid import RaidCollector
from storpath.scrape.exposition import pieces
from storpath.readers.raid import tools as raid_tools
from storpath.readers.raid import RaidReader
from storpath.readers.raid.merge import deduplicated, parse_storcli
from storpath.base.roots import Roots
from tests import fake_storcli
from tests.snapshots import snapshot_for
from tests.fixtures import builders_raid as build
from tests.unit.test_raid import _controller_with_disk, _smartctl

DRIVE = build.StorcliDrive(32, 0, did=0)


def _outputs(folder, state="Dgrd"):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "controllers.json").write_text(build.storcli_controllers(0, "PERC H730P Mini", "4.300", (0, 3, 0, 0),
                                                                       "SAS-12G"))
    (folder / "drives.json").write_text(build.storcli_drives(0, [DRIVE]))
    (folder / "volumes.json").write_text(build.storcli_volumes(0, [build.StorcliVolume(0, 0, state=state)]))


def _collector(roots, paths, timeout=0.3):
    return RaidCollector(Context(roots=roots, config={"timeout": timeout, "startup_wait": 0,
                                                       **{f"{t}_path": p for t, p in paths.items()}},
                                 scheduler=Scheduler()))


def _pass(collector) -> None:
    """One pass of the raid slow source's background task (storpath.scrape.slow.Raid)."""
    collector.ctx.slow.task("raid").run_once()


def _latest(collector):
    """What a scrape serves of the raid source: the latest pass."""
    return snapshot_for(collector).raid


def _body(collector) -> str:
    rows = collector.values(SimpleNamespace(raid=_latest(collector)))
    return b"".join(pieces(collector.texts.families(rows))).decode()


def _sysfs(tmp_path):
    sys = tmp_path / "sys"
    (sys / "bus/pci/drivers/megaraid_sas/0000:03:00.0").mkdir(parents=True, exist_ok=True)
    return Roots(sysfs=str(sys), dev=str(tmp_path / "dev"))


def test_a_degraded_volume_stays_degraded_through_ten_passes_of_a_hung_storcli(tmp_path):
    folder = tmp_path / "out"
    _outputs(folder, state="Dgrd")
    collector = _collector(_sysfs(tmp_path), {"storcli": fake_storcli.write(tmp_path, folder), "megacli": "/nonexistent"})
    _pass(collector)
    first = getattr(_latest(collector).run, "succeeded", {}).get("storcli")
    (folder / "hang").write_text("")
    for _ in range(10):
        _pass(collector)
        body = _body(collector)
        assert 'storpath_raid_tool_up{tool="storcli"} 0.0' in body
        assert 'storpath_raid_volume_state{controller="storcli/c0",state="degraded",volume="0/0"} 1.0' in body
        assert 'storpath_raid_drive_state{controller="storcli/c0",slot="32:0",state="online"} 1.0' in body
        assert any(line.startswith("storpath_raid_controller_info{") and 'controller="storcli/c0"' in line
                   for line in body.splitlines())
        assert 'storpath_raid_tool_last_success_timestamp_seconds{tool="storcli"} ' in body
    assert _latest(collector).run.succeeded["storcli"] == first  # the age grows, honestly
    # A pass that succeeds says what is true now.
    (folder / "hang").unlink()
    _outputs(folder, state="Optl")
    _pass(collector)
    body = _body(collector)
    assert 'storpath_raid_tool_up{tool="storcli"} 1.0' in body
    assert 'storpath_raid_volume_state{controller="storcli/c0",state="optimal",volume="0/0"} 1.0' in body
    assert _latest(collector).run.succeeded["storcli"] > first
    collector.ctx.slow.close()


def test_a_parser_that_raises_charges_its_own_tool_only(tmp_path, monkeypatch):
    """10^400 in a smartctl document, a 5000-digit MegaCli adapter number: whatever a parser
    raises is that tool's failure; storcli's degraded volume stays."""
    from storpath.readers.raid import megacli as raid_megacli, smartctl as raid_smartctl

    captured = tmp_path / "captured"
    _outputs(captured / "storcli")
    (captured / "megacli").mkdir()
    (captured / "megacli/pdlist.txt").write_text("Adapter #" + "9" * 5000 + "\n")
    (captured / "smartctl").mkdir()
    (captured / "smartctl/c0-0.json").write_text(_smartctl().replace('"value": 60', '"value": 1' + "0" * 400))

    def overflow(*_args):
        raise OverflowError("int too large to convert to float")

    def value_error(*_args):
        raise ValueError("Exceeds the limit (4300 digits) for integer string conversion")

    monkeypatch.setattr(raid_smartctl, "parse_smartctl", overflow)
    monkeypatch.setattr(raid_megacli, "parse_listing", value_error)
    snapshot = RaidReader(Roots(sysfs=str(tmp_path), captured=str(captured))).read()
    assert snapshot.tools["storcli"].ok
    assert not snapshot.tools["megacli"].ok and "ValueError" in snapshot.tools["megacli"].reason
    assert not snapshot.tools["smartctl"].ok and "OverflowError" in snapshot.tools["smartctl"].reason
    assert [(v.controller, v.state) for v in snapshot.inventory.volumes] == [("storcli/c0", "degraded")]


def test_more_drives_than_believed_is_the_tool_down_with_the_reason(tmp_path):
    captured = tmp_path / "captured"
    (captured / "storcli").mkdir(parents=True)
    drives = [build.StorcliDrive(32 + n // 200, n % 200, did=n) for n in range(8193)]
    (captured / "storcli/drives.json").write_text(build.storcli_drives(0, drives))
    snapshot = RaidReader(Roots(sysfs=str(tmp_path), captured=str(captured))).read()
    # The parser's bound per controller (readers.raid_records) speaks first; the task's bound
    # over the whole tool (readers.raid_merge.fenced) is the net behind it.
    reason = snapshot.tools["storcli"].reason
    assert not snapshot.tools["storcli"].ok and "more than 4096 drives on storcli/c0" in reason, reason
    assert snapshot.inventory.drives == []


def test_a_controller_listed_twice_optimal_then_degraded_is_one_series_degraded(tmp_path):
    """storcli listing controller 0 twice, volume 0/0 Optl then Dgrd (its JSON's Controllers array
    with the same controller in two entries)."""
    import json

    one = json.loads(build.storcli_volumes(0, [build.StorcliVolume(0, 0, state="Optl")]))
    two = json.loads(build.storcli_volumes(0, [build.StorcliVolume(0, 0, state="Dgrd")]))
    volumes = json.dumps({"Controllers": one["Controllers"] + two["Controllers"]})
    ctrl = json.loads(build.storcli_controllers(0, "PERC H730P Mini", "4.300", (0, 3, 0, 0), "SAS-12G"))
    controllers = json.dumps({"Controllers": ctrl["Controllers"] * 2})
    drives = json.loads(build.storcli_drives(0, [DRIVE]))
    drives = json.dumps({"Controllers": drives["Controllers"] * 2})
    inventory = deduplicated(parse_storcli(controllers, drives, volumes))
    assert [(v.controller, v.id, v.state) for v in inventory.volumes] == [("storcli/c0", "0/0", "degraded")]
    assert len(inventory.controllers) == 1 and len(inventory.drives) == 1
    assert any("listed more than once" in p.message for p in inventory.problems)
    # and through the collector's exposition: promtool finds no duplicate series
    captured = tmp_path / "captured"
    (captured / "storcli").mkdir(parents=True)
    for name, text in (("controllers", controllers), ("drives", drives), ("volumes", volumes)):
        (captured / f"storcli/{name}.json").write_text(text)
    collector = _collector(Roots(sysfs=str(tmp_path), captured=str(captured)), {})
    _pass(collector)
    body = _body(collector)
    states = [line for line in body.splitlines() if line.startswith("storpath_raid_volume_state{")]
    assert len(states) == len(set(s.rsplit(" ", 1)[0] for s in states)) == 5
    assert 'storpath_raid_volume_state{controller="storcli/c0",state="degraded",volume="0/0"} 1.0' in body
    assert 'storpath_raid_volume_state{controller="storcli/c0",state="optimal",volume="0/0"} 0.0' in body
    promtool = shutil.which("promtool")
    if promtool:
        done = subprocess.run([promtool, "check", "metrics"], input=body.encode(), capture_output=True)
        assert b"duplicate" not in done.stdout + done.stderr and done.returncode in (0, 3), done


def _storcli_naming(tmp_path, device):
    folder = tmp_path / "out"
    folder.mkdir()
    drive = build.StorcliDrive(8, 3, did=44, device_speed="Unknown", link_speed="Unknown", model="HDS723020BLA642")
    (folder / "controllers.json").write_text(build.storcli_controllers(0, "LSI MegaRAID SAS 84016E", "1.12",
                                                                       (0, 3, 0, 0), "SAS-3G", bbu=None))
    (folder / "drives.json").write_text(build.storcli_drives(0, [drive]))
    (folder / "volumes.json").write_text(build.storcli_volumes(0, [build.StorcliVolume(0, 0, drives=[drive],
                                                                                     os_drive=device)]))
    storcli = tmp_path / "storcli"
    storcli.write_text(f"#!/bin/sh\ncase \"$1\" in\n  /call) cat {folder}/controllers.json ;;\n"
                       f"  /call/eall/sall) cat {folder}/drives.json ;;\n  /call/vall) cat {folder}/volumes.json ;;\n"
                       "esac\n")
    storcli.chmod(0o755)
    smartctl = tmp_path / "smartctl"
    smartctl.write_text(f"#!/bin/sh\necho \"$@\" >> {tmp_path}/smartctl.args\n")
    smartctl.chmod(0o755)
    return {"storcli": str(storcli), "smartctl": str(smartctl)}


@pytest.mark.parametrize("device", ["/dev/watchdog", "watchdog"])
def test_smartctl_never_opens_a_node_the_tool_names_that_is_not_a_disk_below_the_controller(tmp_path, device):
    roots = _controller_with_disk(tmp_path)  # sda is below the controller, a block node
    # /dev/watchdog: a character device (misc 10:130) that opening arms
    try:
        os.mknod(tmp_path / "dev/watchdog", stat.S_IFCHR | 0o600, os.makedev(10, 130))
    except PermissionError:
        (tmp_path / "dev/watchdog").write_text("")
    RaidReader(roots, _storcli_naming(tmp_path, device)).read()
    assert not (tmp_path / "smartctl.args").exists()


def test_smartctl_never_opens_a_block_device_below_another_controller(tmp_path):
    roots = _controller_with_disk(tmp_path)
    other = tmp_path / "sys/devices/pci0000:00/0000:00:1f.2/ata1/host1/target1:0:0/1:0:0:0/block/sdb"
    other.mkdir(parents=True)
    (tmp_path / "sys/class/block/sdb").symlink_to(other)
    os.mknod(tmp_path / "dev/sdb", stat.S_IFBLK | 0o600, os.makedev(8, 16))
    RaidReader(roots, _storcli_naming(tmp_path, "/dev/sdb")).read()
    assert not (tmp_path / "smartctl.args").exists()
    (tmp_path / "again").mkdir()
    RaidReader(roots, _storcli_naming(tmp_path / "again", "/dev/sda")).read()  # the same controller's disk: yes
    assert (tmp_path / "again/smartctl.args").read_text().split()[-1] == str(tmp_path / "dev/sda")


def test_a_reload_never_starts_a_tool_beside_a_hung_one_and_stop_leaves_none(tmp_path):
    """The old collectors' storcli hangs; a reload builds new collectors (their task starts at
    once) before the old ones close: the new storcli starts only once the old one is gone."""
    folder = tmp_path / "out"
    _outputs(folder)
    (folder / "hang").write_text("")
    paths = {"storcli": fake_storcli.write(tmp_path, folder), "megacli": "/nonexistent"}
    old = _collector(_sysfs(tmp_path), paths, timeout=30)
    first = threading.Thread(target=old.ctx.slow.task("raid").run_once)
    first.start()
    deadline = time.monotonic() + 5
    while fake_storcli.runs(tmp_path)[0] < 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert fake_storcli.runs(tmp_path)[0] == 1
    new = _collector(_sysfs(tmp_path), paths, timeout=30)
    second = threading.Thread(target=new.ctx.slow.task("raid").run_once)
    second.start()
    time.sleep(1.0)
    assert fake_storcli.runs(tmp_path)[0] == 1  # the new one waits while the old one's storcli lives
    old.ctx.slow.close()  # the reload closes the old collectors: their hung storcli is killed
    first.join(10)
    deadline = time.monotonic() + 5
    while fake_storcli.runs(tmp_path)[0] < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert fake_storcli.runs(tmp_path)[0] == 2
    assert fake_storcli.alive(tmp_path) and len(fake_storcli.alive(tmp_path)) <= 2  # sh and its sleep: one run
    new.ctx.slow.close()  # SIGTERM: the exporter stops, its collectors close
    second.join(10)
    assert not first.is_alive() and not second.is_alive()
    deadline = time.monotonic() + 3
    while fake_storcli.alive(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fake_storcli.alive(tmp_path) == []
    assert raid_tools.live_groups() == []
    _, overlaps = fake_storcli.runs(tmp_path)
    assert overlaps == 0  # never two storcli runs at once


def test_the_task_bound_over_a_whole_tool_holds_whatever_a_parser_lets_through():
    from storpath.readers.raid import merge as raid_merge
    from storpath.readers.raid.records import RaidDrive, RaidInventory

    many = RaidInventory(drives=[RaidDrive(f"storcli/c{n // 4000}", str(n)) for n in range(raid_merge.MAX_DRIVES + 1)])
    tools = {}
    assert raid_merge.fenced("storcli", lambda: many, tools).drives == []
    assert not tools["storcli"].ok and f"{raid_merge.MAX_DRIVES + 1} drives listed" in tools["storcli"].reason


def test_with_a_helper_smartctl_is_asked_for_the_disk_sysfs_places_below_the_controller(tmp_path):
    """A serving container has no host /dev: with `storpath helper` the disk is named by sysfs
    alone (/dev/sda, checked as a block device where the helper runs), and a disk below another
    controller is never asked for."""
    from storpath.readers.raid.tools import block_device_below

    roots = _controller_with_disk(tmp_path)
    other = tmp_path / "sys/devices/pci0000:00/0000:00:1f.2/ata1/host1/target1:0:0/1:0:0:0/block/sdb"
    other.mkdir(parents=True)
    (tmp_path / "sys/class/block/sdb").symlink_to(other)
    no_dev = Roots(sysfs=roots.sysfs, dev="")
    assert block_device_below(no_dev, "sda", "0000:03:00.0") is None  # the node checked here: none
    assert block_device_below(no_dev, "sda", "0000:03:00.0", node_here=False) == "/dev/sda"
    assert block_device_below(no_dev, "sdb", "0000:03:00.0", node_here=False) is None
    assert block_device_below(no_dev, "nope", "0000:03:00.0", node_here=False) is None
