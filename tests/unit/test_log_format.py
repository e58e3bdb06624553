"""Log lines carry values from the hardware: each stays on its line, shows control
characters and bytes that are not UTF-8 escaped, and the JSON format stays valid UTF-8."""

from __future__ import annotations

import io
import json
import logging

import pytest

from storpath.base import log

HOSTILE = {
    "model": "Samsung\x1b]0;owned\x07 SSD\r\nlevel=error msg=forged",
    "member": "dev-sdh\udcff",
    "slot": "\u202eslot 3",
    "csi": "x\x9b2J",
}


def _line(fmt: str) -> str:
    stream = io.StringIO()
    log.setup("info", stream=stream, fmt=fmt)
    try:
        log.kv(log.get("test"), logging.WARNING, "bad value\x1b[2J", **HOSTILE)
    finally:
        log.setup("info")
    return stream.getvalue()


@pytest.mark.parametrize("fmt", ["logfmt", "json"])
def test_hardware_values_stay_on_one_line_and_encode(fmt):
    text = _line(fmt)
    assert text.count("\n") == 1 and text.endswith("\n")
    line = text[:-1]
    line.encode("utf-8")  # no lone surrogate left
    assert not any(ord(c) < 0x20 or 0x7f <= ord(c) < 0xa0 for c in line), repr(line)
    assert "\u202e" not in line


def test_logfmt_shows_the_escapes():
    line = _line("logfmt")
    assert 'member="dev-sdh\\xff"' in line
    assert "\\x1b]0;owned\\x07" in line
    assert "level=error msg=forged" not in line.split(" model=")[0]


def test_json_keeps_the_values_readable():
    data = json.loads(_line("json"))
    assert data["member"] == "dev-sdh\\xff"
    assert data["model"] == HOSTILE["model"]  # JSON escapes the controls itself
    assert data["msg"] == "bad value\x1b[2J"
