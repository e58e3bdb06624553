"""Probes against the real fio on this machine (and stand-in fio scripts where fio must
misbehave): a file target, a loop device opened read-only, fio killed mid-run, fio
hanging past the timeout, fio missing, output that does not parse, the I/O budget, the
busy skip (diskstats from a fixture procfs), one probe per device at a time, and the
state kept for the next start."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import threading
import time

import pytest

from storpath.base.config import ConfigError
from storpath.scrape.probes import devices, state
from storpath.scrape.probes.config import check
from storpath.scrape.probes.engine import ProbeEngine
from storpath.base.roots import Roots
from tests.conftest import log_records, require_root, require_tool

MIB = 1 << 20


def probes_config(tmp_path, targets, **settings):
    section = {"runtime": "1s", "jitter": 0, "busy_threshold": None, "file_size": "16MiB",
               "state_file": str(tmp_path / "state" / "probes.json"), "targets": targets}
    section.update(settings)
    return check(section)


@pytest.fixture(autouse=True)
def state_directory(tmp_path, monkeypatch):
    """storpath keeps its state file only inside its state directory ($STATE_DIRECTORY)."""
    monkeypatch.setenv("STATE_DIRECTORY", str(tmp_path))


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def fake_fio(tmp_path, body: str, name: str = "fake-fio") -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


GOOD_JSON = json.dumps({"fio version": "fio-3.33", "jobs": [{"jobname": "seqread", "error": 0, "read": {
    "io_bytes": 8 * MIB, "bw_bytes": 8 * MIB, "iops": 8.0, "runtime": 1000,
    "clat_ns": {"percentile": {"50.000000": 1000000, "99.000000": 2000000, "99.900000": 3000000}}},
    "write": {"io_bytes": 0}}]})


@pytest.fixture(scope="module")
def real_fio():
    return require_tool("fio", "fio")


def test_file_target_with_real_fio(tmp_path, real_fio):
    target_path = tmp_path / "data" / "probe.dat"
    target_path.parent.mkdir()
    cfg = probes_config(tmp_path, [{"file": str(target_path)}])
    engine = ProbeEngine(cfg, Roots())
    outcomes = engine.run_target(cfg.targets[0])
    assert [(o.profile, o.status) for o in outcomes] == [("seqread", "ok"), ("randread", "ok")], outcomes
    assert os.path.getsize(target_path) == 16 * MIB  # created once at file_size
    for outcome in outcomes:
        result = outcome.result
        assert result.read_bytes_per_second > 0 and result.read_iops > 0
        assert result.io_bytes > 0 and result.written_bytes == 0
        latency = dict(result.latency_seconds)
        assert sorted(latency) == ["0.5", "0.99", "0.999"]
        assert 0 < latency["0.5"] <= latency["0.99"] <= latency["0.999"]
        # bw_bytes is fio's bytes over its own runtime
        assert result.read_bytes_per_second == pytest.approx(result.io_bytes / result.runtime_seconds, rel=0.05)
    seq = outcomes[0].result
    assert seq.read_iops == pytest.approx(seq.read_bytes_per_second / MIB, rel=0.05)  # 1 MiB reads
    rand = outcomes[1].result
    assert rand.read_iops == pytest.approx(rand.read_bytes_per_second / 4096, rel=0.05)  # 4 KiB reads
    mtime = os.stat(target_path).st_mtime_ns
    again = engine.run_probe(cfg.targets[0], "seqread")
    assert again.status == "ok" and os.stat(target_path).st_mtime_ns == mtime  # reused, not rewritten
    snapshot = engine.snapshot()
    assert snapshot[(cfg.targets[0].name, "seqread")].runs == 2
    with open(cfg.state_file) as handle:
        saved = json.load(handle)
    assert saved["probes"][cfg.targets[0].name]["randread"]["result"]["io_bytes"] == rand.io_bytes


def test_loop_device_opened_read_only(tmp_path, real_fio):
    losetup = require_tool("losetup", "mount")
    require_root("attaching a loop device")
    backing = tmp_path / "backing.img"
    with open(backing, "wb") as handle:
        for _ in range(32):
            handle.write(os.urandom(MIB))
    digest = hashlib.sha256(backing.read_bytes()).hexdigest()
    loop = subprocess.run([losetup, "--read-only", "--find", "--show", str(backing)], capture_output=True, text=True,
                          check=True, timeout=30).stdout.strip()
    try:
        name = os.path.basename(loop)
        with open(f"/sys/block/{name}/ro") as handle:
            assert handle.read().strip() == "1"
        cfg = probes_config(tmp_path, [{"device": loop}])
        engine = ProbeEngine(cfg, Roots())
        outcomes = engine.run_target(cfg.targets[0])
        assert [o.status for o in outcomes] == ["ok", "ok"], outcomes
        assert {o.device for o in outcomes} == {name}
        assert all(o.result.io_bytes > 0 for o in outcomes)
        assert engine.state.io[name]  # charged to the loop device's budget
    finally:
        subprocess.run([losetup, "--detach", loop], check=False, timeout=30)
    assert hashlib.sha256(backing.read_bytes()).hexdigest() == digest


def test_fio_killed_mid_run(tmp_path, real_fio):
    cfg = probes_config(tmp_path, [{"file": str(tmp_path / "probe.dat"), "profiles": ["seqread"]}], runtime="5s")
    engine = ProbeEngine(cfg, Roots())
    killed = []

    def kill_after_a_second(elapsed):
        if elapsed > 1.0 and not killed:
            for proc in list(engine._running.values()):
                killed.append(proc.pid)
                os.kill(proc.pid, signal.SIGKILL)

    outcome = engine.run_probe(cfg.targets[0], "seqread", tick=kill_after_a_second)
    assert killed
    assert (outcome.status, outcome.reason) == ("failed", "crashed"), outcome
    assert "SIGKILL" in outcome.message
    assert outcome.duration < 4.0  # noticed at once, not at the end of the 5 s run
    assert not alive(killed[0])
    rec = engine.snapshot()[(cfg.targets[0].name, "seqread")]
    assert (rec.runs, rec.failures, rec.result, rec.last_success) == (1, {"crashed": 1}, None, None)


def test_fio_that_hangs_is_killed_at_the_timeout(tmp_path):
    pids = tmp_path / "pids"
    hung = fake_fio(tmp_path, f"sleep 300 &\necho $$ $! > {pids}\nwait\n")
    cfg = probes_config(tmp_path, [{"file": str(tmp_path / "probe.dat"), "profiles": ["seqread"]}], fio=hung,
                        timeout="2s", io_budget_per_hour="1GiB")
    engine = ProbeEngine(cfg, Roots())
    started = time.monotonic()
    outcome = engine.run_probe(cfg.targets[0], "seqread")
    assert (outcome.status, outcome.reason) == ("failed", "timeout"), outcome
    assert 2.0 <= time.monotonic() - started < 8.0
    shell, child = (int(p) for p in pids.read_text().split())
    assert not alive(shell) and not alive(child)  # the whole process group, not just fio
    # What a killed fio read is unknown: it is charged all it was allowed.
    assert engine.budget_used(outcome.device or f"file:{cfg.targets[0].path}", time.time()) == 1 << 30


def test_missing_fio(tmp_path):
    for missing in (str(tmp_path / "no" / "fio"), "fio-that-is-not-installed"):
        cfg = probes_config(tmp_path, [{"file": str(tmp_path / "probe.dat"), "profiles": ["seqread"]}], fio=missing)
        outcome = ProbeEngine(cfg, Roots()).run_probe(cfg.targets[0], "seqread")
        assert (outcome.status, outcome.reason) == ("failed", "fio_missing"), outcome
        assert missing in outcome.message


@pytest.mark.parametrize("body,reason,text", [
    ("echo 'this is not json'\n", "bad_output", "no JSON"),
    ("echo '{\"jobs\": [{\"read\": '\n", "bad_output", "does not parse"),
    ("echo 'fio: engine libaio not loadable' >&2\nexit 1\n", "fio_error", "engine libaio not loadable"),
    ("kill -SEGV $$\n", "crashed", "SIGSEGV"),
])
def test_fio_output_and_exit_failures(tmp_path, body, reason, text):
    cfg = probes_config(tmp_path, [{"file": str(tmp_path / "probe.dat"), "profiles": ["seqread"]}],
                        fio=fake_fio(tmp_path, body))
    engine = ProbeEngine(cfg, Roots())
    outcome = engine.run_probe(cfg.targets[0], "seqread")
    assert (outcome.status, outcome.reason) == ("failed", reason), outcome
    assert text in outcome.message
    assert engine.snapshot()[(cfg.targets[0].name, "seqread")].failures == {reason: 1}


def test_io_budget_caps_and_then_skips(tmp_path, real_fio):
    cfg = probes_config(tmp_path, [{"file": str(tmp_path / "probe.dat"), "profiles": ["seqread"]}],
                        io_budget_per_hour="48MiB", runtime="3s")
    engine = ProbeEngine(cfg, Roots())
    first = engine.run_probe(cfg.targets[0], "seqread")
    assert first.status == "ok", first
    assert first.result.io_bytes <= 48 * MIB  # fio stopped at the budget left (io_size), not at the runtime
    second = engine.run_probe(cfg.targets[0], "seqread")
    assert (second.status, second.reason) == ("skipped", "budget")
    rec = engine.snapshot()[(cfg.targets[0].name, "seqread")]
    assert (rec.runs, rec.skipped) == (1, {"budget": 1})
    # An hour later the budget is back.
    later = ProbeEngine(cfg, Roots(), clock=lambda: time.time() + 3601)
    assert later.run_probe(cfg.targets[0], "seqread").status == "ok"


def test_busy_device_is_skipped(tmp_path):
    proc = tmp_path / "proc"
    proc.mkdir()
    line = " 259       0 fixturedisk0 1000 0 80000 900 0 0 0 0 0 {ticks} 900 0 0 0 0 0 0\n"
    (proc / "diskstats").write_text(line.format(ticks=5000))
    good = fake_fio(tmp_path, f"cat <<'EOF'\n{GOOD_JSON}\nEOF\n")
    cfg = probes_config(tmp_path, [{"file": str(tmp_path / "probe.dat"), "device_name": "fixturedisk0",
                                    "profiles": ["seqread"]}], fio=good, busy_threshold=0.5, busy_sample="1s")
    ticks = [5000]

    def kernel_meanwhile(busy_ms):
        def sleep(seconds):
            ticks[0] += busy_ms
            (proc / "diskstats").write_text(line.format(ticks=ticks[0]))
        return sleep

    busy = ProbeEngine(cfg, Roots(procfs=str(proc)), sleep=kernel_meanwhile(900))
    outcome = busy.run_probe(cfg.targets[0], "seqread")
    assert (outcome.status, outcome.reason) == ("skipped", "busy"), outcome
    assert "fixturedisk0 busy 90%" in outcome.message
    quiet = ProbeEngine(cfg, Roots(procfs=str(proc)), sleep=kernel_meanwhile(100))
    assert quiet.run_probe(cfg.targets[0], "seqread").status == "ok"
    rec = quiet.snapshot()[(cfg.targets[0].name, "seqread")]
    assert (rec.runs, rec.skipped) == (1, {"busy": 1})  # the skip was kept in the state file


def test_one_probe_per_device_at_a_time(tmp_path):
    log = tmp_path / "runs.log"
    slow = fake_fio(tmp_path, f"echo start $(date +%s.%N) >> {log}\nsleep 1\necho end $(date +%s.%N) >> {log}\n"
                              f"cat <<'EOF'\n{GOOD_JSON}\nEOF\n")
    cfg = probes_config(tmp_path, [{"file": str(tmp_path / f"p{i}.dat"), "device_name": "sharedisk",
                                    "profiles": ["seqread"]} for i in range(3)], fio=slow)
    engine = ProbeEngine(cfg, Roots())
    threads = [threading.Thread(target=engine.run_target, args=(t,)) for t in cfg.targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    events = [line.split() for line in log.read_text().splitlines()]
    assert [kind for kind, _ in events] == ["start", "end"] * 3  # never two starts in a row
    assert all(engine.snapshot()[(t.name, "seqread")].runs == 1 for t in cfg.targets)


def test_results_survive_a_new_engine(tmp_path, real_fio):
    cfg = probes_config(tmp_path, [{"file": str(tmp_path / "probe.dat"), "profiles": ["seqread"]}], interval="1h")
    first = ProbeEngine(cfg, Roots())
    outcome = first.run_probe(cfg.targets[0], "seqread")
    assert outcome.status == "ok"
    second = ProbeEngine(cfg, Roots())
    rec = second.snapshot()[(cfg.targets[0].name, "seqread")]
    assert rec.result == outcome.result and rec.last_success == outcome.started
    # The next probe waits out the interval from the last one rather than running at start.
    assert 3500 < second.initial_delay(cfg.targets[0]) <= 3600
    assert second.budget_used(outcome.device or f"file:{cfg.targets[0].path}", time.time()) == outcome.result.io_bytes


def test_times_from_ahead_of_the_clock_are_taken_as_now(tmp_path):
    """The clock ran 30 days ahead while the state file was written, then NTP set it back:
    the target waits one interval at most, its budget is not held, its results age, and
    the log says so once."""
    cfg = probes_config(tmp_path, [{"file": str(tmp_path / "probe.dat"), "profiles": ["seqread"]}], interval="1h",
                        io_budget_per_hour="64MiB", fio=fake_fio(tmp_path, f"echo '{GOOD_JSON}'\n"))
    target = cfg.targets[0]
    now = time.time()
    ahead = now + 30 * 86400
    kept = state.ProbeState(last_attempt={target.name: ahead},
                            io={f"file:{target.path}": [(ahead, 64 * MIB)]})
    kept.records[(target.name, "seqread")] = state.ProbeRecord(last_run=ahead, last_success=ahead, runs=1)
    assert state.save(cfg.state_file, kept) is None
    clock = [now]
    with log_records("storpath.probes") as records:
        engine = ProbeEngine(cfg, Roots(), clock=lambda: clock[0])
        assert engine.initial_delay(target) <= 3600  # not 30 days
        rec = engine.snapshot()[(target.name, "seqread")]
        assert rec.last_success <= now and rec.last_run <= now  # ProbeResultsStale can fire in time
        outcome = engine.run_probe(target, "seqread")
        assert outcome.status == "ok", outcome  # the budget was not held by reads "in the future"
        clock[0] += 60
        engine.run_probe(target, "seqread")
    told = [r for r in records if "ahead of the clock" in r.getMessage()]
    assert len(told) == 1, [r.getMessage() for r in records]
    assert told[0].fields["ahead_seconds"] == pytest.approx(30 * 86400, abs=1)
    # The clock set back while the exporter runs: the same, without a restart.
    clock[0] -= 10 * 86400
    with log_records("storpath.probes") as records:
        assert engine.run_probe(target, "seqread").status == "ok"
    assert engine.snapshot()[(target.name, "seqread")].last_success == clock[0]
    assert sum("ahead of the clock" in r.getMessage() for r in records) == 1


def test_file_target_that_is_a_device_node_at_run_time(tmp_path):
    cfg = probes_config(tmp_path, [{"file": str(tmp_path / "probe.dat"), "profiles": ["seqread"]}])
    os.symlink("/dev/zero", tmp_path / "probe.dat")  # appeared after the config was loaded
    outcome = ProbeEngine(cfg, Roots()).run_probe(cfg.targets[0], "seqread")
    assert (outcome.status, outcome.reason) == ("failed", "target_unusable")
    assert "(really /dev/zero) is under /dev" in outcome.message


def test_file_target_whose_folder_became_a_link_into_dev_at_run_time(tmp_path):
    """The refusal of /dev, /sys and /proc follows symlinked folders, at load and before every probe."""
    folder = tmp_path / "data"
    folder.mkdir()
    name = f"storpath-test-{os.getpid()}-{tmp_path.name}"
    cfg = probes_config(tmp_path, [{"file": str(folder / name), "profiles": ["seqread"]}])
    folder.rmdir()
    os.symlink("/dev/shm", folder)  # a tmpfs under /dev: the probe file would land there
    try:
        outcome = ProbeEngine(cfg, Roots()).run_probe(cfg.targets[0], "seqread")
        assert (outcome.status, outcome.reason) == ("failed", "target_unusable")
        assert f"(really /dev/shm/{name}) is under /dev" in outcome.message
        assert not os.path.exists(f"/dev/shm/{name}")
        with pytest.raises(ConfigError, match=rf"really /dev/shm/{name}\) is under /dev"):
            probes_config(tmp_path, [{"file": str(folder / name)}])
    finally:
        for leftover in (name, f"{name}.storpath-tmp"):
            if os.path.lexists(f"/dev/shm/{leftover}"):
                os.unlink(f"/dev/shm/{leftover}")


def test_busy_check_skips_devices_missing_from_diskstats(tmp_path):
    # A device diskstats does not list cannot be judged busy: the probe runs.
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "diskstats").write_text("")
    good = fake_fio(tmp_path, f"cat <<'EOF'\n{GOOD_JSON}\nEOF\n")
    cfg = probes_config(tmp_path, [{"file": str(tmp_path / "probe.dat"), "device_name": "ghost",
                                    "profiles": ["seqread"]}], fio=good, busy_threshold=0.1)
    engine = ProbeEngine(cfg, Roots(procfs=str(proc)), sleep=lambda s: None)
    assert engine.run_probe(cfg.targets[0], "seqread").status == "ok"
    assert devices.read_diskstats(Roots(procfs=str(proc))) == {}


def test_a_file_target_with_colons_in_its_path_is_read_as_one_file(tmp_path, real_fio):
    """Before: ':' reached fio unescaped, and fio opened `.../pci-0000`, `01` and `00.0-probe` instead."""
    folder = tmp_path / "by-path"
    folder.mkdir()
    target = folder / "pci-0000:01:00.0-probe"
    cfg = probes_config(tmp_path, [{"file": str(target), "profiles": ["seqread"]}])
    outcome = ProbeEngine(cfg, Roots()).run_probe(cfg.targets[0], "seqread")
    assert outcome.status == "ok", outcome
    assert outcome.result.io_bytes > 0
    assert sorted(os.listdir(folder)) == ["pci-0000:01:00.0-probe"]


def test_the_budget_holds_for_a_profile_with_many_jobs(tmp_path, real_fio):
    """Before: fio's io_size is per job, so numjobs 4 read 4 times the budget."""
    cfg = probes_config(tmp_path, [{"file": str(tmp_path / "probe.dat"), "profiles": ["wide"]}], runtime="5s",
                        io_budget_per_hour="8MiB",
                        profiles={"wide": {"rw": "read", "bs": "64k", "numjobs": 4, "ioengine": "psync"}})
    outcome = ProbeEngine(cfg, Roots()).run_probe(cfg.targets[0], "wide")
    assert outcome.status == "ok", outcome
    assert 0 < outcome.result.io_bytes <= 8 * MIB


