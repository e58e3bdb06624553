"""ZFS: the zpool output parsers (JSON and text, malformed input included), zpool that is
missing, slow or odd, and the collector that must never wait for it.

OpenZFS cannot run on this kernel, so `zpool` itself is played by small shell scripts
that print what OpenZFS prints (or hang, or fail) and exit as it does."""

from __future__ import annotations

import json
import re
import stat
import tempfile
import time

import pytest
from prometheus_client import generate_latest

from storpath.base import log
from storpath.base.background import Scheduler
from storpath.collectors.base import Context
from storpath.collectors.zfs import ZfsCollector
from storpath.report.exporter import StorpathExporter
from storpath.readers.zfs import (ZpoolOutputError, ZpoolReader, find_zfs, parse_count, parse_creation,
                                  parse_ctime, parse_list, parse_scan_line, parse_status_json, parse_status_text,
                                  read_kstat_states, run_zpool)
from storpath.base.roots import Roots
from tests.conftest import run_exporter
from tests.fixtures import machines
from tests.fixtures.builders_zfs import creation_text, list_text, status_json, status_text

INTEL = "intel-r2224wft-switches"


def pools_of(variant):
    module = next(m for m in machines.load(INTEL).modules if m.__name__.endswith("_zfs"))
    return module._pools(variant)


# ---- zpool status -j --json-int ----------------------------------------------------

def test_json_healthy_pools():
    pools = {p.name: p for p in parse_status_json(status_json(pools_of("healthy")))}
    z1, z2 = pools["zpool1"], pools["zpool2"]
    assert z1.state == "online" and z1.data_errors == 0
    leaves = [v for v in z1.vdevs if v.leaf]
    assert [v.name for v in leaves] == [f"nvme{i}n1" for i in range(8)]
    assert {(v.parent, v.type, v.vdev_class) for v in leaves} == {("raidz2-0", "disk", "normal")}
    raidz = next(v for v in z1.vdevs if v.name == "raidz2-0")
    assert (raidz.type, raidz.parent, raidz.leaf) == ("raidz", "zpool1", False)
    assert z1.size_bytes == 25_598_005_084_160 and z1.free_bytes == z1.size_bytes - z1.allocated_bytes
    assert (z1.scan.function, z1.scan.state, z1.scan.end_time) == ("scrub", "finished", 1762653600 + 3 * 3600 + 1234)
    classes = {v.name: (v.vdev_class, v.parent) for v in z2.vdevs}
    assert classes["mirror-1"] == ("log", None) and classes["sde"] == ("log", "mirror-1")
    assert classes["sdg"] == ("cache", None) and classes["sda"] == ("normal", "raidz1-0")


def test_json_degraded_and_checksum():
    degraded = parse_status_json(status_json(pools_of("zfs-degraded")))[0]
    assert degraded.state == "degraded"
    states = {v.name: v.state for v in degraded.vdevs}
    assert states["nvme5n1"] == "removed" and states["raidz2-0"] == "degraded" and states["nvme4n1"] == "online"
    checksum = parse_status_json(status_json(pools_of("zfs-checksum")))[0]
    errors = {v.name: (v.read_errors, v.write_errors, v.checksum_errors) for v in checksum.vdevs}
    assert errors["nvme3n1"] == (0, 0, 37) and errors["nvme2n1"] == (0, 0, 0)
    assert checksum.scan.state == "scanning" and checksum.scan.progress == pytest.approx(0.4989, abs=1e-4)


