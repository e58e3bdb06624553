"""storpath.base.boundedjson: JSON from commands and files refused before json.loads when it is
too long or nested too deep, with a ValueError as any other text that is not JSON."""

from __future__ import annotations

import json
import time

import pytest

from storpath.base import boundedjson
from storpath.scrape.probes import fio, state
from storpath.readers.nvme import IdentifyError, parse_id_ns_json
from storpath.readers.zfs import ZpoolOutputError, parse_status_json

DEEP = '{"pools": ' + '{"a": ' * 5000 + "{}" + "}" * 5000 + "}"


@pytest.mark.parametrize("text,depth", [
    ("{}", 1), ("[]", 1), ("3", 0), ('{"a": [1, {"b": []}]}', 4),
    ('{"x": "[[[[{{{{"}', 1),  # brackets inside strings do not count
    ('{"x": "a\\"[[[[\\\\"}', 1),  # nor after an escaped quote; an escaped backslash ends the escape
    ('["unterminated [[[[', 1),
])
def test_depth(text, depth):
    assert boundedjson.depth(text) == depth


def test_a_document_nested_5000_deep_is_refused_before_json_loads():
    with pytest.raises(RecursionError):
        json.loads(DEEP)  # what every parser met before
    with pytest.raises(boundedjson.JsonBoundsError, match="nested deeper than 64 levels"):
        boundedjson.loads(DEEP)
    assert boundedjson.loads('{"a": ' * 64 + "1" + "}" * 64) is not None  # the bound itself is allowed


def test_a_document_over_the_size_bound_is_refused():
    with pytest.raises(boundedjson.JsonBoundsError, match="more than the 100 allowed"):
        boundedjson.loads("[" + "1," * 60 + "1]", max_chars=100)


def test_not_json_is_still_a_value_error():
    with pytest.raises(ValueError):
        boundedjson.loads("{")


def test_the_pass_is_linear_on_unterminated_strings_and_escapes():
    for text in ('"\\"' * 300_000, '["\\' * 300_000, '"' + "x" * 1_000_000):
        start = time.monotonic()
        boundedjson.depth(text)
        assert time.monotonic() - start < 5  # quadratic would take hours


@pytest.mark.parametrize("parse,error", [
    (parse_status_json, ZpoolOutputError),
    (parse_id_ns_json, IdentifyError),
    (fio.parse_output, fio.FioError),
    (state.from_json, ValueError),
])
def test_every_json_parser_refuses_the_deep_document_with_its_own_error(parse, error):
    with pytest.raises(error, match="nested deeper than 64 levels"):
        parse(DEEP)
