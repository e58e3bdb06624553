"""The nvme collector: what it exports, when it reads Identify again, and how it behaves
when Identify cannot be read."""

import logging
import os
import time

from prometheus_client import generate_latest
from prometheus_client.core import CollectorRegistry

from storpath.base import log
from storpath.base.background import Scheduler
from storpath.collectors.base import Context
from storpath.collectors.nvme import NvmeCollector
from storpath.report.exporter import StorpathExporter
from storpath.base.roots import Roots
from tests.fixtures.builders_nvme import Fmt, identify_namespace, reformat, write_captured
from tests.fixtures.sysfs_builder import MachineBuilder, Namespace
from tests.snapshots import collect

FIRECUDA = [Fmt(512, 0, 1), Fmt(4096, 0, 0)]
SIZE = 2_000_398_934_016


def _machine(tmp_path, drives=2):
    b = MachineBuilder(str(tmp_path))
    host = b.host_bridge("0000:00")
    for i in range(drives):
        port = f"0000:00:01.{i + 1}"
        b.root_port(host, port, speed=16.0, width=4)
        b.nvme(port, f"0000:0{i + 1}:00.0", model="Seagate FireCuda 530 ZP2000GM30023", serial=f"7VR01A{i}",
               firmware="SU6SM003", vendor=0x1987, device=0x5018, speed=16.0, width=4,
               namespaces=[Namespace(size_bytes=SIZE, lba_bytes=512)])
    return b


def _collector(b, captured=True, **config):
    roots = Roots(sysfs=b.sys, procfs=b.proc, dev=os.path.join(b.root, "dev"),
                  captured=b.captured if captured else None)
    ctx = Context(roots=roots, config={**NvmeCollector.config_defaults, **config}, scheduler=Scheduler())
    return NvmeCollector(ctx)


def _samples(collector):
    out = {}
    for family in collect(collector):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _get(samples, name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))))


def test_firecuda_at_512_with_4k_best(tmp_path):
    b = _machine(tmp_path)
    for ctrl in ("nvme0", "nvme1"):
        write_captured(b, ctrl, 1, identify_namespace(FIRECUDA, 0, SIZE), "id-ns")
    c = _collector(b)
    c.ctx.scheduler.run_all_once()
    s = _samples(c)
    assert _get(s, "storpath_nvme_namespace_lba_size_bytes", device="nvme0n1") == 512
    assert _get(s, "storpath_nvme_namespace_best_lba_size_bytes", device="nvme0n1") == 4096
    assert _get(s, "storpath_nvme_namespace_physical_block_size_bytes", device="nvme0n1") == 512
    assert _get(s, "storpath_nvme_namespace_optimal_io_size_bytes", device="nvme0n1") is None  # 0: none stated
    assert _get(s, "storpath_nvme_namespace_lba_format_info", device="nvme0n1", index="1", data_size_bytes="4096",
                metadata_size_bytes="0", relative_performance="best", in_use="false") == 1
    assert _get(s, "storpath_nvme_namespace_lba_format_info", device="nvme0n1", index="0", data_size_bytes="512",
                metadata_size_bytes="0", relative_performance="better", in_use="true") == 1
    assert _get(s, "storpath_nvme_controller_info", controller="nvme1", address="0000:02:00.0",
                model="Seagate FireCuda 530 ZP2000GM30023", serial="7VR01A1", firmware="SU6SM003",
                transport="pcie") == 1
    assert _get(s, "storpath_nvme_namespace_info", device="nvme1n1", controller="nvme1", nsid="1") == 1
    assert _get(s, "storpath_nvme_identify_available", controller="nvme0") == 1
    assert _get(s, "storpath_nvme_identify_timestamp_seconds", controller="nvme0") == \
        os.stat(os.path.join(b.captured, "nvme/nvme0/ns1.id-ns")).st_mtime