def test_json_without_json_int_and_early_state_names():
    """Without --json-int every number is a string; 2.3.0's man page showed HEALTHY for vdevs."""
    doc = {"output_version": {"command": "zpool status", "vers_major": 0, "vers_minor": 1},
           "pools": {"tank": {"name": "tank", "state": "ONLINE", "pool_guid": "3920273586464696295",
                              "error_count": "0",
                              "scan_stats": {"function": "SCRUB", "state": "FINISHED",
                                             "start_time": "Wed Jan  7 02:35:05 AM PST 2026",
                                             "end_time": "Wed Jan  7 03:42:23 PM PST 2026", "errors": "0"},
                              "vdevs": {"tank": {"name": "tank", "alloc_space": "62.6G", "total_space": "15.0T",
                                                 "read_errors": "0", "write_errors": "0", "checksum_errors": "1.2K",
                                                 "vdevs": {"raidz1-0": {"name": "raidz1-0", "vdev_type": "raidz",
                                                                        "state": "HEALTHY", "vdevs": {
                                                                            "ca1e": {"name": "ca1e",
                                                                                     "vdev_type": "disk",
                                                                                     "state": "HEALTHY",
                                                                                     "read_errors": "3"}}}}}}}}}
    pool = parse_status_json(json.dumps(doc))[0]
    assert pool.state == "online" and pool.size_bytes is None  # "15.0T" is not a byte count
    assert {v.name: v.state for v in pool.vdevs} == {"tank": None, "raidz1-0": "online", "ca1e": "online"}
    assert next(v for v in pool.vdevs if v.name == "tank").type == "root"
    assert next(v for v in pool.vdevs if v.name == "tank").checksum_errors == 1228
    assert next(v for v in pool.vdevs if v.name == "ca1e").read_errors == 3
    assert pool.scan.state == "finished" and pool.scan.end_time is None  # a date string, not seconds


@pytest.mark.parametrize("text", ["", "{", "[]", '{"pools": []}', "zpool: command not found", "\x00\xff"])
def test_json_malformed_raises(text):
    with pytest.raises(ZpoolOutputError):
        parse_status_json(text)


def test_json_odd_entries_are_skipped():
    doc = {"pools": {"a": "not an object", "b": {"name": "b", "state": "WEIRD", "vdevs": {"b": {"vdevs": 5}},
                                                   "scan_stats": {"function": "TRIM", "state": "SCANNING"}},
                     "c": {"state": "FAULTED", "vdevs": []}}}
    pools = {p.name: p for p in parse_status_json(json.dumps(doc))}
    assert sorted(pools) == ["b", "c"]
    assert pools["b"].state is None and pools["b"].vdevs == [] and pools["b"].scan is None
    assert pools["c"].state == "faulted"


def test_json_no_pools():
    assert parse_status_json('{"output_version": {}, "pools": {}}') == []


# ---- zpool status (text) --------------------------------------------------------------

def test_text_matches_json_for_the_same_pools():
    for variant in ("healthy", "zfs-degraded", "zfs-checksum"):
        pools = pools_of(variant)
        from_json = parse_status_json(status_json(pools))
        from_text = parse_status_text(status_text(pools))
        for a, b in zip(from_json, from_text):
            assert a.name == b.name and a.state == b.state
            assert [(v.name, v.parent, v.vdev_class, v.state, v.leaf, v.type, v.read_errors, v.write_errors,
                     v.checksum_errors) for v in a.vdevs] == \
                   [(v.name, v.parent, v.vdev_class, v.state, v.leaf, v.type, v.read_errors, v.write_errors,
                     v.checksum_errors) for v in b.vdevs], variant
            assert (a.scan.function, a.scan.state) == (b.scan.function, b.scan.state)
            assert a.scan.progress == (pytest.approx(b.scan.progress, abs=1e-4) if b.scan.progress else None)


OLD_TEXT = """\
  pool: tank
 state: DEGRADED
status: One or more devices could not be used because the label is missing or
\tinvalid.  Sufficient replicas exist for the pool to continue
\tfunctioning in a degraded state.
action: Replace the device using 'zpool replace'.
   see: http://zfsonlinux.org/msg/ZFS-8000-4J
  scan: resilvered 1.21T in 0 days 05:12:33 with 0 errors on Tue Mar  3 04:12:33 2020
config:

\tNAME                      STATE     READ WRITE CKSUM
\ttank                      DEGRADED     0     0     0
\t  mirror-0                DEGRADED     0     0     0
\t    sdb                   ONLINE       0     0     0
\t    12873598290453422375  UNAVAIL      0     0     0  was /dev/sdc1
\t  mirror-1                ONLINE       0     0     0
\t    sdd                   ONLINE    1.2K     0     3
\t    sde                   ONLINE       0     0     0
\tspares
\t  sdf                     AVAIL
\t  sdg                     INUSE     currently in use

errors: 2 data errors, use '-v' for a list
"""


