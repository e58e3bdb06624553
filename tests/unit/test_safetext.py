"""storpath.base.safetext: a name's byte that is not UTF-8 shown as \\xNN, controls escaped for
people, printable text of any script left alone."""

from __future__ import annotations

import json
import os

import pytest

from storpath.base import safetext


def test_a_byte_that_is_not_utf8_is_shown_as_that_byte():
    name = os.fsdecode(b"dev-sdh\xff")  # as os.listdir gives it: "dev-sdh\udcff"
    assert safetext.utf8(name) == "dev-sdh\\xff" == safetext.display(name)
    assert safetext.utf8(name).encode("utf-8") == b"dev-sdh\\xff"
    assert safetext.utf8("\ud800x") == "\\ud800x"  # a lone surrogate from elsewhere (JSON) stays visible


def test_utf8_leaves_valid_text_alone_controls_included():
    """Labels and JSON escape controls their own way (\\n, \\u001b): utf8 keeps them for that."""
    for text in ("nvme0n1", "Überspeicher 7,68 TB", "a\x1b[2Jb\r\n", "\u202e"):
        assert safetext.utf8(text) is text


@pytest.mark.parametrize("raw,shown", [
    ("\x1b]0;title\x07", "\\x1b]0;title\\x07"),  # OSC 0 ended by BEL: sets the window title
    ("\x1b[2J", "\\x1b[2J"),  # CSI: clears the screen
    ("a\rb\nc\td", "a\\x0db\\x0ac\\x09d"),  # one value, one line
    ("\x9b31m", "\\x9b31m"),  # C1 CSI
    ("\x7f", "\\x7f"),
    ("abc\u202edef", "abc\\u202edef"),  # RIGHT-TO-LEFT OVERRIDE
    ("x\u2066y\u2069", "x\\u2066y\\u2069"),  # bidi isolates
    ("line\u2028sep", "line\\u2028sep"),
    ("zero\u200bwidth", "zero\\u200bwidth"),
    ("tag\U000e0041", "tag\\U000e0041"),  # a tag character (format, invisible)
])
def test_display_escapes_what_a_terminal_would_act_on(raw, shown):
    assert safetext.display(raw) == shown
    assert safetext.display(raw).isprintable()


@pytest.mark.parametrize("text", ["Seagate FireCuda 530 ZP2000GM30023", "70 °C", "Überspeicher", "固态硬盘", "a…b"])
def test_display_leaves_printable_text_alone(text):
    assert safetext.display(text) is text


def test_utf8_data_for_json():
    data = {"sdh\udcff": ["sdh\udcff", 1, None, ("x", 2.5)], "n": {"k": "a\x1b"}}
    out = safetext.utf8_data(data)
    assert out == {"sdh\\xff": ["sdh\\xff", 1, None, ["x", 2.5]], "n": {"k": "a\x1b"}}
    assert "\\udc" not in json.dumps(out)