def _probe_with_planted_lock(tmp_path, plant):
    """Run one probe to create its lock files, let `plant(locks folder, lock file names)`
    replace them, and probe again: (second outcome, whether fio ran the second time)."""
    ran = tmp_path / "fio-ran"
    good = fake_fio(tmp_path, f"echo x >> {ran}\ncat <<'EOF'\n{GOOD_JSON}\nEOF\n")
    cfg = probes_config(tmp_path, [{"file": str(tmp_path / "probe.dat"), "profiles": ["seqread"]}], fio=good)
    engine = ProbeEngine(cfg, Roots())
    assert engine.run_probe(cfg.targets[0], "seqread").status == "ok"
    locks = tmp_path / "state" / "locks"
    names = sorted(os.listdir(locks))
    assert names and all(n.endswith(".lock") for n in names)
    plant(locks, names)
    runs_before = ran.read_text().count("x")
    outcome = ProbeEngine(cfg, Roots()).run_probe(cfg.targets[0], "seqread")
    return outcome, ran.read_text().count("x") > runs_before


def _links_to(victim):
    """A planting that replaces every lock file with a symbolic link to `victim`."""
    def plant(locks, names):
        for name in names:
            os.unlink(locks / name)
            os.symlink(victim, locks / name)
    return plant


def test_a_lock_file_planted_as_a_link_to_a_missing_path_creates_nothing(tmp_path):
    """Before: the lock was opened O_RDWR|O_CREAT through the link: root's `storpath probe`
    created any file the exporter's user named."""
    victim = tmp_path / "victim" / "created-by-root"
    victim.parent.mkdir()

    outcome, fio_ran = _probe_with_planted_lock(tmp_path, _links_to(victim))
    assert (outcome.status, outcome.reason) == ("failed", "target_unusable"), outcome
    assert "probe lock refused" in outcome.message and "symbolic link" in outcome.message
    assert not fio_ran
    assert not os.path.lexists(victim)