def test_text_older_layout_with_spares_and_missing_device():
    pool = parse_status_text(OLD_TEXT)[0]
    assert pool.state == "degraded" and pool.data_errors == 2
    vdevs = {v.name: v for v in pool.vdevs}
    assert vdevs["12873598290453422375"].state == "unavail" and vdevs["12873598290453422375"].parent == "mirror-0"
    assert vdevs["sdd"].read_errors == 1228 and vdevs["sdd"].checksum_errors == 3
    assert vdevs["mirror-1"].type == "mirror" and vdevs["mirror-1"].parent == "tank"
    assert (vdevs["sdf"].vdev_class, vdevs["sdf"].state, vdevs["sdf"].read_errors) == ("spare", "online", None)
    assert vdevs["sdg"].state == "online"
    assert (pool.scan.function, pool.scan.state, pool.scan.end_time) == ("resilver", "finished", 1583208753.0)


def test_text_no_pools_and_garbage():
    assert parse_status_text("no pools available\n") == []
    with pytest.raises(ZpoolOutputError):
        parse_status_text("Segmentation fault\n")


def test_text_truncated_block_gives_what_it_has():
    pool = parse_status_text("  pool: half\n state: ONLINE\nconfig:\n\n\tNAME STATE READ WRITE CKSUM\n\thalf")[0]
    assert pool.name == "half" and pool.state == "online"


@pytest.mark.parametrize("lines,expected", [
    (["scrub repaired 0B in 03:20:34 with 0 errors on Sun Nov  9 05:20:34 2025"],
     ("scrub", "finished", None, 1762665634.0, 0)),
    (["resilvered 388G in 01:02:03 with 2 errors on Mon Nov 10 01:02:03 2025"],
     ("resilver", "finished", None, 1762736523.0, 2)),
    (["scrub canceled on Sun Nov  9 04:00:00 2025"], ("scrub", "canceled", None, 1762660800.0, None)),
    (["scrub in progress since Sun Nov 16 02:00:00 2025", "\t8.97T scanned at 2.55G/s, 4.76T issued at 1.35G/s, "
      "9.55T total", "\t0B repaired, 49.89% done, 01:16:38 to go"], ("scrub", "scanning", 0.4989, None, None)),
    (["resilver in progress since Sun Nov 16 02:00:00 2025", "\t1.2T scanned, 10% done, no estimated completion time"],
     ("resilver", "scanning", 0.10, None, None)),
    (["scrub paused since Sun Nov 16 02:00:00 2025"], ("scrub", "paused", None, None, None)),
])
def test_scan_lines(lines, expected):
    scan = parse_scan_line(lines)
    assert (scan.function, scan.state, scan.progress, scan.end_time, scan.errors) == expected


@pytest.mark.parametrize("line", ["none requested", "", "trim in progress", "scrub repaired bogus"])
def test_scan_lines_without_a_scan(line):
    assert parse_scan_line([line]) is None


def test_ctime_and_counts():
    assert parse_ctime("Sun Nov  9 05:20:34 2025") == 1762665634.0
    assert parse_ctime("Sun Xyz  9 05:20:34 2025") is None
    assert parse_ctime("Sun Nov 99 05:20:34 2025") is None
    assert [parse_count(x) for x in (0, "7", "1.2K", "3M", "-", -1, True, None, "1e3")] == \
           [0, 7, 1228, 3 << 20, None, None, None, None, None]


# ---- zpool list -Hp ---------------------------------------------------------------------

def test_list_values():
    listing = parse_list("zpool1\t25598005084160\t10495182082048\t15102823002112\t9\t41\tONLINE\t13\n"
                         "old\t1000\t100\t900\t-\t10\tONLINE\t0\n")
    assert listing["zpool1"] == {"size": 25598005084160, "alloc": 10495182082048, "free": 15102823002112,
                                 "frag": 0.09, "ashift": 13}
    assert listing["old"]["frag"] is None and listing["old"]["ashift"] is None


@pytest.mark.parametrize("text", ["zpool1 1 2 3\n", "a\tb\n", "a\t1\t2\t3\t4\t5\tONLINE\t12\textra\n"])
def test_list_malformed_raises(text):
    with pytest.raises(ZpoolOutputError):
        parse_list(text)