def test_identify_missing_for_one_controller(tmp_path, caplog):
    log.forget_once_keys()
    b = _machine(tmp_path)
    write_captured(b, "nvme0", 1, identify_namespace(FIRECUDA, 0, SIZE), "id-ns")
    c = _collector(b)
    c.ctx.scheduler.run_all_once()
    with caplog.at_level(logging.WARNING, logger="storpath"):
        s = _samples(c)
        _samples(c)
    assert _get(s, "storpath_nvme_identify_available", controller="nvme0") == 1
    assert _get(s, "storpath_nvme_identify_available", controller="nvme1") == 0
    assert _get(s, "storpath_nvme_identify_timestamp_seconds", controller="nvme1") is None
    # sysfs values stay; the formats of nvme1n1 are left out rather than guessed.
    assert _get(s, "storpath_nvme_namespace_lba_size_bytes", device="nvme1n1") == 512
    assert _get(s, "storpath_nvme_namespace_best_lba_size_bytes", device="nvme1n1") is None
    assert not [k for k in s if k[0] == "storpath_nvme_namespace_lba_format_info" and ("device", "nvme1n1") in k[1]]
    reasons = [r for r in caplog.records if "LBA formats unknown" in r.getMessage()]
    assert len(reasons) == 1, "the reason is logged once, not per scrape"
    assert reasons[0].fields["controllers"] == "nvme1"
    assert "no captured Identify data" in reasons[0].fields["reason"]


def test_one_reason_is_one_log_line_for_many_controllers(tmp_path, caplog):
    log.forget_once_keys()
    b = _machine(tmp_path, drives=10)
    c = _collector(b)  # no captured Identify data at all
    c.ctx.scheduler.run_all_once()
    with caplog.at_level(logging.WARNING, logger="storpath"):
        s = _samples(c)
    assert all(_get(s, "storpath_nvme_identify_available", controller=f"nvme{i}") == 0 for i in range(10))
    reasons = [r for r in caplog.records if "LBA formats unknown" in r.getMessage()]
    assert len(reasons) == 1
    assert reasons[0].fields["controllers"] == "nvme0,nvme1,nvme2,nvme3,nvme4,nvme5,nvme6,nvme7,... (10 controllers)"
    assert "/nvme*/" in reasons[0].fields["reason"] and "nvme0" not in reasons[0].fields["reason"]


def test_live_without_ioctl_or_nvme_cli(tmp_path):
    """No captured data, no device node, no nvme-cli: sysfs values, a 0 and a reason."""
    b = _machine(tmp_path, drives=1)
    c = _collector(b, captured=False, nvme_cli="nvme-not-installed-here")
    c.ctx.scheduler.run_all_once()
    assert c.ctx.slow.task("nvme_identify").last_error is None
    s = _samples(c)
    assert _get(s, "storpath_nvme_identify_available", controller="nvme0") == 0
    assert _get(s, "storpath_nvme_namespace_lba_size_bytes", device="nvme0n1") == 512


def test_before_the_first_identify_pass_nothing_is_claimed(tmp_path):
    b = _machine(tmp_path, drives=1)
    write_captured(b, "nvme0", 1, identify_namespace(FIRECUDA, 0, SIZE), "id-ns")
    s = _samples(_collector(b))  # scheduler not started: no wait, no task run
    assert _get(s, "storpath_nvme_namespace_lba_size_bytes", device="nvme0n1") == 512
    assert not [k for k in s if k[0] == "storpath_nvme_identify_available"]
    assert not [k for k in s if k[0] == "storpath_nvme_namespace_best_lba_size_bytes"]


def _watched(tmp_path, captured=True):
    """One drive, its first Identify pass done; `triggered` records each trigger of the task."""
    b = _machine(tmp_path, drives=1)
    if captured:
        write_captured(b, "nvme0", 1, identify_namespace(FIRECUDA, 0, SIZE), "id-ns")
    c = _collector(b)
    triggered = []
    c.ctx.slow.task("nvme_identify").trigger = lambda: triggered.append(True)
    c.ctx.scheduler.run_all_once()
    return b, c, triggered


def test_a_format_is_noticed_and_identify_read_again(tmp_path, caplog):
    b, c, triggered = _watched(tmp_path)
    s = _samples(c)
    assert _get(s, "storpath_nvme_namespace_best_lba_size_bytes", device="nvme0n1") == 4096
    assert not triggered, "no change, no Identify"

    # `nvme format --lbaf=1`: sysfs changes at once, the captured Identify data too.
    reformat(b, "nvme0", 4096)
    write_captured(b, "nvme0", 1, identify_namespace(FIRECUDA, 1, SIZE), "id-ns")
    with caplog.at_level(logging.INFO, logger="storpath"):
        s = _samples(c)
    assert triggered == [True]
    assert "reading Identify Namespace again" in caplog.text
    assert _get(s, "storpath_nvme_namespace_lba_size_bytes", device="nvme0n1") == 4096
    # The Identify data is from before the format: not served until read again.
    assert _get(s, "storpath_nvme_namespace_best_lba_size_bytes", device="nvme0n1") is None
    assert _get(s, "storpath_nvme_identify_available", controller="nvme0") is None
    _samples(c)
    assert triggered == [True], "triggered once per change, not on every scrape"

    c.ctx.scheduler.run_all_once()  # what the trigger makes the background task do
    s = _samples(c)
    assert _get(s, "storpath_nvme_namespace_lba_format_info", device="nvme0n1", index="1", data_size_bytes="4096",
                metadata_size_bytes="0", relative_performance="best", in_use="true") == 1
    assert _get(s, "storpath_nvme_identify_available", controller="nvme0") == 1


