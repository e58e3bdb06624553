"""Link changes counted from the kernel's pcie_link_event tracepoint (readers.link_events,
scrape.slow.LinkChanges with `link_change_source: tracepoint`), and the fall back to the
sampler where tracefs cannot be read.

The trace_pipe lines below are written in the kernel's documented output: ftrace's prefix
(task-pid, [cpu], flags, timestamp: Documentation/trace/ftrace.rst) then the event's name and
its TP_printk (include/trace/events/pci.h, Linux 7.0):
"%s type:%d, reason:%d, cur_bus_speed:%d, max_bus_speed:%d, width:%u, flit_mode:%u, status:%s".
Speeds are enum pci_bus_speed numbers (include/linux/pci.h: 0x14 = 20 is 2.5 GT/s, 0x17 = 23 is
16 GT/s), reasons enum pcie_link_change_reason (drivers/pci/pci.h: 0 retrain, 3 bwctrl_irq)."""

import os

from storpath.analysis.observed import EventCounter
from storpath.base.background import Scheduler
from storpath.base.roots import Roots
from storpath.collectors.base import Context
from storpath.collectors.pcie import LINK_CHANGE_CAUSES, LINK_CHANGES, LINK_CHANGES_SOURCE, PcieCollector
from storpath.readers.link_events import MAX_LINE, TracePipe, parse_event
from storpath.scrape.slow import LinkChanges
from tests.fixtures.sysfs_builder import MachineBuilder
from tests.snapshots import snapshot_for

PORT = "0000:00:01.0"
NVME = "0000:01:00.0"
AUDIO_PORT = "0000:00:02.0"
AUDIO = "0000:02:00.0"


def event(port=PORT, reason=3, speed=20, width=1, when="512.301245"):
    return (f"  irq/27-bwctrl-143     [003] d..1.   {when}: pcie_link_event: {port} type:4, reason:{reason}, "
            f"cur_bus_speed:{speed}, max_bus_speed:23, width:{width}, flit_mode:0, status:DLLLA\n")


def _machine(tmp_path, enabled="1", event_in_kernel=True, instance=True):
    b = MachineBuilder(str(tmp_path))
    host = b.host_bridge("0000:00")
    b.root_port(host, PORT, speed=16.0, width=4, vendor=0x8086, device=0x460d)
    b.pci(PORT, NVME, class_code=0x010802, vendor=0x144d, device=0xa80a, max_speed=16.0, max_width=4,
          cur_speed=16.0, cur_width=4, driver="nvme")
    b.root_port(host, AUDIO_PORT, speed=8.0, width=1, vendor=0x8086, device=0x460e)
    b.pci(AUDIO_PORT, AUDIO, class_code=0x040300, vendor=0x8086, device=0x1234, max_speed=8.0, max_width=1,
          cur_speed=8.0, cur_width=1, driver="snd_hda_intel")
    b.finish()
    tracing = os.path.join(b.sys, "kernel", "tracing")
    if event_in_kernel:
        os.makedirs(os.path.join(tracing, "events/pci/pcie_link_event"))
    if instance:
        where = os.path.join(tracing, "instances/storpath")
        os.makedirs(os.path.join(where, "events/pci/pcie_link_event"))
        with open(os.path.join(where, "events/pci/pcie_link_event/enable"), "w") as f:
            f.write(enabled + "\n")
        open(os.path.join(where, "trace_pipe"), "w").close()
    return b


def _pipe(b):
    return os.path.join(b.sys, "kernel/tracing/instances/storpath/trace_pipe")


def _emit(b, *lines):
    with open(_pipe(b), "a") as f:
        f.write("".join(lines))


def _collector(b, **config):
    settings = dict(PcieCollector.config_defaults, **config)
    return PcieCollector(Context(roots=Roots(sysfs=b.sys, procfs=b.proc, dev=""), config=settings,
                                 scheduler=Scheduler()))


def _tracepoint_source(b, **config):
    """The pcie_link_changes source reading the tracepoint, told of the machine's functions by a
    scrape: (the source, the scrape's PCI tree)."""
    slow = LinkChanges(Roots(sysfs=b.sys, procfs=b.proc, dev=""),
                       dict(PcieCollector.config_defaults, link_change_source="tracepoint", **config))
    devices = snapshot_for(_collector(b)).pci
    slow.scraped(devices)
    return slow, devices