def test_list_of_fixture_matches_capacity():
    listing = parse_list(list_text(pools_of("zfs-full")))
    z1 = listing["zpool1"]
    assert z1["alloc"] / z1["size"] == pytest.approx(0.75, abs=0.001) and z1["frag"] == 0.38


# ---- zfs get -Hp -o name,value creation ---------------------------------------------------

def test_creation_values():
    text = "zpool1\t1552563000\nzpool1/home\t1552563100\nzpool2\t1552564260\n"
    assert parse_creation(text) == {"zpool1": 1552563000.0, "zpool2": 1552564260.0}
    assert parse_creation(creation_text(pools_of("healthy"))) == {"zpool1": 1552563000.0, "zpool2": 1552564260.0}


@pytest.mark.parametrize("value", ["-", "-5", "+1552563000", "1_552_563_000", "1e9", "12",
                                   "99999999999999999999", "\u0661\u0665\u0665\u0662\u0665\u0666\u0663\u0660\u0660\u0660"])
def test_creation_garbage_is_left_out(value):
    assert parse_creation(f"tank\t{value}\n") == {}


@pytest.mark.parametrize("text", ["tank 1552563000\n", "tank\t1\t2\n"])
def test_creation_malformed_raises(text):
    with pytest.raises(ZpoolOutputError):
        parse_creation(text)


# ---- kstat ------------------------------------------------------------------------------

def test_kstat_states(tmp_path):
    base = tmp_path / "spl" / "kstat" / "zfs"
    for name, text in (("tank", "DEGRADED\n"), ("odd", "HAPPY\n"), ("empty", "")):
        (base / name).mkdir(parents=True)
        (base / name / "state").write_text(text)
    (base / "arcstats").write_text("13 1 0x01\n")
    assert read_kstat_states(Roots(procfs=str(tmp_path)))[0] == {"tank": "degraded"}
    # The pools left out are reported beside the states (the snapshot step logs them).
    states, problems = read_kstat_states(Roots(procfs=str(tmp_path)))
    assert states == {"tank": "degraded"}
    assert sorted((p.message, p.fields) for p in problems) == [
        ("unknown pool state in kstat", (("zpool", "empty"), ("value", ""))),
        ("unknown pool state in kstat", (("zpool", "odd"), ("value", "HAPPY")))]


# ---- running zpool: missing, failing, slow, odd --------------------------------------------

def fake_zpool(tmp_path, body: str) -> str:
    path = tmp_path / "zpool"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_run_missing_zpool(tmp_path):
    result = run_zpool(str(tmp_path / "nope"), ["status"], 5)
    assert not result.ok and "not found" in result.reason


def test_run_hung_zpool_is_killed_in_time(tmp_path):
    zpool = fake_zpool(tmp_path, "sleep 30 &\nwait\n")  # a child too: the whole group must die
    start = time.monotonic()
    result = run_zpool(zpool, ["status"], 0.5)
    assert time.monotonic() - start < 5
    assert not result.ok and "did not finish within 0.5 s" in result.reason


def test_reader_falls_back_to_text_on_old_zpool(tmp_path):
    pools = pools_of("healthy")
    (tmp_path / "status.txt").write_text(status_text(pools))
    (tmp_path / "list.txt").write_text(list_text(pools))
    zpool = fake_zpool(tmp_path, f"""
case "$*" in
  *-j*) echo "invalid option 'j'" >&2; exit 2 ;;
  "status -p -L") [ "$LC_ALL" = C ] && [ "$TZ" = UTC ] && cat {tmp_path}/status.txt ;;
  list*) cat {tmp_path}/list.txt ;;
esac
""")
    reader = ZpoolReader(Roots(), zpool=zpool, timeout=5)
    snapshot = reader.read()
    assert snapshot.ok and snapshot.source == "text" and reader.json_supported is False
    assert "zpool has no JSON output (OpenZFS < 2.3): using the text layout" in [p.message for p in snapshot.problems]
    z1 = {p.name: p for p in snapshot.pools}["zpool1"]
    assert z1.ashift == 13 and z1.fragmentation_ratio == 0.09 and len(z1.vdevs) == 10
    assert reader.read().source == "text"  # -j not tried again


