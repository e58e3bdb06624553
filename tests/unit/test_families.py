"""The family tables and the framework that renders them: one place decides what text to
render again, keyed on the rows' values; docs/metrics.md follows the tables."""

import re

from prometheus_client import generate_latest
from prometheus_client.core import CollectorRegistry, CounterMetricFamily, GaugeMetricFamily

from storpath.report import metricsdoc
from storpath.scrape.exposition import pieces
from storpath.scrape.exposition import FamilyTexts
from storpath.scrape.families import COUNTER, GAUGE, Family, Rows

SPEED = Family("storpath_t_speed_transfers_per_second", GAUGE, "Speed.", ("address",), "transfers_per_second")
ERRORS = Family("storpath_t_errors", COUNTER, "Errors.", ("severity", "address"))
INFO = Family("storpath_t_info", GAUGE, "Info.", ("z", "a"))


def test_a_family_is_rendered_again_only_when_its_rows_change():
    texts = FamilyTexts((SPEED, ERRORS))
    first = texts.families(_rows({SPEED: [(("0000:01:00.0",), 8e9)], ERRORS: [(("fatal", "0000:01:00.0"), 1)]}))
    # Equal rows built from new objects: the text kept from the last call.
    address = "".join(["0000:01:00.", "0"])
    assert address is not "0000:01:00.0"  # noqa: F632 (a new object on purpose)
    again = texts.families(_rows({SPEED: [((address,), float("8e9"))], ERRORS: [(("fatal", address), 1)]}))
    assert [f.piece for f in again] == [f.piece for f in first]
    assert again[0].body is first[0].body and again[1].body is first[1].body
    # One value moves: that family's text follows, the other is kept.
    moved = texts.families(_rows({SPEED: [(("0000:01:00.0",), 8e9)], ERRORS: [(("fatal", "0000:01:00.0"), 2)]}))
    assert moved[0].body is first[0].body and moved[1].body is not first[1].body
    assert b'storpath_t_errors_total{address="0000:01:00.0",severity="fatal"} 2.0' in moved[1].piece


def test_a_label_that_moves_or_a_value_the_hash_cannot_tell_apart_renders_again():
    """What is kept of the last rows is their values and a hash of their labels: a label value
    that changes (the same values) is rendered again, and so are values whose hashes are equal
    (CPython hashes -1 and -2 alike, and a tuple of them alike too)."""
    texts = FamilyTexts((SPEED, INFO))
    first = texts.families(_rows({SPEED: [(("0000:01:00.0",), 8e9)], INFO: [(("x", "y"), -1)]}))
    renamed = texts.families(_rows({SPEED: [(("0000:02:00.0",), 8e9)], INFO: [(("x", "y"), -1)]}))
    assert renamed[0].body is not first[0].body and b'address="0000:02:00.0"' in renamed[0].body
    assert renamed[1].body is first[1].body
    assert hash((-1,)) == hash((-2,))
    moved = texts.families(_rows({SPEED: [(("0000:02:00.0",), 8e9)], INFO: [(("x", "y"), -2)]}))
    assert moved[1].body.endswith(b" -2.0\n")
    reordered = texts.families(_rows({SPEED: [(("0000:02:00.0",), 8e9)], INFO: [(("y", "x"), -2)]}))
    assert reordered[1].body == b'storpath_t_info{a="x",z="y"} -2.0\n'


def test_rows_without_a_value_are_left_out_and_families_without_samples_are_left_out_whole():
    """As node_exporter writes them: a family with no sample (no rows, or only rows whose
    value the kernel did not give) has no HELP or TYPE either; it comes back with its first
    sample."""
    texts = FamilyTexts((SPEED, ERRORS))
    (speed,) = texts.families(_rows({SPEED: [(("a",), None), (("b",), 2.5e9)]}))
    assert speed.piece.decode().splitlines()[2:] == ['storpath_t_speed_transfers_per_second{address="b"} 2.5e+09']
    assert texts.families(_rows({SPEED: [(("a",), None)]})) == []
    (errors,) = texts.families(_rows({ERRORS: [(("fatal", "x"), 1)]}))
    assert errors.piece.decode().startswith("# HELP storpath_t_errors_total Errors.\n# TYPE storpath_t_errors_total counter\n")


def test_a_family_outside_the_table_is_refused():
    try:
        FamilyTexts((SPEED,)).families(_rows({ERRORS: [(("fatal", "x"), 1)]}))
    except KeyError as exc:
        assert "storpath_t_errors" in str(exc)
    else:
        raise AssertionError("a family outside the table was accepted")