def test_a_lock_file_planted_as_a_link_to_a_file_leaves_that_file_alone(tmp_path):
    victim = tmp_path / "shadow"
    victim.write_text("root:secret\n")
    os.utime(victim, (1_000_000_000, 1_000_000_000))

    outcome, fio_ran = _probe_with_planted_lock(tmp_path, _links_to(victim))
    assert (outcome.status, outcome.reason) == ("failed", "target_unusable"), outcome
    assert not fio_ran
    assert victim.read_text() == "root:secret\n" and os.stat(victim).st_mtime == 1_000_000_000


def test_a_lock_folder_planted_as_a_link_creates_nothing_where_it_points(tmp_path):
    elsewhere = tmp_path / "etc-cron.d"
    elsewhere.mkdir()

    def plant(locks, names):
        for name in names:
            os.unlink(locks / name)
        os.rmdir(locks)
        os.symlink(elsewhere, locks)

    outcome, fio_ran = _probe_with_planted_lock(tmp_path, plant)
    assert (outcome.status, outcome.reason) == ("failed", "target_unusable"), outcome
    assert "symbolic link" in outcome.message and not fio_ran
    assert os.listdir(elsewhere) == []


@pytest.mark.parametrize("what", ["fifo", "hard link", "foreign owner"])
def test_a_lock_file_that_is_not_storpaths_is_refused(tmp_path, what):
    if what == "foreign owner":
        require_root("giving a file to another user")
    outside = tmp_path / "outside"
    outside.write_text("keep\n")

    def plant(locks, names):
        for name in names:
            os.unlink(locks / name)
            if what == "fifo":
                os.mkfifo(locks / name)
            elif what == "hard link":
                os.link(outside, locks / name)
            else:
                (locks / name).write_text("")
                os.chown(locks / name, 65534, 65534)

    outcome, fio_ran = _probe_with_planted_lock(tmp_path, plant)
    assert (outcome.status, outcome.reason) == ("failed", "target_unusable"), outcome
    assert not fio_ran
    assert {"fifo": "not a regular file", "hard link": "other hard links",
            "foreign owner": "owned by uid 65534"}[what] in outcome.message
    assert outside.read_text() == "keep\n"