def _series(collector, family):
    rows = collector.values(snapshot_for(collector))
    series = rows.get(family)
    return dict(zip(series.labels, series.values)) if series else {}


def test_a_flap_between_scrapes_is_counted_from_the_tracepoint_with_its_cause(tmp_path):
    b = _machine(tmp_path)
    collector = _collector(b, link_change_source="tracepoint")
    assert _series(collector, LINK_CHANGES) == {(NVME,): 0}
    assert _series(collector, LINK_CHANGES_SOURCE) == {("tracepoint",): 1}
    # the link drops to 2.5 GT/s x1 (the bandwidth controller's interrupt), is retrained, and
    # the kernel repeats the state it is in (no change); the sysfs gauges never move
    _emit(b, event(reason=3, speed=20, width=1), event(reason=0, speed=23, width=4, when="512.402001"),
          event(reason=3, speed=23, width=4, when="512.402100"))
    collector.ctx.scheduler.run_all_once()
    assert _series(collector, LINK_CHANGES) == {(NVME,): 2}
    assert _series(collector, LINK_CHANGE_CAUSES) == {(NVME, "bwctrl_irq"): 1, (NVME, "retrain"): 1}


def test_the_tracepoint_pass_samples_no_link(tmp_path):
    b = _machine(tmp_path)
    slow, devices = _tracepoint_source(b)
    slow.read(None, devices)
    b.set_link(NVME, cur_speed=2.5, cur_width=1)  # a sampler would count this; no event says it
    record, _ = slow.read(None, devices)
    assert slow._paths == {} and record.counts == {NVME: 0}


def test_events_of_other_ports_and_malformed_lines_are_skipped_with_a_message(tmp_path):
    b = _machine(tmp_path)
    slow, devices = _tracepoint_source(b)
    _emit(b, event(port=AUDIO_PORT, speed=20),  # the audio function is not watched
          "  kworker/0:1-12 [000] ..... 9.1: pcie_link_event: 0000:00:01.0 type:4, reason:x\n",
          "garbage without an event\n", event(speed=22, width=4))
    record, problems = slow.read(None, devices)
    assert record.counts == {NVME: 1} and record.causes == {(NVME, "bwctrl_irq"): 1}
    assert [dict(p.fields).get("lines") for p in problems] == [2]
    assert "not pcie_link_event events" in problems[0].message


def test_a_burst_is_read_in_bounded_passes_and_an_endless_line_is_dropped(tmp_path):
    b = _machine(tmp_path)
    slow, devices = _tracepoint_source(b, link_trace_max_bytes=8192)
    flaps = [event(speed=20 if i % 2 == 0 else 23, width=1 if i % 2 == 0 else 4, when=f"{600 + i}.000001")
             for i in range(2000)]
    _emit(b, "x" * 200_000, "\n", *flaps)  # a line with no end in sight, then 2000 changes (~300 KB)
    passes = 0
    record, problems = slow.read(None, devices)
    while any("more link events are waiting" in p.message for p in problems):
        assert len(slow._pipe._partial) <= MAX_LINE  # what waits between passes stays small
        passes += 1
        record, problems = slow.read(None, devices)
    assert passes >= 30  # 8 KB a pass
    assert record.counts == {NVME: 2000}


def test_without_a_readable_tracepoint_the_links_are_sampled_and_it_says_why(tmp_path):
    for kwargs, why in (({"event_in_kernel": False}, "no pcie_link_event tracepoint"),
                        ({"instance": False}, "no tracefs instance"),
                        ({"enabled": "0"}, "is not enabled")):
        b = _machine(tmp_path / why.replace(" ", "-"), **kwargs)
        collector = _collector(b, link_change_source="auto")
        assert _series(collector, LINK_CHANGES_SOURCE) == {("sampler",): 1}
        slow = LinkChanges(Roots(sysfs=b.sys, procfs=b.proc, dev=""),
                           dict(PcieCollector.config_defaults, link_change_source="auto"))
        devices = snapshot_for(collector).pci
        slow.scraped(devices)
        _, problems = slow.read(None, devices)
        assert why in dict(problems[0].fields)["why"], problems
        collector.ctx.scheduler.run_all_once()  # the sampler counts a flap
        b.set_link(NVME, cur_speed=2.5, cur_width=1)
        collector.ctx.scheduler.run_all_once()
        assert _series(collector, LINK_CHANGES) == {(NVME,): 1}
    b = _machine(tmp_path / "no-tracefs", event_in_kernel=False, instance=False)
    slow = LinkChanges(Roots(sysfs=b.sys, procfs=b.proc, dev="", tracefs=str(tmp_path / "absent")),
                       dict(PcieCollector.config_defaults, link_change_source="tracepoint"))
    assert slow.source == "sampler"
    assert "no tracefs at" in dict(slow.read(None, [])[1][0].fields)["why"]


