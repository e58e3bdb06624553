"""storpath.runtime against prometheus_client's ProcessCollector, PlatformCollector and
GCCollector, whose families it replaces on the serve path; and the serve path without
prometheus_client."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from prometheus_client import GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.core import CollectorRegistry
from prometheus_client.exposition import generate_latest

from storpath import exposition, runtime
from tests.conftest import ROOT


def _reference():
    registry = CollectorRegistry(auto_describe=False)
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return list(registry.collect())


def _shape(family):
    return (family.name, family.type, family.documentation,
            [(sample.name, sorted(sample.labels.items()) if family.name == "python_info" else sorted(sample.labels))
             for sample in family.samples])


def test_same_families_types_help_and_labels_as_prometheus_client():
    ours = runtime.Runtime().collect()
    assert [_shape(f) for f in ours] == [_shape(f) for f in _reference()]
    assert len(ours) == 10


def test_values_match_prometheus_client():
    reference = {f.name: f.samples for f in _reference()}
    ours = {f.name: f.samples for f in runtime.Runtime().collect()}
    assert ours["process_start_time_seconds"][0].value == reference["process_start_time_seconds"][0].value
    assert ours["process_max_fds"][0].value == reference["process_max_fds"][0].value
    assert ours["python_info"] == reference["python_info"]
    rss = ours["process_resident_memory_bytes"][0].value
    assert abs(rss - reference["process_resident_memory_bytes"][0].value) < 0.2 * rss
    assert abs(ours["process_open_fds"][0].value - reference["process_open_fds"][0].value) <= 2
    assert ours["process_cpu_seconds"][0].value >= reference["process_cpu_seconds"][0].value - 0.05
    for name in ("python_gc_objects_uncollectable", "python_gc_collections"):
        assert [s.labels["generation"] for s in ours[name]] == ["0", "1", "2"]


def test_text_is_prometheus_clients_for_the_families_that_hold_still():
    """Start time, the file limit and python_info do not move between two calls: their
    text in both formats is byte for byte what prometheus_client writes."""
    still = ("process_start_time_seconds", "process_max_fds", "python_info")
    ours = [f for f in runtime.Runtime().collect() if f.name in still]
    theirs = [f for f in _reference() if f.name in still]
    assert exposition.generate(ours) == generate_latest(_Fixed(theirs))
    assert exposition.generate_openmetrics(ours) == exposition.generate_openmetrics(theirs)


class _Fixed:
    def __init__(self, families):
        self.families = families

    def collect(self):
        return self.families


def test_unreadable_proc_leaves_the_process_families_out(tmp_path):
    names = [f.name for f in runtime.Runtime(proc=str(tmp_path)).collect()]
    assert names == ["python_info", "python_gc_objects_collected", "python_gc_objects_uncollectable",
                     "python_gc_collections"]
    (tmp_path / "stat").write_text("cpu 1 2 3\nbtime 1700000000\n")
    names = [f.name for f in runtime.Runtime(proc=str(tmp_path)).collect()]
    assert names[0] == "python_info"


SERVE_PATH = """
import json, sys
from storpath import cli
from storpath.http import webconfig
from storpath.commands import serve
args = cli.build_parser().parse_args(["serve", "--path.sysfs", sys.argv[1], "--path.procfs", sys.argv[2]]
                                     + sys.argv[3:])
config = cli.resolve_config(args)
built = serve.Built(config)
serve._site(built, webconfig.load(config["web"]["config_file"]))
flight = built.scraper.scrape(10.0)
text, om = b"".join(flight.body(False, False)), b"".join(flight.body(True, True))
built.close(wait=0)
print(json.dumps({"imported": sorted(m for m in sys.modules if m.split(".")[0] == "prometheus_client"),
                  "process": b"process_open_fds " in text, "gc": b'python_gc_collections_total{generation="0"}' in text,
                  "storpath": b"storpath_build_info{" in text}))
"""


def _serve_once(root: str, *extra: str) -> dict:
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "exporter"))
    out = subprocess.run([sys.executable, "-c", SERVE_PATH, f"{root}/sys", f"{root}/proc", *extra], env=env,
                         capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout.splitlines()[-1])


def test_serve_path_does_not_import_prometheus_client(machine_tree):
    """storpath.runtime and storpath.exposition stand in for prometheus_client there."""
    root = machine_tree("am4-x570-firecuda", "healthy")
    assert _serve_once(root) == {"imported": [], "process": True, "gc": True, "storpath": True}
    assert _serve_once(root, "--web.disable-exporter-metrics") == {"imported": [], "process": False, "gc": False,
                                                                    "storpath": True}


def _open_fds(collector) -> float:
    (family,) = [f for f in collector.collect() if f.name == "process_open_fds"]
    return family.samples[0].value


def test_open_fds_follow_the_descriptors_opened_and_closed():
    collector = runtime.Runtime()
    before = _open_fds(collector)
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(50)]
    try:
        assert _open_fds(collector) == before + 50
    finally:
        for fd in held:
            os.close(fd)
    assert _open_fds(collector) == before


def test_open_fds_are_listed_where_the_directory_size_does_not_count_them(tmp_path):
    # Kernels before 6.2 (and any tree that is not procfs) give a size that is no count.
    (tmp_path / "stat").write_text("cpu 1 2 3\nbtime 1700000000\n")
    fd_dir = tmp_path / "self" / "fd"
    fd_dir.mkdir(parents=True)
    (tmp_path / "self" / "stat").write_text("1 (x) " + " ".join(["0"] * 50) + "\n")
    (tmp_path / "self" / "limits").write_text("Max open files            1024                 4096                 files\n")
    for fd in range(7):
        (fd_dir / str(fd)).write_text("")
    collector = runtime.Runtime(proc=str(tmp_path))
    assert _open_fds(collector) == 7
    (fd_dir / "7").write_text("")
    assert _open_fds(collector) == 8