@pytest.mark.parametrize("body,reason", [
    ('echo "internal error: Bad file descriptor" >&2; exit 1', "exited with 1: internal error"),
    ('echo "{ not json"', "does not parse"),
    ('case "$*" in list*) echo "zpool1 1 2";; *) echo \'{"pools": {}}\';; esac', "fields"),
])
def test_reader_reports_failures(tmp_path, body, reason):
    snapshot = ZpoolReader(Roots(), zpool=fake_zpool(tmp_path, body), timeout=5).read()
    assert not snapshot.ok and reason in snapshot.reason


# ---- the collector ----------------------------------------------------------------------

def collector_on(machine, variant, **config):
    root = tempfile.mkdtemp()
    machines.load(machine).build(root, variant)
    roots = Roots(sysfs=f"{root}/sys", procfs=f"{root}/proc", captured=f"{root}/captured")
    settings = dict(ZfsCollector.config_defaults, **config)
    scheduler = Scheduler()
    collector = ZfsCollector(Context(roots=roots, config=settings, scheduler=scheduler))
    return collector, scheduler


def scrape(collector):
    return generate_latest(StorpathExporter([collector])).decode()


def has(text, prefix):
    """A sample line (not HELP or TYPE) starting with prefix."""
    return re.search(r"^" + re.escape(prefix), text, re.M) is not None


def value(text, series):
    match = re.search(r"^" + re.escape(series) + r" (\S+)$", text, re.M)
    return float(match.group(1)) if match else None


def test_collector_full_pool_and_ashift():
    collector, scheduler = collector_on(INTEL, "zfs-full")
    scheduler.run_all_once()
    text = scrape(collector)
    used = value(text, 'storpath_zfs_pool_allocated_bytes{zpool="zpool1"}') / \
        value(text, 'storpath_zfs_pool_size_bytes{zpool="zpool1"}')
    assert used == pytest.approx(0.75, abs=0.001)
    assert value(text, 'storpath_zfs_pool_fragmentation_ratio{zpool="zpool1"}') == 0.38
    assert value(text, 'storpath_zfs_pool_ashift{zpool="zpool1"}') == 13
    assert value(text, 'storpath_zfs_pool_device_physical_block_bytes{zpool="zpool1"}') == 4096
    assert value(text, 'storpath_zfs_pool_expected_ashift{zpool="zpool1"}') == 12
    assert value(text, "storpath_zfs_zpool_up") == 1
    assert not has(text, "storpath_zfs_zpool_last_success_timestamp_seconds ")  # captured replay
    assert 'storpath_zfs_vdev_info{class="normal",device="nvme0n1",parent="raidz2-0",type="disk",vdev="nvme0n1",' \
           'zpool="zpool1"} 1.0' in text
    assert value(text, 'storpath_zfs_pool_creation_timestamp_seconds{zpool="zpool1"}') == 1552563000  # creation.txt
    assert value(text, 'storpath_zfs_pool_creation_timestamp_seconds{zpool="zpool2"}') == 1552564260


def test_collector_degraded_uses_kstat_state():
    collector, scheduler = collector_on(INTEL, "zfs-degraded")
    text = scrape(collector)  # before zpool ran: pool state from kstat alone
    assert value(text, 'storpath_zfs_pool_state{state="degraded",zpool="zpool1"}') == 1
    assert not has(text, "storpath_zfs_vdev_state{") and not has(text, "storpath_zfs_zpool_up ")
    scheduler.run_all_once()
    text = scrape(collector)
    assert value(text, 'storpath_zfs_vdev_state{state="removed",vdev="nvme5n1",zpool="zpool1"}') == 1
    assert value(text, 'storpath_zfs_vdev_state{state="degraded",vdev="raidz2-0",zpool="zpool1"}') == 1