def test_the_sampler_is_the_default_and_a_bad_source_is_said(tmp_path):
    b = _machine(tmp_path)
    assert _series(_collector(b), LINK_CHANGES_SOURCE) == {("sampler",): 1}
    assert _series(_collector(b, link_sample_classes=[]), LINK_CHANGES_SOURCE) == {("none",): 1}
    slow = LinkChanges(Roots(sysfs=b.sys, procfs=b.proc, dev=""),
                       dict(PcieCollector.config_defaults, link_change_source="ftrace"))
    assert slow.source == "sampler"
    assert "is not one of sampler, tracepoint, auto" in slow.read(None, [])[1][0].message


def test_the_kernels_format_parses_and_unknown_values_stay_bounded():
    parsed = parse_event(event(reason=0, speed=25, width=16))
    assert (parsed.port, parsed.cause, parsed.speed, parsed.width) == (PORT, "retrain", 64e9, 16)
    assert parse_event(event(reason=9, speed=255, width=0)).cause == "other"  # a reason newer than storpath
    assert parse_event(event(speed=255)).speed is None  # PCI_SPEED_UNKNOWN: link down
    assert parse_event("pcie_link_event: " + "0" * 600) is None
    counter = EventCounter()
    assert counter.counts() == {}


def test_an_unreadable_pipe_falls_back_to_sampling(tmp_path):
    b = _machine(tmp_path)
    slow, devices = _tracepoint_source(b)
    os.remove(_pipe(b))  # the instance removed while serving
    record, problems = slow.read(None, devices)
    assert slow.source == "sampler" and record.source == "sampler"
    assert "reading the pcie_link_event tracepoint failed" in problems[0].message
    slow.scraped(devices)
    assert slow._paths  # the next passes sample
    assert isinstance(TracePipe(_pipe(b)), TracePipe)


def test_the_scrape_never_reads_the_pipe(tmp_path):
    b = _machine(tmp_path)
    collector = _collector(b, link_change_source="tracepoint")
    _emit(b, event(speed=20, width=1))
    for _ in range(3):  # scrapes only: the events wait for the background pass
        assert _series(collector, LINK_CHANGES) == {(NVME,): 0}
    collector.ctx.scheduler.run_all_once()
    assert _series(collector, LINK_CHANGES) == {(NVME,): 1}


def test_path_tracefs_flag_and_its_default(tmp_path):
    from storpath.commands.options import common_parser, resolve_config, roots_from

    given = roots_from(resolve_config(common_parser().parse_args(
        ["--path.sysfs", str(tmp_path / "sys"), "--path.tracefs", str(tmp_path / "tracing")])))
    assert given.tracing() == str(tmp_path / "tracing")
    default = roots_from(resolve_config(common_parser().parse_args(["--path.sysfs", str(tmp_path / "sys")])))
    assert default.tracing() == str(tmp_path / "sys" / "kernel" / "tracing")


def test_the_kernel_documentations_own_example_line():
    """Documentation/trace/events-pci.rst (Linux 7.0), pcie_link_event's example: a hotplugged
    device's link up at 2.5 GT/s x1 below a Gen4 root port (cur_bus_speed 20, enum pci_bus_speed
    PCIE_SPEED_2_5GT; max_bus_speed 23, PCIE_SPEED_16_0GT; reason 4, hotplug)."""
    from storpath.readers.link_events import LinkEvent, parse_event

    line = ("       irq/51-pciehp-88      [001] .....   381.545386: pcie_link_event: 0000:00:02.0 type:4, "
            "reason:4, cur_bus_speed:20, max_bus_speed:23, width:1, flit_mode:0, status:DLLLA\n")
    assert parse_event(line) == LinkEvent("0000:00:02.0", "hotplug", 2.5e9, 1)