def test_a_new_namespace_triggers_identify(tmp_path):
    b, c, triggered = _watched(tmp_path, captured=False)
    _samples(c)
    assert not triggered
    b.root_port(b.host_bridge("0000:00"), "0000:00:01.5", speed=16.0, width=4)
    b.nvme("0000:00:01.5", "0000:05:00.0", model="M", serial="S", firmware="F", vendor=1, device=2, speed=16.0,
           width=4)
    _samples(c)
    assert triggered == [True]


def test_a_namespace_that_is_gone_and_back_triggers_identify(tmp_path):
    """A drive pulled and another put in its place can come back under the same names,
    size and LBA size: its new block device (a new class symlink) is what tells."""
    b, c, triggered = _watched(tmp_path)
    _samples(c)
    assert not triggered
    link = os.path.join(b.sys, "class", "block", "nvme0n1")
    os.symlink(os.readlink(link), link + ".new")
    os.replace(link + ".new", link)
    s = _samples(c)
    assert triggered == [True]
    # Until Identify was read for the new namespace, its formats are not claimed.
    assert _get(s, "storpath_nvme_namespace_best_lba_size_bytes", device="nvme0n1") is None
    c.ctx.scheduler.run_all_once()
    assert _get(_samples(c), "storpath_nvme_namespace_best_lba_size_bytes", device="nvme0n1") == 4096


def test_stale_identify_disagreeing_with_sysfs_is_left_out(tmp_path):
    """Identify says 4096 in use, sysfs says 512 (data from another format): formats left out."""
    b = _machine(tmp_path, drives=1)
    write_captured(b, "nvme0", 1, identify_namespace(FIRECUDA, 1, SIZE), "id-ns")
    c = _collector(b)
    c.ctx.scheduler.run_all_once()
    s = _samples(c)
    assert _get(s, "storpath_nvme_namespace_best_lba_size_bytes", device="nvme0n1") is None
    assert _get(s, "storpath_nvme_namespace_lba_size_bytes", device="nvme0n1") == 512


def test_no_nvme_at_all(tmp_path):
    b = MachineBuilder(str(tmp_path))
    c = _collector(b, captured=False)
    c.ctx.scheduler.run_all_once()
    assert all(not family.samples for family in collect(c))


def test_task_is_registered_with_the_configured_interval(tmp_path):
    b = _machine(tmp_path, drives=1)
    c = _collector(b, identify_interval=7200.0)
    assert c.ctx.scheduler.tasks["nvme-identify"].interval == 7200.0
    assert c.ctx.scheduler.tasks["nvme-identify"].jitter == 720.0


def test_first_scrape_waits_for_the_first_pass_when_serving(tmp_path):
    b = _machine(tmp_path, drives=1)
    write_captured(b, "nvme0", 1, identify_namespace(FIRECUDA, 0, SIZE), "id-ns")
    c = _collector(b)
    c.ctx.scheduler.start()
    try:
        s = _samples(c)
    finally:
        c.ctx.scheduler.stop()
    assert _get(s, "storpath_nvme_namespace_best_lba_size_bytes", device="nvme0n1") == 4096


def test_identify_never_runs_on_the_scrape_path(tmp_path, monkeypatch):
    b = _machine(tmp_path, drives=1)
    c = _collector(b, captured=False)
    import storpath.scrape.slow as module

    def slow(*args, **kwargs):
        raise AssertionError("Identify called from collect()")

    monkeypatch.setattr(module, "identify_namespace", slow)
    start = time.monotonic()
    _samples(c)
    assert time.monotonic() - start < 1


def test_exposition_passes_with_the_exporter_wrapper(tmp_path):
    b = _machine(tmp_path)
    write_captured(b, "nvme0", 1, identify_namespace(FIRECUDA, 0, SIZE), "id-ns")
    c = _collector(b)
    c.ctx.scheduler.run_all_once()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StorpathExporter([c]))
    text = generate_latest(registry).decode()
    assert 'storpath_scrape_collector_success{collector="nvme"} 1.0' in text
    assert text.count("# TYPE storpath_nvme_namespace_lba_format_info gauge") == 1