def test_the_text_is_what_prometheus_client_writes():
    rows = [(("x\\y", 'q"uote\n'), 1), (("b", ""), 0.000123), (("c", "d"), 123456789.0), (("e", "f"), float("inf")),
            (("g", "h"), -1)]
    texts = FamilyTexts((INFO, ERRORS))
    ours = b"".join(f.piece for f in texts.families(_rows({INFO: rows, ERRORS: [(("fatal", "0000:01:00.0"), 3)]})))
    ours = ours.decode()
    info = GaugeMetricFamily("storpath_t_info", "Info.", labels=["z", "a"])
    for labels, value in rows:
        info.add_metric(list(labels), value)
    errors = CounterMetricFamily("storpath_t_errors", "Errors.", labels=["severity", "address"])
    errors.add_metric(["fatal", "0000:01:00.0"], 3)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(type("C", (), {"collect": lambda self: [info, errors]})())
    assert ours == generate_latest(registry).decode()
    assert b"".join(pieces([info, errors])).decode() == ours


_NAME = re.compile(r"^storpath_[a-z0-9_]+$")
_LABEL = re.compile(r"^[a-z_][a-z0-9_]*$")


def test_every_family_is_declared_once_and_named_by_the_conventions():
    seen = {}
    for collector, families in metricsdoc.tables().items():
        for family in families:
            assert family.name not in seen, f"{family.name} declared by {seen.get(family.name)} and {collector}"
            seen[family.name] = collector
            assert _NAME.match(family.name) and not family.name.endswith("_total"), family.name
            assert all(_LABEL.match(label) for label in family.labels), family.name
            assert len(set(family.labels)) == len(family.labels), family.name
            if family.unit:
                assert family.name.endswith("_" + family.unit), f"{family.name}: unit {family.unit}"
            assert family.help.endswith("."), f"{family.name}: HELP is a sentence"


# The last word of a name is a base unit (Prometheus's naming: seconds, bytes, ratios...), a
# per-second rate of one, or no unit at all (a count, a state, an _info).
BASE_UNITS = {"seconds", "bytes", "ratio", "celsius", "bytes_per_second", "transfers_per_second",
              "bits_per_second", "operations_per_second"}
# Not base units: none left (storpath_md_mismatch_sectors became storpath_md_mismatch_bytes).
HAND_WRITTEN_UNITS: set = set()


def test_no_hand_written_units():
    for families in metricsdoc.tables().values():
        for family in families:
            if family.name in HAND_WRITTEN_UNITS:
                continue
            for word in ("iops", "sectors", "blocks", "kib", "mib", "gib", "kb", "mb", "gb", "percent", "ms",
                         "minutes", "hours", "days", "gbps", "mbps", "gts"):
                assert not re.search(rf"_{word}(_|$)", family.name), f"{family.name}: `{word}` is not a base unit"
            if family.unit:
                assert family.unit in BASE_UNITS, f"{family.name}: unit {family.unit}"


# Labels the scrape side puts on every series: Prometheus's own (job, instance), the ones
# prometheus-operator's monitors and kube-prometheus-stack's relabelling add (node, namespace,
# pod, service, container, endpoint), and those sites commonly add (cluster, host, region). A
# series that carries one of them itself has it renamed exported_<label> on the way in (or
# overwrites the target's with honor_labels), and every join on it breaks.
TARGET_LABELS = {"job", "instance", "node", "namespace", "pod", "service", "container", "endpoint", "cluster",
                 "host", "region"}


def test_no_family_has_a_label_the_scrape_sets():
    for families in metricsdoc.tables().values():
        for family in families:
            assert not TARGET_LABELS & set(family.labels), f"{family.name}: {TARGET_LABELS & set(family.labels)}"


def test_docs_metrics_md_is_generated_from_the_tables():
    with open(metricsdoc.TEMPLATE, encoding="utf-8") as handle:
        expected = metricsdoc.render(handle.read())
    with open(metricsdoc.OUTPUT, encoding="utf-8") as handle:
        assert handle.read() == expected, "docs/metrics.md is out of date: run `python -m storpath.report.metricsdoc`"


def test_a_collector_without_a_place_in_the_docs_is_refused():
    try:
        metricsdoc.render("{{families pcie}}\n", {"pcie": (SPEED,), "newcomer": (ERRORS,)})
    except ValueError as exc:
        assert "newcomer" in str(exc)
    else:
        raise AssertionError("a collector missing from docs/metrics.in.md went unnoticed")


def _rows(values):
    rows = Rows()
    for family, series in values.items():
        for labels, value in series:
            rows.add(family, labels, value)
    return rows