def test_collector_checksum_errors_from_text_capture():
    collector, scheduler = collector_on(INTEL, "zfs-checksum")
    scheduler.run_all_once()
    text = scrape(collector)
    assert value(text, 'storpath_zfs_vdev_errors_total{type="checksum",vdev="nvme3n1",zpool="zpool1"}') == 37
    assert value(text, 'storpath_zfs_scan_state{function="scrub",state="scanning",zpool="zpool1"}') == 1
    assert value(text, 'storpath_zfs_scan_progress_ratio{function="scrub",zpool="zpool1"}') == 0.4989
    assert value(text, 'storpath_zfs_scan_end_timestamp_seconds{function="scrub",zpool="zpool2"}') == 1762713001


def test_collector_without_zfs_is_silent():
    collector, scheduler = collector_on("am4-x570-firecuda", "healthy")
    scheduler.run_all_once()
    text = scrape(collector)
    assert not has(text, "storpath_zfs_zpool_up") and not has(text, "storpath_zfs_pool_state{")


def live_zfs_tree(tmp_path):
    """A procfs with the ZFS kstat of one pool, no captured output: zpool must run."""
    state = tmp_path / "proc" / "spl" / "kstat" / "zfs" / "tank"
    state.mkdir(parents=True)
    (state / "state").write_text("ONLINE\n")
    (tmp_path / "sys").mkdir()
    return Roots(sysfs=str(tmp_path / "sys"), procfs=str(tmp_path / "proc"))


def test_collector_never_waits_for_a_hung_zpool(tmp_path):
    roots = live_zfs_tree(tmp_path)
    zpool = fake_zpool(tmp_path, "exec sleep 60\n")
    scheduler = Scheduler()
    collector = ZfsCollector(Context(roots=roots, scheduler=scheduler, config=dict(
        ZfsCollector.config_defaults, zpool_path=zpool, timeout=1.0, interval=3600.0)))
    scheduler.start()
    try:
        time.sleep(0.2)  # the task is now inside zpool
        start = time.monotonic()
        text = scrape(collector)
        assert time.monotonic() - start < 0.5
        assert value(text, 'storpath_zfs_pool_state{state="online",zpool="tank"}') == 1
        deadline = time.monotonic() + 10
        while value(scrape(collector), "storpath_zfs_zpool_up") is None and time.monotonic() < deadline:
            time.sleep(0.1)
        text = scrape(collector)
        assert value(text, "storpath_zfs_zpool_up") == 0
        assert value(text, 'storpath_zfs_pool_state{state="online",zpool="tank"}') == 1
    finally:
        scheduler.stop()


def test_collector_missing_zpool_reports_down(tmp_path):
    roots = live_zfs_tree(tmp_path)
    scheduler = Scheduler()
    collector = ZfsCollector(Context(roots=roots, scheduler=scheduler, config=dict(
        ZfsCollector.config_defaults, zpool_path=str(tmp_path / "no-zpool"))))
    scheduler.run_all_once()
    text = scrape(collector)
    assert value(text, "storpath_zfs_zpool_up") == 0
    assert not has(text, "storpath_zfs_zpool_last_success_timestamp_seconds ")


def test_collector_live_zpool_success_sets_timestamp(tmp_path):
    roots = live_zfs_tree(tmp_path)
    pools = pools_of("healthy")
    (tmp_path / "status.json").write_text(status_json(pools))
    (tmp_path / "list.txt").write_text(list_text(pools))
    zpool = fake_zpool(tmp_path, f'case "$1" in status) cat {tmp_path}/status.json;; list) cat {tmp_path}/list.txt;;'
                                 ' esac\n')
    scheduler = Scheduler()
    collector = ZfsCollector(Context(roots=roots, scheduler=scheduler, config=dict(
        ZfsCollector.config_defaults, zpool_path=zpool)))
    before = time.time()
    scheduler.run_all_once()
    text = scrape(collector)
    assert value(text, "storpath_zfs_zpool_up") == 1
    assert value(text, "storpath_zfs_zpool_last_success_timestamp_seconds") >= before - 1
    assert value(text, 'storpath_zfs_pool_ashift{zpool="zpool2"}') == 12


def healthy_zpool(tmp_path) -> str:
    """A zpool that prints the healthy variant's status (JSON) and list."""
    pools = pools_of("healthy")
    (tmp_path / "status.json").write_text(status_json(pools))
    (tmp_path / "list.txt").write_text(list_text(pools))
    return fake_zpool(tmp_path, f'case "$1" in status) cat {tmp_path}/status.json;; list) cat {tmp_path}/list.txt;;'
                                ' esac\n')


