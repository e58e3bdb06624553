"""The exporter's own process_* and python_* metrics on the serve path: prometheus_client's
ProcessCollector, PlatformCollector and GCCollector, written by storpath's writer in both
formats with the rest of the body, and left out by --web.disable-exporter-metrics."""

from __future__ import annotations

import gzip

from prometheus_client import generate_latest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

from storpath import cli
from storpath.scrape import exposition
from storpath.commands import options
from storpath.commands import serve
from storpath.http.server import exporter_metrics

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


def test_text_is_prometheus_clients_for_the_families_that_hold_still():
    """Start time, the file limit and python_info do not move between two calls: storpath's
    writer gives them byte for byte what prometheus_client's writer gives."""
    still = ("process_start_time_seconds", "process_max_fds", "python_info")
    registry = exporter_metrics()
    families = [f for f in registry.collect() if f.name in still]
    assert [f.name for f in families] == list(still)
    assert b"".join(exposition.pieces(families)) == generate_latest(_Fixed(families))


class _Fixed:
    def __init__(self, families):
        self.families = families

    def collect(self):
        return self.families


def test_a_registry_of_their_own():
    """Not the global registry: building a second set (a reload) must not fail on duplicates."""
    first, second = exporter_metrics(), exporter_metrics()
    assert {f.name for f in first.collect()} == {f.name for f in second.collect()} == PROCESS_AND_PYTHON
