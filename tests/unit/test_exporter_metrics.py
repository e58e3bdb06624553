"""The exporter's own process_* and python_* metrics on the serve path (storpath.http.runtime):
the families prometheus_client's ProcessCollector, PlatformCollector and GCCollector give,
without prometheus_client on the serve path, written in both formats with the rest of the
body, and left out by --web.disable-exporter-metrics."""

from __future__ import annotations

import gzip
import os

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector, generate_latest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

from storpath import cli
from storpath.scrape import exposition
from storpath.commands import options
from storpath.commands import serve
from storpath.http import runtime

PROCESS_AND_PYTHON = {"process_virtual_memory_bytes", "process_resident_memory_bytes", "process_start_time_seconds",
                      "process_cpu_seconds", "process_open_fds", "process_max_fds", "python_info",
                      "python_gc_objects_collected", "python_gc_objects_uncollectable", "python_gc_collections"}


def _scrape(root: str, *extra: str):
    args = cli.build_parser().parse_args(["serve", "--path.sysfs", f"{root}/sys", "--path.procfs", f"{root}/proc",
                                          *extra])
    built = serve.Built(options.resolve_config(args))
    try:
        flight = built.scraper.scrape(10.0)
        assert flight.error is None
        return {(om, gz): b"".join(flight.chunks(om, gz)) for om in (False, True) for gz in (False, True)}
    finally:
        built.close(wait=0)


def test_served_in_both_formats_with_the_rest_of_the_body(machine_tree):
    bodies = _scrape(machine_tree("am4-x570-firecuda", "healthy"))
    text, om = bodies[False, False].decode(), bodies[True, False].decode()
    for openmetrics in (False, True):
        assert gzip.decompress(bodies[openmetrics, True]) == bodies[openmetrics, False]
    text_names = {f.name for f in parse_text(text)}
    om_names = {f.name for f in parse_openmetrics(om)}  # raises on a second `# EOF` or anything after it
    assert PROCESS_AND_PYTHON <= text_names and PROCESS_AND_PYTHON <= om_names
    assert "storpath_build_info" in text_names and "storpath_build_info" in om_names
    assert om.endswith("\n# EOF\n") and om.count("# EOF") == 1 and "# EOF" not in text
    assert "\nprocess_cpu_seconds_total " in text and "\nprocess_cpu_seconds_total " in om
    assert 'python_gc_collections_total{generation="0"} ' in text


def test_disable_exporter_metrics_leaves_them_out(machine_tree):
    bodies = _scrape(machine_tree("am4-x570-firecuda", "healthy"), "--web.disable-exporter-metrics")
    text, om = bodies[False, False].decode(), bodies[True, False].decode()
    for body in (text, om):
        assert "process_" not in body and "python_" not in body
        assert "storpath_build_info{" in body
    assert om.endswith("\n# EOF\n")


def _clients() -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    for collector in (ProcessCollector, PlatformCollector, GCCollector):
        collector(registry=registry)
    return registry


def test_the_families_of_prometheus_clients_collectors():
    """The same families in the same order, with the same help, type and label names; the
    families that do not move between two calls (start time, the file limit, python_info)
    byte for byte as prometheus_client's writer gives them from its own collectors."""
    ours = b"".join(exposition.pieces(runtime.Runtime().families())).decode()
    theirs = generate_latest(_clients()).decode()
    ours_parsed, theirs_parsed = list(parse_text(ours)), list(parse_text(theirs))
    assert [(f.name, f.type, f.documentation) for f in ours_parsed] == \
        [(f.name, f.type, f.documentation) for f in theirs_parsed]
    assert {f.name for f in ours_parsed} == PROCESS_AND_PYTHON
    for mine, client in zip(ours_parsed, theirs_parsed):
        assert [(s.name, sorted(s.labels)) for s in mine.samples] == \
            [(s.name, sorted(s.labels)) for s in client.samples], mine.name
    for still in ("process_start_time_seconds", "process_max_fds", "python_info"):
        mine = [line for line in ours.splitlines() if still in line]
        client = [line for line in theirs.splitlines() if still in line]
        assert mine == client and mine, still


def test_values_are_this_process(tmp_path):
    """Read from /proc/self: the CPU time and the descriptors are this process's own."""
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(20)]
    try:
        rows = runtime.Runtime().rows()
        open_fds = rows[runtime.OPEN_FDS].values[0]
        assert open_fds >= 20 + 3
        assert abs(open_fds - len(os.listdir("/proc/self/fd"))) <= 1
    finally:
        for fd in held:
            os.close(fd)
    cpu = rows[runtime.CPU_SECONDS].values[0]
    assert 0 < cpu <= os.times().user + os.times().system + 0.05
    assert rows[runtime.RESIDENT_MEMORY].values[0] > 1 << 20


def _proc(tmp_path, stat=None, limits=None, btime=True):
    proc = tmp_path / "proc"
    (proc / "self" / "fd").mkdir(parents=True)
    for name in ("0", "1", "2"):
        (proc / "self" / "fd" / name).write_text("")
    (proc / "stat").write_text("cpu  1 2 3\n" + ("btime 1700000000\n" if btime else ""))
    if stat is not None:
        (proc / "self" / "stat").write_bytes(stat)
    if limits is not None:
        (proc / "self" / "limits").write_text(limits)
    return str(proc)


LIMITS = ("Limit                     Soft Limit           Hard Limit           Units     \n"
          "Max open files            1024                 524288               files     \n")
# proc_pid_stat(5): a command name with spaces and parentheses, then the fields after it
# (utime 14 and stime 15, starttime 22, vsize 23, rss 24, counted from pid as 1).
STAT = b"4242 (a) (b c) S " + b" ".join(str(n).encode() for n in range(4, 45)) + b"\n"


def test_a_command_name_with_spaces_and_parentheses(tmp_path):
    rows = runtime.Runtime(_proc(tmp_path, STAT, LIMITS)).rows()
    ticks = os.sysconf("SC_CLK_TCK")
    assert rows[runtime.CPU_SECONDS].values == [(14 + 15) / ticks]
    assert rows[runtime.START_TIME].values == [22 / ticks + 1700000000]
    assert rows[runtime.VIRTUAL_MEMORY].values == [23.0]
    assert rows[runtime.RESIDENT_MEMORY].values == [24.0 * os.sysconf("SC_PAGE_SIZE")]
    assert rows[runtime.MAX_FDS].values == [1024.0] and rows[runtime.OPEN_FDS].values == [3]


def test_what_cannot_be_read_is_left_out_and_the_rest_served(tmp_path):
    """A stat cut short, limits without the line or "unlimited", no /proc at all: those
    families are left out of the text; python_info and the GC counts stay."""
    cases = {
        "short stat": (_proc(tmp_path / "a", b"4242 (x) S 1 2 3\n", LIMITS), {"process_cpu_seconds_total"}),
        "unlimited": (_proc(tmp_path / "b", STAT, LIMITS.replace("1024      ", "unlimited")), {"process_max_fds"}),
        "no limits": (_proc(tmp_path / "c", STAT), {"process_max_fds"}),
        "no /proc": (str(tmp_path / "nowhere"), {"process_cpu_seconds_total", "process_open_fds"}),
        "no btime": (_proc(tmp_path / "d", STAT, LIMITS, btime=False), {"process_resident_memory_bytes"}),
    }
    for case, (proc, missing) in cases.items():
        text = b"".join(exposition.pieces(runtime.Runtime(proc).families())).decode()
        for name in missing:
            assert name not in text, case
        assert 'python_info{implementation="' in text and "python_gc_collections_total" in text, case
        assert list(parse_text(text)), case