def fake_zfs(tmp_path, body: str) -> str:
    path = tmp_path / "zfs"
    path.write_text("#!/bin/sh\necho \"$*\" >> " + str(tmp_path / "zfs.calls") + "\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_reader_asks_zfs_for_creation_once_per_new_pool(tmp_path):
    zpool = healthy_zpool(tmp_path)
    fake_zfs(tmp_path, 'shift 5; for p in "$@"; do printf "%s\\t1552563000\\n" "$p"; done\n')
    assert find_zfs("zfs", zpool) == str(tmp_path / "zfs")  # the zfs beside zpool
    reader = ZpoolReader(Roots(), zpool=zpool, timeout=5)
    for _ in range(3):
        snapshot = reader.read()
        assert snapshot.ok and {p.name: p.created_at for p in snapshot.pools} == \
            {"zpool1": 1552563000.0, "zpool2": 1552563000.0}
    assert (tmp_path / "zfs.calls").read_text() == "get -Hp -o name,value creation zpool1 zpool2\n"


@pytest.mark.parametrize("body", ["exit 1\n", "echo 'not two fields'\n", "exec sleep 60\n"])
def test_reader_without_creation_still_succeeds(tmp_path, body, caplog):
    log.forget_once_keys()  # said once per run: each case here is a fresh run
    zpool = healthy_zpool(tmp_path)
    reader = ZpoolReader(Roots(), zpool=zpool, zfs=fake_zfs(tmp_path, body), timeout=1)
    snapshot = reader.read()
    assert snapshot.ok and [p.created_at for p in snapshot.pools] == [None, None]
    # Returned, not logged (a reader never logs): the zfs collector's task logs it, once.
    assert [p.message for p in snapshot.problems] == ["pool creation time unknown"]
    assert caplog.text == ""
    roots = live_zfs_tree(tmp_path)
    scheduler = Scheduler()
    ZfsCollector(Context(roots=roots, scheduler=scheduler, config=dict(
        ZfsCollector.config_defaults, zpool_path=zpool, zfs_path=fake_zfs(tmp_path, body), timeout=1.0)))
    scheduler.run_all_once()
    scheduler.run_all_once()
    assert caplog.text.count("pool creation time unknown") == 1


def test_reader_keeps_the_creation_zfs_printed_before_failing(tmp_path):
    zpool = healthy_zpool(tmp_path)
    zfs = fake_zfs(tmp_path, 'printf "zpool1\\t1552563000\\n"; echo "cannot open \'zpool2\': I/O error" >&2; exit 1\n')
    snapshot = ZpoolReader(Roots(), zpool=zpool, zfs=zfs, timeout=5).read()
    assert {p.name: p.created_at for p in snapshot.pools} == {"zpool1": 1552563000.0, "zpool2": None}


# ---- the real exporter: keeps serving whatever zpool does ------------------------------------

@pytest.mark.parametrize("body", ["exec sleep 60\n", 'echo "garbage"\n', "exit 1\n"])
def test_exporter_keeps_serving_with_bad_zpool(tmp_path, body):
    roots = live_zfs_tree(tmp_path)
    zpool = fake_zpool(tmp_path, body)
    config = tmp_path / "storpath.yml"
    config.write_text(f"collectors:\n  zfs:\n    zpool_path: {zpool}\n    timeout: 2s\n    interval: 1h\n")
    # --path.dev: the tree stands for this host (its zpool is run), not a replayed machine.
    (tmp_path / "dev").mkdir()
    with run_exporter([f"--config.file={config}", f"--path.sysfs={roots.sysfs}", f"--path.procfs={roots.procfs}",
                       f"--path.dev={tmp_path / 'dev'}"], str(tmp_path)) as exporter:
        start = time.monotonic()
        text = exporter.metrics()
        assert time.monotonic() - start < 2
        assert 'storpath_scrape_collector_success{collector="zfs"} 1.0' in text
        assert value(text, 'storpath_zfs_pool_state{state="online",zpool="tank"}') == 1
        deadline = time.monotonic() + 15
        while value(text, "storpath_zfs_zpool_up") is None and time.monotonic() < deadline:
            time.sleep(0.2)
            text = exporter.metrics()
        assert value(text, "storpath_zfs_zpool_up") == 0
        assert "zpool failed" in exporter.log()


# ---- storpath check without zpool: the kstat state, as the metrics have it ---------------

def _check_without_zpool(tmp_path, states, dev=None):
    """`storpath check`'s ZFS findings on a procfs with these kstat pool states and a
    zpool that cannot be run (or, with dev "", a replayed machine's, where zpool is not run)."""
    from storpath.report.findings import Facts, Outcome
    from storpath.report.findings.zfs import check

    for pool, text in states.items():
        folder = tmp_path / "proc" / "spl" / "kstat" / "zfs" / pool
        folder.mkdir(parents=True)
        # module/os/linux/zfs/spa_stats.c, spa_state_data: the pool's state word and a
        # newline, spa_state_to_name(spa) ("ONLINE", "DEGRADED", "SUSPENDED"...).
        (folder / "state").write_text(text + "\n")
    (tmp_path / "sys").mkdir(exist_ok=True)
    roots = Roots(sysfs=str(tmp_path / "sys"), procfs=str(tmp_path / "proc"),
                  **({} if dev is None else {"dev": dev}))
    facts = Facts(roots, {"collectors": {"zfs": {"zpool_path": str(tmp_path / "no-zpool"),
                                                 "zfs_path": str(tmp_path / "no-zfs")}}})
    out = Outcome("zfs")
    check(facts, out)
    return {(f.subject, f.kind): f for f in out.findings}


def test_check_uses_kstat_state_when_zpool_cannot_run(tmp_path):
    findings = _check_without_zpool(tmp_path, {"tank": "SUSPENDED", "backup": "DEGRADED", "scratch": "ONLINE"})
    assert set(findings) == {("zfs", "zfs.unreadable"), ("tank", "zfs.pool_not_online"),
                             ("backup", "zfs.pool_not_online")}
    tank = findings[("tank", "zfs.pool_not_online")]
    assert tank.severity == "critical" and tank.title == "pool is SUSPENDED"
    assert "/proc/spl/kstat/zfs/tank/state" in tank.evidence
    assert findings[("zfs", "zfs.unreadable")].title == "ZFS pool details could not be read"


def test_check_on_a_replay_reports_the_kstat_states_zpool_was_not_run_for(tmp_path):
    """A replayed machine without --path.captured: zpool is not run (no pools, no failure),
    and kstat's SUSPENDED and DEGRADED pools are findings, as they are metrics."""
    findings = _check_without_zpool(tmp_path, {"tank": "SUSPENDED", "backup": "DEGRADED", "scratch": "ONLINE"},
                                    dev="")
    assert set(findings) == {("tank", "zfs.pool_not_online"), ("backup", "zfs.pool_not_online")}
    assert findings[("tank", "zfs.pool_not_online")].title == "pool is SUSPENDED"
    assert "/proc/spl/kstat/zfs/backup/state" in findings[("backup", "zfs.pool_not_online")].evidence


def test_check_without_zpool_and_healthy_kstat_is_info_only(tmp_path):
    findings = _check_without_zpool(tmp_path, {"tank": "ONLINE"})
    assert set(findings) == {("zfs", "zfs.unreadable")}


def test_a_replayed_machine_never_gets_this_hosts_pools(tmp_path):
    """--path.sysfs of another machine without --path.captured (Roots.dev ""): zpool is
    not run, so this host's pools are never reported as the replayed machine's."""
    ran = tmp_path / "ran"
    zpool = fake_zpool(tmp_path, f"touch {ran}\necho '{{\"pools\": {{}}}}'\n")
    snapshot = ZpoolReader(Roots(sysfs=str(tmp_path / "sys"), dev=""), zpool=zpool, timeout=5).read()
    assert not ran.exists()
    assert snapshot.ok and snapshot.pools == [] and snapshot.source == "none"
    assert [p.message.split(":")[0] for p in snapshot.problems] == ["zpool not run"]  # the task logs it once
    assert ZpoolReader(Roots(), zpool=zpool, timeout=5).read() is not None and ran.exists()  # the fake does run
